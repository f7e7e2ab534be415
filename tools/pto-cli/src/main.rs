//! `pto`: the pto-rt command line.
//!
//! * `pto run EXAMPLE` runs one of the examples' workloads on a simulated board, checks its
//!   golden, and can write the run's swimlane trace (`--trace t.json` for Perfetto, `--svg
//!   t.svg` for a browser).
//! * `pto bench` times the dispatch shapes (median of rounds) with progress bars.
//! * `pto trace FILE.json --summary` reads a trace back: per-core utilisation, critical path.
//! * `pto run EXAMPLE --dump LEVEL [--dump-dir DIR]` records the run's arguments (the args
//!   dump, `docs/args-dump.md`); `pto dump DIR` reads a dump directory back: level,
//!   accounting, records per stage and direction, and per task its arguments' shapes, payload
//!   sizes and first values.
//!
//! Every sim board is compiled in; `--board` opens one by name.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto::runtime::dump::DumpLevel;
use pto::runtime::host::dump::{Dump, Record, Stage};
use pto::runtime::orch::RuntimeKind;
use pto_sim::CacheModel;
use pto_testkit::{Device, Kernels, ShapeKind, Workload};
use serde_json::Value;

#[derive(Parser, Debug)]
#[command(name = "pto", version, about = "pto-rt: run, trace and bench task-graph runtimes on simulated boards")]
struct Cli {
    /// Print the host's phase log (prepare, publish, launch, fence, collect, with slot and
    /// epoch) on standard error; `RUST_LOG` chooses finer filters.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run an example's workload, check its golden, optionally write its trace.
    Run(RunArgs),
    /// Time the dispatch shapes (median of rounds).
    Bench(BenchArgs),
    /// Read an args-dump directory written by `pto run --dump` (or `RunConfig::dump`).
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
    /// The resident executor where it can run the graph, else the legacy one.
    Auto,
    /// The AICPU dispatches, the core executes.
    Legacy,
    /// The cores schedule themselves (host-built graph; a graph it cannot run is an error).
    Resident,
}

impl Executor {
    fn pto(self) -> pto::Executor {
        match self {
            Executor::Auto => pto::Executor::Auto,
            Executor::Legacy => pto::Executor::Legacy,
            Executor::Resident => pto::Executor::Resident,
        }
    }
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
    /// Record every run's arguments (the args dump): partial (marked arguments), hybrid
    /// (metadata of all, data of marked ones) or full (everything).
    #[arg(long, value_name = "LEVEL", value_parser = parse_dump_level)]
    dump: Option<DumpLevel>,
    /// Where the args dump writes (needs --dump): each run into DIR/hbg or DIR/trb. Default:
    /// a fresh directory per run under the system's temporary directory.
    #[arg(long, value_name = "DIR", requires = "dump")]
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
    /// The executor of the host-built graph's runs.
    #[arg(long, value_enum, default_value = "auto")]
    executor: Executor,
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
    /// The dump directory (holding args_dump.json and args.bin).
    dir: PathBuf,
    /// Show only this task, with more of each payload's values.
    #[arg(long)]
    task: Option<u32>,
    /// With `--task N`: print this argument's whole tensor at each stage it was recorded.
    #[arg(long, requires = "task")]
    arg: Option<u32>,
    /// List every task (by default the first 16 are listed).
    #[arg(long, conflicts_with = "task")]
    all: bool,
    /// Print the summary as JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Parser, Debug)]
struct TraceArgs {
    /// A Chrome trace-event JSON written by `pto run --trace`.
    file: PathBuf,
    /// Print per-core utilisation and the critical path.
    #[arg(long)]
    summary: bool,
}

fn parse_dump_level(s: &str) -> Result<DumpLevel, String> {
    s.parse().map_err(|_| format!("{s:?}: expected partial, hybrid or full"))
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
    let default = if cli.verbose { "pto=debug" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default)).init();
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
        let started = std::time::SystemTime::now();
        let outcome = pto_testkit::dumped(a.dump, a.dump_dir.clone(), || {
            pto_testkit::executed(a.executor.pto(), || pto_testkit::traced(tracing, || w(&dev, &k, rt)))
        });
        match outcome {
            Ok(o) => {
                println!("{}", o.summary(B::NAME));
                if tracing {
                    let several = rts.len() > 1;
                    let json = a.trace.as_deref().map(|p| pto_testkit::trace_path(p, rt, several));
                    let svg = a.svg.as_deref().map(|p| pto_testkit::trace_path(p, rt, several));
                    let line = pto_testkit::write_trace(&o.report, json.as_deref(), svg.as_deref())?;
                    println!("{name:<22} {line}");
                }
                if a.dump.is_some() {
                    let line = pto_testkit::dump_summary(&o.report)
                        .map_err(|e| Fail(format!("{name} runtime={}: {e}", rt.name()), 1))?;
                    println!("{name:<22} {line}");
                }
            }
            Err(e) => {
                eprintln!("{name:<22} board={} runtime={} FAIL: {e}", B::NAME, rt.name());
                // What a failed run collected is still on disk, its accounting unknown.
                if let Some(line) =
                    a.dump_dir.as_ref().and_then(|d| pto_testkit::failed_dump_summary(&d.join(rt.name()), started))
                {
                    eprintln!("{name:<22} {line}");
                }
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

/// Version of `pto bench --json`'s document: raised whenever a field is renamed or removed or
/// changes meaning; adding a field keeps it.
const BENCH_FORMAT_VERSION: u32 = 1;

/// The document `pto bench --json FILE` writes.
#[derive(serde::Serialize)]
struct BenchDoc {
    /// [`BENCH_FORMAT_VERSION`].
    format_version: u32,
    /// The board the shapes ran on.
    board: &'static str,
    /// One row per shape and runtime.
    results: Vec<BenchRow>,
}

/// One shape on one runtime: medians over the timed rounds.
#[derive(serde::Serialize)]
struct BenchRow {
    shape: &'static str,
    runtime: &'static str,
    /// The executor that ran it (`legacy` or `resident`).
    executor: &'static str,
    n: u32,
    rounds: u32,
    traced: bool,
    /// Median wall time of a run, ms.
    run_ms: f64,
    /// Median submission time (host build or device orchestration), ms.
    submit_ms: f64,
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
            let mut cfg = pto::RunConfig::default().with_runtime(rt).with_trace(a.traced);
            if rt == RuntimeKind::HostBuiltGraph {
                cfg = cfg.with_executor(a.executor.pto());
            }
            let mut executor = pto::Executor::Legacy;
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
                executor = r.executor;
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
            results.push(BenchRow {
                shape: shape.kind().name(),
                runtime: rt.name(),
                executor: executor.name(),
                n: a.n,
                rounds: a.rounds,
                traced: a.traced,
                run_ms: wall.as_secs_f64() * 1e3,
                submit_ms: submit.as_secs_f64() * 1e3,
            });
        }
    }
    total.finish();
    drop(bars);
    println!("board={} N={} rounds={} traced={} (median of rounds)", B::NAME, a.n, a.rounds, a.traced);
    for r in &results {
        println!(
            "{:<14} runtime={} executor={:<8} run={:>9.3} ms submit={:>9.3} ms",
            r.shape, r.runtime, r.executor, r.run_ms, r.submit_ms
        );
    }
    if let Some(path) = &a.json {
        let doc = BenchDoc { format_version: BENCH_FORMAT_VERSION, board: B::NAME, results };
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| Fail(format!("cannot write {}: {e}", path.display()), 1))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// How many tasks `pto dump` lists without `--all`.
const DUMP_TASKS: usize = 16;

fn stage_name(s: Stage) -> &'static str {
    match s {
        Stage::BeforeDispatch => "before_dispatch",
        Stage::AfterCompletion => "after_completion",
    }
}

/// The first `n` values of a record's payload, when its dtype is one `pto dump` decodes, and
/// whether the payload holds more.
fn first_values(d: &Dump, r: &Record, n: usize) -> Option<(Vec<String>, bool)> {
    macro_rules! decode {
        ($t:ty) => {{
            const W: usize = core::mem::size_of::<$t>();
            let b = d.bytes(r);
            let v = b
                .chunks_exact(W)
                .take(n)
                .map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; W])).to_string())
                .collect::<Vec<String>>();
            Some((v, b.len() / W > n))
        }};
    }
    if r.payload_len == 0 {
        return None;
    }
    match r.dtype.as_deref()? {
        "f32" => decode!(f32),
        "f64" => decode!(f64),
        "i32" => decode!(i32),
        "u32" => decode!(u32),
        "i64" => decode!(i64),
        "u64" => decode!(u64),
        "i16" => decode!(i16),
        "u16" => decode!(u16),
        "i8" => decode!(i8),
        "u8" => decode!(u8),
        _ => None,
    }
}

/// Append a line to a `String` (formatting into a `String` cannot fail).
macro_rules! say {
    ($out:expr) => {{
        $out.push('\n');
    }};
    ($out:expr, $($t:tt)*) => {{
        let _ = writeln!($out, $($t)*);
    }};
}

/// Write `text` to standard output; a closed pipe (`pto dump DIR | head`) is not an error.
fn emit(text: &str) -> Result<(), Fail> {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Fail(format!("cannot write the output: {e}"), 1)),
        _ => Ok(()),
    }
}

fn dump(a: &DumpArgs) -> Result<(), Fail> {
    let d = Dump::open(&a.dir).map_err(|e| Fail(format!("cannot read the args dump: {e}"), 1))?;
    let by_task = d.by_task();
    if let Some(t) = a.task {
        if !by_task.contains_key(&t) {
            let known: Vec<String> = by_task.keys().take(8).map(|t| t.to_string()).collect();
            return Err(Fail(
                format!(
                    "{}: no records of task {t} ({} tasks recorded{}{})",
                    a.dir.display(),
                    by_task.len(),
                    if known.is_empty() { "" } else { ": " },
                    known.join(", ") + if by_task.len() > known.len() { ", ..." } else { "" }
                ),
                1,
            ));
        }
    }
    if let (Some(t), Some(k)) = (a.task, a.arg) {
        return dump_tensor(a, &d, t, k, &by_task[&t]);
    }
    // Records per stage and direction.
    let mut kinds: BTreeMap<(&'static str, String), (u64, u64)> = BTreeMap::new();
    for r in &d.records {
        let dir = if r.value.is_some() || r.dtype.is_none() { "scalar".to_string() } else { r.direction.clone() };
        let e = kinds.entry((stage_name(r.stage), dir)).or_default();
        e.0 += 1;
        e.1 += r.payload_len;
    }
    let tasks: Vec<(&u32, &Vec<&Record>)> = match a.task {
        Some(t) => by_task.iter().filter(|(k, _)| **k == t).collect(),
        None if a.all => by_task.iter().collect(),
        None => by_task.iter().take(DUMP_TASKS).collect(),
    };
    let values = if a.task.is_some() { 16 } else { 4 };
    let acc = &d.accounting;
    let payload: u64 = d.records.iter().map(|r| r.payload_len).sum();
    if a.json {
        let doc = serde_json::json!({
            "dir": a.dir.display().to_string(),
            "level": d.level,
            "run": d.run,
            "accounting": match (acc.total, acc.dropped) {
                (Some(total), Some(dropped)) => serde_json::json!({"total": total, "collected": acc.collected, "dropped": dropped}),
                _ => serde_json::json!({"unknown": true, "collected": acc.collected}),
            },
            "payload_bytes": payload,
            "tasks_recorded": by_task.len(),
            "by_stage": kinds.iter().map(|((stage, dir), (n, bytes))| serde_json::json!({
                "stage": stage, "direction": dir, "records": n, "payload_bytes": bytes,
            })).collect::<Vec<_>>(),
            "tasks": tasks.iter().map(|(t, recs)| serde_json::json!({
                "task": t,
                "func_ids": recs.first().map(|r| r.func_ids.clone()).unwrap_or_default(),
                "records": recs.iter().map(|r| serde_json::json!({
                    "stage": stage_name(r.stage),
                    "arg": r.arg,
                    "direction": r.direction,
                    "dtype": r.dtype,
                    "shape": r.shape,
                    "strides": r.strides,
                    "offset": r.offset,
                    "payload_len": r.payload_len,
                    "truncated": r.truncated,
                    "value": r.value,
                    "first_values": first_values(&d, r, values).map(|(v, _)| v),
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        return emit(&(serde_json::to_string_pretty(&doc)? + "\n"));
    }
    let mut out = String::new();
    let run = &d.run;
    say!(
        out,
        "{}: level={} runtime={} epoch={} run {}",
        a.dir.display(),
        d.level,
        run["runtime"].as_str().unwrap_or("?"),
        run["epoch"],
        if run["complete"] == serde_json::json!(true) { "complete" } else { "did not complete" }
    );
    match (acc.total, acc.dropped) {
        (Some(total), Some(dropped)) => {
            say!(out, "accounting: total={total} collected={} dropped={dropped}", acc.collected)
        }
        _ => say!(out, "accounting: unknown (the run failed or a lane did not close); collected={}", acc.collected),
    }
    say!(out, "{} records of {} tasks, {payload} payload bytes in args.bin", d.records.len(), by_task.len());
    say!(out, "\nrecords per stage and direction:");
    if kinds.is_empty() {
        say!(out, "  (none)");
    }
    for ((stage, dir), (n, bytes)) in &kinds {
        say!(out, "  {stage:<17} {dir:<14} {n:>8} records {bytes:>12} bytes");
    }
    say!(out);
    for (t, recs) in &tasks {
        let funcs: Vec<String> =
            recs.first().map(|r| r.func_ids.iter().map(|f| f.to_string()).collect()).unwrap_or_default();
        say!(out, "task {t} (func {}):", funcs.join(","));
        for r in recs.iter() {
            let head = format!("  {:<16} arg {:<2} {:<6}", stage_name(r.stage), r.arg, r.direction);
            if let (Some(v), None) = (r.value, &r.dtype) {
                say!(out, "{head} scalar {v} ({v:#x})");
                continue;
            }
            let shape: Vec<String> = r.shape.iter().map(|x| x.to_string()).collect();
            let strides: Vec<String> = r.strides.iter().map(|x| x.to_string()).collect();
            let offset = r.offset.map_or_else(|| "?".to_string(), |o| o.to_string());
            let payload = if r.payload_len == 0 {
                "metadata only".to_string()
            } else {
                format!("payload {} bytes", r.payload_len)
            };
            let mut line = format!(
                "{head} {} [{}] strides [{}] offset {offset} {payload}",
                r.dtype.as_deref().unwrap_or("?"),
                shape.join(", "),
                strides.join(", "),
            );
            if r.truncated {
                line += " (truncated)";
            }
            if let Some((v, more)) = first_values(&d, r, values) {
                line += &format!(" = [{}{}]", v.join(", "), if more { ", ..." } else { "" });
            }
            say!(out, "{line}");
        }
    }
    if a.task.is_none() && !a.all && by_task.len() > tasks.len() {
        say!(out, "... {} more tasks (--all lists every task, --task N shows one)", by_task.len() - tasks.len());
    }
    emit(&out)
}

/// `pto dump DIR --task N --arg K`: every value of argument K of task N, at each stage it was
/// recorded, in rows of the innermost extent, each line prefixed by the flat index of its
/// first element (or the scalar's value).
fn dump_tensor(a: &DumpArgs, d: &Dump, t: u32, k: u32, recs: &[&Record]) -> Result<(), Fail> {
    let mine: Vec<&Record> = recs.iter().copied().filter(|r| r.arg == k).collect();
    if mine.is_empty() {
        let args: std::collections::BTreeSet<u32> = recs.iter().map(|r| r.arg).collect();
        let args: Vec<String> = args.iter().map(|x| x.to_string()).collect();
        return Err(Fail(
            format!(
                "{}: task {t} has no records of argument {k} (its arguments: {})",
                a.dir.display(),
                args.join(", ")
            ),
            1,
        ));
    }
    if a.json {
        let doc = serde_json::json!({
            "task": t,
            "arg": k,
            "records": mine.iter().map(|r| serde_json::json!({
                "stage": stage_name(r.stage),
                "direction": r.direction,
                "dtype": r.dtype,
                "shape": r.shape,
                "truncated": r.truncated,
                "value": r.value,
                "values": first_values(d, r, usize::MAX).map(|(v, _)| v),
            })).collect::<Vec<_>>(),
        });
        return emit(&(serde_json::to_string_pretty(&doc)? + "\n"));
    }
    let mut out = String::new();
    for r in mine {
        let shape: Vec<String> = r.shape.iter().map(|x| x.to_string()).collect();
        say!(
            out,
            "task {t} arg {k} {} {} {} [{}]{}",
            stage_name(r.stage),
            r.direction,
            r.dtype.as_deref().unwrap_or("scalar"),
            shape.join(", "),
            if r.truncated { " (truncated)" } else { "" }
        );
        if let (Some(v), None) = (r.value, &r.dtype) {
            say!(out, "  {v} ({v:#x})");
            continue;
        }
        if r.payload_len == 0 {
            say!(out, "  (metadata only: the level recorded no data for this argument)");
            continue;
        }
        let Some((values, _)) = first_values(d, r, usize::MAX) else {
            say!(out, "  ({} bytes; no decoder for dtype {})", r.payload_len, r.dtype.as_deref().unwrap_or("?"));
            continue;
        };
        // Rows of the innermost extent, at most 16 values to a line.
        let row = r.shape.last().map_or(16, |&x| (x as usize).clamp(1, 16));
        for (i, chunk) in values.chunks(row).enumerate() {
            say!(out, "  [{:>6}] {}", i * row, chunk.join(" "));
        }
    }
    emit(&out)
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
