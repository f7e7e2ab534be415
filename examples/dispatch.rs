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

const USAGE: &str =
    "usage: dispatch [N] [--dump partial|hybrid|full [--dump-dir DIR]]   (N > 0 tasks per shape, default 1000)";

/// The command line: `[N] [--dump LEVEL] [--dump-dir DIR]`.
struct Args {
    n: u32,
    dump: Option<DumpLevel>,
    dump_dir: Option<std::path::PathBuf>,
}

/// Parse the arguments; `Err(None)` asks for the usage, `Err(Some(why))` is an error.
fn parse(args: Vec<String>) -> Result<Args, Option<String>> {
    let mut out = Args { n: 1000, dump: None, dump_dir: None };
    let mut n_seen = false;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |what: &str| inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{flag} needs {what}"));
        match flag.as_str() {
            "-h" | "--help" => return Err(None),
            "--dump" => out.dump = Some(pto_testkit::parse_dump_level(&value("partial, hybrid or full")?)?),
            "--dump-dir" => out.dump_dir = Some(value("a directory")?.into()),
            _ if a.starts_with('-') => return Err(Some(format!("unknown argument {a:?}"))),
            _ if n_seen => return Err(Some(format!("unexpected argument {a:?} (N was given already)"))),
            _ => {
                out.n = match a.parse() {
                    Ok(n) if n > 0 => n,
                    _ => return Err(Some(format!("N must be a positive integer, got {a:?}"))),
                };
                n_seen = true;
            }
        }
    }
    pto_testkit::check_dump_dir(out.dump, out.dump_dir.as_deref())?;
    Ok(out)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1).collect()) {
        Ok(a) => a,
        Err(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(Some(e)) => {
            eprintln!("dispatch: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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
