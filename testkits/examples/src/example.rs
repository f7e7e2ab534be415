//! The `main` of a single-workload example: parse the command line, open the board, run the
//! workload on each runtime named, and report.

use pto_hal::HostPlatform;
use pto_runtime::host::{AicoreProgram, Error};

use crate::Device;
use crate::cli::{ExampleArgs, example_usage};
use crate::native::{KernelChoice, NATIVE_EXAMPLES};
use crate::outputs::{dump_summary, failed_dump_summary, trace_path, write_trace};
use crate::registry::setup_with;
use crate::run::{aicored, dumped, executed, traced};
use crate::workloads::Workload;

/// Install the `tracing` subscriber of the examples and of `pto`: events (and, with `spans`,
/// every span as it closes, with its time) on standard error (coloured when it is a terminal and
/// `NO_COLOR` is not set: [`log_color`]), filtered by `RUST_LOG` when it
/// is set (`RUST_LOG=pto::host=debug` for the host's phases), else by `default` (`"warn"`,
/// `"pto=debug"`). `log` records come in through the subscriber's `log` bridge: the device
/// half's lines, when the facade's `device-log` feature is on. A second call does nothing.
pub fn init_logging(default: &str, spans: bool) {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::fmt::format::FmtSpan;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let spans = if spans { FmtSpan::CLOSE } else { FmtSpan::NONE };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_ansi(log_color(std::io::IsTerminal::is_terminal(&std::io::stderr())))
        .with_writer(std::io::stderr)
        .try_init();
}

/// The `main` of a single-workload example: open the board named `board` with `open`
/// (`pto::open` for the selected board), run `workload` on the runtimes the command line names
/// (both by default), print each summary (or the failure) and exit accordingly. With `--dump`
/// each run records its arguments ([`dumped`]) and a line says what its dump wrote. `RUST_LOG`
/// turns on the host's phase log ([`init_logging`]).
pub fn example_main<P: HostPlatform>(
    name: &str,
    board: &str,
    open: impl FnOnce() -> Result<Device<P>, Error>,
    workload: Workload<P>,
) -> std::process::ExitCode {
    let args = match ExampleArgs::parse_named(name, std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e == "help" => {
            println!("{}", example_usage(name));
            return std::process::ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if args.kernels == KernelChoice::Native && !NATIVE_EXAMPLES.contains(&name) {
        eprintln!("{name}: has no native kernels (--kernels native runs {})", NATIVE_EXAMPLES.join(", "));
        return std::process::ExitCode::from(2);
    }
    init_logging("warn", std::env::var_os("RUST_LOG").is_some());
    let tracing = args.trace.is_some() || args.svg.is_some();
    let several = args.runtimes.len() > 1;
    let (dev, k) = match setup_with(open, args.kernels) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{name}: cannot open the device: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for &rt in &args.runtimes {
        let started = std::time::SystemTime::now();
        let run = || aicored(args.aicore, || executed(args.executor, || traced(tracing, || workload(&dev, &k, rt))));
        match dumped(args.dump, args.dump_dir.clone(), run) {
            Ok(o) => {
                let native = if args.kernels == KernelChoice::Native { " kernels=native" } else { "" };
                let aicore = if args.aicore == AicoreProgram::Native { " aicore=native" } else { "" };
                println!("{}{native}{aicore}", o.summary(board));
                if tracing {
                    let json = args.trace.as_deref().map(|p| trace_path(p, rt, several));
                    let svg = args.svg.as_deref().map(|p| trace_path(p, rt, several));
                    match write_trace(&o.report, json.as_deref(), svg.as_deref()) {
                        Ok(line) => println!("{name:<22} {line}"),
                        Err(e) => {
                            eprintln!("{name} runtime={} trace: {e}", rt.name());
                            ok = false;
                        }
                    }
                }
                if args.dump.is_some() {
                    match dump_summary(&o.report) {
                        Ok(line) => println!("{name:<22} {line}"),
                        Err(e) => {
                            eprintln!("{name} runtime={} dump: {e}", rt.name());
                            ok = false;
                        }
                    }
                }
            }
            Err(e) => {
                eprintln!("{name} runtime={} FAIL: {e}", rt.name());
                // What a failed run collected is still on disk, its accounting unknown.
                if let Some(line) =
                    args.dump_dir.as_ref().and_then(|d| failed_dump_summary(&d.join(rt.name()), started))
                {
                    eprintln!("{name:<22} {line}");
                }
                ok = false;
            }
        }
    }
    if ok { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE }
}

/// Whether the log on standard error is coloured: only on a terminal, and never when
/// `NO_COLOR` is set to a non-empty value (<https://no-color.org>).
pub fn log_color(terminal: bool) -> bool {
    terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
