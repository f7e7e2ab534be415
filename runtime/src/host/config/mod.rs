//! Run configuration: the device's budgets, per-run options and the device-side runtime's
//! ring sizes, each checked before anything reaches the device, in one place (`check`): a run
//! is launched from the checked form only, and what is refused is a [`ConfigError`] naming the
//! field, the value and the limit.

use std::path::PathBuf;

use super::Error;
use crate::dump::DumpLevel;
use crate::layout::RINGS;
use crate::orch::RuntimeKind;

mod check;
mod error;

pub(crate) use check::{CheckedConfig, CheckedRings, check_device_bound};
pub use error::ConfigError;

/// Budgets of a device, in microseconds. The chain is: scheduler watchdog < exit budget +
/// watchdog < core wait budget < host stream budget.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// AICPU no-progress watchdog (also bounds the handshake).
    pub watchdog_us: u64,
    /// Budget for a core group's EXIT acknowledgement.
    pub exit_us: u64,
    /// Host budget for a run's completion fence.
    pub stream_us: u64,
    /// How long a run waits for its turn on a device another thread is using (see
    /// [`Device::prepare`](super::Device::prepare)).
    pub turn_us: u64,
    /// How long a prepared, unlaunched run keeps its pipeline slot, counted from when
    /// `prepare` returned it, while another run waits for one (then the waiting run reclaims
    /// it; see [`Error::Expired`]).
    pub lease_us: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            watchdog_us: 10_000_000,
            exit_us: 1_000_000,
            stream_us: 50_000_000,
            turn_us: 60_000_000,
            lease_us: 5_000_000,
        }
    }
}

impl Timeouts {
    /// Budgets with the given watchdog, exit and stream budgets (and the default turn wait).
    pub fn new(watchdog_us: u64, exit_us: u64, stream_us: u64) -> Timeouts {
        Timeouts { watchdog_us, exit_us, stream_us, ..Timeouts::default() }
    }

    /// The same budgets with a turn wait of `turn_us` and a prepared-run lease of `lease_us`.
    pub fn with_turns(mut self, turn_us: u64, lease_us: u64) -> Timeouts {
        self.turn_us = turn_us;
        self.lease_us = lease_us;
        self
    }

    /// Check the chain (every budget non-zero, `2 × watchdog + exit < stream`, no sum
    /// overflows): [`ConfigError::BudgetChain`], or [`ConfigError::Zero`] naming the turn wait
    /// or the lease.
    pub fn validate(&self) -> Result<(), Error> {
        check::core_wait_us(self.watchdog_us, self.exit_us, self.stream_us)?;
        for (field, us) in [("timeouts.turn_us", self.turn_us), ("timeouts.lease_us", self.lease_us)] {
            if us == 0 {
                return Err(ConfigError::Zero { field }.into());
            }
        }
        Ok(())
    }
}

/// Which AICore program serves a run ([`RunConfig::aicore`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AicoreProgram {
    /// The runtime's own, in Rust ([`crate::programs::LEGACY_AICORE`]): both executors.
    #[default]
    Rust,
    /// The legacy executor's AICore program in C ([`crate::programs::NATIVE_AICORE`], the
    /// `pto-aicore-c` crate): the program a chip would run. An in-process device has it once
    /// `pto_aicore_c::install` installed it (the `pto` facade's `open` does); the legacy
    /// executor only.
    Native,
}

impl AicoreProgram {
    /// The name the command lines use: `rust` or `native`.
    pub fn name(self) -> &'static str {
        match self {
            AicoreProgram::Rust => "rust",
            AicoreProgram::Native => "native",
        }
    }
}

/// Per-run options.
///
/// ```
/// use pto_runtime::host::RunConfig;
/// use pto_runtime::orch::RuntimeKind;
/// let cfg = RunConfig::default().with_runtime(RuntimeKind::TensormapRing).with_clusters(2);
/// assert_eq!(cfg.clusters, Some(2));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunConfig {
    /// Clusters to launch (default: all of the board's).
    pub clusters: Option<u32>,
    /// AICPU threads to launch (default: all of the board's).
    pub aicpu_threads: Option<u32>,
    /// The run may use AIV cores only (the AIC cores are kept for other work): a graph with AIC
    /// or MIX tasks is refused before anything is uploaded. The AIC cores of the launched
    /// clusters still handshake and retire; they receive no task.
    pub aiv_only: bool,
    /// Override the scheduler watchdog for this run.
    pub watchdog_us: Option<u64>,
    /// Which runtime runs an orchestration program ([`Device::run_program`](super::Device::run_program));
    /// a graph built with [`Device::build`](super::Device::build) always runs on the
    /// host-built-graph runtime.
    pub runtime: RuntimeKind,
    /// Which executor runs a host-built graph (default [`Executor::Auto`](super::Executor::Auto):
    /// the faster that can run the graph — legacy on the simulator, resident on a chip). The device-side runtime always runs on
    /// the legacy executor; asking it for [`Executor::Resident`](super::Executor::Resident) is
    /// an error.
    pub executor: super::Executor,
    /// Which AICore program serves the run (default [`AicoreProgram::Rust`]). The C one
    /// ([`AicoreProgram::Native`]) runs the legacy executor only: with it,
    /// [`Executor::Auto`](super::Executor::Auto) means legacy and
    /// [`Executor::Resident`](super::Executor::Resident) is an error.
    pub aicore: AicoreProgram,
    /// Ring sizes and budgets of the device-side runtime.
    pub rings: RingConfig,
    /// Record a swimlane trace of the run ([`RunReport::trace`](super::RunReport::trace)).
    /// Off by default: then no ring storage exists and the device only tests a flag.
    pub trace: bool,
    /// Records per AICore ring and per AICPU-thread ring when tracing (default
    /// [`DEFAULT_CORE_RECORDS`](super::trace::DEFAULT_CORE_RECORDS),
    /// [`DEFAULT_THREAD_RECORDS`](super::trace::DEFAULT_THREAD_RECORDS)); records beyond are
    /// counted as dropped.
    pub trace_records: Option<(u32, u32)>,
    /// Record the run's arguments (the args dump) at this level; `None` (the default) is
    /// off: then no lane storage exists and the device only tests a flag. See
    /// `docs/args-dump.md`.
    pub dump: Option<DumpLevel>,
    /// Where the args dump writes `args_dump.json` and `args.bin` (default: a fresh
    /// directory `pto-dump/run-<process>-<device>-<epoch>` under the system's temporary
    /// directory). One run writes a directory at a time: a run given a directory another
    /// run is still dumping into is refused with [`Error::DumpFiles`].
    pub dump_dir: Option<PathBuf>,
    /// Payload arena bytes per AICPU thread (default
    /// [`DEFAULT_ARENA`](super::dump::DEFAULT_ARENA); a multiple of 64 in
    /// [`MIN_ARENA`](super::dump::MIN_ARENA)`..=`[`MAX_ARENA`](super::dump::MAX_ARENA)).
    /// An argument larger than half the arena is truncated to that, and its record says so.
    pub dump_arena: Option<u64>,
    /// The schedule-independent checks to run from this run on (racecheck and initcheck:
    /// `docs/sanitizers.md`); `None` (the default) keeps the device's setting (on the
    /// simulator: `PTO_SIM_CHECK`, else off). A platform that cannot check refuses a run that
    /// asks for a check.
    pub check: Option<pto_hal::check::Checks>,
}

impl RunConfig {
    /// The same configuration with the args dump at `level` (or off).
    pub fn with_dump(mut self, level: Option<DumpLevel>) -> Self {
        self.dump = level;
        self
    }
    /// The same configuration, writing the args dump into `dir`.
    pub fn with_dump_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dump_dir = Some(dir.into());
        self
    }
    /// The same configuration with a payload arena of `bytes` per AICPU thread.
    pub fn with_dump_arena(mut self, bytes: u64) -> Self {
        self.dump_arena = Some(bytes);
        self
    }
    /// The same configuration on `executor`.
    pub fn with_executor(mut self, executor: super::Executor) -> Self {
        self.executor = executor;
        self
    }
    /// The same configuration served by the AICore program `aicore`.
    pub fn with_aicore(mut self, aicore: AicoreProgram) -> Self {
        self.aicore = aicore;
        self
    }
    /// The same configuration on `runtime`.
    pub fn with_runtime(mut self, runtime: RuntimeKind) -> Self {
        self.runtime = runtime;
        self
    }
    /// The same configuration on `clusters` clusters.
    pub fn with_clusters(mut self, clusters: u32) -> Self {
        self.clusters = Some(clusters);
        self
    }
    /// The same configuration with `threads` AICPU threads.
    pub fn with_aicpu_threads(mut self, threads: u32) -> Self {
        self.aicpu_threads = Some(threads);
        self
    }
    /// The same configuration, AIV cores only.
    pub fn with_aiv_only(mut self, aiv_only: bool) -> Self {
        self.aiv_only = aiv_only;
        self
    }
    /// The same configuration with a watchdog of `us` microseconds.
    pub fn with_watchdog_us(mut self, us: u64) -> Self {
        self.watchdog_us = Some(us);
        self
    }
    /// The same configuration with tracing on or off.
    pub fn with_trace(mut self, trace: bool) -> Self {
        self.trace = trace;
        self
    }
    /// The same configuration with trace rings of `per_core` records per AICore and
    /// `per_thread` records per AICPU thread (each at least 1).
    pub fn with_trace_records(mut self, per_core: u32, per_thread: u32) -> Self {
        self.trace_records = Some((per_core, per_thread));
        self
    }
    /// The same configuration with the checks `checks` (see [`RunConfig::check`]).
    pub fn with_check(mut self, checks: pto_hal::check::Checks) -> Self {
        self.check = Some(checks);
        self
    }
    /// The same configuration with ring sizes `rings`.
    pub fn with_rings(mut self, rings: RingConfig) -> Self {
        self.rings = rings;
        self
    }
}

/// Most heap bytes of one ring (1 TiB: more than any device has).
pub const MAX_RING_HEAP: u64 = 1 << 40;

/// Sizes of the device-side runtime's rings, per scope depth (ring `min(depth, 3)`; the
/// orchestration's own outer scope is depth 0), and its orchestrator budgets.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RingConfig {
    /// Task-window slots per ring (powers of two). A scope may hold fewer tasks than this.
    pub window: [u32; RINGS],
    /// Heap bytes per ring (multiples of 64, at most [`MAX_RING_HEAP`]): argument records
    /// and scope-allocated tensors.
    pub heap: [u64; RINGS],
    /// Dependency-list entries per ring (one per producer → consumer edge of a live task).
    pub dep_pool: [u32; RINGS],
    /// Most live tensor-map entries.
    pub tensormap_entries: u32,
    /// Budget of one orchestrator wait (tensor data, ring reclaim) in microseconds; default:
    /// the scheduler watchdog.
    pub wait_us: Option<u64>,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            window: [4096, 512, 512, 512],
            heap: [4 << 20, 1 << 20, 1 << 20, 1 << 20],
            dep_pool: [8192, 2048, 2048, 2048],
            tensormap_entries: 65536,
            wait_us: None,
        }
    }
}

impl RingConfig {
    /// The same sizes for every ring.
    pub fn uniform(window: u32, heap: u64, dep_pool: u32) -> RingConfig {
        RingConfig { window: [window; RINGS], heap: [heap; RINGS], dep_pool: [dep_pool; RINGS], ..Self::default() }
    }

    /// The same sizes with at most `entries` live tensor-map entries.
    pub fn with_tensormap_entries(mut self, entries: u32) -> Self {
        self.tensormap_entries = entries;
        self
    }

    /// The same sizes with an orchestrator wait budget of `us` microseconds.
    pub fn with_wait_us(mut self, us: u64) -> Self {
        self.wait_us = Some(us);
        self
    }

    /// Check every size ([`ConfigError::RingWindow`], [`ConfigError::RingHeap`],
    /// [`ConfigError::RingDepPool`], [`ConfigError::Zero`]); returns the total heap bytes of
    /// all rings.
    pub fn validate(&self) -> Result<u64, Error> {
        Ok(check::check_rings(self)?)
    }
}
