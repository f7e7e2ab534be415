//! The legacy executor's AICore program in C (`pto-aicore-c`, `RunConfig::aicore` =
//! `AicoreProgram::Native`, `--aicore native`): every example and dispatch shape matches its
//! golden on both runtimes on the selected board (`--features board-sim-a5` for the a5
//! board), under the faithful cache model too, and with the native kernels; a kernel's fault
//! through it is the kernel's fault; the resident executor is refused by name; its trace ring
//! is the Rust program's.

use pto::prelude::*;
use pto_sim::CacheModel;
use pto_testkit::{KernelChoice, RUNTIMES, ShapeKind};

/// Run every example (or, with native kernels, every example that has them) and every
/// dispatch shape on both runtimes with the C AICore program.
fn every_example(dev: &pto::Device, k: &pto_testkit::Kernels, kernels: KernelChoice, what: &str) {
    pto_testkit::aicored(AicoreProgram::Native, || {
        for (name, w) in pto_testkit::examples::<pto::SelectedPlatform>() {
            if kernels == KernelChoice::Native && !pto_testkit::native::NATIVE_EXAMPLES.contains(&name) {
                continue;
            }
            for rt in RUNTIMES {
                let o = w(dev, k, rt).unwrap_or_else(|e| panic!("{what}: {name} on {}: {e}", rt.name()));
                assert_eq!(o.report.executor, Executor::Legacy, "{what}: {name} on {}", rt.name());
            }
        }
        if kernels == KernelChoice::Rust {
            for kind in ShapeKind::ALL {
                let p = pto_testkit::build_shape(dev, k, kind, 64).unwrap_or_else(|e| panic!("{e}"));
                for rt in RUNTIMES {
                    p.run_checked(dev, rt).unwrap_or_else(|e| panic!("{what}: {} on {}: {e}", kind.name(), rt.name()));
                }
            }
        }
    });
}

#[test]
fn every_example_matches_its_golden_with_the_c_aicore_program() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    every_example(&dev, &k, KernelChoice::Rust, "as opened");
}

#[test]
fn every_example_matches_its_golden_with_the_c_aicore_program_under_the_faithful_model() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    for (seed, evict) in [(1, 20), (2, 200)] {
        dev.platform().set_cache_model(CacheModel::Faithful { seed, evict_per_mille: evict }).unwrap();
        every_example(&dev, &k, KernelChoice::Rust, &format!("faithful:{seed} evict {evict}"));
        assert_eq!(dev.platform().take_violations(), vec![]);
    }
}

#[test]
fn the_native_kernels_run_under_the_c_aicore_program_coherent_and_faithful() {
    let (dev, k) = pto_testkit::setup_with(pto::open, KernelChoice::Native).unwrap();
    every_example(&dev, &k, KernelChoice::Native, "native kernels, as opened");
    dev.platform().set_cache_model(CacheModel::Faithful { seed: 3, evict_per_mille: 20 }).unwrap();
    every_example(&dev, &k, KernelChoice::Native, "native kernels, faithful:3");
    assert_eq!(dev.platform().take_violations(), vec![]);
}

#[test]
fn the_resident_executor_is_refused_by_name() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let e = pto_testkit::aicored(AicoreProgram::Native, || {
        pto_testkit::executed(Executor::Resident, || pto_testkit::vector(&dev, &k, RuntimeKind::HostBuiltGraph))
    })
    .map(|_| ())
    .unwrap_err();
    let text = e.to_string();
    assert!(text.contains("resident is not supported by the native (C) AICore program"), "{text}");
    let want = ConfigError::ExecutorUnsupported { executor: Executor::Resident, aicore: AicoreProgram::Native };
    assert!(matches!(e, pto_testkit::Failure::Run(Error::Config(ref c)) if *c == want), "{e:?}");
}

fn k_panics(k: &mut dyn KernelContext) {
    let _: f32 = k.get(0, &[99]);
}

#[test]
fn a_kernels_fault_under_the_c_aicore_program_is_the_kernels_fault() {
    let dev = pto::open().unwrap();
    let f = dev.register_kernel("out_of_range", CoreType::Aiv, k_panics).unwrap();
    let x = dev.tensor_from(&[16], &[1.0f32; 16]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(f).input(&x.tensor())).map(|_| ())).unwrap();
    let cfg = RunConfig::default().with_aicore(AicoreProgram::Native);
    let e = match dev.run_with(&g, &cfg) {
        Err(Error::Device(e)) => e,
        other => panic!("expected the kernel's fault, got {other:?}"),
    };
    assert_eq!(e.code, ErrorCode::Device(pto::runtime::codes::DeviceFault::KernelFault), "{e}");
    assert_eq!(e.task, Some(0), "{e}");
    assert_eq!(e.kernel.as_deref(), Some("out_of_range"), "{e}");
    assert!(e.message.contains("index 99 out of range 16"), "the kernel's text through C: {}", e.message);
    // The device is usable afterwards, on either program.
    let y = dev.alloc::<f32>(&[16]).unwrap();
    let add = dev.register_kernel("fill", CoreType::Aiv, |k| k.store(0, &[2.0f32; 16])).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(add).output(&y.tensor())).map(|_| ())).unwrap();
    dev.run_with(&g, &cfg).unwrap();
    assert_eq!(y.read::<f32>().unwrap(), vec![2.0; 16]);
}

#[test]
fn the_c_aicore_program_records_the_same_trace() {
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let run = |p: AicoreProgram| {
        pto_testkit::aicored(p, || {
            pto_testkit::executed(Executor::Legacy, || {
                pto_testkit::traced(true, || pto_testkit::vector(&dev, &k, RuntimeKind::HostBuiltGraph))
            })
        })
        .unwrap()
    };
    let (c, r) = (run(AicoreProgram::Native), run(AicoreProgram::Rust));
    let (c, r) = (c.report.trace.unwrap(), r.report.trace.unwrap());
    let key = |t: &pto::runtime::host::Trace| {
        let mut v: Vec<(u32, u32, u8)> = t.subtasks.iter().map(|s| (s.task, s.block, s.lane)).collect();
        v.sort();
        v
    };
    assert_eq!(c.subtasks.len(), 5);
    assert_eq!(key(&c), key(&r));
}
