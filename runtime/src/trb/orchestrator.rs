//! The device-side orchestrator: runs the user's orchestration on the highest AICPU thread.
//!
//! Submit (one task): validate → find producers (explicit ids, tensor-map lookups of what it
//! reads and writes, the allocation records of the scope tensors it names) → reserve a slot,
//! heap bytes for its argument record and pool entries for its edges in the current scope's
//! ring (waiting for reclaim under flow control) → write the record → wire: under each live
//! producer's lock either count it done or link an edge into its fan-out list, and take a
//! lifetime reference on it → register what it writes in the tensor map → release the
//! `+1` guard of its fan-in count, which queues it if every producer was already done.
//!
//! When a ring is full the orchestrator reclaims and waits; when reclaim cannot happen — the
//! oldest task of the ring is pinned by a scope that is still open, or nothing moves within
//! the wait budget — it latches the reference code for the resource (SCOPE_DEADLOCK,
//! FLOW_CONTROL_DEADLOCK, HEAP_RING_DEADLOCK, DEP_POOL_OVERFLOW, TENSORMAP_OVERFLOW) instead
//! of hanging.

use crate::sync::Ordering;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use pto_hal::{AicpuAgent, CoreType, GmAddr};

use super::Shared;
use super::ring::{self, COMPLETED, Cursor, Lack, PENDING, Wired, handle, task_id, untask_id};
use crate::codes::{ErrorCode, OrchError, Site};
use crate::exec::legacy::sched::{Completions, TaskSource};
use crate::graph::{BufferRef, DType, Direction, GraphError, Placement, Task, TaskId, Tensor};
use crate::layout::{RINGS, Shape, TaskDesc};
use crate::lifecycle::{self, Fault};
use crate::orch::{Orch, OrchArgs, OrchFail, OrchFn, Orchestrator, RuntimeKind, ScopeMode, element_offset};
use crate::tensormap::{Region, TensorMap};

/// Deepest scope nesting (SCOPE_TASKS_OVERFLOW beyond).
pub const MAX_SCOPE_DEPTH: usize = 64;

/// Shortest gap between two wake-ups the orchestrator sends the schedulers while submitting.
pub const WAKE_GAP_US: u64 = 20;

/// The tensor map is swept of retired producers after this many tasks were reclaimed.
pub const PRUNE_EVERY: u32 = 64;

/// Buffer ids of scope-allocated tensors carry this bit.
pub const RING_BUFFER_BIT: u64 = 1 << 62;

/// Run the orchestration of this launch, then mark the orchestrator done.
pub fn run<A: AicpuAgent>(a: &A, s: &Shared, trace: Option<&mut crate::trace::TraceRing>) {
    if !s.base().stop.load(Ordering::Acquire) {
        match a.resolve_program::<OrchFn>(s.image.program) {
            None => {
                latch(a, s, OrchError::InvalidArgs, s.image.program, "the orchestration program is not loaded");
            }
            Some(f) => {
                let args = orch_args(s);
                let mut o = DeviceOrch::new(a, s, trace);
                // The implicit outer scope.
                let _ = o.scope_begin(ScopeMode::Auto);
                let mut result = Ok(());
                let started = a.now_ticks();
                let ran = a.run_program(&mut || result = f(&mut Orch::new(&mut o), &args));
                let took = a.now_ticks().saturating_sub(started);
                a.store_direct(s.base().map.desc.offset(crate::layout::offsets::RUN_ORCH_TICKS), took);

                match (ran, result) {
                    (Err(p), _) => {
                        let text = format!("orchestration panicked: {}", p.as_str());
                        o.stop_with(OrchError::ExplicitOrchFatal, 0, &text);
                    }

                    (Ok(()), Err(e)) => o.fail_from(&e),
                    (Ok(()), Ok(())) => {}
                }
                // Close whatever is open (a leaked guard, the outer scope).
                while !o.scopes.is_empty() {
                    o.end_scope_now();
                }
            }
        }
    }
    s.orch_done.store(true, Ordering::Release);
    a.send_event();
}

fn orch_args(s: &Shared) -> OrchArgs {
    let mut args = OrchArgs::new();
    for t in &s.tensors {
        let dtype = DType::try_from(t.dtype).unwrap_or(DType::U8);
        let buffer = BufferRef {
            device: 0,
            id: t.buffer_id,
            placement: Placement::External(GmAddr(t.addr)),
            bytes: t.bytes,
            dtype,
        };
        let mut shape = [1u32; 5];
        let mut strides = [0u32; 5];
        shape.copy_from_slice(&t.shape);
        strides.copy_from_slice(&t.strides);
        args = args.tensor(Tensor { buffer, offset: t.offset, ndims: t.ndims, shape, strides });
    }
    for &v in &s.scalars {
        args = args.scalar(v);
    }
    args
}

fn latch<A: AicpuAgent>(a: &A, s: &Shared, code: OrchError, detail: u64, text: &str) {
    let f = Fault { code: ErrorCode::Orch(code), site: Site::Orchestrator, task: None, core: None, detail };
    lifecycle::latch(a, s.base().map.desc, f, text);
    s.base().stop.store(true, Ordering::Release);
    a.send_event();
}

struct ScopeRec {
    id: u32,
    mode: ScopeMode,
    tasks: Vec<u32>,
}

/// The orchestrator's private state.
struct DeviceOrch<'a, A: AicpuAgent> {
    a: &'a A,
    s: &'a Shared,
    cursors: Vec<Cursor>,
    map: TensorMap<u64>,
    scopes: Vec<ScopeRec>,
    next_scope: u32,
    next_buffer: u64,
    stopped: bool,
    producers: Vec<u64>,
    record: Vec<u8>,
    /// Tick of the last wake-up sent to the schedulers, and whether ready work was queued
    /// since.
    last_wake: u64,
    wake_pending: bool,
    wake_gap: u64,
    /// Tasks reclaimed since the tensor map was last swept.
    reclaimed: u32,
    completions: Completions,
    /// The orchestrator thread's trace ring, when the run traces: each dependency found at
    /// submission is recorded there (`trace_kind::EDGE`).
    trace: Option<&'a mut crate::trace::TraceRing>,
}

impl<'a, A: AicpuAgent> DeviceOrch<'a, A> {
    fn new(a: &'a A, s: &'a Shared, trace: Option<&'a mut crate::trace::TraceRing>) -> Self {
        let cursors = s.image.rings.iter().map(|r| Cursor::new(r.window, r.heap, r.dep_pool)).collect();
        DeviceOrch {
            a,
            s,
            cursors,
            map: TensorMap::new(s.image.tensormap_entries.max(1) as usize),
            scopes: Vec::new(),
            next_scope: 0,
            next_buffer: 0,
            stopped: false,
            producers: Vec::new(),
            record: Vec::new(),
            last_wake: 0,
            wake_pending: false,
            wake_gap: a.ticks_from_micros(WAKE_GAP_US),
            reclaimed: 0,
            completions: Completions::new(),
            trace,
        }
    }

    /// Tell the schedulers ready work was queued: at most once per [`WAKE_GAP_US`] while
    /// submitting (a wake-up costs the sleeper's CPU a round trip), and always when `flush`
    /// (before the orchestrator waits or finishes).
    fn wake(&mut self, flush: bool) {
        self.wake_pending |= !flush;
        if !self.wake_pending {
            return;
        }
        let now = self.a.now_ticks();
        if flush || now.saturating_sub(self.last_wake) >= self.wake_gap {
            self.a.send_event();
            self.last_wake = now;
            self.wake_pending = false;
        }
    }

    fn ring(&self) -> usize {
        self.scopes.len().saturating_sub(1).min(RINGS - 1)
    }

    fn live(&mut self) -> Result<(), OrchFail> {
        if self.stopped || self.s.base().stop.load(Ordering::Acquire) {
            self.stopped = true;
            return Err(OrchFail::Stopped);
        }
        Ok(())
    }

    /// Latch `code` and stop; the error to return.
    fn stop_with(&mut self, code: OrchError, detail: u64, text: &str) -> OrchFail {
        if !self.stopped {
            latch(self.a, self.s, code, detail, text);
            self.stopped = true;
        }
        OrchFail::Code { code, detail }
    }

    fn invalid(&mut self, e: GraphError) -> OrchFail {
        let text = format!("{e}");
        // The detail word carries the argument index the error names, if any.
        self.stop_with(OrchError::InvalidArgs, e.arg().map_or(0, u64::from), &text);
        OrchFail::Graph(e)
    }

    /// The orchestration returned `e` without the runtime having latched it.
    fn fail_from(&mut self, e: &OrchFail) {
        match e {
            OrchFail::Graph(g) => {
                let text = format!("{g}");
                self.stop_with(OrchError::InvalidArgs, g.arg().map_or(0, u64::from), &text);
            }
            OrchFail::Code { code, detail } => {
                self.stop_with(*code, *detail, "returned by the orchestration");
            }
            OrchFail::Stopped => {}
        }
    }

    fn slot(&self, ring: usize, local: u32) -> &'a ring::Slot {
        let r = &self.s.rings[ring];
        &r.slots[r.slot_of(local) as usize]
    }

    fn retired(cursors: &[Cursor], p: u64) -> bool {
        let (r, l) = ((p >> 32) as usize, p as u32);
        l < cursors[r].last_alive
    }

    /// Blocks one scheduler thread can start together for `shape` (the sync-start bound).
    fn cohort_capacity(&self, shape: Shape) -> u32 {
        let cfg = &self.s.base().map.cfg;
        let schedulers = cfg.aicpu_threads.saturating_sub(1).max(1);
        let clusters = cfg.clusters / schedulers;
        match shape {
            Shape::Aic | Shape::Mix => clusters,
            Shape::Aiv => 2 * clusters,
            Shape::Dummy => 0,
        }
    }

    fn bins(&mut self, task: &Task, id: u32) -> Result<[u64; 3], OrchFail> {
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

    /// Wait until `ring` can take one task with `heap` bytes and `edges` edges.
    fn reserve(&mut self, ring: usize, heap: u64, edges: u64) -> Result<(), OrchFail> {
        if self.cursors[ring].current >= 1 << ring::ID_LOCAL_BITS {
            let text = format!("ring {ring} used up its 2^30 task ids in this run; split the run");
            return Err(self.stop_with(OrchError::InvalidArgs, ring as u64, &text));
        }
        let budget = self.s.image.wait_ticks;
        let mut deadline = self.a.now_ticks().saturating_add(budget);
        loop {
            let c = &mut self.cursors[ring];
            let freed = c.advance(&self.s.rings[ring]);
            if freed > 0 {
                deadline = self.a.now_ticks().saturating_add(budget);
                self.note_reclaimed(freed);
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
            if let Some(scope) = c.oldest_scope() {
                if let Some(pos) = self.scopes.iter().position(|sc| sc.id == scope) {
                    // The oldest task holds a reference of a scope that is still open: it
                    // cannot be consumed while this orchestrator waits inside that scope.
                    let innermost = pos + 1 == self.scopes.len();
                    let c = code(if innermost { OrchError::ScopeDeadlock } else { OrchError::FlowControlDeadlock });
                    let text = format!(
                        "ring {ring} (window {window}, heap {heap_size} B, dep pool {dep_cap}) is full of tasks of a scope that is still open ({lack:?} exhausted)"
                    );
                    return Err(self.stop_with(c, window as u64, &text));
                }
            }
            self.live()?;
            let now = self.a.now_ticks();
            if now >= deadline {
                let text = format!("ring {ring}: no task was reclaimed within the wait budget ({lack:?} exhausted)");
                return Err(self.stop_with(code(OrchError::FlowControlDeadlock), window as u64, &text));
            }
            self.wake(true);
            self.a.wait_for_event(now.saturating_add(self.a.ticks_from_micros(20)).min(deadline));
        }
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

    fn collect_producers(&mut self, task: &Task, id: u32, mode: ScopeMode) -> Result<(), OrchFail> {
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
                Placement::Ring { owner, .. } => {
                    let (r, l) = untask_id(owner.0);
                    let live = r < RINGS
                        && l >= self.cursors[r].last_alive
                        && l < self.cursors[r].current
                        && self.slot(r, l).local.load(Ordering::Relaxed) == l
                        && self.slot(r, l).refs.load(Ordering::Acquire) > 0;
                    if !live {
                        refused.get_or_insert(GraphError::EndedScopeTensor { task: id, arg });
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

    fn insert_writes(&mut self, task: &Task, key: u64) -> Result<(), OrchFail> {
        for a in task.args() {
            if !a.dir.writes() {
                continue;
            }
            let region = a.tensor.region();
            let budget = self.s.image.wait_ticks;
            let mut deadline = self.a.now_ticks().saturating_add(budget);
            loop {
                if self.map.insert(&region, key).is_ok() {
                    break;
                }
                let mut freed = 0;
                for (r, c) in self.cursors.iter_mut().enumerate() {
                    freed += c.advance(&self.s.rings[r]);
                }
                let cursors = &self.cursors;
                freed += self.map.prune(|p| Self::retired(cursors, p)) as u32;
                if freed > 0 {
                    deadline = self.a.now_ticks().saturating_add(budget);
                    continue;
                }
                self.live()?;
                let now = self.a.now_ticks();
                if now >= deadline {
                    let cap = self.map.capacity() as u64;
                    let text = format!("the tensor map holds {cap} live entries and none was retired in time");
                    return Err(self.stop_with(OrchError::TensormapOverflow, cap, &text));
                }
                self.wake(true);
                self.a.wait_for_event(now.saturating_add(self.a.ticks_from_micros(20)).min(deadline));
            }
        }
        Ok(())
    }

    /// Wait until every producer of the element region `r` is done — in a manual scope,
    /// where writers are not tracked, every live task.
    fn wait_producers(&mut self, r: &Region) -> Result<(), OrchFail> {
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
                self.a.wait_for_event(now.saturating_add(self.a.ticks_from_micros(20)).min(deadline));
            }
        }
        Ok(())
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

    fn end_scope_now(&mut self) {
        if let Some(sc) = self.scopes.pop() {
            for h in sc.tasks {
                let (r, i) = ring::unhandle(h);
                self.s.rings[r].slots[i as usize].release();
            }
        }
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
        let mode = self.scopes.last().map_or(ScopeMode::Auto, |s| s.mode);
        self.collect_producers(&task, id, mode)?;
        let heap = crate::args::record_len(&task).div_ceil(64) * 64;
        let edges = self.producers.len() as u64;
        self.reserve(ring, heap, edges)?;
        let scope_id = self.scopes.last().map_or(0, |s| s.id);
        let (local, off, first_edge) = self.cursors[ring].allocate(heap, edges, scope_id);
        let id = task_id(ring, local);
        let args_addr = self.s.image.rings[ring].heap_base + off;

        // The argument record: AICPU stores, read by the cores after the register hand-off.
        let mut rec = core::mem::take(&mut self.record);
        rec.clear();
        rec.resize(crate::args::record_len(&task) as usize, 0);
        crate::args::encode(&task, GmAddr::NULL, &mut rec);
        self.a.write(GmAddr(args_addr), &rec);
        // Published by the contract before the task can become ready (a clean under a2a3).
        if !crate::breakage::broken(crate::breakage::SKIP_RECORD_CLEAN) {
            crate::lifecycle::publish_aicpu(self.a, GmAddr(args_addr), rec.len() as u64);
        }
        self.record = rec;

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

        // Wire the producers.
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
        slot.edges_len.store(linked as u32, Ordering::Relaxed);
        if let Some(t) = self.trace.as_deref_mut() {
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
        if let Some(sc) = self.scopes.last_mut() {
            sc.tasks.push(me);
        }
        if mode == ScopeMode::Auto {
            self.insert_writes(&task, ((ring as u64) << 32) | local as u64)?;
        }
        self.s.submitted.fetch_add(1, Ordering::AcqRel);
        self.s.base().touch(self.a);
        if ring::release_guard(&self.s.rings, me, done) {
            self.completions.became_ready(self.a, self.s, me, Site::Orchestrator);
            self.wake(false);
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
        let buffer = BufferRef {
            device: 0,
            id: RING_BUFFER_BIT | self.next_buffer,
            placement: Placement::Ring {
                addr: GmAddr(self.s.image.rings[ring].heap_base + off),
                owner: TaskId(task_id(ring, local)),
            },
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
        Ok(())
    }

    fn write_element(&mut self, t: &Tensor, index: &[u32], bytes: &[u8]) -> Result<(), OrchFail> {
        self.live()?;
        let (addr, region) = self.element(t, index, bytes.len())?;
        self.wait_producers(&region)?;
        self.a.write(GmAddr(addr), bytes);
        // Consumers (AICores) and the host read it: publish by the contract.
        if !crate::breakage::broken(crate::breakage::SKIP_ELEMENT_CLEAN) {
            crate::lifecycle::publish_aicpu(self.a, GmAddr(addr), bytes.len() as u64);
        }
        Ok(())
    }

    fn fatal(&mut self, message: &str) -> OrchFail {
        let text: String = message.chars().take(120).collect();
        self.stop_with(OrchError::ExplicitOrchFatal, 0, &text)
    }
}
