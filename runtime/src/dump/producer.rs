//! The args-dump producer surface of one AICPU thread: a [`DumpLane`].
//!
//! A lane is one AICPU scheduler thread's share of the args dump: a payload arena, metadata
//! record buffers, a ready queue the host drains and a free queue the host refills, and the
//! published / completed payload counters that give back-pressure. The producer is
//! **resumable**: [`DumpLane::try_begin`] never waits — it accepts a record (returning a
//! [`DumpReservation`] that borrows the lane, so at most one reservation is open per lane, by
//! the types), says the lane would block, or refuses the record. The reservation copies its
//! payload in bounded chunks ([`DumpReservation::copy_chunk`]), so a caller that must keep
//! polling other work (a supervisor loop) can interleave, and then either commits the record
//! or abandons it. Nothing of an open reservation is ever visible to the host; abandon restores
//! the lane exactly. A blocking capture is a thin loop over these calls.
//!
//! The trait is the runtime's: its one implementation is the runtime's own lane over any AICPU
//! agent (`GmLane`, in `lane.rs`) on the lane's device layout (`layout::dump`). It was a HAL
//! trait (`pto_hal::DumpLane`); no platform implements it, so it moved here, beside the lane.
//! The platform decides, through its [`Contract`](pto_hal::Contract), whether payload and
//! record lines are written back before they are published to the host.

/// What [`DumpLane::try_begin`] answers.
#[derive(Debug)]
pub enum Begin<R> {
    /// The record is reserved: copy its payload, then commit or abandon.
    Accepted(R),
    /// The lane cannot take the record now; nothing was reserved or counted. Try again later.
    WouldBlock(Blocked),
    /// The lane will never take this record; it was counted once as refused (dropped).
    Refused(Refusal),
}

/// Why a lane would block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// No metadata buffer is free: the host has not returned one yet.
    NoBuffer,
    /// The payload arena is full of bytes the host has not acknowledged yet.
    ArenaFull,
    /// The lane's one reservation is open (suspended between service steps) for another
    /// capture: a lane holds at most one.
    ReservationOpen,
}

/// Why a lane refused a record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The lane is closed for this run (flushed, or the dump is off).
    Closed,
    /// The record is malformed (for instance more dimensions than a record holds).
    BadRecord,
}

/// One AICPU thread's dump lane: the producer side.
///
/// Tier: AICPU. One lane per AICPU scheduler thread; a lane is used by its thread only.
///
/// A blocking capture is a loop over the resumable calls:
///
/// ```
/// use pto_runtime::dump::{Begin, DumpLane, DumpReservation};
/// fn capture<L: DumpLane>(lane: &mut L, r: &L::Record, mut wait: impl FnMut() -> bool) -> bool {
///     loop {
///         match lane.try_begin(r) {
///             Begin::Accepted(mut res) => {
///                 while res.copy_chunk(64 * 1024) > 0 {}
///                 res.commit();
///                 return true;
///             }
///             Begin::Refused(_) => return false,
///             Begin::WouldBlock(_) => {}
///         }
///         if !wait() {
///             // Out of budget: counted once, never reserved.
///             lane.drop_records(1);
///             return false;
///         }
///     }
/// }
/// ```
///
/// A reservation borrows its lane, so a second one cannot be opened while the first is open:
///
/// ```compile_fail
/// use pto_runtime::dump::DumpLane;
/// fn two_at_once<L: DumpLane>(lane: &mut L, r: &L::Record) {
///     let first = lane.try_begin(r);
///     let second = lane.try_begin(r); // error: `*lane` is already borrowed by `first`
///     drop((first, second));
/// }
/// ```
///
/// and nothing can be published while one is open:
///
/// ```compile_fail
/// use pto_runtime::dump::DumpLane;
/// fn publish_mid_reservation<L: DumpLane>(lane: &mut L, r: &L::Record) {
///     let open = lane.try_begin(r);
///     lane.publish(); // error: `*lane` is already borrowed by `open`
///     drop(open);
/// }
/// ```
pub trait DumpLane {
    /// What a record describes: the captured argument (its view, stage, task…).
    type Record;
    /// An open reservation; it borrows the lane, so a second `try_begin` cannot start until
    /// it is committed or abandoned.
    type Reservation<'a>: DumpReservation
    where
        Self: 'a;

    /// Reserve a record and its payload bytes without waiting (see [`Begin`]).
    fn try_begin(&mut self, record: &Self::Record) -> Begin<Self::Reservation<'_>>;
    /// Publish the records committed so far to the host (no reservation can be open: the
    /// borrow of a reservation forbids it). Returns `false` when there was nothing to publish.
    fn publish(&mut self) -> bool;
    /// Count `n` records as dropped (a capture that gave up before it reserved, for instance
    /// when its wait ran out of budget).
    fn drop_records(&mut self, n: u64);
    /// Publish what is left and close the lane for this run: the host may now trust its
    /// counters. Later `try_begin` calls are refused.
    fn close(&mut self);
}

/// An open reservation on a [`DumpLane`].
pub trait DumpReservation {
    /// Copy at most `max_bytes` more of the payload into the arena; returns the bytes copied
    /// (0 once the payload is complete).
    fn copy_chunk(&mut self, max_bytes: u64) -> u64;
    /// Payload bytes still to copy.
    fn remaining(&self) -> u64;
    /// Write the record and make it part of the lane's next publication.
    fn commit(self);
    /// Give the reservation back: the arena offset and record count return to what they
    /// were before [`DumpLane::try_begin`], and the record is counted once as dropped.
    fn abandon(self);
}
