//! The examples' command line (`--runtime`, `--executor`, `--kernels`, `--trace`, `--svg`,
//! `--dump`, `--dump-dir`), parsed by clap into [`ExampleArgs`].

use pto_runtime::dump::DumpLevel;
use pto_runtime::host::{AicoreProgram, Executor};
use pto_runtime::orch::RuntimeKind;

use crate::native::KernelChoice;
use crate::run::RUNTIMES;

/// Which runtimes a command line names (`--runtime hbg|trb|both`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeChoice {
    /// The host-built graph.
    Hbg,
    /// The device-side runtime.
    Trb,
    /// Both, host-built graph first.
    #[default]
    Both,
}

impl RuntimeChoice {
    /// The runtimes, in the order the examples run them.
    pub fn list(self) -> Vec<RuntimeKind> {
        match self {
            RuntimeChoice::Hbg => vec![RuntimeKind::HostBuiltGraph],
            RuntimeChoice::Trb => vec![RuntimeKind::TensormapRing],
            RuntimeChoice::Both => RUNTIMES.to_vec(),
        }
    }
}

/// The examples' command line, as clap parses it.
#[derive(clap::Parser, Debug)]
#[command(
    no_binary_name = true,
    disable_version_flag = true,
    about = "A pto-rt example: runs its workload on the selected board and checks it against its golden.",
    after_help = "With both runtimes, the device-side runtime's trace files get `.trb` before their extension; \
                  each run's args dump goes to DIR/hbg or DIR/trb, by its runtime; the executor applies to the \
                  host-built graph (the device-side runtime always dispatches from the AICPU), so \
                  `--executor resident` needs `--runtime hbg` and is refused with trb or both."
)]
struct ExampleCli {
    /// The runtimes to run on.
    #[arg(long, value_enum, default_value_t = RuntimeChoice::Both)]
    runtime: RuntimeChoice,
    /// The host-built graph's executor: auto, legacy or resident.
    #[arg(long, value_name = "EXECUTOR", value_parser = parse_executor, default_value = "auto")]
    executor: Executor,
    /// The kernels: rust, or native (the C++ kernels, through the native kernel ABI).
    #[arg(long, value_enum, default_value_t = KernelChoice::Rust)]
    kernels: KernelChoice,
    /// The AICore program: rust, or native (the legacy executor's AICore program in C; the
    /// legacy executor only).
    #[arg(long, value_name = "PROGRAM", value_parser = parse_aicore, default_value = "rust")]
    aicore: AicoreProgram,
    /// Write each run's Chrome trace-event JSON (Perfetto) here.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<std::path::PathBuf>,
    /// Write each run's SVG swimlane here.
    #[arg(long, value_name = "FILE.svg")]
    svg: Option<std::path::PathBuf>,
    /// Record each run's arguments (the args dump): partial, hybrid or full.
    #[arg(long, value_name = "LEVEL", value_parser = parse_dump_level)]
    dump: Option<DumpLevel>,
    /// Where the args dump writes (each run into DIR/<runtime>).
    #[arg(long, value_name = "DIR", requires = "dump")]
    dump_dir: Option<std::path::PathBuf>,
}

/// An example's command line: `[--runtime hbg|trb|both] [--executor auto|legacy|resident]
/// [--kernels rust|native] [--aicore rust|native] [--trace FILE.json] [--svg FILE.svg] [--dump partial|hybrid|full [--dump-dir DIR]]`,
/// parsed by clap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExampleArgs {
    /// The runtimes to run on (default both).
    pub runtimes: Vec<RuntimeKind>,
    /// The executor of the host-built-graph runs (default auto).
    pub executor: Executor,
    /// The kernels the runs register (default the Rust ones).
    pub kernels: KernelChoice,
    /// The AICore program the runs launch (default the Rust one).
    pub aicore: AicoreProgram,
    /// Where to write the Chrome trace-event JSON of each run.
    pub trace: Option<std::path::PathBuf>,
    /// Where to write the SVG swimlane of each run.
    pub svg: Option<std::path::PathBuf>,
    /// Record the runs' arguments at this level (the args dump).
    pub dump: Option<DumpLevel>,
    /// Where the args dump writes: each run into `DIR/<runtime>` (`hbg`, `trb`). Without it,
    /// each run writes the runtime's default, `<temp>/pto-dump/run-<process>-<device>-<epoch>`.
    pub dump_dir: Option<std::path::PathBuf>,
}

/// Usage of an example's command line (clap's help, under the example's name).
pub fn example_usage(name: &str) -> String {
    use clap::CommandFactory;
    ExampleCli::command().bin_name(name.to_string()).render_help().to_string()
}

impl ExampleArgs {
    /// Parse `args` (without the program name). Anything unknown, a missing value or a bad
    /// one is an error naming it (clap's message, with the usage); so is `--dump-dir` without
    /// `--dump`. `-h` / `--help` is `Err("help")`.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<ExampleArgs, String> {
        Self::parse_named("example", args)
    }

    /// [`ExampleArgs::parse`] for the example `name` (its usage line names it).
    pub fn parse_named<I: IntoIterator<Item = String>>(name: &str, args: I) -> Result<ExampleArgs, String> {
        use clap::{CommandFactory, FromArgMatches};
        let parsed = ExampleCli::command()
            .bin_name(name.to_string())
            .try_get_matches_from(args)
            .and_then(|m| ExampleCli::from_arg_matches(&m));
        match parsed {
            Ok(c) if c.executor == Executor::Resident && c.runtime.list().contains(&RuntimeKind::TensormapRing) => {
                // The one rule of every front end: what the runtime would not run as asked is
                // refused before anything runs, naming both flags (the `pto` command line's and
                // Python's `ConfigError` alike).
                let why = pto_runtime::host::ConfigError::ResidentRefused {
                    reason: pto_runtime::host::LegacyReason::DeviceSideRuntime,
                };
                Err(format!(
                    "--runtime {} with --executor resident: {why}; use --runtime hbg, or --executor legacy or auto",
                    if c.runtime.list().len() > 1 { "both" } else { "trb" }
                ))
            }
            Ok(c) => Ok(ExampleArgs {
                runtimes: c.runtime.list(),
                executor: c.executor,
                kernels: c.kernels,
                aicore: c.aicore,
                trace: c.trace,
                svg: c.svg,
                dump: c.dump,
                dump_dir: c.dump_dir,
            }),
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Err(String::from("help")),
            Err(e) => Err(e.to_string().trim_end().to_string()),
        }
    }
}

/// The value of `--executor`: `auto`, `legacy` or `resident`; anything else is an error naming
/// it.
pub fn parse_executor(s: &str) -> Result<Executor, String> {
    match s {
        "auto" => Ok(Executor::Auto),
        "legacy" => Ok(Executor::Legacy),
        "resident" => Ok(Executor::Resident),
        other => Err(format!("--executor takes auto, legacy or resident, got {other:?}")),
    }
}

/// The value of `--aicore`: `rust` or `native`; anything else is an error naming it.
pub fn parse_aicore(s: &str) -> Result<AicoreProgram, String> {
    match s {
        "rust" => Ok(AicoreProgram::Rust),
        "native" => Ok(AicoreProgram::Native),
        other => Err(format!("--aicore takes rust or native, got {other:?}")),
    }
}

/// The value of `--dump`: `partial`, `hybrid` or `full`; anything else is an error naming it.
pub fn parse_dump_level(s: &str) -> Result<DumpLevel, String> {
    s.parse().map_err(|_| format!("--dump takes partial, hybrid or full, got {s:?}"))
}

/// `--dump-dir` only means something with `--dump`: an error otherwise.
pub fn check_dump_dir(level: Option<DumpLevel>, dir: Option<&std::path::Path>) -> Result<(), String> {
    match (level, dir) {
        (None, Some(d)) => Err(format!("--dump-dir {} needs --dump partial|hybrid|full", d.display())),
        _ => Ok(()),
    }
}

/// The runtimes named by the command line (`--runtime hbg|trb|both`, default both); anything
/// else on it is an error.
pub fn runtimes_from_args() -> Result<Vec<RuntimeKind>, String> {
    ExampleArgs::parse(std::env::args().skip(1)).map(|a| a.runtimes)
}

// The command-line parser of the examples (`ExampleArgs`).
#[cfg(test)]
mod example_args_tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ExampleArgs, String> {
        ExampleArgs::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults_run_both_runtimes_without_dump() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.runtimes, RUNTIMES.to_vec());
        assert_eq!((a.dump, a.dump_dir), (None, None));
    }

    #[test]
    fn dump_levels_and_dir_parse_in_both_spellings() {
        for (word, level) in [("partial", DumpLevel::Partial), ("hybrid", DumpLevel::Hybrid), ("full", DumpLevel::Full)]
        {
            assert_eq!(parse(&["--dump", word]).unwrap().dump, Some(level));
            assert_eq!(parse(&[&format!("--dump={word}")]).unwrap().dump, Some(level));
        }
        let a = parse(&["--runtime", "hbg", "--dump", "full", "--dump-dir", "/tmp/d"]).unwrap();
        assert_eq!(a.runtimes, vec![RuntimeKind::HostBuiltGraph]);
        assert_eq!(a.dump, Some(DumpLevel::Full));
        assert_eq!(a.dump_dir.as_deref(), Some(std::path::Path::new("/tmp/d")));
        // Order does not matter: --dump-dir may come first.
        let b = parse(&["--dump-dir=/tmp/d", "--dump=hybrid"]).unwrap();
        assert_eq!((b.dump, b.dump_dir.as_deref()), (Some(DumpLevel::Hybrid), Some(std::path::Path::new("/tmp/d"))));
    }

    #[test]
    fn bad_dump_flags_are_errors_naming_them() {
        let e = parse(&["--dump", "everything"]).unwrap_err();
        assert!(e.contains("--dump") && e.contains("\"everything\"") && e.contains("partial, hybrid or full"), "{e}");
        let e = parse(&["--dump"]).unwrap_err();
        assert!(e.contains("--dump <LEVEL>") && e.contains("value is required"), "{e}");
        let e = parse(&["--dump", "full", "--dump-dir"]).unwrap_err();
        assert!(e.contains("--dump-dir <DIR>") && e.contains("value is required"), "{e}");
        let e = parse(&["--dump-dir", "/tmp/d"]).unwrap_err();
        assert!(e.contains("--dump <LEVEL>") && e.contains("required"), "{e}");
        let e = parse(&["--dump", "FULL"]).unwrap_err();
        assert!(e.contains("\"FULL\""), "{e}");
        let e = parse(&["--dumps", "full"]).unwrap_err();
        assert!(e.contains("unexpected argument '--dumps'"), "{e}");
    }

    #[test]
    fn runtime_and_executor_parse_and_bad_values_are_named() {
        let a = parse(&["--runtime", "hbg", "--executor", "resident"]).unwrap();
        assert_eq!((a.runtimes, a.executor), (vec![RuntimeKind::HostBuiltGraph], Executor::Resident));
        // The resident executor on the device-side runtime is refused, naming both flags.
        for rt in ["trb", "both"] {
            let e = parse(&["--runtime", rt, "--executor", "resident"]).unwrap_err();
            assert!(e.contains(&format!("--runtime {rt} with --executor resident")), "{e}");
        }
        assert_eq!(parse(&[]).unwrap().executor, Executor::Auto);
        assert_eq!(parse(&[]).unwrap().kernels, KernelChoice::Rust);
        assert_eq!(parse(&["--kernels", "native"]).unwrap().kernels, KernelChoice::Native);
        assert_eq!(parse(&[]).unwrap().aicore, AicoreProgram::Rust);
        assert_eq!(parse(&["--aicore", "native"]).unwrap().aicore, AicoreProgram::Native);
        let e = parse(&["--aicore", "c"]).unwrap_err();
        assert!(e.contains("rust or native") && e.contains("\"c\""), "{e}");
        let e = parse(&["--kernels", "cuda"]).unwrap_err();
        assert!(e.contains("'cuda'") && e.contains("--kernels"), "{e}");
        let e = parse(&["--runtime", "xyz"]).unwrap_err();
        assert!(e.contains("'xyz'") && e.contains("--runtime"), "{e}");
        let e = parse(&["--executor", "fast"]).unwrap_err();
        assert!(e.contains("auto, legacy or resident") && e.contains("\"fast\""), "{e}");
        assert_eq!(parse(&["--help"]).unwrap_err(), "help");
    }

    #[test]
    fn usage_names_the_flags() {
        let u = example_usage("vector");
        for flag in ["--runtime", "--executor", "--trace", "--svg", "--dump <LEVEL>", "--dump-dir <DIR>"] {
            assert!(u.contains(flag), "{flag} missing from: {u}");
        }
        assert!(u.contains("vector"), "{u}");
    }
}
