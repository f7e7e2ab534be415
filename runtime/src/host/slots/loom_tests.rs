//! Loom model of the pipeline slots' reservation: the real [`SlotTable`], reserved, launched
//! and released by several hosts at once.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std --lib host::slots::loom_tests
//! ```
//!
//! Every model is one `#[test]` whose doc comment states the invariant it checks; each prints
//! its execution count and wall time. What loom does not cover: see `crate::loom_support`.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use crate::host::slots::{Refused, SlotTable};
use crate::loom_support::harness::{Tally, check};
use crate::loom_support::jobs::{Job, ORDERS_3, job, run_jobs};
use crate::loom_support::prelude::*;

// ---------------------------------------------------------------------------------------------
// 2. Slot reservation
// ---------------------------------------------------------------------------------------------

/// Slot table, both slots free: two hosts reserve at once. Invariant: exactly one gets a slot
/// (slot 0) and the other is refused with `PredecessorNotLaunched` (the winner has not been
/// launched) — never the same slot twice, never two unlaunched reservations.
#[test]
fn slots_concurrent_reserve_is_exclusive() {
    check("slots_concurrent_reserve_is_exclusive", None, || {
        let t = Arc::new(SlotTable::new());
        let (t1, t2) = (t.clone(), t.clone());
        let mut r = run_jobs(&[0, 1], vec![job(move || t1.reserve()), job(move || t2.reserve())]);
        let mut results = [r.take::<Result<usize, Refused>>(0), r.take::<Result<usize, Refused>>(1)];
        results.sort_by_key(|r| r.is_err());
        assert_eq!(
            results,
            [Ok(0), Err(Refused::PredecessorNotLaunched)],
            "same slot twice, or two unlaunched reservations"
        );
        assert_eq!(t.live(), 1);
    });
}

/// Slot table with slot 0 reserved (prepared): one host marks it launched while two others
/// try to reserve a successor; the launcher spawned first, second and last. Invariant: at most
/// one successor is granted, it is slot 1, and only after `launched(0)` (the grant
/// happens-after the launch); the losers see `Full` or `PredecessorNotLaunched`; the table ends
/// with `1 + granted` live slots. Reached: "granted" and "refused".
#[test]
fn slots_successor_only_behind_a_launched_run() {
    let outcomes = Tally::new(2);
    for order in [&[0usize, 1, 2][..], &[1, 0, 2], &[1, 2, 0]] {
        let tally = outcomes.clone();
        check("slots_successor_only_behind_a_launched_run", None, move || {
            let t = Arc::new(SlotTable::new());
            assert_eq!(t.reserve(), Ok(0));
            let launching = Arc::new(AtomicBool::new(false));
            let mut jobs = vec![{
                let (t, launching) = (t.clone(), launching.clone());
                job(move || {
                    launching.store(true, Ordering::Relaxed);
                    t.launched(0);
                })
            }];
            for _ in 0..2 {
                let (t, launching) = (t.clone(), launching.clone());
                jobs.push(job(move || {
                    let r = t.reserve();
                    if let Ok(s) = r {
                        assert_eq!(s, 1, "successor granted the predecessor's slot");
                        // The grant read the word `launched(0)` wrote (acquire), so the flag
                        // stored before it must be visible even to a relaxed load.
                        assert!(launching.load(Ordering::Relaxed), "successor granted before the launch");
                    }
                    r
                }));
            }
            let mut r = run_jobs(order, jobs);
            let results = [r.take::<Result<usize, Refused>>(1), r.take::<Result<usize, Refused>>(2)];
            let granted = results.iter().filter(|r| r.is_ok()).count();
            assert!(granted <= 1, "two successors granted: {results:?}");
            for r in results.iter().filter(|r| r.is_err()) {
                assert!(matches!(r, Err(Refused::Full | Refused::PredecessorNotLaunched)));
            }
            assert_eq!(t.live(), 1 + granted);
            tally.hit(granted);
        });
    }
    outcomes.assert_all_reached(&["no successor granted", "one successor granted"]);
}

/// Slot table with slot 0 launched and slot 1 prepared: concurrently, one host releases
/// slot 0, another marks slot 1 launched, a third reserves; every spawn order. Invariant: the
/// reservation gets `Full` (before the release), `PredecessorNotLaunched` (after it, before the
/// launch of 1) or slot 0 — never slot 1, which stays live; a release frees exactly its slot
/// and the launch transition is never lost (afterwards slot 1 is launched: with slot 0 free
/// again, a new reservation takes slot 0 at once). Reached: all three outcomes.
#[test]
fn slots_release_frees_exactly_the_released_slot() {
    let outcomes = Tally::new(3);
    for order in ORDERS_3 {
        let tally = outcomes.clone();
        check("slots_release_frees_exactly_the_released_slot", None, move || {
            let t = Arc::new(SlotTable::new());
            assert_eq!(t.reserve(), Ok(0));
            t.launched(0);
            assert_eq!(t.reserve(), Ok(1));
            let (t0, t1, t2) = (t.clone(), t.clone(), t.clone());
            let mut r = run_jobs(
                order,
                vec![job(move || t0.release(0)), job(move || t1.launched(1)), job(move || t2.reserve())],
            );
            match r.take::<Result<usize, Refused>>(2) {
                Err(Refused::Full) => tally.hit(0),
                Err(Refused::PredecessorNotLaunched) => tally.hit(1),
                Ok(0) => {
                    tally.hit(2);
                    assert_eq!(t.live(), 2);
                    t.release(0);
                }
                Ok(s) => panic!("reserved slot {s}, which was never released"),
            }
            assert_eq!(t.live(), 1, "slot 1 must still be live");
            assert_eq!(t.reserve(), Ok(0), "slot 1's launch was lost or slot 0 not freed");
            t.release(0);
            t.release(1);
            assert_eq!(t.live(), 0);
        });
    }
    outcomes.assert_all_reached(&["Full", "PredecessorNotLaunched", "slot 0 granted"]);
}

/// Two hosts each run one full pipeline cycle: reserve (retrying while refused), prepare,
/// launch, complete, release. Invariant: a slot is never held by two runs at once (a per-slot
/// owner flag), and a run is granted a slot only while the other live run (if any) has been
/// launched: a grant never finds the other host between its own grant and the start of its
/// launch. Both hosts finish (no lost release) and the table ends empty. (More than two live
/// runs is unrepresentable: two slots; `Full` is checked by the models above.)
#[test]
fn slots_two_hosts_pipeline_cycle() {
    check("slots_two_hosts_pipeline_cycle", None, || {
        let t = Arc::new(SlotTable::new());
        // Per slot: a run holds it (set after the grant, cleared before the release).
        let owner: Arc<[AtomicBool; 2]> = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        // Per host: true between its grant and the start of its launch.
        let unlaunched: Arc<[AtomicBool; 2]> = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
        let hosts: Vec<Job> = (0..2)
            .map(|me| {
                let (t, owner, unlaunched) = (t.clone(), owner.clone(), unlaunched.clone());
                job(move || {
                    let s = loop {
                        match t.reserve() {
                            Ok(s) => break s,
                            Err(_) => thread::yield_now(),
                        }
                    };
                    assert!(!owner[s].swap(true, Ordering::SeqCst), "slot {s} granted twice");
                    assert!(
                        !unlaunched[1 - me].load(Ordering::SeqCst),
                        "granted a second slot while the other run was not launched"
                    );
                    unlaunched[me].store(true, Ordering::SeqCst);
                    // … prepare the run in slot `s`, then launch it.
                    unlaunched[me].store(false, Ordering::SeqCst);
                    t.launched(s);
                    // … its completion fence passed: free the slot.
                    owner[s].store(false, Ordering::SeqCst);
                    t.release(s);
                })
            })
            .collect();
        run_jobs(&[0, 1], hosts);
        assert_eq!(t.live(), 0);
    });
}
