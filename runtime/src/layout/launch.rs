//! The launch protocol: the descriptor a run is started with, the per-worker lines of its
//! slot arena, and the DMB/COND register values of the dispatch hand-off.
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | [`LaunchConfig`] (3 lines) | host (H2D before launch) | AICPU, AICore |
//! | [`FatalLine`], [`FaultText`] | the agent (AICPU or AICore) that wins the latch, atomics or device-direct stores only | host (D2H after the run) |
//! | [`RunLine`] | AICPU threads, atomics only | host (D2H after the run) |
//! | [`Handshake`] (1 line per worker) | that worker's AICore only | AICPU |
//! | [`TeardownGate`] (1 line per worker) | AICPU, atomics only | AICore, device-direct loads |
//! | [`DispatchPayload`] (2 lines per worker) | AICPU only | that worker's AICore |
//! | DMB register ([`regs`]) | AICPU | that worker's AICore |
//! | COND register ([`regs`]) | that worker's AICore | AICPU |
//!
//! The AICPU never writes a handshake line: a core's payload addresses are computed from its
//! worker index ([`SlotArena`]), so the line has one writer. Handshakes and gates carry the
//! run's epoch, so a stale report or release of an earlier run is never taken for this run's
//! and nothing has to be cleared between runs.

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Magic of a launch descriptor ("PTO1").
pub const DESC_MAGIC: u32 = 0x314F_5450;

/// Register values of the dispatch (DMB) / status (COND) protocol.
pub mod regs {
    /// DMB: window open, core idle. The open itself acknowledges the core's report.
    pub const DMB_IDLE: u32 = 0x7FFF_FFFD;
    /// DMB: leave the dispatch loop.
    pub const DMB_EXIT: u32 = 0x7FFF_FFF0;
    /// Task ids at or above this value are reserved.
    pub const RESERVED_MIN: u32 = 0x7FFF_FFF0;
    /// COND state bit: set = FIN, clear = ACK.
    pub const COND_FIN: u32 = 1 << 31;
    /// COND: core idle after its window opened.
    pub const COND_IDLE: u32 = COND_FIN | 0x7FFF_FFFF;
    /// COND: exit acknowledged.
    pub const COND_EXITED: u32 = COND_FIN | 0x7FFF_FFFE;
    /// COND value a legacy core writes instead of `fin(id)` when the dispatch it acknowledged
    /// faulted (after latching the fault): the AICPU never counts that subtask done, so its
    /// task never completes, is never recorded after completion and releases no consumer. In
    /// the reserved range, so the scheduler matches it to no slot. After it the core runs
    /// nothing more: it waits for EXIT.
    pub const COND_FAULTED: u32 = COND_FIN | 0x7FFF_FFFC;
    /// COND value acknowledging dispatch `id`.
    pub const fn ack(id: u32) -> u32 {
        id & 0x7FFF_FFFF
    }
    /// COND value reporting that dispatch `id` finished.
    pub const fn fin(id: u32) -> u32 {
        COND_FIN | (id & 0x7FFF_FFFF)
    }
    /// The next per-core dispatch id after `id`: never 0, never reserved. Parity alternates,
    /// which is what selects a core's payload buffer.
    pub const fn next_id(id: u32) -> u32 {
        let n = id + 1;
        if n >= RESERVED_MIN { 1 + (id & 1) } else { n }
    }
}

/// What the AICore program returns to its stream when it does not end normally (0).
pub mod core_status {
    /// Status the executor returns when its configuration is unusable.
    pub const BAD_DESC: i32 = -202;
    /// Status when the window never opened within budget.
    pub const WINDOW_TIMEOUT: i32 = -8;
    /// Status when no dispatch and no EXIT arrived within budget.
    pub const IDLE_TIMEOUT: i32 = -9;
    /// Status when the AICPU abandoned the core at its teardown gate (it did not acknowledge
    /// EXIT in time) instead of releasing it.
    pub const NOT_RELEASED: i32 = -6;
}

/// Host-written run configuration: the first three lines of the launch descriptor.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct LaunchConfig {
    /// [`DESC_MAGIC`].
    pub magic: u32,
    /// [`LAYOUT_VERSION`](super::LAYOUT_VERSION).
    pub version: u32,
    /// This run's epoch: non-zero, different for every run of the device.
    pub epoch: u64,
    /// Clusters launched.
    pub clusters: u32,
    /// Workers launched (`3 * clusters`).
    pub workers: u32,
    /// AICPU threads launched.
    pub aicpu_threads: u32,
    /// Tasks in the graph image.
    pub task_count: u32,
    /// Physical cores of the device (bound on a reported physical core id).
    pub physical_cores: u32,
    /// Which runtime the AICPU program runs: [`RUNTIME_HBG`] or [`RUNTIME_TRB`].
    pub runtime: u32,
    /// GM address of the graph image (host-built graph) or the [`OrchImage`](super::OrchImage) (rings).
    pub image: u64,
    /// Length of the graph image in bytes.
    pub image_len: u64,
    /// GM address of `Handshake[workers]`.
    pub handshakes: u64,
    /// GM address of `TeardownGate[workers]`.
    pub gates: u64,
    /// GM address of `DispatchPayload[workers][2]`.
    pub payloads: u64,
    /// AICPU no-progress watchdog budget, in device ticks.
    pub watchdog_ticks: u64,
    /// Budget for the EXIT acknowledgement of a core group, in ticks.
    pub exit_ticks: u64,
    /// AICore budget for any single wait (window, dispatch, gate), in ticks.
    pub core_wait_ticks: u64,
    /// GM address of the run's trace rings ([`TraceLayout`](super::TraceLayout)); 0 = tracing off (nothing is
    /// recorded and no ring storage exists).
    pub trace: u64,
    /// Records per AICore trace ring (one ring per worker).
    pub trace_core_records: u32,
    /// Records per AICPU-thread trace ring (one ring per launched thread).
    pub trace_thread_records: u32,
    /// GM address of the run's args-dump region (a [`DumpHeader`](super::DumpHeader) line, then the lanes:
    /// [`DumpLayout`](super::DumpLayout)); 0 = the dump is off (no lane storage exists).
    pub dump: u64,
    /// Which executor runs the graph ([`executor_mode`]); 0 is not a choice and is refused.
    pub executor: u32,
    /// Why the run is on the legacy executor ([`legacy_reason`]), 0 on the resident one.
    pub executor_reason: u32,
    /// The task the reason names (a sync-start task, or one with too many blocks), `u32::MAX`
    /// if none.
    pub executor_detail: u32,
    /// Resident executor: inbox entries of the scheduler state ([`ResidentLayout::entries`](super::ResidentLayout::entries)).
    pub resident_entries: u32,
    /// Resident executor: GM address of the scheduler state ([`ResidentLayout`](super::ResidentLayout)); 0 on the
    /// legacy executor.
    pub resident: u64,
    /// Resident executor with the args dump on: GM address of the boundary-capture control
    /// region ([`CaptureLayout`](super::CaptureLayout)); 0 when either is off (no control storage exists).
    pub capture: u64,
    /// Reserved, zero.
    pub reserved: [u64; 4],
}

/// [`LaunchConfig::executor`] values (the reference's numbering; 0 is not a mode).
pub mod executor_mode {
    /// Resident executor, its scheduler state not yet checked by the AICPU: cores wait for
    /// [`RunLine::resident_ready`](super::RunLine::resident_ready) to say [`RESIDENT_READY`].
    pub const RESIDENT_PENDING: u32 = 1;
    /// Resident executor, the AICPU validated the image: the cores schedule themselves.
    pub const RESIDENT_READY: u32 = 2;
    /// Legacy executor: the AICPU dispatches every subtask.
    pub const LEGACY_GRAPH: u32 = 3;
    /// Legacy executor because the graph has a shape the resident executor does not run.
    pub const LEGACY_UNSUPPORTED_SHAPE: u32 = 4;
}

/// [`LaunchConfig::executor_reason`] values: why a run is on the legacy executor.
pub mod legacy_reason {
    /// The run is on the resident executor.
    pub const NONE: u32 = 0;
    /// `Executor::Legacy` was asked for.
    pub const REQUESTED: u32 = 1;
    /// The device-side runtime schedules from its rings on the AICPU.
    pub const DEVICE_SIDE_RUNTIME: u32 = 2;
    // 3 and 4 named MIX and SPMD tasks, which the resident executor runs now.
    /// A task with more blocks than a resident entry holds.
    pub const TOO_MANY_BLOCKS: u32 = 7;
    /// The host could not read its own image back.
    pub const UNREADABLE: u32 = 8;
    /// A task whose blocks must start together.
    pub const SYNC_START: u32 = 5;
    /// The args dump is on and a task has more than one block (its boundaries are captured
    /// by the AICPU threads that dispatch it).
    pub const ARGS_DUMP_BLOCKS: u32 = 6;
    /// `Executor::Auto` on a platform whose cores share the host's processors with the AICPU
    /// threads (the simulator), where the legacy executor is the faster.
    pub const SHARED_HOST: u32 = 9;
}

/// The first-wins fatal latch: one line, touched only through `GmAtomic`.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct FatalLine {
    /// 0 = free; the first agent to CAS it to 1 owns the remaining words.
    pub claimed: u64,
    /// The [`ErrorCode`](crate::codes::ErrorCode) value.
    pub code: u64,
    /// The [`Site`](crate::codes::Site) value.
    pub site: u64,
    /// Task id involved, or `u64::MAX`.
    pub task: u64,
    /// Worker index involved, or `u64::MAX`.
    pub core: u64,
    /// Site-specific detail (e.g. the raw register value).
    pub detail: u64,
    /// Set to 1 after the words above are stored.
    pub complete: u64,
    /// Reserved.
    pub reserved: u64,
}

/// Run counters, touched only through `GmAtomic`; read by the host after the run.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct RunLine {
    /// Tasks completed.
    pub completed: u64,
    /// Subtasks dispatched to cores.
    pub dispatched: u64,
    /// Cores that handshook.
    pub cores_ready: u64,
    /// Cores released through their teardown gate.
    pub cores_released: u64,
    /// AICPU threads that finished.
    pub threads_done: u64,
    /// Device-side runtime: ticks the orchestration function's whole call took (its waits
    /// for ring space and tensor data included).
    pub orch_ticks: u64,
    /// Resident executor: [`resident_ready_word`](super::resident_ready_word) of this run's epoch once the AICPU validated
    /// the image (stored device-direct by the booting thread); cores read it device-direct,
    /// never from their cached copy of the configuration, and accept only their own run's
    /// word, so a value a previous run left cannot start them.
    pub resident_ready: u64,
    /// Device-side runtime: ticks of [`orch_ticks`](Self::orch_ticks) the orchestration spent
    /// in flow control, waiting for room in a ring or in the tensor map (not its waits for
    /// the producers of tensor data it reads).
    pub orch_flow_ticks: u64,
}

/// The launch descriptor head: configuration, fatal latch, counters.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct LaunchDesc {
    /// Host-written configuration.
    pub config: LaunchConfig,
    /// Fatal latch.
    pub fatal: FatalLine,
    /// Counters.
    pub run: RunLine,
    /// Text of the latched fault (UTF-8, NUL-padded): written only by the latch winner.
    pub fault_text: FaultText,
}

/// Text of the latched fault: six lines ([`FAULT_TEXT_BYTES`]), enough for a kernel's
/// message and its location, written only by the agent that won the latch, with
/// device-direct stores (so no cache maintenance is involved in either tier).
#[derive(Copy, Clone, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct FaultText {
    /// UTF-8 bytes, NUL-padded.
    pub bytes: [u8; FAULT_TEXT_BYTES],
}

/// Bytes of [`FaultText`].
pub const FAULT_TEXT_BYTES: usize = 384;

impl Default for FaultText {
    fn default() -> Self {
        FaultText { bytes: [0; FAULT_TEXT_BYTES] }
    }
}

/// Where one pipeline slot's per-run structures sit in its device allocation (the arena):
/// the [`LaunchDesc`], then per worker a [`Handshake`] line, a [`TeardownGate`] line and two
/// [`DispatchPayload`] lines. The host lays the arena out with it and publishes the addresses
/// in [`LaunchConfig`]; the device finds each worker's lines with the same strides.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SlotArena {
    /// Workers the arena has lines for.
    pub workers: u32,
}

impl SlotArena {
    /// Bytes per worker of each array.
    pub const HANDSHAKE_STRIDE: u64 = size_of::<Handshake>() as u64;
    /// Bytes per worker of the gate array.
    pub const GATE_STRIDE: u64 = size_of::<TeardownGate>() as u64;
    /// Bytes per worker of the payload array (two buffers).
    pub const PAYLOAD_STRIDE: u64 = 2 * size_of::<DispatchPayload>() as u64;

    /// Offset of the handshake array from the arena's start.
    pub const fn handshakes(&self) -> u64 {
        size_of::<LaunchDesc>() as u64
    }
    /// Offset of the gate array.
    pub const fn gates(&self) -> u64 {
        self.handshakes() + self.workers as u64 * Self::HANDSHAKE_STRIDE
    }
    /// Offset of the payload array.
    pub const fn payloads(&self) -> u64 {
        self.gates() + self.workers as u64 * Self::GATE_STRIDE
    }
    /// Bytes of the whole arena.
    pub const fn bytes(&self) -> u64 {
        self.payloads() + self.workers as u64 * Self::PAYLOAD_STRIDE
    }
}

/// A worker's handshake report: one line, written only by that worker's AICore.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct Handshake {
    /// `block_idx + 1` once reported.
    pub aicore_done: u32,
    /// `CoreType` as u32.
    pub core_type: u32,
    /// The core's physical id (indexes the register windows).
    pub physical_core_id: u32,
    /// Reserved.
    pub reserved0: u32,
    /// The run epoch the report belongs to; the AICPU accepts only its own run's.
    pub report_epoch: u64,
    /// Reserved.
    pub reserved: [u64; 5],
}

/// A worker's post-close teardown gate: one line, atomics only.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct TeardownGate {
    /// Epoch of the run whose AICPU released this worker (after EXITED, close, read-back, rmb).
    pub release: u64,
    /// Reserved: nothing else may live on this line.
    pub reserved: [u64; 7],
}

/// [`LaunchConfig::runtime`]: the host-built graph.
pub const RUNTIME_HBG: u32 = 0;
/// [`LaunchConfig::runtime`]: device-side orchestration over the tensor map and rings.
pub const RUNTIME_TRB: u32 = 1;

/// One dispatch: what a core runs for one per-core dispatch id. Two per worker.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DispatchPayload {
    /// Kernel binary address.
    pub bin: u64,
    /// GM address of the task's [`ArgsHeader`](super::ArgsHeader) in the image.
    pub args: u64,
    /// Graph task id.
    pub task_id: u32,
    /// SPMD block index.
    pub block_idx: u32,
    /// SPMD block count.
    pub block_num: u32,
    /// AIV lane inside a MIX task (0 or 1); 0 otherwise.
    pub lane: u32,
    /// The dispatch id this payload belongs to.
    pub reg_task_id: u32,
    /// Reserved.
    pub reserved0: u32,
    /// Reserved.
    pub reserved: [u64; 3],
}

const _: () = {
    assert!(size_of::<LaunchConfig>() == 192);
    assert!(offset_of!(LaunchConfig, executor) == 128);
    assert!(offset_of!(LaunchConfig, resident) == 144);
    assert!(offset_of!(LaunchConfig, core_wait_ticks) == 96);
    assert!(offset_of!(LaunchConfig, trace) == 104);
    assert!(offset_of!(LaunchConfig, trace_core_records) == 112);
    assert!(offset_of!(LaunchConfig, trace_thread_records) == 116);
    assert!(offset_of!(LaunchConfig, dump) == 120);
    assert!(offset_of!(LaunchConfig, capture) == 152);
    assert!(size_of::<FatalLine>() == 64);
    assert!(size_of::<RunLine>() == 64);
    assert!(size_of::<LaunchDesc>() == 320 + FAULT_TEXT_BYTES);
    assert!(offset_of!(LaunchDesc, fault_text) == 320);
    assert!(offset_of!(LaunchDesc, fatal) == 192);
    assert!(offset_of!(LaunchDesc, run) == 256);
    assert!(size_of::<Handshake>() == 64);
    assert!(offset_of!(Handshake, aicore_done) == 0);
    assert!(offset_of!(Handshake, physical_core_id) == 8);
    assert!(offset_of!(Handshake, report_epoch) == 16);
    assert!(size_of::<TeardownGate>() == 64);
    assert!(size_of::<DispatchPayload>() == 64);
};
/// Byte offsets of words the device touches with `GmAtomic`, relative to the descriptor.
pub mod offsets {
    use super::*;
    /// [`FatalLine::claimed`].
    pub const FATAL_CLAIMED: u64 = offset_of!(LaunchDesc, fatal) as u64;
    /// [`FatalLine::code`].
    pub const FATAL_CODE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, code) as u64;
    /// [`FatalLine::site`].
    pub const FATAL_SITE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, site) as u64;
    /// [`FatalLine::task`].
    pub const FATAL_TASK: u64 = FATAL_CLAIMED + offset_of!(FatalLine, task) as u64;
    /// [`FatalLine::core`].
    pub const FATAL_CORE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, core) as u64;
    /// [`FatalLine::detail`].
    pub const FATAL_DETAIL: u64 = FATAL_CLAIMED + offset_of!(FatalLine, detail) as u64;
    /// [`FatalLine::complete`].
    pub const FATAL_COMPLETE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, complete) as u64;
    /// [`RunLine::completed`].
    pub const RUN_COMPLETED: u64 = offset_of!(LaunchDesc, run) as u64;
    /// [`RunLine::dispatched`].
    pub const RUN_DISPATCHED: u64 = RUN_COMPLETED + offset_of!(RunLine, dispatched) as u64;
    /// [`RunLine::cores_ready`].
    pub const RUN_CORES_READY: u64 = RUN_COMPLETED + offset_of!(RunLine, cores_ready) as u64;
    /// [`RunLine::cores_released`].
    pub const RUN_CORES_RELEASED: u64 = RUN_COMPLETED + offset_of!(RunLine, cores_released) as u64;
    /// [`RunLine::threads_done`].
    pub const RUN_THREADS_DONE: u64 = RUN_COMPLETED + offset_of!(RunLine, threads_done) as u64;
    /// [`RunLine::orch_ticks`].
    pub const RUN_ORCH_TICKS: u64 = RUN_COMPLETED + offset_of!(RunLine, orch_ticks) as u64;
    /// [`RunLine::orch_flow_ticks`].
    pub const RUN_ORCH_FLOW_TICKS: u64 = RUN_COMPLETED + offset_of!(RunLine, orch_flow_ticks) as u64;
    /// [`RunLine::resident_ready`].
    pub const RUN_RESIDENT_READY: u64 = RUN_COMPLETED + offset_of!(RunLine, resident_ready) as u64;

    /// [`LaunchDesc::fault_text`].
    pub const FAULT_TEXT: u64 = offset_of!(LaunchDesc, fault_text) as u64;
}

#[cfg(test)]
mod tests {
    use super::regs::*;

    #[test]
    fn dispatch_ids_alternate_parity_and_skip_reserved() {
        let mut id = 0;
        for _ in 0..10 {
            let n = next_id(id);
            assert_ne!(n, 0);
            assert_ne!(n & 1, id & 1);
            id = n;
        }
        let near = RESERVED_MIN - 1;
        let n = next_id(near);
        assert!(n < RESERVED_MIN && n != 0);
        assert_ne!(n & 1, near & 1, "wrap keeps parity alternating");
        assert_eq!(fin(5) & COND_FIN, COND_FIN);
        assert_eq!(ack(5), 5);
    }
}
