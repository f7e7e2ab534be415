//! The dispatch shapes of the benchmark anchor — chain, fanout, independent, dummy chain,
//! dummy fanout — at N = 1000 on both runtimes, each checked against its golden.
//!
//! `cargo run --release --example dispatch [-- N] [--dump partial|hybrid|full [--dump-dir DIR]]`
//! (with `--dump-dir`, each run's args dump goes to `DIR/<shape>/<runtime>`).

use std::process::ExitCode;

use pto::RunConfig;
use pto::runtime::dump::DumpLevel;
use pto::runtime::orch::RuntimeKind;
use pto_testkit::ShapeKind;

/// The dispatch shapes at N tasks each, on both runtimes, checked against their goldens.
#[derive(clap::Parser)]
#[command(name = "dispatch", disable_version_flag = true)]
struct Args {
    /// Tasks per shape.
    #[arg(default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
    /// Record each run's arguments (the args dump): partial, hybrid or full.
    #[arg(long, value_name = "LEVEL", value_parser = pto_testkit::parse_dump_level)]
    dump: Option<DumpLevel>,
    /// Where the args dump writes (each run into DIR/<shape>/<runtime>).
    #[arg(long, value_name = "DIR", requires = "dump")]
    dump_dir: Option<std::path::PathBuf>,
}

fn main() -> ExitCode {
    // Bad flags and values exit with status 2 and the usage; `--help` prints it.
    let args = <Args as clap::Parser>::parse();
    let n = args.n;
    let (dev, k) = match pto_testkit::setup(pto::open) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("dispatch: cannot open the device: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for kind in ShapeKind::ALL {
        for rt in pto_testkit::RUNTIMES {
            let mut cfg = RunConfig::default().with_runtime(rt).with_dump(args.dump);
            if let Some(dir) = &args.dump_dir {
                cfg = cfg.with_dump_dir(dir.join(kind.name()).join(rt.name()));
            }
            let result = pto_testkit::build_shape(&dev, &k, kind, n).and_then(|p| {
                // As `Prepared::run_checked`, with the run configuration (the args dump) given.
                p.reset()?;
                let r = match rt {
                    RuntimeKind::HostBuiltGraph => dev.run_with(&p.graph, &cfg)?,
                    RuntimeKind::TensormapRing => dev.run_program(&p.program, &p.args, &cfg)?,
                };
                p.check(&r).map_err(pto_testkit::Failure::Golden)?;
                // Submission: the host graph build, or the device orchestrator's own time.
                let submit = r.orchestration.unwrap_or(p.graph.build_time());
                Ok((submit, r))
            });
            match result {
                Ok((submit, r)) => {
                    println!(
                        "{:<14} runtime={} N={n:<6} tasks={:<6} submit={:>8.3} ms run={:>8.3} ms PASS",
                        kind.name(),
                        rt.name(),
                        r.tasks,
                        submit.as_secs_f64() * 1e3,
                        r.wall.as_secs_f64() * 1e3
                    );
                    if args.dump.is_some() {
                        match pto_testkit::dump_summary(&r) {
                            Ok(line) => println!("{:<14} {line}", kind.name()),
                            Err(e) => {
                                eprintln!("{:<14} runtime={} dump: {e}", kind.name(), rt.name());
                                ok = false;
                            }
                        }
                    }
                }
                Err(e) => {
                    eprintln!("{:<14} runtime={} N={n} FAIL: {e}", kind.name(), rt.name());
                    ok = false;
                }
            }
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
