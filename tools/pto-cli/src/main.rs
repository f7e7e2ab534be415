//! `pto`: the pto-rt command line.
//!
//! * `pto run EXAMPLE` runs one of the examples' workloads on a simulated board, checks its
//!   golden, and can write the run's swimlane trace (`--trace t.json` for Perfetto, `--svg
//!   t.svg` for a browser).
//! * `pto bench` times the dispatch shapes (median of rounds) with progress bars.
//! * `pto trace FILE.json --summary` reads a trace back: per-core utilisation, critical path.
//! * `pto dump DIR` is the args-dump viewer; the args dump does not exist yet, so it (and
//!   `run --dump`) fails saying so, as does `run --executor resident`.
//!
//! Every sim board is compiled in; `--board` opens one by name.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto::runtime::orch::RuntimeKind;
use pto_sim::CacheModel;
use pto_testkit::{Device, Kernels, ShapeKind, Workload};
use serde_json::Value;

#[derive(Parser, Debug)]
#[command(name = "pto", version, about = "pto-rt: run, trace and bench task-graph runtimes on simulated boards")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run an example's workload, check its golden, optionally write its trace.
    Run(RunArgs),
    /// Time the dispatch shapes (median of rounds).
    Bench(BenchArgs),
    /// Read an args dump directory (not built yet: fails saying so).
    Dump(DumpArgs),
    /// Read a Chrome trace-event JSON written by `pto run --trace`.
    Trace(TraceArgs),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Example {
    Vector,
    Chain513,
    Mix,
    TinyRings,
    ManualScope,
    Bgemm,
    PagedAttentionSmall,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum BoardName {
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
enum Runtimes {
    Hbg,
    Trb,
    Both,
}

impl Runtimes {
    fn list(self) -> Vec<RuntimeKind> {
        match self {
            Runtimes::Hbg => vec![RuntimeKind::HostBuiltGraph],
            Runtimes::Trb => vec![RuntimeKind::TensormapRing],
            Runtimes::Both => pto_testkit::RUNTIMES.to_vec(),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Executor {
    /// The legacy executor (the only one built).
    Auto,
    /// The AICPU dispatches, the core executes.
    Legacy,
    /// Schedulers on the cores (not built yet: refused).
    Resident,
}

#[derive(Parser, Debug)]
struct RunArgs {
    /// The example.
    #[arg(value_enum)]
    example: Example,
    /// The simulated board.
    #[arg(long, value_enum, default_value = "sim-a2a3")]
    board: BoardName,
    /// The runtime(s).
    #[arg(long, value_enum, default_value = "both")]
    runtime: Runtimes,
    /// The AICore executor.
    #[arg(long, value_enum, default_value = "auto")]
    executor: Executor,
    /// The simulator's cache model: coherent, faithful or faithful:SEED (as PTO_SIM_CACHE).
    #[arg(long, value_parser = parse_cache)]
    cache: Option<CacheModel>,
    /// Write the Chrome trace-event JSON (Perfetto) here; with both runtimes this is the
    /// host-built graph's, and the device-side runtime's gets `.trb` before the extension.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
    /// Write the SVG swimlane here (same naming rule).
    #[arg(long, value_name = "FILE.svg")]
    svg: Option<PathBuf>,
    /// Args-dump level (not built yet: refused).
    #[arg(long, value_name = "LEVEL")]
    dump: Option<String>,
    /// Args-dump output directory (with --dump).
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
}

#[derive(Parser, Debug)]
struct BenchArgs {
    /// Shapes to time (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["chain", "fanout", "independent", "dummy-chain", "dummy-fanout"])]
    shapes: Vec<Shape>,
    /// Tasks per shape.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
    /// Timed rounds per shape and runtime (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// The simulated board.
    #[arg(long, value_enum, default_value = "sim-a2a3")]
    board: BoardName,
    /// The runtime(s).
    #[arg(long, value_enum, default_value = "both")]
    runtime: Runtimes,
    /// Trace every timed run too (to measure what tracing costs).
    #[arg(long)]
    traced: bool,
    /// Write the results as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum Shape {
    Chain,
    Fanout,
    Independent,
    DummyChain,
    DummyFanout,
}

impl Shape {
    fn kind(self) -> ShapeKind {
        match self {
            Shape::Chain => ShapeKind::Chain,
            Shape::Fanout => ShapeKind::Fanout,
            Shape::Independent => ShapeKind::Independent,
            Shape::DummyChain => ShapeKind::DummyChain,
            Shape::DummyFanout => ShapeKind::DummyFanout,
        }
    }
}

#[derive(Parser, Debug)]
struct DumpArgs {
    /// The dump directory.
    dir: PathBuf,
    /// Print one task's tensor.
    #[arg(long, requires = "arg")]
    task: Option<u32>,
    /// Which argument of the task.
    #[arg(long, requires = "task")]
    arg: Option<u32>,
}

#[derive(Parser, Debug)]
struct TraceArgs {
    /// A Chrome trace-event JSON written by `pto run --trace`.
    file: PathBuf,
    /// Print per-core utilisation and the critical path.
    #[arg(long)]
    summary: bool,
}

fn parse_cache(s: &str) -> Result<CacheModel, String> {
    let ok = match s.split_once(':') {
        None => s == "coherent" || s == "faithful",
        Some(("faithful", seed)) => seed.parse::<u64>().is_ok(),
        _ => false,
    };
    match CacheModel::parse(s) {
        Some(m) if ok => Ok(m),
        _ => Err(format!("{s:?}: expected coherent, faithful or faithful:SEED (SEED an integer)")),
    }
}

/// A failure: its message and exit status (2 for a request this build cannot serve).
struct Fail(String, u8);

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(e.to_string(), 1)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run(a) => run(&a),
        Cmd::Bench(a) => bench(&a),
        Cmd::Dump(a) => dump(&a),
        Cmd::Trace(a) => trace(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(msg, code)) => {
            eprintln!("pto: {msg}");
            ExitCode::from(code)
        }
    }
}

/// What `pto` needs of a simulated device beyond the runtime: its cache model switch.
trait SimControl {
    fn set_cache(&self, m: CacheModel) -> Result<(), String>;
}

impl<C: pto::hal::Contract> SimControl for pto_sim::SimDevice<C> {
    fn set_cache(&self, m: CacheModel) -> Result<(), String> {
        self.set_cache_model(m).map_err(|e| e.to_string())
    }
}

/// Open board `B` (every sim board's device half runs in this process), set its cache model,
/// register the workloads' kernels.
fn open<B: Board>(cache: Option<CacheModel>) -> Result<(Device<B::Platform>, Kernels), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    let dev = pto::open_board::<B>().map_err(|e| Fail(format!("cannot open board {}: {e}", B::NAME), 1))?;
    if let Some(m) = cache {
        dev.platform().set_cache(m).map_err(|e| Fail(format!("cannot set the cache model: {e}"), 1))?;
    }
    let k = Kernels::register(&dev)?;
    Ok((dev, k))
}

fn run(a: &RunArgs) -> Result<(), Fail> {
    if a.executor == Executor::Resident {
        return Err(Fail(
            "--executor resident: the resident executor (schedulers on the AICores) is not built yet; only the legacy executor exists (use --executor legacy or auto)".into(),
            2,
        ));
    }
    if a.dump.is_some() || a.dump_dir.is_some() {
        return Err(Fail(
            "--dump / --dump-dir: the args dump (tensor capture per task, docs/args-dump) is not built yet; nothing can be dumped".into(),
            2,
        ));
    }
    match a.board {
        BoardName::SimA2a3 => run_on::<SimA2a3>(a),
        BoardName::SimA5 => run_on::<SimA5>(a),
        BoardName::SimMini => run_on::<SimMini>(a),
    }
}

fn workload<P: HostPlatform>(e: Example) -> (&'static str, Workload<P>) {
    match e {
        Example::Vector => ("vector", pto_testkit::vector::<P>),
        Example::Chain513 => ("chain513", pto_testkit::chain513::<P>),
        Example::Mix => ("mix", pto_testkit::mix::<P>),
        Example::TinyRings => ("tiny_rings", pto_testkit::tiny_rings::<P>),
        Example::ManualScope => ("manual_scope", pto_testkit::manual_scope::<P>),
        Example::Bgemm => ("bgemm", pto_testkit::attention::bgemm::<P>),
        Example::PagedAttentionSmall => ("paged_attention_small", pto_testkit::attention::paged_attention_small::<P>),
    }
}

fn run_on<B: Board>(a: &RunArgs) -> Result<(), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    let (dev, k) = open::<B>(a.cache)?;
    let (name, w) = workload::<B::Platform>(a.example);
    let rts = a.runtime.list();
    let tracing = a.trace.is_some() || a.svg.is_some();
    let mut failed = 0;
    for &rt in &rts {
        match pto_testkit::traced(tracing, || w(&dev, &k, rt)) {
            Ok(o) => {
                println!("{}", o.summary(B::NAME));
                if tracing {
                    let several = rts.len() > 1;
                    let json = a.trace.as_deref().map(|p| pto_testkit::trace_path(p, rt, several));
                    let svg = a.svg.as_deref().map(|p| pto_testkit::trace_path(p, rt, several));
                    let line = pto_testkit::write_trace(&o.report, json.as_deref(), svg.as_deref())?;
                    println!("{name:<22} {line}");
                }
            }
            Err(e) => {
                eprintln!("{name:<22} board={} runtime={} FAIL: {e}", B::NAME, rt.name());
                failed += 1;
            }
        }
    }
    if failed > 0 { Err(Fail(format!("{failed} run(s) failed"), 1)) } else { Ok(()) }
}

fn bench(a: &BenchArgs) -> Result<(), Fail> {
    match a.board {
        BoardName::SimA2a3 => bench_on::<SimA2a3>(a),
        BoardName::SimA5 => bench_on::<SimA5>(a),
        BoardName::SimMini => bench_on::<SimMini>(a),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn bench_on<B: Board>(a: &BenchArgs) -> Result<(), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    let (dev, k) = open::<B>(None)?;
    let rts = a.runtime.list();
    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template("{prefix:>24} [{bar:30}] {pos}/{len} {msg}")
        .map_err(|e| Fail(e.to_string(), 1))?
        .progress_chars("=> ");
    let total = bars.add(ProgressBar::new((a.shapes.len() * rts.len()) as u64));
    total.set_style(style.clone());
    total.set_prefix("shapes x runtimes");
    let mut results = Vec::new();
    for &shape in &a.shapes {
        let p = pto_testkit::build_shape(&dev, &k, shape.kind(), a.n)?;
        for &rt in &rts {
            let bar = bars.add(ProgressBar::new(a.rounds as u64 + 1));
            bar.set_style(style.clone());
            bar.set_prefix(format!("{} {}", shape.kind().name(), rt.name()));
            let cfg = pto::RunConfig::default().with_runtime(rt).with_trace(a.traced);
            let mut walls = Vec::new();
            let mut submits = Vec::new();
            // One warm-up round, then the timed ones.
            for round in 0..=a.rounds {
                p.reset()?;
                let r = match rt {
                    RuntimeKind::HostBuiltGraph => dev.run_with(&p.graph, &cfg)?,
                    RuntimeKind::TensormapRing => dev.run_program(&p.program, &p.args, &cfg)?,
                };
                p.check(&r).map_err(|e| Fail(e, 1))?;
                if round > 0 {
                    walls.push(r.wall);
                    submits.push(r.orchestration.unwrap_or(p.graph.build_time()));
                }
                bar.inc(1);
            }
            let wall = median(walls);
            let submit = median(submits);
            bar.finish_with_message(format!("run {:.3} ms", wall.as_secs_f64() * 1e3));
            total.inc(1);
            results.push(serde_json::json!({
                "shape": shape.kind().name(), "runtime": rt.name(), "n": a.n, "rounds": a.rounds,
                "traced": a.traced, "run_ms": wall.as_secs_f64() * 1e3, "submit_ms": submit.as_secs_f64() * 1e3,
            }));
        }
    }
    total.finish();
    drop(bars);
    println!("board={} N={} rounds={} traced={} (median of rounds)", B::NAME, a.n, a.rounds, a.traced);
    for r in &results {
        println!(
            "{:<14} runtime={} run={:>9.3} ms submit={:>9.3} ms",
            r["shape"].as_str().unwrap_or(""),
            r["runtime"].as_str().unwrap_or(""),
            r["run_ms"].as_f64().unwrap_or(0.0),
            r["submit_ms"].as_f64().unwrap_or(0.0)
        );
    }
    if let Some(path) = &a.json {
        let doc = serde_json::json!({"board": B::NAME, "results": results});
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| Fail(format!("cannot write {}: {e}", path.display()), 1))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn dump(a: &DumpArgs) -> Result<(), Fail> {
    let what = match (a.task, a.arg) {
        (Some(t), Some(k)) => format!(" (task {t}, argument {k})"),
        _ => String::new(),
    };
    Err(Fail(
        format!(
            "dump {}{what}: the args dump is not built yet (no runtime writes dump records), so there is nothing to read",
            a.dir.display()
        ),
        2,
    ))
}

/// Where a flow starts and ends: (track, timestamp) of its `s` and `f` events.
type FlowEnds = (Option<(u64, f64)>, Option<(u64, f64)>);

/// One slice read back from a trace file.
struct Slice {
    pid: u64,
    tid: u64,
    ts: f64,
    dur: f64,
    task: Option<u64>,
}

fn trace(a: &TraceArgs) -> Result<(), Fail> {
    let text =
        std::fs::read_to_string(&a.file).map_err(|e| Fail(format!("cannot read {}: {e}", a.file.display()), 1))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| Fail(format!("{}: not JSON: {e}", a.file.display()), 1))?;
    summarize(&a.file, &doc, a.summary)
}

fn summarize(path: &Path, doc: &Value, full: bool) -> Result<(), Fail> {
    let events =
        doc["traceEvents"].as_array().ok_or_else(|| Fail(format!("{}: no traceEvents array", path.display()), 1))?;
    let mut names: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut slices = Vec::new();
    let mut flows: HashMap<u64, FlowEnds> = HashMap::new();
    for e in events {
        let (pid, tid) = (e["pid"].as_u64().unwrap_or(0), e["tid"].as_u64().unwrap_or(0));
        match e["ph"].as_str() {
            Some("M") if e["name"] == "thread_name" => {
                names.insert((pid, tid), e["args"]["name"].as_str().unwrap_or("?").to_string());
            }
            Some("X") => slices.push(Slice {
                pid,
                tid,
                ts: e["ts"].as_f64().unwrap_or(0.0),
                dur: e["dur"].as_f64().unwrap_or(0.0),
                task: (e["cat"] == "task").then(|| e["args"]["task"].as_u64()).flatten(),
            }),
            Some("s") => {
                flows.entry(e["id"].as_u64().unwrap_or(0)).or_default().0 = Some((tid, e["ts"].as_f64().unwrap_or(0.0)))
            }
            Some("f") => {
                flows.entry(e["id"].as_u64().unwrap_or(0)).or_default().1 = Some((tid, e["ts"].as_f64().unwrap_or(0.0)))
            }
            _ => {}
        }
    }
    let tasks: Vec<&Slice> = slices.iter().filter(|s| s.task.is_some()).collect();
    let start = tasks.iter().map(|s| s.ts).fold(f64::INFINITY, f64::min);
    let end = tasks.iter().map(|s| s.ts + s.dur).fold(0.0, f64::max);
    let span = if tasks.is_empty() { 0.0 } else { end - start };
    let other = &doc["otherData"];
    println!(
        "{}: runtime={} {} subtasks on {} cores, span {:.3} us, counter {} Hz, {} records dropped",
        path.display(),
        other["runtime"].as_str().unwrap_or("?"),
        tasks.len(),
        tasks.iter().map(|s| s.tid).collect::<std::collections::BTreeSet<_>>().len(),
        span,
        other["counter_hz"],
        other["dropped_records"]
    );
    if !full {
        return Ok(());
    }
    println!("\nper-core utilisation (busy time / span of the run's subtasks):");
    let mut busy: BTreeMap<(u64, u64), (f64, usize)> = BTreeMap::new();
    for s in &slices {
        let b = busy.entry((s.pid, s.tid)).or_default();
        if s.task.is_some() || s.pid == 2 {
            b.0 += s.dur;
            b.1 += 1;
        }
    }
    for ((pid, tid), (t, n)) in &busy {
        if *pid != 1 || *n == 0 {
            continue;
        }
        let name = names.get(&(*pid, *tid)).cloned().unwrap_or_else(|| format!("core {tid}"));
        println!("  {name:<24} {n:>6} subtasks {t:>12.3} us busy {:>6.1} %", 100.0 * t / span.max(1e-9));
    }
    let idle: usize = busy.keys().filter(|(p, _)| *p == 1).count();
    let cores = names.keys().filter(|(p, _)| *p == 1).count();
    println!("  ({} of {} cores ran nothing)", cores.saturating_sub(idle), cores);
    println!("\nAICPU threads (time per phase):");
    let mut phases: BTreeMap<(u64, String), f64> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X" && e["pid"] == 2) {
        *phases.entry((e["tid"].as_u64().unwrap_or(0), e["name"].as_str().unwrap_or("?").to_string())).or_default() +=
            e["dur"].as_f64().unwrap_or(0.0);
    }
    for ((tid, phase), t) in &phases {
        let name = names.get(&(2, *tid)).cloned().unwrap_or_else(|| format!("thread {tid}"));
        println!("  {name:<26} {phase:<14} {t:>12.3} us");
    }
    // Critical path: walk back from the subtask that ended last through the producer whose
    // end gated each start (the latest-ending producer).
    println!("\ncritical path:");
    let by_task: HashMap<u64, &Slice> = tasks.iter().map(|s| (s.task.unwrap_or(0), *s)).collect();
    if flows.is_empty() {
        let note = other["flows"].as_str().unwrap_or("no flow events in the file");
        println!("  unknown: {note}");
        return Ok(());
    }
    // Producers of each task, from the flow pairs (matched on the slices' start times).
    let at: HashMap<(u64, u64), u64> = tasks.iter().map(|s| ((s.tid, s.ts.to_bits()), s.task.unwrap_or(0))).collect();
    let mut producers: HashMap<u64, Vec<u64>> = HashMap::new();
    for (s, f) in flows.values() {
        if let (Some((pt, pts)), Some((ct, cts))) = (s, f) {
            if let (Some(&p), Some(&c)) = (at.get(&(*pt, pts.to_bits())), at.get(&(*ct, cts.to_bits()))) {
                producers.entry(c).or_default().push(p);
            }
        }
    }
    let Some(last) = tasks.iter().max_by(|a, b| (a.ts + a.dur).total_cmp(&(b.ts + b.dur))) else {
        println!("  (no subtasks)");
        return Ok(());
    };
    let mut path = vec![last.task.unwrap_or(0)];
    let mut cur = path[0];
    while let Some(ps) = producers.get(&cur) {
        let Some(&p) = ps.iter().max_by(|a, b| {
            let end = |t: &u64| by_task.get(t).map_or(0.0, |s| s.ts + s.dur);
            end(a).total_cmp(&end(b))
        }) else {
            break;
        };
        if path.contains(&p) {
            break;
        }
        path.push(p);
        cur = p;
    }
    path.reverse();
    let work: f64 = path.iter().filter_map(|t| by_task.get(t)).map(|s| s.dur).sum();
    println!(
        "  {} tasks, {:.3} us of kernel time over a {:.3} us span ({:.1} % of it; the rest is dispatch and completion latency)",
        path.len(),
        work,
        span,
        100.0 * work / span.max(1e-9)
    );
    let shown: Vec<String> = path.iter().take(24).map(|t| t.to_string()).collect();
    println!("  tasks: {}{}", shown.join(" -> "), if path.len() > 24 { " -> ..." } else { "" });
    Ok(())
}
