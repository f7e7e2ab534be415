//! `pto explore EXAMPLE --seeds N`: run an example under N seeded schedules of the simulator's
//! own scheduler and stop at the first failure, printing the seed, what failed, the last switch
//! points before it, and the `pto run --schedule` line that replays it.

use clap::{Parser, ValueEnum};
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto_sim::{Schedule, Strategy};

use crate::Fail;
use crate::target::{BoardName, CacheSpec, SimControl, Target, describe_schedule, open_with, parse_cache};
use crate::workload::{Example, workload};

#[derive(Parser, Debug)]
pub(crate) struct ExploreArgs {
    /// The example.
    #[arg(value_enum)]
    example: Example,
    #[command(flatten)]
    target: Target,
    /// How many schedules to try.
    #[arg(long, default_value_t = pto_sim::EXPLORE_SEEDS)]
    seeds: u64,
    /// The first seed (the schedules are FIRST, FIRST + 1, ...).
    #[arg(long, value_name = "FIRST", default_value_t = 0)]
    first_seed: u64,
    /// How each schedule chooses: random (any runnable agent at every switch point; the
    /// default, which found every variant of the exploration suite on most seeds) or pct
    /// (priorities with DEPTH - 1 changes: finds ordering bugs of small depth with known
    /// probability).
    #[arg(long, value_enum, default_value_t = StrategyName::of(Strategy::EXPLORE_DEFAULT))]
    strategy: StrategyName,
    /// PCT's bug depth (with `--strategy pct`).
    #[arg(long, default_value_t = 3)]
    depth: u32,
    /// The simulator's cache model (as `pto run --cache`); the faithful model turns a bad
    /// interleaving of cache operations into a reported violation.
    #[arg(long, value_name = "MODEL", value_parser = parse_cache)]
    cache: Option<CacheSpec>,
    /// The kernels: rust or native.
    #[arg(long, value_enum, default_value_t = pto_testkit::KernelChoice::Rust)]
    kernels: pto_testkit::KernelChoice,
    /// Print the outcome as one JSON object on standard output (see [`ExploreDoc`]) instead
    /// of the text line; the failure's details stay on standard error. A progress bar is
    /// drawn on standard error when it is a terminal, either way.
    #[arg(long)]
    json: bool,
}

/// Version of the `pto explore --json` object; bumped on any change of its fields.
const EXPLORE_FORMAT_VERSION: u32 = 1;

/// The outcome as `pto explore --json` prints it.
#[derive(serde::Serialize)]
struct ExploreDoc {
    /// [`EXPLORE_FORMAT_VERSION`].
    format_version: u32,
    workload: &'static str,
    board: &'static str,
    /// `pct` or `random`.
    strategy: String,
    first_seed: u64,
    /// Schedules asked for.
    seeds: u64,
    /// Schedules run (up to and including a failing one).
    schedules: u64,
    /// `PASS` (no schedule failed) or `FAIL`.
    result: &'static str,
    /// The failing seed, its runtime, the error and the `pto run` line that replays it.
    failure: Option<ExploreFailure>,
    /// Switch points per schedule over the passing ones: fewest, median, most.
    steps: Option<[u64; 3]>,
    seconds: f64,
}

#[derive(serde::Serialize)]
struct ExploreFailure {
    seed: u64,
    runtime: &'static str,
    error: String,
    replay: String,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum StrategyName {
    Pct,
    Random,
}

impl StrategyName {
    /// The name of `s`.
    fn of(s: Strategy) -> StrategyName {
        match s {
            Strategy::Pct { .. } => StrategyName::Pct,
            Strategy::Random => StrategyName::Random,
        }
    }
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
    a.target.check()?;
    let (name, w) = workload::<B::Platform>(a.example);
    let started = std::time::Instant::now();
    let mut steps = Vec::new();
    let doc = |schedules: u64, failure: Option<ExploreFailure>, steps: &[u64]| ExploreDoc {
        format_version: EXPLORE_FORMAT_VERSION,
        workload: name,
        board: B::NAME,
        strategy: strategy.name().to_string(),
        first_seed: a.first_seed,
        seeds: a.seeds,
        schedules,
        result: if failure.is_some() { "FAIL" } else { "PASS" },
        failure,
        steps: (!steps.is_empty()).then(|| [steps[0], steps[steps.len() / 2], steps[steps.len() - 1]]),
        seconds: started.elapsed().as_secs_f64(),
    };
    let bar = progress(a.seeds)?;
    for seed in a.first_seed..a.first_seed.saturating_add(a.seeds) {
        bar.set_message(format!("seed {seed}"));
        let schedule = Schedule::Seeded { seed, strategy };
        let (dev, k) = open_with::<B>(a.cache, None, a.kernels, None, Some(schedule))?;
        for rt in a.target.runtime.list() {
            let r = pto_testkit::executed(a.target.executor.pto(), || w(&dev, &k, rt));
            if let Err(e) = r {
                let report = dev.platform().schedule_report().unwrap_or_default();
                let spec = schedule.to_string();
                let seed_arg = spec.strip_prefix("seed:").unwrap_or(&spec);
                let cache = a.cache.map(|c| format!(" --cache {}", c.name())).unwrap_or_default();
                let kernels = if a.kernels == pto_testkit::KernelChoice::Native { " --kernels native" } else { "" };
                bar.finish_and_clear();
                let replay = format!(
                    "pto run {name} --board {} --runtime {} --executor {}{cache}{kernels} --schedule {seed_arg}",
                    B::NAME,
                    rt.name(),
                    a.target.executor.name(),
                );
                eprintln!("{name} board={} runtime={} schedule={spec} FAIL: {e}", B::NAME, rt.name());
                eprintln!("{}", describe_schedule(&report));
                eprintln!("replay: {replay}");
                let schedules = seed - a.first_seed + 1;
                if a.json {
                    steps.sort_unstable();
                    let failure = ExploreFailure { seed, runtime: rt.name(), error: e.to_string(), replay };
                    outln!("{}", serde_json::to_string(&doc(schedules, Some(failure), &steps))?);
                }
                return Err(Fail(format!("seed {seed} failed after {schedules} schedule(s)"), 1));
            }
        }
        steps.push(dev.platform().schedule_report().map_or(0, |r| r.steps));
        drop(dev);
        bar.inc(1);
    }
    bar.finish_and_clear();
    steps.sort_unstable();
    if a.json {
        outln!("{}", serde_json::to_string(&doc(a.seeds, None, &steps))?);
        return Ok(());
    }
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

/// The progress bar of `n` schedules: drawn on standard error only when it is a terminal
/// (hidden otherwise, so a pipe or a log file gets no bar).
fn progress(n: u64) -> Result<indicatif::ProgressBar, Fail> {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return Ok(indicatif::ProgressBar::hidden());
    }
    let style = indicatif::ProgressStyle::with_template("explore [{bar:30}] {pos}/{len} schedules {msg} ({elapsed})")
        .map_err(|e| Fail(e.to_string(), 1))?
        .progress_chars("=> ");
    Ok(indicatif::ProgressBar::with_draw_target(Some(n), indicatif::ProgressDrawTarget::stderr()).with_style(style))
}
