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
use pto::runtime::graph::DType;
use pto::runtime::host::documents::chrome::{self, ChromeTrace};
use pto::runtime::host::dump::{Accounting, ArgDirection, Dump, Record, RunInfo, Stage};
use pto::runtime::orch::RuntimeKind;
use pto_sim::CacheModel;
use pto_testkit::{Device, Kernels, ShapeKind, Workload};

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

/// One element of a payload, as wide as its dtype needs: f16 and bf16 widen exactly to f32,
/// the narrower integers to 64 bits.
#[derive(Copy, Clone, Debug, PartialEq)]
enum Elem {
    F32(f32),
    F64(f64),
    I64(i64),
    U64(u64),
}

impl std::fmt::Display for Elem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Elem::F32(v) => write!(f, "{v}"),
            Elem::F64(v) => write!(f, "{v}"),
            Elem::I64(v) => write!(f, "{v}"),
            Elem::U64(v) => write!(f, "{v}"),
        }
    }
}

/// A JSON number: integers exactly over the whole 64-bit range, floats as the shortest text that
/// reads back as the same value of their width. JSON has no NaN or infinity: those are the
/// strings `"NaN"`, `"inf"` and `"-inf"`.
impl serde::Serialize for Elem {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Elem::F32(v) if v.is_finite() => s.serialize_f32(v),
            Elem::F64(v) if v.is_finite() => s.serialize_f64(v),
            Elem::I64(v) => s.serialize_i64(v),
            Elem::U64(v) => s.serialize_u64(v),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

/// An IEEE half-precision value's bits widened to f32 (exactly: every f16 is an f32).
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    match exp {
        0 => {
            // Zero or subnormal: man × 2^-24, exact in f32.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            if sign != 0 { -v } else { v }
        }
        0x1f => f32::from_bits(sign | 0x7f80_0000 | (man << 13)),
        _ => f32::from_bits(sign | ((exp + 127 - 15) << 23) | (man << 13)),
    }
}

/// One element of `dtype` from its little-endian bytes (`c.len() == dtype.size()`).
fn elem(dtype: DType, c: &[u8]) -> Elem {
    fn le<const W: usize>(c: &[u8]) -> [u8; W] {
        let mut a = [0u8; W];
        a.copy_from_slice(c);
        a
    }
    match dtype {
        DType::F32 => Elem::F32(f32::from_le_bytes(le(c))),
        DType::F16 => Elem::F32(f16_to_f32(u16::from_le_bytes(le(c)))),
        DType::BF16 => Elem::F32(f32::from_bits(u32::from(u16::from_le_bytes(le(c))) << 16)),
        DType::F64 => Elem::F64(f64::from_le_bytes(le(c))),
        DType::I8 => Elem::I64(i8::from_le_bytes(le(c)).into()),
        DType::I16 => Elem::I64(i16::from_le_bytes(le(c)).into()),
        DType::I32 => Elem::I64(i32::from_le_bytes(le(c)).into()),
        DType::I64 => Elem::I64(i64::from_le_bytes(le(c))),
        DType::U8 => Elem::U64(u8::from_le_bytes(le(c)).into()),
        DType::U16 => Elem::U64(u16::from_le_bytes(le(c)).into()),
        DType::U32 => Elem::U64(u32::from_le_bytes(le(c)).into()),
        DType::U64 => Elem::U64(u64::from_le_bytes(le(c))),
    }
}

/// The first `n` elements of `bytes` as `dtype`, and whether it holds more.
fn decode(dtype: DType, bytes: &[u8], n: usize) -> (Vec<Elem>, bool) {
    let w = dtype.size() as usize;
    let v = bytes.chunks_exact(w).take(n).map(|c| elem(dtype, c)).collect();
    (v, bytes.len() / w > n)
}

/// The first `n` values of a record's payload, and whether the payload holds more: `None`
/// without a payload or with a dtype code this build does not know.
fn first_values(d: &Dump, r: &Record, n: usize) -> Option<(Vec<Elem>, bool)> {
    if r.payload_len == 0 {
        return None;
    }
    Some(decode(r.dtype?, d.bytes(r), n))
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

/// What a record is, for the counts per stage: a tensor by its direction, or a scalar.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Class {
    Input,
    Output,
    InOut,
    Scalar,
}

impl Class {
    fn of(r: &Record) -> Class {
        match r.direction {
            _ if r.is_scalar() => Class::Scalar,
            ArgDirection::Input => Class::Input,
            ArgDirection::Output => Class::Output,
            ArgDirection::InOut => Class::InOut,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::Input => "input",
            Class::Output => "output",
            Class::InOut => "inout",
            Class::Scalar => "scalar",
        }
    }
}

/// Version of `pto dump --json`'s documents (the summary and `--task N --arg K`): raised
/// whenever a field is renamed or removed or changes meaning; adding a field keeps it.
const DUMP_JSON_FORMAT_VERSION: u32 = 1;

/// `pto dump DIR --json`.
#[derive(serde::Serialize)]
struct DumpSummaryDoc<'a> {
    /// [`DUMP_JSON_FORMAT_VERSION`].
    format_version: u32,
    dir: String,
    level: DumpLevel,
    run: RunInfo,
    accounting: Accounting,
    payload_bytes: u64,
    tasks_recorded: usize,
    by_stage: Vec<StageRow>,
    tasks: Vec<TaskDoc<'a>>,
}

/// Records and payload bytes of one stage and class.
#[derive(serde::Serialize)]
struct StageRow {
    stage: Stage,
    direction: Class,
    records: u64,
    payload_bytes: u64,
}

/// One task's records.
#[derive(serde::Serialize)]
struct TaskDoc<'a> {
    task: u32,
    func_ids: &'a [u16],
    records: Vec<RecordDoc<'a>>,
}

/// One record, with its first values (numbers; `null` without data).
#[derive(serde::Serialize)]
struct RecordDoc<'a> {
    stage: Stage,
    arg: u32,
    direction: ArgDirection,
    dtype: Option<DType>,
    shape: &'a [u32],
    strides: &'a [u32],
    offset: Option<u64>,
    payload_len: u64,
    truncated: bool,
    value: Option<u64>,
    first_values: Option<Vec<Elem>>,
}

/// `pto dump DIR --task N --arg K --json`.
#[derive(serde::Serialize)]
struct TensorDoc<'a> {
    /// [`DUMP_JSON_FORMAT_VERSION`].
    format_version: u32,
    task: u32,
    arg: u32,
    records: Vec<TensorRecordDoc<'a>>,
}

/// One stage of the argument, with all its values (numbers; `null` without data).
#[derive(serde::Serialize)]
struct TensorRecordDoc<'a> {
    stage: Stage,
    direction: ArgDirection,
    dtype: Option<DType>,
    shape: &'a [u32],
    truncated: bool,
    value: Option<u64>,
    values: Option<Vec<Elem>>,
}

/// Pretty JSON of `doc`, and a newline.
fn json_text<T: serde::Serialize>(doc: &T) -> Result<String, Fail> {
    Ok(serde_json::to_string_pretty(doc)? + "\n")
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
    // Records per stage and class.
    let mut kinds: BTreeMap<(Stage, Class), (u64, u64)> = BTreeMap::new();
    for r in &d.records {
        let e = kinds.entry((r.stage, Class::of(r))).or_default();
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
        let doc = DumpSummaryDoc {
            format_version: DUMP_JSON_FORMAT_VERSION,
            dir: a.dir.display().to_string(),
            level: d.level,
            run: d.run,
            accounting: *acc,
            payload_bytes: payload,
            tasks_recorded: by_task.len(),
            by_stage: kinds
                .iter()
                .map(|(&(stage, direction), &(records, payload_bytes))| StageRow {
                    stage,
                    direction,
                    records,
                    payload_bytes,
                })
                .collect(),
            tasks: tasks
                .iter()
                .map(|(t, recs)| TaskDoc {
                    task: **t,
                    func_ids: recs.first().map_or(&[][..], |r| &r.func_ids[..]),
                    records: recs
                        .iter()
                        .map(|r| RecordDoc {
                            stage: r.stage,
                            arg: r.arg,
                            direction: r.direction,
                            dtype: r.dtype,
                            shape: &r.shape,
                            strides: &r.strides,
                            offset: r.offset,
                            payload_len: r.payload_len,
                            truncated: r.truncated,
                            value: r.value,
                            first_values: first_values(&d, r, values).map(|(v, _)| v),
                        })
                        .collect(),
                })
                .collect(),
        };
        return emit(&json_text(&doc)?);
    }
    let mut out = String::new();
    let run = &d.run;
    say!(
        out,
        "{}: level={} runtime={} epoch={} run {}",
        a.dir.display(),
        d.level,
        run.runtime,
        run.epoch,
        if run.complete { "complete" } else { "did not complete" }
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
    for ((stage, class), (n, bytes)) in &kinds {
        say!(out, "  {:<17} {:<14} {n:>8} records {bytes:>12} bytes", stage.name(), class.name());
    }
    say!(out);
    for (t, recs) in &tasks {
        let funcs: Vec<String> =
            recs.first().map(|r| r.func_ids.iter().map(|f| f.to_string()).collect()).unwrap_or_default();
        say!(out, "task {t} (func {}):", funcs.join(","));
        for r in recs.iter() {
            let head = format!("  {:<16} arg {:<2} {:<6}", r.stage.name(), r.arg, r.direction.name());
            if let Some(v) = r.value {
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
                r.dtype.map_or("?", DType::name),
                shape.join(", "),
                strides.join(", "),
            );
            if r.truncated {
                line += " (truncated)";
            }
            if let Some((v, more)) = first_values(&d, r, values) {
                let v: Vec<String> = v.iter().map(Elem::to_string).collect();
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
        let doc = TensorDoc {
            format_version: DUMP_JSON_FORMAT_VERSION,
            task: t,
            arg: k,
            records: mine
                .iter()
                .map(|r| TensorRecordDoc {
                    stage: r.stage,
                    direction: r.direction,
                    dtype: r.dtype,
                    shape: &r.shape,
                    truncated: r.truncated,
                    value: r.value,
                    values: first_values(d, r, usize::MAX).map(|(v, _)| v),
                })
                .collect(),
        };
        return emit(&json_text(&doc)?);
    }
    let mut out = String::new();
    for r in mine {
        let shape: Vec<String> = r.shape.iter().map(|x| x.to_string()).collect();
        say!(
            out,
            "task {t} arg {k} {} {} {} [{}]{}",
            r.stage.name(),
            r.direction.name(),
            if r.is_scalar() { "scalar" } else { r.dtype.map_or("?", DType::name) },
            shape.join(", "),
            if r.truncated { " (truncated)" } else { "" }
        );
        if let Some(v) = r.value {
            say!(out, "  {v} ({v:#x})");
            continue;
        }
        if r.payload_len == 0 {
            say!(out, "  (metadata only: the level recorded no data for this argument)");
            continue;
        }
        let Some((values, _)) = first_values(d, r, usize::MAX) else {
            say!(out, "  ({} bytes; no decoder for an unknown dtype code)", r.payload_len);
            continue;
        };
        let values: Vec<String> = values.iter().map(Elem::to_string).collect();
        // Rows of the innermost extent, at most 16 values to a line.
        let row = r.shape.last().map_or(16, |&x| (x as usize).clamp(1, 16));
        for (i, chunk) in values.chunks(row).enumerate() {
            say!(out, "  [{:>6}] {}", i * row, chunk.join(" "));
        }
    }
    emit(&out)
}

/// Where a flow starts and ends: (track, timestamp) of its `s` and `f` events.
type FlowEnds = (Option<(u32, f64)>, Option<(u32, f64)>);

fn trace(a: &TraceArgs) -> Result<(), Fail> {
    let doc = ChromeTrace::read(&a.file).map_err(|e| Fail(format!("cannot read the trace: {e}"), 1))?;
    summarize(&a.file, &doc, a.summary)
}

fn summarize(path: &Path, doc: &ChromeTrace, full: bool) -> Result<(), Fail> {
    let names: BTreeMap<(u32, u32), &str> = doc.track_names().map(|(pid, tid, name)| ((pid, tid), name)).collect();
    let mut flows: HashMap<u64, FlowEnds> = HashMap::new();
    for e in &doc.trace_events {
        match e {
            chrome::Event::FlowStart(s) => flows.entry(s.id).or_default().0 = Some((s.tid, s.ts)),
            chrome::Event::FlowEnd(f) => flows.entry(f.id).or_default().1 = Some((f.tid, f.ts)),
            _ => {}
        }
    }
    let tasks: Vec<&chrome::TaskSlice> = doc.tasks().collect();
    let start = tasks.iter().map(|s| s.ts).fold(f64::INFINITY, f64::min);
    let end = tasks.iter().map(|s| s.ts + s.dur).fold(0.0, f64::max);
    let span = if tasks.is_empty() { 0.0 } else { end - start };
    let other = &doc.other_data;
    println!(
        "{}: runtime={} {} subtasks on {} cores, span {:.3} us, counter {} Hz, {} records dropped",
        path.display(),
        other.runtime,
        tasks.len(),
        tasks.iter().map(|s| s.tid).collect::<std::collections::BTreeSet<_>>().len(),
        span,
        other.counter_hz,
        other.dropped_records
    );
    if !full {
        return Ok(());
    }
    println!("\nper-core utilisation (busy time / span of the run's subtasks):");
    let mut busy: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
    for s in &tasks {
        let b = busy.entry(s.tid).or_default();
        b.0 += s.dur;
        b.1 += 1;
    }
    for (tid, (t, n)) in &busy {
        let name = names.get(&(chrome::AICORE_PID, *tid)).map_or_else(|| format!("core {tid}"), |n| n.to_string());
        println!("  {name:<24} {n:>6} subtasks {t:>12.3} us busy {:>6.1} %", 100.0 * t / span.max(1e-9));
    }
    let cores = names.keys().filter(|(p, _)| *p == chrome::AICORE_PID).count();
    println!("  ({} of {} cores ran nothing)", cores.saturating_sub(busy.len()), cores);
    println!("\nAICPU threads (time per phase):");
    let mut phases: BTreeMap<(u32, &'static str), f64> = BTreeMap::new();
    for p in doc.phases() {
        *phases.entry((p.tid, p.name.name())).or_default() += p.dur;
    }
    for ((tid, phase), t) in &phases {
        let name = names.get(&(chrome::AICPU_PID, *tid)).map_or_else(|| format!("thread {tid}"), |n| n.to_string());
        println!("  {name:<26} {phase:<14} {t:>12.3} us");
    }
    // Critical path: walk back from the subtask that ended last through the producer whose
    // end gated each start (the latest-ending producer).
    println!("\ncritical path:");
    let by_task: HashMap<u32, &chrome::TaskSlice> = tasks.iter().map(|s| (s.args.task, *s)).collect();
    if flows.is_empty() {
        println!("  unknown: {}", other.flows.describe());
        return Ok(());
    }
    // Producers of each task, from the flow pairs (matched on the slices' start times).
    let at: HashMap<(u32, u64), u32> = tasks.iter().map(|s| ((s.tid, s.ts.to_bits()), s.args.task)).collect();
    let mut producers: HashMap<u32, Vec<u32>> = HashMap::new();
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
    let mut path = vec![last.args.task];
    let mut cur = path[0];
    while let Some(ps) = producers.get(&cur) {
        let Some(&p) = ps.iter().max_by(|a, b| {
            let end = |t: &u32| by_task.get(t).map_or(0.0, |s| s.ts + s.dur);
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

#[cfg(test)]
mod tests {
    use super::*;

    const DTYPES: [DType; 12] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::U8,
        DType::I8,
        DType::F64,
        DType::U64,
        DType::I16,
        DType::U16,
    ];

    /// `values` of `dtype` decoded and written as `pto dump --json` writes them.
    fn json(dtype: DType, bytes: &[u8]) -> String {
        let (v, more) = decode(dtype, bytes, usize::MAX);
        assert!(!more);
        serde_json::to_string(&v).unwrap()
    }

    #[test]
    fn every_dtype_decodes_to_json_numbers() {
        let b = |v: &[&[u8]]| v.concat();
        assert_eq!(json(DType::F32, &b(&[&1.5f32.to_le_bytes(), &0.1f32.to_le_bytes()])), "[1.5,0.1]");
        assert_eq!(json(DType::F64, &b(&[&(-2.25f64).to_le_bytes(), &0.1f64.to_le_bytes()])), "[-2.25,0.1]");
        // f16: 1.0, -2.5, 65504 (the largest), 2^-24 (the smallest subnormal), -0.
        let h: Vec<u8> = [0x3c00u16, 0xc100, 0x7bff, 0x0001, 0x8000].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(json(DType::F16, &h), "[1.0,-2.5,65504.0,5.9604645e-8,-0.0]");
        // bf16: the top half of an f32.
        let bf: Vec<u8> =
            [1.0f32, -3.0, 0.15625].iter().flat_map(|x| ((x.to_bits() >> 16) as u16).to_le_bytes()).collect();
        assert_eq!(json(DType::BF16, &bf), "[1.0,-3.0,0.15625]");
        assert_eq!(json(DType::I8, &[0x80, 0x7f]), "[-128,127]");
        assert_eq!(json(DType::U8, &[0xff, 0]), "[255,0]");
        assert_eq!(json(DType::I16, &i16::MIN.to_le_bytes()), "[-32768]");
        assert_eq!(json(DType::U16, &u16::MAX.to_le_bytes()), "[65535]");
        assert_eq!(json(DType::I32, &i32::MIN.to_le_bytes()), "[-2147483648]");
        assert_eq!(json(DType::U32, &u32::MAX.to_le_bytes()), "[4294967295]");
        // 64-bit integers beyond 2^53 stay exact JSON integers.
        let i = b(&[&i64::MIN.to_le_bytes(), &((1i64 << 53) + 1).to_le_bytes()]);
        assert_eq!(json(DType::I64, &i), "[-9223372036854775808,9007199254740993]");
        let u = b(&[&u64::MAX.to_le_bytes(), &((1u64 << 53) + 1).to_le_bytes()]);
        assert_eq!(json(DType::U64, &u), "[18446744073709551615,9007199254740993]");
        let v: serde_json::Value = serde_json::from_str(&json(DType::U64, &u)).unwrap();
        assert_eq!(v[0].as_u64(), Some(u64::MAX));
        // No NaN or infinity in JSON: strings.
        let nf = b(&[&f32::NAN.to_le_bytes(), &f32::INFINITY.to_le_bytes(), &f32::NEG_INFINITY.to_le_bytes()]);
        assert_eq!(json(DType::F32, &nf), r#"["NaN","inf","-inf"]"#);
        assert_eq!(json(DType::F16, &0x7c00u16.to_le_bytes()), r#"["inf"]"#);
        assert_eq!(json(DType::F64, &f64::NAN.to_le_bytes()), r#"["NaN"]"#);
        for d in DTYPES {
            // Every dtype decodes (no "no decoder"), one element per `size` bytes.
            let (v, more) = decode(d, &vec![0u8; 3 * d.size() as usize], 2);
            assert_eq!((v.len(), more), (2, true), "{d:?}");
        }
    }

    #[test]
    fn text_values_are_the_rust_spelling() {
        let (v, _) = decode(DType::F32, &0.1f32.to_le_bytes(), 1);
        assert_eq!(v[0].to_string(), "0.1");
        let (v, _) = decode(DType::U64, &u64::MAX.to_le_bytes(), 1);
        assert_eq!(v[0].to_string(), "18446744073709551615");
    }

    #[test]
    fn every_f16_widens_exactly() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            let sign = h >> 15 == 1;
            let (exp, man) = (i32::from((h >> 10) & 0x1f), f64::from(h & 0x3ff));
            let want = match exp {
                0 => man * 2f64.powi(-24),
                0x1f if man == 0.0 => f64::INFINITY,
                0x1f => f64::NAN,
                _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
            };
            let want = if sign { -want } else { want };
            if want.is_nan() {
                assert!(f.is_nan(), "{h:#06x}");
            } else {
                assert_eq!(f64::from(f), want, "{h:#06x}");
                assert_eq!(f.is_sign_negative(), sign, "{h:#06x}");
            }
        }
    }

    #[test]
    fn dtype_names_are_the_manifests() {
        for d in DTYPES {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name(), "{d:?}");
        }
    }
}
