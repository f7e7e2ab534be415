//! The resident executor (the cores schedule the host-built graph themselves): every example
//! it can run passes its golden on it; `Auto` picks it where it can and says why not where it
//! cannot; an explicit `Resident` it cannot honour is an error naming the reason; faults on it
//! end in named codes with their task and core, and the next run works.
//!
//! Run on every simulated board and under the faithful cache model too (`.ci/run`).

use pto::prelude::*;
use pto::runtime::codes::{DeviceFault, ErrorCode, Site};
use pto::runtime::host::DeviceError;
use pto::{Executor, LegacyReason};
use pto_testkit::{Failure, Kernels, Outcome, Workload, executed};

fn device() -> (Device, Kernels) {
    pto_testkit::setup(pto::open).expect("open the selected board")
}

fn device_error(e: Error) -> DeviceError {
    match e {
        Error::Device(d) => d,
        other => panic!("expected a device error, got {other}"),
    }
}

/// The workloads the resident executor runs (all single-core tasks), by name.
fn resident_workloads() -> [(&'static str, Workload<pto::SelectedPlatform>); 6] {
    [
        ("vector", pto_testkit::vector),
        ("chain513", pto_testkit::chain513),
        ("bgemm", pto_testkit::attention::bgemm),
        ("paged_attention_small", pto_testkit::attention::paged_attention_small),
        ("tiny_rings", pto_testkit::tiny_rings),
        ("manual_scope", pto_testkit::manual_scope),
    ]
}

fn run(e: Executor, w: Workload<pto::SelectedPlatform>, dev: &Device, k: &Kernels) -> Result<Outcome, Failure> {
    executed(e, || w(dev, k, RuntimeKind::HostBuiltGraph))
}

/// Every example of single-core tasks passes its golden on the resident executor, with the
/// same task count as on the legacy one; the cores ran every kernel (none was dispatched by an
/// AICPU thread) and `Auto` picks the resident executor for them.
#[test]
fn every_single_core_example_passes_on_the_resident_executor() {
    let (dev, k) = device();
    for (name, w) in resident_workloads() {
        let legacy = run(Executor::Legacy, w, &dev, &k).unwrap_or_else(|e| panic!("{name} legacy: {e}"));
        let resident = run(Executor::Resident, w, &dev, &k).unwrap_or_else(|e| panic!("{name} resident: {e}"));
        assert_eq!(legacy.report.executor, Executor::Legacy, "{name}");
        assert_eq!(legacy.report.legacy_reason, Some(LegacyReason::Requested), "{name}");
        assert_eq!(resident.report.executor, Executor::Resident, "{name}");
        assert_eq!(resident.report.legacy_reason, None, "{name}");
        assert_eq!(resident.report.tasks, legacy.report.tasks, "{name}: the same graph");
        assert_eq!(resident.checked, legacy.checked, "{name}");
        assert!(resident.report.dispatched <= resident.report.tasks, "{name}: one kernel per task at most");
        let auto = run(Executor::Auto, w, &dev, &k).unwrap_or_else(|e| panic!("{name} auto: {e}"));
        assert_eq!(auto.report.executor, Executor::Resident, "{name}: auto picks the resident executor");
    }
}

/// Many resident runs in a row on one device (both pipeline slots, scheduler state reused):
/// each starts from its own state, none sees the previous run's lists or counts.
#[test]
fn resident_runs_back_to_back_each_start_clean() {
    let (dev, k) = device();
    for i in 0..12 {
        let o = run(Executor::Resident, pto_testkit::chain513, &dev, &k).unwrap_or_else(|e| panic!("run {i}: {e}"));
        assert_eq!(o.report.tasks, 513, "run {i}");
        assert_eq!(o.report.executor, Executor::Resident);
    }
}

/// A graph with a MIX task: `Auto` runs it on the legacy executor and says which task; an
/// explicit `Resident` is refused before anything runs, naming the task, and the device goes
/// on working.
#[test]
fn a_mix_graph_goes_legacy_under_auto_and_is_refused_resident() {
    let (dev, k) = device();
    let o = run(Executor::Auto, pto_testkit::mix, &dev, &k).expect("mix on auto");
    assert_eq!(o.report.executor, Executor::Legacy);
    assert!(matches!(o.report.legacy_reason, Some(LegacyReason::MixTask { .. })), "{:?}", o.report.legacy_reason);
    match run(Executor::Resident, pto_testkit::mix, &dev, &k) {
        Err(Failure::Run(Error::Config(why))) => {
            assert!(why.contains("executor = resident") && why.contains("MIX task"), "{why}")
        }
        other => panic!("expected a configuration error, got {other:?}"),
    }
    run(Executor::Resident, pto_testkit::vector, &dev, &k).expect("the device still works");
}

/// Block `b` writes `b + 1` into its own 16-float line of the output.
fn k_block_fill(k: &mut dyn KernelContext) {
    let b = k.block_idx();
    for j in 0..16 {
        k.set(0, &[b * 16 + j], (b + 1) as f32);
    }
}

/// SPMD and sync-start tasks: the same rule, each named.
#[test]
fn spmd_and_sync_start_graphs_go_legacy_under_auto() {
    let (dev, _k) = device();
    let f = dev.register_kernel("block_fill", CoreType::Aiv, k_block_fill).unwrap();
    let x = dev.alloc::<f32>(&[64]).unwrap();
    let spmd = dev.build(|g| g.submit(Task::aiv(f).output(&x.tensor()).blocks(4)).map(|_| ())).unwrap();
    let sync = dev.build(|g| g.submit(Task::aiv(f).output(&x.tensor()).blocks(2).sync_start()).map(|_| ())).unwrap();
    let r = dev.run(&spmd).unwrap();
    assert_eq!(r.executor, Executor::Legacy);
    assert_eq!(r.legacy_reason, Some(LegacyReason::SpmdTask { task: 0 }));
    let e = dev.run_with(&spmd, &RunConfig::default().with_executor(Executor::Resident)).unwrap_err();
    assert!(e.to_string().contains("SPMD"), "{e}");
    let r = dev.run(&sync).unwrap();
    assert_eq!(r.executor, Executor::Legacy);
    assert!(
        matches!(r.legacy_reason, Some(LegacyReason::SpmdTask { task: 0 } | LegacyReason::SyncStart { task: 0 })),
        "{:?}",
        r.legacy_reason
    );
}

/// The args dump is captured on the legacy executor only: `Auto` with the dump on runs legacy
/// and says so; `Resident` with the dump on is refused, naming the missing piece.
#[test]
fn args_dump_runs_legacy_under_auto_and_is_refused_resident() {
    let (dev, k) = device();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(k.add1).inout(&x.tensor())).map(|_| ())).unwrap();
    let dir = std::env::temp_dir().join(format!("pto-resident-dump-{}", std::process::id()));
    let cfg = RunConfig::default().with_dump(Some(pto::dump::DumpLevel::Full)).with_dump_dir(&dir);
    let r = dev.run_with(&g, &cfg).unwrap();
    assert_eq!(r.executor, Executor::Legacy);
    assert_eq!(r.legacy_reason, Some(LegacyReason::ArgsDump));
    let e = dev.run_with(&g, &cfg.clone().with_executor(Executor::Resident)).unwrap_err();
    assert!(e.to_string().contains("args dump") && e.to_string().contains("issue 12"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The device-side runtime dispatches from its rings on the AICPU: it always runs on the
/// legacy executor, and asking it for the resident one is an error.
#[test]
fn the_device_side_runtime_is_legacy_and_refuses_resident() {
    let (dev, k) = device();
    let o = pto_testkit::vector(&dev, &k, RuntimeKind::TensormapRing).unwrap();
    assert_eq!(o.report.executor, Executor::Legacy);
    assert_eq!(o.report.legacy_reason, Some(LegacyReason::DeviceSideRuntime));
    let p =
        dev.register_orchestration("nothing", |_o: &mut pto::runtime::orch::Orch<'_>, _a: &OrchArgs| Ok(())).unwrap();
    let cfg = RunConfig::default().with_runtime(RuntimeKind::TensormapRing).with_executor(Executor::Resident);
    let e = dev.run_program(&p, &OrchArgs::new(), &cfg).unwrap_err();
    assert!(e.to_string().contains("device-side runtime"), "{e}");
}

/// A kernel that panics on the resident executor: KERNEL_FAULT at the kernel site, with the
/// task and the AIV core that ran it; the task's consumer never runs; the next run works.
#[test]
fn a_kernel_panic_on_the_resident_executor_names_task_and_core() {
    let (dev, k) = device();
    let bad = dev.register_kernel("panics", CoreType::Aiv, pto_testkit::k_panic).unwrap();
    let x = dev.tensor_from(&[16], &[0.0f32; 16]).unwrap();
    let g = dev
        .build(|g| {
            g.submit(Task::aiv(k.add1).inout(&x.tensor()))?;
            g.submit(Task::aiv(bad).inout(&x.tensor()))?;
            g.submit(Task::aiv(k.add1).inout(&x.tensor()))?;
            Ok(())
        })
        .unwrap();
    let cfg = RunConfig::default().with_executor(Executor::Resident);
    let d = device_error(dev.run_with(&g, &cfg).unwrap_err());
    assert_eq!(d.code, ErrorCode::Device(DeviceFault::KernelFault));
    assert_eq!(d.site, Site::Kernel);
    assert_eq!(d.task, Some(1));
    let core = d.core.expect("the fault names its core");
    assert!(core >= dev.topology().clusters, "an AIV worker, got {core}");
    assert_eq!(x.read::<f32>().unwrap(), vec![1.0; 16], "task 2 never ran");
    run(Executor::Resident, pto_testkit::vector, &dev, &k).expect("the next run works");
}

/// Degenerate graphs on the resident executor: no task at all, and dummies only (completed by
/// the cores without a kernel).
#[test]
fn empty_and_dummy_only_graphs_run_resident() {
    let (dev, _k) = device();
    let cfg = RunConfig::default().with_executor(Executor::Resident);
    let empty = dev.build(|_g| Ok(())).unwrap();
    let r = dev.run_with(&empty, &cfg).unwrap();
    assert_eq!((r.tasks, r.dispatched, r.executor), (0, 0, Executor::Resident));
    let dummies = dev
        .build(|g| {
            let a = g.submit(Task::dummy())?;
            let b = g.submit(Task::dummy().after(a))?;
            g.submit(Task::dummy().after(a).after(b))?;
            Ok(())
        })
        .unwrap();
    let r = dev.run_with(&dummies, &cfg).unwrap();
    assert_eq!((r.tasks, r.dispatched, r.executor), (3, 0, Executor::Resident));
}
