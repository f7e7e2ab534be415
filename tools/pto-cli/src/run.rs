//! `pto run EXAMPLE`: run one of the examples' workloads on a simulated board, check its golden,
//! and write its swimlane trace or args dump when asked.

use std::path::PathBuf;

use clap::Parser;
use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto::runtime::dump::DumpLevel;

use crate::Fail;
use crate::target::{BoardName, CacheSpec, SimControl, Target, cache_name, describe_schedule, open_with, parse_cache};
use crate::workload::{Example, workload};

#[derive(Parser, Debug)]
pub(crate) struct RunArgs {
    /// The example.
    #[arg(value_enum)]
    example: Example,
    #[command(flatten)]
    target: Target,
    /// The kernels: rust, or native (the C++ kernels, through the native kernel ABI; vector,
    /// chain513, mix, bgemm, manual_scope and tiny_rings have them).
    #[arg(long, value_enum, default_value_t = pto_testkit::KernelChoice::Rust)]
    kernels: pto_testkit::KernelChoice,
    /// The AICore program: rust, or native (the legacy executor's AICore program in C, the one
    /// a chip runs; the legacy executor only: `--executor auto` means legacy with it).
    #[arg(long, value_name = "PROGRAM", value_parser = pto_testkit::parse_aicore, default_value = "rust")]
    aicore: pto::AicoreProgram,
    /// The simulator's cache model, as PTO_SIM_CACHE spells it (the same parser): coherent,
    /// faithful or faithful:SEED, each optionally followed by :through or :back (the AICPU
    /// write policy).
    #[arg(long, value_name = "MODEL", value_parser = parse_cache)]
    cache: Option<CacheSpec>,
    /// The simulator's schedule-independent checks: race, init, race,init or off (as
    /// PTO_SIM_CHECK; docs/sanitizers.md). A run they find something in fails, naming it.
    #[arg(long, value_name = "LIST", value_parser = crate::target::parse_checks)]
    check: Option<pto::hal::check::Checks>,
    /// Write the Chrome trace-event JSON (Perfetto) here; with both runtimes this is the
    /// host-built graph's, and the device-side runtime's gets `.trb` before the extension.
    /// Output paths (--trace, --svg, --dump-dir) are made ready before the run: missing parent
    /// directories are created, and a path that still cannot be written is refused, naming
    /// it, with exit status 2 and nothing run.
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
    /// Who orders the simulated agents: `os` (the engine's host threads and the OS), or a seed
    /// for a reproducible run on the simulator's own scheduler — `N` (uniform random), `N:pct`,
    /// `N:pct:DEPTH` (as `PTO_SIM_SCHEDULE` without its `seed:`). Replays what `pto explore`
    /// found.
    #[arg(long, value_name = "SEED", value_parser = crate::target::parse_schedule)]
    schedule: Option<pto_sim::Schedule>,
    /// The simulator's engine: threads (one OS thread per agent), coroutines or coroutines:N
    /// (every agent a coroutine on N host threads), as `PTO_SIM_ENGINE`.
    #[arg(long, value_name = "ENGINE", value_parser = crate::target::parse_engine)]
    engine: Option<pto_sim::SimEngine>,
    /// Print one JSON object per runtime on standard output (JSON lines, see [`RunLine`])
    /// instead of the text lines; a failed run's object says `"result": "FAIL"` and why.
    #[arg(long)]
    json: bool,
}

/// Version of the `pto run --json` object; bumped on any change of its fields.
pub(crate) const RUN_FORMAT_VERSION: u32 = 2;

/// One run as `pto run --json` prints it (one object per line, per runtime).
#[derive(serde::Serialize, Debug)]
pub(crate) struct RunLine {
    /// [`RUN_FORMAT_VERSION`].
    format_version: u32,
    /// The workload (`vector`, `chain513`, ...).
    workload: &'static str,
    /// The board (`sim-a2a3`, ...).
    board: &'static str,
    /// `hbg` or `trb`.
    runtime: &'static str,
    /// The executor that ran (`legacy`, `resident`); the one asked for when the run failed.
    executor: String,
    /// The cache model in effect (`coherent`, `faithful:SEED`).
    cache_model: String,
    /// The checks in effect (`off`, `race`, `init`, `race,init`).
    checks: &'static str,
    /// Who scheduled the simulated agents: `os` (the engine's host threads and the OS: not
    /// reproducible) or the seeded schedule (`seed:N`, `seed:N:pct:D`) that replays the run.
    schedule: String,
    /// Tasks run (0 when the run failed).
    tasks: u64,
    /// Host graph build (host-built graph), microseconds.
    build_us: Option<f64>,
    /// Orchestration on the device (device-side runtime), microseconds.
    orchestration_us: Option<f64>,
    /// The run from launch to fence, microseconds.
    run_us: Option<f64>,
    /// Output values checked against the golden.
    checked: usize,
    /// `PASS` or `FAIL`.
    result: &'static str,
    /// Why it failed.
    error: Option<String>,
}

fn parse_dump_level(s: &str) -> Result<DumpLevel, String> {
    s.parse().map_err(|_| format!("{s:?}: expected partial, hybrid or full"))
}

pub(crate) fn run(a: &RunArgs) -> Result<(), Fail> {
    match a.target.board {
        BoardName::SimA2a3 => run_on::<SimA2a3>(a),
        BoardName::SimA5 => run_on::<SimA5>(a),
        BoardName::SimMini => run_on::<SimMini>(a),
    }
}

fn run_on<B: Board>(a: &RunArgs) -> Result<(), Fail>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
{
    let (name, w) = workload::<B::Platform>(a.example);
    a.target.check()?;
    if let Some(p) = &a.trace {
        crate::paths::output_file("--trace", p)?;
    }
    if let Some(p) = &a.svg {
        crate::paths::output_file("--svg", p)?;
    }
    if let Some(d) = &a.dump_dir {
        crate::paths::output_dir("--dump-dir", d)?;
    }
    if a.kernels == pto_testkit::KernelChoice::Native && !pto_testkit::native::NATIVE_EXAMPLES.contains(&name) {
        let have = pto_testkit::native::NATIVE_EXAMPLES.join(", ");
        return Err(Fail(format!("{name} has no native kernels (--kernels native runs {have})"), 2));
    }
    let (dev, k) = open_with::<B>(a.cache, a.check, a.kernels, a.engine, a.schedule)?;
    let schedule = dev.platform().schedule().to_string();
    let engine = dev.platform().engine();
    let rts = a.target.runtime.list();
    let tracing = a.trace.is_some() || a.svg.is_some();
    let cache = cache_name(dev.platform().cache());
    let checks = dev.platform().checks();
    let mut failed = 0;
    for &rt in &rts {
        let started = std::time::SystemTime::now();
        let outcome = pto_testkit::dumped(a.dump, a.dump_dir.clone(), || {
            pto_testkit::aicored(a.aicore, || {
                pto_testkit::executed(a.target.executor.pto(), || pto_testkit::traced(tracing, || w(&dev, &k, rt)))
            })
        });
        if a.json {
            let us = |d: std::time::Duration| d.as_secs_f64() * 1e6;
            let line = match &outcome {
                Ok(o) => RunLine {
                    format_version: RUN_FORMAT_VERSION,
                    workload: name,
                    board: B::NAME,
                    runtime: rt.name(),
                    executor: o.report.executor.to_string(),
                    cache_model: cache.clone(),
                    checks: checks.name(),
                    schedule: schedule.clone(),
                    tasks: o.report.tasks,
                    build_us: (rt == pto::runtime::orch::RuntimeKind::HostBuiltGraph).then(|| us(o.build)),
                    orchestration_us: o.report.orchestration.map(us),
                    run_us: Some(us(o.report.wall)),
                    checked: o.checked,
                    result: "PASS",
                    error: None,
                },
                Err(e) => RunLine {
                    format_version: RUN_FORMAT_VERSION,
                    workload: name,
                    board: B::NAME,
                    runtime: rt.name(),
                    executor: a.target.executor.pto().to_string(),
                    cache_model: cache.clone(),
                    checks: checks.name(),
                    schedule: schedule.clone(),
                    tasks: 0,
                    build_us: None,
                    orchestration_us: None,
                    run_us: None,
                    checked: 0,
                    result: "FAIL",
                    error: Some(e.to_string()),
                },
            };
            outln!("{}", serde_json::to_string(&line).map_err(|e| Fail(e.to_string(), 1))?);
        }
        match outcome {
            Ok(o) => {
                if !a.json {
                    let native = if a.kernels == pto_testkit::KernelChoice::Native { " kernels=native" } else { "" };
                    let aicore = if a.aicore == pto::AicoreProgram::Native { " aicore=native" } else { "" };
                    outln!(
                        "{} cache={cache} check={} schedule={schedule} engine={engine}{native}{aicore}",
                        o.summary(B::NAME),
                        checks.name()
                    );
                }
                if tracing {
                    let several = rts.len() > 1;
                    let json = a.trace.as_deref().map(|p| pto_testkit::trace_path(p, rt, several));
                    let svg = a.svg.as_deref().map(|p| pto_testkit::trace_path(p, rt, several));
                    let line = pto_testkit::write_trace(&o.report, json.as_deref(), svg.as_deref())?;
                    say(a.json, &format!("{name:<22} {line}"))?;
                }
                if a.dump.is_some() {
                    let line = pto_testkit::dump_summary(&o.report)
                        .map_err(|e| Fail(format!("{name} runtime={}: {e}", rt.name()), 1))?;
                    say(a.json, &format!("{name:<22} {line}"))?;
                }
            }
            Err(e) => {
                eprintln!("{name:<22} board={} runtime={} schedule={schedule} FAIL: {e}", B::NAME, rt.name());
                if let Some(r) = dev.platform().schedule_report() {
                    eprintln!("{}", describe_schedule(&r));
                }
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

/// A side line (trace or dump written): on standard output, or on standard error under
/// `--json`, whose standard output is the JSON lines alone.
fn say(json: bool, line: &str) -> Result<(), Fail> {
    if json {
        eprintln!("{line}");
    } else {
        outln!("{line}");
    }
    Ok(())
}
