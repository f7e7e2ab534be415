//! Trace rings: one ring per core and per AICPU thread, written by its owner alone.
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | a core's ring ([`TraceHeader`] + [`TraceRecord`]s) | that core, device-direct stores | host (after the fence) |
//! | an AICPU thread's ring | that thread, device-direct stores | host (after the fence) |

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::LaunchConfig;

/// Where a run's trace rings sit: one ring per worker (AICore), then one per AICPU thread.
/// A ring is a [`TraceHeader`] line followed by its records ([`TraceRecord`]); each ring has
/// exactly one writer (its core or its thread), which stores every word device-direct
/// (`GmAtomic::store_direct`), so no line of a ring is ever in a cache and no maintenance is
/// needed on either tier. The host reads the rings after the run's fence.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceLayout {
    /// GM address of the first ring (64-byte aligned).
    pub base: u64,
    /// Workers (AICore rings).
    pub workers: u32,
    /// AICPU threads (thread rings).
    pub threads: u32,
    /// Records per core ring.
    pub core_records: u32,
    /// Records per thread ring.
    pub thread_records: u32,
}

impl TraceLayout {
    /// Bytes of one ring of `records` records, rounded up to whole lines.
    pub const fn ring_bytes(records: u32) -> u64 {
        (size_of::<TraceHeader>() as u64 + records as u64 * size_of::<TraceRecord>() as u64).next_multiple_of(64)
    }
    /// The layout a launch configuration names, `None` when tracing is off.
    pub const fn of(cfg: &LaunchConfig) -> Option<TraceLayout> {
        if cfg.trace == 0 {
            return None;
        }
        Some(TraceLayout {
            base: cfg.trace,
            workers: cfg.workers,
            threads: cfg.aicpu_threads,
            core_records: cfg.trace_core_records,
            thread_records: cfg.trace_thread_records,
        })
    }
    /// GM address of worker `w`'s ring.
    pub const fn core_ring(&self, w: u32) -> u64 {
        self.base + w as u64 * Self::ring_bytes(self.core_records)
    }
    /// GM address of AICPU thread `t`'s ring.
    pub const fn thread_ring(&self, t: u32) -> u64 {
        self.core_ring(self.workers) + t as u64 * Self::ring_bytes(self.thread_records)
    }
    /// Bytes of every ring.
    pub const fn bytes(&self) -> u64 {
        self.thread_ring(self.threads) - self.base
    }
}

/// Head line of a trace ring, written by the ring's owner when it is done with the run.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct TraceHeader {
    /// The run's epoch, stored last: a header with another epoch was not written by this run
    /// (its owner never finished), and the ring's records are unknown.
    pub epoch: u64,
    /// Records stored (at most the ring's capacity).
    pub count: u64,
    /// Records that did not fit (counted, never silently lost).
    pub dropped: u64,
    /// Reserved.
    pub reserved: [u64; 5],
}

/// Kinds of [`TraceRecord`].
pub mod trace_kind {
    /// AICore: one subtask ran (`start`..`end` on the core).
    pub const SUBTASK: u8 = 1;
    /// AICPU: a subtask was dispatched (DMB written) at `start`.
    pub const DISPATCH: u8 = 2;
    /// AICPU: a subtask's FIN was seen at `start`.
    pub const COMPLETE: u8 = 3;
    /// AICPU phase: the orchestration function ran (device-side runtime).
    pub const ORCHESTRATION: u8 = 4;
    /// AICPU phase: a dispatch pass that placed work.
    pub const DISPATCHING: u8 = 5;
    /// AICPU phase: a completion poll that retired work.
    pub const COMPLETING: u8 = 6;
    /// AICPU phase: waiting for an event.
    pub const IDLE: u8 = 7;
    /// AICPU phase: handshaking its cores.
    pub const HANDSHAKE: u8 = 8;
    /// AICPU phase: retiring its cores.
    pub const RETIRE: u8 = 9;
    /// AICPU, the device-side runtime's orchestrator: a dependency found at submission, at
    /// `start`: `task` is the consumer, `block` the producer (both task ids as kernels see
    /// them). Producers include allocation records (`Orch::alloc`), which never run.
    pub const EDGE: u8 = 10;
    /// AICPU phase: watching a resident run until it completes.
    pub const SUPERVISE: u8 = 11;
}

/// One trace record: a subtask on a core, a scheduler event or a phase of an AICPU thread.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TraceRecord {
    /// [`trace_kind`].
    pub kind: u8,
    /// Lane (0 = AIC, 1 = AIV lane 0, 2 = AIV lane 1) of a subtask record.
    pub lane: u8,
    /// Reserved.
    pub reserved0: u16,
    /// Worker index the record is about (its own for a core ring).
    pub core: u32,
    /// Task id (as kernels see it).
    pub task: u32,
    /// SPMD block.
    pub block: u32,
    /// Kernel binary handle (maps to a func id on the host).
    pub bin: u64,
    /// Start tick (the event's tick for an instant).
    pub start: u64,
    /// End tick (= `start` for an instant).
    pub end: u64,
    /// Subtask on the resident executor: when the core found the subtask published in its
    /// lane's dispatch slot (0 on the legacy executor, where the dispatching AICPU thread
    /// records it).
    pub dispatch: u64,
    /// Subtask on the resident executor: when the core had released the task's consumers
    /// (0 on the legacy executor, where the AICPU thread that saw its FIN records it).
    pub completion: u64,
    /// Reserved.
    pub reserved: u64,
}

const _: () = {
    assert!(size_of::<TraceHeader>() == 64);
    assert!(size_of::<TraceRecord>() == 64);
    assert!(offset_of!(TraceRecord, bin) == 16);
    assert!(offset_of!(TraceRecord, start) == 24);
};
