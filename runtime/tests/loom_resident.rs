//! Loom models of the resident executor's scheduler state: the ready lists (`take` / `push`)
//! and the fan-in release (`release_consumer`), the runtime's own functions from
//! `pto_runtime::exec::resident`, over the loom device of [`loom_hal`] (every state word a loom
//! atomic, as `GmAtomic` defines it).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std,breakage --test loom_resident
//! ```
//!
//! Without `--cfg loom` this file compiles to nothing. Every model is one `#[test]` whose doc
//! comment states the invariant it checks; each prints its execution count and wall time.
//!
//! Not modelled here: the cores' reads of the image and the kernels (plain data, covered by the
//! simulator's faithful cache model in `tests/coherence.rs` and `tests/resident.rs`), and the
//! teardown, which is the legacy executor's own (`tests/loom.rs`).
//!
//! **Reproducers** run a model with one change through the `breakage` switch (process-wide, so
//! the tests of this file run under one lock): a taker that does not wait for a reserved entry
//! to be written (`RESIDENT_TAKE_UNPUBLISHED`), and a fan-in decrement split into a load and a
//! store (`RESIDENT_RELEASE_SPLIT`).
#![cfg(loom)]

#[allow(dead_code)]
mod loom_hal;

mod loom_harness;

use std::sync::{Mutex, MutexGuard};

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_hal::{Device, GM_BASE, GmPlan, LoomCore, RegOrder};
#[cfg(feature = "breakage")]
use loom_harness::expect_found;
use loom_harness::{Tally, check};
use pto_hal::{Barriers, GmAddr, GmAtomic, GmMemoryExt};
use pto_runtime::exec::resident::{LIST_AIV, Take, push, release_consumer, take};
use pto_runtime::layout::ResidentLayout;

/// Every test of this file holds this lock: the breakage switch is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device holding one resident state of `tasks` tasks (all on the AIV list, none yet
/// published) with the given fan-in counts, and one output word per task after it.
fn device(fanin: &[u64]) -> (Arc<Device>, ResidentLayout, Vec<u64>) {
    let tasks = fanin.len() as u32;
    let probe = ResidentLayout { base: 0, workers: 1, tasks, aic: 0 };
    let plan = GmPlan::new(1, probe.bytes() + 8 * tasks as u64);
    let l = ResidentLayout { base: plan.extra, ..probe };
    let mut gm = vec![0u64; plan.words()];
    let word = |addr: u64| ((addr - GM_BASE) / 8) as usize;
    for (t, &n) in fanin.iter().enumerate() {
        gm[word(l.fanin(t as u32))] = n;
    }
    let outputs = (0..tasks as u64).map(|t| l.base + l.bytes() + 8 * t).collect();
    (Device::new(&gm, 1, 0, 0, RegOrder::HalContract), l, outputs)
}

/// A core of the model (the physical id only indexes registers, which these models don't use).
fn core(dev: &Arc<Device>) -> LoomCore {
    LoomCore { dev: dev.clone(), phys: 0 }
}

/// Take from the AIV list until a task comes, or until `finished` says every producer is done
/// and one more try found nothing (`None`: nothing was ever published for this taker).
fn take_until(c: &LoomCore, l: &ResidentLayout, finished: impl Fn() -> bool) -> Option<u32> {
    loop {
        let done = finished();
        match take(c, l, LIST_AIV) {
            Take::Task(t) => return Some(t),
            _ if done => return None,
            _ => thread::yield_now(),
        }
    }
}

/// Tasks 0 and 1 finish on two cores, each writing its output word, then a store barrier, then
/// releasing task 2 (fan-in 2) with the real `release_consumer`; a third core takes from the
/// list as the consumer would. Invariants: task 2 is published exactly once (by whichever
/// release took its count to zero: both outcomes are reached); the consumer takes task 2 and
/// nothing else, and sees both producers' outputs; the count ends at zero, the list holds one
/// entry, taken.
fn fan_in_model(tally: std::sync::Arc<Tally>) {
    let (dev, l, out) = device(&[0, 0, 2]);
    let finished = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..2u32)
        .map(|p| {
            let (c, out, finished, tally) = (core(&dev), out.clone(), finished.clone(), tally.clone());
            thread::spawn(move || {
                c.write_u64(GmAddr(out[p as usize]), 100 + p as u64);
                c.store_barrier();
                let published = release_consumer(&c, &l, 2, || LIST_AIV).expect("a valid release");
                if published {
                    tally.hit(p as usize);
                }
                finished.fetch_add(1, Ordering::Release);
            })
        })
        .collect();
    let consumer = {
        let (c, out, finished) = (core(&dev), out.clone(), finished.clone());
        thread::spawn(move || {
            let t = take_until(&c, &l, || finished.load(Ordering::Acquire) == 2);
            let t = t.expect("task 2 was never published (a fan-in decrement was lost)");
            assert_eq!(t, 2, "took an entry that names no released task (an unpublished entry?)");
            c.rmb();
            for (p, &at) in out[..2].iter().enumerate() {
                assert_eq!(c.read_u64(GmAddr(at)), 100 + p as u64, "task 2 ran before producer {p}'s output");
            }
        })
    };
    for h in producers {
        h.join().unwrap();
    }
    consumer.join().unwrap();
    let c = core(&dev);
    assert_eq!(c.query(GmAddr(l.fanin(2))), 0, "the fan-in count ends at zero");
    assert_eq!(c.query(GmAddr(l.tail(LIST_AIV))), 1, "task 2 was published more than once");
    assert_eq!(c.query(GmAddr(l.head(LIST_AIV))), 1);
}

/// See [`fan_in_model`]. Preemption bound 3.
#[test]
fn resident_fan_in_publishes_once_after_the_outputs() {
    let _s = serial();
    let tally = Tally::new(2);
    let t = tally.clone();
    check("resident_fan_in_publishes_once_after_the_outputs", Some(3), move || fan_in_model(t.clone()));
    tally.assert_all_reached(&["producer 0 published task 2", "producer 1 published task 2"]);
}

/// One core pushes tasks 0 and 1 onto one list (two releases in a row) while two cores each
/// try once to take from it; what is left is taken after they joined. Invariants: every task
/// pushed is taken exactly once, nothing else is ever taken (never an entry reserved but not
/// yet written), and the list ends with head = tail = 2. Preemption bound 3. (Two pushers and two takers at once is beyond what
/// loom explores in CI time; the fan-in model has a push racing a take.)
#[test]
fn resident_list_one_pusher_two_takers() {
    let _s = serial();
    check("resident_list_one_pusher_two_takers", Some(3), || {
        let (dev, l, _) = device(&[0, 0]);
        let mut hs = Vec::new();
        {
            let c = core(&dev);
            hs.push(thread::spawn(move || {
                for t in 0..2u32 {
                    assert!(push(&c, &l, LIST_AIV, t), "the list has room for every task");
                }
                None
            }));
        }
        for _ in 0..2 {
            let c = core(&dev);
            // One attempt each (no spinning: loom bounds the branches of a model); what they
            // leave is taken after the join.
            hs.push(thread::spawn(move || match take(&c, &l, LIST_AIV) {
                Take::Task(t) => Some(t),
                Take::Empty(_) | Take::Unpublished(_) => None,
            }));
        }
        let got: Vec<Option<u32>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let c = core(&dev);
        let mut taken: Vec<u32> = got[1..].iter().flatten().copied().collect();
        while let Take::Task(t) = take(&c, &l, LIST_AIV) {
            taken.push(t);
        }
        taken.sort();
        assert_eq!(taken, vec![0, 1], "each pushed task taken exactly once, nothing else");
        assert_eq!(c.query(GmAddr(l.head(LIST_AIV))), 2);
        assert_eq!(c.query(GmAddr(l.tail(LIST_AIV))), 2);
    });
}

/// Reproducer: a taker that does not wait for a reserved entry to be written
/// (`breakage::RESIDENT_TAKE_UNPUBLISHED`), in [`fan_in_model`]. Loom must find the consumer
/// taking the entry between the releaser's reservation and its store.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_take_unpublished_entry() {
    let _s = serial();
    expect_found(
        "reproducer_take_unpublished_entry",
        Some(3),
        pto_runtime::breakage::RESIDENT_TAKE_UNPUBLISHED,
        &["names no released task", "task 2 ran before"],
        || fan_in_model(Tally::new(2)),
    );
}

/// Reproducer: the fan-in decrement as a load and a store (`breakage::RESIDENT_RELEASE_SPLIT`),
/// in [`fan_in_model`]. Loom must find both producers reading 2 (task 2 never published) or
/// both reading 1 (published twice).
#[cfg(feature = "breakage")]
#[test]
fn reproducer_release_split_decrement() {
    let _s = serial();
    expect_found(
        "reproducer_release_split_decrement",
        Some(3),
        pto_runtime::breakage::RESIDENT_RELEASE_SPLIT,
        &["never published", "more than once", "fan-in count ends at zero"],
        || fan_in_model(Tally::new(2)),
    );
}
