//! The rendezvous slot of a dispatch slot, one occupancy at a time: the steps a participant
//! takes ([`claim`], [`arrive`], [`publisher`], [`leave`], [`departed`], [`abort`]), each one
//! attempt over `GmAtomic` so a loom model can drive them; `capture::boundary` strings them
//! into a core's walk through a phase.
//!
//! Every access to a slot is one 64-bit atomic or device-direct store/query; no line of a slot
//! is ever written back or invalidated. The claim word's states are
//! [`capture_slot`]'s: FREE, CLAIMING (its winner zeroes the other words), READY (participants
//! join, arrive and leave) and SETTLED (every participant left the sealed AFTER phase).

use pto_hal::{Barriers, GmAddr, GmAtomic};

use crate::layout::{capture_phase, capture_slot};

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
    crate::seam!(CAPTURE_CLAIM_FROM_CLAIMING => broken::claim_from_claiming(a, slot, n));
    crate::seam!(CAPTURE_STALL_CLAIMING => broken::claim_and_stall(a, slot, n));
    let seen = a.query(slot.offset(capture_slot::CLAIM));
    match claim_step(seen, n) {
        ClaimStep::Join => Claim::Ready(false),
        ClaimStep::Wait => Claim::Initialising,
        ClaimStep::Take if take(a, slot, seen, n) => {
            initialise(a, slot, n);
            Claim::Ready(true)
        }
        ClaimStep::Take | ClaimStep::Busy => Claim::Busy,
        ClaimStep::Moved => Claim::Moved,
    }
}

/// What a claimer does on seeing the claim word `seen` for occupancy `n`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum ClaimStep {
    /// READY at `n`: join.
    Join,
    /// CLAIMING at `n`: another participant initialises; wait.
    Wait,
    /// FREE, or SETTLED of an earlier occupancy: try to take it.
    Take,
    /// Past `n`, or settled at `n` already.
    Moved,
    /// An earlier occupancy has not settled yet: try again.
    Busy,
}

/// The claim step for the claim word `seen` and occupancy `n` (the decision alone).
pub(super) fn claim_step(seen: u64, n: u64) -> ClaimStep {
    use capture_slot::{CLAIMING, FREE, READY, SETTLED, fields};
    use core::cmp::Ordering::{Equal, Greater};
    let (state, occ) = fields(seen);
    match (state, occ.cmp(&n)) {
        (READY, Equal) => ClaimStep::Join,
        (CLAIMING, Equal) => ClaimStep::Wait,
        _ if state == FREE || (state == SETTLED && occ < n) => ClaimStep::Take,
        (_, Greater) | (SETTLED, Equal) => ClaimStep::Moved,
        _ => ClaimStep::Busy,
    }
}

/// Take the slot: compare-and-swap its claim word from `seen` to `CLAIMING | n`. Whether this
/// core won (another claimer may have taken it just now).
pub(super) fn take<G: GmAtomic>(a: &G, slot: GmAddr, seen: u64, n: u64) -> bool {
    let claiming = capture_slot::claim(capture_slot::CLAIMING, n);
    a.compare_exchange(slot.offset(capture_slot::CLAIM), seen, claiming) == seen
}

/// The claimer's initialisation, inside CLAIMING: zero every other word, a store barrier, then
/// `READY | n`.
pub(super) fn initialise<G: GmAtomic + Barriers>(a: &G, slot: GmAddr, n: u64) {
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
    crate::seam!(CAPTURE_SETTLE_FIRST => broken::leave_first_settles(a, slot, phase, bit, mask, n, sealed));
    let before = a.fetch_or(slot.offset(capture_slot::RELEASED + 8 * phase), bit);
    settle_if_last(a, slot, phase, before | bit == mask, n, sealed)
}

/// The end of a departure from phase `phase` (`last`: this participant's bit completed the
/// released mask): the last out of a sealed AFTER stores `SETTLED | n`. Whether it did.
pub(super) fn settle_if_last<G: GmAtomic>(a: &G, slot: GmAddr, phase: u64, last: bool, n: u64, sealed: bool) -> bool {
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

/// The broken twins of the slot's steps (the breakage suites' variants and the loom models'
/// reproducers): each is a whole step with one bug, entered from the first line of the correct
/// step when its switch is active ([`seam!`](crate::seam)). Compiled with the `breakage`
/// feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::{Barriers, GmAddr, GmAtomic};

    use super::{Claim, ClaimStep, claim_step, initialise, settle_if_last, take};
    use crate::layout::capture_slot;

    /// `CAPTURE_CLAIM_FROM_CLAIMING`: [`claim`](super::claim) that takes CLAIMING of its
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

    /// `CAPTURE_STALL_CLAIMING` (fault injection): [`claim`](super::claim) whose winner
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

    /// `CAPTURE_SETTLE_FIRST`: [`leave`](super::leave) in which the first participant out
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
}
