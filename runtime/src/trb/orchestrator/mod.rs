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
//!
//! The rooms: `admission` (the checks a task passes and the producers it waits for), `flow`
//! (waiting for ring room, tensor-map room and producers) and `api` (the [`Orchestrator`]
//! calls themselves, submit first); this file holds the orchestrator's state and the run.

mod admission;
mod api;
mod flow;

use crate::sync::Ordering;
use alloc::format;
use alloc::vec::Vec;

use pto_hal::{AicpuAgent, GmAddr, Ticks};

use super::Shared;
use super::ring::{self, Cursor};
use crate::codes::{ErrorCode, OrchError, Site};
use crate::exec::aicpu::source::{Completions, TaskSource};
use crate::graph::{BufferRef, DType, GraphError, Placement, Tensor};
use crate::layout::RINGS;
use crate::lifecycle::{self, Fault};
use crate::orch::{Orch, OrchArgs, OrchFail, OrchFn, Orchestrator, ScopeMode};
use crate::tensormap::TensorMap;

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
                a.store_direct(s.base().map.desc.offset(crate::layout::offsets::RUN_ORCH_FLOW_TICKS), o.flow_ticks);

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
    /// Ticks spent waiting in flow control (room in a ring or in the tensor map).
    flow_ticks: u64,
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
            flow_ticks: 0,
            completions: Completions::new(),
            trace,
        }
    }

    /// Tell the schedulers ready work was queued: at most once per [`WAKE_GAP_US`] while
    /// submitting (a wake-up costs the sleeper's CPU a round trip), and always when `flush`
    /// (before the orchestrator waits or finishes).
    fn wake(&mut self, flush: bool) {
        self.wake_pending |= !flush;
        if self.wake_pending {
            let now = self.a.now_ticks();
            self.wake_if_due(flush, now);
        }
    }

    /// [`DeviceOrch::wake`] for new ready work (not a flush), with the clock read at `now`.
    fn wake_at(&mut self, now: Ticks) {
        self.wake_pending = true;
        self.wake_if_due(false, now);
    }

    fn wake_if_due(&mut self, flush: bool, now: Ticks) {
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

    fn end_scope_now(&mut self) {
        if let Some(sc) = self.scopes.pop() {
            for h in sc.tasks {
                let (r, i) = ring::unhandle(h);
                self.s.rings[r].slots[i as usize].release();
            }
        }
    }
}
