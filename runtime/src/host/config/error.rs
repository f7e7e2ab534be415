//! What can be wrong with a run's configuration: [`ConfigError`], one variant per thing, each
//! naming the field, the value given and the limit it broke.

use std::string::String;
use std::vec::Vec;

use pto_hal::check::Checks;

use super::AicoreProgram;
use crate::graph::FuncId;
use crate::host::{Executor, LegacyReason, PlatformError};
use crate::layout::ImageError;

/// A configuration the device cannot take, found before anything reaches the device. It is
/// [`Error::Config`](crate::host::Error::Config)'s payload: match on the variant for what was
/// wrong; its text names the field, the value and the limit.
///
/// ```
/// use pto_runtime::host::{ConfigError, Error, RingConfig};
///
/// let rings = RingConfig::uniform(3, 1024, 8);
/// match rings.validate() {
///     Err(Error::Config(ConfigError::RingWindow { ring: 0, window: 3, .. })) => {}
///     other => panic!("a window of 3 slots is not a power of two, got {other:?}"),
/// }
/// let e = ConfigError::RingWindow { ring: 0, window: 3, max: 1 << 20 };
/// assert_eq!(
///     e.to_string(),
///     "rings.window[0] = 3: a ring's task window must be a power of two in 2..=2^20 \
///      (its slots must fit the ring's AICPU budget of 256 MiB)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A watchdog or exit budget that breaks the budget chain of [`Timeouts`](super::Timeouts):
    /// both must be non-zero and `2 × watchdog + exit` must stay below the host's stream
    /// budget (a core gives up before the host does), without overflowing.
    #[error(
        "watchdog_us = {watchdog_us} breaks the budget chain: the watchdog and the exit budget ({exit_us} us) must be non-zero and 2 x watchdog + exit must stay below the host stream budget ({stream_us} us)"
    )]
    BudgetChain {
        /// The scheduler watchdog (the device's, or the run's override).
        watchdog_us: u64,
        /// The exit budget.
        exit_us: u64,
        /// The host's stream budget.
        stream_us: u64,
    },
    /// A value that must be non-zero was zero.
    #[error("{field} = 0: must be non-zero")]
    Zero {
        /// The field, as a path from the configuration (`timeouts.turn_us`,
        /// `rings.tensormap_entries`).
        field: &'static str,
    },
    /// A count outside the range the board has (clusters, AICPU threads).
    #[error("{field} must be {min}..={max}, got {value}")]
    OutOfRange {
        /// The field (`clusters`, `aicpu_threads`).
        field: &'static str,
        /// The value asked for.
        value: u64,
        /// The least value taken.
        min: u64,
        /// The most (the board's).
        max: u64,
    },
    /// A ring's task window that is not a power of two in `2..=max`: `max` is the most slots
    /// a task handle names whose AICPU memory fits a ring's budget
    /// (the device-side runtime's per-ring AICPU budget, 256 MiB).
    #[error(
        "rings.window[{ring}] = {window}: a ring's task window must be a power of two in 2..=2^{} \
         (its slots must fit the ring's AICPU budget of {} MiB)",
        .max.trailing_zeros(), crate::trb::ring::AICPU_RING_BUDGET >> 20
    )]
    RingWindow {
        /// The ring (`0..RINGS`).
        ring: usize,
        /// The window given.
        window: u32,
        /// The largest window (a power of two: the slots a task handle can name and the
        /// ring's AICPU budget holds).
        max: u32,
    },
    /// A ring's heap that is not a non-zero multiple of 64 bytes of at most `max`.
    #[error("rings.heap[{ring}] = {heap}: a ring's heap must be a non-zero multiple of 64 bytes, at most 2^{}", .max.trailing_zeros())]
    RingHeap {
        /// The ring.
        ring: usize,
        /// The heap bytes given.
        heap: u64,
        /// The most heap bytes of one ring ([`MAX_RING_HEAP`](super::MAX_RING_HEAP)).
        max: u64,
    },
    /// A ring's dependency pool outside `1..limit`: `limit` is what a task handle names, or
    /// what the ring's AICPU budget
    /// (the device-side runtime's per-ring AICPU budget, 256 MiB) has left after the
    /// ring's window.
    #[error(
        "rings.dep_pool[{ring}] = {dep_pool} must be in 1..{limit} \
         (beside its window, the pool must fit the ring's AICPU budget of {} MiB)",
        crate::trb::ring::AICPU_RING_BUDGET >> 20
    )]
    RingDepPool {
        /// The ring.
        ring: usize,
        /// The entries given.
        dep_pool: u32,
        /// The first count refused.
        limit: u32,
    },
    /// An orchestrator wait budget outside `1..=2 × watchdog`.
    #[error("rings.wait_us = {wait_us} must be in 1..=2 x watchdog ({max_us} us): idle cores give up after that")]
    WaitBudget {
        /// The budget given (or the watchdog it defaults to).
        wait_us: u64,
        /// Twice the run's watchdog.
        max_us: u64,
    },
    /// The device-side runtime launched with too few AICPU threads.
    #[error(
        "the device-side runtime needs at least {min} AICPU threads (one orchestrates, the others schedule), got {threads}"
    )]
    TooFewThreads {
        /// The threads of the run.
        threads: u32,
        /// The fewest it takes.
        min: u32,
    },
    /// A device of more clusters than the platform's AICPU programs hold
    /// ([`pto_hal::AicpuAgent::MAX_CLUSTERS`]).
    #[error(
        "the device has {clusters} clusters, but this platform's AICPU programs hold at most {bound} (AicpuAgent::MaxClusters)"
    )]
    DeviceOverBound {
        /// The device's clusters.
        clusters: u32,
        /// The most the AICPU programs hold.
        bound: u32,
    },
    /// Trace rings of a size outside `1..=max` records.
    #[error("trace_records = ({core_records}, {thread_records}): each must be in 1..=2^{}", .max.trailing_zeros())]
    TraceRecords {
        /// Records per AICore ring.
        core_records: u32,
        /// Records per AICPU-thread ring.
        thread_records: u32,
        /// The most records of one ring (a power of two).
        max: u32,
    },
    /// An args-dump payload arena that is not a multiple of 64 in `min..=max`.
    #[error("dump_arena = {arena}: must be a multiple of 64 in {min}..={max}")]
    DumpArena {
        /// The bytes given.
        arena: u64,
        /// [`MIN_ARENA`](crate::host::dump::MIN_ARENA).
        min: u64,
        /// [`MAX_ARENA`](crate::host::dump::MAX_ARENA).
        max: u64,
    },
    /// An args-dump region (one lane per AICPU thread) whose size overflows.
    #[error("dump_arena = {arena}: the dump region of {lanes} lanes overflows")]
    DumpRegion {
        /// The arena bytes per lane.
        arena: u64,
        /// The lanes (AICPU threads).
        lanes: u32,
    },
    /// A budget too long for the device's tick counter.
    #[error("{field} = {us} us does not fit the device's tick counter (at {freq_hz} Hz)")]
    Ticks {
        /// The budget (`watchdog_us`, `exit_us`, `rings.wait_us`, `the core wait budget`).
        field: &'static str,
        /// Its microseconds.
        us: u64,
        /// The device's tick frequency.
        freq_hz: u64,
    },
    /// An executor the chosen AICore program does not run (the C one runs the legacy executor
    /// only).
    #[error(
        "executor = {executor} is not supported by the {} AICore program, which runs the legacy executor only: use aicore = rust, or executor = legacy or auto", aicore_text(*.aicore)
    )]
    ExecutorUnsupported {
        /// The executor asked for.
        executor: Executor,
        /// The AICore program asked for.
        aicore: AicoreProgram,
    },
    /// [`Executor::Resident`] asked for a run it cannot run: the reason the run would
    /// otherwise be on the legacy executor (the device-side runtime, a graph shape, the args
    /// dump of a multi-block task).
    #[error("executor = resident cannot run this graph: {reason}")]
    ResidentRefused {
        /// Why not.
        reason: LegacyReason,
    },
    /// Checks ([`RunConfig::check`](super::RunConfig::check)) the platform cannot run, or
    /// cannot switch to while another run is in flight.
    #[error("checks {}: this platform cannot run them, or another run is in flight on the device", .checks.name())]
    ChecksUnavailable {
        /// The checks asked for.
        checks: Checks,
    },
    /// `aicore = native` on a device without the C AICore program.
    #[error(
        "aicore = native: this device has no AICore program {program} ({}); an in-process device gets it from pto_aicore_c::install", .error.error()
    )]
    NativeAicoreMissing {
        /// The program's name ([`NATIVE_AICORE`](crate::programs::NATIVE_AICORE)).
        program: &'static str,
        /// The platform's error loading it.
        error: PlatformError,
    },
    /// The host emitted a graph image its own device-side reader refuses: a defect of the
    /// host's emitter, reported rather than uploaded.
    #[error("the host emitted a graph image the device would refuse: {error}")]
    ImageRefused {
        /// The first check the image failed.
        error: ImageError,
    },
    /// A tensor with more elements than host memory can address.
    #[error("a {elements}-element tensor does not fit host memory")]
    HostMemory {
        /// The tensor's elements.
        elements: u64,
    },
    /// Kernels registered under func ids other than the ones orchestration programs were
    /// written against.
    #[error("kernels registered as {registered:?}, the orchestrations expect {expected:?}")]
    FuncIds {
        /// The ids the kernels got.
        registered: Vec<FuncId>,
        /// The ids the orchestrations name.
        expected: Vec<FuncId>,
    },
    /// A name the board or its catalog does not know (a workload, for example).
    #[error("no {what} {name:?}")]
    Unknown {
        /// What was named (`workload`).
        what: &'static str,
        /// The name given.
        name: String,
    },
}

/// How a message names an AICore program.
fn aicore_text(aicore: AicoreProgram) -> &'static str {
    match aicore {
        AicoreProgram::Rust => "Rust",
        AicoreProgram::Native => "native (C)",
    }
}
