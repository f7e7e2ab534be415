//! Admission of a submitted task: the checks it passes before it takes ring space (its
//! kernels are loaded for the right core types, a sync-start cohort fits one scheduler thread)
//! and the producers it waits for (explicit ids, tensor-map lookups, the allocation records of
//! the scope tensors it names, with forged and ended-scope tensors refused).

use crate::sync::Ordering;
use alloc::format;

use pto_hal::{AicpuAgent, CoreType};

use super::DeviceOrch;
use crate::codes::OrchError;
use crate::exec::aicpu::source::TaskSource;
use crate::graph::{BufferRef, Direction, GraphError, Placement, Task, TensorProblem};
use crate::layout::{RINGS, Shape};
use crate::orch::{OrchFail, ScopeMode};
use crate::trb::ring::{RingAlloc, untask_id};

impl<A: AicpuAgent> DeviceOrch<'_, A> {
    /// Whether task `task` (id `id`, of `shape`) can be placed on this run at all: not an AIC
    /// or MIX task on an AIV-only run, and not a sync-start cohort larger than one scheduler
    /// thread hosts.
    pub(super) fn check_placeable(&mut self, task: &Task, id: u32, shape: Shape) -> Result<(), OrchFail> {
        if self.s.image.flags & crate::layout::orch_flags::AIV_ONLY != 0 && matches!(shape, Shape::Aic | Shape::Mix) {
            let why = "the run is AIV-only";
            return Err(self.invalid(GraphError::Unplaceable { task: id, shape, why }));
        }
        if task.is_sync_start() && task.block_num() > self.cohort_capacity(shape) {
            let cap = self.cohort_capacity(shape);
            let text = format!(
                "task {id}: a sync-start cohort of {} {shape:?} blocks; one scheduler thread hosts at most {cap}",
                task.block_num()
            );
            return Err(self.stop_with(OrchError::RequireSyncStartInvalid, task.block_num() as u64, &text));
        }
        Ok(())
    }

    /// Blocks one scheduler thread can start together for `shape` (the sync-start bound).
    pub(super) fn cohort_capacity(&self, shape: Shape) -> u32 {
        let cfg = &self.s.base().map.cfg;
        let schedulers = cfg.aicpu_threads.saturating_sub(1).max(1);
        let clusters = cfg.clusters / schedulers;
        match shape {
            Shape::Aic | Shape::Mix => clusters,
            Shape::Aiv => 2 * clusters,
            Shape::Dummy => 0,
        }
    }

    pub(super) fn bins(&mut self, task: &Task, id: u32) -> Result<[u64; 3], OrchFail> {
        let mut bins = [0u64; 3];
        for (lane, f) in task.kind().lane_funcs().iter().enumerate() {
            let Some((f, core)) = *f else { continue };
            let e = self.s.funcs.get(f.0 as usize).copied().unwrap_or_default();
            let (want, other) = match core {
                CoreType::Aic => (e.aic, e.aiv),
                CoreType::Aiv => (e.aiv, e.aic),
            };
            if want == 0 {
                let err = if other != 0 {
                    GraphError::WrongCoreType { task: id, lane: lane as u32, func: f.0, core }
                } else {
                    GraphError::UnknownFunc { task: id, lane: lane as u32, func: f.0 }
                };
                return Err(self.invalid(err));
            }
            bins[lane] = want;
        }
        Ok(bins)
    }

    pub(super) fn collect_producers(&mut self, task: &Task, id: u32, mode: ScopeMode) -> Result<(), OrchFail> {
        let mut prods = core::mem::take(&mut self.producers);
        prods.clear();
        for d in task.explicit_deps() {
            let (r, l) = untask_id(d.0);
            if r >= RINGS || l >= self.cursors[r].current {
                self.producers = prods;
                return Err(self.invalid(GraphError::UnknownDependency { task: id, dep: d.0 }));
            }
            if l >= self.cursors[r].last_alive {
                prods.push(((r as u64) << 32) | l as u64);
            }
        }
        // A scope tensor holds its allocation record; one whose record is gone belongs to a
        // scope that ended (its memory may already be reused).
        // An external tensor must be one of the program's own arguments (the host checked
        // those against its allocations; anything else is a forged or foreign buffer).
        let mut refused = None;
        let named = task.args().iter().map(|a| &a.tensor).enumerate().map(|(i, t)| (i as u32, t));
        for (arg, t) in named.chain(task.predicate().map(|p| (u32::MAX, p))) {
            match t.buffer.placement {
                Placement::Ring { addr, owner } => {
                    let (r, l) = untask_id(owner.0);
                    let live = r < RINGS
                        && l >= self.cursors[r].last_alive
                        && l < self.cursors[r].current
                        && self.slot(r, l).local.load(Ordering::Relaxed) == l
                        && self.slot(r, l).refs.load(Ordering::Acquire) > 0;
                    if !live {
                        refused.get_or_insert(GraphError::EndedScopeTensor { task: id, arg });
                    } else if let Err(why) = judge_ring(self.cursors[r].allocation(l), &t.buffer, addr.0) {
                        refused.get_or_insert(GraphError::UnusableTensor { task: id, arg, why });
                    } else {
                        prods.push(((r as u64) << 32) | l as u64);
                    }
                }
                Placement::External(addr) => {
                    let known = self
                        .s
                        .tensors
                        .iter()
                        .any(|k| k.buffer_id == t.buffer.id && k.addr == addr.0 && k.bytes == t.buffer.bytes);
                    if !known {
                        let why = crate::graph::TensorProblem::Forged;
                        refused.get_or_insert(GraphError::UnusableTensor { task: id, arg, why });
                    }
                }
                Placement::Heap(_) => {
                    refused.get_or_insert(GraphError::ForeignHeapTensor { task: id, arg });
                }
            }
        }
        if let Some(e) = refused {
            self.producers = prods;
            return Err(self.invalid(e));
        }
        if mode == ScopeMode::Auto {
            let cursors = &self.cursors;
            for a in task.args() {
                if a.dir.reads() || matches!(a.dir, Direction::Out | Direction::InOut) {
                    self.map.lookup_pruning(&a.tensor.region(), |p| Self::retired(cursors, p), &mut prods);
                }
            }
            if let Some(p) = task.predicate() {
                self.map.lookup_pruning(&p.region(), |p| Self::retired(cursors, p), &mut prods);
            }
        }
        prods.sort_unstable();
        prods.dedup();
        self.producers = prods;
        Ok(())
    }
}

/// Whether `b` (placed at `addr`) is the scope allocation `alloc` its owner records: its
/// address, size, element type and buffer id, else the first that disagrees (a live owner that is no
/// allocation record is refused as naming no allocation).
fn judge_ring(alloc: Option<RingAlloc>, b: &BufferRef, addr: u64) -> Result<(), TensorProblem> {
    let disagree = |what, given, allocated| Err(TensorProblem::NotItsAllocation { what, given, allocated });
    let Some(a) = alloc else { return disagree("allocation", b.id, 0) };
    TensorProblem::same_allocation((addr, b.bytes, b.dtype), (a.addr, a.bytes, a.dtype))?;
    if b.id != a.id {
        return disagree("allocation", b.id, a.id);
    }
    Ok(())
}
