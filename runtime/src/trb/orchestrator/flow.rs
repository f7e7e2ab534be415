//! Flow control: waiting for room in a ring (reclaiming as tasks are consumed) and in the
//! tensor map (sweeping retired producers), and for the producers of tensor data the
//! orchestration reads or writes; each wait latches its reference code instead of hanging
//! when nothing can move.

use crate::sync::Ordering;
use alloc::format;
use alloc::vec::Vec;

use pto_hal::AicpuAgent;

use super::{DeviceOrch, PRUNE_EVERY};
use crate::codes::OrchError;
use crate::graph::Task;
use crate::orch::{OrchFail, ScopeMode};
use crate::tensormap::Region;
use crate::trb::ring::{self, COMPLETED, Lack, task_id};

impl<A: AicpuAgent> DeviceOrch<'_, A> {
    /// Wait until `ring` can take one task with `heap` bytes and `edges` edges.
    pub(super) fn reserve(&mut self, ring: usize, heap: u64, edges: u64) -> Result<(), OrchFail> {
        if self.cursors[ring].current >= 1 << ring::ID_LOCAL_BITS {
            let text = format!("ring {ring} used up its 2^30 task ids in this run; split the run");
            return Err(self.stop_with(OrchError::InvalidArgs, ring as u64, &text));
        }
        let budget = self.s.image.wait_ticks;
        // The budget runs from the first look that finds no room (or from the last reclaim):
        // a task that fits at once reads no clock.
        let mut deadline = None;
        let mut backoff = crate::backoff::Backoff::new();
        loop {
            let freed = self.advance(ring);
            if freed > 0 {
                deadline = None;
                self.note_reclaimed(freed);
                backoff.reset();
            }
            let c = &mut self.cursors[ring];
            let Some(lack) = c.lack(heap, edges) else { return Ok(()) };
            let code = |slot_code| match lack {
                Lack::Slot => slot_code,
                Lack::Heap => OrchError::HeapRingDeadlock,
                Lack::Edges => OrchError::DepPoolOverflow,
            };
            let (heap_size, dep_cap, window) = (c.heap_size, c.dep_cap, c.window);
            if heap > heap_size {
                let text = format!("one task needs {heap} heap bytes; ring {ring} has {heap_size}");
                return Err(self.stop_with(OrchError::HeapRingDeadlock, heap, &text));
            }
            if edges > dep_cap {
                let text =
                    format!("one task has {edges} producers; ring {ring}'s dependency pool has {dep_cap} entries");
                return Err(self.stop_with(OrchError::DepPoolOverflow, edges, &text));
            }
            if let Some(scope) = c.oldest_scope()
                && let Some(pos) = self.scopes.iter().position(|sc| sc.id == scope)
            {
                // The oldest task holds a reference of a scope that is still open: it
                // cannot be consumed while this orchestrator waits inside that scope.
                let innermost = pos + 1 == self.scopes.len();
                let c = code(if innermost { OrchError::ScopeDeadlock } else { OrchError::FlowControlDeadlock });
                let text = format!(
                    "ring {ring} (window {window}, heap {heap_size} B, dep pool {dep_cap}) is full of tasks of a scope that is still open ({lack:?} exhausted)"
                );
                return Err(self.stop_with(c, window as u64, &text));
            }
            self.live()?;
            let now = self.a.now_ticks();
            let deadline = *deadline.get_or_insert(now.saturating_add(budget));
            if now >= deadline {
                let text = format!("ring {ring}: no task was reclaimed within the wait budget ({lack:?} exhausted)");
                return Err(self.stop_with(code(OrchError::FlowControlDeadlock), window as u64, &text));
            }
            self.wake(true);
            self.flow_wait(&mut backoff, now, deadline);
        }
    }

    /// One flow-control wait (at most 20 µs, until `deadline`), its time counted.
    fn flow_wait(&mut self, backoff: &mut crate::backoff::Backoff, now: u64, deadline: u64) {
        backoff.idle(self.a, now.saturating_add(self.a.ticks_from_micros(20)).min(deadline));
        self.flow_ticks = self.flow_ticks.saturating_add(self.a.now_ticks().saturating_sub(now));
    }

    /// Reclaim `ring`'s consumed tasks from the oldest on; returns how many. Each retired task
    /// is noted for the checks: the tensor map forgets it, so later tasks are ordered after it
    /// by its retirement instead of by an edge.
    fn advance(&mut self, ring: usize) -> u32 {
        let c = &mut self.cursors[ring];
        let from = c.last_alive;
        let freed = c.advance(&self.s.rings[ring]);
        for k in 0..freed {
            self.a.note_retired(task_id(ring, from.wrapping_add(k)));
        }
        freed
    }

    /// Sweep the tensor map's retired entries every [`PRUNE_EVERY`] reclaimed tasks, so it
    /// holds entries of live tasks only (and lookups stay short).
    fn note_reclaimed(&mut self, n: u32) {
        self.reclaimed += n;
        if self.reclaimed >= PRUNE_EVERY {
            self.reclaimed = 0;
            let cursors = &self.cursors;
            self.map.prune(|p| Self::retired(cursors, p));
        }
    }

    pub(super) fn insert_writes(&mut self, task: &Task, key: u64) -> Result<(), OrchFail> {
        for a in task.args() {
            if !a.dir.writes() {
                continue;
            }
            let region = a.tensor.region();
            let budget = self.s.image.wait_ticks;
            // As in `reserve`: the budget starts at the first look that finds the map full.
            let mut deadline = None;
            let mut backoff = crate::backoff::Backoff::new();
            loop {
                if self.map.insert(&region, key).is_ok() {
                    break;
                }
                let mut freed = 0;
                for r in 0..self.cursors.len() {
                    freed += self.advance(r);
                }
                let cursors = &self.cursors;
                freed += self.map.prune(|p| Self::retired(cursors, p)) as u32;
                if freed > 0 {
                    deadline = None;
                    backoff.reset();
                    continue;
                }
                self.live()?;
                let now = self.a.now_ticks();
                let deadline = *deadline.get_or_insert(now.saturating_add(budget));
                if now >= deadline {
                    let cap = self.map.capacity() as u64;
                    let text = format!("the tensor map holds {cap} live entries and none was retired in time");
                    return Err(self.stop_with(OrchError::TensormapOverflow, cap, &text));
                }
                self.wake(true);
                self.flow_wait(&mut backoff, now, deadline);
            }
        }
        Ok(())
    }

    /// Wait until every producer of the element region `r` is done — in a manual scope,
    /// where writers are not tracked, every live task.
    pub(super) fn wait_producers(&mut self, r: &Region) -> Result<(), OrchFail> {
        let mut prods = Vec::new();
        if self.scopes.last().is_some_and(|s| s.mode == ScopeMode::Manual) {
            for (ring, c) in self.cursors.iter().enumerate() {
                let mut l = c.last_alive;
                while l != c.current {
                    prods.push(((ring as u64) << 32) | l as u64);
                    l = l.wrapping_add(1);
                }
            }
        } else {
            self.map.lookup(r, &mut prods);
        }
        let deadline = self.a.now_ticks().saturating_add(self.s.image.wait_ticks);
        for p in prods {
            let (ring, l) = ((p >> 32) as usize, p as u32);
            let mut backoff = crate::backoff::Backoff::new();
            loop {
                let slot = self.slot(ring, l);
                let done = l < self.cursors[ring].last_alive
                    || slot.local.load(Ordering::Acquire) != l
                    || slot.state.load(Ordering::Acquire) >= COMPLETED;
                if done {
                    break;
                }
                self.live()?;
                let now = self.a.now_ticks();
                if now >= deadline {
                    let id = task_id(ring, l);
                    let text = format!("tensor data waited for task {id} past the budget");
                    return Err(self.stop_with(OrchError::TensorWaitTimeout, id as u64, &text));
                }
                self.wake(true);
                backoff.idle(self.a, now.saturating_add(self.a.ticks_from_micros(20)).min(deadline));
            }
        }
        Ok(())
    }
}
