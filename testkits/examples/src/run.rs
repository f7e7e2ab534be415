//! How a workload runs: the per-thread settings a caller wraps around it (trace, args dump,
//! executor) and [`run_on`], which runs one orchestration on one runtime under them.

use std::time::Duration;

use pto_hal::HostPlatform;
use pto_runtime::dump::DumpLevel;
use pto_runtime::host::{AicoreProgram, Error, Executor, Program, RunConfig, RunReport};
use pto_runtime::orch::{OrchArgs, RuntimeKind};

use crate::Device;

thread_local! {
    /// Set by [`traced`]: every [`run_on`] of this thread records a trace.
    static TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// Set by [`dumped`]: every [`run_on`] of this thread dumps arguments.
    static DUMP: std::cell::RefCell<Option<DumpSetting>> = const { std::cell::RefCell::new(None) };
}

/// What [`dumped_with_arena`] set: level, directory, arena bytes per AICPU thread.
type DumpSetting = (DumpLevel, Option<std::path::PathBuf>, Option<u64>);

/// Run `f` with the args dump at `level` (writing into `dir`, or a fresh temporary directory)
/// for every workload run it makes on this thread ([`RunConfig::with_dump`]); what was written
/// arrives in [`Outcome::report`](crate::Outcome::report)`.dump`.
pub fn dumped<T>(level: Option<DumpLevel>, dir: Option<std::path::PathBuf>, f: impl FnOnce() -> T) -> T {
    dumped_with_arena(level, dir, None, f)
}

/// [`dumped`], with a payload arena of `arena` bytes per AICPU thread
/// ([`RunConfig::with_dump_arena`]) when given.
pub fn dumped_with_arena<T>(
    level: Option<DumpLevel>,
    dir: Option<std::path::PathBuf>,
    arena: Option<u64>,
    f: impl FnOnce() -> T,
) -> T {
    let before = DUMP.with(|d| d.replace(level.map(|l| (l, dir, arena))));
    let v = f();
    DUMP.with(|d| *d.borrow_mut() = before);
    v
}

thread_local! {
    /// The executor every host-built-graph run of this thread asks for ([`executed`]).
    pub(crate) static EXECUTOR: std::cell::Cell<Executor> = const { std::cell::Cell::new(Executor::Auto) };
}

/// Run `f` with every host-built-graph workload run it makes on this thread on executor `e`
/// ([`RunConfig::with_executor`]); the device-side runtime always runs on the legacy one.
pub fn executed<T>(e: Executor, f: impl FnOnce() -> T) -> T {
    let before = EXECUTOR.with(|x| x.replace(e));
    let v = f();
    EXECUTOR.with(|x| x.set(before));
    v
}

thread_local! {
    /// The AICore program every workload run of this thread asks for ([`aicored`]).
    static AICORE: std::cell::Cell<AicoreProgram> = const { std::cell::Cell::new(AicoreProgram::Rust) };
}

/// Run `f` with every workload run it makes on this thread served by the AICore program
/// `p` ([`RunConfig::with_aicore`]; the C one runs the legacy executor only, so `Auto` means
/// legacy there).
pub fn aicored<T>(p: AicoreProgram, f: impl FnOnce() -> T) -> T {
    let before = AICORE.with(|x| x.replace(p));
    let v = f();
    AICORE.with(|x| x.set(before));
    v
}

/// Run `f` with tracing on (or off) for every workload run it makes on this thread
/// ([`RunConfig::with_trace`]); the trace arrives in [`Outcome::report`](crate::Outcome::report)`.trace`.
pub fn traced<T>(on: bool, f: impl FnOnce() -> T) -> T {
    let before = TRACE.with(|t| t.replace(on));
    let v = f();
    TRACE.with(|t| t.set(before));
    v
}

/// Both runtimes, in the order examples run them.
pub const RUNTIMES: [RuntimeKind; 2] = [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing];

/// Run `program` on `rt`: on the host-built graph the build is timed separately.
pub fn run_on<P: HostPlatform>(
    dev: &Device<P>,
    program: &Program,
    args: &OrchArgs,
    rt: RuntimeKind,
    cfg: &RunConfig,
) -> Result<(RunReport, Duration), Error> {
    let mut cfg = cfg.clone().with_runtime(rt).with_trace(cfg.trace || TRACE.with(|t| t.get()));
    if rt == RuntimeKind::HostBuiltGraph && cfg.executor == Executor::Auto {
        cfg = cfg.with_executor(EXECUTOR.with(|x| x.get()));
    }
    if cfg.aicore == AicoreProgram::Rust {
        cfg = cfg.with_aicore(AICORE.with(|x| x.get()));
    }
    if let Some((level, dir, arena)) = DUMP.with(|d| d.borrow().clone()) {
        cfg = cfg.with_dump(Some(level));
        if let Some(bytes) = arena {
            cfg = cfg.with_dump_arena(bytes);
        }
        if let Some(dir) = dir {
            cfg = cfg.with_dump_dir(dir.join(rt.name()));
        }
    }
    match rt {
        RuntimeKind::HostBuiltGraph => {
            let g = dev.build_program(program, args)?;
            let r = dev.run_with(&g, &cfg)?;
            Ok((r, g.build_time()))
        }
        RuntimeKind::TensormapRing => Ok((dev.run_program(program, args, &cfg)?, Duration::ZERO)),
    }
}
