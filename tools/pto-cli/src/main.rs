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

/// `println!` for the commands: a line to standard output through [`emit`], `?` on its error.
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::emit(&format!("{}\n", format_args!($($t)*)))?
    };
}

mod bench;
mod dump;
mod explore;
mod paths;
mod run;
mod target;
mod trace;
mod workload;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use bench::BenchArgs;
use dump::DumpArgs;
use explore::ExploreArgs;
use run::RunArgs;
use trace::TraceArgs;

#[derive(Parser, Debug)]
#[command(name = "pto", version, about = "pto-rt: run, trace and bench task-graph runtimes on simulated boards")]
struct Cli {
    /// Print the host's phases on standard error: each span (build, reserve, publish, launch,
    /// fence, collect, dump) as it closes, with its time, and the phase lines (slot, epoch).
    /// `RUST_LOG` chooses other filters (`RUST_LOG=pto::host=trace` adds the args-dump
    /// drains). Coloured only when standard error is a terminal and `NO_COLOR` is not set.
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
    /// Run an example under many seeded schedules of the simulator; stop at the first failure
    /// and print the seed that replays it.
    Explore(ExploreArgs),
    /// Read an args-dump directory written by `pto run --dump` (or `RunConfig::dump`).
    Dump(DumpArgs),
    /// Read a Chrome trace-event JSON written by `pto run --trace`.
    Trace(TraceArgs),
}

/// A failure: its message and exit status (2 for a request this build cannot serve).
struct Fail(String, u8);

/// Standard output's reader went away (a closed pipe): nothing more is written to it.
static STDOUT_GONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write `text` to standard output. A reader that has gone away (`pto run … | head -1`) is not
/// an error: the command goes on (its files are still written) and prints nothing more; any
/// other write error is a failure that names it.
fn emit(text: &str) -> Result<(), Fail> {
    use std::io::Write as _;
    use std::sync::atomic::Ordering;
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(Fail(format!("cannot write the output: {e}"), 1)),
    }
}

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Self {
        Fail(e.to_string(), 1)
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The host's phases on standard error (`RUST_LOG` wins over `-v`): pto-testkit's subscriber.
    pto_testkit::init_logging(if cli.verbose { "pto=debug" } else { "warn" }, cli.verbose);
    let r = match cli.cmd {
        Cmd::Run(a) => run::run(&a),
        Cmd::Bench(a) => bench::bench(&a),
        Cmd::Explore(a) => explore::explore(&a),
        Cmd::Dump(a) => dump::dump(&a),
        Cmd::Trace(a) => trace::trace(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(msg, code)) => {
            eprintln!("pto: {msg}");
            ExitCode::from(code)
        }
    }
}
