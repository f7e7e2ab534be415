//! `pto bench`: time the dispatch shapes on each runtime (the median of rounds), with progress
//! bars, and write the results as JSON when asked.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto::runtime::orch::RuntimeKind;
use pto_testkit::ShapeKind;

use crate::Fail;
use crate::target::{BoardName, SimControl, Target, open};

#[derive(Parser, Debug)]
pub(crate) struct BenchArgs {
    /// Shapes to time (comma separated).
    #[arg(long, value_enum, value_delimiter = ',', default_values = ["chain", "fanout", "independent", "dummy-chain", "dummy-fanout"])]
    shapes: Vec<Shape>,
    /// Tasks per shape.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
    /// Timed rounds per shape and runtime (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    #[command(flatten)]
    target: Target,
    /// Trace every timed run too (to measure what tracing costs).
    #[arg(long)]
    traced: bool,
    /// Print the results as one JSON document on standard output (see [`BenchDoc`]) instead
    /// of the text table: a flag, as `--json` is on every command.
    #[arg(long)]
    json: bool,
    /// Write the results' JSON document to this file too (its missing parent directories are
    /// created before anything runs; a path that cannot be written is refused first).
    #[arg(long, value_name = "FILE")]
    json_file: Option<PathBuf>,
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

pub(crate) fn bench(a: &BenchArgs) -> Result<(), Fail> {
    match a.target.board {
        BoardName::SimA2a3 => bench_on::<SimA2a3>(a),
        BoardName::SimA5 => bench_on::<SimA5>(a),
        BoardName::SimMini => bench_on::<SimMini>(a),
    }
}

/// Version of `pto bench --json`'s document: raised whenever a field is renamed or removed or
/// changes meaning; adding a field keeps it.
const BENCH_FORMAT_VERSION: u32 = 1;

/// The document `pto bench --json` prints and `--json-file FILE` writes.
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
    a.target.check()?;
    if let Some(p) = &a.json_file {
        crate::paths::output_file("--json-file", p)?;
    }
    let (dev, k) = open::<B>(None, None)?;
    let rts = a.target.runtime.list();
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
                cfg = cfg.with_executor(a.target.executor.pto());
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
    let doc = BenchDoc { format_version: BENCH_FORMAT_VERSION, board: B::NAME, results };
    if let Some(path) = &a.json_file {
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .map_err(|e| Fail(format!("cannot write {}: {e}", path.display()), 1))?;
        if a.json {
            eprintln!("wrote {}", path.display());
        }
    }
    if a.json {
        outln!("{}", serde_json::to_string(&doc)?);
        return Ok(());
    }
    let results = &doc.results;
    outln!("board={} N={} rounds={} traced={} (median of rounds)", B::NAME, a.n, a.rounds, a.traced);
    for r in results {
        outln!(
            "{:<14} runtime={} executor={:<8} run={:>9.3} ms submit={:>9.3} ms",
            r.shape,
            r.runtime,
            r.executor,
            r.run_ms,
            r.submit_ms
        );
    }
    if let Some(path) = &a.json_file {
        outln!("wrote {}", path.display());
    }
    Ok(())
}
