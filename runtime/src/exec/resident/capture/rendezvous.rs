//! The core side of a boundary capture: the rendezvous slot's steps ([`claim`], [`arrive`],
//! [`publisher`], [`leave`], [`abort`]) over `GmAtomic`, one attempt each so a loom model can
//! drive them, and [`Boundary::cross`], the blocking walk a core takes through one phase.
//!
//! Every access to a slot is one 64-bit atomic or device-direct store/query; no line of a slot
//! is ever written back or invalidated. The request line is the core's own, the
//! acknowledgement line the serving AICPU thread's; both are also touched word by word,
//! device-direct.

use pto_hal::{AicoreAgent, Barriers, GmAddr, GmAtomic};

use crate::layout::{CaptureLayout, capture_ack, capture_header, capture_phase, capture_request, capture_slot, regs};

/// What one claim attempt found ([`claim`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The slot reads `READY | n`: join (set the arrival bit). `true` for the caller that
    /// claimed and initialised it.
    Ready(bool),
    /// Another participant claimed occupancy `n` and is initialising: wait (a budget that
    /// runs out here is ARGS_CAPTURE_INIT_LOST).
    Initialising,
    /// The previous occupancy has not settled yet (or another claimer won the race just now):
    /// wait and try again.
    Busy,
    /// The slot is past occupancy `n` (or settled at `n` already): this core did not join
    /// what it believes it joined. It leaves into the run's fatal path.
    Moved,
}

/// One attempt to claim or join occupancy `n` of the slot at `slot`. A claim is attempted
/// only from FREE or from SETTLED of an earlier occupancy, with the full observed word as the
/// expected value; its winner alone zeroes the slot's other words (inside CLAIMING), then
/// publishes `READY | n`.
pub fn claim<G: GmAtomic + Barriers>(a: &G, slot: GmAddr, n: u64) -> Claim {
    use capture_slot::{CLAIMING, FREE, READY, SETTLED, claim as word, fields};
    let seen = a.query(slot.offset(capture_slot::CLAIM));
    let (state, occ) = fields(seen);
    let source = state == FREE || (state == SETTLED && occ < n);
    let broken = crate::breakage::broken(crate::breakage::CAPTURE_CLAIM_FROM_CLAIMING);
    match (state, occ.cmp(&n)) {
        (READY, core::cmp::Ordering::Equal) => Claim::Ready(false),
        (CLAIMING, core::cmp::Ordering::Equal) if broken => {
            // Broken on purpose: CLAIMING is taken as a source state; the late claimer
            // re-clears a slot its peers may already have joined.
            initialise(a, slot, n);
            Claim::Ready(true)
        }
        (CLAIMING, core::cmp::Ordering::Equal) => Claim::Initialising,
        _ if source => {
            if a.compare_exchange(slot.offset(capture_slot::CLAIM), seen, word(CLAIMING, n)) == seen {
                if crate::breakage::broken(crate::breakage::CAPTURE_STALL_CLAIMING) {
                    // Injected: the claimer never initialises; the slot stays CLAIMING.
                    return Claim::Moved;
                }
                initialise(a, slot, n);
                Claim::Ready(true)
            } else {
                Claim::Busy
            }
        }
        (_, core::cmp::Ordering::Greater) | (SETTLED, core::cmp::Ordering::Equal) => Claim::Moved,
        _ => Claim::Busy,
    }
}

/// The claimer's initialisation, inside CLAIMING: zero every other word, a store barrier, then
/// `READY | n`.
fn initialise<G: GmAtomic + Barriers>(a: &G, slot: GmAddr, n: u64) {
    for w in 1..8 {
        a.store_direct(slot.offset(w * 8), 0);
    }
    a.store_barrier();
    a.store_direct(slot.offset(capture_slot::CLAIM), capture_slot::claim(capture_slot::READY, n));
}

/// Set `bit` in phase `phase`'s arrival mask; `true` for the last arriver (the mask is then
/// `mask`), which publishes the phase's request.
pub fn arrive<G: GmAtomic>(a: &G, slot: GmAddr, phase: u64, bit: u64, mask: u64) -> bool {
    let before = a.fetch_or(slot.offset(capture_slot::ARRIVED + 8 * phase), bit);
    before | bit == mask
}

/// The publisher word of phase `phase`: `(core, phase_seq)` once its last arriver published
/// the request; `None` (the word is 0) means no request yet, never "sealed".
pub fn publisher<G: GmAtomic>(a: &G, slot: GmAddr, phase: u64) -> Option<(u32, u64)> {
    match a.query(slot.offset(capture_slot::PUBLISHER + 8 * phase)) {
        0 => None,
        v => Some(((v >> 32) as u32 - 1, v & 0xFFFF_FFFF)),
    }
}

/// The publisher word for core `w` and `seq` (a 32-bit per-core phase counter).
pub const fn publisher_word(w: u32, seq: u64) -> u64 {
    ((w as u64 + 1) << 32) | (seq & 0xFFFF_FFFF)
}

/// Leave phase `phase`: set `bit` in its released mask. For AFTER, the participant whose bit
/// completes the mask stores `SETTLED | n` (only when the phase was sealed: an aborted
/// occupancy is never settled). Returns whether this call settled the slot.
pub fn leave<G: GmAtomic>(a: &G, slot: GmAddr, phase: u64, bit: u64, mask: u64, n: u64, sealed: bool) -> bool {
    let before = a.fetch_or(slot.offset(capture_slot::RELEASED + 8 * phase), bit);
    let last =
        before | bit == mask || (crate::breakage::broken(crate::breakage::CAPTURE_SETTLE_FIRST) && before & mask == 0);
    if phase == capture_phase::AFTER && sealed && last {
        a.store_direct(slot.offset(capture_slot::CLAIM), capture_slot::claim(capture_slot::SETTLED, n));
        return true;
    }
    false
}

/// Whether every participant of phase `phase` of occupancy `n` has left it: the released mask
/// is complete, or the slot moved on (which needs SETTLED, itself proof of the AFTER
/// departures). The publisher's acknowledgement line is reusable only then.
pub fn departed<G: GmAtomic>(a: &G, slot: GmAddr, phase: u64, mask: u64, n: u64) -> bool {
    let (state, occ) = capture_slot::fields(a.query(slot.offset(capture_slot::CLAIM)));
    if state != capture_slot::READY || occ != n {
        return true;
    }
    a.query(slot.offset(capture_slot::RELEASED + 8 * phase)) & mask == mask
}

/// Mark the slot aborted at `site` (the first waiter whose budget ran out). `true` for the
/// caller whose compare-and-swap set it.
pub fn abort<G: GmAtomic>(a: &G, slot: GmAddr, site: u32) -> bool {
    a.compare_exchange(slot.offset(capture_slot::ABORTED), 0, 1 | ((site as u64) << 8)) == 0
}

/// An acknowledgement as one consistent read of its line sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// [`capture_status`](crate::layout::capture_status).
    pub status: u64,
    /// The next argument.
    pub arg_index: u64,
    /// Payload bytes of it copied.
    pub cursor: u64,
    /// The request tick answered.
    pub tick: u64,
    /// `(epoch, task, phase_seq)`.
    pub identity: (u64, u64, u64),
}

impl Ack {
    /// Whether this is the answer to the request of `identity` asked with `tick`.
    pub fn answers(&self, identity: (u64, u64, u64), tick: u64) -> bool {
        self.identity == identity && self.tick == tick
    }
}

/// One look at the acknowledgement line at `line` by the core that asked with request tick
/// `tick`: the tick the line holds, and the line as [`read_ack`] reads it when that tick is
/// `tick` (`None` otherwise: an earlier answer's line, or none yet, is not read further).
pub fn look_ack<G: GmAtomic + Barriers>(a: &G, line: GmAddr, tick: u64) -> (u64, Option<Ack>) {
    let held = a.query(line.offset(capture_ack::TICK));
    (held, if held == tick { read_ack_from(a, line, held) } else { None })
}

/// Read the acknowledgement line at `line`: the tick, then the other words, then the tick of
/// the answer being written, so a line rewritten during the read reads as `None` rather than
/// as a torn mix of two answers. [`write_ack`] stores the new answer's tick in `BEGIN` before
/// it rewrites anything and in `TICK` last, so a read that saw any new word sees `BEGIN`
/// differ from the `TICK` it started from; a tick of 0 (a line never written: request ticks
/// start at 1) is `None` too. Only this phase's answers are written to the line while any of
/// its participants reads it (its publisher asks for nothing else before they all departed).
/// Two answers to one tick (ABORTED after an IN_PROGRESS answer, for a publisher that stopped
/// asking) differ only in status and echoes: a read across the second may mix those, and its
/// reader, which asks no more, looks again.
pub fn read_ack<G: GmAtomic + Barriers>(a: &G, line: GmAddr) -> Option<Ack> {
    read_ack_from(a, line, a.query(line.offset(capture_ack::TICK)))
}

/// [`read_ack`] from its first read: `tick` is what the line's `TICK` held when the caller
/// read it ([`look_ack`] has read it already), and the rest of the line is read after it.
fn read_ack_from<G: GmAtomic + Barriers>(a: &G, line: GmAddr, tick: u64) -> Option<Ack> {
    if tick == 0 {
        return None;
    }
    a.rmb();
    let (status, arg_index) = capture_ack::state_fields(a.query(line.offset(capture_ack::STATE)));
    let cursor = a.query(line.offset(capture_ack::CURSOR));
    let epoch = a.query(line.offset(capture_ack::EPOCH));
    let (task, seq) = capture_ack::identity_fields(a.query(line.offset(capture_ack::IDENTITY)));
    let ack = Ack { status, arg_index, cursor, tick, identity: (epoch, task, seq) };
    a.rmb();
    (a.query(line.offset(capture_ack::BEGIN)) == tick).then_some(ack)
}

/// Write acknowledgement `ack` into the line at `line` (the AICPU capture service, the line's
/// one writer): its tick in `BEGIN` first and a store-store barrier (`BEGIN` and the words
/// after it are all device-direct: they need ordering, not a drain), then every other word, a
/// store barrier (the answer also publishes what the step did, a SEALED one that the
/// phase's copies are complete), the tick in `TICK` last — so [`read_ack`] never takes a mix of
/// the previous answer and this one (`ack.tick` is never 0: request ticks start at 1). Nobody
/// waits on `BEGIN`: the first store wakes no reader (the old order cleared `TICK` first,
/// waking every waiter on it for a line not yet written).
///
/// `prev` is what the line holds, when the writer knows it (the answer it wrote last, `None`
/// for a line it has not written in this run): a word that already holds its new value is not
/// stored again. It was stored before an earlier tick, so a reader that takes the new tick
/// reads it as this answer has it.
pub fn write_ack<G: GmAtomic + Barriers>(a: &G, line: GmAddr, ack: &Ack, prev: Option<&Ack>) {
    use capture_ack as k;
    if !crate::breakage::broken(crate::breakage::CAPTURE_ACK_TICK_KEPT) {
        a.store_direct(line.offset(k::BEGIN), ack.tick);
        a.store_store();
    }
    let words = |x: &Ack| {
        [
            (k::STATE, k::state(x.status, x.arg_index)),
            (k::CURSOR, x.cursor),
            (k::EPOCH, x.identity.0),
            (k::IDENTITY, k::identity(x.identity.1, x.identity.2)),
        ]
    };
    store_changed(a, line, &words(ack), prev.map(words).as_ref());
    a.store_barrier();
    a.store_direct(line.offset(k::TICK), ack.tick);
    if crate::breakage::broken(crate::breakage::CAPTURE_ACK_TICK_KEPT) {
        // Broken on purpose: the line is marked only once it is whole, so during the rewrite
        // `BEGIN` still holds the previous answer's tick.
        a.store_direct(line.offset(k::BEGIN), ack.tick);
    }
}

/// Store each `(offset, value)` of `words` into the line at `line`, device-direct and in order,
/// except those `prev` (the same offsets, as the line holds them) shows holding their value
/// already.
fn store_changed<G: GmAtomic, const N: usize>(
    a: &G,
    line: GmAddr,
    words: &[(u64, u64); N],
    prev: Option<&[(u64, u64); N]>,
) {
    for (i, &(o, v)) in words.iter().enumerate() {
        if prev.is_none_or(|p| p[i].1 != v) {
            a.store_direct(line.offset(o), v);
        }
    }
}

/// A request as the core writes it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The run's epoch.
    pub epoch: u64,
    /// The task id.
    pub task: u64,
    /// The phase.
    pub phase: u64,
    /// The phase identity.
    pub phase_seq: u64,
    /// The argument expected next (echo).
    pub arg_index: u64,
    /// Its cursor (echo).
    pub cursor: u64,
    /// The slot, `cluster << 8 | lane`.
    pub slot: u64,
    /// The request tick (written last).
    pub tick: u64,
}

/// Write request `r` into the line at `line`: every word, a store barrier, the tick last.
/// `prev` is the request the line holds, when the writer knows it (its last, `None` for a line
/// it has not written in this run): a word that already holds its new value is not stored
/// again (it was stored before an earlier tick).
pub fn write_request<G: GmAtomic + Barriers>(a: &G, line: GmAddr, r: &Request, prev: Option<&Request>) {
    use capture_request as q;
    let words = |x: &Request| {
        [
            (q::EPOCH, x.epoch),
            (q::WHICH, q::which(x.task, x.phase, x.slot)),
            (q::PHASE_SEQ, x.phase_seq),
            (q::ARG_INDEX, x.arg_index),
            (q::CURSOR, x.cursor),
        ]
    };
    store_changed(a, line, &words(r), prev.map(words).as_ref());
    a.store_barrier();
    a.store_direct(line.offset(q::TICK), r.tick);
}

/// Worker `w` tells the AICPU thread whose [`capture_header::ASKED`] counter is at `asked`
/// that it wrote a request: in one compare-and-swap (acquire-release, after the request's
/// words), the count one more and the word naming `w` ([`capture_header::asked_word`]).
pub fn ask<G: GmAtomic>(a: &G, asked: GmAddr, w: u32) {
    let mut seen = a.query(asked);
    loop {
        let next = capture_header::asked_word((seen >> 16) + 1, w);
        match a.compare_exchange(asked, seen, next) {
            v if v == seen => return,
            v => seen = v,
        }
    }
}

/// What an AICPU thread's look at its [`capture_header::ASKED`] counter found ([`look_asked`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Asked {
    /// The counter has not moved since the last look: no request was written since.
    Nothing,
    /// It moved by one, and names worker `w`: that core's request line is the one to read.
    One(u32),
    /// It moved by more than one, names no worker, or this is the first look: read every line.
    Several,
}

/// An AICPU thread's look at its `ASKED` counter at `asked`, whose value at the previous look
/// was `*last` (`u64::MAX` before the first): what to read, and `*last` updated. After a move,
/// a read barrier: the request lines are read after the counter (each core wrote its line
/// before its compare-and-swap on the counter).
pub fn look_asked<G: GmAtomic + Barriers>(a: &G, asked: GmAddr, last: &mut u64) -> Asked {
    let now = a.query(asked);
    if now == *last {
        return Asked::Nothing;
    }
    let prev = core::mem::replace(last, now);
    a.rmb();
    let (was, _) = capture_header::asked_fields(prev);
    let (count, who) = capture_header::asked_fields(now);
    let by_one = count == was.wrapping_add(1) & capture_header::ASKED_COUNT_MASK
        || crate::breakage::broken(crate::breakage::CAPTURE_ASKED_JUMP_AS_ONE);
    match who {
        Some(w) if prev != u64::MAX && by_one => Asked::One(w),
        _ => Asked::Several,
    }
}

/// What an AICPU thread reads of a request line: the words that say which phase asks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Asking {
    /// The request's tick.
    pub tick: u64,
    /// The run's epoch.
    pub epoch: u64,
    /// The task id.
    pub task: u64,
    /// The phase.
    pub phase: u64,
    /// The slot, `cluster << 8 | lane`.
    pub slot: u64,
    /// The phase identity.
    pub phase_seq: u64,
}

/// Read the request line at `line` when its tick is not `seen` (the tick the reader read there
/// last): the tick, a read barrier, then the words the writer stored before it
/// ([`write_request`]). `None`: no new request on the line.
pub fn read_request<G: GmAtomic + Barriers>(a: &G, line: GmAddr, seen: u64) -> Option<Asking> {
    use capture_request as q;
    let tick = a.query(line.offset(q::TICK));
    if tick == seen {
        return None;
    }
    a.rmb();
    let (epoch, which, phase_seq) =
        (a.query(line.offset(q::EPOCH)), a.query(line.offset(q::WHICH)), a.query(line.offset(q::PHASE_SEQ)));
    let (task, phase, slot) = q::which_fields(which);
    Some(Asking { tick, epoch, task, phase, slot, phase_seq })
}

/// Why a core did not get through a boundary.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The phase was aborted (by this core's timeout or a peer's) and acknowledged, or this
    /// core's budget ran out: the code to latch, if this core latches one.
    Aborted(Option<crate::codes::DeviceFault>),
    /// DMB said EXIT while the core waited: the AICPU's producer has stopped.
    Exit,
}

/// What a peer's look at its phase's answer found.
enum Look {
    /// The phase is sealed.
    Sealed,
    /// The phase was answered ABORTED.
    Aborted,
    /// No answer yet: the word to wait on and the value seen (`None`: no publisher yet).
    Pending(Option<(GmAddr, u64)>),
}

/// One core's boundary captures: its seat, its counters and the phase it published last
/// (whose acknowledgement line it may reuse only after that phase's departures).
pub struct Boundary {
    /// The [`capture_header::ASKED`] counter of the AICPU thread serving this core's cluster.
    asked: GmAddr,
    l: CaptureLayout,
    w: u32,
    c: u32,
    epoch: u64,
    budget: u64,
    seq: core::cell::Cell<u64>,
    tick: core::cell::Cell<u64>,
    /// `(slot, phase, mask, occupancy)` of the phase this core published last.
    last: core::cell::Cell<Option<(GmAddr, u64, u64, u64)>>,
    /// The request this core's line holds (the last it wrote in this run): only the words
    /// that change are stored again.
    sent: core::cell::Cell<Option<Request>>,
    /// Spaces this core's looks at a word that did not change ([`Boundary::pause`]).
    backoff: core::cell::Cell<crate::backoff::Backoff>,
    /// Phases this core published and has not yet added to [`capture_header::REQUESTS`]
    /// ([`Boundary::count_requests`]).
    requested: core::cell::Cell<u64>,
}

/// A waiter's budget: its deadline, whether it already ran out once (and marked the slot
/// aborted), and the code this core latches, if any.
struct Waiting {
    deadline: u64,
    /// The clock as the waiter last read it (at the phase's start, then at each look that
    /// found nothing): one read serves the budget's check and the next wait's slice.
    now: u64,
    expired: bool,
    code: Option<crate::codes::DeviceFault>,
}

/// How long a waiting core sleeps at most between looks at the words it waits on (a store to
/// the watched word ends the wait at once; the slice only bounds a missed wake).
const SLICE_US: u64 = 1_000;

/// How long a publisher waits before it asks again after a WOULD_BLOCK answer.
const RETRY_US: u64 = 200;

impl Boundary {
    /// Worker `w` (cluster `c`) of a run of epoch `epoch` over the region `l`, served by one
    /// of `threads` AICPU threads (the one of index `c % threads`).
    pub fn new<G: GmAtomic>(a: &G, l: CaptureLayout, w: u32, c: u32, epoch: u64, threads: u32) -> Boundary {
        Boundary {
            l,
            w,
            c,
            epoch,
            asked: GmAddr(l.asked(c % threads.max(1))),
            budget: a.query(GmAddr(l.header(capture_header::BUDGET))).max(1),
            seq: core::cell::Cell::new(0),
            tick: core::cell::Cell::new(0),
            last: core::cell::Cell::new(None),
            sent: core::cell::Cell::new(None),
            backoff: core::cell::Cell::new(crate::backoff::Backoff::new()),
            requested: core::cell::Cell::new(0),
        }
    }

    /// Add the phases this core published since the last call to the region's
    /// [`capture_header::REQUESTS`] count (one read-modify-write when the core leaves the run,
    /// not one per phase: the count is read by the host after the run).
    pub fn count_requests<G: GmAtomic>(&self, a: &G) {
        let n = self.requested.replace(0);
        if n > 0 {
            a.fetch_add(GmAddr(self.l.header(capture_header::REQUESTS)), n);
        }
    }

    /// Tell the serving AICPU thread a request was written: its counter, the word it sleeps on
    /// (an event would wake every AICPU thread, each to scan its cores' request lines), one
    /// more and naming this core ([`capture_header::asked_word`]), so a thread that finds one
    /// ask since its last look reads this core's line alone.
    fn ask<G: GmAtomic>(&self, a: &G) {
        ask(a, self.asked, self.w);
    }

    /// Write request `r` into this core's request line (`line`), storing only what changed.
    fn send<G: GmAtomic + Barriers>(&self, a: &G, line: GmAddr, r: &Request) {
        write_request(a, line, r, self.sent.get().as_ref());
        self.sent.set(Some(*r));
    }

    /// The region this core's captures use.
    pub fn layout(&self) -> &CaptureLayout {
        &self.l
    }

    /// The occupancy of the publication in this core's lane `lane` (written by the
    /// dispatcher before the entry; read after the slot's generation).
    pub fn occupancy<G: GmAtomic>(&self, a: &G, lane: u32) -> u64 {
        a.query(GmAddr(self.l.occupancy(self.c, lane)))
    }

    /// Cross phase `phase` of task `task` at occupancy `n` of the slot of lane `key` of this
    /// core's cluster, as the participant `bit` of `mask`: claim or join (`claim`: the first
    /// phase the task enters — BEFORE, or AFTER when BEFORE records nothing), arrive,
    /// publish the request if last (and drive it to its terminal acknowledgement) or follow
    /// the publisher's, then leave. `Ok` once the phase is sealed; the core may then execute
    /// (BEFORE) or complete (AFTER).
    #[allow(clippy::too_many_arguments)]
    pub fn cross<A: AicoreAgent>(
        &self,
        a: &A,
        key: u32,
        n: u64,
        mask: u64,
        bit: u64,
        phase: u64,
        task: u32,
        claim_first: bool,
    ) -> Result<(), Failure> {
        let slot = GmAddr(self.l.slot(self.c, key));
        let site = if phase == capture_phase::BEFORE {
            crate::codes::Site::CaptureBefore
        } else {
            crate::codes::Site::CaptureAfter
        };
        let mut now = a.now_ticks();
        let deadline = now.saturating_add(self.budget);
        if mask == bit {
            return self.alone(a, slot, key, phase, task, site as u32, (now, deadline));
        }
        let exit = |a: &A| a.read_dmb() == regs::DMB_EXIT;
        if claim_first {
            loop {
                match claim(a, slot, n) {
                    Claim::Ready(won) => {
                        if won {
                            a.fetch_add(GmAddr(self.l.header(capture_header::CLAIMS)), 1);
                        }
                        break;
                    }
                    Claim::Moved => return Err(Failure::Aborted(None)),
                    c @ (Claim::Initialising | Claim::Busy) => {
                        if exit(a) {
                            return Err(Failure::Exit);
                        }
                        now = a.now_ticks();
                        if now >= deadline {
                            // In CLAIMING nothing may be written: no abort word, just the code.
                            return Err(Failure::Aborted(Some(if c == Claim::Initialising {
                                crate::codes::DeviceFault::ArgsCaptureInitLost
                            } else {
                                crate::codes::DeviceFault::ArgsCaptureTimeout
                            })));
                        }
                        let at = slot.offset(capture_slot::CLAIM);
                        self.pause(a, at, a.query(at), deadline, now);
                    }
                }
            }
        }
        let last = arrive(a, slot, phase, bit, mask);
        let mut w = Waiting { deadline, now, expired: false, code: None };
        let sealed = if last {
            self.publish(a, slot, key, Some((n, mask)), phase, task, site as u32, &mut w)?
        } else {
            self.follow(a, slot, phase, task, site as u32, &mut w)?
        };
        leave(a, slot, phase, bit, mask, n, sealed);
        if !sealed {
            // The phase's answer was ABORTED (acknowledged by the AICPU).
            a.fetch_add(GmAddr(self.l.header(capture_header::ABORTS_TAKEN)), 1);
        }
        if sealed { Ok(()) } else { Err(Failure::Aborted(w.code)) }
    }

    /// Cross phase `phase` of task `task` as its one participant: no peer waits on the slot,
    /// so nothing of it is claimed, joined or left (its occupancy is not read); the core
    /// publishes its request and waits for the terminal answer as a publisher does, and only
    /// the slot's abort word is shared with the AICPU (see [`Boundary::publish`]). A lone phase
    /// whose budget ran out fails even if its seal comes late: it has marked the slot aborted,
    /// and no later claim clears that mark for the lone tasks that come after it.
    #[allow(clippy::too_many_arguments)]
    fn alone<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        key: u32,
        phase: u64,
        task: u32,
        site: u32,
        (now, deadline): (u64, u64),
    ) -> Result<(), Failure> {
        let mut w = Waiting { deadline, now, expired: false, code: None };
        let sealed = self.publish(a, slot, key, None, phase, task, site, &mut w)?;
        if sealed && !w.expired {
            return Ok(());
        }
        if !sealed {
            // The phase's answer was ABORTED (acknowledged by the AICPU).
            a.fetch_add(GmAddr(self.l.header(capture_header::ABORTS_TAKEN)), 1);
        }
        Err(Failure::Aborted(w.code))
    }

    /// Wait a slice (or until `deadline`) for `word` to change from `seen`, the value the
    /// caller's last look was based on (so a store landing since then ends the wait at once).
    /// A look that finds the same word with the same value as the last one backs off
    /// ([`Backoff::wait_word`](crate::backoff::Backoff::wait_word)).
    /// `now` is the caller's latest clock read.
    fn pause<A: AicoreAgent>(&self, a: &A, word: GmAddr, seen: u64, deadline: u64, now: u64) {
        let until = deadline.min(now.saturating_add(a.ticks_from_micros(SLICE_US)));
        let mut b = self.backoff.get();
        b.wait_word(a, word, seen, until);
        self.backoff.set(b);
    }

    /// The budget ran out: the first time, mark the slot aborted (the waiter whose
    /// compare-and-swap set it latches ARGS_CAPTURE_TIMEOUT) and allow one more budget for the
    /// AICPU's acknowledgement, waiting on; the second time, `false`: the core leaves into the
    /// run's fatal path unacknowledged.
    fn expire<A: AicoreAgent>(&self, a: &A, slot: GmAddr, site: u32, w: &mut Waiting) -> bool {
        if w.expired {
            return false;
        }
        w.expired = true;
        if abort(a, slot, site) {
            w.code = Some(crate::codes::DeviceFault::ArgsCaptureTimeout);
        }
        a.send_event();
        w.deadline = a.now_ticks().saturating_add(self.budget);
        true
    }

    /// The last arriver (or a lone participant: `peers` is `None`): allocate the phase's
    /// `phase_seq`, write the request, store the publisher word when there are peers
    /// (`(occupancy, mask)`), and re-request (a new tick) until the acknowledgement for this
    /// tick is terminal. `Ok(true)` sealed, `Ok(false)` aborted and acknowledged.
    #[allow(clippy::too_many_arguments)]
    fn publish<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        key: u32,
        peers: Option<(u64, u64)>,
        phase: u64,
        task: u32,
        site: u32,
        w: &mut Waiting,
    ) -> Result<bool, Failure> {
        // This core's acknowledgement line is reused only after its last phase's departures.
        if let Some((s, p, m, o)) = self.last.get() {
            while !departed(a, s, p, m, o) {
                if a.read_dmb() == regs::DMB_EXIT {
                    return Err(Failure::Exit);
                }
                w.now = a.now_ticks();
                if w.now >= w.deadline {
                    return Err(Failure::Aborted(Some(crate::codes::DeviceFault::ArgsCaptureTimeout)));
                }
                let at = s.offset(capture_slot::RELEASED + 8 * p);
                self.pause(a, at, a.query(at), w.deadline, w.now);
            }
        }
        if let Some((_, mask)) = peers
            && phase == capture_phase::BEFORE
            && crate::breakage::broken(crate::breakage::CAPTURE_PEERS_SKIP_SEAL)
            && crate::breakage::forcing()
        {
            // The interleaving forced: the peers (which did not wait) run their kernels and
            // arrive at AFTER before this request is written.
            let after = slot.offset(capture_slot::ARRIVED + 8 * capture_phase::AFTER);
            let until = a.now_ticks().saturating_add(a.ticks_from_micros(1_000_000));
            while (a.query(after).count_ones() + 1) < mask.count_ones() && a.now_ticks() < until {
                self.pause(a, after, a.query(after), until, a.now_ticks());
            }
        }
        let seq = self.seq.get() % 0xFFFF_FFFF + 1;
        self.seq.set(seq);
        // A lone phase's line is read by its publisher alone: nothing to wait for before the
        // next reuse.
        self.last.set(peers.map(|(n, mask)| (slot, phase, mask, n)));
        let mut r = Request {
            epoch: self.epoch,
            task: task as u64,
            phase,
            phase_seq: seq,
            arg_index: 0,
            cursor: 0,
            slot: ((self.c as u64) << 8) | key as u64,
            tick: self.next_tick(),
        };
        let line = GmAddr(self.l.request(self.w));
        self.requested.set(self.requested.get() + 1);
        self.send(a, line, &r);
        if peers.is_some() {
            a.store_direct(slot.offset(capture_slot::PUBLISHER + 8 * phase), publisher_word(self.w, seq));
        }
        self.ask(a);
        let ack_line = GmAddr(self.l.ack(self.w));
        let identity = (self.epoch, task as u64, seq);
        let mut first = true;
        loop {
            // The tick the look was based on; `None`: the line changed during the read, or its
            // tick is an earlier answer's (or none yet).
            let (held, seen) = look_ack(a, ack_line, r.tick);
            if let Some(ack) = seen
                && ack.answers(identity, r.tick)
            {
                match ack.status {
                    crate::layout::capture_status::SEALED => return Ok(true),
                    crate::layout::capture_status::ABORTED => return Ok(false),
                    status => {
                        if status == crate::layout::capture_status::WOULD_BLOCK {
                            // The lane cannot take the record yet: ask again after a while.
                            let until = a.now_ticks().saturating_add(a.ticks_from_micros(RETRY_US));
                            a.wait_for_event(until.min(w.deadline));
                        }
                        // Ask again only within the budget and while the phase is not aborted:
                        // out of budget, the wait below expires it; aborted (by this core or a
                        // peer), the service answers ABORTED to the tick it has, and a new
                        // request would only be a second phase to abort.
                        let aborted = w.expired || a.query(slot.offset(capture_slot::ABORTED)) != 0;
                        if !aborted && a.now_ticks() < w.deadline {
                            r.arg_index = ack.arg_index;
                            r.cursor = ack.cursor;
                            r.tick = self.next_tick();
                            self.send(a, line, &r);
                            self.ask(a);
                            continue;
                        }
                    }
                }
            }
            if crate::breakage::broken(crate::breakage::CAPTURE_STOP_AFTER_LOOK) && crate::breakage::forcing() {
                // The interleaving forced: the run's stop lands between the look and the read.
                let until = a.now_ticks().saturating_add(a.ticks_from_micros(10_000_000));
                while a.read_dmb() != regs::DMB_EXIT && a.now_ticks() < until {
                    let slice = a.now_ticks().saturating_add(a.ticks_from_micros(1_000));
                    a.wait_for_event(slice.min(until));
                }
            }
            if a.read_dmb() == regs::DMB_EXIT {
                // The run's stop may have overtaken the last look: an ABORTED answer written
                // before the stop (the AICPU answers the aborted phases before it retires its
                // cores) is visible to a look after it, and is this publisher's to take, as it
                // is a peer's (`Boundary::follow`).
                if !crate::breakage::broken(crate::breakage::CAPTURE_PUBLISHER_EXIT_NO_RELOOK)
                    && look_ack(a, ack_line, r.tick).1.is_some_and(|ack| {
                        ack.answers(identity, r.tick) && ack.status == crate::layout::capture_status::ABORTED
                    })
                {
                    return Ok(false);
                }
                return Err(Failure::Exit);
            }
            // The first look's clock is the last one read before the request (the phase's start,
            // the claim's or the departures' last look): no wait came since.
            let now = if first { w.now } else { a.now_ticks() };
            first = false;
            if now >= w.deadline && !self.expire(a, slot, site, w) {
                return Err(Failure::Aborted(w.code));
            }
            // Not this request's answer yet (an earlier answer's tick, or 0): wait for the tick
            // to change from the one read. This request's tick but rewritten during the read
            // (`None`): look again soon (a wait based on 0 ends at once, and backs off).
            let tick = match seen {
                Some(ack) => ack.tick,
                None if held == r.tick => 0,
                None => held,
            };
            self.pause(a, ack_line.offset(capture_ack::TICK), tick, w.deadline, now);
        }
    }

    /// A peer: wait for the phase's publisher word, then for a terminal acknowledgement on the
    /// publisher's line carrying the publisher's `phase_seq`. `Ok(true)` sealed, `Ok(false)`
    /// aborted and acknowledged.
    #[allow(clippy::too_many_arguments)]
    fn follow<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        phase: u64,
        task: u32,
        site: u32,
        w: &mut Waiting,
    ) -> Result<bool, Failure> {
        if crate::breakage::broken(crate::breakage::CAPTURE_PEERS_SKIP_SEAL) {
            // Broken on purpose: the peer goes on without its phase's seal.
            return Ok(true);
        }
        let word = slot.offset(capture_slot::PUBLISHER + 8 * phase);
        let mut publisher_seen = None;
        loop {
            let (on, seen) = match self.look(a, slot, phase, task, &mut publisher_seen) {
                Look::Sealed => return Ok(true),
                Look::Aborted => return Ok(false),
                Look::Pending(wait) => wait.unwrap_or((word, 0)),
            };
            if a.read_dmb() == regs::DMB_EXIT {
                // The run's stop may have overtaken the last look: an ABORTED answer written
                // before the stop (the publisher's abort latched the fault that stopped the
                // run) is visible to a look after it, and is this peer's to take.
                if let Look::Aborted = self.look(a, slot, phase, task, &mut publisher_seen) {
                    return Ok(false);
                }
                return Err(Failure::Exit);
            }
            // Until the last participant arrived (no publisher yet) it may still be running its
            // kernel, which is the AICPU watchdog's to judge (KERNEL_HUNG, at the watchdog: the
            // boundary budget is half of it): the wait for arrivals gets two more budgets
            // before it counts as the capture's failure, so a hung gang lane is reported as
            // hung, never as its peers' capture timeout.
            let deadline =
                if publisher_seen.is_none() { w.deadline.saturating_add(2 * self.budget) } else { w.deadline };
            let now = a.now_ticks();
            if now >= deadline && !self.expire(a, slot, site, w) {
                return Err(Failure::Aborted(w.code));
            }
            self.pause(a, on, seen, deadline, now);
        }
    }

    /// One look at the phase's answer: the publisher (found once), then its acknowledgement
    /// line for this phase's identity.
    fn look<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        phase: u64,
        task: u32,
        publisher_seen: &mut Option<(u32, u64)>,
    ) -> Look {
        if publisher_seen.is_none() {
            *publisher_seen = publisher(a, slot, phase);
        }
        let Some((p, seq)) = *publisher_seen else { return Look::Pending(None) };
        let seq = if crate::breakage::broken(crate::breakage::CAPTURE_PEER_OWN_SEQ) {
            // Broken on purpose: the peer's own counter proves nothing about this phase.
            self.seq.get() % 0xFFFF_FFFF + 1
        } else {
            seq
        };
        let line = GmAddr(self.l.ack(p));
        let Some(ack) = read_ack(a, line) else {
            // A line being rewritten (or not written yet): look again soon (a wait based on 0
            // ends at once; the waits back off while the look finds the same).
            return Look::Pending(Some((line.offset(capture_ack::TICK), 0)));
        };
        if ack.identity == (self.epoch, task as u64, seq) {
            match ack.status {
                crate::layout::capture_status::SEALED => return Look::Sealed,
                crate::layout::capture_status::ABORTED
                    if !crate::breakage::broken(crate::breakage::CAPTURE_PEER_IGNORES_ABORTED) =>
                {
                    return Look::Aborted;
                }
                _ => {}
            }
        }
        Look::Pending(Some((line.offset(capture_ack::TICK), ack.tick)))
    }

    fn next_tick(&self) -> u64 {
        let t = self.tick.get() + 1;
        self.tick.set(t);
        t
    }
}

#[cfg(all(test, not(loom)))]
mod asked_tests {
    use super::{Asked, Asking, Request, ask, look_asked, read_request, write_request};
    use crate::layout::capture_header::asked_word;
    use crate::test_words::Words;
    use pto_hal::{GmAddr, GmAtomic};

    const ASKED: GmAddr = GmAddr(0x1000);

    /// A look says what to read: every line at the first look and after several asks or an
    /// unnamed one, the named core's line alone after exactly one ask, nothing when the counter
    /// has not moved; each look remembers the value it saw.
    #[test]
    fn a_look_at_the_counter_names_one_asker_only_after_exactly_one_ask() {
        let g = Words::default();
        let mut last = u64::MAX;
        assert_eq!(look_asked(&g, ASKED, &mut last), Asked::Several, "the first look reads every line");
        assert_eq!(last, 0);
        assert_eq!(look_asked(&g, ASKED, &mut last), Asked::Nothing);
        ask(&g, ASKED, 7);
        assert_eq!(g.query(ASKED), asked_word(1, 7));
        assert_eq!(look_asked(&g, ASKED, &mut last), Asked::One(7));
        assert_eq!(look_asked(&g, ASKED, &mut last), Asked::Nothing);
        ask(&g, ASKED, 3);
        ask(&g, ASKED, 4);
        assert_eq!(look_asked(&g, ASKED, &mut last), Asked::Several, "two asks since the last look");
        ask(&g, ASKED, 0xFFFF);
        assert_eq!(look_asked(&g, ASKED, &mut last), Asked::Several, "an ask that names nobody");
    }

    /// A request line is read once per tick: its words as written, then nothing until the
    /// writer stores a new tick.
    #[test]
    fn a_request_is_read_once_per_tick() {
        let g = Words::default();
        let line = GmAddr(0x2000);
        assert_eq!(read_request(&g, line, 0), None, "a line never written holds no request");
        let r =
            Request { epoch: 9, task: 12, phase: 1, phase_seq: 4, arg_index: 0, cursor: 0, slot: 3 << 8 | 1, tick: 5 };
        write_request(&g, line, &r, None);
        let want = Asking { tick: 5, epoch: 9, task: 12, phase: 1, slot: 3 << 8 | 1, phase_seq: 4 };
        assert_eq!(read_request(&g, line, 0), Some(want));
        assert_eq!(read_request(&g, line, 5), None, "the tick already read");
    }
}
