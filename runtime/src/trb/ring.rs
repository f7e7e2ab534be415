//! The rings of the device-side runtime: task slots, dependency edges, and the heap.
//!
//! One ring per scope depth (`min(depth, RINGS - 1)`). A ring has
//!
//! * a **task window** of `2^k` [`Slot`]s; local task id `L` lives in slot `L & (window - 1)`;
//! * a **dependency pool** of [`Edge`]s: every producer → consumer edge of a consumer in this
//!   ring, allocated in order when the consumer is submitted;
//! * a **heap** in GM: each task's argument record and every tensor a scope allocates.
//!
//! A task's life: PENDING (submitted) → COMPLETED (all subtasks finished, or skipped) →
//! CONSUMED (its lifetime references are all gone: its scope ended, it completed, and every
//! consumer that named it completed). Only the orchestrator allocates and reclaims: it moves a
//! ring's watermark (`last_alive`) over CONSUMED slots and frees, in order, the heap bytes and
//! edges those tasks held. Slots, edges and heap bytes are reused only behind the watermark,
//! so no reader can still be looking at them (invariant 3 of the house plan).
//!
//! Slot and edge words are atomics in AICPU memory (the AICPU threads are one coherence
//! domain); the per-slot lock orders the fan-out list against the COMPLETED transition.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering, spin_hint};
use alloc::boxed::Box;

/// Task state: submitted, not yet completed.
pub const PENDING: u32 = 0;
/// Task state: every subtask finished (or the task was skipped / needs no core).
pub const COMPLETED: u32 = 1;
/// Task state: completed and no longer referenced; its slot may be reclaimed.
pub const CONSUMED: u32 = 2;

/// Bits of a scheduler task handle that hold the slot index (the ring is above them).
pub const HANDLE_SLOT_BITS: u32 = 28;
/// Bits of a [`crate::graph::TaskId`] that hold the local id (the ring is above them).
pub const ID_LOCAL_BITS: u32 = 30;

/// The scheduler's handle of `slot` in `ring`.
pub const fn handle(ring: usize, slot: u32) -> u32 {
    ((ring as u32) << HANDLE_SLOT_BITS) | slot
}

/// `(ring, slot)` of a handle.
pub const fn unhandle(h: u32) -> (usize, u32) {
    ((h >> HANDLE_SLOT_BITS) as usize, h & ((1 << HANDLE_SLOT_BITS) - 1))
}

/// The user-visible id of local task `local` of `ring`.
pub const fn task_id(ring: usize, local: u32) -> u32 {
    ((ring as u32) << ID_LOCAL_BITS) | (local & ((1 << ID_LOCAL_BITS) - 1))
}

/// `(ring, local)` of a user-visible task id.
pub const fn untask_id(id: u32) -> (usize, u32) {
    ((id >> ID_LOCAL_BITS) as usize, id & ((1 << ID_LOCAL_BITS) - 1))
}

/// AICPU memory one ring's task window and dependency pool may take together (256 MiB): what
/// the simulated AICPU (host heap) and a board's AICPU memory hold for four rings with room to
/// spare. A configuration over it is refused by the host before launch and by the device when
/// it loads the image (a window of 2^28 slots would ask for tens of GiB).
pub const AICPU_RING_BUDGET: u64 = 256 << 20;

/// AICPU bytes one task-window slot costs: its [`Slot`], the orchestrator's [`Mark`], and its
/// entries in every ready queue (sized from the windows, rounded up to a power of two, so up to
/// twice one entry per queue).
pub const SLOT_BYTES: u64 = (core::mem::size_of::<Slot>() + core::mem::size_of::<Mark>()) as u64
    + 2 * crate::layout::Shape::QUEUED as u64 * crate::exec::aicpu::queue::ENTRY_BYTES;

/// AICPU bytes one dependency-pool entry costs (one [`Edge`]).
pub const EDGE_BYTES: u64 = core::mem::size_of::<Edge>() as u64;

/// AICPU bytes a ring of `window` slots and `dep_pool` edges takes (at most
/// [`AICPU_RING_BUDGET`] for a ring that is accepted).
pub const fn aicpu_bytes(window: u32, dep_pool: u32) -> u64 {
    window as u64 * SLOT_BYTES + dep_pool as u64 * EDGE_BYTES
}

/// One task-window slot.
pub struct Slot {
    /// Local id of the task occupying the slot.
    pub local: AtomicU32,
    /// [`PENDING`], [`COMPLETED`] or [`CONSUMED`].
    pub state: AtomicU32,
    /// Guards `fanout_head` against the COMPLETED transition.
    lock: AtomicBool,
    /// First edge of the fan-out list (edge index + 1; 0 = empty).
    pub fanout_head: AtomicU32,
    /// Lifetime references: scope + completion + one per consumer that named the task.
    pub refs: AtomicU32,
    /// Producers the task waits for, plus one guard the orchestrator releases last.
    pub fanin_need: AtomicU32,
    /// Producers done so far (plus the guard).
    pub fanin_done: AtomicU32,
    /// First of the task's own fan-in edges (a pool position).
    pub edges_start: AtomicU64,
    /// Number of the task's own fan-in edges.
    pub edges_len: AtomicU32,
    /// Next SPMD block to place.
    pub next_block: AtomicU32,
    /// Subtasks finished.
    pub subtasks_done: AtomicU32,
    /// The task description, packed ([`TaskDesc`](crate::layout::TaskDesc)).
    pub desc: AtomicU64,
    /// Kernel binary per lane.
    pub bins: [AtomicU64; 3],
    /// GM address of the argument record.
    pub args: AtomicU64,
    /// GM address of the predicate (0 = none).
    pub predicate: AtomicU64,
}

impl Slot {
    /// A reclaimed (CONSUMED, unreferenced) slot.
    pub fn new() -> Slot {
        Slot {
            local: AtomicU32::new(0),
            state: AtomicU32::new(CONSUMED),
            lock: AtomicBool::new(false),
            fanout_head: AtomicU32::new(0),
            refs: AtomicU32::new(0),
            fanin_need: AtomicU32::new(0),
            fanin_done: AtomicU32::new(0),
            edges_start: AtomicU64::new(0),
            edges_len: AtomicU32::new(0),
            next_block: AtomicU32::new(0),
            subtasks_done: AtomicU32::new(0),
            desc: AtomicU64::new(0),
            bins: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            args: AtomicU64::new(0),
            predicate: AtomicU64::new(0),
        }
    }

    /// Take the slot's lock (held only for a few instructions).
    pub fn lock(&self) {
        while self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            spin_hint();
        }
    }
    /// Release the slot's lock.
    pub fn unlock(&self) {
        self.lock.store(false, Ordering::Release);
    }

    /// Take one more lifetime reference unless the task is already unreferenced (then it
    /// is CONSUMED, or about to be, and must not be named again).
    pub fn try_retain(&self) -> bool {
        let mut r = self.refs.load(Ordering::Acquire);
        loop {
            if r == 0 {
                return false;
            }
            match self.refs.compare_exchange_weak(r, r + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => r = now,
            }
        }
    }

    /// Drop a lifetime reference; the last one makes the task CONSUMED. Returns whether
    /// this call did. The caller must not touch the slot afterwards.
    pub fn release(&self) -> bool {
        let before = self.refs.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before != 0, "a task slot released more often than it was referenced");
        if before == 1 {
            self.state.store(CONSUMED, Ordering::Release);
            true
        } else {
            false
        }
    }
}

impl Default for Slot {
    fn default() -> Self {
        Slot::new()
    }
}

/// One producer → consumer edge.
pub struct Edge {
    /// Producer handle.
    pub producer: AtomicU32,
    /// Consumer handle.
    pub consumer: AtomicU32,
    /// Next edge of the producer's fan-out list (edge index + 1; 0 = end).
    pub next: AtomicU32,
}

/// A ring's shared part: slots and edges.
pub struct Ring {
    /// The task window.
    pub slots: Box<[Slot]>,
    /// The dependency pool.
    pub edges: Box<[Edge]>,
}

impl Ring {
    /// A ring of `window` slots (a power of two) and `dep_pool` edges.
    pub fn new(window: u32, dep_pool: u32) -> Ring {
        Ring {
            slots: (0..window).map(|_| Slot::new()).collect(),
            edges: (0..dep_pool)
                .map(|_| Edge { producer: AtomicU32::new(0), consumer: AtomicU32::new(0), next: AtomicU32::new(0) })
                .collect(),
        }
    }

    /// Slot index of local id `local`.
    pub fn slot_of(&self, local: u32) -> u32 {
        local & (self.slots.len() as u32 - 1)
    }

    /// Edge at pool position `pos` (positions grow forever; the pool wraps).
    pub fn edge(&self, pos: u64) -> (u32, &Edge) {
        let i = (pos % self.edges.len() as u64) as u32;
        (i, &self.edges[i as usize])
    }
}

/// A fan-out list link to edge `idx` of `ring`'s pool (0 is the end of a list).
pub fn edge_ref(ring: usize, idx: u32) -> u32 {
    handle(ring, idx) + 1
}

/// `(ring, edge index)` of a non-zero link.
pub fn edge_unref(link: u32) -> (usize, u32) {
    unhandle(link - 1)
}

/// The slot of handle `h`.
pub fn slot(rings: &[Ring], h: u32) -> &Slot {
    let (r, s) = unhandle(h);
    &rings[r].slots[s as usize]
}

/// What wiring one producer did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Wired {
    /// The producer is gone (consumed or its slot reused): nothing to wait for or hold.
    Gone,
    /// The producer had completed: it is held (a lifetime reference) but not waited for.
    Done,
    /// The consumer was linked into the producer's fan-out list: its completion will count.
    Linked,
}

/// Orchestrator side: wire `consumer` to the producer with local id `local` in `producer`
/// (a handle), using the edge at pool position `pos` of ring `edge_ring`. Under the
/// producer's lock: a producer that is gone is skipped; otherwise the consumer takes a
/// lifetime reference on it and records the edge, and links it into the fan-out list unless
/// the producer already completed (the COMPLETED transition happens under the same lock, so
/// the consumer is either linked before it or sees it).
pub fn wire(rings: &[Ring], consumer: u32, producer: u32, local: u32, edge_ring: usize, pos: u64) -> Wired {
    let ps = slot(rings, producer);
    ps.lock();
    if ps.local.load(Ordering::Relaxed) != local || !ps.try_retain() {
        ps.unlock();
        return Wired::Gone;
    }
    let (ei, e) = rings[edge_ring].edge(pos);
    e.producer.store(producer, Ordering::Relaxed);
    e.consumer.store(consumer, Ordering::Relaxed);
    let w = if ps.state.load(Ordering::Acquire) >= COMPLETED {
        e.next.store(0, Ordering::Relaxed);
        Wired::Done
    } else {
        e.next.store(ps.fanout_head.load(Ordering::Relaxed), Ordering::Relaxed);
        ps.fanout_head.store(edge_ref(edge_ring, ei), Ordering::Relaxed);
        Wired::Linked
    };
    ps.unlock();
    w
}

/// Orchestrator side: release the `+1` guard of `consumer`'s fan-in count together with the
/// `done` producers that needed no wait; true when that made it ready (exactly one of this
/// call and the producers' [`complete`] calls sees the count reach `fanin_need`).
pub fn release_guard(rings: &[Ring], consumer: u32, done: u32) -> bool {
    let cs = slot(rings, consumer);
    let need = cs.fanin_need.load(Ordering::Relaxed);
    cs.fanin_done.fetch_add(done + 1, Ordering::AcqRel) + done + 1 == need
}

/// Scheduler side: task `t` finished. Mark it COMPLETED under its lock and take its fan-out
/// list; count each consumer's fan-in (pushing the ones that became ready onto `ready`);
/// release the producers `t` held; drop `t`'s own completion reference. `t` is not touched
/// after that last release (it may be reclaimed at once).
pub fn complete(rings: &[Ring], t: u32, ready: &mut alloc::vec::Vec<u32>) {
    let s = slot(rings, t);
    s.lock();
    s.state.store(COMPLETED, Ordering::Release);
    let mut head = s.fanout_head.load(Ordering::Relaxed);
    s.unlock();
    while head != 0 {
        let (er, ei) = edge_unref(head);
        let e = &rings[er].edges[ei as usize];
        // Read the link before counting: once its count completes, the consumer may run,
        // finish and have this edge reclaimed.
        let next = e.next.load(Ordering::Relaxed);
        let c = e.consumer.load(Ordering::Relaxed);
        let cs = slot(rings, c);
        let need = cs.fanin_need.load(Ordering::Relaxed);
        if cs.fanin_done.fetch_add(1, Ordering::AcqRel) + 1 == need {
            ready.push(c);
        }
        head = next;
    }
    let start = s.edges_start.load(Ordering::Relaxed);
    let len = s.edges_len.load(Ordering::Relaxed) as u64;
    let (tr, _) = unhandle(t);
    for k in 0..len {
        let (_, e) = rings[tr].edge(start + k);
        slot(rings, e.producer.load(Ordering::Relaxed)).release();
    }
    s.release();
}

/// The orchestrator's cursors of one ring: allocation and the watermark. Private to the
/// orchestrator thread.
#[derive(Clone, Debug)]
pub struct Cursor {
    /// Next local id.
    pub current: u32,
    /// Oldest local id not yet reclaimed.
    pub last_alive: u32,
    /// Window size.
    pub window: u32,
    /// Heap: allocation offset.
    pub heap_top: u64,
    /// Heap: oldest live byte.
    pub heap_tail: u64,
    /// Heap size in bytes.
    pub heap_size: u64,
    /// Dependency pool: next position.
    pub dep_top: u64,
    /// Dependency pool: oldest live position.
    pub dep_tail: u64,
    /// Dependency pool capacity.
    pub dep_cap: u64,
    /// Per slot: the heap offset and pool position the task's allocations end at, and the
    /// scope instance it belongs to.
    pub marks: Box<[Mark]>,
}

/// Where a task's allocations end, and its scope.
#[derive(Copy, Clone, Debug, Default)]
pub struct Mark {
    /// Heap top after the task's allocations.
    pub heap_end: u64,
    /// Pool position after the task's edges.
    pub dep_end: u64,
    /// Scope instance the task belongs to.
    pub scope: u32,
    /// What the task allocated, when it is a scope allocation's record.
    pub alloc: Option<RingAlloc>,
}

/// A scope allocation as its record holds it: what every tensor naming the record as its
/// owner must agree with (so no view reaches memory the allocation does not own).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RingAlloc {
    /// The buffer id handed out with it.
    pub id: u64,
    /// Its address in the ring's heap.
    pub addr: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its element type.
    pub dtype: crate::graph::DType,
}

/// Which resource a ring lacks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Lack {
    /// No task slot.
    Slot,
    /// Not enough contiguous heap bytes.
    Heap,
    /// Not enough dependency-pool entries.
    Edges,
}

impl Cursor {
    /// Cursors of an empty ring.
    pub fn new(window: u32, heap_size: u64, dep_cap: u32) -> Cursor {
        Cursor {
            current: 0,
            last_alive: 0,
            window,
            heap_top: 0,
            heap_tail: 0,
            heap_size,
            dep_top: 0,
            dep_tail: 0,
            dep_cap: dep_cap as u64,
            marks: (0..window).map(|_| Mark::default()).collect(),
        }
    }

    /// Live tasks (submitted, not reclaimed).
    pub fn live(&self) -> u32 {
        self.current.wrapping_sub(self.last_alive)
    }

    /// Move the watermark over CONSUMED slots, freeing their heap bytes and edges. Returns
    /// how many were reclaimed.
    pub fn advance(&mut self, ring: &Ring) -> u32 {
        let mut n = 0;
        while self.live() > 0 {
            let idx = ring.slot_of(self.last_alive) as usize;
            if ring.slots[idx].state.load(Ordering::Acquire) != CONSUMED {
                break;
            }
            let m = self.marks[idx];
            self.heap_tail = m.heap_end;
            self.dep_tail = m.dep_end;
            self.last_alive = self.last_alive.wrapping_add(1);
            n += 1;
        }
        if self.live() == 0 {
            // Empty: rebase the heap so the next allocation starts at offset 0.
            self.heap_top = 0;
            self.heap_tail = 0;
        }
        n
    }

    /// Where `bytes` (a multiple of 64) would go in the heap, if they fit now.
    fn heap_fit(&self, bytes: u64) -> Option<u64> {
        if bytes == 0 {
            return Some(self.heap_top);
        }
        let (top, tail) = (self.heap_top, self.heap_tail);
        if top >= tail {
            // Free: [top, size) and [0, tail). Never straddle the end; never let top meet
            // tail (that would read as empty).
            if self.heap_size - top >= bytes {
                return Some(top);
            }
            if tail > bytes {
                return Some(0);
            }
            None
        } else if tail - top > bytes {
            Some(top)
        } else {
            None
        }
    }

    /// What is missing for one task with `heap` bytes and `edges` edges, if anything.
    pub fn lack(&self, heap: u64, edges: u64) -> Option<Lack> {
        if self.live() >= self.window {
            Some(Lack::Slot)
        } else if self.heap_fit(heap).is_none() {
            Some(Lack::Heap)
        } else if self.dep_cap - (self.dep_top - self.dep_tail) < edges {
            Some(Lack::Edges)
        } else {
            None
        }
    }

    /// Allocate one task with `heap` bytes (64-byte multiple) and `edges` pool entries;
    /// [`Cursor::lack`] must have said nothing is missing. Returns `(local, heap offset,
    /// first edge position)`.
    pub fn allocate(&mut self, heap: u64, edges: u64, scope: u32) -> (u32, u64, u64) {
        let off = self.heap_fit(heap).unwrap_or(self.heap_top);
        self.heap_top = off + heap;
        let first_edge = self.dep_top;
        self.dep_top += edges;
        let local = self.current;
        self.current = self.current.wrapping_add(1);
        let idx = (local & (self.window - 1)) as usize;
        self.marks[idx] = Mark { heap_end: self.heap_top, dep_end: self.dep_top, scope, alloc: None };
        (local, off, first_edge)
    }

    /// Record that live task `local` is the record of allocation `alloc`.
    pub fn note_allocation(&mut self, local: u32, alloc: RingAlloc) {
        self.marks[(local & (self.window - 1)) as usize].alloc = Some(alloc);
    }

    /// The allocation live task `local` records, if it is an allocation record.
    pub fn allocation(&self, local: u32) -> Option<RingAlloc> {
        self.marks[(local & (self.window - 1)) as usize].alloc
    }

    /// The scope instance of the oldest live task.
    pub fn oldest_scope(&self) -> Option<u32> {
        (self.live() > 0).then(|| self.marks[(self.last_alive & (self.window - 1)) as usize].scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consume(ring: &Ring, local: u32) {
        ring.slots[ring.slot_of(local) as usize].state.store(CONSUMED, Ordering::Release);
    }
    fn pend(ring: &Ring, local: u32) {
        ring.slots[ring.slot_of(local) as usize].state.store(PENDING, Ordering::Release);
    }

    #[test]
    fn window_fills_and_the_watermark_reclaims_in_order() {
        let ring = Ring::new(4, 16);
        let mut c = Cursor::new(4, 1024, 16);
        for i in 0..4 {
            assert_eq!(c.lack(64, 1), None);
            let (l, _, _) = c.allocate(64, 1, 0);
            assert_eq!(l, i);
            pend(&ring, l);
        }
        assert_eq!(c.lack(0, 0), Some(Lack::Slot));
        // Out of order consumption: the watermark stops at the first live task.
        consume(&ring, 1);
        assert_eq!(c.advance(&ring), 0);
        consume(&ring, 0);
        assert_eq!(c.advance(&ring), 2);
        assert_eq!(c.last_alive, 2);
        assert_eq!(c.heap_tail, 128, "heap freed up to task 1's end");
        assert_eq!(c.dep_tail, 2);
        assert_eq!(c.lack(64, 1), None);
    }

    #[test]
    fn heap_never_straddles_the_end_and_rebases_when_empty() {
        let ring = Ring::new(8, 8);
        let mut c = Cursor::new(8, 256, 8);
        let (a, off_a, _) = c.allocate(128, 0, 0);
        let (b, off_b, _) = c.allocate(64, 0, 0);
        assert_eq!((off_a, off_b), (0, 128));
        pend(&ring, a);
        pend(&ring, b);
        // 64 bytes left at the end, none at the start: 128 does not fit.
        assert_eq!(c.lack(128, 0), Some(Lack::Heap));
        consume(&ring, a);
        c.advance(&ring);
        // [0, 128) is free but only 127 usable before meeting the tail: 64 wraps to 0.
        assert_eq!(c.lack(128, 0), Some(Lack::Heap), "128 would make top meet tail");
        let (_, off, _) = c.allocate(64, 0, 0);
        assert_eq!(off, 192, "fits before the end first");
        let (l, off2, _) = c.allocate(64, 0, 0);
        assert_eq!(off2, 0, "then wraps to the start");
        pend(&ring, l);
        for i in 1..4 {
            consume(&ring, i);
        }
        c.advance(&ring);
        assert_eq!((c.live(), c.heap_top, c.heap_tail), (0, 0, 0), "an empty ring rebases");
        assert_eq!(c.lack(256, 0), None, "the whole heap is usable again");
    }

    #[test]
    fn edges_are_counted_against_the_pool() {
        let mut c = Cursor::new(4, 0, 3);
        assert_eq!(c.lack(0, 4), Some(Lack::Edges));
        c.allocate(0, 3, 0);
        assert_eq!(c.lack(0, 1), Some(Lack::Edges));
    }

    #[test]
    fn references_make_a_task_consumed_exactly_once() {
        let s = Slot::new();
        s.refs.store(2, Ordering::Relaxed);
        assert!(s.try_retain());
        assert!(!s.release());
        assert!(!s.release());
        assert!(s.release());
        assert_eq!(s.state.load(Ordering::Relaxed), CONSUMED);
        assert!(!s.try_retain(), "a consumed task cannot be named again");
    }

    #[test]
    fn ids_and_handles_round_trip() {
        assert_eq!(unhandle(handle(3, 77)), (3, 77));
        assert_eq!(untask_id(task_id(2, 12345)), (2, 12345));
    }
}
