//! The settings of a simulated device, and the environment variables that override them at
//! open: the cache model (`PTO_SIM_CACHE`), the AICPU write policy (`PTO_SIM_AICPU_WRITES`),
//! memory protection (`PTO_SIM_PROTECT`) and the checks (`PTO_SIM_CHECK`). Each variable is read
//! strictly: a value outside its syntax is an error naming it.

use crate::engine::{Schedule, SimEngine};
use crate::error::SimError;

/// Settings of a simulated device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Device counter frequency in Hz (a2a3: 50 MHz, a5: 1 GHz).
    pub freq_hz: u64,
    /// Size of the GM arena in bytes (reserved lazily: untouched pages cost nothing).
    pub gm_bytes: u64,
    /// How long an idle AICPU thread spins before it parks, in microseconds.
    pub aicpu_spin_us: u64,
    /// How long an idle AICore spins before it parks, in microseconds.
    pub aicore_spin_us: u64,
    /// Most agents spinning at once (further capped by the host's CPU count).
    pub max_spinners: u32,
    /// The cache model (the environment variable `PTO_SIM_CACHE` overrides it at open).
    pub cache: CacheModel,
    /// What an AICPU store does under the faithful model ([`AicpuWritePolicy`]); `None` derives
    /// it from the contract: write-back under `HostNonCoherent` (a2a3), write-through under
    /// `HostCoherent` (a5, where write-back acts as write-through anyway). The environment
    /// overrides it at open: `PTO_SIM_AICPU_WRITES=through|back`, or a `:through` / `:back`
    /// part of `PTO_SIM_CACHE` (`faithful:42:back`);
    /// [`SimDevice::set_aicpu_writes`](crate::SimDevice::set_aicpu_writes) switches it between
    /// runs.
    pub aicpu_writes: Option<AicpuWritePolicy>,
    /// Memory protection: every kernel access to GM is checked against its task's tensor
    /// arguments — a read must lie on the elements of one argument, a write on the elements of
    /// one argument the task may write through — and an access outside them is refused (nothing
    /// lands) and fails the run as the kernel's fault, naming the access and the nearest
    /// argument. On by default; the environment variable `PTO_SIM_PROTECT=off|on` overrides it at
    /// open, and [`SimDevice::set_protection`](crate::SimDevice::set_protection) switches it
    /// between runs.
    pub protect: bool,
    /// The schedule-independent checks (`crate::check`): racecheck and initcheck of each
    /// run's task graph, off by default. The environment variable `PTO_SIM_CHECK=race,init`
    /// (or `race`, `init`, `off`) overrides it at open, and
    /// [`SimDevice::set_checks`](crate::SimDevice::set_checks) switches them between runs. A
    /// check runs kernels behind the memory-protection guard, which sees their accesses.
    pub check: pto_hal::check::Checks,
    /// The engine that runs the agents ([`SimEngine`]); `PTO_SIM_ENGINE=threads|coroutines[:N]`
    /// overrides it at open.
    pub engine: SimEngine,
    /// Who orders the agents ([`Schedule`]): the host (`os`) or a seed
    /// (`PTO_SIM_SCHEDULE=seed:N[:random|:pct[:DEPTH]]`, which overrides it at open). A
    /// seeded schedule runs on the coroutine engine with one host thread and a virtual clock.
    pub schedule: Schedule,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            freq_hz: 50_000_000,
            gm_bytes: 1 << 30,
            aicpu_spin_us: 50,
            aicore_spin_us: 20,
            max_spinners: 64,
            cache: CacheModel::Coherent,
            aicpu_writes: None,
            protect: true,
            check: pto_hal::check::Checks::OFF,
            engine: SimEngine::Coroutines { threads: 1 },
            schedule: Schedule::Os,
        }
    }
}

/// Which cache model a simulated device runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CacheModel {
    /// Accesses go straight to memory; maintenance is free. What a5 promises; fastest.
    Coherent,
    /// Per-agent write-back caches with seeded random eviction and violation reports.
    Faithful {
        /// Seed of the eviction points (printed by every report).
        seed: u64,
        /// Probability of an eviction at each cached access, per mille.
        evict_per_mille: u32,
    },
}

impl CacheModel {
    /// What `PTO_SIM_CACHE` accepts.
    pub const SYNTAX: &'static str = "coherent, faithful, faithful:SEED, each optionally followed by :through or :back";

    /// The model named by `PTO_SIM_CACHE` (`coherent`, `faithful` or `faithful:SEED`, each
    /// optionally followed by `:through` or `:back`, the AICPU write policy): `Ok(None)` when
    /// unset, an error naming the value when it is not that syntax (`faithfull`,
    /// `faithful:abc`).
    pub fn from_env() -> Result<Option<CacheModel>, SimError> {
        match env("PTO_SIM_CACHE")? {
            None => Ok(None),
            Some(v) => Self::spec(&v).map(|(m, _)| Some(m)).map_err(|()| bad_env("PTO_SIM_CACHE", v, Self::SYNTAX)),
        }
    }

    /// Parse a `PTO_SIM_CACHE` value (see [`CacheModel::from_env`]); `None` unless it is
    /// exactly that syntax.
    pub fn parse(v: &str) -> Option<CacheModel> {
        Self::spec(v).ok().map(|(m, _)| m)
    }

    /// Parse a whole `PTO_SIM_CACHE` value, as the environment reads it: the model and the
    /// AICPU write policy its `:through` / `:back` part names (`faithful:42:back`); `None`
    /// unless it is exactly that syntax ([`CacheModel::SYNTAX`]). Every front end that takes
    /// the variable's spelling (`pto run --cache`, Python's `cache=`) parses it here.
    pub fn parse_spec(v: &str) -> Option<(CacheModel, Option<AicpuWritePolicy>)> {
        Self::spec(v).ok()
    }

    /// The model and the write policy a `PTO_SIM_CACHE` value names.
    fn spec(v: &str) -> Result<(CacheModel, Option<AicpuWritePolicy>), ()> {
        let mut parts = v.split(':');
        let model = parts.next().ok_or(())?;
        let mut rest: Vec<&str> = parts.collect();
        let policy = match rest.last().map(|p| AicpuWritePolicy::parse(p)) {
            Some(Some(p)) => {
                rest.pop();
                Some(p)
            }
            _ => None,
        };
        match (model, rest.as_slice()) {
            ("coherent", []) => Ok((CacheModel::Coherent, policy)),
            ("faithful", []) => Ok((CacheModel::Faithful { seed: 0x5eed, evict_per_mille: 20 }, policy)),
            ("faithful", [seed]) => {
                let seed = seed.parse().map_err(|_| ())?;
                Ok((CacheModel::Faithful { seed, evict_per_mille: 20 }, policy))
            }
            _ => Err(()),
        }
    }
}

/// The value of environment variable `var`: `Ok(None)` when unset, an error when it is set but
/// not Unicode.
fn env(var: &'static str) -> Result<Option<String>, SimError> {
    match std::env::var(var) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad_env(var, v.to_string_lossy().into_owned(), "Unicode text")),
    }
}

/// The error of environment variable `var` holding `value`, which is not `expected`.
fn bad_env(var: &'static str, value: String, expected: &'static str) -> SimError {
    SimError::Environment { var, value, expected }
}

/// What an AICPU store does to memory (the a2a3 AICPU's unknown write policy, as a board
/// parameter: `docs/cache-contract.md`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AicpuWritePolicy {
    /// The store reaches memory at once; other agents' fills and device-direct loads see it.
    WriteThrough,
    /// The store dirties the AICPU cluster's copy of the line; memory (and so every other
    /// agent) sees it only once the line is written back (range clean or invalidate, eviction).
    WriteBack,
}

impl AicpuWritePolicy {
    /// The policy for a contract when the board names none: write-back under the
    /// host-non-coherent contract (a2a3: the conservative answer while the mapping is
    /// unknown), write-through under the host-coherent one (a5: completed AICPU writes are
    /// visible without a clean).
    pub fn for_contract(host_coherent: bool) -> AicpuWritePolicy {
        if host_coherent { AicpuWritePolicy::WriteThrough } else { AicpuWritePolicy::WriteBack }
    }

    /// Parse `through` or `back`.
    pub fn parse(v: &str) -> Option<AicpuWritePolicy> {
        match v.trim() {
            "through" | "write-through" => Some(AicpuWritePolicy::WriteThrough),
            "back" | "write-back" => Some(AicpuWritePolicy::WriteBack),
            _ => None,
        }
    }

    /// The policy the environment names: `PTO_SIM_AICPU_WRITES=through|back`, else a
    /// `:through` / `:back` part of `PTO_SIM_CACHE` (e.g. `faithful:42:back`). A value of
    /// either variable outside its syntax is an error naming it.
    pub fn from_env() -> Result<Option<AicpuWritePolicy>, SimError> {
        if let Some(v) = env("PTO_SIM_AICPU_WRITES")? {
            return match Self::parse(&v) {
                Some(p) => Ok(Some(p)),
                None => Err(bad_env("PTO_SIM_AICPU_WRITES", v, "through or back")),
            };
        }
        match env("PTO_SIM_CACHE")? {
            None => Ok(None),
            Some(v) => {
                CacheModel::spec(&v).map(|(_, p)| p).map_err(|()| bad_env("PTO_SIM_CACHE", v, CacheModel::SYNTAX))
            }
        }
    }

    /// Its name in the environment syntax.
    pub fn name(self) -> &'static str {
        match self {
            AicpuWritePolicy::WriteThrough => "through",
            AicpuWritePolicy::WriteBack => "back",
        }
    }
}

/// The value of `PTO_SIM_PROTECT` (`on` or `off`) when set; any other value is an error
/// naming it.
pub(crate) fn protection_from_env() -> Result<Option<bool>, SimError> {
    match env("PTO_SIM_PROTECT")?.as_deref() {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(v) => Err(bad_env("PTO_SIM_PROTECT", v.into(), "on or off")),
    }
}

/// The checks named by `PTO_SIM_CHECK` (see
/// [`Checks::parse`](pto_hal::check::Checks::parse)): `Ok(None)` when unset, an error naming the
/// value when it is outside the syntax.
pub(crate) fn checks_from_env() -> Result<Option<pto_hal::check::Checks>, SimError> {
    use pto_hal::check::Checks;
    match env("PTO_SIM_CHECK")? {
        None => Ok(None),
        Some(v) => Checks::parse(&v).map(Some).ok_or_else(|| bad_env("PTO_SIM_CHECK", v, Checks::SYNTAX)),
    }
}

std::thread_local! {
    /// The engine and schedule devices opened on this thread use instead of their
    /// configuration's ([`with_engine`]).
    static SCOPED: core::cell::Cell<(Option<SimEngine>, Option<Schedule>)> = const { core::cell::Cell::new((None, None)) };
}

/// Run `f` with every simulated device it opens on this thread using `engine` and `schedule`
/// (where `Some`) instead of what its configuration and the environment say: how `pto run
/// --schedule`, `pto explore` and tests choose the schedule of a device a board opens.
///
/// ```
/// use pto_hal::{HostCoherent, Topology};
/// use pto_sim::{Schedule, SimConfig, SimDevice, Strategy};
///
/// let seeded = Schedule::Seeded { seed: 7, strategy: Strategy::Random };
/// let dev = pto_sim::with_engine(None, Some(seeded), || {
///     SimDevice::<HostCoherent>::open(Topology { clusters: 1, aicpu_threads: 1 }, SimConfig::default())
/// })
/// .unwrap();
/// assert_eq!(dev.schedule(), seeded);
/// ```
pub fn with_engine<R>(engine: Option<SimEngine>, schedule: Option<Schedule>, f: impl FnOnce() -> R) -> R {
    let before = SCOPED.with(|s| s.replace((engine, schedule)));
    struct Restore((Option<SimEngine>, Option<Schedule>));
    impl Drop for Restore {
        fn drop(&mut self) {
            SCOPED.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(before);
    f()
}

/// The engine and schedule a device opened now on this thread uses: [`with_engine`]'s, else
/// the environment's (`PTO_SIM_ENGINE`, `PTO_SIM_SCHEDULE`), else `config`'s.
pub(crate) fn engine_for(config: &SimConfig) -> Result<(SimEngine, Schedule), SimError> {
    let (e, s) = SCOPED.with(|s| s.get());
    let engine = match e {
        Some(e) => e,
        None => engine_from_env()?.unwrap_or(config.engine),
    };
    let schedule = match s {
        Some(s) => s,
        None => schedule_from_env()?.unwrap_or(config.schedule),
    };
    Ok((engine, schedule))
}

/// The engine named by `PTO_SIM_ENGINE` when set; a value outside its syntax is an error
/// naming it.
pub(crate) fn engine_from_env() -> Result<Option<SimEngine>, SimError> {
    match env("PTO_SIM_ENGINE")? {
        None => Ok(None),
        Some(v) => SimEngine::parse(&v).map(Some).ok_or_else(|| bad_env("PTO_SIM_ENGINE", v, SimEngine::SYNTAX)),
    }
}

/// The schedule named by `PTO_SIM_SCHEDULE` when set; a value outside its syntax is an error
/// naming it.
pub(crate) fn schedule_from_env() -> Result<Option<Schedule>, SimError> {
    match env("PTO_SIM_SCHEDULE")? {
        None => Ok(None),
        Some(v) => Schedule::parse(&v).map(Some).ok_or_else(|| bad_env("PTO_SIM_SCHEDULE", v, Schedule::SYNTAX)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_syntax() {
        assert_eq!(AicpuWritePolicy::parse("back"), Some(AicpuWritePolicy::WriteBack));
        assert_eq!(AicpuWritePolicy::parse("through"), Some(AicpuWritePolicy::WriteThrough));
        assert_eq!(AicpuWritePolicy::parse("maybe"), None);
        assert_eq!(CacheModel::parse("faithful:42:back"), Some(CacheModel::Faithful { seed: 42, evict_per_mille: 20 }));
        assert_eq!(
            CacheModel::parse("faithful:back"),
            Some(CacheModel::Faithful { seed: 0x5eed, evict_per_mille: 20 })
        );
        // Strict: a misspelt model, a seed that is not a number, or anything extra is refused.
        for bad in ["faithfull", "faithful:abc", "coherent:7", "faithful:1:2", "faithful:1:back:x", "", "Faithful"] {
            assert_eq!(CacheModel::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            CacheModel::spec("coherent:through"),
            Ok((CacheModel::Coherent, Some(AicpuWritePolicy::WriteThrough)))
        );
        assert_eq!(AicpuWritePolicy::for_contract(false), AicpuWritePolicy::WriteBack);
        assert_eq!(AicpuWritePolicy::for_contract(true), AicpuWritePolicy::WriteThrough);
    }
}
