//! What a command runs on: the simulated board (opened by name, with its cache model and the
//! workloads' kernels registered), the runtime(s) and the AICore executor; the parsers of the
//! simulator's options (`--cache`, `--check`, `--schedule`, `--engine`) and the seeded
//! schedule's report as a failed run prints it.

use clap::ValueEnum;
use pto::board::Board;
use pto::hal::check::Checks;
use pto::hal::{HostPlatform, Platform};
use pto::runtime::orch::RuntimeKind;
use pto_sim::{AicpuWritePolicy, CacheModel, ScheduleReport};
use pto_testkit::{Device, Kernels};

use crate::Fail;

/// Where `pto run` and `pto bench` run: the board, the runtime(s) and the executor.
#[derive(clap::Args, Debug)]
pub(crate) struct Target {
    /// The simulated board.
    #[arg(long, value_enum, default_value = "sim-a2a3")]
    pub(crate) board: BoardName,
    /// The runtime(s).
    #[arg(long, value_enum, default_value = "both")]
    pub(crate) runtime: Runtimes,
    /// The AICore executor of the host-built graph's runs (the device-side runtime runs on
    /// the legacy one).
    #[arg(long, value_enum, default_value = "auto")]
    pub(crate) executor: Executor,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum BoardName {
    /// Simulated a2a3: 24 clusters, 4 AICPU threads, 50 MHz, host-non-coherent.
    #[value(name = "sim-a2a3")]
    SimA2a3,
    /// Simulated a5: 36 clusters, 5 AICPU threads, 1 GHz, host-coherent.
    #[value(name = "sim-a5")]
    SimA5,
    /// Small simulated board: 2 clusters, 2 AICPU threads, faithful cache model.
    #[value(name = "sim-mini")]
    SimMini,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Runtimes {
    Hbg,
    Trb,
    Both,
}

impl Runtimes {
    pub(crate) fn list(self) -> Vec<RuntimeKind> {
        match self {
            Runtimes::Hbg => vec![RuntimeKind::HostBuiltGraph],
            Runtimes::Trb => vec![RuntimeKind::TensormapRing],
            Runtimes::Both => pto_testkit::RUNTIMES.to_vec(),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Executor {
    /// The faster executor that can run the graph: legacy on the simulator, resident on a chip.
    Auto,
    /// The AICPU dispatches, the core executes.
    Legacy,
    /// The cores schedule themselves (host-built graph; a graph it cannot run is an error).
    Resident,
}

impl Target {
    /// Refuse, before anything runs, what the runtime would not run as asked: the resident
    /// executor on the device-side runtime (`--runtime trb` or `both` with `--executor
    /// resident`), which the runtime refuses with `ConfigError::ResidentRefused` (and Python
    /// with `ConfigError`) rather than run it on the legacy executor. Exit status 2.
    pub(crate) fn check(&self) -> Result<(), Fail> {
        if self.executor == Executor::Resident && self.runtime != Runtimes::Hbg {
            let why = pto::runtime::host::ConfigError::ResidentRefused {
                reason: pto::runtime::host::LegacyReason::DeviceSideRuntime,
            };
            let rt = if self.runtime == Runtimes::Both { "both" } else { "trb" };
            return Err(Fail(
                format!(
                    "--runtime {rt} with --executor resident: {why}; use --runtime hbg, or --executor legacy or auto"
                ),
                2,
            ));
        }
        Ok(())
    }
}

impl Executor {
    pub(crate) fn pto(self) -> pto::Executor {
        match self {
            Executor::Auto => pto::Executor::Auto,
            Executor::Legacy => pto::Executor::Legacy,
            Executor::Resident => pto::Executor::Resident,
        }
    }

    /// Its spelling on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Executor::Auto => "auto",
            Executor::Legacy => "legacy",
            Executor::Resident => "resident",
        }
    }
}

/// What `pto` needs of a simulated device beyond the runtime: its cache model switch, and
/// the model in effect (as a run line and `--json` name it).
pub(crate) trait SimControl {
    fn set_cache(&self, m: CacheModel) -> Result<(), String>;
    fn set_writes(&self, p: AicpuWritePolicy) -> Result<(), String>;
    fn cache(&self) -> CacheModel;
    fn set_checks(&self, c: Checks) -> Result<(), String>;
    fn checks(&self) -> Checks;
    fn schedule(&self) -> pto_sim::Schedule;
    fn schedule_report(&self) -> Option<pto_sim::ScheduleReport>;
    fn engine(&self) -> String;
}

impl<C: pto::hal::Contract> SimControl for pto_sim::SimDevice<C> {
    fn set_cache(&self, m: CacheModel) -> Result<(), String> {
        self.set_cache_model(m).map_err(|e| e.to_string())
    }
    fn set_writes(&self, p: AicpuWritePolicy) -> Result<(), String> {
        self.set_aicpu_writes(p).map(|_| ()).map_err(|e| e.to_string())
    }
    fn cache(&self) -> CacheModel {
        self.cache_model()
    }
    fn set_checks(&self, c: Checks) -> Result<(), String> {
        pto_sim::SimDevice::set_checks(self, c).map_err(|e| e.to_string())
    }
    fn checks(&self) -> Checks {
        pto_sim::SimDevice::checks(self)
    }
    fn schedule(&self) -> pto_sim::Schedule {
        pto_sim::SimDevice::schedule(self)
    }
    fn schedule_report(&self) -> Option<pto_sim::ScheduleReport> {
        pto_sim::SimDevice::schedule_report(self)
    }
    fn engine(&self) -> String {
        pto_sim::SimDevice::engine(self)
    }
}

/// Parse `--schedule`: `os`, or a seed as `PTO_SIM_SCHEDULE` spells it with or without its
/// `seed:` (`7`, `7:pct`, `seed:7:pct:4`).
pub(crate) fn parse_schedule(s: &str) -> Result<pto_sim::Schedule, String> {
    let spelt = if s == "os" || s.starts_with("seed:") { s.to_string() } else { format!("seed:{s}") };
    pto_sim::Schedule::parse(&spelt).ok_or_else(|| format!("{s:?}: expected os, N, N:random, N:pct or N:pct:DEPTH"))
}

/// The schedule report as the failure output prints it.
pub(crate) fn describe_schedule(r: &ScheduleReport) -> String {
    let mut s = format!("schedule: {} switch points; the last {}:", r.steps, r.trail.len());
    for p in &r.trail {
        s.push_str(&format!("\n  {p}"));
    }
    if let Some(b) = &r.broken {
        s.push_str(&format!("\n  (not reproducible by its seed: {b})"));
    }
    s
}

/// Parse `--engine` (as `PTO_SIM_ENGINE`).
pub(crate) fn parse_engine(s: &str) -> Result<pto_sim::SimEngine, String> {
    pto_sim::SimEngine::parse(s).ok_or_else(|| format!("{s:?}: expected {}", pto_sim::SimEngine::SYNTAX))
}

/// Parse `--check` (as `PTO_SIM_CHECK`: `race`, `init`, `race,init` or `off`).
pub(crate) fn parse_checks(s: &str) -> Result<Checks, String> {
    Checks::parse(s).ok_or_else(|| format!("{s:?}: expected {}", Checks::SYNTAX))
}

/// A cache model as `--cache` and `PTO_SIM_CACHE` spell it (`coherent`, `faithful:SEED`).
pub(crate) fn cache_name(m: CacheModel) -> String {
    match m {
        CacheModel::Coherent => "coherent".into(),
        CacheModel::Faithful { seed, .. } => format!("faithful:{seed}"),
    }
}

/// What `--cache` names: the cache model and, when given (`faithful:42:back`), the AICPU
/// write policy.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct CacheSpec {
    pub(crate) model: CacheModel,
    pub(crate) writes: Option<AicpuWritePolicy>,
}

impl CacheSpec {
    /// Its spelling, as `--cache` takes it back (the replay line of `pto explore`).
    pub(crate) fn name(self) -> String {
        match self.writes {
            Some(w) => format!("{}:{}", cache_name(self.model), w.name()),
            None => cache_name(self.model),
        }
    }
}

/// Parse `--cache` with the simulator's own parser of `PTO_SIM_CACHE`
/// ([`CacheModel::parse_spec`]), so the flag takes every spelling the variable (and Python's
/// `cache=`) takes: `coherent`, `faithful`, `faithful:SEED`, each optionally followed by
/// `:through` or `:back`.
pub(crate) fn parse_cache(s: &str) -> Result<CacheSpec, String> {
    CacheModel::parse_spec(s)
        .map(|(model, writes)| CacheSpec { model, writes })
        .ok_or_else(|| format!("{s:?}: expected {}", CacheModel::SYNTAX))
}

/// Open board `B` (every sim board's device half runs in this process), set its cache model
/// and checks, register the workloads' kernels.
pub(crate) fn open<B: Board>(
    cache: Option<CacheSpec>,
    checks: Option<Checks>,
) -> Result<(Device<B::Platform>, Kernels), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    open_with::<B>(cache, checks, pto_testkit::KernelChoice::Rust, None, None)
}

/// [`open`] with the kernels of `kernels` (the Rust ones, or the native ones where they exist).
pub(crate) fn open_with<B: Board>(
    cache: Option<CacheSpec>,
    checks: Option<Checks>,
    kernels: pto_testkit::KernelChoice,
    engine: Option<pto_sim::SimEngine>,
    schedule: Option<pto_sim::Schedule>,
) -> Result<(Device<B::Platform>, Kernels), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    let dev = pto_sim::with_engine(engine, schedule, pto::open_board::<B>)
        .map_err(|e| Fail(format!("cannot open board {}: {e}", B::NAME), 1))?;
    if let Some(c) = cache {
        dev.platform().set_cache(c.model).map_err(|e| Fail(format!("cannot set the cache model: {e}"), 1))?;
        if let Some(w) = c.writes {
            dev.platform().set_writes(w).map_err(|e| Fail(format!("cannot set the AICPU write policy: {e}"), 1))?;
        }
    }
    if let Some(c) = checks {
        dev.platform().set_checks(c).map_err(|e| Fail(format!("cannot set the checks: {e}"), 1))?;
    }
    let k = Kernels::register_with(&dev, kernels)?;
    Ok((dev, k))
}
