//! The device-side runtime's contract, and what both runtimes share: flow control and its
//! deadlock codes, bad input, predicates, sync-start cohorts, scope guards and orchestrator
//! access to tensor data. Every failure is a named error with its code and hint, and the
//! device runs a real workload correctly afterwards.

use pto::prelude::*;
use pto_testkit::{RUNTIMES, f};

fn device() -> (Device, pto_testkit::Kernels) {
    pto_testkit::setup(pto::open).expect("open the selected board")
}

fn trb(rings: RingConfig) -> RunConfig {
    RunConfig::default().with_runtime(RuntimeKind::TensormapRing).with_rings(rings)
}

/// The device still runs a real workload correctly, on both runtimes.
fn still_works(dev: &Device, k: &pto_testkit::Kernels) {
    for rt in RUNTIMES {
        let o = pto_testkit::vector(dev, k, rt).unwrap_or_else(|e| panic!("device not usable after the error: {e}"));
        assert_eq!(o.report.tasks, 5);
    }
}

/// Run `program` over `y` ([rows, 16] f32) and expect the orchestrator code `code`.
fn expect_code(dev: &Device, program: &Program, rows: u32, cfg: &RunConfig, code: OrchError) -> pto::Error {
    let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor());
    let e = dev.run_program(program, &args, cfg).err().unwrap_or_else(|| panic!("{code:?}: the run succeeded"));
    assert_eq!(e.code(), Some(ErrorCode::Orch(code)), "{e}");
    let text = e.to_string();
    assert!(text.contains(ErrorCode::Orch(code).name()), "the error names its code: {text}");
    assert!(text.contains("Hint"), "the error carries the hint: {text}");
    e
}

fn rows_tasks(o: &mut Orch<'_>, y: &Tensor, n: u32) -> Result<(), OrchFail> {
    for i in 0..n {
        o.submit(Task::aiv(f::ADD1).inout(&y.view(&[i, 0], &[1, 16])?))?;
    }
    Ok(())
}

fn eight_in_one_scope(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    rows_tasks(o, &a.t(0)?, 8)
}

fn chain_of_scopes(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    for _ in 0..256 {
        o.scope(|o| o.submit(Task::aiv(f::ADD1).inout(&y.view(&[0, 0], &[1, 16])?)).map(|_| ()))?;
    }
    Ok(())
}

/// The report says how long the orchestration waited in flow control: a chain of 256 tasks
/// through a window of 4 waits for room (and within its whole time); with room for every task
/// it never waits.
#[test]
fn the_report_counts_the_orchestrations_flow_control_wait() {
    let (dev, _k) = device();
    let p = dev.register_orchestration("chain_of_scopes", chain_of_scopes).unwrap();
    let y = dev.tensor_from(&[1, 16], &[0.0f32; 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor());
    let tight = dev.run_program(&p, &args, &trb(RingConfig::uniform(4, 64 << 10, 64))).unwrap();
    let (orch, flow) = (tight.orchestration.unwrap(), tight.orchestration_flow_wait.unwrap());
    assert!(flow > std::time::Duration::ZERO, "a window of 4 under a chain of 256 waits for room");
    assert!(flow <= orch, "the wait is part of the orchestration's time: {flow:?} of {orch:?}");
    let roomy = dev.run_program(&p, &args, &trb(RingConfig::uniform(512, 1 << 20, 1024))).unwrap();
    assert_eq!(roomy.orchestration_flow_wait, Some(std::time::Duration::ZERO), "room for every task");
    assert_eq!(y.read::<f32>().unwrap(), vec![512.0; 16], "both runs' 256 tasks ran");
    let hbg = dev.run_program(&p, &args, &RunConfig::default()).unwrap();
    assert_eq!((hbg.orchestration, hbg.orchestration_flow_wait), (None, None), "the host-built graph");
}

/// The host thread the last `on_which_thread` orchestration ran on.
static ORCH_THREAD: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn on_which_thread(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    *ORCH_THREAD.lock().unwrap() = std::thread::current().name().map(str::to_owned);
    rows_tasks(o, &a.t(0)?, 4)
}

/// On the coroutine engine in free mode the device-side orchestration runs on a host thread of
/// its own (as a chip gives it an AICPU core) while the pool runs the rest, even a pool of one
/// thread; a seeded schedule keeps it on the one thread that decides everything; the thread
/// engine runs it on its AICPU thread.
#[test]
fn the_orchestration_has_a_host_thread_of_its_own_on_the_coroutine_engine() {
    use pto_sim::{Schedule, SimEngine, Strategy};
    let one = SimEngine::Coroutines { threads: 1 };
    let seeded = Schedule::Seeded { seed: 3, strategy: Strategy::Random };
    for (engine, schedule, side) in
        [(one, Schedule::Os, true), (one, seeded, false), (SimEngine::Threads, Schedule::Os, false)]
    {
        let (dev, _k) = pto_sim::with_engine(Some(engine), Some(schedule), device);
        let p = dev.register_orchestration("on_which_thread", on_which_thread).unwrap();
        let y = dev.tensor_from(&[4, 16], &[0.0f32; 64]).unwrap();
        let cfg = RunConfig::default().with_runtime(RuntimeKind::TensormapRing);
        for round in 1..=3 {
            dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &cfg).unwrap();
            let name = ORCH_THREAD.lock().unwrap().take().unwrap_or_default();
            let what = format!("{engine:?} {schedule:?}: round {round} ran on {name:?}");
            assert_eq!(name == "pto-sim-engine-side", side, "{what}");
            if engine == SimEngine::Threads {
                assert!(name.starts_with("pto-aicpu-"), "{what}");
            }
        }
        assert_eq!(y.read::<f32>().unwrap(), vec![3.0; 64], "{engine:?} {schedule:?}: every task ran");
    }
}

#[test]
fn a_scope_larger_than_the_window_is_scope_deadlock() {
    let (dev, k) = device();
    let p = dev.register_orchestration("eight", eight_in_one_scope).unwrap();
    let e = expect_code(&dev, &p, 8, &trb(RingConfig::uniform(4, 64 << 10, 64)), OrchError::ScopeDeadlock);
    assert!(e.to_string().contains("window"), "{e}");
    // The same orchestration fits a window of 16.
    let y = dev.alloc::<f32>(&[8, 16]).unwrap();
    let r = dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &trb(RingConfig::uniform(16, 64 << 10, 64)));
    assert_eq!(r.unwrap().tasks, 8);
    still_works(&dev, &k);
}

fn nested_scopes(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    fn level(o: &mut Orch<'_>, y: &Tensor, depth: u32) -> Result<(), OrchFail> {
        rows_tasks(o, &y.view(&[3 * depth, 0], &[3, 16])?, 3)?;
        if depth < 7 { o.scope(|s| level(s, y, depth + 1)) } else { Ok(()) }
    }
    let y = a.t(0)?;
    o.scope(|s| level(s, &y, 0))
}

#[test]
fn nested_scopes_holding_the_window_are_flow_control_deadlock() {
    let (dev, k) = device();
    let p = dev.register_orchestration("nested", nested_scopes).unwrap();
    expect_code(&dev, &p, 24, &trb(RingConfig::uniform(4, 64 << 10, 64)), OrchError::FlowControlDeadlock);
    still_works(&dev, &k);
}

fn big_output(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let big = o.alloc::<f32>(&[8192])?;
    o.submit(Task::aiv(f::FILL1).output(&big))?;
    o.submit(Task::aiv(f::ADD1).inout(&y.view(&[0, 0], &[1, 16])?))?;
    Ok(())
}

#[test]
fn a_heap_too_small_for_one_output_is_heap_ring_deadlock() {
    let (dev, k) = device();
    let p = dev.register_orchestration("big_output", big_output).unwrap();
    let e = expect_code(&dev, &p, 1, &trb(RingConfig::uniform(64, 1024, 64)), OrchError::HeapRingDeadlock);
    assert!(e.to_string().contains("32768"), "names the bytes asked for: {e}");
    still_works(&dev, &k);
}

fn wide_fanin(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    rows_tasks(o, &y, 128)?;
    o.submit(Task::aiv(f::ADD1).inout(&y))?;
    Ok(())
}

#[test]
fn more_producers_than_the_dependency_pool_is_dep_pool_overflow() {
    let (dev, k) = device();
    let p = dev.register_orchestration("wide_fanin", wide_fanin).unwrap();
    expect_code(&dev, &p, 128, &trb(RingConfig::uniform(256, 1 << 20, 4)), OrchError::DepPoolOverflow);
    still_works(&dev, &k);
}

fn depends_on_a_ghost(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    o.submit(Task::aiv(f::ADD1).inout(&y).after(TaskId(999)))?;
    Ok(())
}

#[test]
fn a_dependency_on_a_task_that_never_existed_is_invalid_args_on_both_runtimes() {
    let (dev, k) = device();
    let p = dev.register_orchestration("ghost", depends_on_a_ghost).unwrap();
    for rt in RUNTIMES {
        let cfg = RunConfig::default().with_runtime(rt);
        let e = expect_code(&dev, &p, 1, &cfg, OrchError::InvalidArgs);
        assert!(e.to_string().contains("999"), "{rt:?} names the missing id: {e}");
    }
    still_works(&dev, &k);
}

/// Writes through argument 0, which the orchestration passes as an input.
fn k_write_input(k: &mut dyn KernelContext) {
    let n = k.arg(0).elem_count() as usize;
    k.store(0, &vec![5.0f32; n]);
}

fn writes_an_input(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let fid = FuncId(a.s(0)? as u16);
    o.submit(Task::aiv(fid).input(&y))?;
    Ok(())
}

#[test]
fn writing_through_an_input_only_argument_is_a_kernel_fault_on_both_runtimes() {
    let (dev, k) = device();
    let w = dev.register_kernel("write_input", CoreType::Aiv, k_write_input).unwrap();
    let p = dev.register_orchestration("writes_input", writes_an_input).unwrap();
    for rt in RUNTIMES {
        let y = dev.alloc::<f32>(&[1, 16]).unwrap();
        let args = OrchArgs::new().tensor(y.tensor()).scalar(w.0 as u64);
        let e = dev.run_program(&p, &args, &RunConfig::default().with_runtime(rt)).unwrap_err();
        let Error::Device(d) = &e else { panic!("{rt:?}: expected a device fault, got {e}") };
        assert_eq!(d.code, ErrorCode::Device(pto::runtime::codes::DeviceFault::KernelFault), "{e}");
        assert!(d.message.contains("input only"), "{rt:?}: {e}");
        assert_eq!(y.read::<f32>().unwrap(), vec![0.0; 16], "{rt:?}: the write never happened");
    }
    still_works(&dev, &k);
}

/// Block `block_idx` writes `block_idx + 1` into its row of argument 0 (a row per block: a
/// cache line per writer, as the faithful cache model demands).
fn k_block_ids(k: &mut dyn KernelContext) {
    let b = k.block_idx();
    k.set(0, &[b, 0], b as f32 + 1.0);
}

fn cohort(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let fid = FuncId(a.s(0)? as u16);
    let blocks = a.s(1)? as u32;
    o.submit(Task::aiv(fid).output(&y).blocks(blocks).sync_start())?;
    Ok(())
}

#[test]
fn sync_start_cohorts_run_together_or_are_refused_with_code_7() {
    let (dev, k) = device();
    let fid = dev.register_kernel("block_ids", CoreType::Aiv, k_block_ids).unwrap();
    let p = dev.register_orchestration("cohort", cohort).unwrap();
    for rt in RUNTIMES {
        let cfg = RunConfig::default().with_runtime(rt);
        // Two AIV blocks fit one scheduler thread's cores on every board.
        let y = dev.alloc::<f32>(&[2, 16]).unwrap();
        let args = OrchArgs::new().tensor(y.tensor()).scalar(fid.0 as u64).scalar(2);
        let r = dev.run_program(&p, &args, &cfg).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        assert_eq!(r.dispatched, 2);
        let got = y.read::<f32>().unwrap();
        assert_eq!((got[0], got[16]), (1.0, 2.0));
        let y = dev.alloc::<f32>(&[1000, 16]).unwrap();
        let args = OrchArgs::new().tensor(y.tensor()).scalar(fid.0 as u64).scalar(1000);
        let e = dev.run_program(&p, &args, &cfg).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::Orch(OrchError::RequireSyncStartInvalid)), "{rt:?}: {e}");
        assert!(e.to_string().contains("1000"), "{e}");
    }
    still_works(&dev, &k);
}

/// Sleeps 300 ms, then fills argument 0 with ones.
fn k_slow_fill(k: &mut dyn KernelContext) {
    std::thread::sleep(std::time::Duration::from_millis(300));
    let n = k.arg(0).elem_count() as usize;
    k.store(0, &vec![1.0f32; n]);
}

fn reads_a_slow_output(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    o.submit(Task::aiv(FuncId(a.s(0)? as u16)).output(&y))?;
    let v: f32 = o.read(&y, &[0, 0])?;
    if v != 1.0 {
        return Err(o.fatal("read a value its producer never wrote"));
    }
    Ok(())
}

#[test]
fn a_tensor_read_past_its_budget_is_tensor_wait_timeout() {
    let (dev, k) = device();
    let slow = dev.register_kernel("slow_fill", CoreType::Aiv, k_slow_fill).unwrap();
    let p = dev.register_orchestration("slow_read", reads_a_slow_output).unwrap();
    let y = dev.alloc::<f32>(&[1, 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor()).scalar(slow.0 as u64);
    let rings = RingConfig::default().with_wait_us(20_000);
    let e = dev.run_program(&p, &args, &trb(rings)).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Orch(OrchError::TensorWaitTimeout)), "{e}");
    // Within budget the read waits for the producer and sees its value.
    let r = dev.run_program(&p, &args, &trb(RingConfig::default())).unwrap();
    assert_eq!(r.tasks, 1);
    // The host-built graph cannot read tensor data while it builds: a named error.
    let e = dev.run_program(&p, &args, &RunConfig::default()).unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Orch(OrchError::InvalidArgs)), "{e}");
    assert!(e.to_string().contains("device-side runtime"), "{e}");
    still_works(&dev, &k);
}

fn read_then_write(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y, out) = (a.t(0)?, a.t(1)?, a.t(2)?);
    o.submit(Task::aiv(f::FILL1).output(&y))?;
    let v: f32 = o.read(&y, &[3])?;
    o.write(&x, &[0], v + 41.0)?;
    o.submit(Task::aiv(f::ADD_SCALAR).input(&x).output(&out).scalar_f32(0.5))?;
    Ok(())
}

#[test]
fn the_orchestrator_reads_a_producer_output_and_writes_an_input() {
    let (dev, _k) = device();
    let p = dev.register_orchestration("read_then_write", read_then_write).unwrap();
    let x = dev.tensor_from(&[4], &[0.0f32, 7.0, 7.0, 7.0]).unwrap();
    let y = dev.alloc::<f32>(&[4]).unwrap();
    let out = dev.alloc::<f32>(&[4]).unwrap();
    let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).tensor(out.tensor());
    dev.run_program(&p, &args, &trb(RingConfig::default())).unwrap();
    assert_eq!(out.read::<f32>().unwrap(), vec![42.5, 7.5, 7.5, 7.5]);
}

fn explicit_fatal(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    rows_tasks(o, &a.t(0)?, 1)?;
    Err(o.fatal("the orchestration gave up on purpose"))
}

#[test]
fn an_explicit_fatal_is_code_9_with_its_message_on_both_runtimes() {
    let (dev, k) = device();
    let p = dev.register_orchestration("fatal", explicit_fatal).unwrap();
    for rt in RUNTIMES {
        let e = expect_code(&dev, &p, 1, &RunConfig::default().with_runtime(rt), OrchError::ExplicitOrchFatal);
        assert!(e.to_string().contains("on purpose"), "{rt:?}: {e}");
    }
    still_works(&dev, &k);
}

fn too_deep(o: &mut Orch<'_>, _a: &OrchArgs) -> Result<(), OrchFail> {
    fn down(o: &mut Orch<'_>, n: u32) -> Result<(), OrchFail> {
        if n == 0 { Ok(()) } else { o.scope(|s| down(s, n - 1)) }
    }
    down(o, 80)
}

#[test]
fn scopes_nested_too_deep_are_scope_tasks_overflow_on_both_runtimes() {
    let (dev, k) = device();
    let p = dev.register_orchestration("too_deep", too_deep).unwrap();
    for rt in RUNTIMES {
        expect_code(&dev, &p, 1, &RunConfig::default().with_runtime(rt), OrchError::ScopeTasksOverflow);
    }
    still_works(&dev, &k);
}

#[test]
fn a_wedged_tensor_map_is_tensormap_overflow() {
    let (dev, k) = device();
    let p = dev.register_orchestration("eight_map", eight_in_one_scope).unwrap();
    let rings = RingConfig::default().with_tensormap_entries(4).with_wait_us(50_000);
    expect_code(&dev, &p, 8, &trb(rings), OrchError::TensormapOverflow);
    still_works(&dev, &k);
}

/// Writes scalar 0 (as an i32) into element 0 of argument 0.
fn k_set_i32(k: &mut dyn KernelContext) {
    let v = k.scalar_arg(0) as i32;
    k.set(0, &[0], v);
}

fn predicated(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (flag, y, z) = (a.t(0)?, a.t(1)?, a.t(2)?);
    let set = FuncId(a.s(0)? as u16);
    let run = a.s(1)?;
    o.submit(Task::aiv(set).output(&flag).scalar(run))?;
    // Skipped when the flag is 0; its consumer runs either way.
    o.submit(Task::aiv(f::FILL1).output(&y).when(&flag))?;
    o.submit(Task::aiv(f::ADD_SCALAR).input(&y).output(&z).scalar_f32(1.0))?;
    Ok(())
}

#[test]
fn a_predicated_task_runs_or_is_skipped_and_still_releases_its_consumer() {
    let (dev, k) = device();
    let set = dev.register_kernel("set_i32", CoreType::Aiv, k_set_i32).unwrap();
    let p = dev.register_orchestration("predicated", predicated).unwrap();
    for rt in RUNTIMES {
        for run in [0u64, 1] {
            let flag = dev.alloc::<i32>(&[16]).unwrap();
            let y = dev.alloc::<f32>(&[16]).unwrap();
            let z = dev.alloc::<f32>(&[16]).unwrap();
            let args = OrchArgs::new()
                .tensor(flag.tensor())
                .tensor(y.tensor())
                .tensor(z.tensor())
                .scalar(set.0 as u64)
                .scalar(run);
            let r = dev
                .run_program(&p, &args, &RunConfig::default().with_runtime(rt))
                .unwrap_or_else(|e| panic!("{rt:?} run={run}: {e}"));
            assert_eq!(r.tasks, 3, "a skipped task still completes");
            assert_eq!(r.dispatched, 2 + run, "{rt:?}: the skipped task never reached a core");
            let want = if run == 1 { 2.0 } else { 1.0 };
            assert_eq!(z.read::<f32>().unwrap(), vec![want; 16], "{rt:?} run={run}");
        }
    }
    still_works(&dev, &k);
}

fn guarded(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, out) = (a.t(0)?, a.t(1)?);
    let mut g = o.guard(ScopeMode::Auto)?;
    let tmp = g.alloc::<f32>(&[16])?;
    g.submit(Task::aiv(f::ADD_SCALAR).input(&x).output(&tmp).scalar_f32(2.0))?;
    g.submit(Task::aiv(f::ADD_SCALAR).input(&tmp).output(&out).scalar_f32(3.0))?;
    g.end()
}

#[test]
fn a_scope_guard_works_on_both_runtimes() {
    let (dev, _k) = device();
    let p = dev.register_orchestration("guarded", guarded).unwrap();
    for rt in RUNTIMES {
        let x = dev.tensor_from(&[16], &[1.0f32; 16]).unwrap();
        let out = dev.alloc::<f32>(&[16]).unwrap();
        let args = OrchArgs::new().tensor(x.tensor()).tensor(out.tensor());
        dev.run_program(&p, &args, &RunConfig::default().with_runtime(rt)).unwrap();
        assert_eq!(out.read::<f32>().unwrap(), vec![6.0; 16], "{rt:?}");
    }
}

#[test]
fn bad_ring_configurations_are_refused_before_launch() {
    let (dev, _k) = device();
    let p = dev.register_orchestration("eight_cfg", eight_in_one_scope).unwrap();
    let y = dev.alloc::<f32>(&[8, 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor());
    for (rings, what) in [
        (RingConfig::uniform(3, 1024, 8), "power of two"),
        (RingConfig::uniform(8, 100, 8), "multiple of 64"),
        (RingConfig::uniform(8, 1024, 0), "dep_pool"),
        // Sizes the AICPU cannot hold: refused by name before anything is allocated (these
        // used to abort the process or wedge the device until the scheduler timeout).
        (RingConfig::uniform(1 << 28, 1024, 8), "AICPU budget"),
        (RingConfig::uniform(1 << 24, 1024, 8), "AICPU budget"),
        (RingConfig::uniform(8, 1024, (1 << 28) - 1), "AICPU budget"),
    ] {
        let e = dev.run_program(&p, &args, &trb(rings.clone())).unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
        assert!(
            matches!(
                &e,
                Error::Config(ConfigError::RingWindow { ring: 0, window, .. }) if *window == rings.window[0]
            ) || matches!(&e, Error::Config(ConfigError::RingHeap { ring: 0, heap: 100, max }) if *max == pto::runtime::host::MAX_RING_HEAP)
                || matches!(&e, Error::Config(ConfigError::RingDepPool { ring: 0, dep_pool, .. }) if *dep_pool == rings.dep_pool[0]),
            "{e:?}"
        );
    }
    let one_thread = trb(RingConfig::default()).with_aicpu_threads(1);
    let e = dev.run_program(&p, &args, &one_thread).unwrap_err();
    assert!(e.to_string().contains("at least 2 AICPU threads"), "{e}");
    assert_eq!(e, Error::Config(ConfigError::TooFewThreads { threads: 1, min: 2 }));
    // The orchestrator's wait budget: 1..=2 x the run's watchdog.
    let watchdog = 1_000_000;
    for wait in [0, 2 * watchdog + 1] {
        let cfg = trb(RingConfig::default().with_wait_us(wait)).with_watchdog_us(watchdog);
        let e = dev.run_program(&p, &args, &cfg).unwrap_err();
        assert_eq!(e, Error::Config(ConfigError::WaitBudget { wait_us: wait, max_us: 2 * watchdog }), "{e}");
        assert!(e.to_string().contains("rings.wait_us"), "{e}");
    }
    dev.run_program(&p, &args, &trb(RingConfig::default().with_wait_us(2 * watchdog)).with_watchdog_us(watchdog))
        .unwrap();
}

fn panics(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    rows_tasks(o, &a.t(0)?, 1)?;
    panic!("the orchestration fell over");
}

#[test]
fn a_panicking_orchestration_is_code_9_on_both_runtimes() {
    let (dev, k) = device();
    let p = dev.register_orchestration("panics", panics).unwrap();
    for rt in RUNTIMES {
        let e = expect_code(&dev, &p, 1, &RunConfig::default().with_runtime(rt), OrchError::ExplicitOrchFatal);
        assert!(e.to_string().contains("fell over"), "{rt:?}: {e}");
    }
    still_works(&dev, &k);
}

fn smuggles_a_scope_tensor(o: &mut Orch<'_>, _a: &OrchArgs) -> Result<(), OrchFail> {
    // A `Local` cannot leave its scope, but a task built from it can: the runtime refuses
    // it at submission once the scope's memory is gone.
    let task = o.scope(|s| {
        let t = s.alloc::<f32>(&[16])?;
        Ok(Task::aiv(f::FILL1).output(&t))
    })?;
    o.submit(task)?;
    Ok(())
}

#[test]
fn a_task_naming_a_tensor_of_an_ended_scope_is_refused_on_the_device() {
    let (dev, k) = device();
    let p = dev.register_orchestration("smuggle", smuggles_a_scope_tensor).unwrap();
    let e = expect_code(&dev, &p, 1, &trb(RingConfig::default()), OrchError::InvalidArgs);
    assert!(e.to_string().contains("scope that has ended"), "{e}");
    // One rule on both runtimes: the host-built graph refuses the same task with the same
    // named error, although its heap would outlive the scope.
    let y = dev.alloc::<f32>(&[1, 16]).unwrap();
    match dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &RunConfig::default()) {
        Err(Error::Graph(GraphError::EndedScopeTensor { arg: 0, .. })) => {}
        other => panic!("expected EndedScopeTensor on the host-built graph, got {other:?}"),
    }
    still_works(&dev, &k);
}

fn manual_read(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    o.manual_scope(|s| {
        s.submit(Task::aiv(f::FILL1).output(&y))?;
        let v: f32 = s.read(&y, &[5])?;
        if v != 1.0 {
            return Err(s.fatal("manual-scope read did not wait for the writer"));
        }
        Ok(())
    })
}

#[test]
fn a_read_in_a_manual_scope_waits_for_the_tasks_before_it() {
    let (dev, _k) = device();
    let p = dev.register_orchestration("manual_read", manual_read).unwrap();
    for _ in 0..5 {
        let y = dev.alloc::<f32>(&[16]).unwrap();
        dev.run_program(&p, &OrchArgs::new().tensor(y.tensor()), &trb(RingConfig::default())).unwrap();
    }
}

fn nothing(_o: &mut Orch<'_>, _a: &OrchArgs) -> Result<(), OrchFail> {
    Ok(())
}

#[test]
fn an_empty_orchestration_completes_with_no_task_on_both_runtimes() {
    let (dev, _k) = device();
    let p = dev.register_orchestration("nothing", nothing).unwrap();
    for rt in RUNTIMES {
        let r = dev.run_program(&p, &OrchArgs::new(), &RunConfig::default().with_runtime(rt)).unwrap();
        assert_eq!((r.tasks, r.dispatched), (0, 0), "{rt:?}");
        assert_eq!(r.released, r.cores, "{rt:?}: every core that handshook was released");
    }
}
