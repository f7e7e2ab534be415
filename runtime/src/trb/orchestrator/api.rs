//! The orchestration API on the device: submit (write the record, wire the producers, register
//! the writes), scope allocations, scopes, and element reads and writes, as the user's
//! orchestration calls them through [`Orchestrator`].

use crate::sync::Ordering;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use pto_hal::{AicpuAgent, GmAddr};

use super::{DeviceOrch, MAX_SCOPE_DEPTH, RING_BUFFER_BIT, ScopeRec};
use crate::codes::{OrchError, Site};
use crate::exec::aicpu::source::TaskSource;
use crate::graph::{BufferRef, DType, GraphError, Placement, Task, TaskId, Tensor};
use crate::layout::{Shape, TaskDesc};
use crate::orch::{OrchFail, Orchestrator, RuntimeKind, ScopeMode, element_offset};
use crate::tensormap::Region;
use crate::trb::ring::{self, COMPLETED, PENDING, Wired, handle, task_id};

impl<A: AicpuAgent> DeviceOrch<'_, A> {
    /// Write task `task`'s argument record at `args_addr`: AICPU stores, read by the cores
    /// after the register hand-off, published by the contract before the task can become
    /// ready (a clean under a2a3).
    fn write_record(&mut self, task: &Task, args_addr: u64) {
        let mut rec = core::mem::take(&mut self.record);
        rec.clear();
        rec.resize(crate::args::record_len(task) as usize, 0);
        crate::args::encode(task, GmAddr::NULL, &mut rec);
        self.a.write(GmAddr(args_addr), &rec);
        publish_record(self.a, GmAddr(args_addr), rec.len() as u64);
        self.record = rec;
    }

    /// Wire the collected producers to task handle `me` of ring `ring`, its edges from
    /// `first_edge`: how many producers are done already (retired, or completed while being
    /// wired) and how many edges were linked.
    fn wire_producers(&self, me: u32, ring: usize, first_edge: u64) -> (u32, u64) {
        let mut done = 0u32;
        let mut linked = 0u64;
        let rings = &self.s.rings;
        for &p in &self.producers {
            let (pr, pl) = ((p >> 32) as usize, p as u32);
            let ph = handle(pr, rings[pr].slot_of(pl));
            match ring::wire(rings, me, ph, pl, ring, first_edge + linked) {
                Wired::Gone => done += 1,
                Wired::Done => {
                    done += 1;
                    linked += 1;
                }
                Wired::Linked => linked += 1,
            }
        }
        (done, linked)
    }

    /// When the run traces: one edge record per collected producer of task `id`.
    fn trace_edges(&mut self, id: u32) {
        let Some(t) = self.trace.as_deref_mut() else { return };
        let now = self.a.now_ticks();
        for &p in &self.producers {
            let producer = task_id((p >> 32) as usize, p as u32);
            let r = crate::layout::TraceRecord {
                kind: crate::layout::trace_kind::EDGE,
                core: u32::MAX,
                task: id,
                block: producer,
                start: now,
                end: now,
                ..Default::default()
            };
            t.push(self.a, &r);
        }
    }

    fn element(&mut self, t: &Tensor, index: &[u32], len: usize) -> Result<(u64, Region), OrchFail> {
        let off = element_offset(t, index)?;
        let es = t.dtype().size() as u64;
        if len as u64 != es {
            return Err(OrchFail::Code { code: OrchError::InvalidArgs, detail: len as u64 });
        }
        let mut one = *t;
        one.offset = off;
        one.ndims = 1;
        one.shape = [1; 5];
        one.strides = [1, 0, 0, 0, 0];
        Ok((crate::args::tensor_addr(&one, GmAddr::NULL), one.region()))
    }
}

impl<A: AicpuAgent> Orchestrator for DeviceOrch<'_, A> {
    fn runtime(&self) -> RuntimeKind {
        RuntimeKind::TensormapRing
    }

    fn clusters(&self) -> u32 {
        self.s.base().map.cfg.clusters
    }

    fn submit_task(&mut self, task: Task) -> Result<TaskId, OrchFail> {
        self.live()?;
        let ring = self.ring();
        let local_next = self.cursors[ring].current;
        let id = task_id(ring, local_next);
        if let Err(e) = task.validate(id) {
            return Err(self.invalid(e));
        }
        let bins = self.bins(&task, id)?;
        let shape = task.kind().shape();
        self.check_placeable(&task, id, shape)?;
        let mode = self.scopes.last().map_or(ScopeMode::Auto, |s| s.mode);
        self.collect_producers(&task, id, mode)?;
        let heap = crate::args::record_len(&task).div_ceil(64) * 64;
        let edges = self.producers.len() as u64;
        self.reserve(ring, heap, edges)?;
        let scope_id = self.scopes.last().map_or(0, |s| s.id);
        let (local, off, first_edge) = self.cursors[ring].allocate(heap, edges, scope_id);
        let id = task_id(ring, local);
        let args_addr = self.s.image.rings[ring].heap_base + off;
        // The checks see every producer the task names, retired ones included (the wiring
        // below skips those).
        let explicit = task.explicit_deps().iter().map(|d| d.0);
        let found = self.producers.iter().map(|&p| task_id((p >> 32) as usize, p as u32));
        self.a.note_task(id, &mut explicit.chain(found));

        self.write_record(&task, args_addr);

        let me = handle(ring, self.s.rings[ring].slot_of(local));
        let slot = self.slot(ring, local);
        slot.local.store(local, Ordering::Relaxed);
        slot.state.store(PENDING, Ordering::Relaxed);
        slot.refs.store(2, Ordering::Relaxed);
        slot.fanout_head.store(0, Ordering::Relaxed);
        slot.fanin_need.store(edges as u32 + 1, Ordering::Relaxed);
        slot.fanin_done.store(0, Ordering::Relaxed);
        slot.edges_start.store(first_edge, Ordering::Relaxed);
        slot.edges_len.store(0, Ordering::Relaxed);
        slot.next_block.store(0, Ordering::Relaxed);
        slot.subtasks_done.store(0, Ordering::Relaxed);
        let desc = TaskDesc {
            shape,
            lanes: task.kind().lanes(),
            sync_start: task.is_sync_start(),
            block_num: task.block_num(),
        };
        slot.desc.store(desc.pack(), Ordering::Relaxed);
        for (i, b) in bins.iter().enumerate() {
            slot.bins[i].store(*b, Ordering::Relaxed);
        }
        slot.args.store(args_addr, Ordering::Relaxed);
        let pred = task.predicate().map_or(0, |p| crate::args::tensor_addr(p, GmAddr::NULL));
        slot.predicate.store(pred, Ordering::Relaxed);

        let (done, linked) = self.wire_producers(me, ring, first_edge);
        slot.edges_len.store(linked as u32, Ordering::Relaxed);
        self.trace_edges(id);
        if let Some(sc) = self.scopes.last_mut() {
            sc.tasks.push(me);
        }
        if mode == ScopeMode::Auto {
            self.insert_writes(&task, ((ring as u64) << 32) | local as u64)?;
        }
        self.s.submitted.fetch_add(1, Ordering::AcqRel);
        // One clock read serves the stall watchdog's progress mark and the wake's rate limit.
        let now = self.a.now_ticks();
        self.s.base().touch_at(now);
        if ring::release_guard(&self.s.rings, me, done) {
            self.completions.became_ready(self.a, self.s, me, Site::Orchestrator);
            self.wake_at(now);
        }
        Ok(TaskId(id))
    }

    fn alloc(&mut self, dtype: DType, shape: &[u32]) -> Result<Tensor, OrchFail> {
        self.live()?;
        // Validate the shape before taking anything.
        let bytes = match crate::graph::shape_bytes(dtype, shape) {
            Ok(b) => b,
            Err(e) => return Err(self.invalid(e)),
        };
        let probe = BufferRef { device: 0, id: 0, placement: Placement::Heap(0), bytes, dtype };
        if let Err(e) = Tensor::whole(probe, shape) {
            return Err(self.invalid(e));
        }
        let ring = self.ring();
        let Some(heap) = bytes.max(1).checked_next_multiple_of(64) else {
            return Err(self.invalid(GraphError::ShapeTooLarge));
        };
        self.reserve(ring, heap, 0)?;
        let scope_id = self.scopes.last().map_or(0, |s| s.id);
        let (local, off, first_edge) = self.cursors[ring].allocate(heap, 0, scope_id);
        let addr = GmAddr(self.s.image.rings[ring].heap_base + off);
        self.a.note_task(task_id(ring, local), &mut core::iter::empty());
        self.a.note_allocation(task_id(ring, local), addr, bytes);
        let slot = self.slot(ring, local);
        slot.local.store(local, Ordering::Relaxed);
        slot.refs.store(1, Ordering::Relaxed);
        slot.fanout_head.store(0, Ordering::Relaxed);
        slot.edges_start.store(first_edge, Ordering::Relaxed);
        slot.edges_len.store(0, Ordering::Relaxed);
        slot.desc.store(Shape::Dummy as u64, Ordering::Relaxed);
        // An allocation record is complete from the start: it only holds the memory.
        slot.state.store(COMPLETED, Ordering::Release);
        let me = handle(ring, self.s.rings[ring].slot_of(local));
        if let Some(sc) = self.scopes.last_mut() {
            sc.tasks.push(me);
        }
        self.next_buffer += 1;
        let id = RING_BUFFER_BIT | self.next_buffer;
        self.cursors[ring].note_allocation(local, ring::RingAlloc { id, addr: addr.0, bytes, dtype });
        let buffer = BufferRef {
            device: 0,
            id,
            placement: Placement::Ring { addr, owner: TaskId(task_id(ring, local)) },
            bytes,
            dtype,
        };
        Ok(Tensor::whole(buffer, shape)?)
    }

    fn scope_begin(&mut self, mode: ScopeMode) -> Result<(), OrchFail> {
        self.live()?;
        if self.scopes.len() >= MAX_SCOPE_DEPTH {
            let text = format!("scopes nested deeper than {MAX_SCOPE_DEPTH}");
            return Err(self.stop_with(OrchError::ScopeTasksOverflow, self.scopes.len() as u64, &text));
        }
        if mode == ScopeMode::Auto && self.scopes.last().is_some_and(|s| s.mode == ScopeMode::Manual) {
            return Err(self.stop_with(OrchError::InvalidArgs, 0, "an auto scope inside a manual scope"));
        }
        self.next_scope += 1;
        self.scopes.push(ScopeRec { id: self.next_scope, mode, tasks: Vec::new() });
        Ok(())
    }

    fn scope_end(&mut self) -> Result<(), OrchFail> {
        if self.scopes.len() <= 1 {
            return Err(self.stop_with(OrchError::InvalidArgs, 0, "scope_end without a matching scope_begin"));
        }
        self.end_scope_now();
        self.live()
    }

    fn read_element(&mut self, t: &Tensor, index: &[u32], out: &mut [u8]) -> Result<(), OrchFail> {
        self.live()?;
        let (addr, region) = self.element(t, index, out.len())?;
        self.wait_producers(&region)?;
        crate::observe_host::<A>(self.a, GmAddr(addr), out.len() as u64);
        self.a.read(GmAddr(addr), out);
        self.a.note_orchestration_access(GmAddr(addr), out.len() as u64, false);
        Ok(())
    }

    fn write_element(&mut self, t: &Tensor, index: &[u32], bytes: &[u8]) -> Result<(), OrchFail> {
        self.live()?;
        let (addr, region) = self.element(t, index, bytes.len())?;
        self.wait_producers(&region)?;
        self.a.write(GmAddr(addr), bytes);
        self.a.note_orchestration_access(GmAddr(addr), bytes.len() as u64, true);
        // Consumers (AICores) and the host read it: publish by the contract.
        publish_element(self.a, GmAddr(addr), bytes.len() as u64);
        Ok(())
    }

    fn fatal(&mut self, message: &str) -> OrchFail {
        let text: String = message.chars().take(120).collect();
        self.stop_with(OrchError::ExplicitOrchFatal, 0, &text)
    }
}

/// Publish a task's argument record (`len` bytes at `at`) by the contract before the task can
/// become ready (a clean under a2a3).
fn publish_record<A: AicpuAgent>(a: &A, at: GmAddr, len: u64) {
    // Broken: the record stays in the orchestrator's cache.
    crate::seam!(SKIP_RECORD_CLEAN);
    crate::lifecycle::publish_aicpu(a, at, len);
}

/// Publish `len` bytes of a tensor element the orchestrator wrote at `at`: its consumers
/// (AICores) and the host read it.
fn publish_element<A: AicpuAgent>(a: &A, at: GmAddr, len: u64) {
    // Broken: the element stays in the orchestrator's cache.
    crate::seam!(SKIP_ELEMENT_CLEAN);
    crate::lifecycle::publish_aicpu(a, at, len);
}
