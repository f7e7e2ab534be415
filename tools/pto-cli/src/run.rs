//! `pto run EXAMPLE`: run one of the examples' workloads on a simulated board, check its golden,
//! and write its swimlane trace or args dump when asked.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto::runtime::dump::DumpLevel;
use pto_sim::CacheModel;
use pto_testkit::Workload;

use crate::Fail;
use crate::target::{BoardName, Executor, Runtimes, SimControl, open};

#[derive(Parser, Debug)]
pub(crate) struct RunArgs {
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

pub(crate) fn run(a: &RunArgs) -> Result<(), Fail> {
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
