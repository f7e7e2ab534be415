//! `pto explore EXAMPLE --seeds N`: run an example under N seeded schedules of the simulator's
//! own scheduler and stop at the first failure, printing the seed, what failed, the last switch
//! points before it, and the `pto run --schedule` line that replays it.

use clap::{Parser, ValueEnum};
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto_sim::{CacheModel, Schedule, Strategy};

use crate::Fail;
use crate::target::{BoardName, SimControl, Target, cache_name, describe_schedule, open_with, parse_cache};
use crate::workload::{Example, workload};

#[derive(Parser, Debug)]
pub(crate) struct ExploreArgs {
    /// The example.
    #[arg(value_enum)]
    example: Example,
    #[command(flatten)]
    target: Target,
    /// How many schedules to try.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed (the schedules are FIRST, FIRST + 1, ...).
    #[arg(long, value_name = "FIRST", default_value_t = 0)]
    first_seed: u64,
    /// How each schedule chooses: pct (priorities with DEPTH - 1 changes: finds ordering bugs
    /// of small depth with known probability) or random (any runnable agent at every switch
    /// point).
    #[arg(long, value_enum, default_value = "pct")]
    strategy: StrategyName,
    /// PCT's bug depth.
    #[arg(long, default_value_t = 3)]
    depth: u32,
    /// The simulator's cache model (as `pto run --cache`); the faithful model turns a bad
    /// interleaving of cache operations into a reported violation.
    #[arg(long, value_parser = parse_cache)]
    cache: Option<CacheModel>,
    /// The kernels: rust or native.
    #[arg(long, value_enum, default_value_t = pto_testkit::KernelChoice::Rust)]
    kernels: pto_testkit::KernelChoice,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum StrategyName {
    Pct,
    Random,
}

pub(crate) fn explore(a: &ExploreArgs) -> Result<(), Fail> {
    match a.target.board {
        BoardName::SimA2a3 => explore_on::<SimA2a3>(a),
        BoardName::SimA5 => explore_on::<SimA5>(a),
        BoardName::SimMini => explore_on::<SimMini>(a),
    }
}

fn explore_on<B: Board>(a: &ExploreArgs) -> Result<(), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    if a.seeds == 0 {
        return Err(Fail("--seeds must be at least 1".into(), 2));
    }
    if a.strategy == StrategyName::Pct && a.depth == 0 {
        return Err(Fail("--depth must be at least 1".into(), 2));
    }
    let strategy = match a.strategy {
        StrategyName::Pct => Strategy::Pct { depth: a.depth },
        StrategyName::Random => Strategy::Random,
    };
    let (name, w) = workload::<B::Platform>(a.example);
    let started = std::time::Instant::now();
    let mut steps = Vec::new();
    for seed in a.first_seed..a.first_seed.saturating_add(a.seeds) {
        let schedule = Schedule::Seeded { seed, strategy };
        let (dev, k) = open_with::<B>(a.cache, None, a.kernels, None, Some(schedule))?;
        for rt in a.target.runtime.list() {
            let r = pto_testkit::executed(a.target.executor.pto(), || w(&dev, &k, rt));
            if let Err(e) = r {
                let report = dev.platform().schedule_report().unwrap_or_default();
                let spec = schedule.to_string();
                let seed_arg = spec.strip_prefix("seed:").unwrap_or(&spec);
                let cache = a.cache.map(|m| format!(" --cache {}", cache_name(m))).unwrap_or_default();
                let kernels = if a.kernels == pto_testkit::KernelChoice::Native { " --kernels native" } else { "" };
                eprintln!("{name} board={} runtime={} schedule={spec} FAIL: {e}", B::NAME, rt.name());
                eprintln!("{}", describe_schedule(&report));
                eprintln!(
                    "replay: pto run {name} --board {} --runtime {} --executor {}{cache}{kernels} --schedule {seed_arg}",
                    B::NAME,
                    rt.name(),
                    a.target.executor.name(),
                );
                return Err(Fail(format!("seed {seed} failed after {} schedule(s)", seed - a.first_seed + 1), 1));
            }
        }
        steps.push(dev.platform().schedule_report().map_or(0, |r| r.steps));
        drop(dev);
    }
    steps.sort_unstable();
    outln!(
        "{name} board={} strategy={} seeds={}..{}: {} schedules, no failure ({} to {} switch points, median {}) in {:.1} s",
        B::NAME,
        strategy.name(),
        a.first_seed,
        a.first_seed + a.seeds,
        a.seeds,
        steps[0],
        steps[steps.len() - 1],
        steps[steps.len() / 2],
        started.elapsed().as_secs_f64(),
    );
    Ok(())
}
