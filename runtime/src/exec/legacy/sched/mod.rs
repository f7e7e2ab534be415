//! The AICPU scheduler: one instance per AICPU thread, over the clusters that thread owns.
//!
//! * Clusters are owned per thread (`cluster % threads == thread`), never split, so one thread
//!   alone writes a core's DMB and reads its COND.
//! * Ready tasks wait in one lock-free queue per shape (AIC, AIV, MIX) shared by all threads;
//!   dummy tasks never queue — they complete inline the moment their producers are done.
//! * Each core has one running and one pending slot and two payload buffers; a per-core
//!   dispatch id in DMB selects the buffer by its parity. A pending dispatch is written only
//!   after the core acknowledged the running one, so DMB never skips a dispatch.
//! * Completion is decided from COND alone ([`decide`]).
//! * MIX tasks take one whole cluster; SPMD tasks are dispatched block by block, and a task
//!   with blocks left goes back to its queue.

use crate::sync::Ordering;
use alloc::boxed::Box;

use pto_hal::{AicpuAgent, Reg};

use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::exec::aicpu::cores::{Seat, ThreadCores};
use crate::exec::aicpu::source::{Base, Completions, TaskInfo, TaskSource, all_done};
use crate::fixed::PerCore;
use crate::layout::{Shape, TraceRecord, trace_kind};
use crate::lifecycle::{self, Fault};

mod placement;

pub use super::cond::{Sub, decide};

#[derive(Copy, Clone)]
struct CoreSlot {
    /// The owned core, as its handshake left it (the thread's `ThreadCores` seat, copied once).
    seat: Seat,
    running: Option<Sub>,
    acked: bool,
    pending: Option<Sub>,
    seq: u32,
    last_cond: u32,
    /// Listed in the idle stack (so it is listed at most once).
    listed: bool,
}

/// The entry of owned core `seat` (as its handshake left it), running nothing.
impl From<&Seat> for CoreSlot {
    fn from(seat: &Seat) -> Self {
        CoreSlot { seat: *seat, running: None, acked: false, pending: None, seq: 0, last_cond: 0, listed: false }
    }
}

/// An empty table entry: a core not handshaken, running nothing.
impl Default for CoreSlot {
    fn default() -> Self {
        CoreSlot::from(&Seat::default())
    }
}

impl CoreSlot {
    fn can_pend(&self) -> bool {
        self.seat.up && self.running.is_some() && self.acked && self.pending.is_none()
    }
    fn is_idle(&self) -> bool {
        self.seat.up && self.running.is_none()
    }
}

/// A thread's per-core tables, sized by the platform's bound (`A::MaxClusters`): the thread
/// owns at most every cluster of the launch, and boot refused a launch naming more clusters
/// than the bound.
struct Tables<A: AicpuAgent> {
    /// The owned cores, in the order of the thread's seats (AIC, AIV0, AIV1 per cluster), as
    /// their handshake left them.
    cores: PerCore<CoreSlot, A::MaxClusters>,
    /// Idle cores by type, most recently idle last (reused first: it is likely still awake).
    idle: [PerCore<usize, A::MaxClusters>; 2],
    /// DMB writes of this pass: (physical core, dispatch id, core slot). At most one per core:
    /// a core given a subtask this pass is neither idle nor able to take a pending one.
    batch: PerCore<(u32, u32, u32), A::MaxClusters>,
}

/// One AICPU thread's scheduler over the cores the thread handshook ([`ThreadCores`]).
pub(crate) struct Scheduler<'s, 'c, A: AicpuAgent, S: TaskSource> {
    a: &'s A,
    s: &'s S,
    b: &'s Base,
    /// The thread's cores, its trace ring and its dump lane.
    cores: &'c mut ThreadCores<'s, A>,
    /// Allocated once, when the scheduler is made (after the handshake), and never grown. On
    /// the heap rather than in the thread's frame: some 11 KiB at the simulator's bound, and an
    /// AICPU thread's stack is its platform's (256 KiB simulator threads; on the chip, the
    /// vendor runtime's), which the user's orchestration and the dump's copies share.
    t: Box<Tables<A>>,
    dispatched: u64,
    pushed: bool,
    /// A sync-start task waiting for enough idle cores of its shape.
    cohort: Option<(u32, Shape)>,
    completions: Completions,
}

const MIX_LANES: [(usize, u8, u32); 3] = [(0, 0, 0), (1, 1, 0), (2, 2, 1)];

impl<'s, 'c, A: AicpuAgent, S: TaskSource> Scheduler<'s, 'c, A, S> {
    /// The scheduler of the handshaken `cores`: each open core idle, listed in the order its
    /// window opened, the first to open reused first.
    pub(crate) fn new(a: &'s A, s: &'s S, cores: &'c mut ThreadCores<'s, A>) -> Self {
        let b = s.base();
        let mut tables = Box::new(Tables::<A> {
            cores: PerCore::new(),
            idle: [PerCore::new(), PerCore::new()],
            batch: PerCore::new(),
        });
        for seat in cores.seats() {
            // As many places as the thread has seats.
            let _ = tables.cores.push(CoreSlot::from(seat));
        }
        for &i in cores.opened() {
            let c = &mut tables.cores[i];
            // Listed at most once: the list has room for every core.
            c.listed = tables.idle[c.seat.ty as usize].push(i).is_ok();
        }
        for v in &mut tables.idle {
            v.reverse();
        }
        Scheduler {
            a,
            s,
            b,
            cores,
            t: tables,
            dispatched: 0,
            pushed: false,
            cohort: None,
            completions: Completions::new(),
        }
    }

    /// Subtasks this scheduler handed to cores.
    pub(crate) fn dispatched(&self) -> u64 {
        self.dispatched
    }

    /// Run the dispatch loop until every task completed or a fault stopped the run.
    pub(crate) fn run(&mut self) {
        let a = self.a;
        let s = self.b;
        let watchdog = s.map.cfg.watchdog_ticks;
        // When the watchdog last saw progress; 0: just now, read at the next idle look (a busy
        // scheduler reads the clock when it idles, not once per step of progress).
        let mut last_progress = a.now_ticks();
        let mut iter: u32 = 0;
        loop {
            if s.stop.load(Ordering::Acquire) || all_done(self.s) {
                break;
            }
            let mut progress = self.poll_completions();
            progress |= self.dispatch();
            if self.pushed {
                self.pushed = false;
                if s.any_ready() {
                    a.send_event();
                }
            }
            iter = iter.wrapping_add(1);
            if progress {
                last_progress = 0;
                if iter.is_multiple_of(64) {
                    s.latch_seen(a);
                }
                continue;
            }
            if s.latch_seen(a) {
                break;
            }
            let now = a.now_ticks();
            if last_progress == 0 {
                last_progress = now;
            }
            if let Some(c) = self.t.cores.iter().find(|c| c.running.is_some()) {
                if now.saturating_sub(last_progress) > watchdog {
                    let sub = c.running.unwrap_or(Sub { task: u32::MAX, block: 0, lane: 0, reg: 0 });
                    // A core that acknowledged the dispatch is running the kernel: it hangs.
                    let code = if c.acked {
                        ErrorCode::Device(DeviceFault::KernelHung)
                    } else {
                        ErrorCode::Sched(SchedError::SchedulerTimeout)
                    };
                    s.fail(
                        a,
                        Fault {
                            code,
                            site: Site::Completion,
                            task: Some(self.s.info(sub.task).report_id),
                            core: Some(c.seat.w),
                            detail: c.last_cond as u64,
                        },
                    );
                    break;
                }
            } else if self.s.total().is_some()
                && now.saturating_sub(s.progress_tick.load(Ordering::Relaxed).max(last_progress))
                    > watchdog.saturating_add(watchdog / 2)
            {
                // A thread with no running core waits half a watchdog longer, so a thread that
                // owns a stuck core names it (task and core) before the run is called stalled.
                s.fail(
                    a,
                    Fault {
                        code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                        site: Site::Stall,
                        task: None,
                        core: None,
                        detail: s.completed(),
                    },
                );
                break;
            }
            let slice = a.ticks_from_micros(10_000);
            a.wait_for_event((last_progress.saturating_add(watchdog + 1)).min(now.saturating_add(slice)));
            if let Some(t) = &mut self.cores.trace {
                t.phase(a, trace_kind::IDLE, now, a.now_ticks());
            }
        }
    }

    fn poll_completions(&mut self) -> bool {
        let a = self.a;
        let mut progress = false;
        let started = if self.cores.trace.is_some() { a.now_ticks() } else { 0 };
        for i in 0..self.t.cores.len() {
            let c = &self.t.cores[i];
            if c.running.is_none() {
                continue;
            }
            let v = a.read_reg(c.seat.phys, Reg::Cond);
            if v == c.last_cond {
                continue;
            }
            a.rmb();
            let c = &mut self.t.cores[i];
            c.last_cond = v;
            if v == crate::layout::regs::COND_FAULTED {
                // The core latched a fault and ended its dispatch without FIN: that subtask
                // never completes (no consumer of its task is released). Stop the run.
                self.b.stop.store(true, Ordering::Release);
                a.send_event();
                return true;
            }
            let d = decide(v, c.running.map(|r| r.reg), c.pending.map(|p| p.reg));
            let mut finished: [Option<Sub>; 2] = [None, None];
            if d.running_done {
                finished[0] = c.running.take();
            }
            if d.pending_done {
                finished[1] = c.pending.take();
            }
            if d.promote {
                c.running = c.pending.take();
                c.acked = d.running_acked;
            } else if d.running_acked {
                c.acked = true;
            }
            if c.running.is_none() {
                c.acked = false;
                let ty = c.seat.ty as usize;
                if finished.iter().any(Option::is_some) && !c.listed {
                    c.listed = self.t.idle[ty].push(i).is_ok();
                }
            }
            let w = c.seat.w;
            for sub in finished.into_iter().flatten() {
                progress = true;
                if self.cores.trace.is_some() {
                    let now = a.now_ticks();
                    self.trace_sub(trace_kind::COMPLETE, w, sub, now);
                }
                self.subtask_done(sub);
            }
            progress |= d.running_acked;
        }
        if progress && let Some(t) = &mut self.cores.trace {
            t.phase(a, trace_kind::COMPLETING, started, a.now_ticks());
        }
        progress
    }

    /// Record a scheduler event about subtask `sub` on worker `w` at tick `now`.
    #[cold]
    fn trace_sub(&mut self, kind: u8, w: u32, sub: Sub, now: u64) {
        let info = self.s.info(sub.task);
        if let Some(t) = &mut self.cores.trace {
            let r = TraceRecord {
                kind,
                lane: sub.lane,
                core: w,
                task: info.report_id,
                block: sub.block,
                bin: info.bins[sub.lane as usize],
                start: now,
                end: now,
                ..TraceRecord::default()
            };
            t.push(self.a, &r);
        }
    }

    /// Record task `info`'s arguments at `stage` in this thread's dump lane.
    #[cold]
    fn dump_task(&mut self, info: &TaskInfo, stage: u8) {
        let (a, b) = (self.a, self.b);
        if let Some(d) = &mut self.cores.dump {
            let stop = || b.stop.load(Ordering::Acquire) || lifecycle::latched(a, b.map.desc);
            d.task(info.report_id, info.args, stage, &stop);
        }
    }

    fn subtask_done(&mut self, sub: Sub) {
        let s = self.s;
        let info = s.info(sub.task);
        let need = info.block_num * info.lanes.count_ones();
        if s.subtasks_done(sub.task).fetch_add(1, Ordering::AcqRel) + 1 == need {
            if self.cores.dump.is_some() {
                self.dump_task(&info, crate::layout::dump_stage::AFTER_COMPLETION);
            }
            self.completions.complete(self.a, s, sub.task);
            self.pushed = true;
        }
    }
}
