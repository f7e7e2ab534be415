//! A fault stops a run at the faulted task, on every route: the host-built graph on the legacy
//! and on the resident executor, and the device-side runtime (which `Auto` runs on the legacy
//! executor; it refuses the resident one). After a kernel faults, no consumer of its task runs
//! — its completion releases nothing — and nothing is dispatched after the fault is latched;
//! the args dump has no after-completion record of the faulted task.
//!
//! The kernels count their own runs (per task, in this process), so "never ran" is counted,
//! not inferred. Each scene repeats [`REPS`] times per route. The broken variant,
//! `breakage::RELEASE_ON_FAULT` (a faulted subtask completes like any other and releases its
//! consumers, with the interleaving forced in which nobody looks at the latch until the graph
//! drained), is caught in every repetition: the `reproducer_*` tests assert that it is.
//!
//! The cores' own error exits leave through the teardown gate too: cores that give up waiting
//! for work are released, and the device stays usable (`breakage::ERROR_EXIT_SKIPS_GATE`, the
//! old exits, is caught every time).
//!
//! Every test takes [`SERIAL`] first: the counters and the breakage switch are process-wide.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::codes::{DeviceFault, Site};
use pto::runtime::dump::DumpLevel;
use pto::runtime::host::DeviceError;
use pto::runtime::host::dump::{Dump, Stage};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock()
}

/// Repetitions of each scene per route.
const REPS: u32 = 20;
/// Tasks of the chain; the one at [`BAD`] faults.
const CHAIN: u32 = 8;
/// The chain's faulting task.
const BAD: u32 = 3;
/// Tasks of the DAG.
const DAG: u32 = 2048;
/// The DAG's faulting task (early: its descendants are a quarter of the graph and more).
const DAG_BAD: u32 = 5;

/// Runs of each task's kernel, by the task's index in its orchestration (scalar 0).
static RAN: [AtomicU32; DAG as usize] = [const { AtomicU32::new(0) }; DAG as usize];
/// The id each task's kernel saw (`KernelContext::task_id`: the runtime's own, which on the
/// device-side runtime is not the index), `u64::MAX` when it never ran.
static IDS: [AtomicU64; DAG as usize] = [const { AtomicU64::new(u64::MAX) }; DAG as usize];

/// Count a run of the task whose index is scalar 0. Instant: it touches no tensor.
fn k_mark(k: &mut dyn KernelContext) {
    let i = k.scalar_arg(0) as usize;
    IDS[i].store(k.task_id() as u64, Ordering::SeqCst);
    RAN[i].fetch_add(1, Ordering::SeqCst);
}

/// [`k_mark`], then fault.
fn k_fault(k: &mut dyn KernelContext) {
    k_mark(k);
    panic!("deliberate fault of task index {}", k.scalar_arg(0));
}

fn reset() {
    for (r, id) in RAN.iter().zip(&IDS) {
        r.store(0, Ordering::SeqCst);
        id.store(u64::MAX, Ordering::SeqCst);
    }
}

fn ran(i: u32) -> u32 {
    RAN[i as usize].load(Ordering::SeqCst)
}

fn id(i: u32) -> u32 {
    let v = IDS[i as usize].load(Ordering::SeqCst);
    u32::try_from(v).unwrap_or_else(|_| panic!("task index {i} never ran"))
}

/// One way a program reaches the cores.
#[derive(Copy, Clone, Debug)]
struct Route {
    rt: RuntimeKind,
    executor: Executor,
}

/// Every route a program can take: the host-built graph on both executors, the device-side
/// runtime as `Auto` runs it (legacy; it refuses `Resident`, checked by
/// [`the_device_side_runtime_refuses_the_resident_executor`]).
const ROUTES: [Route; 3] = [
    Route { rt: RuntimeKind::HostBuiltGraph, executor: Executor::Legacy },
    Route { rt: RuntimeKind::HostBuiltGraph, executor: Executor::Resident },
    Route { rt: RuntimeKind::TensormapRing, executor: Executor::Auto },
];

/// A device with the kernels and the two orchestrations registered.
struct Rig {
    dev: Device,
    mark: FuncId,
    fault: FuncId,
    chain: Program,
    dag: Program,
}

fn rig() -> Rig {
    let dev = pto::open().expect("open the selected board");
    let mark = dev.register_kernel("mark", CoreType::Aiv, k_mark).unwrap();
    let fault = dev.register_kernel("mark_then_fault", CoreType::Aiv, k_fault).unwrap();
    let chain = dev.register_orchestration("fault_chain", orch_chain).unwrap();
    let dag = dev.register_orchestration("fault_dag", orch_dag).unwrap();
    Rig { dev, mark, fault, chain, dag }
}

/// Scalars: mark func, fault func, task count, faulting index. Tensor: one `[1, 16]` row every
/// task reads and writes, so task `i + 1` consumes task `i`.
fn orch_chain(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let (mark, fault) = (FuncId(a.s(0)? as u16), FuncId(a.s(1)? as u16));
    let (n, bad) = (a.s(2)?, a.s(3)?);
    for i in 0..n {
        o.submit(Task::aiv(if i == bad { fault } else { mark }).inout(&y).scalar(i))?;
    }
    Ok(())
}

/// The DAG's producers of task `i`: its parent in a binary tree, and every fifth task also its
/// predecessor (fan-out 2 and more, fan-in up to 2).
fn parents(i: u32) -> Vec<u32> {
    let mut p = Vec::new();
    if i > 0 {
        p.push((i - 1) / 2);
    }
    if i.is_multiple_of(5) && i > 1 && (i - 1) / 2 != i - 1 {
        p.push(i - 1);
    }
    p
}

/// Every task that depends on `bad`, directly or not.
fn descendants(n: u32, bad: u32) -> BTreeSet<u32> {
    let mut d = BTreeSet::from([bad]);
    // Producers come before their consumers, so one pass in index order closes the set.
    for i in bad + 1..n {
        if parents(i).iter().any(|p| d.contains(p)) {
            d.insert(i);
        }
    }
    d.remove(&bad);
    d
}

/// Scalars as [`orch_chain`]'s. Tensor: `[n, 16]`; task `i` writes row `i` and reads its
/// producers' rows ([`parents`]).
fn orch_dag(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let (mark, fault) = (FuncId(a.s(0)? as u16), FuncId(a.s(1)? as u16));
    let (n, bad) = (a.s(2)? as u32, a.s(3)? as u32);
    for i in 0..n {
        let mut t = Task::aiv(if i == bad { fault } else { mark }).output(&y.view(&[i, 0], &[1, 16])?).scalar(i as u64);
        for p in parents(i) {
            t = t.input(&y.view(&[p, 0], &[1, 16])?);
        }
        o.submit(t)?;
    }
    Ok(())
}

/// Run `program` over a fresh `[rows, 16]` tensor on `route`, expecting it to fail: the fault.
fn run_faulting(r: &Rig, program: &Program, route: Route, rows: u32, n: u32, bad: u32, cfg: RunConfig) -> DeviceError {
    reset();
    let y = r.dev.alloc::<f32>(&[rows, 16]).unwrap();
    let args = OrchArgs::new()
        .tensor(y.tensor())
        .scalar(r.mark.0 as u64)
        .scalar(r.fault.0 as u64)
        .scalar(n as u64)
        .scalar(bad as u64);
    let cfg = cfg.with_runtime(route.rt).with_executor(route.executor);
    let result = match route.rt {
        RuntimeKind::HostBuiltGraph => {
            let g = r.dev.build_program(program, &args).unwrap();
            r.dev.run_with(&g, &cfg)
        }
        RuntimeKind::TensormapRing => r.dev.run_program(program, &args, &cfg),
    };
    match result {
        Err(Error::Device(d)) => d,
        other => panic!("{route:?}: expected the kernel's fault, got {other:?}"),
    }
}

/// The fault is the faulting kernel's: KERNEL_FAULT at the kernel site, naming the task whose
/// kernel ran last before the panic (the task with index `bad`).
fn assert_is_the_kernels(e: &DeviceError, route: Route, bad: u32) {
    assert_eq!(e.code, ErrorCode::Device(DeviceFault::KernelFault), "{route:?}: {e}");
    assert_eq!(e.site, Site::Kernel, "{route:?}: {e}");
    assert_eq!(e.task, Some(id(bad)), "{route:?}: {e}");
    if route.rt == RuntimeKind::HostBuiltGraph {
        assert_eq!(e.task, Some(bad), "{route:?}: the host-built graph's id is the index");
    }
    assert!(e.message.contains("deliberate fault"), "{route:?}: {e}");
}

/// The chain's tasks after the faulting one that ran, as `(index, runs)`.
fn chain_successors_that_ran() -> Vec<(u32, u32)> {
    (BAD + 1..CHAIN).map(|i| (i, ran(i))).filter(|&(_, n)| n != 0).collect()
}

/// A chain of 8 whose task 3 faults, 20 times on every route: the run returns the kernel's
/// fault naming task 3, tasks 0..=3 ran once each, and tasks 4..7 never ran.
#[test]
fn no_successor_of_a_faulted_task_runs_in_a_chain_on_any_route() {
    let _s = serial();
    let r = rig();
    for route in ROUTES {
        for rep in 0..REPS {
            let e = run_faulting(&r, &r.chain, route, 1, CHAIN, BAD, RunConfig::default());
            assert_is_the_kernels(&e, route, BAD);
            for i in 0..=BAD {
                assert_eq!(ran(i), 1, "{route:?} rep {rep}: task {i} before the fault ran once");
            }
            let late = chain_successors_that_ran();
            assert!(late.is_empty(), "{route:?} rep {rep}: successors of the faulted task ran: {late:?}");
        }
    }
}

/// The broken variant is caught every time: with `RELEASE_ON_FAULT`, the fault is still
/// latched and reported, and the successors of task 3 ran in every one of the repetitions on
/// every route.
#[test]
fn reproducer_release_on_fault_runs_the_chains_successors_every_time() {
    let _s = serial();
    let r = rig();
    let _b = breakage::activate(breakage::RELEASE_ON_FAULT);
    for route in ROUTES {
        for rep in 0..REPS {
            let e = run_faulting(&r, &r.chain, route, 1, CHAIN, BAD, RunConfig::default());
            assert_is_the_kernels(&e, route, BAD);
            let late = chain_successors_that_ran();
            assert_eq!(late.len(), (CHAIN - BAD - 1) as usize, "{route:?} rep {rep}: the bug was not caught: {late:?}");
        }
    }
}

/// A DAG of 2048 tasks whose task 5 faults, traced: no task that depends on it (directly or
/// not) runs, and the trace shows no subtask dispatched after the faulted subtask ended (which
/// is after the fault was latched) — on the resident executor, no subtask taken from its slot
/// after that. The faulted subtask itself is in the trace.
#[test]
fn nothing_depending_on_a_faulted_task_runs_and_nothing_is_dispatched_after_the_latch() {
    let _s = serial();
    let r = rig();
    let desc = descendants(DAG, DAG_BAD);
    assert!(desc.len() >= DAG as usize / 4, "the scene: {} descendants", desc.len());
    for route in ROUTES {
        for rep in 0..REPS {
            let e = run_faulting(&r, &r.dag, route, DAG, DAG, DAG_BAD, RunConfig::default().with_trace(true));
            assert_is_the_kernels(&e, route, DAG_BAD);
            let ran_desc: Vec<u32> = desc.iter().copied().filter(|&i| ran(i) != 0).collect();
            assert!(ran_desc.is_empty(), "{route:?} rep {rep}: dependents of the faulted task ran: {ran_desc:?}");
            let t = e.trace.as_ref().unwrap_or_else(|| panic!("{route:?}: a traced run's fault carries its trace"));
            let bad = t.subtasks.iter().find(|s| s.task == id(DAG_BAD)).expect("the faulted subtask is traced");
            let late: Vec<(u32, u64)> = t
                .subtasks
                .iter()
                .filter_map(|s| s.dispatch.filter(|&d| s.task != bad.task && d > bad.end).map(|d| (s.task, d)))
                .collect();
            assert!(late.is_empty(), "{route:?} rep {rep}: dispatched after the fault (ended {}): {late:?}", bad.end);
        }
    }
}

/// The broken variant is caught every time in the DAG too (5 repetitions per route): dependents
/// of task 5 ran, and were dispatched after it ended.
#[test]
fn reproducer_release_on_fault_runs_the_dags_dependents_every_time() {
    let _s = serial();
    let r = rig();
    let desc = descendants(DAG, DAG_BAD);
    let _b = breakage::activate(breakage::RELEASE_ON_FAULT);
    for route in ROUTES {
        // Fewer repetitions: the forced variant runs the whole graph every time.
        for rep in 0..REPS / 4 {
            let e = run_faulting(&r, &r.dag, route, DAG, DAG, DAG_BAD, RunConfig::default().with_trace(true));
            assert_is_the_kernels(&e, route, DAG_BAD);
            let ran_desc = desc.iter().filter(|&&i| ran(i) != 0).count();
            assert_eq!(ran_desc, desc.len(), "{route:?} rep {rep}: the bug was not caught");
            let t = e.trace.as_ref().expect("the trace");
            let bad = t.subtasks.iter().find(|s| s.task == id(DAG_BAD)).expect("the faulted subtask is traced");
            assert!(
                t.subtasks.iter().any(|s| s.dispatch.is_some_and(|d| d > bad.end)),
                "{route:?} rep {rep}: no dispatch after the fault was seen"
            );
        }
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pto-faults-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Run the chain with the full args dump into a fresh directory; the fault and the dump.
fn dumped_chain(r: &Rig, route: Route) -> (DeviceError, Dump) {
    let dir = tmp("chain");
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&dir);
    let e = run_faulting(r, &r.chain, route, 1, CHAIN, BAD, cfg);
    let d = Dump::open(&dir).unwrap_or_else(|err| panic!("{route:?}: the failed run's dump: {err}"));
    let _ = std::fs::remove_dir_all(&dir);
    (e, d)
}

/// The chain of 8 whose task 3 faults, dumped at `Full`, 20 times on every route: the faulted
/// task's input is recorded before dispatch, but it has no after-completion record (its kernel
/// wrote nothing); tasks 0..=2 have theirs; no later task has any record.
#[test]
fn a_faulted_task_has_no_after_completion_record_on_any_route() {
    let _s = serial();
    let r = rig();
    for route in ROUTES {
        for rep in 0..REPS {
            let (e, d) = dumped_chain(&r, route);
            assert_is_the_kernels(&e, route, BAD);
            assert!(d.find(id(BAD), 0, Stage::BeforeDispatch).is_some(), "{route:?} rep {rep}: its input");
            let after: Vec<_> =
                d.records.iter().filter(|x| x.task == id(BAD) && x.stage == Stage::AfterCompletion).collect();
            assert!(after.is_empty(), "{route:?} rep {rep}: the faulted task has after-completion records: {after:?}");
            for i in 0..BAD {
                assert!(d.find(id(i), 0, Stage::AfterCompletion).is_some(), "{route:?} rep {rep}: task {i}'s output");
            }
            let known: BTreeSet<u32> = (0..=BAD).map(id).collect();
            let strays: Vec<u32> = d.records.iter().map(|x| x.task).filter(|t| !known.contains(t)).collect();
            assert!(strays.is_empty(), "{route:?} rep {rep}: records of tasks after the fault: {strays:?}");
        }
    }
}

/// The broken variant is caught every time: with `RELEASE_ON_FAULT` the faulted task has an
/// after-completion record in every repetition on every route.
#[test]
fn reproducer_release_on_fault_records_the_faulted_task_after_completion_every_time() {
    let _s = serial();
    let r = rig();
    let _b = breakage::activate(breakage::RELEASE_ON_FAULT);
    for route in ROUTES {
        for rep in 0..REPS {
            let (e, d) = dumped_chain(&r, route);
            assert_is_the_kernels(&e, route, BAD);
            assert!(
                d.find(id(BAD), 0, Stage::AfterCompletion).is_some(),
                "{route:?} rep {rep}: the bug was not caught (no after-completion record of the faulted task)"
            );
        }
    }
}

/// The fourth combination: the device-side runtime on the resident executor is refused before
/// launch, naming why; `Auto` runs it on the legacy executor.
#[test]
fn the_device_side_runtime_refuses_the_resident_executor() {
    let _s = serial();
    let r = rig();
    let y = r.dev.alloc::<f32>(&[1, 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor()).scalar(r.mark.0 as u64).scalar(r.fault.0 as u64).scalar(2).scalar(99);
    let trb = RunConfig::default().with_runtime(RuntimeKind::TensormapRing);
    match r.dev.run_program(&r.chain, &args, &trb.clone().with_executor(Executor::Resident)) {
        Err(Error::Config(ConfigError::ResidentRefused { reason })) => {
            assert_eq!(reason, pto::LegacyReason::DeviceSideRuntime)
        }
        other => panic!("expected the resident executor to be refused, got {other:?}"),
    }
    let rep = r.dev.run_program(&r.chain, &args, &trb).unwrap();
    assert_eq!(rep.executor, Executor::Legacy);
    assert_eq!(rep.tasks, 2);
}

/// Released by [`reproducer_waiting_for_a_hung_core_is_caught`] once its run has ended.
static RELEASE_SLOW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Returns only when the test releases it: a kernel far slower than the watchdog.
fn k_slow(_k: &mut dyn KernelContext) {
    while !RELEASE_SLOW.load(Ordering::Acquire) {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// `breakage::WAIT_FOR_HUNG_CORE` (the old bounds of a hung kernel: the AICPU waits the exit
/// budget for the core the latch names, and the host waits the cores' whole budget for the
/// AICore program) is caught by the check that a hung kernel is reported within the watchdog
/// plus its grace (`tests/memory_safety.rs`, which allows 3.5 s with these budgets): with it,
/// the `KERNEL_HUNG` arrives only after the watchdog, the exit budget and the core budget —
/// at least 5 s here, however fast the machine, since every one of them is a wait.
#[test]
fn reproducer_waiting_for_a_hung_core_is_caught() {
    use pto::board::{Board, Selected};
    use pto::runtime::host::Timeouts;
    let _s = serial();
    RELEASE_SLOW.store(false, Ordering::Release);
    // Watchdog 1 s, exit 1 s: the core budget is 2 x 1 + 1 = 3 s.
    let raw = Selected::open().expect("open the selected board");
    let dev: Device = pto::runtime::host::Device::new_in_process(raw, Timeouts::new(1_000_000, 1_000_000, 30_000_000))
        .expect("device");
    let slow = dev.register_kernel("slow", CoreType::Aiv, k_slow).unwrap();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(slow).output(&x.tensor())).map(|_| ())).unwrap();
    let took = {
        let _b = breakage::activate(breakage::WAIT_FOR_HUNG_CORE);
        let started = std::time::Instant::now();
        let e = dev.run(&graph).unwrap_err();
        let took = started.elapsed();
        RELEASE_SLOW.store(true, Ordering::Release);
        match e {
            Error::Device(d) => assert_eq!(d.code, ErrorCode::Device(DeviceFault::KernelHung), "{d}"),
            other => panic!("expected KERNEL_HUNG, got {other:?}"),
        }
        took
    };
    assert!(
        took >= std::time::Duration::from_millis(5_000),
        "the variant reported the hung kernel after {took:?}: within the bound the check allows, so the check would not catch it"
    );
}

/// Sleeps scalar 0 milliseconds of host time before it submits anything (its scene runs on the
/// host's threads, where that is device time too), then submits one [`k_mark`] task (func in
/// scalar 1).
fn orch_late(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    std::thread::sleep(std::time::Duration::from_millis(a.s(0)?));
    o.submit(Task::aiv(FuncId(a.s(1)? as u16)).scalar(0))?;
    Ok(())
}

/// A core's error exit passes its teardown gate: an orchestration that submits nothing for
/// longer than the cores' wait budget (the device-side runtime's schedulers keep no stall
/// watchdog while the graph's size is unknown) makes the idle legacy cores give up
/// (`SCHEDULER_TIMEOUT` at the core-idle site). Each still writes EXITED and waits at its gate,
/// so the AICPU releases it and the device stays usable: the next run passes. Under
/// `breakage::ERROR_EXIT_SKIPS_GATE` (the old error exits, which returned before EXITED) the
/// AICPU abandons every core that gave up, the host finds cores unreleased and marks the device
/// unusable, and the next run fails: `reproducer_an_error_exit_that_skips_the_gate_is_caught`
/// asserts it does every time.
#[test]
fn a_core_that_gives_up_still_passes_its_teardown_gate() {
    let _s = serial();
    for rep in 0..3 {
        let next = late_orchestration_then_a_run();
        assert!(next.is_ok(), "repetition {rep}: the run after the cores gave up failed: {next:?}");
    }
}

/// `breakage::ERROR_EXIT_SKIPS_GATE` is caught by [`a_core_that_gives_up_still_passes_its_teardown_gate`]
/// every time: the device is unusable after the cores gave up.
#[test]
fn reproducer_an_error_exit_that_skips_the_gate_is_caught() {
    let _s = serial();
    let _b = breakage::activate(breakage::ERROR_EXIT_SKIPS_GATE);
    for rep in 0..3 {
        match late_orchestration_then_a_run() {
            Err(Error::Unusable(why)) => assert!(why.contains("unreleased"), "repetition {rep}: {why}"),
            other => panic!("repetition {rep}: expected the device unusable, got {other:?}"),
        }
    }
}

/// On a fresh device (the host's threads, whatever `PTO_SIM_SCHEDULE` says: the orchestration's
/// sleep must pass in device time), with a core budget of 2 × 20 + 20 = 60 ms: the device-side
/// runtime runs [`orch_late`] sleeping 300 ms, which must fail with the idle cores' timeout;
/// then what building and running a host-built one-task graph on the same device returns.
fn late_orchestration_then_a_run() -> Result<RunReport, Error> {
    use pto::board::{Board, Selected};
    use pto::runtime::codes::SchedError;
    use pto::runtime::host::Timeouts;
    let raw = pto_sim::with_engine(None, Some(pto_sim::Schedule::Os), Selected::open).expect("open the selected board");
    let dev: Device =
        pto::runtime::host::Device::new_in_process(raw, Timeouts::new(20_000, 20_000, 30_000_000)).expect("device");
    let mark = dev.register_kernel("mark", CoreType::Aiv, k_mark).unwrap();
    let late = dev.register_orchestration("late", orch_late).unwrap();
    let args = OrchArgs::new().scalar(300).scalar(mark.0 as u64);
    let trb = RunConfig::default().with_runtime(RuntimeKind::TensormapRing);
    match dev.run_program(&late, &args, &trb) {
        Err(Error::Device(d)) => {
            assert_eq!(d.code, ErrorCode::Sched(SchedError::SchedulerTimeout), "{d}");
            assert_eq!(d.site, Site::CoreIdle, "{d}");
        }
        other => panic!("expected the idle cores' timeout, got {other:?}"),
    }
    let g = dev.build(|g| g.submit(Task::aiv(mark).scalar(0)).map(|_| ()))?;
    dev.run(&g)
}
