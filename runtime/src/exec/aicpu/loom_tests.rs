//! Loom models of the AICPU schedulers' shared counters: `completed` (with [`all_done`]), the
//! `stop` flag (with the fault latch behind it) and the launch state's departure count
//! (`exec::aicpu::shared_state`: the last thread out records the run's count and frees the state).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std,breakage --lib exec::aicpu::loom_tests
//! ```
//!
//! Without `--cfg loom` this module is not compiled. Every model is one `#[test]` whose doc
//! comment states the invariant it checks.
//!
//! * **The code under test is the runtime's own**: [`share`] and [`Shared::depart`] (the launch
//!   state), [`Base`] with [`Base::fail`], [`Completions::complete`] and [`all_done`]. Its atomics
//!   are loom's under `--cfg loom` (`crate::sync`). The launch's scratch cell is the HAL's
//!   `core` atomic pointer, which loom does not track: the threads other than the booting one
//!   call `share` after a loom-visible flag says the state is published, standing for the
//!   cell's release/acquire hand-over. The race between publication and attachment is
//!   therefore not explored here (`shared_state`'s unit tests run it on real threads);
//!   everything after the hand-over is.
//! * **The task source is a toy** ([`Toy`]): tasks 0 and 1 run on AICPU threads 0 and 1 (each
//!   "runs" its task by writing its output cell, then completes it through the real
//!   [`Completions::complete`]); task 2 is a dummy consumer of both, completed inline by
//!   whichever thread releases it. The outputs are loom `UnsafeCell`s, so a read that is not
//!   ordered after its write is a data race loom reports.
//!
//! **Reproducers** run the same models with one ordering dropped through the `breakage`
//! switch (process-wide, so the tests of this file run under one lock): `Base::fail` raising
//! `stop` before it latches the fault (`STOP_BEFORE_LATCH`), and the departure count
//! decremented `Relaxed` with no `Acquire` fence before the free (`DEPART_RELAXED`).

use crate::loom_support::prelude::*;
use parking_lot::{Mutex, MutexGuard};

use crate::codes::{ErrorCode, SchedError, Site};
use crate::exec::aicpu::shared_state::share;
use crate::exec::aicpu::source::{Base, Completions, TaskInfo, TaskSource, all_done};
use crate::layout::{Shape, offsets};
use crate::lifecycle::{Fault, RunMap};
use crate::loom_support::hal::{Budgets, Device, GmPlan, LoomAicpu, RegOrder, initial_gm, spin_until};
use crate::loom_support::harness::check;
#[cfg(feature = "breakage")]
use crate::loom_support::harness::expect_found;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use loom::thread;
use pto_hal::{AicpuLaunch, GmAddr, GmAtomic};

/// The run's epoch.
const EPOCH: u64 = 3;
/// AICPU threads of the launch.
const THREADS: u32 = 2;
/// Tasks: 0 and 1 run, 2 is their dummy consumer.
const TASKS: u32 = 3;
/// The fault thread 1 raises in [`stop_model`].
const FAULT: ErrorCode = ErrorCode::Sched(SchedError::SchedulerTimeout);

/// Every test of this file holds this lock: the breakage switch is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock()
}

/// The outputs of tasks 0 and 1, and each thread's last use of the shared state: created
/// before the threads are spawned, shared by the toy state.
struct Cells {
    outputs: [UnsafeCell<u32>; 2],
    /// Written by thread `i` just before it departs; read when the state is freed.
    last_use: [UnsafeCell<u32>; 2],
    /// Times the state was freed.
    frees: AtomicUsize,
    /// Raised by the booting thread once `share` returned: the loom-visible image of the
    /// scratch cell's hand-over (see [`launch_model`]).
    published: AtomicBool,
}

/// The toy task source (see the module documentation).
struct Toy {
    base: Base,
    /// Producers of task 2 not finished yet.
    fanin: AtomicU32,
    cells: Arc<Cells>,
    blocks: [crate::sync::AtomicU32; 2],
}

// SAFETY: the `UnsafeCell`s in `cells` are loom's: every access goes through `with` /
// `with_mut`, and loom reports any access not ordered after a conflicting one. Each output
// cell has one writer (its task's thread), each `last_use` cell one writer (its thread).
unsafe impl Sync for Toy {}
// SAFETY: as above; the state moves to whichever thread departs last, which frees it.
unsafe impl Send for Toy {}

impl Drop for Toy {
    fn drop(&mut self) {
        // The last thread out frees the state: every thread's last use is ordered before it.
        for c in &self.cells.last_use {
            // SAFETY: loom checks this read is ordered after the cell's write.
            let v = c.with(|p| unsafe { *p });
            assert_eq!(v, 1, "the state was freed before a thread's last use of it");
        }
        self.cells.frees.fetch_add(1, Ordering::Relaxed);
    }
}

impl TaskSource for Toy {
    fn base(&self) -> &Base {
        &self.base
    }
    fn info(&self, t: u32) -> TaskInfo {
        TaskInfo {
            shape: if t == 2 { Shape::Dummy } else { Shape::Aiv },
            lanes: 0,
            bins: [0; 3],
            block_num: 1,
            args: 0,
            report_id: t,
            predicate: 0,
            sync_start: false,
        }
    }
    fn next_block(&self, t: u32) -> &crate::sync::AtomicU32 {
        &self.blocks[t.min(1) as usize]
    }
    fn subtasks_done(&self, t: u32) -> &crate::sync::AtomicU32 {
        &self.blocks[t.min(1) as usize]
    }
    fn finish<A: pto_hal::AicpuAgent>(&self, _a: &A, t: u32, ready: &mut Vec<u32>) {
        if t < 2 && self.fanin.fetch_sub(1, Ordering::AcqRel) == 1 {
            ready.push(2);
        }
    }
    fn total(&self) -> Option<u64> {
        Some(TASKS as u64)
    }
}

/// One launch of two AICPU threads on the loom device. Thread `i` attaches to the shared
/// state (thread 0 boots it), runs task `i` — or, when `fail_thread` is `i`, latches a fault
/// instead — waits until the run is done or stopped, checks what it must see then, and
/// departs. Returns the device and the descriptor, after both threads joined.
fn launch_model(fail_thread: Option<u32>) -> (Arc<Device>, RunMap, Arc<Cells>) {
    let plan = GmPlan::new(1, 0);
    let map = plan.run_map(1, 1, EPOCH, Budgets::NEVER);
    let dev = Device::new(&initial_gm(&plan, &map.cfg), 1, 0, 0, RegOrder::HalContract);
    let cells = Arc::new(Cells {
        outputs: [UnsafeCell::new(0), UnsafeCell::new(0)],
        last_use: [UnsafeCell::new(0), UnsafeCell::new(0)],
        frees: AtomicUsize::new(0),
        published: AtomicBool::new(false),
    });
    // The HAL's scratch cell: null at the start of the launch.
    let scratch = std::sync::Arc::new(std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()));
    let threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (dev, cells, scratch) = (dev.clone(), cells.clone(), scratch.clone());
            thread::spawn(move || {
                let a = LoomAicpu { dev };
                let launch = AicpuLaunch { thread_idx: i, thread_count: THREADS, args: map.desc, scratch: &scratch };
                let boot = || {
                    Some(Toy {
                        base: Base::new(&a, map, [4; Shape::QUEUED]),
                        fanin: AtomicU32::new(2),
                        cells: cells.clone(),
                        blocks: [crate::sync::AtomicU32::new(0), crate::sync::AtomicU32::new(0)],
                    })
                };
                // The hand-over itself goes through the HAL's scratch cell, a `core` atomic
                // loom does not see: the other threads attach once the booting thread has
                // published (a loom-visible release/acquire standing for the cell's), so the
                // state they use was built before. Everything after it is explored.
                if i != 0 {
                    spin_until(|| cells.published.load(Ordering::Acquire));
                }
                let shared = share(&a, &launch, 0, boot).expect("every thread attaches");
                if i == 0 {
                    cells.published.store(true, Ordering::Release);
                }
                let s: &Toy = &shared;
                if fail_thread == Some(i) {
                    let f = Fault { code: FAULT, site: Site::Stall, task: Some(i), core: None, detail: 0 };
                    s.base().fail(&a, f);
                } else {
                    // The task's kernel wrote its output; then the thread completes it.
                    // SAFETY: task `i`'s output has one writer, this thread.
                    cells.outputs[i as usize].with_mut(|p| unsafe { *p = i + 1 });
                    Completions::new().complete(&a, s, i);
                }
                spin_until(|| s.base().stop.load(Ordering::Acquire) || all_done(s));
                if s.base().stop.load(Ordering::Acquire) {
                    // Whoever stops sees the fault whole: claimed, its code, its record complete.
                    assert_ne!(a.query(map.desc.offset(offsets::FATAL_CLAIMED)), 0, "stopped with no fault latched");
                    assert_eq!(
                        a.query(map.desc.offset(offsets::FATAL_COMPLETE)),
                        1,
                        "stopped before the fault's record was complete"
                    );
                    assert_eq!(a.query(map.desc.offset(offsets::FATAL_CODE)), FAULT.value() as u32 as u64);
                } else {
                    // Every task's completion is visible to a thread that sees the run done.
                    for (k, c) in cells.outputs.iter().enumerate() {
                        // SAFETY: loom checks this read is ordered after the output's write.
                        let v = c.with(|p| unsafe { *p });
                        assert_eq!(v, k as u32 + 1, "the run looked done before task {k}'s output was visible");
                    }
                }
                // SAFETY: thread `i`'s cell has one writer, this thread.
                cells.last_use[i as usize].with_mut(|p| unsafe { *p = 1 });
                shared.depart(&a);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    (dev, map, cells)
}

/// Both threads complete their task; the dummy consumer completes inline on whichever thread
/// released it. Invariants: a thread that sees [`all_done`] sees both tasks' outputs (the
/// `completed` count's `AcqRel` increments and `Acquire` load order them); the state is freed
/// exactly once, after both threads' last use of it (the departure count's `Release`
/// decrements and the last thread's `Acquire` fence); the last thread out records 3 completed
/// tasks in the descriptor.
#[test]
fn counters_run_done_frees_once_after_every_use() {
    let _s = serial();
    check("counters_run_done_frees_once_after_every_use", None, || {
        let (dev, map, cells) = launch_model(None);
        assert_eq!(dev.peek(GmAddr(map.desc.0 + offsets::RUN_COMPLETED)), TASKS as u64);
        let frees = cells.frees.load(Ordering::Relaxed);
        assert_eq!(frees, 1, "the state was freed {frees} times");
    });
}

/// Thread 1's task faults: it latches the fault and raises `stop` (the real `Base::fail`);
/// thread 0 completes its task and waits. The run can never be done, so thread 0 leaves only
/// through `stop`. Invariants: a thread that sees `stop` sees the fault latched with its
/// record complete (code and `FATAL_COMPLETE`); the last thread out records the one task that
/// completed; the state is freed once.
#[test]
fn counters_stop_implies_the_fault_is_latched() {
    let _s = serial();
    check("counters_stop_implies_the_fault_is_latched", None, || {
        let (dev, map, cells) = launch_model(Some(1));
        assert_eq!(dev.peek(GmAddr(map.desc.0 + offsets::RUN_COMPLETED)), 1);
        assert_eq!(cells.frees.load(Ordering::Relaxed), 1);
    });
}

/// Reproducer: `Base::fail` raises `stop` before latching (`breakage::STOP_BEFORE_LATCH`), in
/// [`counters_stop_implies_the_fault_is_latched`]'s model. Loom must find thread 0 stopping
/// with no fault, or an incomplete one, latched.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_stop_before_latch() {
    let _s = serial();
    expect_found(
        "reproducer_stop_before_latch",
        None,
        crate::breakage::STOP_BEFORE_LATCH,
        &["stopped with no fault latched", "stopped before the fault's record was complete", "assertion"],
        || {
            launch_model(Some(1));
        },
    );
}

/// Reproducer: the departure count decremented `Relaxed` and no `Acquire` fence before the
/// free (`breakage::DEPART_RELAXED`), in [`counters_run_done_frees_once_after_every_use`]'s
/// model. Loom must find the free racing with the other thread's last use of the state.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_depart_relaxed() {
    let _s = serial();
    expect_found(
        "reproducer_depart_relaxed",
        None,
        crate::breakage::DEPART_RELAXED,
        &["Causality violation", "causality", "freed before"],
        || {
            launch_model(None);
        },
    );
}
