//! A run's tasks as the AICPU sees them: a task source (the host-built graph's image, or the
//! device-side runtime's rings), the state every source shares — ready queues, counters, the
//! stop flag — and the routing of tasks that became ready.

use crate::sync::{AtomicBool, AtomicU64, Ordering};
use alloc::vec::Vec;

use pto_hal::{AicpuAgent, GmAddr, Ticks};

use super::queue::ReadyQueue;
use crate::codes::{ErrorCode, SchedError, Site};
use crate::layout::Shape;
use crate::lifecycle::{self, Fault, RunMap};

/// What the scheduler needs to know of one task.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    /// Which cores it occupies.
    pub shape: Shape,
    /// Active lanes ([`lanes`](crate::layout::lanes)).
    pub lanes: u8,
    /// Kernel binary per lane (AIC, AIV0, AIV1); 0 where the lane is unused.
    pub bins: [u64; 3],
    /// SPMD blocks.
    pub block_num: u32,
    /// GM address of the task's argument record.
    pub args: u64,
    /// The id kernels and fault reports see.
    pub report_id: u32,
    /// GM address of a 4-byte predicate (0 = none): zero there means "skip the task".
    pub predicate: u64,
    /// All blocks must start together.
    pub sync_start: bool,
}

/// A run's tasks as the scheduler sees them: the host-built graph or the device-side rings.
/// Tasks are named by a `u32` handle the source chooses.
pub trait TaskSource: Sync {
    /// State every source shares.
    fn base(&self) -> &Base;
    /// Task `t`.
    fn info(&self, t: u32) -> TaskInfo;
    /// Next SPMD block of `t` to place.
    fn next_block(&self, t: u32) -> &crate::sync::AtomicU32;
    /// Subtasks of `t` finished so far.
    fn subtasks_done(&self, t: u32) -> &crate::sync::AtomicU32;
    /// `t` is done (it ran, or was skipped): push every consumer whose producers are now all
    /// done onto `ready`.
    fn finish<A: AicpuAgent>(&self, a: &A, t: u32, ready: &mut Vec<u32>);
    /// Tasks the run completes in all, once known (the rings know it when the orchestrator
    /// is done).
    fn total(&self) -> Option<u64>;
}

/// Scheduler state shared by the AICPU threads of one run, whatever the task source
/// (AICPU-private memory, not GM).
pub struct Base {
    /// Where the run's device structures are.
    pub map: RunMap,
    pub(crate) queues: [ReadyQueue; Shape::QUEUED],
    completed: AtomicU64,
    /// Set when a fault is latched: every thread stops dispatching and retires its cores.
    pub stop: AtomicBool,
    pub(crate) progress_tick: AtomicU64,
    /// The launch names more clusters than the platform's bound
    /// ([`lifecycle::over_bound`]): no scheduler is made; each thread cancels its share of the
    /// cores ([`lifecycle::refuse`]) and leaves.
    pub refused: bool,
}

impl Base {
    /// State for a run whose ready queues must hold `capacity[shape]` tasks at once.
    pub fn new<A: AicpuAgent>(a: &A, map: RunMap, capacity: [usize; Shape::QUEUED]) -> Base {
        Base {
            map,
            queues: capacity.map(ReadyQueue::with_capacity),
            completed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            progress_tick: AtomicU64::new(a.now_ticks()),
            refused: false,
        }
    }

    /// Tasks completed so far (including tasks completed inline: dummy and skipped ones).
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// On the resident executor, where the cores count completions in GM: record that `n`
    /// tasks completed (the last thread out reports the count).
    pub fn record_completed(&self, n: u64) {
        self.completed.fetch_max(n, Ordering::AcqRel);
    }

    /// Latch `f` (first wins) and stop every thread.
    pub fn fail<A: AicpuAgent>(&self, a: &A, f: Fault) {
        crate::seam!(STOP_BEFORE_LATCH => self.fail_stopping_first(a, f));
        lifecycle::latch(a, self.map.desc, f, "");
        // A thread that sees `stop` sees the fault latched (its record complete).
        self.stop.store(true, Ordering::Release);
        a.send_event();
    }

    pub(crate) fn push_ready<A: AicpuAgent>(&self, a: &A, t: u32, info: &TaskInfo, site: Site) {
        let shape = info.shape;
        if self.queues[shape as usize].push(t).is_err() {
            self.fail(
                a,
                Fault {
                    code: ErrorCode::Sched(SchedError::ReadyQueueOverflow),
                    site,
                    task: Some(info.report_id),
                    core: None,
                    detail: shape as u64,
                },
            );
        }
    }

    /// Whether a fault is latched; if so, raise `stop` (so every thread leaves its loop). With
    /// `breakage::RELEASE_ON_FAULT` the latch is not looked at (always `false`).
    pub(crate) fn latch_seen<A: AicpuAgent>(&self, a: &A) -> bool {
        // Broken: the latch is never looked at.
        crate::seam!(RELEASE_ON_FAULT => false);
        if !lifecycle::latched(a, self.map.desc) {
            return false;
        }
        self.stop.store(true, Ordering::Release);
        a.send_event();
        true
    }

    /// `STOP_BEFORE_LATCH`: [`Base::fail`] that raises `stop` before it latches the fault (a
    /// thread that stops may find no fault recorded).
    #[cfg(feature = "breakage")]
    fn fail_stopping_first<A: AicpuAgent>(&self, a: &A, f: Fault) {
        self.stop.store(true, Ordering::Release);
        lifecycle::latch(a, self.map.desc, f, "");
        self.stop.store(true, Ordering::Release);
        a.send_event();
    }

    /// Record progress at `now` (a clock value the caller already read).
    pub fn touch_at(&self, now: Ticks) {
        self.progress_tick.store(now, Ordering::Relaxed);
    }

    /// Whether any ready queue looks non-empty.
    pub fn any_ready(&self) -> bool {
        self.queues.iter().any(|q| !q.is_empty_hint())
    }
}

/// Whether every task of the run completed.
pub fn all_done<S: TaskSource>(s: &S) -> bool {
    s.total().is_some_and(|n| s.base().completed() == n)
}

/// Routes tasks whose producers are done and completes tasks, with buffers kept across calls
/// (one per thread: completions are the scheduler's hot path, and they allocate nothing once
/// the buffers have grown).
#[derive(Default)]
pub struct Completions {
    inline: Vec<u32>,
    ready: Vec<u32>,
}

impl Completions {
    /// Empty buffers.
    pub fn new() -> Completions {
        Completions::default()
    }

    /// Task `t`'s producers are all done: queue it by shape, or complete it inline when it
    /// needs no core (dummy) or its predicate says skip.
    pub fn became_ready<A: AicpuAgent, S: TaskSource>(&mut self, a: &A, s: &S, t: u32, site: Site) {
        self.route(a, s, t, site);
        self.drain(a, s);
    }

    /// Task `t` finished on its cores: release its consumers.
    pub fn complete<A: AicpuAgent, S: TaskSource>(&mut self, a: &A, s: &S, t: u32) {
        self.inline.push(t);
        self.drain(a, s);
    }

    fn route<A: AicpuAgent, S: TaskSource>(&mut self, a: &A, s: &S, t: u32, site: Site) {
        let info = s.info(t);
        if info.shape == Shape::Dummy || (info.predicate != 0 && !predicate_holds(a, info.predicate)) {
            self.inline.push(t);
        } else {
            s.base().push_ready(a, t, &info, site);
        }
    }

    fn drain<A: AicpuAgent, S: TaskSource>(&mut self, a: &A, s: &S) {
        let base = s.base();
        let mut finished = false;
        while let Some(t) = self.inline.pop() {
            s.finish(a, t, &mut self.ready);
            finished = true;
            let done = base.completed.fetch_add(1, Ordering::AcqRel) + 1;
            if s.total() == Some(done) {
                a.send_event();
            }
            let mut ready = core::mem::take(&mut self.ready);
            for c in ready.drain(..) {
                self.route(a, s, c, Site::Completion);
            }
            self.ready = ready;
        }
        // Progress for the stall watchdog: one clock read per drain, not per task.
        if finished {
            base.progress_tick.store(a.now_ticks(), Ordering::Relaxed);
        }
    }
}

/// Read a producer-written 4-byte predicate with a device-direct load (no cached copy can
/// be stale): the producer published it before its FIN, which was observed before this.
fn predicate_holds<A: AicpuAgent>(a: &A, addr: u64) -> bool {
    let word = a.query(GmAddr(addr & !7));
    let v = (word >> ((addr & 4) * 8)) as u32;
    v != 0
}
