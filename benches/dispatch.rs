//! Dispatch benchmark: the shapes of `docs/benchmarks.md` on the selected board.
//!
//! `cargo bench --bench dispatch` (add `-- --rounds R` to change the rounds per point, `--only
//! chain,fanout` to run some shapes, `--runtime hbg|trb` to run one runtime, `--threads T` to launch T AICPU
//! threads, and
//! `--features board-sim-a5` for the a5 board). Prints a table and JSON (also written to
//! `target/bench-dispatch.json`): per shape and runtime (host-built graph, device-side
//! tensormap-and-ringbuffer), fixed cost run(1), marginal µs per task at each N, and submission
//! time (the host graph build, or the device orchestrator's own time), with a shape's rounds
//! at the three Ns interleaved (one run of each N per round). Every run is checked
//! against its golden. The shapes run with the simulator's memory protection as configured (on
//! by default; `PTO_SIM_PROTECT=off` turns it off); a section measures its cost, and a last one
//! the cost of swimlane tracing (`RunConfig::with_trace`) at N=1000, on vs off in the same
//! process with the rounds interleaved (`--trace-cost` runs that section alone), and the cost of
//! the args dump at N=1000: off, `Partial` with nothing marked (the selection test alone) and
//! `Full` (with records/s and MB/s; `--dump-cost` runs that section alone, the host-built graph
//! on the `--executor` given), and the host-built
//! graph on the legacy against the resident executor at N=1000 (`--executor-cost` runs that
//! section alone), and the schedule-independent checks at N=1000: off, race, init and both
//! (`--check-cost` runs that section alone). `--executor` chooses the host-built graph's executor for the main table
//! (default `auto`: on the simulator the legacy one, `docs/runtimes.md` §9). `--help` prints the
//! usage (clap); anything else on the command line is refused with the usage (exit status 2).
//!
//! Beside each shape the table prints the whole run at N=4000 (the run, plus the graph build
//! for the host-built graph) against the reference C++ runtime's simulator on the same shape and
//! runtime ([`REFERENCE`], taken on another day: `docs/benchmarks.md`), as reference time over
//! ours.
//!
//! `--shape random-dag --n N [--seed S]` runs only the scale point instead: a seeded random DAG
//! of N tasks (1–4 inputs among the last 64 outputs) on the runtimes asked for, with the host
//! memory the host-built graph takes, counted by this binary's global allocator
//! (`dispatch/random_dag.rs`); its JSON goes to `target/bench-random-dag.json`.
//!
//! The JSON is the serialization of [`BenchReport`] (serde-derived); its `format_version`
//! ([`FORMAT_VERSION`]) changes whenever a field is renamed, removed, added or changes meaning.

#[path = "dispatch/random_dag.rs"]
mod random_dag;

use std::process::Command;
use std::time::{Duration, Instant};

use pto::hal::check::Checks;
use pto::prelude::*;
use pto_testkit::ShapeKind;
use serde::Serialize;

/// Counts live heap bytes in the scale mode only (`random_dag::ON`); elsewhere it forwards to
/// the system allocator after one relaxed load.
#[global_allocator]
static ALLOC: random_dag::Counting = random_dag::Counting;

const NS: [u32; 3] = [1, 1000, 4000];

/// One N's samples in the main table, as its rounds take them (after the warm-up).
struct Samples {
    runs: Vec<Duration>,
    orchs: Vec<Duration>,
    flows: Vec<Duration>,
    executor: Executor,
}

impl Default for Samples {
    fn default() -> Self {
        Samples { runs: Vec::new(), orchs: Vec::new(), flows: Vec::new(), executor: Executor::Legacy }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Warm-up rounds before a measurement's first timed one: at least this many.
const WARM_UP_ROUNDS: usize = 2;
/// ... and until this much time has passed since the measurement's first round. A process's
/// first measurement ran slow for its first rounds (1 to 8 rounds, up to about 50 ms after the
/// device opened, every variant of the round alike), and two rounds did not cover it: with the
/// args dump's section run alone (`--dump-cost`), one process in ten to one in four timed the
/// chain's dumped rounds at 3.5–3.7 times the run against 2.7–2.9 in the others.
const WARM_UP: Duration = Duration::from_millis(100);

/// Run `round(r, timed)` for the warm-up rounds (`timed` false: at least [`WARM_UP_ROUNDS`],
/// and every one that starts before [`WARM_UP`] has passed since the first), then for `rounds`
/// timed ones; `r` counts every round from 0, warm-up included.
fn measure_rounds(rounds: usize, mut round: impl FnMut(usize, bool)) {
    let began = Instant::now();
    let (mut r, mut timed) = (0, 0);
    let mut warming = true;
    while timed < rounds {
        warming = warming && (r < WARM_UP_ROUNDS || began.elapsed() < WARM_UP);
        round(r, !warming);
        timed += usize::from(!warming);
        r += 1;
    }
}

/// Samples (µs, in the order they were taken) and their spread: min, quartiles, median, max and
/// the interquartile range. A quantile `p` is the sorted sample at index `round(p * (len - 1))`
/// (so the median is the middle sample, the upper one of an even count, as [`median`] takes it).
#[derive(Serialize, Clone)]
pub struct Spread {
    samples_us: Vec<f64>,
    min_us: f64,
    q1_us: f64,
    median_us: f64,
    q3_us: f64,
    max_us: f64,
    /// `q3_us - q1_us`.
    iqr_us: f64,
}

impl Spread {
    fn of(v: &[Duration]) -> Spread {
        let samples_us: Vec<f64> = v.iter().map(|&d| us(d)).collect();
        let mut s = samples_us.clone();
        s.sort_by(f64::total_cmp);
        let q = |p: f64| if s.is_empty() { 0.0 } else { s[(p * (s.len() - 1) as f64).round() as usize] };
        let (q1, q3) = (q(0.25), q(0.75));
        Spread { min_us: q(0.0), q1_us: q1, median_us: q(0.5), q3_us: q3, max_us: q(1.0), iqr_us: q3 - q1, samples_us }
    }
}

/// The reference C++ runtime's figures, from its own simulator (a2a3sim) on a 2-core machine of
/// the class pto-rt is measured on, taken on 2026-12-03 in one sitting with a run of this
/// benchmark (`docs/benchmarks.md`, the 2026-12-03 table): per shape and runtime, the whole run
/// at N=4000 in ms, and the part of it that is the host's graph build (already added in).
/// They were taken on another day than any run of this binary: compare ratios, and expect them
/// to move by tens of percent with the machine's load.
pub const REFERENCE_DATE: &str = "2026-12-03";
/// `(shape, runtime, whole run at N=4000 in ms, of which graph build)`; see [`REFERENCE_DATE`].
pub const REFERENCE: [(&str, &str, f64, f64); 6] = [
    ("chain", "trb", 411.0, 0.0),
    ("chain", "hbg", 703.0 + 8.5, 8.5),
    ("fanout", "trb", 178.0, 0.0),
    ("fanout", "hbg", 122.0 + 56.0, 56.0),
    ("independent", "trb", 273.0, 0.0),
    ("independent", "hbg", 80.0 + 50.0, 50.0),
];

/// The reference's whole run at N=4000 for `shape` on `runtime` (ms), on the board it was
/// measured on (simulated a2a3) only.
fn reference_ms(shape: &str, runtime: &str) -> Option<f64> {
    if Selected::NAME != "sim-a2a3" {
        return None;
    }
    REFERENCE.iter().find(|r| r.0 == shape && r.1 == runtime).map(|r| r.2)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

struct Point {
    n: u32,
    run: Duration,
    build: Duration,
    /// Every timed round's run, and every submission sample (the builds, or each round's
    /// orchestration time).
    runs: Vec<Duration>,
    submits: Vec<Duration>,
    /// Device-side runtime: each timed round's orchestration time spent in flow control.
    flows: Vec<Duration>,
    /// The executor that ran the point (`Auto` resolves per graph).
    executor: Executor,
}

/// The command line (clap): bad flags and values exit with status 2 and the usage.
#[derive(clap::Parser)]
#[command(name = "dispatch benchmark", disable_version_flag = true, after_help = SHAPES)]
struct Cli {
    /// Timed rounds per point (after a warm-up of at least 2 rounds and 100 ms per point).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Only these shapes (comma-separated).
    #[arg(long, value_name = "SHAPE,...", value_parser = parse_shapes)]
    only: Option<String>,
    /// The runtimes.
    #[arg(long, value_enum, default_value_t = pto_testkit::RuntimeChoice::Both)]
    runtime: pto_testkit::RuntimeChoice,
    /// AICPU threads to launch (default: all of the board's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    threads: Option<u32>,
    /// The host-built graph's executor for the main table and the args-dump section: auto,
    /// legacy or resident.
    #[arg(long, value_name = "EXECUTOR", value_parser = pto_testkit::parse_executor, default_value = "auto")]
    executor: Executor,
    /// Run only the tracing on / off section.
    #[arg(long)]
    trace_cost: bool,
    /// Run only the args-dump section.
    #[arg(long)]
    dump_cost: bool,
    /// Run only the legacy / resident executor section.
    #[arg(long)]
    executor_cost: bool,
    /// Run only the section of the schedule-independent checks (off, race, init, both).
    #[arg(long)]
    check_cost: bool,
    /// Run only the faithful / coherent cache model section.
    #[arg(long)]
    cache_cost: bool,
    /// Run only the section of the simulator's engines side by side: the thread-per-agent
    /// engine against the coroutine engine (one and two host threads), fixed cost and
    /// marginal per task, every runtime and executor, in one process with the rounds
    /// interleaved.
    #[arg(long)]
    engine_cost: bool,
    /// Run only the scale point of this shape (`random-dag`: N tasks, each reading 1-4 of the
    /// last 64 outputs, seeded), with the host-built graph's memory.
    #[arg(long, value_name = "SHAPE", value_parser = ["random-dag"])]
    shape: Option<String>,
    /// Tasks of the scale point.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    n: u32,
    /// Seed of the scale point's random DAG.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Passed by `cargo bench` to every bench binary; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

const SHAPES: &str = "shapes: chain, fanout, independent, dummy_chain, dummy_fanout";

fn parse_shapes(v: &str) -> Result<String, String> {
    match v.split(',').find(|n| !ShapeKind::ALL.iter().any(|k| k.name() == *n)) {
        Some(bad) => Err(format!("unknown shape {bad:?} ({SHAPES})")),
        None => Ok(v.to_string()),
    }
}

fn main() {
    let cli = <Cli as clap::Parser>::parse();
    let rounds = cli.rounds as usize;
    let only = cli.only;
    let mut cfg = RunConfig::default().with_executor(cli.executor);
    cfg.aicpu_threads = cli.threads;
    let runtimes = cli.runtime.list();
    let (trace_cost_only, dump_cost_only, executor_cost_only) = (cli.trace_cost, cli.dump_cost, cli.executor_cost);
    if cli.shape.is_some() {
        // Before anything is allocated, so the counts are of everything the process holds.
        random_dag::ON.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    let (dev, k) = pto_testkit::setup(pto::open).unwrap_or_else(|e| {
        eprintln!("cannot open the device: {e}");
        std::process::exit(1)
    });
    if cli.shape.is_some() {
        let doc = random_dag::run(&dev, (cli.n, cli.seed, rounds), &runtimes, cli.executor, FORMAT_VERSION);
        let text = serde_json::to_string_pretty(&doc).expect("JSON");
        println!("{text}");
        let _ = std::fs::write(target_dir().join("bench-random-dag.json"), &text);
        return;
    }
    if trace_cost_only {
        print_cost(TRACE_TITLE, &TRACE_NAMES, &tracing_cost(&dev, &k, &runtimes, rounds));
        return;
    }
    if cli.engine_cost {
        engine_cost(&runtimes, rounds, cli.threads);
        return;
    }
    if cli.cache_cost {
        print_cost(CACHE_TITLE, &CACHE_NAMES, &cache_model_cost(&dev, &k, &runtimes, rounds));
        return;
    }
    if cli.check_cost {
        print_cost(CHECK_TITLE, &CHECK_NAMES, &check_cost(&dev, &k, &runtimes, rounds));
        return;
    }
    if executor_cost_only {
        print_cost(EXECUTOR_TITLE, &EXECUTOR_NAMES, &executor_cost(&dev, &k, rounds));
        return;
    }
    if dump_cost_only {
        let (rows, full) = dump_cost(&dev, &k, &runtimes, rounds, cli.executor);
        print_dump_cost(&rows, &full, cli.executor);
        return;
    }
    let mut table = Vec::new();
    for kind in ShapeKind::ALL {
        if only.as_deref().is_some_and(|o| !o.split(',').any(|n| n == kind.name())) {
            continue;
        }
        for &rt in &runtimes {
            // Every N's graph first (the host build timed three times), then the rounds
            // interleaved across the Ns: a drift of the machine, or of where the OS puts the
            // device orchestrator's thread, hits every N alike, so the marginals and the growth
            // compare like with like.
            let prepared: Vec<_> = NS
                .iter()
                .map(|&n| {
                    let mut builds = Vec::new();
                    let mut prepared = None;
                    for _ in 0..3 {
                        let p = pto_testkit::build_shape(&dev, &k, kind, n)
                            .unwrap_or_else(|e| panic!("{} N={n}: {e}", kind.name()));
                        builds.push(p.graph.build_time());
                        prepared = Some(p);
                    }
                    (n, prepared.expect("built"), builds)
                })
                .collect();
            let run_cfg = match rt {
                RuntimeKind::HostBuiltGraph => cfg.clone(),
                RuntimeKind::TensormapRing => cfg.clone().with_runtime(rt),
            };
            let mut samples: Vec<Samples> = NS.iter().map(|_| Samples::default()).collect();
            measure_rounds(rounds, |_, timed| {
                for ((n, p, _), s) in prepared.iter().zip(samples.iter_mut()) {
                    let what = format!("{} N={n} {}", kind.name(), rt.name());
                    let (rep, el) = timed_run(&dev, p, rt, &run_cfg, &what);
                    s.executor = rep.executor;
                    if timed {
                        s.runs.push(el);
                        s.orchs.push(rep.orchestration.unwrap_or_default());
                        s.flows.push(rep.orchestration_flow_wait.unwrap_or_default());
                    }
                }
            });
            let mut points = Vec::new();
            for ((n, _, builds), Samples { runs, orchs, flows, executor }) in prepared.into_iter().zip(samples) {
                // Submission: the host graph build, or the device orchestrator's own time.
                let submits = match rt {
                    RuntimeKind::HostBuiltGraph => builds,
                    RuntimeKind::TensormapRing => orchs,
                };
                points.push(Point {
                    n,
                    run: median(runs.clone()),
                    build: median(submits.clone()),
                    runs,
                    submits,
                    flows,
                    executor,
                });
            }
            table.push((kind, rt, points));
        }
    }

    let vector_process = [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing].map(time_vector_process);
    let isolated = isolated_submission(&dev, &k);
    let cache_ratio = cache_model_cost(&dev, &k, &runtimes, rounds);
    let protect_ratio = protection_cost(&dev, &k, &runtimes, rounds);
    let check_ratio = check_cost(&dev, &k, &runtimes, rounds);
    let trace_ratio = tracing_cost(&dev, &k, &runtimes, rounds);
    let (dump_rows, dump_full) = dump_cost(&dev, &k, &runtimes, rounds, cli.executor);
    let executor_ratio =
        if runtimes.contains(&RuntimeKind::HostBuiltGraph) { executor_cost(&dev, &k, rounds) } else { Vec::new() };

    println!(
        "board: {}   rounds per point: {rounds} (median, after a warm-up of at least {WARM_UP_ROUNDS} rounds and {} ms)",
        Selected::NAME,
        WARM_UP.as_millis()
    );
    println!("submission = graph build on the host (hbg) / orchestration time on the device (trb)");
    println!(
        "vs ref = the reference C++ runtime's simulator, whole run at N=4000 (+ graph build for hbg), measured on {REFERENCE_DATE} \
         (another day, same machine class), over ours (run + build for hbg) in this run: > 1 is faster"
    );
    println!(
        "{:<14} {:<4} {:<8} {:>10} {:>13} {:>13} {:>11} {:>12} {:>12} {:>7} {:>21}",
        "shape",
        "rt",
        "executor",
        "run(1) ms",
        "marg@1000 us",
        "marg@4000 us",
        "submit@1 ms",
        "submit@1000",
        "submit@4000",
        "x4000",
        "vs ref@4000"
    );
    let mut shapes = Vec::new();
    for (kind, rt, pts) in &table {
        let fixed = pts[0].run;
        let marg = |p: &Point| (us(p.run) - us(fixed)) / (p.n as f64 - 1.0);
        let growth = us(pts[2].build) / us(pts[1].build).max(1e-3);
        // The whole run: the run, plus the build for the host-built graph.
        let whole = |p: &Point| match rt {
            RuntimeKind::HostBuiltGraph => p.run + p.build,
            RuntimeKind::TensormapRing => p.run,
        };
        let at4000 = pts.iter().find(|p| p.n == 4000);
        let reference = reference_ms(kind.name(), rt.name()).zip(at4000).map(|(ms, p)| Reference {
            date: REFERENCE_DATE,
            n: 4000,
            reference_whole_ms: ms,
            whole_ms: us(whole(p)) / 1e3,
            ratio: ms / (us(whole(p)) / 1e3),
        });
        let vs = match &reference {
            Some(r) => format!("{:.1}x ({:.0}/{:.1} ms)", r.ratio, r.reference_whole_ms, r.whole_ms),
            None => "-".to_string(),
        };
        println!(
            "{:<14} {:<4} {:<8} {:>10.3} {:>13.3} {:>13.3} {:>11.3} {:>12.3} {:>12.3} {:>7.2} {:>21}",
            kind.name(),
            rt.name(),
            pts[1].executor.name(),
            us(fixed) / 1e3,
            marg(&pts[1]),
            marg(&pts[2]),
            us(pts[0].build) / 1e3,
            us(pts[1].build) / 1e3,
            us(pts[2].build) / 1e3,
            growth,
            vs
        );
        shapes.push(ShapeResult {
            shape: kind.name(),
            runtime: rt.name(),
            executor: pts[1].executor.name(),
            fixed_us: us(fixed),
            marginal_us_per_task: Marginal { n1000: marg(&pts[1]), n4000: marg(&pts[2]) },
            submit_growth_1000_to_4000: growth,
            points: pts
                .iter()
                .map(|p| ShapePoint {
                    n: p.n,
                    run_us: us(p.run),
                    submit_us: us(p.build),
                    whole_us: us(whole(p)),
                    run: Spread::of(&p.runs),
                    submit: Spread::of(&p.submits),
                    flow_wait_us: (*rt == RuntimeKind::TensormapRing).then(|| us(median(p.flows.clone()))),
                })
                .collect(),
            reference,
        });
    }
    let trb_rows: Vec<_> = table.iter().filter(|(_, rt, _)| *rt == RuntimeKind::TensormapRing).collect();
    if !trb_rows.is_empty() {
        println!(
            "device-side orchestration: of its time (median), the part waiting in flow control (room in a ring or the tensor map):"
        );
        for (kind, _, pts) in trb_rows {
            let line: Vec<String> = pts
                .iter()
                .filter(|p| p.n > 1)
                .map(|p| {
                    let flow = us(median(p.flows.clone()));
                    format!("N={:<5} {:>8.3} of {:>8.3} ms", p.n, flow / 1e3, us(p.build) / 1e3)
                })
                .collect();
            println!("  {:<12} {}", kind.name(), line.join("   "));
        }
    }
    for (rt, d) in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing].iter().zip(&vector_process) {
        match d {
            Some(d) => println!("vector example process, runtime {} (median of 5): {:.1} ms", rt.name(), us(*d) / 1e3),
            None => println!(
                "vector example process: not measured (build it with `cargo build --release --example vector`)"
            ),
        }
    }
    println!("submission in isolation (host build of the same orchestration, device idle, median of 15):");
    for (name, t1, t4) in &isolated {
        println!(
            "  {name:<12} N=1000 {:>7.3} ms  N=4000 {:>7.3} ms  growth x{:.2}",
            us(*t1) / 1e3,
            us(*t4) / 1e3,
            t4.as_secs_f64() / t1.as_secs_f64()
        );
    }
    print_cost(CACHE_TITLE, &CACHE_NAMES, &cache_ratio);
    print_cost(PROTECT_TITLE, &PROTECT_NAMES, &protect_ratio);
    print_cost(CHECK_TITLE, &CHECK_NAMES, &check_ratio);
    print_cost(TRACE_TITLE, &TRACE_NAMES, &trace_ratio);
    print_cost(EXECUTOR_TITLE, &EXECUTOR_NAMES, &executor_ratio);
    print_dump_cost(&dump_rows, &dump_full, cli.executor);
    let doc = BenchReport {
        format_version: FORMAT_VERSION,
        board: Selected::NAME,
        rounds,
        warm_up: WarmUpRule { min_rounds: WARM_UP_ROUNDS, min_ms: WARM_UP.as_millis() as u64 },
        shapes,
        vector_process_ms: VectorProcess {
            hbg: vector_process[0].map(|d| us(d) / 1e3),
            trb: vector_process[1].map(|d| us(d) / 1e3),
        },
        isolated_submission: isolated
            .iter()
            .map(|&(shape, a, b)| IsolatedSubmission {
                shape,
                n1000_us: us(a),
                n4000_us: us(b),
                growth: b.as_secs_f64() / a.as_secs_f64(),
            })
            .collect(),
        cache_model_cost: cache_ratio.iter().map(CacheModelCost::from_row).collect(),
        protection_cost: protect_ratio.iter().map(OnOffCost::from_row).collect(),
        check_cost: check_ratio.iter().map(CheckCost::from_row).collect(),
        tracing_cost: trace_ratio.iter().map(OnOffCost::from_row).collect(),
        dump_cost: dump_rows.iter().map(DumpCost::from_row).collect(),
        executor_cost: executor_ratio.iter().map(ExecutorCost::from_row).collect(),
    };
    let text = serde_json::to_string_pretty(&doc).expect("JSON");
    println!("{text}");
    let _ = std::fs::write(target_dir().join("bench-dispatch.json"), &text);
}

/// The host build of the fanout and independent shapes at N = 1000 and 4000 with nothing
/// running on the device: the tensor map and graph builder alone.
fn isolated_submission(dev: &Device, k: &pto_testkit::Kernels) -> Vec<(&'static str, Duration, Duration)> {
    let mut out = Vec::new();
    // Let the simulated agents of the last run stop spinning and park first.
    std::thread::sleep(Duration::from_millis(200));
    for kind in [ShapeKind::Fanout, ShapeKind::Independent] {
        let mut t = [Duration::ZERO; 2];
        for (i, n) in [1000u32, 4000].into_iter().enumerate() {
            let p = pto_testkit::build_shape(dev, k, kind, n).unwrap_or_else(|e| panic!("{e}"));
            let times = (0..15)
                .map(|_| {
                    let s = Instant::now();
                    let g = dev.build_program(&p.program, &p.args).unwrap_or_else(|e| panic!("{e}"));
                    let el = s.elapsed();
                    drop(g);
                    el
                })
                .collect();
            t[i] = median(times);
        }
        out.push((kind.name(), t[0], t[1]));
    }
    out
}

/// The coherent (variant 0) and the faithful (1) cache model, on each runtime, on the same
/// device and graph. Not interleaved: switching to the faithful model empties its caches and
/// line records (it did not see the coherent runs), so the faithful rounds run in a block, as
/// a process that keeps the model on runs, each after the warm-up runs.
fn cache_model_cost(dev: &Device, k: &pto_testkit::Kernels, runtimes: &[RuntimeKind], rounds: usize) -> Vec<CostRow> {
    use pto_sim::CacheModel;
    let models = [CacheModel::Coherent, CacheModel::Faithful { seed: 1, evict_per_mille: 20 }];
    let was = dev.platform().cache_model();
    let mut out = Vec::new();
    for kind in [ShapeKind::Chain, ShapeKind::Independent] {
        let p = pto_testkit::build_shape(dev, k, kind, 1000).unwrap_or_else(|e| panic!("{e}"));
        for &rt in runtimes {
            let cfg = RunConfig::default().with_runtime(rt);
            let mut stats = Vec::new();
            for model in models {
                dev.platform().set_cache_model(model).expect("no launch is active");
                let mut runs = Vec::new();
                let what = format!("{} {}", kind.name(), rt.name());
                measure_rounds(rounds, |_, timed| {
                    let (_, el) = timed_run(dev, &p, rt, &cfg, &what);
                    if timed {
                        runs.push(el);
                    }
                });
                stats.push([runs.iter().copied().min().unwrap_or_default(), median(runs)]);
            }
            out.push((kind.name(), rt, stats));
        }
    }
    dev.platform().set_cache_model(was).expect("no launch is active");
    out
}

/// A shape built on the selected board.
type Shape = pto_testkit::Prepared<pto::SelectedPlatform>;

/// Reset `p`, run it on `rt` under `cfg` and check it against its golden: the report and the
/// run's own time (the reset and the check are not timed). `what` names the point in a panic.
fn timed_run(dev: &Device, p: &Shape, rt: RuntimeKind, cfg: &RunConfig, what: &str) -> (RunReport, Duration) {
    p.reset().expect("reset");
    let t = Instant::now();
    let rep = match rt {
        RuntimeKind::HostBuiltGraph => dev.run_with(&p.graph, cfg),
        RuntimeKind::TensormapRing => dev.run_program(&p.program, &p.args, cfg),
    }
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let el = t.elapsed();
    p.check(&rep).unwrap_or_else(|e| panic!("{what}: {e}"));
    (rep, el)
}

/// One row of an interleaved comparison: a shape and runtime, and per variant its median and
/// minimum run time (the minimum is the least disturbed run).
type CostRow = (&'static str, RuntimeKind, Vec<[Duration; 2]>);

/// Run the chain and independent shapes at N=1000 on each runtime under each of `variants`
/// configurations, the rounds interleaved (the order rotates every round) so drift on a busy
/// host hits every variant alike. `set(i)` switches device-wide settings for variant `i`,
/// `cfg(i, rt)` gives its run configuration, and `check(i, &report)` checks what it reported.
fn interleaved_cost(
    dev: &Device,
    k: &pto_testkit::Kernels,
    (runtimes, rounds): (&[RuntimeKind], usize),
    variants: usize,
    set: &dyn Fn(usize),
    cfg: &dyn Fn(usize, RuntimeKind) -> RunConfig,
    check: &mut dyn FnMut(usize, &RunReport, Duration, bool),
) -> Vec<CostRow> {
    let mut out = Vec::new();
    for kind in [ShapeKind::Chain, ShapeKind::Independent] {
        let p = pto_testkit::build_shape(dev, k, kind, 1000).unwrap_or_else(|e| panic!("{e}"));
        for &rt in runtimes {
            let mut runs = vec![Vec::new(); variants];
            let what = format!("{} {}", kind.name(), rt.name());
            measure_rounds(rounds, |r, timed| {
                for j in 0..variants {
                    let i = (j + r) % variants;
                    set(i);
                    let (rep, el) = timed_run(dev, &p, rt, &cfg(i, rt), &what);
                    check(i, &rep, el, timed);
                    if timed {
                        runs[i].push(el);
                    }
                }
            });
            let stats = runs.into_iter().map(|v| [v.iter().copied().min().unwrap_or_default(), median(v)]).collect();
            out.push((kind.name(), rt, stats));
        }
    }
    out
}

/// Memory protection off (variant 0) and on (1).
fn protection_cost(dev: &Device, k: &pto_testkit::Kernels, runtimes: &[RuntimeKind], rounds: usize) -> Vec<CostRow> {
    let was = dev.platform().protection();
    let set = |i: usize| dev.platform().set_protection(i == 1).expect("no launch is active");
    let rows = interleaved_cost(
        dev,
        k,
        (runtimes, rounds),
        2,
        &set,
        &|_, rt| RunConfig::default().with_runtime(rt),
        &mut |_, _, _, _| {},
    );
    dev.platform().set_protection(was).expect("no launch is active");
    rows
}

/// The checks off (variant 0), racecheck (1), initcheck (2) and both (3).
fn check_cost(dev: &Device, k: &pto_testkit::Kernels, runtimes: &[RuntimeKind], rounds: usize) -> Vec<CostRow> {
    let checks = [Checks::OFF, Checks { race: true, init: false }, Checks { race: false, init: true }, Checks::ALL];
    let cfg = |i: usize, rt| RunConfig::default().with_runtime(rt).with_check(checks[i]);
    let rows = interleaved_cost(dev, k, (runtimes, rounds), 4, &|_| {}, &cfg, &mut |i, rep, _, _| {
        assert_eq!(rep.checks, checks[i], "the run ran the checks asked for");
    });
    dev.platform().set_checks(Checks::OFF).expect("no launch is active");
    rows
}

/// The simulator's engines side by side (`--engine-cost`): one device per engine, the same
/// shapes at N=1 and N=1000 on each, the rounds interleaved across the devices so load hits
/// them alike. Prints, per shape, runtime and executor, each engine's fixed cost run(1) and
/// marginal µs per task, and its ratio to the thread engine's.
fn engine_cost(runtimes: &[RuntimeKind], rounds: usize, threads: Option<u32>) {
    use pto_sim::SimEngine;
    let engines = [SimEngine::Threads, SimEngine::Coroutines { threads: 1 }, SimEngine::Coroutines { threads: 2 }];
    let devs: Vec<_> = engines
        .iter()
        .map(|&e| {
            pto_sim::with_engine(Some(e), None, || pto_testkit::setup(pto::open))
                .unwrap_or_else(|err| panic!("open on {e}: {err}"))
        })
        .collect();
    println!("engines side by side: run(1) ms / marginal us per task at N=1000 (median of {rounds}; ratio to threads)");
    for kind in [ShapeKind::Chain, ShapeKind::Independent, ShapeKind::Fanout] {
        for &rt in runtimes {
            let execs: &[Executor] = match rt {
                RuntimeKind::HostBuiltGraph => &[Executor::Legacy, Executor::Resident],
                RuntimeKind::TensormapRing => &[Executor::Legacy],
            };
            for &exec in execs {
                let mut cfg = RunConfig::default().with_runtime(rt).with_executor(exec);
                cfg.aicpu_threads = threads;
                let preps: Vec<Vec<_>> = devs
                    .iter()
                    .map(|(d, k)| {
                        [1, 1000].iter().map(|&n| pto_testkit::build_shape(d, k, kind, n).expect("shape")).collect()
                    })
                    .collect();
                let mut samples = vec![[Vec::new(), Vec::new()]; engines.len()];
                measure_rounds(rounds, |_, timed| {
                    for (e, (d, _)) in devs.iter().enumerate() {
                        let what = format!("{} {} on {}", kind.name(), rt.name(), engines[e]);
                        for (i, p) in preps[e].iter().enumerate() {
                            let (_, el) = timed_run(d, p, rt, &cfg, &what);
                            if timed {
                                samples[e][i].push(el);
                            }
                        }
                    }
                });
                let stats: Vec<(f64, f64)> = samples
                    .into_iter()
                    .map(|[one, n]| {
                        let (one, n) = (us(median(one)), us(median(n)));
                        (one / 1e3, (n - one) / 999.0)
                    })
                    .collect();
                let mut line = format!("  {:<12} {:<4} {:<8}", kind.name(), rt.name(), exec.to_string());
                for (e, (fixed, marg)) in stats.iter().enumerate() {
                    line += &format!("  {} {fixed:>6.3} ms {marg:>6.2} us", engines[e]);
                    if e > 0 {
                        line += &format!(" ({:.2}x, {:.2}x)", fixed / stats[0].0, marg / stats[0].1.max(1e-9));
                    }
                }
                println!("{line}");
            }
        }
    }
}

/// The host-built graph on the legacy executor (variant 0) and on the resident one (1).
fn executor_cost(dev: &Device, k: &pto_testkit::Kernels, rounds: usize) -> Vec<CostRow> {
    let execs = [Executor::Legacy, Executor::Resident];
    let cfg = |i: usize, rt| RunConfig::default().with_runtime(rt).with_executor(execs[i]);
    interleaved_cost(dev, k, (&[RuntimeKind::HostBuiltGraph], rounds), 2, &|_| {}, &cfg, &mut |i, rep, _, _| {
        assert_eq!(rep.executor, execs[i], "the run was on the executor asked for");
    })
}

/// Tracing off (variant 0) and on (1).
fn tracing_cost(dev: &Device, k: &pto_testkit::Kernels, runtimes: &[RuntimeKind], rounds: usize) -> Vec<CostRow> {
    let cfg = |i: usize, rt| RunConfig::default().with_runtime(rt).with_trace(i == 1);
    interleaved_cost(dev, k, (runtimes, rounds), 2, &|_| {}, &cfg, &mut |i, rep, _, _| {
        let t = rep.trace.as_ref();
        assert_eq!(t.is_some(), i == 1, "a trace exactly when tracing is on");
        if let Some(t) = t {
            assert!(t.is_complete(), "trace lost records: {:?}", t.rings);
        }
    })
}

/// The args dump off (variant 0), at `Partial` with nothing marked (1: the selection test and
/// the lanes, no record), and at `Full` (2), the host-built graph on `executor` (on the
/// resident executor the cores capture at their task boundaries; on the legacy one the AICPU
/// threads do). Returns the rows and, per row order, the `Full`
/// runs' (records, payload bytes, run time) summed.
fn dump_cost(
    dev: &Device,
    k: &pto_testkit::Kernels,
    runtimes: &[RuntimeKind],
    rounds: usize,
    executor: Executor,
) -> (Vec<CostRow>, Vec<(u64, u64, Duration)>) {
    use pto::runtime::dump::DumpLevel;
    let dir = std::env::temp_dir().join(format!("pto-bench-dump-{}", std::process::id()));
    let cfg = |i: usize, rt| {
        let level = [None, Some(DumpLevel::Partial), Some(DumpLevel::Full)][i];
        RunConfig::default().with_runtime(rt).with_executor(executor).with_dump(level).with_dump_dir(&dir)
    };
    let mut full = Vec::new();
    let mut rows_seen = 0usize;
    let mut acc = (0u64, 0u64, Duration::ZERO);
    let mut last_runs = 0usize;
    let rows = interleaved_cost(dev, k, (runtimes, rounds), 3, &|_| {}, &cfg, &mut |i, rep, el, timed| {
        assert_eq!(rep.dump.is_some(), i > 0, "a dump report exactly when the dump is on");
        if i == 2 {
            let d = rep.dump.as_ref().expect("dump report");
            assert_eq!(d.accounting.dropped, Some(0), "the benchmark's dumps lose nothing");
        }
        // The rates are the timed rounds' (each has one `Full` run; the warm-up comes first).
        if i == 2 && timed {
            let d = rep.dump.as_ref().expect("dump report");
            acc.0 += d.accounting.collected;
            acc.1 += d.payload_bytes;
            acc.2 += el;
            last_runs += 1;
            if last_runs == rounds {
                full.push(acc);
                acc = (0, 0, Duration::ZERO);
                last_runs = 0;
                rows_seen += 1;
            }
        }
    });
    let _ = std::fs::remove_dir_all(&dir);
    debug_assert_eq!(rows_seen, rows.len());
    (rows, full)
}

const CACHE_TITLE: &str =
    "faithful / coherent cache model, run time at N=1000 (same device, same graph; each model's rounds in a block):";
const CACHE_NAMES: [&str; 2] = ["coherent", "faithful"];
const PROTECT_TITLE: &str =
    "memory protection on / off, run time at N=1000 (same device, same graph, rounds interleaved):";
const PROTECT_NAMES: [&str; 2] = ["off", "on"];
const CHECK_TITLE: &str = "schedule-independent checks, run time at N=1000 (same device, same graph, rounds interleaved; incl. the analysis at the end of the run):";
const CHECK_NAMES: [&str; 4] = ["off", "race", "init", "race,init"];
const TRACE_TITLE: &str = "tracing on / off, run time at N=1000 (same device, same graph, rounds interleaved; host wall incl. trace read-back):";
const TRACE_NAMES: [&str; 2] = ["off", "on"];
const DUMP_NAMES: [&str; 3] = ["off", "partial-unmarked", "full"];
const EXECUTOR_TITLE: &str =
    "host-built graph, legacy / resident executor, run time at N=1000 (same device, same graph, rounds interleaved):";
const EXECUTOR_NAMES: [&str; 2] = ["legacy", "resident"];

fn print_dump_cost(rows: &[CostRow], full: &[(u64, u64, Duration)], executor: Executor) {
    print_cost(
        &format!(
            "args dump off / partial with nothing marked (selection only) / full, run time at N=1000 (rounds interleaved; host wall incl. collection and files; hbg on executor {executor}):"
        ),
        &DUMP_NAMES,
        rows,
    );
    for ((name, rt, _), (records, bytes, t)) in rows.iter().zip(full) {
        let s = t.as_secs_f64();
        println!(
            "  {name:<12} {:<4} full: {:.0} records/s, {:.1} MB/s of payload",
            rt.name(),
            *records as f64 / s,
            *bytes as f64 / s / 1e6
        );
    }
}

/// Print `rows` against variant 0 (`names[i]` names variant i).
fn print_cost(title: &str, names: &[&str], rows: &[CostRow]) {
    println!("{title}");
    for (name, rt, stats) in rows {
        let mut line = format!("  {name:<12} {:<4}", rt.name());
        for (i, [min, med]) in stats.iter().enumerate() {
            line += &format!("  {} {:>8.3} ms", names[i], us(*med) / 1e3);
            if i > 0 {
                line += &format!(
                    " ({:.3}x, min {:.3}x)",
                    med.as_secs_f64() / stats[0][1].as_secs_f64(),
                    min.as_secs_f64() / stats[0][0].as_secs_f64()
                );
            }
        }
        println!("{line}");
    }
}

/// Version of the JSON document ([`BenchReport`], and the scale point's document): raised
/// whenever a field is renamed, removed, added or changes meaning. 2: every point keeps its
/// samples and their spread (`run`, `submit`) and its whole run (`whole_us`), every shape its
/// `reference` comparison. 4: `warm_up`, the warm-up every measurement of the dispatch document
/// takes before its timed rounds (it was two rounds).
pub const FORMAT_VERSION: u32 = 4;

/// The warm-up before a measurement's timed rounds ([`measure_rounds`]).
#[derive(Serialize)]
struct WarmUpRule {
    /// At least this many rounds.
    min_rounds: usize,
    /// And every round that starts before this many milliseconds since the first.
    min_ms: u64,
}

/// The JSON document the benchmark prints and writes to `target/bench-dispatch.json`.
#[derive(Serialize)]
struct BenchReport {
    /// [`FORMAT_VERSION`].
    format_version: u32,
    /// The selected board's name.
    board: &'static str,
    /// Timed rounds per point (after the warm-up).
    rounds: usize,
    /// The warm-up before every measurement's timed rounds.
    warm_up: WarmUpRule,
    /// Per shape and runtime: fixed cost, marginal cost per task and submission time.
    shapes: Vec<ShapeResult>,
    /// Wall time of the `vector` example process per runtime in ms (`null`: not built).
    vector_process_ms: VectorProcess,
    /// The host build alone, device idle.
    isolated_submission: Vec<IsolatedSubmission>,
    /// Faithful versus coherent cache model.
    cache_model_cost: Vec<CacheModelCost>,
    /// Memory protection off versus on.
    protection_cost: Vec<OnOffCost>,
    /// The schedule-independent checks: off, racecheck, initcheck, both.
    check_cost: Vec<CheckCost>,
    /// Tracing off versus on.
    tracing_cost: Vec<OnOffCost>,
    /// The args dump off, partial with nothing marked, and full.
    dump_cost: Vec<DumpCost>,
    /// The host-built graph on the legacy and the resident executor.
    executor_cost: Vec<ExecutorCost>,
}

/// One shape on one runtime.
#[derive(Serialize)]
struct ShapeResult {
    shape: &'static str,
    runtime: &'static str,
    /// The executor that ran it at N=1000 (`legacy` or `resident`).
    executor: &'static str,
    /// Median run time at N=1, µs.
    fixed_us: f64,
    /// (run(N) - run(1)) / (N - 1), µs.
    marginal_us_per_task: Marginal,
    /// Submission time at N=4000 over N=1000.
    submit_growth_1000_to_4000: f64,
    points: Vec<ShapePoint>,
    /// The whole run at N=4000 against the reference's (`null`: no reference figure for this
    /// shape and runtime, or another board).
    reference: Option<Reference>,
}

/// The whole run at N=4000 against the reference runtime's, measured on another day
/// ([`REFERENCE`]).
#[derive(Serialize)]
struct Reference {
    /// When the reference's figure was taken.
    date: &'static str,
    n: u32,
    /// The reference's whole run (its run, plus its graph build for the host-built graph), ms.
    reference_whole_ms: f64,
    /// Ours in this run (median run, plus the median build for the host-built graph), ms.
    whole_ms: f64,
    /// `reference_whole_ms / whole_ms`: how many times faster pto-rt was.
    ratio: f64,
}

/// Marginal µs per task, keyed by N.
#[derive(Serialize)]
struct Marginal {
    #[serde(rename = "1000")]
    n1000: f64,
    #[serde(rename = "4000")]
    n4000: f64,
}

/// One N of a shape: median run time and submission time, µs, and the samples behind them.
#[derive(Serialize)]
struct ShapePoint {
    n: u32,
    /// `run.median_us`.
    run_us: f64,
    /// `submit.median_us`.
    submit_us: f64,
    /// The run plus, for the host-built graph, the build (medians), µs.
    whole_us: f64,
    /// The timed rounds' run times.
    run: Spread,
    /// The submission samples: the graph's builds (3, hbg) or each timed round's orchestration
    /// time (trb).
    submit: Spread,
    /// Device-side runtime: the median of the rounds' orchestration time spent waiting in flow
    /// control (room in a ring or the tensor map), µs; `null` for the host-built graph.
    flow_wait_us: Option<f64>,
}

/// The `vector` example process, ms per runtime.
#[derive(Serialize)]
struct VectorProcess {
    hbg: Option<f64>,
    trb: Option<f64>,
}

/// Median host build of one shape at N=1000 and N=4000, µs.
#[derive(Serialize)]
struct IsolatedSubmission {
    shape: &'static str,
    n1000_us: f64,
    n4000_us: f64,
    /// `n4000_us / n1000_us`.
    growth: f64,
}

/// Median run time of one shape under each cache model, µs.
#[derive(Serialize)]
struct CacheModelCost {
    shape: &'static str,
    runtime: &'static str,
    n: u32,
    /// Medians, µs.
    coherent_us: f64,
    faithful_us: f64,
    /// Minimums (the least disturbed rounds), µs.
    coherent_min_us: f64,
    faithful_min_us: f64,
    /// `faithful_us / coherent_us`.
    ratio: f64,
}

impl CacheModelCost {
    fn from_row(&(shape, rt, ref stats): &CostRow) -> CacheModelCost {
        let ([c_min, c], [f_min, f]) = (stats[0], stats[1]);
        CacheModelCost {
            shape,
            runtime: rt.name(),
            n: 1000,
            coherent_us: us(c),
            faithful_us: us(f),
            coherent_min_us: us(c_min),
            faithful_min_us: us(f_min),
            ratio: f.as_secs_f64() / c.as_secs_f64(),
        }
    }
}

/// A two-variant comparison row (variants `off` and `on`: [`PROTECT_NAMES`], [`TRACE_NAMES`]):
/// median and minimum run time in µs, and the medians' ratio on / off.
#[derive(Serialize)]
struct OnOffCost {
    shape: &'static str,
    runtime: &'static str,
    n: u32,
    off_us: f64,
    off_min_us: f64,
    on_us: f64,
    on_min_us: f64,
    on_ratio: f64,
}

impl OnOffCost {
    fn from_row(&(shape, rt, ref stats): &CostRow) -> OnOffCost {
        let ([off_min, off], [on_min, on]) = (stats[0], stats[1]);
        OnOffCost {
            shape,
            runtime: rt.name(),
            n: 1000,
            off_us: us(off),
            off_min_us: us(off_min),
            on_us: us(on),
            on_min_us: us(on_min),
            on_ratio: on.as_secs_f64() / off.as_secs_f64(),
        }
    }
}

/// A row of the checks' cost ([`CHECK_NAMES`]): median run time in µs per setting, and each
/// setting's median over the `off` median.
#[derive(Serialize)]
struct CheckCost {
    shape: &'static str,
    runtime: &'static str,
    n: u32,
    off_us: f64,
    race_us: f64,
    race_ratio: f64,
    init_us: f64,
    init_ratio: f64,
    both_us: f64,
    both_ratio: f64,
}

impl CheckCost {
    fn from_row(&(shape, rt, ref stats): &CostRow) -> CheckCost {
        let (off, race, init, both) = (stats[0][1], stats[1][1], stats[2][1], stats[3][1]);
        let r = |d: Duration| d.as_secs_f64() / off.as_secs_f64();
        CheckCost {
            shape,
            runtime: rt.name(),
            n: 1000,
            off_us: us(off),
            race_us: us(race),
            race_ratio: r(race),
            init_us: us(init),
            init_ratio: r(init),
            both_us: us(both),
            both_ratio: r(both),
        }
    }
}

/// A row of the executor comparison ([`EXECUTOR_NAMES`]): median and minimum run time in µs on
/// each executor, and the resident median over the legacy one.
#[derive(Serialize)]
struct ExecutorCost {
    shape: &'static str,
    n: u32,
    legacy_us: f64,
    legacy_min_us: f64,
    resident_us: f64,
    resident_min_us: f64,
    resident_ratio: f64,
}

impl ExecutorCost {
    fn from_row(&(shape, _, ref stats): &CostRow) -> ExecutorCost {
        let ([lmin, l], [rmin, r]) = (stats[0], stats[1]);
        ExecutorCost {
            shape,
            n: 1000,
            legacy_us: us(l),
            legacy_min_us: us(lmin),
            resident_us: us(r),
            resident_min_us: us(rmin),
            resident_ratio: r.as_secs_f64() / l.as_secs_f64(),
        }
    }
}

/// A row of the args dump's cost ([`DUMP_NAMES`]): median and minimum run time in µs per
/// level, and each level's median over the `off` median.
#[derive(Serialize)]
struct DumpCost {
    shape: &'static str,
    runtime: &'static str,
    n: u32,
    off_us: f64,
    off_min_us: f64,
    #[serde(rename = "partial-unmarked_us")]
    partial_unmarked_us: f64,
    #[serde(rename = "partial-unmarked_min_us")]
    partial_unmarked_min_us: f64,
    #[serde(rename = "partial-unmarked_ratio")]
    partial_unmarked_ratio: f64,
    full_us: f64,
    full_min_us: f64,
    full_ratio: f64,
}

impl DumpCost {
    fn from_row(&(shape, rt, ref stats): &CostRow) -> DumpCost {
        let ([off_min, off], [partial_min, partial], [full_min, full]) = (stats[0], stats[1], stats[2]);
        DumpCost {
            shape,
            runtime: rt.name(),
            n: 1000,
            off_us: us(off),
            off_min_us: us(off_min),
            partial_unmarked_us: us(partial),
            partial_unmarked_min_us: us(partial_min),
            partial_unmarked_ratio: partial.as_secs_f64() / off.as_secs_f64(),
            full_us: us(full),
            full_min_us: us(full_min),
            full_ratio: full.as_secs_f64() / off.as_secs_f64(),
        }
    }
}

fn target_dir() -> std::path::PathBuf {
    // benches run from target/<profile>/deps/
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors().nth(3).map(|p| p.to_path_buf()).unwrap_or_else(|| std::path::PathBuf::from("target"))
}

fn time_vector_process(rt: RuntimeKind) -> Option<Duration> {
    let exe = std::env::current_exe().ok()?;
    let vector = exe.parent()?.parent()?.join("examples").join("vector");
    if !vector.exists() {
        return None;
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let ok = Command::new(&vector).args(["--runtime", rt.name()]).output().ok()?.status.success();
        if !ok {
            return None;
        }
        times.push(t.elapsed());
    }
    Some(median(times))
}
