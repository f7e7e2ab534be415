//! Bad input and faults: each is a clear error naming what was wrong, and the device is left
//! usable (or explicitly unusable).

use pto::prelude::*;
use pto::runtime::codes::{DeviceFault, ErrorCode, SchedError, Site};
use pto::runtime::host::DeviceError;

fn device() -> (Device, pto_testkit::Kernels) {
    pto_testkit::setup(pto::open).expect("open the selected board")
}

/// The device still runs a real graph correctly.
fn still_works(dev: &Device, k: &pto_testkit::Kernels) {
    for rt in pto_testkit::RUNTIMES {
        let o = pto_testkit::vector(dev, k, rt).unwrap_or_else(|e| panic!("device not usable after the error: {e}"));
        assert_eq!(o.report.tasks, 5);
    }
}

fn device_error(e: Error) -> DeviceError {
    match e {
        Error::Device(d) => d,
        other => panic!("expected a device error, got {other}"),
    }
}

#[test]
fn dependency_cycle_is_rejected_with_its_tasks() {
    let (dev, k) = device();
    let r = dev.build(|g| {
        let a = g.submit(Task::dummy())?;
        let b = g.submit(Task::dummy().after(a))?;
        g.depend(a, b)?;
        Ok(())
    });
    match r {
        Err(Error::Graph(GraphError::Cycle { tasks })) => assert_eq!(tasks, vec![0, 1]),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a cycle was accepted"),
    }
    still_works(&dev, &k);
}

#[test]
fn unregistered_func_id_is_named() {
    let (dev, k) = device();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let e = dev.build(|g| g.submit(Task::aiv(FuncId(999)).inout(&x.tensor())).map(|_| ())).expect_err("accepted");
    assert_eq!(e, Error::Graph(GraphError::UnknownFunc { task: 0, lane: 1, func: 999 }));
    assert!(e.to_string().contains("func id 999"), "{e}");
    // A kernel registered for AIV cannot run on an AIC.
    let e = dev.build(|g| g.submit(Task::aic(k.add)).map(|_| ())).expect_err("accepted");
    assert!(matches!(e, Error::Graph(GraphError::WrongCoreType { core: CoreType::Aic, .. })), "{e}");
    still_works(&dev, &k);
}

#[test]
fn argument_limits_are_enforced() {
    let (dev, k) = device();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let e = dev
        .build(|g| {
            g.submit(Task::aiv(k.add1).inout(&x.tensor()))?;
            let mut t = Task::aiv(k.add1);
            for _ in 0..33 {
                t = t.input(&x.tensor());
            }
            g.submit(t).map(|_| ())
        })
        .expect_err("33 tensors accepted");
    assert_eq!(e, Error::Graph(GraphError::TooManyTensorArgs { task: 1, count: 33 }));
    let e = dev
        .build(|g| {
            let mut t = Task::aiv(k.add1).inout(&x.tensor());
            for i in 0..17 {
                t = t.scalar(i);
            }
            g.submit(t).map(|_| ())
        })
        .expect_err("17 scalars accepted");
    assert_eq!(e, Error::Graph(GraphError::TooManyScalarArgs { task: 0, count: 17 }));
    still_works(&dev, &k);
}

#[test]
fn view_outside_its_buffer_is_rejected() {
    let (dev, _k) = device();
    let y = dev.alloc::<f32>(&[4, 16]).unwrap();
    let e = y.tensor().view(&[3, 0], &[2, 16]).unwrap_err();
    assert_eq!(e, GraphError::ViewOutOfBounds { dim: 0, offset: 3, extent: 2, limit: 4 });
    let e = Tensor::strided(y.tensor().buffer, DType::F32, 60, &[8], &[1]).unwrap_err();
    assert_eq!(e, GraphError::ViewOutsideBuffer { end: 68 * 4, bytes: 64 * 4 });
}

#[test]
fn view_dtype_must_match_its_buffer() {
    let (dev, _k) = device();
    let y = dev.alloc::<f32>(&[16]).unwrap();
    assert_eq!(
        y.tensor().with_dtype(DType::I32).unwrap_err(),
        GraphError::DtypeMismatch { view: DType::I32, buffer: DType::F32 }
    );
    assert_eq!(
        Tensor::strided(y.tensor().buffer, DType::F16, 0, &[16], &[1]).unwrap_err(),
        GraphError::DtypeMismatch { view: DType::F16, buffer: DType::F32 }
    );
    // Host copies of the wrong type or size are refused too.
    assert!(matches!(y.write(&[0i32; 16]), Err(Error::Dtype { tensor: "f32", host: "i32" })));
    assert!(matches!(y.write(&[0.0f32; 15]), Err(Error::Size { expected: 16, got: 15, .. })));
}

#[test]
fn mix_task_without_a_cluster_is_unplaceable() {
    let (dev, k) = device();
    let t = dev.alloc::<f32>(&[32, 32]).unwrap();
    let u = dev.alloc::<f32>(&[32, 32]).unwrap();
    let graph = dev
        .build(|g| {
            g.submit(Task::aiv(k.add1).inout(&t.tensor()))?;
            g.submit(Task::mix(k.matmul, k.vec_half).input(&t.tensor()).input(&t.tensor()).output(&u.tensor()))?;
            Ok(())
        })
        .unwrap();
    let cfg = RunConfig::default().with_aiv_only(true);
    match dev.run_with(&graph, &cfg) {
        Err(Error::Graph(GraphError::Unplaceable { task: 1, shape, .. })) => {
            assert_eq!(shape, pto::runtime::layout::Shape::Mix)
        }
        other => panic!("expected Unplaceable for task 1, got {other:?}"),
    }
    still_works(&dev, &k);
}

#[test]
fn kernel_panic_is_latched_with_task_and_core() {
    let (dev, k) = device();
    let bad = dev.register_kernel("panics", CoreType::Aiv, pto_testkit::k_panic).unwrap();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev
        .build(|g| {
            g.submit(Task::aiv(k.add1).inout(&x.tensor()))?;
            g.submit(Task::aiv(bad).inout(&x.tensor()))?;
            Ok(())
        })
        .unwrap();
    let d = device_error(dev.run(&graph).unwrap_err());
    assert_eq!(d.code, ErrorCode::Device(DeviceFault::KernelFault));
    assert_eq!(d.site, Site::Kernel);
    assert_eq!(d.task, Some(1));
    let core = d.core.expect("the fault names its core");
    assert!(core >= dev.topology().clusters, "an AIV worker, got {core}");
    assert!(d.message.contains("deliberate kernel failure"), "{}", d.message);
    // The next run works.
    still_works(&dev, &k);
}

#[test]
fn silent_core_is_a_watchdog_error_not_a_hang() {
    let (dev, k) = device();
    dev.platform().inject_silent_core(5).unwrap();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(k.add1).inout(&x.tensor())).map(|_| ())).unwrap();
    let cfg = RunConfig::default().with_watchdog_us(500_000);
    let started = std::time::Instant::now();
    let d = device_error(dev.run_with(&graph, &cfg).unwrap_err());
    assert_eq!(d.code, ErrorCode::Sched(SchedError::SchedulerTimeout));
    assert_eq!(d.site, Site::Handshake);
    assert_eq!(d.core, Some(5));
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "bounded by the watchdog");
    // The silent core was never part of the run; the next run uses every core again.
    still_works(&dev, &k);
}

#[test]
fn closed_device_refuses_work() {
    let (dev, k) = device();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(k.add1).inout(&x.tensor())).map(|_| ())).unwrap();
    dev.close();
    assert_eq!(dev.run(&graph).unwrap_err(), Error::Closed);
    assert_eq!(dev.alloc::<f32>(&[4]).err(), Some(Error::Closed));
    assert!(matches!(dev.register_kernel("late", CoreType::Aiv, pto_testkit::k_add1), Err(Error::Closed)));
    // Its tensors too: reads and writes after close fail like every other call.
    assert_eq!(x.read::<f32>().err(), Some(Error::Closed));
    assert_eq!(x.write(&[0.0f32; 16]).err(), Some(Error::Closed));
}

#[test]
fn error_messages_carry_name_and_hint() {
    let (dev, k) = device();
    let bad = dev.register_kernel("panics", CoreType::Aiv, pto_testkit::k_panic).unwrap();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(bad).inout(&x.tensor())).map(|_| ())).unwrap();
    let text = dev.run(&graph).unwrap_err().to_string();
    assert!(text.contains("KERNEL_FAULT (200)") && text.contains("Hint:") && text.contains("task 0"), "{text}");
    let _ = k;
}

/// A simulator environment variable outside its syntax (`PTO_SIM_CACHE=faithfull`,
/// `faithful:abc`, `PTO_SIM_PROTECT=maybe`, `PTO_SIM_AICPU_WRITES=sometimes`) makes opening the
/// device fail with an error naming the variable and the value, instead of silently running
/// another configuration. The environment is process-wide, so each case runs in a child
/// process (this test binary, running `child_opens_the_device_under_a_bad_environment`).
#[test]
fn a_malformed_simulator_environment_is_refused_by_name() {
    let exe = std::env::current_exe().expect("the test binary");
    for (var, value) in [
        ("PTO_SIM_CACHE", "faithfull"),
        ("PTO_SIM_CACHE", "faithful:abc"),
        ("PTO_SIM_CACHE", "coherent:back:x"),
        ("PTO_SIM_PROTECT", "maybe"),
        ("PTO_SIM_AICPU_WRITES", "sometimes"),
    ] {
        let out = std::process::Command::new(&exe)
            .args(["--ignored", "--exact", "child_opens_the_device_under_a_bad_environment", "--nocapture"])
            .env_remove("PTO_SIM_CACHE")
            .env_remove("PTO_SIM_PROTECT")
            .env_remove("PTO_SIM_AICPU_WRITES")
            .env(var, value)
            .env("PTO_EXPECT_ENV_ERROR", format!("{var}={value:?}"))
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{var}={value}: {text}");
        assert!(text.contains("1 passed"), "{var}={value}: the child did not run: {text}");
    }
}

/// The child of `a_malformed_simulator_environment_is_refused_by_name`.
#[test]
#[ignore = "run by a_malformed_simulator_environment_is_refused_by_name with a bad environment"]
fn child_opens_the_device_under_a_bad_environment() {
    let want = std::env::var("PTO_EXPECT_ENV_ERROR").expect("run by the parent test");
    match pto::open() {
        Ok(_) => panic!("the device opened under {want}"),
        Err(e) => assert!(e.to_string().contains(&want), "{e} does not name {want}"),
    }
}
