//! The dispatch shapes of the benchmark anchor — chain, fanout, independent, dummy chain,
//! dummy fanout — at N = 1000 on both runtimes, each checked against its golden.
//!
//! `cargo run --release --example dispatch [N]`

use std::process::ExitCode;

use pto_testkit::ShapeKind;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: u32 = match args.as_slice() {
        [] => 1000,
        [a] if a == "-h" || a == "--help" => {
            println!("usage: dispatch [N]   (N > 0 tasks per shape, default 1000)");
            return ExitCode::SUCCESS;
        }
        [a] => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("dispatch: N must be a positive integer, got {a:?}\nusage: dispatch [N]");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("dispatch: unexpected arguments {:?}\nusage: dispatch [N]", &args[1..]);
            return ExitCode::from(2);
        }
    };
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
            let result = pto_testkit::build_shape(&dev, &k, kind, n).and_then(|p| {
                let r = p.run_checked(&dev, rt)?;
                // Submission: the host graph build, or the device orchestrator's own time.
                let submit = r.orchestration.unwrap_or(p.graph.build_time());
                Ok((submit, r))
            });
            match result {
                Ok((submit, r)) => println!(
                    "{:<14} runtime={} N={n:<6} tasks={:<6} submit={:>8.3} ms run={:>8.3} ms PASS",
                    kind.name(),
                    rt.name(),
                    r.tasks,
                    submit.as_secs_f64() * 1e3,
                    r.wall.as_secs_f64() * 1e3
                ),
                Err(e) => {
                    eprintln!("{:<14} runtime={} N={n} FAIL: {e}", kind.name(), rt.name());
                    ok = false;
                }
            }
        }
    }
    if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
