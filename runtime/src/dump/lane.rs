//! [`GmLane`]: the dump lane of one AICPU thread, over any AICPU agent — the implementation of
//! [`DumpLane`] for the simulator's and the aarch64 platforms' AICPU agents.
//!
//! Protocol (one producer: the lane's thread; one consumer: the host's collector):
//!
//! * Buffers circulate: free queue (host pushes) → the thread's current buffer → ready queue
//!   (thread pushes) → the host, which reads the buffer and its payloads, then pushes the
//!   buffer back on the free queue and acknowledges the payload bytes (`completed`). There
//!   are as many ring slots as buffers, so neither ring can overflow.
//! * Payloads go to a circular arena at monotonic logical offsets; a payload never straddles
//!   the arena's end (the cursor skips to the next lap instead). A reservation is accepted
//!   only when its end is at most one arena past `completed`, so no byte the host has not
//!   taken is ever overwritten ([`Blocked::ArenaFull`] otherwise).
//! * Publication of a buffer: write back the payload bytes and the records by the contract
//!   (a clean under a2a3's write-back AICPU cache, nothing on a5), then store the ready entry
//!   and the counters, one store barrier, and the ready tail last — all device-direct. The host reads the tail with an acquire (`DeviceMemory::load_word`).
//! * A reservation borrows the lane (`&mut`), so one is open at a time; its record is written
//!   into the buffer only at commit, and a buffer is published only with no reservation open,
//!   so nothing of an open reservation is ever visible.

use pto_hal::{AicpuAgent, GmAddr};
use zerocopy::IntoBytes;

use super::producer::{Begin, Blocked, DumpLane, DumpReservation, Refusal};
use crate::layout::{DumpLayout, DumpReady, DumpRecord, dump_flags};
use crate::lifecycle;

/// Offsets of the words of a lane's state and ack lines.
mod word {
    pub const READY_TAIL: u64 = 0;
    pub const PUBLISHED: u64 = 8;
    pub const COMMITTED: u64 = 16;
    pub const DROPPED: u64 = 24;
    pub const CLOSED: u64 = 32;
    pub const ACK_COMPLETED: u64 = 8;
    pub const ACK_FREE_TAIL: u64 = 16;
}

/// What a capture asks a lane to record: the record (its view, stage, task…; the lane fills
/// in the payload fields) and whether the view's data goes to the arena.
#[derive(Copy, Clone, Debug, Default)]
pub struct Capture {
    /// The record as the capture knows it.
    pub record: DumpRecord,
    /// Copy the view's data (else the record carries metadata only).
    pub payload: bool,
}

/// The dump lane of AICPU thread `t` in a run's dump region.
pub struct GmLane<'a, A> {
    a: &'a A,
    l: DumpLayout,
    t: u32,
    /// The buffer records are committed into, if one was taken from the free queue.
    current: Option<u32>,
    /// Records committed into `current`.
    count: u32,
    /// Free-queue entries taken.
    free_head: u64,
    /// Ready-queue entries published.
    ready_tail: u64,
    /// Logical arena offset where the next payload may start.
    cursor: u64,
    /// Logical arena offset up to which payloads are published.
    published: u64,
    /// Records published.
    committed: u64,
    /// Records dropped.
    dropped: u64,
    /// Records committed so far (published or not): the next record's sequence number.
    seq: u64,
    closed: bool,
    /// A reservation is open but suspended between service steps ([`Reservation::suspend`]):
    /// no other may begin and nothing is published until it is resumed and closed.
    suspended: bool,
}

impl<'a, A: AicpuAgent> GmLane<'a, A> {
    /// Lane `t` of the dump region `l` (which the thread has read after making the host's
    /// writes visible).
    pub fn new(a: &'a A, l: DumpLayout, t: u32) -> GmLane<'a, A> {
        GmLane {
            a,
            l,
            t,
            current: None,
            count: 0,
            free_head: 0,
            ready_tail: 0,
            cursor: 0,
            published: 0,
            committed: 0,
            dropped: 0,
            seq: 0,
            closed: t >= l.header.lanes,
            suspended: false,
        }
    }

    /// Logical arena offset where the next payload may start.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Whether a suspended reservation is open on this lane.
    pub fn is_suspended(&self) -> bool {
        self.suspended
    }

    /// Resume the reservation `s` suspended on this lane.
    pub fn resume(&mut self, s: Suspended) -> Reservation<'_, 'a, A> {
        self.suspended = false;
        Reservation { lane: self, rec: s.rec, before: s.before, copied: s.copied }
    }

    /// The agent this lane runs on.
    pub fn agent(&self) -> &'a A {
        self.a
    }

    /// The largest payload of one record: half the arena, in whole elements.
    pub fn clamp(&self) -> u64 {
        self.l.header.arena / 2
    }

    /// Records committed so far (published or not).
    pub fn records_committed(&self) -> u64 {
        self.seq
    }

    /// Records dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    fn state(&self, w: u64) -> GmAddr {
        GmAddr(self.l.lane(self.t) + w)
    }

    fn ack(&self, w: u64) -> GmAddr {
        GmAddr(self.l.ack(self.t) + w)
    }

    /// Take a buffer from the free queue when there is none.
    fn take_buffer(&mut self) -> Result<u32, Blocked> {
        if let Some(b) = self.current {
            return Ok(b);
        }
        let tail = self.a.query(self.ack(word::ACK_FREE_TAIL));
        if self.free_head >= tail {
            return Err(Blocked::NoBuffer);
        }
        let b = self.a.query(GmAddr(self.l.free(self.t, self.free_head)));
        self.free_head += 1;
        // A buffer index the host got wrong would write outside the lane: never use it.
        let b = u32::try_from(b).ok().filter(|&b| b < self.l.header.buffers).ok_or(Blocked::NoBuffer)?;
        self.current = Some(b);
        self.count = 0;
        Ok(b)
    }

    fn publish_range(&self, from: u64, to: u64) {
        // Broken: the payload bytes are never written back.
        crate::seam!(SKIP_DUMP_CLEAN);
        if to <= from {
            return;
        }
        let size = self.l.header.arena;
        let base = self.l.arena(self.t);
        if to - from >= size {
            lifecycle::publish_aicpu(self.a, GmAddr(base), size);
            return;
        }
        let (p, q) = (from % size, to % size);
        if p < q || q == 0 {
            lifecycle::publish_aicpu(self.a, GmAddr(base + p), (if q == 0 { size } else { q }) - p);
        } else {
            lifecycle::publish_aicpu(self.a, GmAddr(base + p), size - p);
            lifecycle::publish_aicpu(self.a, GmAddr(base), q);
        }
    }

    fn store_counters(&self) {
        self.a.store_direct(self.state(word::COMMITTED), self.committed);
        self.a.store_direct(self.state(word::DROPPED), self.dropped);
    }
}

impl<'a, A: AicpuAgent> DumpLane for GmLane<'a, A> {
    type Record = Capture;
    type Reservation<'r>
        = Reservation<'r, 'a, A>
    where
        Self: 'r;

    fn try_begin(&mut self, c: &Capture) -> Begin<Reservation<'_, 'a, A>> {
        // Broken: a second reservation is opened while one is suspended.
        crate::seam!(CAPTURE_TWO_RESERVATIONS => self.begin(c));
        if self.suspended {
            return Begin::WouldBlock(Blocked::ReservationOpen);
        }
        self.begin(c)
    }

    fn publish(&mut self) -> bool {
        // Broken: a buffer is published while a reservation is open, its bytes incomplete.
        crate::seam!(CAPTURE_TWO_RESERVATIONS => self.publish_current());
        if self.suspended {
            // A reservation is open: its bytes are not complete, nothing may be published.
            return false;
        }
        self.publish_current()
    }

    fn drop_records(&mut self, n: u64) {
        self.dropped = self.dropped.saturating_add(n);
    }

    fn close(&mut self) {
        if self.t >= self.l.header.lanes {
            return;
        }
        self.publish();
        self.store_counters();
        self.a.store_barrier();
        self.a.store_direct(self.state(word::CLOSED), self.l.header.epoch);
        self.closed = true;
    }
}

impl<'a, A: AicpuAgent> GmLane<'a, A> {
    /// [`DumpLane::try_begin`] once no reservation is open: refuse, block or reserve.
    fn begin(&mut self, c: &Capture) -> Begin<Reservation<'_, 'a, A>> {
        if self.closed {
            self.dropped += 1;
            return Begin::Refused(Refusal::Closed);
        }
        let r = &c.record;
        let ndims = r.ndims as usize;
        let scalar = r.flags & dump_flags::SCALAR != 0;
        let view_bytes = if scalar {
            Some(0)
        } else if ndims == 0 || ndims > 5 || r.elem_bytes == 0 {
            None
        } else {
            r.shape[..ndims].iter().try_fold(r.elem_bytes as u64, |acc, &d| acc.checked_mul(d as u64))
        };
        let Some(view_bytes) = view_bytes else {
            self.dropped += 1;
            return Begin::Refused(Refusal::BadRecord);
        };
        let clamp = self.clamp();
        let (copy, truncated) = if !c.payload || scalar {
            (0, false)
        } else if view_bytes > clamp {
            (clamp / r.elem_bytes as u64 * r.elem_bytes as u64, true)
        } else {
            (view_bytes, false)
        };
        if self.current.is_some() && self.count >= self.l.header.records {
            self.publish();
        }
        if let Err(b) = self.take_buffer() {
            return Begin::WouldBlock(b);
        }
        let size = self.l.header.arena;
        let mut start = self.cursor;
        if copy > 0 && start % size + copy > size {
            start = start.next_multiple_of(size);
        }
        let end = start + copy;
        let completed = self.a.query(self.ack(word::ACK_COMPLETED));
        if end.saturating_sub(completed) > size {
            // Let the host take what is committed, so room can come back.
            self.publish();
            return Begin::WouldBlock(Blocked::ArenaFull);
        }
        let mut rec = *r;
        rec.payload_offset = start;
        rec.payload_len = copy;
        rec.view_bytes = view_bytes;
        if truncated {
            rec.flags |= dump_flags::TRUNCATED;
        }
        let before = self.cursor;
        self.cursor = end;
        Begin::Accepted(Reservation { lane: self, rec, before, copied: 0 })
    }

    /// Publish the current buffer, when it holds a record: write back its payload bytes and
    /// record lines, store its ready entry and the lane's counters, a store barrier, then the
    /// ready tail that hands the entry to the host.
    fn publish_current(&mut self) -> bool {
        let Some(b) = self.current else { return false };
        if self.count == 0 {
            return false;
        }
        crate::seam!(SKIP_DUMP_CLEAN => broken::publish_unclean(self, b));
        crate::seam!(DUMP_TAIL_FIRST => broken::publish_tail_first(self, b));
        self.clean(b);
        self.write_entry(b);
        self.retire_buffer();
        self.store_ready_tail(self.ready_tail);
        true
    }

    /// The ready tail: entries handed to the host so far.
    #[cfg(feature = "breakage")]
    pub(super) fn ready_tail(&self) -> u64 {
        self.ready_tail
    }

    /// Store the lane's ready tail word: the host takes every entry below `tail`.
    pub(super) fn store_ready_tail(&self, tail: u64) {
        self.a.store_direct(self.state(word::READY_TAIL), tail);
    }

    /// The current buffer's entry is written: count it in the ready tail and take a new
    /// buffer for the next record.
    pub(super) fn retire_buffer(&mut self) {
        self.ready_tail += 1;
        self.current = None;
        self.count = 0;
    }

    /// Wait until the host gives a buffer back, or `us` microseconds pass.
    #[cfg(feature = "breakage")]
    pub(super) fn wait_for_a_freed_buffer(&self, us: u64) {
        let a = self.a;
        let freed = a.query(self.ack(word::ACK_FREE_TAIL));
        let until = a.now_ticks().saturating_add(a.ticks_from_micros(us));
        while a.query(self.ack(word::ACK_FREE_TAIL)) == freed && a.now_ticks() < until {
            let slice = a.now_ticks().saturating_add(a.ticks_from_micros(1_000));
            a.wait_for_word(self.ack(word::ACK_FREE_TAIL), freed, slice.min(until));
        }
    }

    /// Write back buffer `b`'s payload bytes (those not published yet) and its record lines.
    pub(super) fn clean(&self, b: u32) {
        self.publish_range(self.published, self.cursor);
        lifecycle::publish_aicpu(self.a, GmAddr(self.l.buffer(self.t, b)), self.count as u64 * 128);
    }

    /// Store buffer `b`'s ready entry at the ready tail, then the lane's counters, and a store
    /// barrier: everything the ready tail's store will publish.
    pub(super) fn write_entry(&mut self, b: u32) {
        let a = self.a;
        let entry = DumpReady { buffer: b, count: self.count, end: self.cursor };
        let at = GmAddr(self.l.ready(self.t, self.ready_tail));
        let bytes = entry.as_bytes();
        a.store_direct(at, u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8])));
        a.store_direct(at.offset(8), entry.end);
        self.committed += self.count as u64;
        self.published = self.cursor;
        a.store_direct(self.state(word::PUBLISHED), self.published);
        self.store_counters();
        a.store_barrier();
    }
}

/// An open reservation on a [`GmLane`]: its record and payload bytes are reserved, nothing of
/// it is visible to the host until [`DumpReservation::commit`].
pub struct Reservation<'r, 'a, A> {
    lane: &'r mut GmLane<'a, A>,
    rec: DumpRecord,
    /// The lane's cursor before this reservation (what abandon restores).
    before: u64,
    /// Payload bytes copied so far.
    copied: u64,
}

/// An open reservation set aside between service steps ([`Reservation::suspend`]): the lane
/// keeps it open (no other reservation begins, nothing is published) until
/// [`GmLane::resume`] gives it back.
#[derive(Debug)]
#[must_use = "a suspended reservation keeps its lane blocked until it is resumed and closed"]
pub struct Suspended {
    rec: DumpRecord,
    before: u64,
    copied: u64,
}

impl Suspended {
    /// The record as it will be committed.
    pub fn record(&self) -> &DumpRecord {
        &self.rec
    }
    /// Payload bytes copied so far.
    pub fn copied(&self) -> u64 {
        self.copied
    }
    /// The lane's arena offset before this reservation (what an abandon restores).
    pub fn before(&self) -> u64 {
        self.before
    }
}

impl<A: AicpuAgent> Reservation<'_, '_, A> {
    /// Set the reservation aside, still open: the lane refuses every other reservation
    /// ([`Blocked::ReservationOpen`]) and publishes nothing until it is resumed
    /// ([`GmLane::resume`]) and committed or abandoned. This is how a service loop keeps one
    /// reservation across its steps.
    pub fn suspend(self) -> Suspended {
        self.lane.suspended = true;
        Suspended { rec: self.rec, before: self.before, copied: self.copied }
    }

    /// Payload bytes copied so far.
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// The record as it will be committed.
    pub fn record(&self) -> &DumpRecord {
        &self.rec
    }

    /// Copy up to `max` bytes of contiguous source starting at logical byte `pos` of the
    /// view; returns how many bytes it copied (at least one element when `max` allows it).
    fn copy_run(&mut self, pos: u64, max: u64) -> u64 {
        let r = &self.rec;
        let eb = r.elem_bytes as u64;
        let ndims = (r.ndims as usize).clamp(1, 5);
        // The element index `pos / eb` in the row-major logical order, and its address.
        let mut idx = pos / eb;
        let mut off = 0u64;
        for d in (0..ndims).rev() {
            let ext = r.shape[d].max(1) as u64;
            off += (idx % ext) * r.strides[d] as u64;
            idx /= ext;
        }
        // A unit innermost stride makes the rest of the row one contiguous run.
        let inner = r.shape[ndims - 1].max(1) as u64;
        let in_row = (pos / eb) % inner;
        let run_elems = if r.strides[ndims - 1] == 1 { inner - in_row } else { 1 };
        let mut n = (run_elems * eb).min(max).min(r.payload_len - pos);
        n = (n / eb).max(1) * eb;
        let src = GmAddr(r.addr + off * eb);
        let size = self.lane.l.header.arena;
        let dst = GmAddr(self.lane.l.arena(self.lane.t) + (r.payload_offset + pos) % size);
        let a = self.lane.a;
        // Read the run as it is in memory now, not a copy this thread cached earlier: by the
        // contract (an invalidate of just these lines on a2a3, nothing on a5), one run at a
        // time, so a service step's maintenance is bounded by its `max_bytes` like its copy.
        crate::observe_host::<A>(a, src, n);
        let mut buf = [0u8; 256];
        let mut done = 0u64;
        while done < n {
            let k = (n - done).min(buf.len() as u64) as usize;
            a.read(src.offset(done), &mut buf[..k]);
            a.write(dst.offset(done), &buf[..k]);
            done += k as u64;
        }
        n
    }
}

impl<A: AicpuAgent> DumpReservation for Reservation<'_, '_, A> {
    fn copy_chunk(&mut self, max_bytes: u64) -> u64 {
        let start = self.copied;
        let eb = self.rec.elem_bytes.max(1) as u64;
        // At least one element per call, so every call makes progress.
        let budget = max_bytes.max(eb);
        while self.copied < self.rec.payload_len && self.copied - start < budget {
            let left = budget - (self.copied - start);
            let n = self.copy_run(self.copied, left.max(eb));
            self.copied += n;
        }
        self.copied - start
    }

    fn remaining(&self) -> u64 {
        self.rec.payload_len - self.copied
    }

    fn commit(mut self) {
        // A commit before the payload is complete would publish a short payload: finish it.
        while self.remaining() > 0 {
            self.copy_chunk(u64::MAX);
        }
        let lane = self.lane;
        let Some(b) = lane.current else { return };
        self.rec.seq = lane.seq;
        let at = GmAddr(lane.l.buffer(lane.t, b) + lane.count as u64 * core::mem::size_of::<DumpRecord>() as u64);
        lane.a.write(at, self.rec.as_bytes());
        lane.count += 1;
        lane.seq += 1;
        if lane.count >= lane.l.header.records {
            lane.publish();
        }
    }

    fn abandon(self) {
        let lane = self.lane;
        // The bytes written are not published: write them back anyway, so no dirty line of
        // an abandoned payload outlives the run.
        let written_from = self.rec.payload_offset;
        lane.publish_range(written_from, written_from + self.copied);
        lane.cursor = self.before;
        lane.dropped += 1;
    }
}

/// The broken twins of the lane's steps (the breakage suites' variants and the loom models'
/// reproducers): each is a whole step with one bug, entered from the first line of the correct
/// step when its switch is active ([`seam!`](crate::seam)). Compiled with the `breakage`
/// feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::AicpuAgent;

    use super::GmLane;

    /// `SKIP_DUMP_CLEAN`: publish buffer `b` without writing back its payload bytes and record
    /// lines (the host reads memory, so on a2a3 it would read stale bytes). To force the
    /// interleaving in which the host reads them dirty, the lane then waits, up to a second,
    /// until the host gave a buffer back.
    pub(super) fn publish_unclean<A: AicpuAgent>(lane: &mut GmLane<'_, A>, b: u32) -> bool {
        lane.write_entry(b);
        lane.retire_buffer();
        lane.store_ready_tail(lane.ready_tail());
        if crate::breakage::forcing() {
            lane.wait_for_a_freed_buffer(1_000_000);
        }
        true
    }

    /// `DUMP_TAIL_FIRST`: publish buffer `b` storing the lane's ready tail before the ready entry
    /// it hands over (the host may take the entry before it is written: a stale buffer index,
    /// count and end).
    pub(super) fn publish_tail_first<A: AicpuAgent>(lane: &mut GmLane<'_, A>, b: u32) -> bool {
        lane.clean(b);
        lane.store_ready_tail(lane.ready_tail() + 1);
        lane.write_entry(b);
        lane.retire_buffer();
        true
    }
}
