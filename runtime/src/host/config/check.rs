//! The one place a run's configuration is checked: against the device's topology and budgets,
//! the chosen runtime and (for a host-built graph) the graph's executor plan. What passes is a
//! [`CheckedConfig`], the only form of a configuration the launch path reads derived values
//! from (ticks, sizes, the executor), so nothing after it checks a raw value again.

use pto_hal::{Clock, Handle, HostPlatform};

use super::{AicoreProgram, ConfigError, RingConfig, RunConfig};
use crate::dump::DumpLevel;
use crate::host::resident::{self, Decision, LegacyReason};
use crate::host::{Device, Error, Executor, PlatformError, dump, trace};
use crate::layout::{DumpLayout, RINGS, executor_mode};
use crate::trb::ring;

/// Most records of one trace ring ([`RunConfig::trace_records`]).
const MAX_TRACE_RECORDS: u32 = 1 << 24;
/// Fewest AICPU threads of a device-side run: one orchestrates, the others schedule.
const MIN_TRB_THREADS: u32 = 2;

/// A run's configuration after `Device::check_graph_run` or `Device::check_program_run`:
/// everything the launch needs that is derived from the configuration, each value already in
/// range. Only the checker makes one.
#[derive(Clone, Debug)]
pub(crate) struct CheckedConfig {
    clusters: u32,
    threads: u32,
    aicore: Handle,
    watchdog_ticks: u64,
    exit_ticks: u64,
    core_wait_ticks: u64,
    trace: Option<(u32, u32)>,
    dump: Option<CheckedDump>,
    executor: Decision,
}

/// The args dump of a checked run.
#[derive(Copy, Clone, Debug)]
pub(crate) struct CheckedDump {
    /// The level.
    pub(crate) level: DumpLevel,
    /// Payload arena bytes per AICPU thread.
    pub(crate) arena: u64,
    /// Bytes of the whole dump region (one lane per AICPU thread).
    pub(crate) region_bytes: u64,
}

/// The device-side runtime's rings of a checked run.
#[derive(Copy, Clone, Debug)]
pub(crate) struct CheckedRings {
    /// Heap bytes of all rings together.
    pub(crate) heap_bytes: u64,
    /// The orchestrator's wait budget, in device ticks.
    pub(crate) wait_ticks: u64,
}

impl CheckedConfig {
    /// Clusters the run launches.
    pub(crate) fn clusters(&self) -> u32 {
        self.clusters
    }
    /// AICPU threads the run launches.
    pub(crate) fn threads(&self) -> u32 {
        self.threads
    }
    /// The AICore program the run launches ([`RunConfig::aicore`]).
    pub(crate) fn aicore(&self) -> Handle {
        self.aicore
    }
    /// The scheduler watchdog, in device ticks.
    pub(crate) fn watchdog_ticks(&self) -> u64 {
        self.watchdog_ticks
    }
    /// The exit budget, in device ticks.
    pub(crate) fn exit_ticks(&self) -> u64 {
        self.exit_ticks
    }
    /// The AICore's wait budget (`2 × watchdog + exit`), in device ticks.
    pub(crate) fn core_wait_ticks(&self) -> u64 {
        self.core_wait_ticks
    }
    /// Records per AICore ring and per AICPU-thread ring, when the run traces.
    pub(crate) fn trace(&self) -> Option<(u32, u32)> {
        self.trace
    }
    /// The args dump, when the run dumps.
    pub(crate) fn dump(&self) -> Option<CheckedDump> {
        self.dump
    }
    /// The executor the run is on.
    pub(crate) fn executor(&self) -> Decision {
        self.executor
    }
}

/// The AICore's wait budget for a run with `watchdog_us`: `2 × watchdog + exit`, which must
/// stay below the host's stream budget (a core gives up before the host does).
pub(crate) fn core_wait_us(watchdog_us: u64, exit_us: u64, stream_us: u64) -> Result<u64, ConfigError> {
    let core_wait = watchdog_us.checked_mul(2).and_then(|w| w.checked_add(exit_us));
    match core_wait {
        Some(c) if watchdog_us != 0 && exit_us != 0 && c < stream_us => Ok(c),
        _ => Err(ConfigError::BudgetChain { watchdog_us, exit_us, stream_us }),
    }
}

/// Ticks of `clock` in `us` microseconds, or an error naming the budget `field`.
fn ticks(clock: &impl Clock, field: &'static str, us: u64) -> Result<u64, ConfigError> {
    let freq_hz = clock.freq_hz();
    let t = us as u128 * freq_hz as u128 / 1_000_000;
    u64::try_from(t).map_err(|_| ConfigError::Ticks { field, us, freq_hz })
}

/// The largest task window: a power of two a task handle can name whose slots, with one
/// edge, fit a ring's AICPU budget ([`ring::AICPU_RING_BUDGET`]).
pub(super) const fn max_window() -> u32 {
    let fits = (ring::AICPU_RING_BUDGET - ring::EDGE_BYTES) / ring::SLOT_BYTES;
    let pow = 1u64 << (63 - fits.leading_zeros());
    let slots = 1u64 << ring::HANDLE_SLOT_BITS;
    (if pow < slots { pow } else { slots }) as u32
}

/// The first dependency-pool size refused beside a window of `window` slots: what a task
/// handle can name, or what the ring's AICPU budget has left after its slots.
pub(super) const fn dep_pool_limit(window: u32) -> u32 {
    let left = ring::AICPU_RING_BUDGET.saturating_sub(window as u64 * ring::SLOT_BYTES) / ring::EDGE_BYTES + 1;
    let slots = 1u64 << ring::HANDLE_SLOT_BITS;
    (if left < slots { left } else { slots }) as u32
}

/// Check every ring size; returns the total heap bytes of all rings.
pub(super) fn check_rings(r: &RingConfig) -> Result<u64, ConfigError> {
    let max = max_window();
    let mut total: u64 = 0;
    for ring in 0..RINGS {
        let window = r.window[ring];
        if !window.is_power_of_two() || !(2..=max).contains(&window) {
            return Err(ConfigError::RingWindow { ring, window, max });
        }
        let heap = r.heap[ring];
        if heap < 64 || !heap.is_multiple_of(64) || heap > super::MAX_RING_HEAP {
            return Err(ConfigError::RingHeap { ring, heap, max: super::MAX_RING_HEAP });
        }
        // Cannot overflow: four rings of at most 2^40 bytes.
        total += heap;
        let dep_pool = r.dep_pool[ring];
        let limit = dep_pool_limit(window);
        if dep_pool == 0 || dep_pool >= limit {
            return Err(ConfigError::RingDepPool { ring, dep_pool, limit });
        }
    }
    if r.tensormap_entries == 0 {
        return Err(ConfigError::Zero { field: "rings.tensormap_entries" });
    }
    Ok(total)
}

/// A device of `clusters` clusters is refused by AICPU programs that hold at most `bound`.
pub(crate) fn check_device_bound(clusters: u32, bound: u32) -> Result<(), ConfigError> {
    if clusters > bound {
        return Err(ConfigError::DeviceOverBound { clusters, bound });
    }
    Ok(())
}

/// A count `value` of `field` in `1..=max`.
fn in_board(field: &'static str, value: u32, max: u32) -> Result<u32, ConfigError> {
    if value == 0 || value > max {
        return Err(ConfigError::OutOfRange { field, value: value.into(), min: 1, max: max.into() });
    }
    Ok(value)
}

/// What every run's check finds first: its counts and its watchdog.
struct Counts {
    clusters: u32,
    threads: u32,
    watchdog_us: u64,
    core_wait_us: u64,
}

impl<P: HostPlatform> Device<P> {
    /// Check `cfg` for a run of the host-built graph whose executor plan is `plan`.
    pub(crate) fn check_graph_run(&self, cfg: &RunConfig, plan: &resident::Plan) -> Result<CheckedConfig, Error> {
        let counts = self.check_counts(cfg)?;
        self.check_rest(cfg, counts, Some(plan))
    }

    /// Check `cfg` for a device-side run (the tensormap-and-ring runtime): the run's checked
    /// configuration and its rings.
    pub(crate) fn check_program_run(&self, cfg: &RunConfig) -> Result<(CheckedConfig, CheckedRings), Error> {
        let counts = self.check_counts(cfg)?;
        let threads = counts.threads;
        if threads < MIN_TRB_THREADS {
            return Err(ConfigError::TooFewThreads { threads, min: MIN_TRB_THREADS }.into());
        }
        let heap_bytes = check_rings(&cfg.rings)?;
        let wait_us = cfg.rings.wait_us.unwrap_or(counts.watchdog_us);
        let max_us = counts.watchdog_us.saturating_mul(2);
        if wait_us == 0 || wait_us > max_us {
            return Err(ConfigError::WaitBudget { wait_us, max_us }.into());
        }
        let rings = CheckedRings { heap_bytes, wait_ticks: ticks(&self.inner.dev, "rings.wait_us", wait_us)? };
        Ok((self.check_rest(cfg, counts, None)?, rings))
    }

    /// The first checks of every run: the device is usable, the counts fit the board, the
    /// watchdog keeps the budget chain, the AICore program runs the executor.
    fn check_counts(&self, cfg: &RunConfig) -> Result<Counts, Error> {
        let inner = &*self.inner;
        inner.check_usable()?;
        let (topo, budgets) = (inner.topo, inner.timeouts);
        let clusters = in_board("clusters", cfg.clusters.unwrap_or(topo.clusters), topo.clusters)?;
        let threads = in_board("aicpu_threads", cfg.aicpu_threads.unwrap_or(topo.aicpu_threads), topo.aicpu_threads)?;
        let watchdog_us = cfg.watchdog_us.unwrap_or(budgets.watchdog_us);
        let core_wait_us = core_wait_us(watchdog_us, budgets.exit_us, budgets.stream_us)?;
        if cfg.aicore == AicoreProgram::Native && cfg.executor == Executor::Resident {
            return Err(ConfigError::ExecutorUnsupported { executor: cfg.executor, aicore: cfg.aicore }.into());
        }
        Ok(Counts { clusters, threads, watchdog_us, core_wait_us })
    }

    /// The rest of a run's check: a host-built graph's run when `plan` is given, else a
    /// device-side run. The checks that change nothing come first; then the AICore program is
    /// looked up and, last, the device's checks are switched (so a refused run leaves them as
    /// they were).
    fn check_rest(
        &self,
        cfg: &RunConfig,
        counts: Counts,
        plan: Option<&resident::Plan>,
    ) -> Result<CheckedConfig, Error> {
        let inner = &*self.inner;
        let (dev, exit_us) = (&inner.dev, inner.timeouts.exit_us);
        let Counts { clusters, threads, watchdog_us, core_wait_us } = counts;
        let watchdog_ticks = ticks(dev, "watchdog_us", watchdog_us)?;
        let exit_ticks = ticks(dev, "exit_us", exit_us)?;
        let core_wait_ticks = ticks(dev, "the core wait budget", core_wait_us)?;
        let trace = match cfg.trace {
            false => None,
            true => {
                let (core_records, thread_records) =
                    cfg.trace_records.unwrap_or((trace::DEFAULT_CORE_RECORDS, trace::DEFAULT_THREAD_RECORDS));
                let range = 1..=MAX_TRACE_RECORDS;
                if !range.contains(&core_records) || !range.contains(&thread_records) {
                    return Err(
                        ConfigError::TraceRecords { core_records, thread_records, max: MAX_TRACE_RECORDS }.into()
                    );
                }
                Some((core_records, thread_records))
            }
        };
        let dump = match cfg.dump {
            None => None,
            Some(level) => {
                let arena = cfg.dump_arena.unwrap_or(dump::DEFAULT_ARENA);
                if !arena.is_multiple_of(64) || !(dump::MIN_ARENA..=dump::MAX_ARENA).contains(&arena) {
                    return Err(ConfigError::DumpArena { arena, min: dump::MIN_ARENA, max: dump::MAX_ARENA }.into());
                }
                // The region's size depends on its lanes and arena only (not on the run's epoch
                // or wait budget, which the launch fills in).
                let region_bytes = DumpLayout::region_bytes(&dump::header(level, threads, arena, 0, 0))
                    .ok_or(ConfigError::DumpRegion { arena, lanes: threads })?;
                Some(CheckedDump { level, arena, region_bytes })
            }
        };
        let executor = match plan {
            Some(plan) => {
                // The C AICore program runs the legacy executor only (an explicit resident one
                // was refused with the counts).
                let asked = match cfg.aicore {
                    AicoreProgram::Native => Executor::Legacy,
                    AicoreProgram::Rust => cfg.executor,
                };
                resident::decide(asked, plan, dump.is_some(), P::cores_share_host(dev))
                    .map_err(|reason| ConfigError::ResidentRefused { reason })?
            }
            None if cfg.executor == Executor::Resident => {
                return Err(ConfigError::ResidentRefused { reason: LegacyReason::DeviceSideRuntime }.into());
            }
            None => Decision::Legacy { reason: LegacyReason::DeviceSideRuntime, mode: executor_mode::LEGACY_GRAPH },
        };
        let aicore = self.aicore_program(cfg.aicore)?;
        if let Some(checks) = cfg.check.filter(|&c| c != P::checks(dev))
            && !P::set_checks(dev, checks)
        {
            return Err(ConfigError::ChecksUnavailable { checks }.into());
        }
        Ok(CheckedConfig {
            clusters,
            threads,
            aicore,
            watchdog_ticks,
            exit_ticks,
            core_wait_ticks,
            trace,
            dump,
            executor,
        })
    }

    /// The AICore program `aicore` ([`RunConfig::aicore`]): the runtime's own, or the C one by
    /// name — an error naming it when this device does not have it.
    fn aicore_program(&self, aicore: AicoreProgram) -> Result<Handle, ConfigError> {
        match aicore {
            AicoreProgram::Rust => Ok(self.inner.programs.aicore),
            AicoreProgram::Native => {
                let program = crate::programs::NATIVE_AICORE;
                pto_hal::Loader::load_program(&self.inner.dev, pto_hal::ProgramKind::Aicore, program).map_err(|e| {
                    ConfigError::NativeAicoreMissing { program, error: PlatformError::new("AICore program load", e) }
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Timeouts;
    use std::string::ToString;

    /// A clock of 1 GHz.
    struct Giga;
    impl Clock for Giga {
        fn now_ticks(&self) -> pto_hal::Ticks {
            0
        }
        fn freq_hz(&self) -> u64 {
            1_000_000_000
        }
    }

    #[test]
    fn budget_chains_are_refused_by_variant() {
        let chain = |w, e, s| ConfigError::BudgetChain { watchdog_us: w, exit_us: e, stream_us: s };
        assert_eq!(core_wait_us(1 << 63, 1_000_000, 50_000_000), Err(chain(1 << 63, 1_000_000, 50_000_000)));
        assert_eq!(core_wait_us(u64::MAX, u64::MAX, u64::MAX), Err(chain(u64::MAX, u64::MAX, u64::MAX)));
        assert_eq!(core_wait_us(0, 1, 50), Err(chain(0, 1, 50)));
        assert_eq!(core_wait_us(10, 0, 50), Err(chain(10, 0, 50)));
        assert_eq!(core_wait_us(20, 10, 50), Err(chain(20, 10, 50)));
        assert_eq!(core_wait_us(10, 5, 50), Ok(25));
        assert!(chain(1 << 63, 1, 2).to_string().contains("watchdog_us = 9223372036854775808"));
    }

    #[test]
    fn device_budgets_are_refused_by_variant() {
        let chain = Timeouts::new(30, 1, 50).validate();
        let want = ConfigError::BudgetChain { watchdog_us: 30, exit_us: 1, stream_us: 50 };
        assert_eq!(chain, Err(Error::Config(want)));
        let no_turns = Timeouts::new(10, 5, 50).with_turns(0, 1).validate();
        assert_eq!(no_turns, Err(Error::Config(ConfigError::Zero { field: "timeouts.turn_us" })));
        let no_lease = Timeouts::new(10, 5, 50).with_turns(1, 0).validate();
        assert_eq!(no_lease, Err(Error::Config(ConfigError::Zero { field: "timeouts.lease_us" })));
        assert_eq!(Timeouts::new(10, 5, 50).with_turns(1, 1).validate(), Ok(()));
        assert_eq!(Timeouts::default().validate(), Ok(()));
        assert_eq!(
            ConfigError::Zero { field: "timeouts.turn_us" }.to_string(),
            "timeouts.turn_us = 0: must be non-zero"
        );
    }

    #[test]
    fn ring_sizes_are_refused_by_variant() {
        let slots = max_window();
        let window = |w| check_rings(&RingConfig::uniform(w, 1024, 8));
        assert_eq!(window(3), Err(ConfigError::RingWindow { ring: 0, window: 3, max: slots }));
        assert_eq!(window(1), Err(ConfigError::RingWindow { ring: 0, window: 1, max: slots }));
        assert_eq!(window(slots << 1), Err(ConfigError::RingWindow { ring: 0, window: slots << 1, max: slots }));
        assert_eq!(window(slots), Ok(4 * 1024));
        let mut r = RingConfig::default();
        r.window[2] = 6;
        assert_eq!(check_rings(&r), Err(ConfigError::RingWindow { ring: 2, window: 6, max: slots }));

        let max = super::super::MAX_RING_HEAP;
        let heap = |h| check_rings(&RingConfig::uniform(8, h, 8));
        for h in [0, 32, 100, max + 64] {
            assert_eq!(heap(h), Err(ConfigError::RingHeap { ring: 0, heap: h, max }), "{h}");
        }
        let mut r = RingConfig { heap: [1 << 63, 1 << 63, 64, 64], ..RingConfig::default() };
        assert_eq!(check_rings(&r), Err(ConfigError::RingHeap { ring: 0, heap: 1 << 63, max }));
        r.heap = [u64::MAX - 63; RINGS];
        assert!(matches!(check_rings(&r), Err(ConfigError::RingHeap { ring: 0, .. })));
        r.heap = [max; RINGS];
        assert_eq!(check_rings(&r), Ok(4 * max));

        let pool = |p| check_rings(&RingConfig::uniform(8, 1024, p));
        let limit = dep_pool_limit(8);
        assert_eq!(pool(0), Err(ConfigError::RingDepPool { ring: 0, dep_pool: 0, limit }));
        assert_eq!(pool(limit), Err(ConfigError::RingDepPool { ring: 0, dep_pool: limit, limit }));
        assert_eq!(pool(limit - 1), Ok(4 * 1024));

        let r = RingConfig::default().with_tensormap_entries(0);
        assert_eq!(check_rings(&r), Err(ConfigError::Zero { field: "rings.tensormap_entries" }));
        assert_eq!(
            ConfigError::RingWindow { ring: 1, window: 3, max: 1 << 20 }.to_string(),
            "rings.window[1] = 3: a ring's task window must be a power of two in 2..=2^20 \
             (its slots must fit the ring's AICPU budget of 256 MiB)"
        );
        assert!(ConfigError::RingHeap { ring: 0, heap: 100, max }.to_string().contains("multiple of 64"));
        assert!(ConfigError::RingDepPool { ring: 3, dep_pool: 0, limit }.to_string().contains("dep_pool[3]"));
    }

    /// Sizes the handle bits allow but the AICPU cannot hold (a window of 2^28 asked the
    /// simulated AICPU for 32 GiB and aborted the process; 2^24 wedged the device until the
    /// scheduler timeout; a pool of 2^28 - 1 edges asked for 3.2 GB per ring) are refused by
    /// name, naming the budget, without allocating anything; an accepted ring fits the budget.
    #[test]
    fn rings_the_aicpu_cannot_hold_are_refused_by_name() {
        for w in [1 << 24, 1 << 28] {
            let e = check_rings(&RingConfig::uniform(w, 1024, 8)).unwrap_err();
            assert!(matches!(e, ConfigError::RingWindow { ring: 0, window, max } if window == w && max < w), "{e:?}");
            assert!(e.to_string().contains("AICPU budget of 256 MiB"), "{e}");
        }
        let big = (1 << 28) - 1;
        let e = check_rings(&RingConfig::uniform(8, 1024, big)).unwrap_err();
        assert!(matches!(e, ConfigError::RingDepPool { ring: 0, dep_pool, limit } if dep_pool == big && limit < big));
        assert!(e.to_string().contains("AICPU budget of 256 MiB"), "{e}");
        // The largest accepted sizes fit the budget, together too.
        let w = max_window();
        assert!(ring::aicpu_bytes(w, 1) <= ring::AICPU_RING_BUDGET);
        assert!(ring::aicpu_bytes(w * 2, 1) > ring::AICPU_RING_BUDGET || w == 1 << ring::HANDLE_SLOT_BITS);
        assert!(ring::aicpu_bytes(w, dep_pool_limit(w) - 1) <= ring::AICPU_RING_BUDGET);
        assert!(ring::aicpu_bytes(w, dep_pool_limit(w)) > ring::AICPU_RING_BUDGET);
        assert_eq!(check_rings(&RingConfig::uniform(w, 1024, dep_pool_limit(w) - 1)), Ok(4 * 1024));
        assert_eq!(w, 1 << 20, "slot bytes {}", ring::SLOT_BYTES);
    }

    #[test]
    fn counts_and_bounds_are_refused_by_variant() {
        let range = |field, value| ConfigError::OutOfRange { field, value, min: 1, max: 4 };
        assert_eq!(in_board("clusters", 0, 4), Err(range("clusters", 0)));
        assert_eq!(in_board("clusters", 5, 4), Err(range("clusters", 5)));
        assert_eq!(in_board("aicpu_threads", 4, 4), Ok(4));
        assert_eq!(range("clusters", 5).to_string(), "clusters must be 1..=4, got 5");
        assert_eq!(check_device_bound(25, 24), Err(ConfigError::DeviceOverBound { clusters: 25, bound: 24 }));
        assert_eq!(check_device_bound(24, 24), Ok(()));
        assert!(ConfigError::DeviceOverBound { clusters: 25, bound: 24 }.to_string().contains("at most 24"));
    }

    #[test]
    fn budgets_past_the_tick_counter_are_refused_by_variant() {
        assert_eq!(ticks(&Giga, "watchdog_us", 1_000), Ok(1_000_000));
        let at = u64::MAX / 1_000 + 1;
        assert_eq!(
            ticks(&Giga, "watchdog_us", at),
            Err(ConfigError::Ticks { field: "watchdog_us", us: at, freq_hz: 1_000_000_000 })
        );
        assert_eq!(ticks(&Giga, "watchdog_us", at - 1), Ok((at - 1) * 1_000));
    }
}
