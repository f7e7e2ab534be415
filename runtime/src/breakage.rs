//! Deliberate breakage, for proving the faithful cache model catches each class of bug.
//!
//! With the `breakage` feature, a test can make the runtime drop exactly one maintenance or
//! ordering operation (process-wide, so such tests run one at a time). Without the feature
//! every check is a constant `false` and compiles away.
//!
//! A broken variant is a **seam**: the protocol step it breaks hands itself over, in its first
//! line, to its broken twin ([`seam!`](crate::seam)), a whole function of the step with the one
//! bug, kept in the room's `broken.rs` (compiled with the feature only). The correct step then
//! reads without any broken arm. Steps not yet split that way still test their switch inline.

/// The AICPU reads the host-published descriptor and image without invalidating first.
pub const SKIP_HOST_INVALIDATE: u64 = 1 << 0;
/// As the reference runtime places it: the AICPU invalidates the descriptor at the **end** of a
/// run (for the next run), not before its first read — a slot's first run is uncovered.
pub const INVALIDATE_AT_END: u64 = 1 << 1;
/// The AICore never writes back its handshake report.
pub const SKIP_REPORT_PUBLISH: u64 = 1 << 2;
/// The AICore writes FIN before writing back the kernel's outputs. On the resident executor:
/// a core counts its subtask off and releases the consumers before it writes back, and (to
/// force the interleaving in which a consumer reads the row unwritten-back) waits up to a
/// second for a consumer it released to complete before it does write back.
pub const FIN_BEFORE_PUBLISH: u64 = 1 << 3;
/// The AICore reads its dispatch payload without invalidating its cached copy first.
pub const SKIP_PAYLOAD_OBSERVE: u64 = 1 << 4;
/// The reference's shared handshake line: the AICPU also writes a word of a core's handshake
/// line after accepting the report (two writers of one cached line).
pub const SHARED_HANDSHAKE_LINE: u64 = 1 << 5;
/// The AICore reads a task's argument record without invalidating its cached copy first —
/// harmless while every record has its own bytes (the host-built graph), stale once the
/// device-side runtime reuses ring heap bytes for a later task's record.
pub const SKIP_ARGS_OBSERVE: u64 = 1 << 6;
/// The AICPU does not clean a dispatch payload after writing it (AICPU → AICore, edge 7):
/// harmless with a write-through AICPU cache, an unpublished payload under write-back.
pub const SKIP_PAYLOAD_CLEAN: u64 = 1 << 7;
/// The device-side orchestrator does not clean a task's argument record after writing it into
/// the ring heap (AICPU → AICore, edge 13).
pub const SKIP_RECORD_CLEAN: u64 = 1 << 8;
/// The device-side orchestrator does not clean a tensor element it wrote (`Orch::write`;
/// AICPU → AICore consumers and the host, edge 14).
pub const SKIP_ELEMENT_CLEAN: u64 = 1 << 9;
/// Fault injection, not a dropped operation: every AICPU thread stalls in retirement after its
/// cores acknowledged EXIT (before close and release) until a fault is latched (at most four
/// core wait budgets) — an AICPU thread stuck while it still owns its cores.
pub const STALL_RETIRE: u64 = 1 << 10;
/// Same, but the stall lasts four core wait budgets whatever happens: long enough for the
/// host's fence to give up on the AICPU program.
pub const STALL_RETIRE_LONG: u64 = 1 << 11;
/// The args dump publishes a buffer without writing back its payload and record lines (the
/// host reads memory, so on a2a3 it would read stale bytes). To force the interleaving in
/// which the host reads them dirty, the lane then waits (up to a second) until the host gave
/// the buffer back.
pub const SKIP_DUMP_CLEAN: u64 = 1 << 12;
/// The args dump stores a lane's ready tail before the ready entry it publishes (the host may
/// take the entry before it is written: a stale buffer index, count and end).
pub const DUMP_TAIL_FIRST: u64 = 1 << 13;
/// An ordering bug, not a maintenance one: `Base::fail` raises the schedulers' `stop` flag
/// before it latches the fault (a thread that stops may find no fault recorded).
pub const STOP_BEFORE_LATCH: u64 = 1 << 14;
/// An ordering bug: a departing AICPU thread decrements the launch state's count with
/// `Relaxed` and the last one frees it without the `Acquire` fence (another thread's last use
/// of the state is not ordered before the free).
pub const DEPART_RELAXED: u64 = 1 << 15;
/// Resident executor: a core takes a ready-list entry that was reserved but not yet written
/// (it does not wait for the entry to be published).
pub const RESIDENT_TAKE_UNPUBLISHED: u64 = 1 << 16;
/// Resident executor: a consumer's fan-in count is decremented by a load and a store instead
/// of one atomic read-modify-write (two producers finishing together lose a decrement or
/// publish the consumer twice).
pub const RESIDENT_RELEASE_SPLIT: u64 = 1 << 17;
/// Resident executor: a dispatcher stores a slot's new publication generation before the
/// entry it publishes (the lane may run the slot's previous entry again).
pub const SLOT_GEN_BEFORE_ENTRY: u64 = 1 << 19;
/// Resident executor: an idle core reads its cluster's doorbell after looking for work
/// instead of before (a ring between the two is lost: the core sleeps on work it missed).
pub const WAKE_SEEN_LATE: u64 = 1 << 20;
/// Teardown: a core leaves its gate on any release value, not only its own run's epoch (a
/// RELEASE left by an earlier run lets it return before this run's AICPU closed it).
pub const GATE_ANY_EPOCH: u64 = 1 << 21;
/// Fault injection: the AICPU does not store the RELEASE of this run's cores (a core must
/// then wait, whatever an earlier run left in its gate).
pub const SKIP_RELEASE: u64 = 1 << 22;
/// Resident executor: a core writes a word of its handshake line through its cache at exit
/// and never writes the line back (the reference's resident exit; the faithful model must
/// report the dirty line at the EXITED hand-off).
pub const RESIDENT_EXIT_DIRTY: u64 = 1 << 23;
/// Resident args capture: a core that reads its occupancy's claim word as CLAIMING also
/// claims (from CLAIMING, which is not an allowed source state) and re-initialises the slot.
pub const CAPTURE_CLAIM_FROM_CLAIMING: u64 = 1 << 24;
/// Resident args capture: a peer matches the acknowledgement against its own phase counter
/// instead of the publisher's `phase_seq`.
pub const CAPTURE_PEER_OWN_SEQ: u64 = 1 << 25;
/// Resident args capture: the first participant to leave the AFTER phase stores SETTLED,
/// not the last.
pub const CAPTURE_SETTLE_FIRST: u64 = 1 << 26;
/// Resident args capture: a dump lane lets a second reservation begin (and publishes) while
/// one is suspended open.
pub const CAPTURE_TWO_RESERVATIONS: u64 = 1 << 27;
/// Fault injection: the AICPU capture service stops advancing a reservation once it is open
/// (it still answers aborts): the owner's budget runs out mid-record.
pub const CAPTURE_STALL_OPEN: u64 = 1 << 28;
/// Fault injection: the AICPU capture service holds an open reservation (does not advance it)
/// until it has answered another core's request WOULD_BLOCK.
pub const CAPTURE_HOLD_OPEN: u64 = 1 << 29;
/// Resident args capture: the acknowledgement writer marks the line (its `BEGIN` word) only
/// after it rewrote it, so during the rewrite `BEGIN` keeps the previous tick and a reader can
/// take the old status with the new identity.
pub const CAPTURE_ACK_TICK_KEPT: u64 = 1 << 31;
/// The AICore entry returns on an error (window timeout, idle timeout, resident start
/// timeout) without writing EXITED or passing its teardown gate (the old error exits).
pub const ERROR_EXIT_SKIPS_GATE: u64 = 1 << 18;
/// The AICPU waits the exit budget for a core the latch names as hung in a kernel, and the
/// host waits the cores' whole budget after a `KERNEL_HUNG` (the old bounds: a hung kernel's
/// error arrived after watchdog + exit + the core budget).
pub const WAIT_FOR_HUNG_CORE: u64 = 1 << 32;
/// The AICore's fault exit as the resident executor had it: after a kernel faults, the core
/// returns without writing back what the kernel wrote (its dirty lines stay in its cache, so
/// the host's read-back of the tensor is a coherence violation under the faithful model).
/// Applies to both executors.
pub const FAULT_EXIT_SKIPS_PUBLISH: u64 = 1 << 33;
/// Resident args capture: a peer does not wait for its phase's seal (it goes on as soon as it
/// arrived). To force the interleaving in which that is seen, the BEFORE phase's publisher
/// writes its request only after every peer has run its kernel and arrived at AFTER (or a
/// second passed).
pub const CAPTURE_PEERS_SKIP_SEAL: u64 = 1 << 34;
/// Resident args capture: the service chooses the latest observed request instead of the
/// earliest (a later publisher overtakes the ones waiting).
pub const CAPTURE_SERVE_NEWEST: u64 = 1 << 35;
/// Resident args capture: while a reservation is open the service answers nobody else (the
/// other cores' requests wait unanswered until the large argument is copied).
pub const CAPTURE_SILENT_WHILE_OPEN: u64 = 1 << 36;
/// Fault injection: a core that wins a rendezvous slot's claim (FREE or SETTLED to CLAIMING)
/// never initialises it and leaves (a claimer stalled in CLAIMING): its peers must end the run
/// with ARGS_CAPTURE_INIT_LOST.
pub const CAPTURE_STALL_CLAIMING: u64 = 1 << 37;
/// Resident args capture: a peer does not take an ABORTED acknowledgement as its answer (it
/// waits out its own budgets and leaves unacknowledged).
pub const CAPTURE_PEER_IGNORES_ABORTED: u64 = 1 << 38;
/// Fault injection (a forced schedule): the AICPU capture service answers the open
/// reservation's aborted phase only after it answered another phase ABORTED (never first, even
/// once the run stops) — so the first abort it answers is one of a request waiting behind the
/// open reservation, with no reservation of its own open.
pub const CAPTURE_ABORT_OWNER_LAST: u64 = 1 << 39;
/// The fault path as it was: a faulted subtask completes like any other — the legacy core
/// reports a plain FIN after a caught fault (so its AICPU thread counts it done, records it
/// after completion and releases its consumers), the resident core goes on to write back, count
/// the subtask off and release — and, to force the interleaving in which the released
/// consumers run, no scheduler thread, resident core or supervisor looks at the fatal latch
/// until the graph has drained (before the fix a thread that made progress looked only every
/// 64 iterations).
pub const RELEASE_ON_FAULT: u64 = 1 << 30;

/// Resident executor: a taker that found an inbox empty (or emptied it) clears the inbox's
/// stocked bit without looking at the inbox again (a place reserved just before the clear
/// stays unmarked: no core steals it).
pub const UNSTOCK_NO_SECOND_LOOK: u64 = 1 << 41;

/// Fault injection (a forced schedule): a resident capture publisher whose look at its
/// acknowledgement found no answer waits for the run's stop (`DMB_EXIT`) before it reads DMB,
/// so the stop lands between the look and the read (an ABORTED answer written before the stop
/// comes after the look).
pub const CAPTURE_STOP_AFTER_LOOK: u64 = 1 << 42;

/// Resident args capture: a publisher that sees the run's stop leaves at once, without looking
/// at its acknowledgement once more (an ABORTED answer the stop overtook is left untaken).
pub const CAPTURE_PUBLISHER_EXIT_NO_RELOOK: u64 = 1 << 43;

/// Resident args capture: the service takes any move of its `ASKED` counter for one ask by the
/// core the word names (not only a move by one), and reads that core's request line alone: a
/// request another core asked with between the service's two looks is never read.
pub const CAPTURE_ASKED_JUMP_AS_ONE: u64 = 1 << 44;

/// Not a bug: the forced interleavings of the broken variants above are off (a variant whose
/// bug shows only in some interleavings waits, where it is broken, for the one that shows it;
/// with this bit it leaves the interleaving to the schedule). What the simulator's seeded
/// schedules are tested with: exploration must find those interleavings by itself.
pub const UNFORCED: u64 = 1 << 40;

/// Whether a broken variant may force the interleaving that shows it (not [`UNFORCED`]).
#[inline(always)]
pub fn forcing() -> bool {
    !broken(UNFORCED)
}

// A process-wide test switch, set before a model or a run starts and never part of a
// protocol; a `static` cannot hold a loom atomic (no `const` constructor).
#[cfg(feature = "breakage")]
#[allow(clippy::disallowed_types, reason = "a process-wide static; loom atomics cannot be statics")]
static ACTIVE: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Whether breakage `b` is active.
#[inline(always)]
pub fn broken(b: u64) -> bool {
    #[cfg(feature = "breakage")]
    {
        ACTIVE.load(core::sync::atomic::Ordering::Relaxed) & b != 0
    }
    #[cfg(not(feature = "breakage"))]
    {
        let _ = b;
        false
    }
}

/// Activate `bits` until the returned guard is dropped.
#[cfg(feature = "breakage")]
pub fn activate(bits: u64) -> Active {
    ACTIVE.store(bits, core::sync::atomic::Ordering::SeqCst);
    Active(())
}

/// Breakage in force; dropping it restores the correct runtime.
#[cfg(feature = "breakage")]
#[derive(Debug)]
pub struct Active(());

#[cfg(feature = "breakage")]
impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.store(0, core::sync::atomic::Ordering::SeqCst);
    }
}

/// The seam of a protocol step: when breakage `switch` is active, the step returns what its
/// broken twin `twin` returns instead of running itself (`seam!(SWITCH)`: returns at once, for a
/// step whose broken twin does nothing). Put first in the step's body; with
/// the `breakage` feature off it expands to nothing, so ordinary builds compile neither the
/// test of the switch nor the twin.
///
/// ```ignore
/// pub fn claim<G: GmAtomic + Barriers>(a: &G, slot: GmAddr, n: u64) -> Claim {
///     crate::seam!(CAPTURE_CLAIM_FROM_CLAIMING => super::broken::claim_from_claiming(a, slot, n));
///     // … the correct step …
/// }
/// ```
#[macro_export]
#[doc(hidden)]
macro_rules! seam {
    // A step whose broken twin does nothing at all.
    ($switch:ident) => {
        #[cfg(feature = "breakage")]
        if $crate::breakage::broken($crate::breakage::$switch) {
            return;
        }
    };
    ($switch:ident => $twin:expr) => {
        #[cfg(feature = "breakage")]
        if $crate::breakage::broken($crate::breakage::$switch) {
            return $twin;
        }
    };
}
