//! The scheduler's dispatch pass: which ready task goes to which idle core of this thread's
//! clusters (shape capacity, whole clusters for MIX tasks, SPMD blocks one by one, sync-start
//! cohorts), and the payload and register writes that hand a subtask to its core.

use pto_hal::{AicpuAgent, CoreType, Reg};
use zerocopy::IntoBytes;

use super::{MIX_LANES, Scheduler, Sub};
use crate::codes::Site;
use crate::exec::aicpu::source::{TaskInfo, TaskSource};
use crate::layout::{DispatchPayload, Shape, regs, trace_kind};
use crate::lifecycle;
use crate::sync::Ordering;

impl<A: AicpuAgent, S: TaskSource> Scheduler<'_, '_, A, S> {
    pub(super) fn dispatch(&mut self) -> bool {
        let started = if self.cores.trace.is_some() { self.a.now_ticks() } else { 0 };
        let mut any = false;
        if let Some((t, shape)) = self.cohort {
            any |= self.place(t, shape);
        }
        // MIX first: it needs a whole cluster, the scarcest resource.
        for shape in [Shape::Mix, Shape::Aic, Shape::Aiv] {
            // A held sync-start cohort keeps the cores it waits for free of new work.
            let blocked = match self.cohort {
                None => false,
                Some((_, Shape::Mix)) => true,
                Some((_, held)) => held == shape || shape == Shape::Mix,
            };
            if blocked {
                continue;
            }
            loop {
                if !self.has_capacity(shape) {
                    break;
                }
                let Some(t) = self.b.queues[shape as usize].pop() else {
                    break;
                };
                any |= self.place(t, shape);
            }
        }
        if !self.t.batch.is_empty() {
            let a = self.a;
            a.wmb();
            // The dispatch tick is read before the first DMB write: no core starts before it.
            let at = if self.cores.trace.is_some() { a.now_ticks() } else { 0 };
            // Nothing is dispatched once a fault is latched. Looked at after the tick is read,
            // so every dispatch a trace records was decided before the latch.
            if self.b.latch_seen(a) {
                self.dispatched -= self.t.batch.len() as u64;
                self.t.batch.clear();
                return any;
            }
            for &(phys, reg, _) in &self.t.batch {
                a.write_reg(phys, Reg::Dmb, reg);
            }
            if self.cores.trace.is_some() {
                self.trace_dispatched(started, at);
            }
            self.t.batch.clear();
        }
        any
    }

    /// Record the dispatch of every subtask of this pass's batch, and the pass itself.
    #[cold]
    fn trace_dispatched(&mut self, started: u64, at: u64) {
        let batch = core::mem::take(&mut self.t.batch);
        for &(_, reg, i) in &batch {
            let c = &self.t.cores[i as usize];
            let sub = [c.running, c.pending].into_iter().flatten().find(|s| s.reg == reg);
            if let Some(sub) = sub {
                self.trace_sub(trace_kind::DISPATCH, c.seat.w, sub, at);
            }
        }
        self.t.batch = batch;
        let now = self.a.now_ticks();
        if let Some(t) = &mut self.cores.trace {
            t.phase(self.a, trace_kind::DISPATCHING, started, now);
        }
    }

    fn has_capacity(&self, shape: Shape) -> bool {
        match shape {
            Shape::Aic | Shape::Aiv => {
                let ty = if shape == Shape::Aic { CoreType::Aic } else { CoreType::Aiv };
                !self.t.idle[ty as usize].is_empty() || self.t.cores.iter().any(|c| c.seat.ty == ty && c.can_pend())
            }
            Shape::Mix => self.free_cluster().is_some(),
            Shape::Dummy => false,
        }
    }

    /// A cluster whose three cores all have a free slot; all-idle clusters first.
    fn free_cluster(&self) -> Option<usize> {
        let n = self.t.cores.len() / 3;
        let free = |i: usize| self.t.cores[i].is_idle() || self.t.cores[i].can_pend();
        (0..n)
            .find(|&k| (0..3).all(|l| self.t.cores[3 * k + l].is_idle()))
            .or_else(|| (0..n).find(|&k| (0..3).all(|l| free(3 * k + l))))
    }

    fn take_core(&mut self, ty: CoreType) -> Option<usize> {
        while let Some(i) = self.t.idle[ty as usize].pop() {
            self.t.cores[i].listed = false;
            if self.t.cores[i].is_idle() {
                return Some(i);
            }
        }
        self.t.cores.iter().position(|c| c.seat.ty == ty && c.can_pend())
    }

    /// Place as many blocks of task `t` as this thread has room for; requeue the rest.
    fn place(&mut self, t: u32, shape: Shape) -> bool {
        let s = self.s;
        let info = s.info(t);
        let next = s.next_block(t);
        if info.sync_start {
            // The whole cohort starts in one pass on idle cores, or waits (holding this
            // thread's cores of its type) until enough are idle.
            let left = info.block_num.saturating_sub(next.load(Ordering::Relaxed));
            if self.idle_capacity(shape) < left {
                self.cohort = Some((t, shape));
                return false;
            }
            self.cohort = None;
        }
        let mut placed = false;
        loop {
            let b = next.load(Ordering::Relaxed);
            if b >= info.block_num {
                break;
            }
            match shape {
                Shape::Mix => {
                    let Some(k) = self.free_cluster() else { break };
                    self.dump_before_first_block(&info, b);
                    next.store(b + 1, Ordering::Relaxed);
                    for (off, lane, sub_block) in MIX_LANES {
                        if info.lanes & (1 << lane) != 0 {
                            self.assign(3 * k + off, t, &info, b, lane, sub_block);
                        }
                    }
                }
                _ => {
                    let ty = if shape == Shape::Aic { CoreType::Aic } else { CoreType::Aiv };
                    let Some(i) = self.take_core(ty) else { break };
                    self.dump_before_first_block(&info, b);
                    next.store(b + 1, Ordering::Relaxed);
                    let lane = if shape == Shape::Aic { 0 } else { 1 };
                    self.assign(i, t, &info, b, lane, 0);
                }
            }
            placed = true;
        }
        if next.load(Ordering::Relaxed) < info.block_num {
            self.b.push_ready(self.a, t, &info, Site::Dispatch);
            self.pushed = true;
        }
        placed
    }

    /// With the dump on, when block `b` about to be placed is the task's first: record its
    /// inputs as the task will read them, before any of its blocks reaches a core (the pass
    /// writes DMB after it placed everything). Only once a core was found for the block: a task
    /// that finds none goes back to its queue, and recording it then would record it twice.
    fn dump_before_first_block(&mut self, info: &TaskInfo, b: u32) {
        if b == 0 && self.cores.dump.is_some() {
            self.dump_task(info, crate::layout::dump_stage::BEFORE_DISPATCH);
        }
    }

    /// Blocks of `shape` this thread could start right now on idle cores.
    fn idle_capacity(&self, shape: Shape) -> u32 {
        let idle = |ty: CoreType| self.t.cores.iter().filter(|c| c.seat.ty == ty && c.is_idle()).count() as u32;
        match shape {
            Shape::Aic => idle(CoreType::Aic),
            Shape::Aiv => idle(CoreType::Aiv),
            Shape::Mix => {
                let n = self.t.cores.len() / 3;
                (0..n).filter(|&k| (0..3).all(|l| self.t.cores[3 * k + l].is_idle())).count() as u32
            }
            Shape::Dummy => 0,
        }
    }

    fn assign(&mut self, i: usize, t: u32, info: &TaskInfo, block: u32, lane: u8, sub_block: u32) {
        let c = &mut self.t.cores[i];
        c.seq = regs::next_id(c.seq);
        let reg = c.seq;
        let p = DispatchPayload {
            bin: info.bins[lane as usize],
            args: info.args,
            task_id: info.report_id,
            block_idx: block,
            block_num: info.block_num,
            lane: sub_block,
            reg_task_id: reg,
            reserved0: 0,
            reserved: [0; 3],
        };
        let at = self.b.map.payload(c.seat.w, reg & 1);
        self.a.write(at, p.as_bytes());
        // The core reads the payload after the DMB write: publish it by the contract (a clean
        // under a2a3's possibly write-back AICPU cache; nothing on a5).
        publish_payload(self.a, at);
        let sub = Sub { task: t, block, lane, reg };
        if c.running.is_none() {
            c.running = Some(sub);
            c.acked = false;
        } else {
            c.pending = Some(sub);
        }
        if let Err((phys, reg, _)) = self.t.batch.push((c.seat.phys, reg, i as u32)) {
            // Never: a pass gives a core at most one subtask and the batch has a place per
            // core. Were it full, the dispatch is written now rather than lost.
            self.a.wmb();
            self.a.write_reg(phys, Reg::Dmb, reg);
        }
        self.dispatched += 1;
    }
}

/// Publish the dispatch payload written at `at` by the contract, before its DMB write.
fn publish_payload<A: AicpuAgent>(a: &A, at: pto_hal::GmAddr) {
    // Broken: the payload stays in the AICPU's cache (harmless write-through, unpublished
    // under write-back).
    crate::seam!(SKIP_PAYLOAD_CLEAN);
    lifecycle::publish_aicpu(a, at, core::mem::size_of::<DispatchPayload>() as u64);
}
