//! The resident executor (the cores schedule the host-built graph themselves): every example
//! it can run passes its golden on it; `Auto` says why a run is legacy (on the simulator: its
//! cores share the host, where legacy is the faster; a graph's own reason comes first); an explicit `Resident` it cannot honour is an error naming the reason; faults on it
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

fn run(e: Executor, w: Workload<pto::SelectedPlatform>, dev: &Device, k: &Kernels) -> Result<Outcome, Failure> {
    executed(e, || w(dev, k, RuntimeKind::HostBuiltGraph))
}

/// Every example passes its golden on the resident executor, with the same task count as on
/// the legacy one; the cores ran every kernel (none was dispatched by an
/// AICPU thread). `Auto` runs them legacy on the simulator, saying so: its cores share the
/// host's processors with the AICPU threads.
#[test]
fn every_example_passes_on_the_resident_executor() {
    let (dev, k) = device();
    for (name, w) in pto_testkit::examples() {
        let legacy = run(Executor::Legacy, w, &dev, &k).unwrap_or_else(|e| panic!("{name} legacy: {e}"));
        let resident = run(Executor::Resident, w, &dev, &k).unwrap_or_else(|e| panic!("{name} resident: {e}"));
        assert_eq!(legacy.report.executor, Executor::Legacy, "{name}");
        assert_eq!(legacy.report.legacy_reason, Some(LegacyReason::Requested), "{name}");
        assert_eq!(resident.report.executor, Executor::Resident, "{name}");
        assert_eq!(resident.report.legacy_reason, None, "{name}");
        assert_eq!(resident.report.tasks, legacy.report.tasks, "{name}: the same graph");
        assert_eq!(resident.checked, legacy.checked, "{name}");
        assert_eq!(resident.report.dispatched, legacy.report.dispatched, "{name}: the same kernels ran");
        let auto = run(Executor::Auto, w, &dev, &k).unwrap_or_else(|e| panic!("{name} auto: {e}"));
        assert_eq!(auto.report.executor, Executor::Legacy, "{name}: auto on the simulator");
        assert_eq!(auto.report.legacy_reason, Some(LegacyReason::SharedHost), "{name}");
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

/// A graph of MIX tasks (a gang on one cluster's three lanes) runs on the resident
/// executor: the golden holds, and every lane of every gang ran its kernel.
#[test]
fn a_mix_graph_runs_resident_with_every_lane() {
    let (dev, k) = device();
    let legacy = run(Executor::Legacy, pto_testkit::mix, &dev, &k).expect("mix on legacy");
    let o = run(Executor::Resident, pto_testkit::mix, &dev, &k).expect("mix on resident");
    assert_eq!(o.report.executor, Executor::Resident, "{:?}", o.report.legacy_reason);
    assert_eq!(o.report.legacy_reason, None);
    assert_eq!(o.checked, legacy.checked);
    assert_eq!(o.report.tasks, legacy.report.tasks);
    assert_eq!(o.report.dispatched, legacy.report.dispatched, "the same subtasks ran");
}

/// Block `b` writes `b + 1` into its own 16-float line of the output.
fn k_block_fill(k: &mut dyn KernelContext) {
    let b = k.block_idx();
    for j in 0..16 {
        k.set(0, &[b * 16 + j], (b + 1) as f32);
    }
}

/// An SPMD task runs resident, each block once (its blocks dealt to several clusters); a
/// sync-start task, whose blocks must start together, goes legacy under `Auto` with the task
/// named, and an explicit `Resident` on it is refused naming the reason.
#[test]
fn spmd_runs_resident_and_sync_start_goes_legacy() {
    let (dev, _k) = device();
    let f = dev.register_kernel("block_fill", CoreType::Aiv, k_block_fill).unwrap();
    let x = dev.alloc::<f32>(&[16 * 7]).unwrap();
    let spmd = dev.build(|g| g.submit(Task::aiv(f).output(&x.tensor()).blocks(7)).map(|_| ())).unwrap();
    let sync = dev.build(|g| g.submit(Task::aiv(f).output(&x.tensor()).blocks(2).sync_start()).map(|_| ())).unwrap();
    let resident = RunConfig::default().with_executor(Executor::Resident);
    let r = dev.run_with(&spmd, &resident).unwrap();
    assert_eq!(r.executor, Executor::Resident, "{:?}", r.legacy_reason);
    assert_eq!(r.dispatched, 7, "one kernel per block");
    let got: Vec<f32> = x.read().unwrap();
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, (i / 16 + 1) as f32, "element {i}: block {} ran once, on its own line", i / 16);
    }
    let r = dev.run(&sync).unwrap();
    assert_eq!(r.executor, Executor::Legacy);
    assert_eq!(r.legacy_reason, Some(LegacyReason::SyncStart { task: 0 }));
    let e = dev.run_with(&sync, &resident).unwrap_err();
    assert!(e.to_string().contains("start together"), "{e}");
    assert_eq!(e, Error::Config(ConfigError::ResidentRefused { reason: LegacyReason::SyncStart { task: 0 } }));
    // More blocks than the resident state holds: an explicit `Resident` is refused before any
    // state is built (it would take 8 bytes per block); `Auto` would run it legacy, with the
    // same reason (not run here: four million blocks).
    let blocks = pto::runtime::graph::MAX_BLOCKS;
    let many = dev
        .build(|g| {
            for _ in 0..=(1u32 << 22) / blocks {
                g.submit(Task::aiv(f).output(&x.tensor()).blocks(blocks))?;
            }
            Ok(())
        })
        .unwrap();
    let e = dev.run_with(&many, &RunConfig::default().with_executor(Executor::Resident)).unwrap_err();
    let want = format!("blocks pass {} at task {}", 1u32 << 22, (1u32 << 22) / blocks);
    assert!(e.to_string().contains(&want), "{e}");
    let task = (1u32 << 22) / blocks;
    assert_eq!(e, Error::Config(ConfigError::ResidentRefused { reason: LegacyReason::TooManyBlocks { task } }));
}

/// The args dump on the resident route: `Resident` with the dump on stays resident; a task of
/// several blocks has no single dispatch to capture at, so such a graph runs legacy under
/// `Auto` (saying which task, before the platform's reason) and is refused under `Resident`.
#[test]
fn args_dump_runs_resident_except_for_tasks_of_several_blocks() {
    let (dev, k) = device();
    let fill = dev.register_kernel("block_fill", CoreType::Aiv, k_block_fill).unwrap();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    // Two blocks, each on its own cache line (two cores writing one line is a race the
    // faithful cache model reports).
    let y = dev.alloc::<f32>(&[32]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(k.add1).inout(&x.tensor())).map(|_| ())).unwrap();
    let dir = std::env::temp_dir().join(format!("pto-resident-dump-{}", std::process::id()));
    let cfg = RunConfig::default().with_dump(Some(pto::dump::DumpLevel::Full)).with_dump_dir(&dir);
    let r = dev.run_with(&g, &cfg.clone().with_executor(Executor::Resident)).unwrap();
    assert_eq!(r.executor, Executor::Resident);
    assert_eq!(r.dump.as_ref().and_then(|d| d.accounting.total), Some(2), "one in-out, before and after");
    let g = dev
        .build(|g| {
            g.submit(Task::aiv(k.add1).inout(&x.tensor()))?;
            g.submit(Task::aiv(fill).output(&y.tensor()).blocks(2)).map(|_| ())
        })
        .unwrap();
    let r = dev.run_with(&g, &cfg).unwrap();
    assert_eq!(r.executor, Executor::Legacy);
    assert_eq!(r.legacy_reason, Some(LegacyReason::ArgsDumpBlocks { task: 1 }));
    let e = dev.run_with(&g, &cfg.clone().with_executor(Executor::Resident)).unwrap_err();
    assert!(e.to_string().contains("args dump") && e.to_string().contains("task 1"), "{e}");
    assert_eq!(e, Error::Config(ConfigError::ResidentRefused { reason: LegacyReason::ArgsDumpBlocks { task: 1 } }));
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
    assert_eq!(e, Error::Config(ConfigError::ResidentRefused { reason: LegacyReason::DeviceSideRuntime }));
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

/// Adds 1 to each of the 16 floats of its one argument.
fn k_inc(k: &mut dyn KernelContext) {
    for j in 0..16 {
        let v: f32 = k.get(0, &[j]);
        k.set(0, &[j], v + 1.0);
    }
}

/// Graphs of one core type: the lanes of the other type have no work and sit the run out
/// (they take no dispatch token and sleep through the doorbells); the lanes that have work
/// dispatch for themselves. A chain of AIC tasks (the AIV lanes sit out) and a fan-out of AIV
/// tasks (the AIC lanes sit out) each pass their golden, and so does a chain that alternates
/// the two (every lane has work).
#[test]
fn graphs_of_one_core_type_run_resident_with_the_other_lanes_sitting_out() {
    let (dev, _k) = device();
    let cfg = RunConfig::default().with_executor(Executor::Resident);
    let f_aic = dev.register_kernel("inc_aic", CoreType::Aic, k_inc).unwrap();
    let f_aiv = dev.register_kernel("inc_aiv", CoreType::Aiv, k_inc).unwrap();
    let n = 60u32;
    let x = dev.alloc::<f32>(&[16]).unwrap();
    for (name, kinds) in [("AIC chain", [f_aic, f_aic]), ("alternating chain", [f_aic, f_aiv])] {
        x.write(&[0.0f32; 16]).unwrap();
        let g = dev
            .build(|g| {
                for i in 0..n {
                    let f = kinds[i as usize % 2];
                    let t = if f == f_aic { Task::aic(f) } else { Task::aiv(f) };
                    g.submit(t.inout(&x.tensor()))?;
                }
                Ok(())
            })
            .unwrap();
        let r = dev.run_with(&g, &cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((r.executor, r.dispatched), (Executor::Resident, n as u64), "{name}");
        assert_eq!(x.read::<f32>().unwrap(), vec![n as f32; 16], "{name}: every task ran once, in order");
    }
    let rows = dev.alloc::<f32>(&[n * 16]).unwrap();
    rows.write(&vec![0.0f32; n as usize * 16]).unwrap();
    let g = dev
        .build(|g| {
            let first = g.submit(Task::aiv(f_aiv).inout(&x.tensor()))?;
            for i in 0..n {
                g.submit(Task::aiv(f_aiv).inout(&rows.tensor().view(&[i * 16], &[16])?).after(first))?;
            }
            Ok(())
        })
        .unwrap();
    let r = dev.run_with(&g, &cfg).unwrap_or_else(|e| panic!("AIV fan-out: {e}"));
    assert_eq!((r.executor, r.dispatched), (Executor::Resident, n as u64 + 1));
    assert_eq!(rows.read::<f32>().unwrap(), vec![1.0f32; n as usize * 16], "AIV fan-out: every consumer ran once");
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
