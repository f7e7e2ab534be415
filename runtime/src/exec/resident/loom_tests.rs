//! Loom models of the resident executor's scheduler state, driving the runtime's own functions
//! from `crate::exec::resident::state` (`take`, `take_any`, `push`, `make_ready`,
//! `release_consumer`, `finish`, `publish_slot`, `poll_slot`, `complete_slot`, `lane_free`,
//! `dispatch`, `wake_idle`; `ring` and `set_idle` through them) over the loom device of
//! [`hal`](crate::loom_support::hal) (every state word a loom atomic, as `GmAtomic` defines it). The state is written by [`state`], a
//! small builder that lays out the inbox directory (capacity and first entry of every
//! cluster's inbox of every class), each task's fan-in, subtask count and home word, and the
//! entries of the tasks that start in an inbox, as the host's `initial_state` does.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std,breakage --lib exec::resident::loom_tests
//! ```
//!
//! Without `--cfg loom` this module is not compiled. Every model is one `#[test]` whose doc
//! comment states the invariant it checks; each prints its execution count and wall time.
//!
//! Models:
//!
//! * **inbox publication**: the fan-in release of a consumer by two producers
//!   ([`resident_fan_in_publishes_once_after_the_outputs`]) and one pusher racing two takers
//!   on one inbox ([`resident_inbox_one_pusher_two_takers`]);
//! * **dispatch-slot generations**: a dispatcher publishing two entries in turn to one lane
//!   that runs and completes them ([`resident_slot_runs_each_entry_once_in_order`]);
//! * **doorbell and wake list**: an idle core that reads its doorbell, looks for work and
//!   waits, against a `make_ready` of its own cluster
//!   ([`resident_idle_core_never_sleeps_past_an_entry`]) and of another cluster that reaches
//!   it only through the idle mask (`wake_idle`) and a steal
//!   ([`resident_idle_cluster_is_woken_to_steal`]); two cores of a cluster racing for the
//!   dispatch token while entries are pushed ([`resident_token_dispatch_places_each_entry_once`]);
//! * **gangs**: a gang held until all its lanes are free, sequentially
//!   ([`resident_gang_waits_for_all_lanes`]) and against the busy lane's completion
//!   ([`resident_gang_published_after_the_busy_lane_completes`]).
//!
//! **Reproducers** run a model with one change through the `breakage` switch (process-wide, so
//! the tests of this file run under one lock): a taker that does not wait for a reserved entry
//! to be written (`RESIDENT_TAKE_UNPUBLISHED`), a fan-in decrement split into a load and a
//! store (`RESIDENT_RELEASE_SPLIT`), a slot generation stored before its entry
//! (`SLOT_GEN_BEFORE_ENTRY`) and an idle core that reads its doorbell after looking for work
//! (`WAKE_SEEN_LATE`).
//!
//! Not modelled here: `serve` itself and `try_dispatch` (they need a full AICore agent with an
//! image; the idle step and the token are re-stated in [`look_for_work`] and
//! [`try_dispatch`] in `serve`'s order, around the real functions; `try_dispatch`'s re-ring
//! after a pass, and a core's own dispatch pass setting its idle bit after its look, are left
//! out: the steal model starts with the bit set), the cores' reads of the
//! image and the kernels (plain data, covered by the simulator's faithful cache model in
//! `testkits/breakage-suites/tests/coherence.rs` and `tests/resident.rs`), dummies and multi-block tasks, the
//! `completed` count and `supervise`'s watchdog, the DMB EXIT and the fault latch, and the
//! teardown, which is the legacy executor's own (`lifecycle::loom_tests`, with the resident-relevant
//! `retire_ignores_the_release_a_previous_run_left` and its reproducer `GATE_ANY_EPOCH`). The lane's wait and the
//! idle core's sleep are yielding loops (loom's `wait_for_word` is a yield).

use crate::loom_support::prelude::*;
use parking_lot::{Mutex, MutexGuard};

use crate::exec::resident::state::{
    Take, complete_slot, dispatch, finish, lane_free, make_ready, poll_slot, publish_slot, push, release_consumer,
    take, take_any,
};
use crate::layout::{
    ENTRY_DUMMY, ENTRY_GANG, HOME_DUMMY, ResidentLayout, entry_task_block, entry_word, home_fields, home_word,
    inbox_class,
};
use crate::loom_support::hal::{Device, GM_BASE, GmPlan, LoomCore, RegOrder, spin_until};
#[cfg(feature = "breakage")]
use crate::loom_support::harness::expect_found;
use crate::loom_support::harness::{Tally, check};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use pto_hal::{Barriers, GmAddr, GmAtomic, GmMemoryExt};

/// Every test of this file holds this lock: the breakage switch is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock()
}

/// One task of a model's graph.
#[derive(Copy, Clone, Debug)]
struct Spec {
    /// Producers not finished yet.
    fanin: u64,
    /// Its [`home_word`] (home cluster, class, lanes, blocks).
    home: u64,
    /// Whether its blocks start in their inboxes (a task that waits for nothing and was not
    /// yet taken); otherwise the inboxes only have room for them.
    queued: bool,
}

/// A single-block task of class `class` homed on cluster `home`.
const fn task(fanin: u64, home: u32, class: u32, queued: bool) -> Spec {
    Spec { fanin, home: home_word(home, class, 0, 1), queued }
}

/// A single-block gang on `lanes` of cluster `home`.
const fn gang(home: u32, lanes: u8, queued: bool) -> Spec {
    Spec { fanin: 0, home: home_word(home, inbox_class::GANG, lanes, 1), queued }
}

/// The inbox class and entry flags of a home word's class.
fn inbox_of(class: u32) -> (u32, u64) {
    match class {
        inbox_class::AIC => (inbox_class::AIC, 0),
        inbox_class::AIV => (inbox_class::AIV, 0),
        inbox_class::GANG => (inbox_class::GANG, ENTRY_GANG),
        HOME_DUMMY => (inbox_class::AIV, ENTRY_DUMMY),
        _ => unreachable!("a home class has two bits"),
    }
}

/// The entry word of block 0 of task `t` as the state holds it (flags from its home class).
fn entry_of(specs: &[Spec], t: u32) -> u64 {
    let (_, class, _, _) = home_fields(specs[t as usize].home);
    entry_word(t, 0, inbox_of(class).1)
}

/// A device holding the resident state of `specs` over `clusters` clusters, then one data word
/// per task (returned: its address) that the models use as the task's output or input. Each
/// block of each task has a place in the inbox of its home cluster (block `b` one cluster after
/// block `b - 1`), the inboxes of cluster 0 first, in class order, as the host lays them out;
/// the queued tasks' entries are in place (in task order); every fan-in and subtask count is
/// full (a gang: one subtask per lane). `extra` then names any other words to set, by address
/// and value (a busy slot, an idle bit).
fn state(
    clusters: u32,
    specs: &[Spec],
    extra: impl Fn(&ResidentLayout) -> Vec<(u64, u64)>,
) -> (Arc<Device>, ResidentLayout, Vec<u64>) {
    let tasks = specs.len() as u32;
    let inbox = |c: u32, k: u32| (c * 3 + k) as usize;
    let mut cap = vec![0u32; clusters as usize * 3];
    for s in specs {
        let (home, class, _, blocks) = home_fields(s.home);
        for b in 0..blocks {
            cap[inbox((home + b) % clusters, inbox_of(class).0)] += 1;
        }
    }
    let entries: u32 = cap.iter().sum();
    let probe = ResidentLayout { base: 0, clusters, tasks, entries };
    let plan = GmPlan::new(1, probe.bytes() + 8 * tasks as u64);
    let l = ResidentLayout { base: plan.extra, ..probe };
    assert_eq!(l.base % 64, 0, "the state is line-aligned");
    let mut gm = vec![0u64; plan.words()];
    let mut put = |addr: u64, v: u64| gm[((addr - GM_BASE) / 8) as usize] = v;
    let mut first = vec![0u32; cap.len()];
    let mut next = 0;
    for c in 0..clusters {
        for k in 0..3 {
            first[inbox(c, k)] = next;
            next += cap[inbox(c, k)];
            put(l.inbox_capacity(c, k), cap[inbox(c, k)] as u64);
            put(l.inbox_first(c, k), first[inbox(c, k)] as u64);
        }
    }
    let mut tails = vec![0u32; cap.len()];
    for (t, s) in specs.iter().enumerate() {
        let t = t as u32;
        let (home, class, lanes, blocks) = home_fields(s.home);
        let per_block = if class == inbox_class::GANG { (if lanes == 0 { 7 } else { lanes }).count_ones() } else { 1 };
        put(l.fanin(t), s.fanin);
        put(l.left(t), (blocks * per_block) as u64);
        put(l.home(t), s.home);
        if s.queued {
            let (k, flags) = inbox_of(class);
            for b in 0..blocks {
                let q = inbox((home + b) % clusters, k);
                put(l.entry(first[q] + tails[q]), entry_word(t, b, flags));
                tails[q] += 1;
            }
        }
    }
    for c in 0..clusters {
        for k in 0..3 {
            put(l.inbox_tail(c, k), tails[inbox(c, k)] as u64);
        }
    }
    // The stocked masks mark the inboxes holding a queued entry (one mask word: the models
    // have fewer than 64 clusters).
    for k in 0..3 {
        let marked = (0..clusters).filter(|&c| tails[inbox(c, k)] > 0).fold(0u64, |m, c| m | 1 << c);
        put(l.stocked(k, 0), marked);
    }
    for (addr, v) in extra(&l) {
        put(addr, v);
    }
    let data = (0..tasks as u64).map(|t| l.base + l.bytes() + 8 * t).collect();
    (Device::new(&gm, 1, 0, 0, RegOrder::HalContract), l, data)
}

/// A core of the model (the physical id only indexes registers, which these models don't use).
fn core(dev: &Arc<Device>) -> LoomCore {
    LoomCore { dev: dev.clone(), phys: 0 }
}

/// The entries left in cluster `c`'s inbox of class `k` (between head and tail), read after
/// the threads joined.
fn inbox_left(a: &LoomCore, l: &ResidentLayout, c: u32, k: u32) -> Vec<u64> {
    let first = a.query(GmAddr(l.inbox_first(c, k))) as u32;
    let (head, tail) = (a.query(GmAddr(l.inbox_head(c, k))), a.query(GmAddr(l.inbox_tail(c, k))));
    (head..tail).map(|i| a.query(GmAddr(l.entry(first + i as u32)))).collect()
}

// ---------------------------------------------------------------------------------------------
// Inbox publication
// ---------------------------------------------------------------------------------------------

/// Take from cluster 0's AIV inbox until an entry comes, or until `finished` says every
/// producer is done and one more try found nothing (`None`: nothing was ever published for
/// this taker).
fn take_until(a: &LoomCore, l: &ResidentLayout, finished: impl Fn() -> bool) -> Option<u64> {
    loop {
        let done = finished();
        match take(a, l, 0, inbox_class::AIV) {
            Take::Task(e) => return Some(e),
            _ if done => return None,
            _ => thread::yield_now(),
        }
    }
}

/// Tasks 0 and 1 (one cluster) finish on two cores: each writes its output word, then a store
/// barrier, then counts its one subtask off (`finish`) and releases task 2 (fan-in 2) with the
/// real `release_consumer`, which publishes it through `make_ready` (its home word: AIV,
/// cluster 0); a third core takes from the inbox as the consumer would. Invariants: task 2 is
/// published exactly once (by whichever release took its count to zero: both outcomes are
/// reached); the consumer takes task 2's entry and nothing else, and sees both producers'
/// outputs; the count ends at zero, the inbox holds one entry, taken, and the doorbell was
/// rung once.
fn fan_in_model(tally: std::sync::Arc<Tally>) {
    let specs =
        [task(0, 0, inbox_class::AIV, false), task(0, 0, inbox_class::AIV, false), task(2, 0, inbox_class::AIV, false)];
    let (dev, l, out) = state(1, &specs, |_| vec![]);
    let finished = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..2u32)
        .map(|p| {
            let (a, out, finished, tally) = (core(&dev), out.clone(), finished.clone(), tally.clone());
            thread::spawn(move || {
                a.write_u64(GmAddr(out[p as usize]), 100 + p as u64);
                a.store_barrier();
                assert_eq!(finish(&a, &l, p), Ok(true), "a one-block task finishes with its one subtask");
                if release_consumer(&a, &l, 2).expect("a valid release") {
                    tally.hit(p as usize);
                }
                finished.fetch_add(1, Ordering::Release);
            })
        })
        .collect();
    let consumer = {
        let (a, out, finished) = (core(&dev), out.clone(), finished.clone());
        thread::spawn(move || {
            let e = take_until(&a, &l, || finished.load(Ordering::Acquire) == 2);
            let e = e.expect("task 2 was never published (a fan-in decrement was lost)");
            assert_eq!(e, entry_word(2, 0, 0), "took an entry that names no released task (an unpublished entry?)");
            a.rmb();
            for (p, &at) in out[..2].iter().enumerate() {
                assert_eq!(a.read_u64(GmAddr(at)), 100 + p as u64, "task 2 ran before producer {p}'s output");
            }
        })
    };
    for h in producers {
        h.join().unwrap();
    }
    consumer.join().unwrap();
    let a = core(&dev);
    assert_eq!(a.query(GmAddr(l.fanin(2))), 0, "the fan-in count ends at zero");
    assert_eq!(a.query(GmAddr(l.inbox_tail(0, inbox_class::AIV))), 1, "task 2 was published more than once");
    assert_eq!(a.query(GmAddr(l.inbox_head(0, inbox_class::AIV))), 1);
    assert_eq!(a.query(GmAddr(l.doorbell(0))), 1, "one publication rings its cluster once");
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

/// One core pushes the entries of tasks 0 and 1 onto cluster 0's AIV inbox (two releases in a
/// row) while two cores each try once to take from it; what is left is taken after they
/// joined. Invariants: every entry pushed is taken exactly once, nothing else is ever taken
/// (never an entry reserved but not yet written), and the inbox ends with head = tail = 2.
/// Preemption bound 3. (Two pushers and two takers at once is beyond what loom explores in CI
/// time; the fan-in model has a push racing a take.)
#[test]
fn resident_inbox_one_pusher_two_takers() {
    let _s = serial();
    check("resident_inbox_one_pusher_two_takers", Some(3), || {
        let specs = [task(0, 0, inbox_class::AIV, false), task(0, 0, inbox_class::AIV, false)];
        let (dev, l, _) = state(1, &specs, |_| vec![]);
        let mut hs = Vec::new();
        {
            let a = core(&dev);
            hs.push(thread::spawn(move || {
                for t in 0..2u32 {
                    assert!(
                        push(&a, &l, 0, inbox_class::AIV, entry_word(t, 0, 0)),
                        "the inbox has room for every task"
                    );
                }
                None
            }));
        }
        for _ in 0..2 {
            let a = core(&dev);
            // One attempt each (no spinning: loom bounds the branches of a model); what they
            // leave is taken after the join.
            hs.push(thread::spawn(move || match take(&a, &l, 0, inbox_class::AIV) {
                Take::Task(e) => Some(e),
                Take::Empty(_) | Take::Unpublished(_) => None,
            }));
        }
        let got: Vec<Option<u64>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let a = core(&dev);
        let mut taken: Vec<u64> = got[1..].iter().flatten().copied().collect();
        while let Take::Task(e) = take(&a, &l, 0, inbox_class::AIV) {
            taken.push(e);
        }
        taken.sort();
        assert_eq!(taken, vec![entry_word(0, 0, 0), entry_word(1, 0, 0)], "each pushed entry taken exactly once");
        assert_eq!(a.query(GmAddr(l.inbox_head(0, inbox_class::AIV))), 2);
        assert_eq!(a.query(GmAddr(l.inbox_tail(0, inbox_class::AIV))), 2);
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
        crate::breakage::RESIDENT_TAKE_UNPUBLISHED,
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
        crate::breakage::RESIDENT_RELEASE_SPLIT,
        &["never published", "more than once", "fan-in count ends at zero"],
        || fan_in_model(Tally::new(2)),
    );
}

/// Cluster 0's AIV inbox holds task 0 (marked stocked); one core takes it (`take`, which
/// unmarks the inbox it emptied: `unstock`) while another pushes task 1 into the same inbox
/// (`push`, which marks it: `stock`). Invariants: each entry is taken at most once and the
/// inbox never holds an unmarked entry once both are done — a steal (`take_any` from cluster
/// 1, which looks only at marked inboxes) then finds task 1. Preemption bound 3.
fn stocked_model() {
    let specs = [task(0, 0, inbox_class::AIV, true), task(0, 0, inbox_class::AIV, false)];
    let (dev, l, _) = state(2, &specs, |_| vec![]);
    let taker = {
        let a = core(&dev);
        thread::spawn(move || take(&a, &l, 0, inbox_class::AIV))
    };
    let pusher = {
        let a = core(&dev);
        thread::spawn(move || assert!(push(&a, &l, 0, inbox_class::AIV, entry_word(1, 0, 0)), "room for task 1"))
    };
    let took = taker.join().unwrap();
    pusher.join().unwrap();
    assert_eq!(took, Take::Task(entry_word(0, 0, 0)), "the taker takes the queued task 0");
    let a = core(&dev);
    let marked = a.query(GmAddr(l.stocked(inbox_class::AIV, 0))) & 1 != 0;
    assert!(marked, "lost mark: cluster 0's inbox holds task 1 but the stocked mask does not mark it");
    assert_eq!(take_any(&a, &l, 1, inbox_class::AIV), Some(entry_word(1, 0, 0)), "a steal finds task 1");
    assert_eq!(a.query(GmAddr(l.stocked(inbox_class::AIV, 0))) & 1, 0, "the emptied inbox is unmarked");
}

/// See [`stocked_model`].
#[test]
fn resident_a_stocked_inbox_stays_marked() {
    let _s = serial();
    check("resident_a_stocked_inbox_stays_marked", Some(3), stocked_model);
}

/// Reproducer: the taker clears the stocked bit without a second look at the inbox
/// (`breakage::UNSTOCK_NO_SECOND_LOOK`), in [`stocked_model`]. Loom must find the push's
/// mark falling between the take and the clear: task 1 then sits in an unmarked inbox.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_unstock_without_a_second_look() {
    let _s = serial();
    expect_found(
        "reproducer_unstock_without_a_second_look",
        Some(3),
        crate::breakage::UNSTOCK_NO_SECOND_LOOK,
        &["lost mark"],
        stocked_model,
    );
}

// ---------------------------------------------------------------------------------------------
// Dispatch-slot generations
// ---------------------------------------------------------------------------------------------

/// A dispatcher (the token holder: one thread) publishes the entries of tasks 0 and 1 in turn
/// to lane 1 of cluster 0 with `publish_slot`, writing each task's input word before its
/// publication and waiting for `lane_free` between the two; the lane's core polls its slot
/// with `poll_slot(done)`, "runs" each entry (checks it and its input, records it, writes its
/// output over the input word, a store barrier) and posts `complete_slot`. Invariants: the
/// lane runs each published entry exactly once and in order, at generations 1 then 2 (never a
/// skipped generation: no entry overwritten before it ran), never a stale or unpublished entry
/// and never one whose input it cannot see; both generations end at 2 with the lane free, and
/// both outputs are in memory. Preemption bound 3.
fn slot_model() {
    let specs = [task(0, 0, inbox_class::AIV, false), task(0, 0, inbox_class::AIV, false)];
    let (dev, l, data) = state(1, &specs, |_| vec![]);
    let entries = [entry_word(0, 0, 0), entry_word(1, 0, 0)];
    let dispatcher = {
        let (a, data) = (core(&dev), data.clone());
        thread::spawn(move || {
            for (t, &e) in entries.iter().enumerate() {
                spin_until(|| lane_free(&a, &l, 0, 1));
                a.write_u64(GmAddr(data[t]), 100 + t as u64);
                publish_slot(&a, &l, 0, 1, e);
            }
        })
    };
    let lane = {
        let (a, data) = (core(&dev), data.clone());
        thread::spawn(move || {
            let mut done = 0u64;
            let mut ran = Vec::new();
            while ran.len() < entries.len() {
                let Some((g, e)) = poll_slot(&a, &l, 0, 1, done) else {
                    thread::yield_now();
                    continue;
                };
                let k = ran.len();
                assert_eq!(e, entries[k], "the lane ran {e:#x} as its run {k}: a stale or wrong entry");
                assert_eq!(g, done + 1, "the lane skipped a generation: an entry was overwritten before it ran");
                let (t, _) = entry_task_block(e);
                assert_eq!(a.read_u64(GmAddr(data[t as usize])), 100 + t as u64, "the lane ran {t} before its input");
                ran.push(e);
                a.write_u64(GmAddr(data[t as usize]), 200 + t as u64);
                a.store_barrier();
                done = g;
                complete_slot(&a, &l, 0, 1, g);
            }
            ran
        })
    };
    dispatcher.join().unwrap();
    let ran = lane.join().unwrap();
    let a = core(&dev);
    assert_eq!(ran, entries, "each published entry run exactly once, in order");
    assert_eq!(a.query(GmAddr(l.slot_publication(0, 1))), 2);
    assert_eq!(a.query(GmAddr(l.slot_completion(0, 1))), 2);
    assert!(lane_free(&a, &l, 0, 1));
    for (t, &at) in data.iter().enumerate() {
        assert_eq!(a.read_u64(GmAddr(at)), 200 + t as u64, "task {t}'s output");
    }
    assert_eq!(a.query(GmAddr(l.doorbell(0))), 2, "each completion rings the cluster");
}

/// See [`slot_model`].
#[test]
fn resident_slot_runs_each_entry_once_in_order() {
    let _s = serial();
    check("resident_slot_runs_each_entry_once_in_order", Some(3), slot_model);
}

/// Reproducer: the slot's generation stored before its entry
/// (`breakage::SLOT_GEN_BEFORE_ENTRY`), in [`slot_model`]. Loom must find the lane seeing the
/// new generation with the old entry: it runs the slot's previous entry (or the empty one)
/// again.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_slot_generation_before_entry() {
    let _s = serial();
    expect_found(
        "reproducer_slot_generation_before_entry",
        Some(3),
        crate::breakage::SLOT_GEN_BEFORE_ENTRY,
        &["a stale or wrong entry"],
        slot_model,
    );
}

// ---------------------------------------------------------------------------------------------
// Doorbell, wake list and the dispatch token
// ---------------------------------------------------------------------------------------------

/// What an idle core's look for work found.
enum Look {
    /// It took this entry.
    Found(u64),
    /// Nothing: it waits on its doorbell while the doorbell still holds this value.
    Wait(u64),
}

/// The idle step of `serve` for a core of cluster `c`, in `serve`'s order: read the doorbell,
/// look for work (`take_any` of the AIV class: the look of a dispatch pass), and with nothing
/// found, wait on the value read. With `breakage::WAKE_SEEN_LATE`, as `serve`'s broken variant
/// does it: the doorbell is read after the look.
fn look_for_work(a: &LoomCore, l: &ResidentLayout, c: u32) -> Look {
    let late = crate::breakage::broken(crate::breakage::WAKE_SEEN_LATE);
    // Read before looking for work: a ring after this read ends the wait at once.
    let mut bell = if late { 0 } else { a.query(GmAddr(l.doorbell(c))) };
    if let Some(e) = take_any(a, l, c, inbox_class::AIV) {
        return Look::Found(e);
    }
    if late {
        bell = a.query(GmAddr(l.doorbell(c)));
    }
    Look::Wait(bell)
}

/// The idle core of cluster `c` sleeps on its doorbell while it holds `bell` (a yielding
/// re-check: loom's `wait_for_word` is a yield): `true` once the doorbell moved. Once the pusher
/// said it is done (`pushed`), a doorbell still at `bell` means the core sleeps for good: that
/// is a lost wakeup if the entry is still in inbox `(home, AIV)`.
fn sleep(a: &LoomCore, l: &ResidentLayout, c: u32, bell: u64, pushed: &AtomicBool, home: u32) -> bool {
    loop {
        let done = pushed.load(Ordering::Acquire);
        if a.query(GmAddr(l.doorbell(c))) != bell {
            return true;
        }
        if done {
            let (head, tail) = (
                a.query(GmAddr(l.inbox_head(home, inbox_class::AIV))),
                a.query(GmAddr(l.inbox_tail(home, inbox_class::AIV))),
            );
            assert!(
                head >= tail,
                "lost wakeup: the idle core waits on an unchanged doorbell ({bell}) after the pusher \
                 finished, with the entry still in the inbox (head {head}, tail {tail})"
            );
            return false;
        }
        thread::yield_now();
    }
}

/// An idle core of cluster `idle` does `serve`'s idle step ([`look_for_work`], then
/// [`sleep`], then one more look) while a pusher publishes task 0 (AIV, homed on cluster
/// `home`) with the real `make_ready` (push, ring the home cluster, `wake_idle`). With
/// `idle != home` (two clusters) the idle core's cluster starts marked idle (`set_idle` by its
/// last dispatch pass), so only `wake_idle` rings it, and it takes the entry from the home
/// cluster's inbox (the steal of `take_any`). Invariants: the idle core never sleeps past the
/// published entry — it takes it at its first look or its sleep ends and the second look finds
/// it (both outcomes are reached); the entry is taken exactly once.
fn wake_model(clusters: u32, idle: u32, home: u32, tally: std::sync::Arc<Tally>) {
    let specs = [task(0, home, inbox_class::AIV, false)];
    let marked = if idle != home { 1u64 << idle } else { 0 };
    let (dev, l, _) = state(clusters, &specs, |l| vec![(l.idle(0), marked)]);
    let pushed = Arc::new(AtomicBool::new(false));
    let pusher = {
        let (a, pushed) = (core(&dev), pushed.clone());
        thread::spawn(move || {
            make_ready(&a, &l, 0).expect("a valid home word");
            pushed.store(true, Ordering::Release);
        })
    };
    let sleeper = {
        let (a, pushed) = (core(&dev), pushed.clone());
        thread::spawn(move || match look_for_work(&a, &l, idle) {
            Look::Found(e) => {
                tally.hit(0);
                Some(e)
            }
            Look::Wait(bell) => {
                if !sleep(&a, &l, idle, bell, &pushed, home) {
                    return None;
                }
                tally.hit(1);
                let e = take_any(&a, &l, idle, inbox_class::AIV);
                Some(e.expect("the idle core woke, but its second look found nothing"))
            }
        })
    };
    pusher.join().unwrap();
    let got = sleeper.join().unwrap();
    assert_eq!(got, Some(entry_word(0, 0, 0)), "the idle core took task 0");
    let a = core(&dev);
    assert_eq!(a.query(GmAddr(l.inbox_head(home, inbox_class::AIV))), 1, "taken once");
    assert_eq!(a.query(GmAddr(l.inbox_tail(home, inbox_class::AIV))), 1, "published once");
}

/// See [`wake_model`]: one cluster, the idle core's own inbox. Preemption bound 3.
#[test]
fn resident_idle_core_never_sleeps_past_an_entry() {
    let _s = serial();
    let tally = Tally::new(2);
    let t = tally.clone();
    check("resident_idle_core_never_sleeps_past_an_entry", Some(3), move || wake_model(1, 0, 0, t.clone()));
    tally.assert_all_reached(&["found at the first look", "woken, found at the second look"]);
}

/// See [`wake_model`]: two clusters; the entry is homed on cluster 0 and the idle core is in
/// cluster 1, marked idle, which only `wake_idle` rings. Preemption bound 3.
#[test]
fn resident_idle_cluster_is_woken_to_steal() {
    let _s = serial();
    let tally = Tally::new(2);
    let t = tally.clone();
    check("resident_idle_cluster_is_woken_to_steal", Some(3), move || wake_model(2, 1, 0, t.clone()));
    tally.assert_all_reached(&["stolen at the first look", "woken, stolen at the second look"]);
}

/// Reproducer: the doorbell read after the look for work (`breakage::WAKE_SEEN_LATE`), in
/// [`wake_model`] on one cluster. Loom must find the push and its ring falling between the
/// look and the read: the core then waits on the rung value, and the entry stays in the inbox.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_wake_seen_late() {
    let _s = serial();
    expect_found("reproducer_wake_seen_late", Some(3), crate::breakage::WAKE_SEEN_LATE, &["lost wakeup"], || {
        wake_model(1, 0, 0, Tally::new(2))
    });
}

/// `try_dispatch` of `resident.rs` for worker `w` of cluster `c`, around the real `dispatch`:
/// take the token (compare-and-swap from 0), run one pass, free the token. `None` when another
/// core holds it. (The doorbell re-ring after the pass is left out: no one sleeps here.)
fn try_dispatch(a: &LoomCore, l: &ResidentLayout, c: u32, w: u32) -> Option<u8> {
    if a.compare_exchange(GmAddr(l.token(c)), 0, w as u64 + 1) != 0 {
        return None;
    }
    let published = dispatch(a, l, c, |e| panic!("this model has no dummies, but dispatch completed {e:#x}"));
    a.store_direct(GmAddr(l.token(c)), 0);
    Some(published)
}

/// The cores of lanes 1 and 2 of one cluster (workers 1 and 2) each try once to take the
/// token and run a dispatch pass (`try_dispatch`), then look once at their own slot and, with
/// an entry there, "run" it (record it) and complete it; meanwhile a third core pushes the
/// entries of tasks 0 and 1 (AIV) into the cluster's inbox. After the join, one more pass
/// (the next core to wake) places what is left. Invariants: each entry is published to exactly
/// one slot (of an AIV lane) and none is lost — every entry is found exactly once among the
/// entries the lanes ran and the entries still pending in a slot (publication past
/// completion), so no slot was overwritten before its lane completed it (with no lane free, a
/// second publication would have replaced a pending entry); no slot is ever more than one
/// generation ahead of its completion; the inbox ends empty and the token free. Both
/// outcomes of the race — both cores got the token in turn, and one found it taken — are
/// reached. Shrunk to fit (about 120 000 executions, under 30 s in release): one token attempt
/// and one slot look per core, two entries, one cluster, preemption bound 2.
#[test]
fn resident_token_dispatch_places_each_entry_once() {
    let _s = serial();
    let tally = Tally::new(2);
    let tl = tally.clone();
    check("resident_token_dispatch_places_each_entry_once", Some(2), move || {
        let specs = [task(0, 0, inbox_class::AIV, false), task(0, 0, inbox_class::AIV, false)];
        let (dev, l, _) = state(1, &specs, |_| vec![]);
        let pusher = {
            let a = core(&dev);
            thread::spawn(move || {
                for t in 0..2u32 {
                    assert!(push(&a, &l, 0, inbox_class::AIV, entry_word(t, 0, 0)), "the inbox has room");
                }
            })
        };
        let cores: Vec<_> = (1..=2u32)
            .map(|lane| {
                let a = core(&dev);
                thread::spawn(move || {
                    let got = try_dispatch(&a, &l, 0, lane).is_some();
                    let ran = poll_slot(&a, &l, 0, lane, 0).map(|(g, e)| {
                        assert_eq!(g, 1, "lane {lane}'s slot jumped a generation: an entry was overwritten");
                        complete_slot(&a, &l, 0, lane, g);
                        e
                    });
                    (got, ran)
                })
            })
            .collect();
        pusher.join().unwrap();
        let results: Vec<(bool, Option<u64>)> = cores.into_iter().map(|h| h.join().unwrap()).collect();
        tl.hit(if results.iter().all(|r| r.0) { 0 } else { 1 });
        let a = core(&dev);
        assert_eq!(a.query(GmAddr(l.token(0))), 0, "the token is free after every pass");
        try_dispatch(&a, &l, 0, 0).expect("the token is free");
        let mut placed: Vec<u64> = results.iter().filter_map(|r| r.1).collect();
        for lane in 0..3 {
            let (p, c) = (a.query(GmAddr(l.slot_publication(0, lane))), a.query(GmAddr(l.slot_completion(0, lane))));
            assert!(p <= c + 1, "lane {lane}'s slot published {p} with {c} completed: overwritten before it ran");
            if p > c {
                assert_ne!(lane, 0, "an AIV entry was published to the AIC lane");
                placed.push(a.query(GmAddr(l.slot_entry(0, lane))));
            }
        }
        placed.sort();
        assert_eq!(
            placed,
            vec![entry_word(0, 0, 0), entry_word(1, 0, 0)],
            "each entry published to exactly one slot, none lost"
        );
        assert!(inbox_left(&a, &l, 0, inbox_class::AIV).is_empty(), "every entry was taken");
        assert_eq!(a.query(GmAddr(l.token(0))), 0, "the token is free at the end");
    });
    tally.assert_all_reached(&["both cores held the token in turn", "a core found the token taken"]);
}

// ---------------------------------------------------------------------------------------------
// Gangs
// ---------------------------------------------------------------------------------------------

/// The graph of the gang models: task 0 a gang on lanes 0–2 of cluster 0, queued; task 1 an
/// AIC task queued behind it; task 2 an AIV task that already runs in lane 1 (its slot at
/// generation 1, completed 0).
fn gang_state() -> (Arc<Device>, ResidentLayout, [Spec; 3]) {
    let specs = [gang(0, 0b111, true), task(0, 0, inbox_class::AIC, true), task(0, 0, inbox_class::AIV, false)];
    let running = entry_of(&specs, 2);
    let (dev, l, _) = state(1, &specs, |l| {
        vec![(l.slot_entry(0, 1), running), (l.slot_publication(0, 1), 1), (l.slot_completion(0, 1), 0)]
    });
    (dev, l, specs)
}

/// Sequential (one thread, inside `loom::model`): with lane 1 busy, a dispatch pass takes the
/// gang (class GANG in its home word, lanes 0b111) into `held` and publishes nothing — not the
/// gang, and not the AIC task either (lane 0 is reserved for the gang) — and leaves the
/// cluster not idle; a second pass changes nothing (the gang is not taken twice). Once lane 1
/// posts `complete_slot`, the next pass publishes the gang to all three lanes at once (one
/// generation each), empties `held`, and still leaves the AIC task in its inbox (lane 0 is
/// busy with the gang). When lane 0 completes, the AIC task goes to it; when every lane is
/// free and nothing is left, a pass marks the cluster idle.
#[test]
fn resident_gang_waits_for_all_lanes() {
    let _s = serial();
    check("resident_gang_waits_for_all_lanes", None, || {
        let (dev, l, specs) = gang_state();
        let (g, aic, aiv) = (entry_of(&specs, 0), entry_of(&specs, 1), entry_of(&specs, 2));
        assert_ne!(g & ENTRY_GANG, 0);
        let a = core(&dev);
        let never = |e: u64| panic!("this model has no dummies, but dispatch completed {e:#x}");
        let idle = |a: &LoomCore| a.query(GmAddr(l.idle(0))) & 1 != 0;
        let publications = |a: &LoomCore| (0..3).map(|i| a.query(GmAddr(l.slot_publication(0, i)))).collect::<Vec<_>>();
        for pass in 0..2 {
            assert_eq!(dispatch(&a, &l, 0, never), 0, "pass {pass}: nothing placed while lane 1 is busy");
            assert_eq!(a.query(GmAddr(l.held(0))), g, "the gang waits in held");
            assert_eq!(publications(&a), [0, 1, 0], "no lane got the gang, lane 0 not the AIC task");
            assert_eq!(a.query(GmAddr(l.inbox_head(0, inbox_class::GANG))), 1, "the gang was taken once");
            assert_eq!(inbox_left(&a, &l, 0, inbox_class::AIC), [aic], "the AIC task waits");
            assert!(!idle(&a), "a cluster whose free lanes are reserved is not idle");
        }
        assert_eq!(a.query(GmAddr(l.slot_entry(0, 1))), aiv);
        complete_slot(&a, &l, 0, 1, 1);
        assert_eq!(dispatch(&a, &l, 0, never), 0b111, "the gang goes to all three lanes at once");
        assert_eq!(a.query(GmAddr(l.held(0))), 0, "held is empty again");
        assert_eq!(publications(&a), [1, 2, 1]);
        for i in 0..3 {
            assert_eq!(a.query(GmAddr(l.slot_entry(0, i))), g, "lane {i} holds the gang");
            assert!(!lane_free(&a, &l, 0, i));
        }
        assert_eq!(inbox_left(&a, &l, 0, inbox_class::AIC), [aic], "lane 0 is busy with the gang");
        complete_slot(&a, &l, 0, 0, 1);
        assert_eq!(dispatch(&a, &l, 0, never), 0b001, "the AIC task goes to lane 0");
        assert_eq!(a.query(GmAddr(l.slot_entry(0, 0))), aic);
        assert!(inbox_left(&a, &l, 0, inbox_class::AIC).is_empty());
        assert!(!idle(&a), "no lane free");
        for (i, generation) in [(0, 2), (1, 2), (2, 1)] {
            complete_slot(&a, &l, 0, i, generation);
        }
        assert_eq!(dispatch(&a, &l, 0, never), 0, "nothing left");
        assert!(idle(&a), "free lanes with nothing to do: the cluster is idle");
    });
}

/// [`gang_state`] with two threads: the token holder runs dispatch passes until it published
/// the gang (yielding between passes) while lane 1's core finishes its running task
/// (`complete_slot` of generation 1) and then polls its slot. Invariants: before lane 1
/// completed, the gang is in no slot (lanes 0 and 2 still at generation 0: a gang is published
/// to all its lanes at once, and lane 0 is not given to the AIC task waiting behind it); lane 1
/// then finds the gang at generation 2; at the end every lane holds the gang, held is empty
/// and the AIC task is still in its inbox. Preemption bound 3.
#[test]
fn resident_gang_published_after_the_busy_lane_completes() {
    let _s = serial();
    check("resident_gang_published_after_the_busy_lane_completes", Some(3), || {
        let (dev, l, specs) = gang_state();
        let (g, aic) = (entry_of(&specs, 0), entry_of(&specs, 1));
        let dispatcher = {
            let a = core(&dev);
            thread::spawn(move || {
                while dispatch(&a, &l, 0, |e| panic!("no dummies here: {e:#x}")) != 0b111 {
                    thread::yield_now();
                }
            })
        };
        let lane1 = {
            let a = core(&dev);
            thread::spawn(move || {
                for i in [0, 2] {
                    assert_eq!(
                        a.query(GmAddr(l.slot_publication(0, i))),
                        0,
                        "lane {i} got work while lane 1 was busy (the gang split, or its lane given away)"
                    );
                }
                complete_slot(&a, &l, 0, 1, 1);
                loop {
                    if let Some((generation, e)) = poll_slot(&a, &l, 0, 1, 1) {
                        assert_eq!((generation, e), (2, g), "lane 1 found the gang at generation 2");
                        break;
                    }
                    thread::yield_now();
                }
            })
        };
        dispatcher.join().unwrap();
        lane1.join().unwrap();
        let a = core(&dev);
        for i in 0..3 {
            assert_eq!(a.query(GmAddr(l.slot_entry(0, i))), g, "lane {i} holds the gang");
        }
        assert_eq!(a.query(GmAddr(l.held(0))), 0);
        assert_eq!(inbox_left(&a, &l, 0, inbox_class::AIC), [aic]);
    });
}
