//! The request and acknowledgement lines of a boundary capture, the codec both sides use: a
//! core writes its request line ([`write_request`]) and tells its AICPU thread ([`ask`]); the
//! thread looks at its `ASKED` counter ([`look_asked`]), reads the lines it names
//! ([`read_request`]) and answers on its acknowledgement line ([`write_ack`]), which the
//! asking cores read ([`look_ack`], [`read_ack`]).
//!
//! The request line is the core's own, the acknowledgement line the serving AICPU thread's;
//! both are touched word by word, device-direct, and each write stores its tick last so a
//! reader never takes a mix of two writes.

use pto_hal::{Barriers, GmAddr, GmAtomic};

use crate::layout::{capture_ack, capture_header, capture_request};

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
    crate::seam!(CAPTURE_ACK_TICK_KEPT => broken::write_ack_begin_last(a, line, ack, prev));
    a.store_direct(line.offset(capture_ack::BEGIN), ack.tick);
    a.store_store();
    write_ack_body(a, line, ack, prev);
}

/// Every word of acknowledgement `ack` but `BEGIN` (those `prev` holds already skipped), a
/// store barrier, then its tick in `TICK`.
pub(super) fn write_ack_body<G: GmAtomic + Barriers>(a: &G, line: GmAddr, ack: &Ack, prev: Option<&Ack>) {
    use capture_ack as k;
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
}

/// Store each `(offset, value)` of `words` into the line at `line`, device-direct and in order,
/// except those `prev` (the same offsets, as the line holds them) shows holding their value
/// already.
pub(super) fn store_changed<G: GmAtomic, const N: usize>(
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
    crate::seam!(CAPTURE_ASKED_JUMP_AS_ONE => broken::look_asked_any_jump(a, asked, last));
    let now = a.query(asked);
    if now == *last {
        return Asked::Nothing;
    }
    let prev = core::mem::replace(last, now);
    a.rmb();
    let (was, _) = capture_header::asked_fields(prev);
    let (count, who) = capture_header::asked_fields(now);
    let by_one = count == was.wrapping_add(1) & capture_header::ASKED_COUNT_MASK;
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

/// The broken twins of the lines' steps (the breakage suites' variants and the loom models'
/// reproducers): each is a whole step with one bug, entered from the first line of the correct
/// step when its switch is active ([`seam!`](crate::seam)). Compiled with the `breakage`
/// feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::{Barriers, GmAddr, GmAtomic};

    use super::{Ack, Asked, write_ack_body};
    use crate::layout::{capture_ack, capture_header};

    /// `CAPTURE_ACK_TICK_KEPT`: [`write_ack`](super::write_ack) that marks the line only
    /// once it is whole, so during the rewrite `BEGIN` still holds the previous answer's tick and
    /// a reader may take a mix of two answers.
    pub(super) fn write_ack_begin_last<G: GmAtomic + Barriers>(a: &G, line: GmAddr, ack: &Ack, prev: Option<&Ack>) {
        write_ack_body(a, line, ack, prev);
        a.store_direct(line.offset(capture_ack::BEGIN), ack.tick);
    }

    /// `CAPTURE_ASKED_JUMP_AS_ONE`: [`look_asked`](super::look_asked) that takes any move
    /// of the counter for one ask by the core the word names, so a request another core asked with
    /// between two looks is never read.
    pub(super) fn look_asked_any_jump<G: GmAtomic + Barriers>(a: &G, asked: GmAddr, last: &mut u64) -> Asked {
        let now = a.query(asked);
        if now == *last {
            return Asked::Nothing;
        }
        let prev = core::mem::replace(last, now);
        a.rmb();
        match capture_header::asked_fields(now).1 {
            Some(w) if prev != u64::MAX => Asked::One(w),
            _ => Asked::Several,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
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
