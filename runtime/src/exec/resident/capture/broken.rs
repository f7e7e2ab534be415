//! The broken twins of the capture protocol's steps, for the breakage suites and the loom
//! models' reproducers: each is a whole step with one bug, entered from the first line of the
//! correct step when its switch is active ([`seam!`](crate::seam)). Compiled with the
//! `breakage` feature only.

use pto_hal::{Barriers, GmAddr, GmAtomic};

use super::lines::{Ack, Asked, write_ack_body};
use super::slot::{Claim, ClaimStep, claim_step, initialise, settle_if_last, take};
use crate::layout::{capture_ack, capture_header, capture_slot};

/// `CAPTURE_CLAIM_FROM_CLAIMING`: [`claim`](super::slot::claim) that takes CLAIMING of its
/// own occupancy as a source state, so a late claimer re-clears a slot its peers may already
/// have joined.
pub(super) fn claim_from_claiming<G: GmAtomic + Barriers>(a: &G, slot: GmAddr, n: u64) -> Claim {
    let seen = a.query(slot.offset(capture_slot::CLAIM));
    match claim_step(seen, n) {
        ClaimStep::Join => Claim::Ready(false),
        ClaimStep::Wait => {
            initialise(a, slot, n);
            Claim::Ready(true)
        }
        ClaimStep::Take if take(a, slot, seen, n) => {
            initialise(a, slot, n);
            Claim::Ready(true)
        }
        ClaimStep::Take | ClaimStep::Busy => Claim::Busy,
        ClaimStep::Moved => Claim::Moved,
    }
}

/// `CAPTURE_STALL_CLAIMING` (fault injection): [`claim`](super::slot::claim) whose winner
/// never initialises the slot it took, which stays CLAIMING; the winner leaves as if the slot
/// had moved.
pub(super) fn claim_and_stall<G: GmAtomic + Barriers>(a: &G, slot: GmAddr, n: u64) -> Claim {
    let seen = a.query(slot.offset(capture_slot::CLAIM));
    match claim_step(seen, n) {
        ClaimStep::Join => Claim::Ready(false),
        ClaimStep::Wait => Claim::Initialising,
        ClaimStep::Take if take(a, slot, seen, n) => Claim::Moved,
        ClaimStep::Take | ClaimStep::Busy => Claim::Busy,
        ClaimStep::Moved => Claim::Moved,
    }
}

/// `CAPTURE_SETTLE_FIRST`: [`leave`](super::slot::leave) in which the first participant out
/// (as well as the last) settles the slot, while its peers are still in the phase.
pub(super) fn leave_first_settles<G: GmAtomic>(
    a: &G,
    slot: GmAddr,
    phase: u64,
    bit: u64,
    mask: u64,
    n: u64,
    sealed: bool,
) -> bool {
    let before = a.fetch_or(slot.offset(capture_slot::RELEASED + 8 * phase), bit);
    settle_if_last(a, slot, phase, before | bit == mask || before & mask == 0, n, sealed)
}

/// `CAPTURE_ACK_TICK_KEPT`: [`write_ack`](super::lines::write_ack) that marks the line only
/// once it is whole, so during the rewrite `BEGIN` still holds the previous answer's tick and
/// a reader may take a mix of two answers.
pub(super) fn write_ack_begin_last<G: GmAtomic + Barriers>(a: &G, line: GmAddr, ack: &Ack, prev: Option<&Ack>) {
    write_ack_body(a, line, ack, prev);
    a.store_direct(line.offset(capture_ack::BEGIN), ack.tick);
}

/// `CAPTURE_ASKED_JUMP_AS_ONE`: [`look_asked`](super::lines::look_asked) that takes any move
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
