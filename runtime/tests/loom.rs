//! Loom models of the runtime's lock-free protocols, run against the runtime's own code.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std --test loom
//! ```
//!
//! Without `--cfg loom` this file compiles to nothing. Every model is one `#[test]` whose doc
//! comment states the invariant it checks; each prints its execution count and wall time.
//!
//! 1. **Ready queue** — the real [`ReadyQueue`] (it is built on the crate's `sync` shim, so it
//!    runs on loom atomics here).
//! 2. **Slot reservation** — the real [`SlotTable`].
//! 3. **Scheduler ↔ core register hand-off** — over the loom device of [`loom_hal`], whose
//!    registers are ordered exactly as `pto_hal::Registers` promises (no barrier at all), so the
//!    runtime's own `wmb` / `rmb` are what the models check. The AICPU side is `sched.rs`'s
//!    per-core logic with the real [`decide`] and [`regs::next_id`]; the core side is either a
//!    transcription of `exec.rs`'s loop or the real [`aicore_entry`] (end to end, with the real
//!    handshake, window, dispatch, kernel output, FIN, retirement and gate).
//! 4. **Teardown gate** — the real [`retire_group`] and [`wait_release`] over the loom device:
//!    a core leaves only on the AICPU's release or abandonment, never on its own budget.
//!
//! What loom does **not** cover, so these models do not either:
//!
//! * Load buffering (a load reading a store that comes later in the interleaving) is not
//!   modelled, so a missing barrier between a core's payload **read** and its later ACK store
//!   would go unnoticed.
//! * Loom 0.7's partial-order reduction only remembers the last access to each atomic, so it
//!   can miss interleavings in which one thread's early load should be moved after another
//!   thread's load-then-RMW (tokio-rs/loom#392, #166). The models therefore keep every
//!   protocol participant in a spawned thread, run under several spawn orders, and assert that
//!   each interesting outcome is actually reached.
//! * Loom does not guarantee that a thread spinning with `yield_now` is eventually served the
//!   newest value (seen with the ready queue: a consumer read a published slot's initial
//!   sequence number ~60 times across yields), so models where several threads wait for each
//!   other bound those waits or use a preemption bound, and check the result afterwards.
//! * Preemption-bounded models (marked as such) cover every interleaving with at most that many
//!   preemptions, not every interleaving. `LOOM_MAX_PREEMPTIONS` overrides every model's bound.
//! * The transcribed AICPU and core loops are only as faithful as the transcription: they
//!   mirror `sched.rs` / `exec.rs` as of this writing and must follow changes there.
#![cfg(loom)]

mod loom_hal;

mod loom_harness;

use std::any::Any;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::thread;
use loom_harness::{Tally, check};
use pto_hal::{
    AicoreAgent, AicoreCache, AicoreLaunch, Barriers, Clock, CoreRegisters, CoreType, Events, GmAddr, GmMemory,
    GmMemoryExt, Reg, Registers,
};
use pto_runtime::exec::aicpu::queue::{Full, ReadyQueue};
use pto_runtime::exec::entry::aicore_entry;
use pto_runtime::exec::legacy::cond::decide;
use pto_runtime::host::slots::{Refused, SlotTable};
use pto_runtime::layout::{ARGS_HEAD, ArgsHeader, DispatchPayload, Handshake, offsets, regs};
use pto_runtime::lifecycle::{self, Release, Retired, RunMap, retire_group, wait_release};
use zerocopy::IntoBytes;

use loom_hal::{Budgets, Device, GmPlan, LoomAicpu, LoomCore, RegOrder, initial_gm};

/// One protocol participant, type-erased so that participants of different types can be spawned
/// in any order.
type Job = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;

/// Wrap a participant as a [`Job`].
fn job<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Job {
    Box::new(move || Box::new(f()) as Box<dyn Any + Send>)
}

/// The results of [`run_jobs`], by job index.
struct Joined(Vec<Option<Box<dyn Any + Send>>>);

impl Joined {
    /// The result of job `i`.
    fn take<R: 'static>(&mut self, i: usize) -> R {
        match self.0[i].take().map(|b| b.downcast::<R>()) {
            Some(Ok(r)) => *r,
            _ => panic!("job {i}: result missing or of another type"),
        }
    }
}

/// Spawn `jobs` in the order `order` (a permutation of their indices), join them all.
fn run_jobs(order: &[usize], jobs: Vec<Job>) -> Joined {
    assert_eq!(order.len(), jobs.len());
    let mut jobs: Vec<Option<Job>> = jobs.into_iter().map(Some).collect();
    let handles: Vec<_> =
        order.iter().map(|&i| (i, thread::spawn(jobs[i].take().expect("job spawned twice")))).collect();
    let mut out: Vec<Option<Box<dyn Any + Send>>> = (0..jobs.len()).map(|_| None).collect();
    for (i, h) in handles {
        out[i] = Some(h.join().unwrap());
    }
    Joined(out)
}

/// Both spawn orders of two participants.
const ORDERS_2: [&[usize]; 2] = [&[0, 1], &[1, 0]];
/// All spawn orders of three participants.
const ORDERS_3: [&[usize]; 6] = [&[0, 1, 2], &[0, 2, 1], &[1, 0, 2], &[1, 2, 0], &[2, 0, 1], &[2, 1, 0]];

// ---------------------------------------------------------------------------------------------
// 1. Ready queue
// ---------------------------------------------------------------------------------------------

/// Push `v`, retrying while the queue reports `Full`; every `Full` must hand back `v` itself.
/// Returns how many times the push was refused.
fn push_retrying(q: &ReadyQueue, v: u32) -> usize {
    let mut refused = 0;
    loop {
        match q.push(v) {
            Ok(()) => return refused,
            Err(Full(back)) => {
                assert_eq!(back, v, "Full handed back a different value");
                refused += 1;
                thread::yield_now();
            }
        }
    }
}

/// Pop until `n` values arrived; returns them in pop order.
fn pop_n(q: &ReadyQueue, n: usize) -> Vec<u32> {
    let mut got = Vec::new();
    while got.len() < n {
        match q.pop() {
            Some(v) => got.push(v),
            None => thread::yield_now(),
        }
    }
    got
}

/// Ready queue, capacity 2, one producer pushing 1, 2, 3 (retrying on `Full`) and one consumer
/// popping three values, so the producer wraps around the ring and meets a full queue; both
/// spawn orders. Invariant: the consumer receives exactly `[1, 2, 3]` — every value once, in
/// order, nothing that was not pushed; every `Full` hands back the value being pushed and loses
/// nothing; the queue ends empty. Reached: a push refused as `Full`.
#[test]
fn queue_one_producer_one_consumer_through_full() {
    let fulls = Tally::new(1);
    for order in ORDERS_2 {
        let tally = fulls.clone();
        check("queue_one_producer_one_consumer_through_full", None, move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            assert_eq!(q.capacity(), 2);
            let (qp, qc, tally) = (q.clone(), q.clone(), tally.clone());
            let producer = job(move || {
                for v in 1..=3 {
                    if push_retrying(&qp, v) > 0 {
                        tally.hit(0);
                    }
                }
            });
            let consumer = job(move || pop_n(&qc, 3));
            let mut r = run_jobs(order, vec![producer, consumer]);
            r.take::<()>(0);
            assert_eq!(r.take::<Vec<u32>>(1), [1, 2, 3], "lost, duplicated, invented or reordered value");
            assert_eq!(q.pop(), None, "queue not empty after every value was delivered");
        });
    }
    fulls.assert_all_reached(&["push refused as Full"]);
}

/// Ready queue, capacity 2, already full with 1 and 2: one producer tries once to push 3 while
/// one consumer pops once; both spawn orders. Invariant: the pop returns the head (1); the push
/// either succeeds or returns `Full(3)`, and the queue then holds exactly `[2, 3]` or `[2]`
/// accordingly — a refused value is handed back and never also enqueued, an accepted one is
/// never lost. Reached: both outcomes.
#[test]
fn queue_full_hands_the_value_back() {
    let outcomes = Tally::new(2);
    for order in ORDERS_2 {
        let t = outcomes.clone();
        check("queue_full_hands_the_value_back", None, move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            q.push(1).unwrap();
            q.push(2).unwrap();
            assert_eq!(q.push(9), Err(Full(9)), "a full queue accepted a value");
            let (qc, qp) = (q.clone(), q.clone());
            let mut r = run_jobs(order, vec![job(move || qc.pop()), job(move || qp.push(3))]);
            assert_eq!(r.take::<Option<u32>>(0), Some(1));
            let mut rest = Vec::new();
            while let Some(v) = q.pop() {
                rest.push(v);
            }
            match r.take::<Result<(), Full>>(1) {
                Ok(()) => {
                    assert_eq!(rest, [2, 3]);
                    t.hit(0);
                }
                Err(Full(v)) => {
                    assert_eq!(v, 3);
                    assert_eq!(rest, [2]);
                    t.hit(1);
                }
            }
        });
    }
    outcomes.assert_all_reached(&["push accepted", "push refused"]);
}

/// Push each of `values` in order, trying each up to `tries` times (yielding after a `Full`);
/// every `Full` must hand back the value being pushed. Returns the values accepted.
fn push_bounded(q: &ReadyQueue, values: &[u32], tries: usize) -> Vec<u32> {
    let mut accepted = Vec::new();
    for &v in values {
        for _ in 0..tries {
            match q.push(v) {
                Ok(()) => {
                    accepted.push(v);
                    break;
                }
                Err(Full(back)) => {
                    assert_eq!(back, v, "Full handed back a different value");
                    thread::yield_now();
                }
            }
        }
    }
    accepted
}

/// Ready queue, capacity 2, two producers (one pushes 1 then 2, the other 3, each value tried
/// up to three times) and one consumer popping up to five times (yielding when empty); the
/// queue is drained after the join; producers spawned before and after the consumer.
/// Invariant: the values popped plus the values drained are exactly the values accepted — each
/// once, none lost, none invented, no refused value ever delivered (a `Full` hands its value
/// back and keeps nothing); one producer's accepted values come out in push order. Reached: a
/// push refused as `Full`, and all three values accepted. (Every wait is bounded: loom 0.7 can
/// serve a spinning thread the same stale value across yields, see the module docs.)
/// Preemption bound 3 (unbounded, it runs for many minutes).
#[test]
fn queue_two_producers_one_consumer() {
    let outcomes = Tally::new(2);
    for order in [&[0usize, 1, 2][..], &[2, 0, 1]] {
        let tally = outcomes.clone();
        check("queue_two_producers_one_consumer", Some(3), move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            let (q1, q2, qc) = (q.clone(), q.clone(), q.clone());
            let p1 = job(move || push_bounded(&q1, &[1, 2], 3));
            let p2 = job(move || push_bounded(&q2, &[3], 3));
            let consumer = job(move || {
                let mut got = Vec::new();
                for _ in 0..5 {
                    match qc.pop() {
                        Some(v) => got.push(v),
                        None => thread::yield_now(),
                    }
                }
                got
            });
            let mut r = run_jobs(order, vec![p1, p2, consumer]);
            let (a1, a2) = (r.take::<Vec<u32>>(0), r.take::<Vec<u32>>(1));
            let mut delivered = r.take::<Vec<u32>>(2);
            while let Some(v) = q.pop() {
                delivered.push(v);
            }
            let mut accepted: Vec<u32> = a1.iter().chain(&a2).copied().collect();
            let mut sorted = delivered.clone();
            accepted.sort_unstable();
            sorted.sort_unstable();
            assert_eq!(sorted, accepted, "delivered values differ from the accepted ones");
            let p1_order: Vec<u32> = delivered.iter().copied().filter(|&v| v != 3).collect();
            assert_eq!(p1_order, a1, "one producer's values out of order");
            if a1.len() + a2.len() < 3 {
                tally.hit(0);
            } else {
                tally.hit(1);
            }
        });
    }
    outcomes.assert_all_reached(&["a value refused as Full", "every value accepted"]);
}

/// Ready queue, capacity 2, two producers (values 1 and 2) and two consumers that each try up
/// to three times (yielding in between) to pop one value; producers spawned before and after
/// the consumers; whatever the consumers did not take is drained after the join. Invariant:
/// every push succeeds; the values the consumers took plus the values left in the queue are
/// exactly 1 and 2 — each value exactly once, to exactly one taker, nothing that was not pushed.
/// Reached: both consumers served. (Consumers give up instead of spinning until served: loom
/// 0.7 can serve a spinning reader the same stale slot sequence number across yields, so an
/// unbounded wait there exceeds loom's branch limit without any fault in the queue.)
/// Preemption bound 2 (bound 3 takes minutes).
#[test]
fn queue_two_producers_two_consumers() {
    let outcomes = Tally::new(1);
    for order in [&[0usize, 1, 2, 3][..], &[2, 3, 0, 1]] {
        let tally = outcomes.clone();
        check("queue_two_producers_two_consumers", Some(2), move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            let mut jobs: Vec<Job> = [1u32, 2]
                .into_iter()
                .map(|v| {
                    let q = q.clone();
                    job(move || assert_eq!(q.push(v), Ok(()), "spurious Full"))
                })
                .collect();
            for _ in 0..2 {
                let q = q.clone();
                jobs.push(job(move || {
                    for _ in 0..3 {
                        if let Some(v) = q.pop() {
                            return Some(v);
                        }
                        thread::yield_now();
                    }
                    None
                }));
            }
            let mut r = run_jobs(order, jobs);
            let taken = [r.take::<Option<u32>>(2), r.take::<Option<u32>>(3)];
            if taken.iter().all(Option::is_some) {
                tally.hit(0);
            }
            let mut all: Vec<u32> = taken.into_iter().flatten().collect();
            while let Some(v) = q.pop() {
                all.push(v);
            }
            all.sort_unstable();
            assert_eq!(all, [1, 2], "a value lost, duplicated or invented");
        });
    }
    outcomes.assert_all_reached(&["both consumers served"]);
}

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

// ---------------------------------------------------------------------------------------------
// 3. Scheduler ↔ core register hand-off
// ---------------------------------------------------------------------------------------------

/// The physical id of the modelled core (not 0, so a physical/worker mix-up would show).
const PHYS: u32 = 1;
/// The worker index of the modelled core.
const WORKER: u32 = 0;
/// Physical cores of the loom device.
const CORES: u32 = 2;
/// The run's epoch (non-zero: gate words start at 0).
const EPOCH: u64 = 7;
/// Graph task ids dispatched, in order (arbitrary, distinct from the dispatch ids).
const TASKS: [u32; 3] = [40, 41, 42];

/// One subtask in a core slot: graph task id and per-core dispatch id.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Sub {
    task: u32,
    reg: u32,
}

/// One task to dispatch: graph task id and the GM address of its argument record (0: none).
#[derive(Copy, Clone, Debug)]
struct Work {
    task: u32,
    args: u64,
}

/// The AICPU side for one core, transcribed from `sched.rs`: `Scheduler::poll_completions`
/// (COND read, skip if unchanged, `rmb`, the real [`decide`], slot transitions) and
/// `Scheduler::dispatch` / `assign` (the real [`regs::next_id`], payload into buffer `id & 1`,
/// then `wmb` and DMB := id; a new dispatch only into an idle core, or into the pending slot of
/// a running one the core has acknowledged). Dispatches `work` in order and returns once every
/// task completed, with the tasks in completion order. `on_complete` runs for each completion,
/// right where the scheduler would release the task's consumers.
fn aicpu_dispatch(a: &LoomAicpu, map: &RunMap, work: &[Work], mut on_complete: impl FnMut(Sub)) -> Vec<u32> {
    let mut running: Option<Sub> = None;
    let mut pending: Option<Sub> = None;
    let mut acked = false;
    let mut seq = 0u32;
    let mut last_cond = 0u32;
    let mut next = 0;
    let mut completed = Vec::new();
    while completed.len() < work.len() {
        // Scheduler::poll_completions, for this one core.
        if running.is_some() {
            let v = a.read_reg(PHYS, Reg::Cond);
            if v != last_cond {
                a.rmb();
                last_cond = v;
                let d = decide(v, running.map(|r| r.reg), pending.map(|p| p.reg));
                let mut finished: [Option<Sub>; 2] = [None, None];
                if d.running_done {
                    finished[0] = running.take();
                }
                if d.pending_done {
                    finished[1] = pending.take();
                }
                if d.promote {
                    running = pending.take();
                    acked = d.running_acked;
                } else if d.running_acked {
                    acked = true;
                }
                if running.is_none() {
                    acked = false;
                }
                for sub in finished.into_iter().flatten() {
                    assert!(!completed.contains(&sub.task), "task {} completed twice", sub.task);
                    on_complete(sub);
                    completed.push(sub.task);
                }
            }
        }
        // Scheduler::dispatch / assign, for this one core.
        let idle = running.is_none();
        let can_pend = running.is_some() && acked && pending.is_none();
        if next < work.len() && (idle || can_pend) {
            seq = regs::next_id(seq);
            let reg = seq;
            let w = work[next];
            let p = DispatchPayload {
                bin: loom_hal::KERNEL_BIN,
                args: w.args,
                task_id: w.task,
                block_idx: 0,
                block_num: 1,
                lane: 0,
                reg_task_id: reg,
                reserved0: 0,
                reserved: [0; 3],
            };
            a.write(map.payload(WORKER, reg & 1), p.as_bytes());
            let sub = Sub { task: w.task, reg };
            if idle {
                running = Some(sub);
                acked = false;
            } else {
                pending = Some(sub);
            }
            a.wmb();
            a.write_reg(PHYS, Reg::Dmb, reg);
            next += 1;
        } else if completed.len() < work.len() {
            a.wait_for_event(u64::MAX);
        }
    }
    completed
}

/// The AICore side, transcribed from `exec.rs` (`aicore_entry`'s loop and `run_one`): read
/// DMB; EXIT → store barrier, COND := EXITED, leave; unchanged / IDLE / 0 → wait; otherwise
/// `rmb`, read the payload of buffer `id & 1`, COND := ACK(id), "run" (record the payload's
/// task id as what dispatch `id` ran), store barrier, COND := FIN(id). Returns `(dispatch id,
/// payload task id, payload dispatch id)` for every dispatch it ran.
fn core_loop(c: &LoomCore, map: &RunMap, ran: &[AtomicU32]) -> Vec<(u32, u32, u32)> {
    let mut runs = Vec::new();
    let mut last = regs::DMB_IDLE;
    loop {
        let v = c.read_dmb();
        if v == regs::DMB_EXIT {
            c.store_barrier();
            c.write_cond(regs::COND_EXITED);
            break;
        }
        if v == last || v == regs::DMB_IDLE || v == 0 {
            c.wait_for_event(u64::MAX);
            continue;
        }
        c.rmb();
        last = v;
        let at = map.payload(WORKER, v & 1);
        c.observe_line(at);
        let mut p = DispatchPayload::default();
        c.read(at, p.as_mut_bytes());
        c.write_cond(regs::ack(v));
        assert!(c.resolve_kernel(p.bin).is_some(), "payload of dispatch {v} names no kernel (stale buffer)");
        ran[v as usize].store(p.task_id, Ordering::Relaxed);
        runs.push((v, p.task_id, p.reg_task_id));
        c.store_barrier();
        c.write_cond(regs::fin(v));
    }
    runs
}

/// One AICPU thread dispatches `tasks` back to back to one core running [`core_loop`], then
/// sends EXIT and waits for EXITED; checks the whole run.
fn dispatch_model(tasks: &'static [u32], order: &'static [usize]) {
    let plan = GmPlan::new(1, 0);
    let map = plan.run_map(1, CORES, EPOCH, Budgets::NEVER);
    let dev = Device::new(
        &initial_gm(&plan, &map.cfg),
        CORES as usize,
        regs::DMB_IDLE,
        regs::COND_IDLE,
        RegOrder::HalContract,
    );
    // ran[id] = task id the core found in dispatch `id`'s payload (0 = not run yet).
    let ran: Arc<Vec<AtomicU32>> = Arc::new((0..=tasks.len()).map(|_| AtomicU32::new(0)).collect());
    let core = {
        let (dev, ran) = (dev.clone(), ran.clone());
        job(move || core_loop(&LoomCore { dev, phys: PHYS }, &map, &ran))
    };
    let aicpu = {
        let (dev, ran) = (dev.clone(), ran.clone());
        job(move || {
            let a = LoomAicpu { dev };
            let work: Vec<Work> = tasks.iter().map(|&task| Work { task, args: 0 }).collect();
            let completed = aicpu_dispatch(&a, &map, &work, |sub| {
                // The core's FIN for this dispatch (or a later COND value implying it) was
                // observed: the core must have run it, with this task's payload.
                let saw = ran[sub.reg as usize].load(Ordering::Relaxed);
                assert_eq!(saw, sub.task, "task {} completed before the core ran dispatch {}", sub.task, sub.reg);
            });
            a.wmb();
            a.write_reg(PHYS, Reg::Dmb, regs::DMB_EXIT);
            loom_hal::spin_until(|| a.read_reg(PHYS, Reg::Cond) == regs::COND_EXITED);
            completed
        })
    };
    let mut r = run_jobs(order, vec![core, aicpu]);
    let runs = r.take::<Vec<(u32, u32, u32)>>(0);
    // Dispatch ids are 1, 2, 3, …: the core ran each exactly once, in order, none skipped,
    // each with the payload written for that id.
    let want: Vec<(u32, u32, u32)> = tasks.iter().enumerate().map(|(i, &t)| (i as u32 + 1, t, i as u32 + 1)).collect();
    assert_eq!(runs, want, "core ran a dispatch twice, skipped one, or read a stale/other-buffer payload");
    assert_eq!(r.take::<Vec<u32>>(1), tasks, "each task completes exactly once, in dispatch order");
}

/// Register hand-off, two dispatches to one core (dispatch ids 1 and 2, payload buffers 1 and
/// 0), both spawn orders. The second goes into the pending slot once COND shows ACK(1), or into
/// the idle core once FIN(1) was seen — whichever the interleaving makes `sched.rs` choose.
/// Invariant: the core runs dispatch 1 then 2, each exactly once, each with the payload written
/// for that id (never a stale or other-buffer payload), none skipped; the AICPU marks each task
/// complete exactly once and only after the core ran it (its FIN, or a later COND value
/// implying it, was observed); EXIT is acknowledged. Preemption bound 4 (unbounded, the spin
/// loops make it run for many minutes).
#[test]
fn dispatch_two_back_to_back() {
    for order in ORDERS_2 {
        check("dispatch_two_back_to_back", Some(4), move || dispatch_model(&TASKS[..2], order));
    }
}

/// Register hand-off, three dispatches to one core: dispatch 3 reuses payload buffer 1, which
/// dispatch 1 used. Same invariant as [`dispatch_two_back_to_back`]; additionally buffer 1 is
/// rewritten only after the core has read it (else the core would run task 42 as dispatch 1,
/// or a torn payload). Preemption bound 3, one spawn order, to stay under half a minute.
#[test]
fn dispatch_three_reuses_a_payload_buffer() {
    check("dispatch_three_reuses_a_payload_buffer", Some(3), || dispatch_model(&TASKS, &[0, 1]));
}

/// GM address of task `k`'s argument record in `plan`'s free space, and of its output word.
fn args_of(plan: &GmPlan, k: usize) -> (u64, u64) {
    let args = plan.extra + 64 * k as u64;
    // The header, one scalar, then the output word (all inside the task's 64 bytes).
    const _: () = assert!(ARGS_HEAD + 16 <= 64);
    (args, args + ARGS_HEAD + 8)
}

/// Initial GM for the end-to-end models: the descriptor, and per task an argument record with
/// no tensor and one scalar naming the task's output word (zero until its kernel ran). With
/// `previous_run`, the core's handshake line still holds its report of the previous run (epoch
/// `EPOCH - 1`, same worker, type and physical id), as it does in steady state on a device
/// whose worker → core mapping does not change; otherwise the line is zero, as on a fresh slot.
fn e2e_gm(plan: &GmPlan, map: &RunMap, tasks: usize, previous_run: bool) -> Vec<u64> {
    let mut gm = initial_gm(plan, &map.cfg);
    if previous_run {
        let old = Handshake {
            aicore_done: WORKER + 1,
            core_type: CoreType::Aic as u32,
            physical_core_id: PHYS,
            report_epoch: EPOCH - 1,
            ..Handshake::default()
        };
        let i = ((map.handshake(WORKER).0 - loom_hal::GM_BASE) / 8) as usize;
        for (k, chunk) in old.as_bytes().chunks_exact(8).enumerate() {
            gm[i + k] = u64::from_le_bytes(chunk.try_into().unwrap());
        }
    }
    for k in 0..tasks {
        let (args, out) = args_of(plan, k);
        let i = ((args - loom_hal::GM_BASE) / 8) as usize;
        let h = ArgsHeader { tensors: 0, scalars: 1, ..ArgsHeader::default() };
        for (w, chunk) in h.as_bytes().chunks_exact(8).enumerate() {
            gm[i + w] = u64::from_le_bytes(chunk.try_into().unwrap());
        }
        gm[i + (ARGS_HEAD / 8) as usize] = out;
    }
    gm
}

/// The real AICore program, as the stream would launch it on the modelled core.
fn real_core(dev: Arc<Device>, plan: &GmPlan) -> Job {
    let launch =
        AicoreLaunch { block_idx: WORKER, core_type: CoreType::Aic, physical_core_id: PHYS, args: GmAddr(plan.desc) };
    job(move || aicore_entry(&LoomCore { dev, phys: PHYS }, launch))
}

/// AICPU: `Scheduler::handshake` for one core — poll the real report, validate it, open the
/// window — until `deadline`; past it, cancel the window through the gate (as `handshake`
/// does for cores it never opened). Returns the physical id, or `None` when cancelled.
fn aicpu_handshake(a: &LoomAicpu, map: &RunMap, deadline: u64) -> Option<u32> {
    loop {
        if let Some(hs) = lifecycle::poll_report(a, map, WORKER) {
            lifecycle::check_report(&hs, WORKER, &map.cfg).expect("a valid report was rejected");
            lifecycle::open_window(a, hs.physical_core_id);
            return Some(hs.physical_core_id);
        }
        if a.now_ticks() >= deadline {
            lifecycle::cancel_window(a, map, WORKER);
            return None;
        }
        a.wait_for_event(deadline);
    }
}

/// End-to-end legacy route on one core, `n` tasks, spawn order `order`: the real
/// `aicore_entry` on the core; on the AICPU the real handshake pieces, the `sched.rs` dispatch
/// transcription and the real `retire_group`. No budget expires.
fn end_to_end_model(n: usize, order: &'static [usize], previous_run: bool) {
    let plan = GmPlan::new(1, 64 * n as u64);
    let map = plan.run_map(1, CORES, EPOCH, Budgets::NEVER);
    let dev = Device::new(&e2e_gm(&plan, &map, n, previous_run), CORES as usize, 0, 0, RegOrder::HalContract);
    let aicpu = {
        let dev = dev.clone();
        job(move || {
            let a = LoomAicpu { dev };
            assert_eq!(aicpu_handshake(&a, &map, u64::MAX), Some(PHYS));
            let work: Vec<Work> = (0..n).map(|k| Work { task: TASKS[k], args: args_of(&plan, k).0 }).collect();
            let completed = aicpu_dispatch(&a, &map, &work, |sub| {
                // The kernel's output must be visible once its FIN (or a later COND) was seen.
                let k = TASKS.iter().position(|&t| t == sub.task).unwrap();
                let out = a.read_u64(GmAddr(args_of(&plan, k).1));
                assert_eq!(out, u64::from(sub.task), "task {} completed before its output was visible", sub.task);
            });
            let mut exited = [false];
            let r = retire_group(&a, &map, &[(WORKER, PHYS)], &mut exited);
            (completed, r)
        })
    };
    let mut r = run_jobs(order, vec![real_core(dev.clone(), &plan), aicpu]);
    assert_eq!(r.take::<i32>(0), 0, "the core program failed");
    let (completed, retired) = r.take::<(Vec<u32>, Retired)>(1);
    assert_eq!(completed, &TASKS[..n], "each task completes exactly once, in dispatch order");
    assert_eq!(retired, Retired { released: 1, silent: None });
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CLAIMED)), 0, "the core latched a fault (stale payload?)");
    assert_eq!(dev.peek(map.gate(WORKER)), EPOCH);
    assert_eq!(dev.closes(PHYS), 1);
}

/// End to end on one core with the real AICore program (`exec.rs` `aicore_entry`): report,
/// window, two dispatches, each running the kernel (which stores its task id to an output word
/// named by its argument record), FIN, EXIT, EXITED, gate — against the AICPU's real
/// `poll_report` / `check_report` / `open_window`, the `sched.rs` dispatch transcription and
/// the real `retire_group`. Invariant: the report is accepted and the
/// window opened; the core runs each dispatch with its own payload (the executor's own
/// `reg_task_id` check never latches a fault); the AICPU completes each task exactly once and
/// only when the kernel's output is visible; the core is closed once, released with the
/// epoch, and its program returns 0. The handshake line starts with the previous run's report
/// (see [`handshake_first_run_can_accept_a_stale_physical_id`] for why a zero line fails).
/// Preemption bound 1 and one spawn order: every relaxed load of the report line may return
/// either of two stores, which multiplies the executions (bound 2 takes minutes).
#[test]
fn legacy_executor_end_to_end() {
    check("legacy_executor_end_to_end", Some(1), || end_to_end_model(2, &[0, 1], true));
}

/// A slot's first run: the handshake line starts zero. Invariant: the AICPU never accepts the
/// new epoch next to a stale physical id or core type — the core publishes its fields, then
/// the marker (`report_epoch`) alone (`lifecycle::report`), and the AICPU reads the marker,
/// issues `rmb`, then reads the fields (`lifecycle::poll_report`), as house rule 2 requires
/// (`docs/architecture.md` section 9).
/// (Before that order was kept, this model failed with no preemption at all: the AICPU opened
/// and drove physical core 0 instead of core 1.)
#[test]
fn handshake_first_run_can_accept_a_stale_physical_id() {
    check("handshake_first_run_can_accept_a_stale_physical_id", Some(0), || end_to_end_model(1, &[0, 1], false));
}

/// Handshake against the pre-window cancel: the real `aicore_entry` (with a budget that never
/// expires) against an AICPU whose handshake watchdog does (3 ticks of the device counter),
/// both spawn orders. The AICPU either accepts the report, opens the window and retires the
/// core (no task), or gives up and cancels the window through the gate. Invariant: the core
/// always leaves — loom would report a core spinning forever — and its program returns 0 in
/// both cases; a cancelled core never writes COND and is never closed or released; an opened
/// one is closed once and released with the epoch. Reached: both outcomes. Preemption bound 1
/// (bound 2: half a minute per spawn order).
#[test]
fn handshake_window_or_cancel() {
    let outcomes = Tally::new(2);
    for order in ORDERS_2 {
        let tally = outcomes.clone();
        check("handshake_window_or_cancel", Some(1), move || {
            let plan = GmPlan::new(1, 0);
            let map = plan.run_map(1, CORES, EPOCH, Budgets { watchdog: 3, ..Budgets::NEVER });
            let dev = Device::new(&e2e_gm(&plan, &map, 0, true), CORES as usize, 0, 0, RegOrder::HalContract);
            let aicpu = {
                let dev = dev.clone();
                job(move || {
                    let a = LoomAicpu { dev };
                    let deadline = a.now_ticks() + map.cfg.watchdog_ticks;
                    let phys = aicpu_handshake(&a, &map, deadline)?;
                    let mut exited = [false];
                    Some(retire_group(&a, &map, &[(WORKER, phys)], &mut exited))
                })
            };
            let mut r = run_jobs(order, vec![real_core(dev.clone(), &plan), aicpu]);
            assert_eq!(r.take::<i32>(0), 0, "the core program failed");
            match r.take::<Option<Retired>>(1) {
                Some(retired) => {
                    assert_eq!(retired, Retired { released: 1, silent: None });
                    assert_eq!(dev.peek(map.gate(WORKER)), EPOCH);
                    assert_eq!(dev.closes(PHYS), 1);
                    tally.hit(0);
                }
                None => {
                    assert_eq!(dev.peek(map.gate(WORKER)), lifecycle::cancel_value(EPOCH));
                    assert_eq!(dev.cond(PHYS), 0, "a cancelled core wrote COND");
                    assert_eq!(dev.closes(PHYS), 0);
                    tally.hit(1);
                }
            }
            assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CLAIMED)), 0, "a fault was latched");
        });
    }
    outcomes.assert_all_reached(&["window opened", "window cancelled"]);
}

// ---------------------------------------------------------------------------------------------
// 4. Teardown gate
// ---------------------------------------------------------------------------------------------

/// The AICore's exit path, transcribed from `exec.rs`: wait for DMB == EXIT, store barrier,
/// COND := EXITED, then the real [`wait_release`] on its gate, with budget `core_wait_ticks`
/// (past it the core latches RELEASE_TIMEOUT and keeps waiting). On a released return, checks
/// that the AICPU's close of this core's window completed first; on an abandoned one, that the
/// window was never closed. Either way the core then leaves: from then on any AICPU access to
/// its registers fails the model. Returns what `wait_release` returned.
fn core_exit(c: &LoomCore, map: &RunMap, worker: u32) -> Release {
    loom_hal::spin_until(|| c.read_dmb() == regs::DMB_EXIT);
    c.store_barrier();
    c.write_cond(regs::COND_EXITED);
    let r = wait_release(c, map, worker, map.cfg.core_wait_ticks);
    match r {
        Release::Released => {
            assert!(c.dev.closed(c.phys), "core {} released before the AICPU closed its window", c.phys)
        }
        Release::Abandoned => assert!(!c.dev.closed(c.phys), "core {} abandoned after its window was closed", c.phys),
    }
    c.dev.mark_left(c.phys);
    r
}

/// Whether the run latched RELEASE_TIMEOUT for `worker` (checked: any latched fault must be
/// that one).
fn escalated(dev: &Device, map: &RunMap, worker: u32) -> bool {
    if dev.peek(map.desc.offset(offsets::FATAL_CLAIMED)) == 0 {
        return false;
    }
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CODE)), 206, "only RELEASE_TIMEOUT may be latched here");
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_SITE)), 11, "site Gate");
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CORE)), u64::from(worker), "the waiting core is named");
    true
}

/// What [`retire_model`] observed.
struct RetireRun {
    retired: Retired,
    exited: Vec<bool>,
    released: Vec<Release>,
    dev: Arc<Device>,
    map: RunMap,
}

/// One AICPU retires the cores `group` (`(worker, physical id)` pairs, all windows open and
/// idle) with the real `retire_group`; a core thread runs [`core_exit`] for each physical id
/// in `alive` (the others never acknowledge EXIT). The AICPU is spawned first or last; the
/// registers are ordered as `reg_order`.
fn retire_model(
    group: &'static [(u32, u32)],
    alive: &'static [u32],
    budgets: Budgets,
    aicpu_first: bool,
    reg_order: RegOrder,
) -> RetireRun {
    retire_model_from(group, alive, budgets, aicpu_first, reg_order, 0)
}

/// [`retire_model`] with every gate of the group starting at `gate` (0: a fresh slot; an
/// earlier epoch: what the previous run's release left).
fn retire_model_from(
    group: &'static [(u32, u32)],
    alive: &'static [u32],
    budgets: Budgets,
    aicpu_first: bool,
    reg_order: RegOrder,
    gate: u64,
) -> RetireRun {
    let plan = GmPlan::new(2, 0);
    let map = plan.run_map(2, CORES, EPOCH, budgets);
    let mut gm = initial_gm(&plan, &map.cfg);
    for &(w, _) in group {
        gm[((map.gate(w).0 - loom_hal::GM_BASE) / 8) as usize] = gate;
    }
    let dev = Device::new(&gm, CORES as usize, regs::DMB_IDLE, regs::COND_IDLE, reg_order);
    let mut jobs = vec![{
        let dev = dev.clone();
        job(move || {
            let mut exited = vec![false; group.len()];
            let r = retire_group(&LoomAicpu { dev }, &map, group, &mut exited);
            (r, exited)
        })
    }];
    for &phys in alive {
        let worker = group.iter().find(|&&(_, p)| p == phys).expect("alive core not in the group").0;
        let dev = dev.clone();
        jobs.push(job(move || core_exit(&LoomCore { dev, phys }, &map, worker)));
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    if !aicpu_first {
        order.rotate_left(1);
    }
    let mut r = run_jobs(&order, jobs);
    let (retired, exited) = r.take::<(Retired, Vec<bool>)>(0);
    let released = (1..=alive.len()).map(|i| r.take::<Release>(i)).collect();
    RetireRun { retired, exited, released, dev, map }
}

/// Budgets of the teardown models: the AICPU's EXIT budget and the core's gate budget expire
/// after a few clock reads, so both the acknowledged and the silent path are explored.
const SHORT: Budgets = Budgets { watchdog: u64::MAX / 4, exit: 3, core_wait: 4 };

/// Teardown gate, one core: the real `retire_group` (EXIT, quiesce with a deadline, close +
/// read-back, `rmb`, RELEASE) against a core running `exec.rs`'s exit path and the real
/// `wait_release`; both spawn orders, and registers ordered both as the HAL promises and as
/// the simulator implements them. The device clock advances on every read, so either
/// deadline can expire. Invariant: the core returns released only after the AICPU's
/// `close_window` for it completed; after it returned (released or abandoned) the AICPU never
/// touches its registers; an acknowledged core is closed exactly once and its gate holds the
/// epoch; a core reported silent is neither closed nor released — its gate holds the cancel
/// value (abandoned) — and returns abandoned, never released. A fault, if any, is the core's
/// RELEASE_TIMEOUT. Reached: "released" and "silent".
#[test]
fn retire_releases_only_after_close() {
    let outcomes = Tally::new(2);
    for (aicpu_first, reg_order) in [
        (true, RegOrder::HalContract),
        (false, RegOrder::HalContract),
        (true, RegOrder::Simulator),
        (false, RegOrder::Simulator),
    ] {
        let tally = outcomes.clone();
        check("retire_releases_only_after_close", None, move || {
            let run = retire_model(&[(0, 1)], &[1], SHORT, aicpu_first, reg_order);
            let RetireRun { retired, exited, released, dev, map } = run;
            let _ = escalated(&dev, &map, 0);
            if exited[0] {
                assert_eq!(retired, Retired { released: 1, silent: None });
                assert_eq!(dev.closes(1), 1, "an acknowledged core is closed exactly once");
                assert_eq!(dev.peek(map.gate(0)), EPOCH);
                assert_eq!(released[0], Release::Released);
                tally.hit(0);
            } else {
                assert_eq!(retired, Retired { released: 0, silent: Some(0) });
                assert_eq!(dev.closes(1), 0, "a silent core's window was closed");
                assert_eq!(dev.peek(map.gate(0)), lifecycle::cancel_value(EPOCH), "a silent core was released");
                assert_eq!(released[0], Release::Abandoned, "a core the AICPU did not release left its gate released");
                tally.hit(1);
            }
        });
    }
    outcomes.assert_all_reached(&["released", "silent"]);
}

/// The gate of a reused slot: it starts with the RELEASE the previous run left (`EPOCH - 1`),
/// the resident and the legacy executor alike (both exit through this gate). Both spawn orders,
/// budgets that never expire. Invariant: this run's core never takes the old release — it
/// returns released only after this run's AICPU closed its window (`core_exit` checks), its
/// gate ends with this run's epoch, and it is closed once.
fn stale_release_model(aicpu_first: bool) {
    let run = retire_model_from(&[(0, 1)], &[1], Budgets::NEVER, aicpu_first, RegOrder::HalContract, EPOCH - 1);
    let RetireRun { retired, released, dev, map, .. } = run;
    assert_eq!(retired, Retired { released: 1, silent: None });
    assert_eq!(released[0], Release::Released);
    assert_eq!(dev.peek(map.gate(0)), EPOCH);
    assert_eq!(dev.closes(1), 1);
}

/// See [`stale_release_model`].
#[test]
fn retire_ignores_the_release_a_previous_run_left() {
    for aicpu_first in [true, false] {
        check("retire_ignores_the_release_a_previous_run_left", None, move || stale_release_model(aicpu_first));
    }
}

/// Reproducer: a gate that takes any release (`breakage::GATE_ANY_EPOCH`), in
/// [`stale_release_model`]. Loom must find the core leaving on the previous run's release,
/// before this run's AICPU closed its window. The switch is process-wide and no other model of
/// this file takes a lock against it: run this one alone (`.ci/run` does, `--test-threads=1`).
#[cfg(feature = "breakage")]
#[test]
fn reproducer_gate_takes_a_previous_runs_release() {
    loom_harness::expect_found(
        "reproducer_gate_takes_a_previous_runs_release",
        None,
        pto_runtime::breakage::GATE_ANY_EPOCH,
        &["released before the AICPU closed its window"],
        || stale_release_model(false),
    );
}

/// Teardown gate, two cores retired as a group with one shared deadline: worker 1 (phys 0)
/// never acknowledges EXIT; worker 0 (phys 1) runs the exit path; both spawn orders.
/// Invariant: `retire_group` always reports worker 1 as silent (it is first in the group),
/// never closes or releases it (its gate holds the cancel value: abandoned); the other core is
/// closed and released iff it acknowledged in time, and only after its close, else abandoned;
/// no AICPU register access after a core left its gate. Reached: the other core released, and
/// not.
#[test]
fn retire_never_releases_a_silent_core() {
    let outcomes = Tally::new(2);
    for aicpu_first in [true, false] {
        let tally = outcomes.clone();
        check("retire_never_releases_a_silent_core", None, move || {
            let run = retire_model(&[(1, 0), (0, 1)], &[1], SHORT, aicpu_first, RegOrder::HalContract);
            let RetireRun { retired, exited, released, dev, map } = run;
            let _ = escalated(&dev, &map, 0);
            assert_eq!(retired.silent, Some(1), "the silent core must be reported");
            assert!(!exited[0]);
            assert_eq!(dev.closes(0), 0, "the silent core's window was closed");
            assert_eq!(dev.peek(map.gate(1)), lifecycle::cancel_value(EPOCH), "the silent core was released");
            assert_eq!(retired.released, u32::from(exited[1]));
            assert_eq!(dev.peek(map.gate(0)), if exited[1] { EPOCH } else { lifecycle::cancel_value(EPOCH) });
            assert_eq!(dev.closes(1), u32::from(exited[1]));
            assert_eq!(released[0] == Release::Released, exited[1]);
            tally.hit(usize::from(exited[1]));
        });
    }
    outcomes.assert_all_reached(&["other core not acknowledged in time", "other core released"]);
}

/// Teardown gate with a core budget (2 ticks) far shorter than the AICPU's EXIT budget (8): the
/// core's gate wait runs out while the AICPU still owns it. (Before the gate wait had an
/// escalation instead of an exit, this model was an ignored reproducer,
/// `retire_gate_wait_timeout_lets_the_core_leave_early`: the core returned on its budget and
/// the AICPU then read its COND, closed its window and stored its gate — after it left.)
/// Invariant: the core never leaves while the AICPU may still own it — the loom device fails
/// the model on any AICPU register access after the core left; a core whose budget ran out
/// latched RELEASE_TIMEOUT at site `Gate` naming itself and went on waiting; it leaves only on
/// the AICPU's release (after the close) or abandonment (never closed); the gate and the
/// retirement report agree. Both spawn orders. Reached: released within the core's budget, and
/// released after the core escalated (the abandoned path is reached by
/// `retire_releases_only_after_close`).
#[test]
fn retire_gate_wait_never_leaves_while_the_aicpu_owns_the_core() {
    let outcomes = Tally::new(2);
    for aicpu_first in [true, false] {
        let tally = outcomes.clone();
        check("retire_gate_wait_never_leaves_while_the_aicpu_owns_the_core", None, move || {
            let budgets = Budgets { watchdog: u64::MAX / 4, exit: 8, core_wait: 2 };
            let run = retire_model(&[(0, 1)], &[1], budgets, aicpu_first, RegOrder::HalContract);
            let RetireRun { retired, exited, released, dev, map } = run;
            let escalated = escalated(&dev, &map, 0);
            if exited[0] {
                assert_eq!(retired, Retired { released: 1, silent: None });
                assert_eq!(released[0], Release::Released);
                assert_eq!(dev.peek(map.gate(0)), EPOCH);
                tally.hit(usize::from(escalated));
            } else {
                // Not reached with these budgets (loom serves a yielding AICPU's core first);
                // `retire_releases_only_after_close` reaches it.
                assert_eq!(retired, Retired { released: 0, silent: Some(0) });
                assert_eq!(released[0], Release::Abandoned);
                assert_eq!(dev.peek(map.gate(0)), lifecycle::cancel_value(EPOCH));
            }
        });
    }
    outcomes.assert_all_reached(&["released within the core's budget", "escalated (RELEASE_TIMEOUT), then released"]);
}
