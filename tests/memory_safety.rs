//! Device memory that safe code cannot corrupt, and faults that stay contained: one test (or
//! more) per finding of the memory-safety review. Each reproduces the finding through the
//! public API and asserts the contained outcome: a named error before launch, a deferred free,
//! a fault with a code, a bounded wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pto::board::{Board, Selected};
use pto::hal::GmAddr;
use pto::prelude::*;
use pto::runtime::codes::{DeviceFault, Site};
use pto::runtime::graph::{BufferRef, TensorProblem};
use pto::runtime::host::{self, DeviceError, Timeouts};

fn device() -> (Device, pto_testkit::Kernels) {
    pto_testkit::setup(pto::open).expect("open the selected board")
}

/// A device of the selected board with custom budgets.
fn device_with(t: Timeouts) -> (Device, pto_testkit::Kernels) {
    let raw = Selected::open().expect("open the selected board");
    let dev = host::Device::new_in_process(raw, t).expect("device");
    let k = pto_testkit::Kernels::register(&dev).expect("kernels");
    (dev, k)
}

fn device_error(e: Error) -> DeviceError {
    match e {
        Error::Device(d) => d,
        other => panic!("expected a device error, got {other:?}"),
    }
}

fn still_works(dev: &Device, k: &pto_testkit::Kernels) {
    for rt in pto_testkit::RUNTIMES {
        let o = pto_testkit::vector(dev, k, rt).unwrap_or_else(|e| panic!("device not usable: {e}"));
        assert_eq!(o.report.tasks, 5);
    }
}

/// Sleeps 150 ms, then fills argument 0 with 42.
fn k_slow_fill42(k: &mut dyn KernelContext) {
    std::thread::sleep(Duration::from_millis(150));
    let n = k.arg(0).elem_count() as usize;
    k.store(0, &vec![42.0f32; n]);
}

fn fill_program(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    o.submit(Task::aiv(FuncId(a.s(0)? as u16)).output(&a.t(0)?))?;
    Ok(())
}

// Finding 1: use after free.

#[test]
fn a_tensor_whose_allocation_was_dropped_is_refused_before_launch() {
    let (dev, k) = device();
    let x = dev.tensor_from(&[16], &[7.0f32; 16]).unwrap();
    let t = x.tensor();
    drop(x);
    // A new allocation may get the same address; the stale handle must not reach it.
    let y = dev.tensor_from(&[16], &[7.0f32; 16]).unwrap();
    let fill = dev.register_kernel("fill42", CoreType::Aiv, k_slow_fill42).unwrap();
    match dev.build(|g| g.submit(Task::aiv(fill).output(&t)).map(|_| ())) {
        Err(Error::Graph(GraphError::UnusableTensor { task: 0, arg: 0, why: TensorProblem::Stale })) => {}
        other => panic!("expected a stale-tensor error, got {other:?}"),
    }
    // Dropped after the graph was built: refused when the graph is prepared.
    let z = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(fill).output(&z.tensor())).map(|_| ())).unwrap();
    drop(z);
    match dev.run(&graph) {
        Err(Error::Graph(GraphError::UnusableTensor { task: 0, arg: 0, why: TensorProblem::Stale })) => {}
        other => panic!("expected a stale-tensor error at prepare, got {other:?}"),
    }
    // On the device-side runtime too (the program's arguments are checked before launch).
    let p = dev.register_orchestration("fill", fill_program).unwrap();
    let args = OrchArgs::new().tensor(t).scalar(fill.0 as u64);
    for rt in pto_testkit::RUNTIMES {
        match dev.run_program(&p, &args, &RunConfig::default().with_runtime(rt)) {
            Err(Error::Graph(GraphError::UnusableProgramArg { arg: 0, why: TensorProblem::Stale })) => {}
            other => panic!("{rt}: expected a stale program argument, got {other:?}"),
        }
    }
    assert_eq!(y.read::<f32>().unwrap(), vec![7.0; 16], "nothing wrote the new allocation");
    still_works(&dev, &k);
}

#[test]
fn a_tensor_dropped_while_its_run_is_in_flight_is_freed_after_the_fence() {
    let (dev, k) = device();
    let fill = dev.register_kernel("fill42", CoreType::Aiv, k_slow_fill42).unwrap();
    let p = dev.register_orchestration("fill", fill_program).unwrap();
    for rt in pto_testkit::RUNTIMES {
        let x = dev.alloc::<f32>(&[1024]).unwrap();
        let x_addr = x.addr();
        let graph = dev.build(|g| g.submit(Task::aiv(fill).output(&x.tensor())).map(|_| ())).unwrap();
        let args = OrchArgs::new().tensor(x.tensor()).scalar(fill.0 as u64);
        let cfg = RunConfig::default().with_runtime(rt);
        let run = match rt {
            RuntimeKind::HostBuiltGraph => dev.prepare(&graph, &cfg).unwrap().launch().unwrap(),
            _ => dev.prepare_program(&p, &args, &cfg).unwrap().launch().unwrap(),
        };
        // Dropping the tensor while the run writes it is legal: the free waits for the fence.
        drop(x);
        assert_eq!(dev.deferred_frees(), 1, "{rt}: the run still holds the allocation");
        let y = dev.tensor_from(&[1024], &[7.0f32; 1024]).unwrap();
        assert_ne!(y.addr(), x_addr, "{rt}: the in-flight allocation was not reused");
        run.wait().unwrap_or_else(|e| panic!("{rt}: {e}"));
        assert_eq!(dev.deferred_frees(), 0, "{rt}: freed at the fence");
        assert_eq!(y.read::<f32>().unwrap(), vec![7.0; 1024], "{rt}: the new tensor was not overwritten");
    }
    still_works(&dev, &k);
}

// Finding 2: foreign tensors.

#[test]
fn a_tensor_of_another_device_is_refused_on_both_runtimes() {
    let (a, _ka) = device();
    let (b, kb) = device();
    let x = a.tensor_from(&[16], &[1.0f32; 16]).unwrap();
    let mine = b.tensor_from(&[16], &[3.0f32; 16]).unwrap();
    match b.build(|g| g.submit(Task::aiv(kb.add1).inout(&x.tensor())).map(|_| ())) {
        Err(Error::Graph(GraphError::UnusableTensor {
            task: 0,
            arg: 0,
            why: TensorProblem::Foreign { owner, device },
        })) => {
            assert_eq!((owner, device), (a.serial(), b.serial()));
        }
        other => panic!("expected a foreign-tensor error, got {other:?}"),
    }
    let p = b.register_orchestration("fill", fill_program).unwrap();
    let args = OrchArgs::new().tensor(x.tensor()).scalar(kb.add1.0 as u64);
    for rt in pto_testkit::RUNTIMES {
        let e = b.run_program(&p, &args, &RunConfig::default().with_runtime(rt)).unwrap_err();
        assert!(
            matches!(e, Error::Graph(GraphError::UnusableProgramArg { arg: 0, why: TensorProblem::Foreign { .. } })),
            "{rt}: {e:?}"
        );
    }
    assert_eq!(mine.read::<f32>().unwrap(), vec![3.0; 16]);
    assert_eq!(x.read::<f32>().unwrap(), vec![1.0; 16]);
    still_works(&b, &kb);
}

#[test]
fn a_forged_buffer_is_refused() {
    let (dev, k) = device();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let victim = dev.tensor_from(&[16], &[5.0f32; 16]).unwrap();
    // Same allocation id, another address (the victim's) and the same size.
    let mut forged = x.tensor();
    forged.buffer.placement = pto::runtime::graph::Placement::External(victim.addr());
    match dev.build(|g| g.submit(Task::aiv(k.add1).inout(&forged)).map(|_| ())) {
        Err(Error::Graph(GraphError::UnusableTensor { why: TensorProblem::Forged, .. })) => {}
        other => panic!("expected a forged-tensor error, got {other:?}"),
    }
    // A hand-made buffer reference naming nobody's allocation.
    let b = BufferRef {
        device: dev.serial(),
        id: 1 << 40,
        placement: pto::runtime::graph::Placement::External(GmAddr(victim.addr().0)),
        bytes: 64,
        dtype: DType::F32,
    };
    let t = Tensor::whole(b, &[16]).unwrap();
    assert!(matches!(
        dev.build(|g| g.submit(Task::aiv(k.add1).inout(&t)).map(|_| ())),
        Err(Error::Graph(GraphError::UnusableTensor { why: TensorProblem::Stale, .. }))
    ));
    assert_eq!(victim.read::<f32>().unwrap(), vec![5.0; 16]);
}

// Finding 3: wrapping arithmetic.

#[test]
fn sizes_near_the_integer_limits_are_named_errors() {
    let (dev, k) = device();
    for shape in [[2147418113u32, 2147549185].as_slice(), &[1 << 31, 1 << 31], &[u32::MAX; 5]] {
        match dev.alloc::<f32>(shape) {
            Err(Error::Graph(GraphError::ShapeTooLarge)) => {}
            other => panic!("{shape:?}: expected ShapeTooLarge, got {other:?}"),
        }
    }
    let x = dev.alloc::<f32>(&[1024]).unwrap();
    assert!(matches!(
        Tensor::strided(x.tensor().buffer, DType::F32, (1 << 62) - 1024, &[1024], &[1]),
        Err(GraphError::ViewOverflows | GraphError::ViewOutsideBuffer { .. })
    ));
    // A view whose fields were altered by hand is refused when submitted.
    let mut v = x.tensor();
    v.offset = (1u64 << 62) - 1024;
    assert!(matches!(
        dev.build(|g| g.submit(Task::aiv(k.add1).inout(&v)).map(|_| ())),
        Err(Error::Graph(GraphError::ArgOverflows { task: 0, arg: 0 } | GraphError::ArgOutsideBuffer { .. }))
    ));
    // Ring heaps whose sum wraps, or that no device holds.
    let p = dev.register_orchestration("fill", fill_program).unwrap();
    let args = OrchArgs::new().tensor(x.tensor()).scalar(k.add1.0 as u64);
    for heap in [[1u64 << 63, 1 << 63, 64, 64], [u64::MAX - 63, 128, 64, 64]] {
        let mut rings = RingConfig::default();
        rings.heap = heap;
        let cfg = RunConfig::default().with_runtime(RuntimeKind::TensormapRing).with_rings(rings);
        match dev.run_program(&p, &args, &cfg) {
            Err(Error::Config(ConfigError::RingHeap { ring: 0, heap: h, .. })) => assert_eq!(h, heap[0]),
            other => panic!("{heap:?}: expected a configuration error, got {other:?}"),
        }
    }
    // A watchdog whose budget chain overflows.
    let graph = dev.build(|g| g.submit(Task::aiv(k.add1).inout(&x.tensor())).map(|_| ())).unwrap();
    match dev.run_with(&graph, &RunConfig::default().with_watchdog_us(1 << 63)) {
        Err(Error::Config(ConfigError::BudgetChain { watchdog_us, .. })) => assert_eq!(watchdog_us, 1 << 63),
        other => panic!("expected a configuration error, got {other:?}"),
    }
    still_works(&dev, &k);
}

// Finding 4: raw accesses outside the task's views (the simulator's memory protection).

fn k_raw_write_into_input(k: &mut dyn KernelContext) {
    let a = k.arg(0);
    k.gm().write(a.addr, &1.0f32.to_le_bytes());
}

#[test]
fn a_raw_write_into_an_input_only_argument_is_a_kernel_fault_and_lands_nowhere() {
    let (dev, k) = device();
    let bad = dev.register_kernel("raw_in", CoreType::Aiv, k_raw_write_into_input).unwrap();
    let x = dev.tensor_from(&[16], &[9.0f32; 16]).unwrap();
    let y = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(bad).input(&x.tensor()).output(&y.tensor())).map(|_| ())).unwrap();
    let d = device_error(dev.run(&graph).unwrap_err());
    assert_eq!(d.code, ErrorCode::Device(DeviceFault::KernelFault));
    assert_eq!(d.task, Some(0));
    assert!(d.core.is_some());
    assert_eq!(x.read::<f32>().unwrap(), vec![9.0; 16], "nothing landed");
    still_works(&dev, &k);
}

// Finding 5: overlapping input and output views of one buffer in one task.

#[test]
fn aliased_arguments_are_refused_unless_the_task_opts_in() {
    let (dev, k) = device();
    let x = dev.tensor_from(&[4, 16], &[1.0f32; 64]).unwrap();
    let rows = |r: u32, n: u32| x.tensor().view(&[r, 0], &[n, 16]).unwrap();
    // Rows 0..2 read, rows 1..3 written: they share row 1.
    match dev
        .build(|g| g.submit(Task::aiv(k.add).input(&rows(0, 2)).input(&rows(0, 2)).output(&rows(1, 2))).map(|_| ()))
    {
        Err(Error::Graph(GraphError::AliasedArgs { task: 0, first: 0, second: 2 })) => {}
        other => panic!("expected AliasedArgs, got {other:?}"),
    }
    // Disjoint views of one buffer are fine, and so are two reads of the same view.
    dev.build(|g| g.submit(Task::aiv(k.add).input(&rows(0, 2)).input(&rows(0, 2)).output(&rows(2, 2))).map(|_| ()))
        .unwrap();
    // Opting in: the task may name the same bytes as input and output (k_add reads both
    // inputs before it stores).
    let g = dev
        .build(|g| {
            g.submit(Task::aiv(k.add).input(&rows(0, 2)).input(&rows(0, 2)).output(&rows(0, 2)).allow_alias())
                .map(|_| ())
        })
        .unwrap();
    dev.run(&g).unwrap();
    let v = x.read::<f32>().unwrap();
    assert!(v[..32].iter().all(|&e| e == 2.0) && v[32..].iter().all(|&e| e == 1.0));
}

// Finding 6: the launch state's departure (the unit tests in runtime/src/exec/aicpu/shared_state.rs run
// under Miri in CI); here, many short runs with every thread count on both runtimes.

#[test]
fn launch_state_survives_many_runs_with_every_thread_count() {
    let (dev, k) = device();
    let threads = dev.topology().aicpu_threads;
    for t in 2..=threads {
        for rt in pto_testkit::RUNTIMES {
            for _ in 0..10 {
                let x = dev.tensor_from(&[16], &[0.0f32; 16]).unwrap();
                let p = dev.register_orchestration("fill", fill_program).unwrap();
                let args = OrchArgs::new().tensor(x.tensor()).scalar(k.fill1.0 as u64);
                dev.run_program(&p, &args, &RunConfig::default().with_runtime(rt).with_aicpu_threads(t))
                    .unwrap_or_else(|e| panic!("{rt} with {t} threads: {e}"));
                assert_eq!(x.read::<f32>().unwrap(), vec![1.0; 16]);
            }
        }
    }
}

// Finding 7: a kernel that never returns.

static RELEASE_HUNG: AtomicBool = AtomicBool::new(false);

/// Never returns until the test releases it (so the simulator thread does not burn a CPU for
/// the rest of the process).
fn k_hangs(_k: &mut dyn KernelContext) {
    while !RELEASE_HUNG.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// On both executors of the host-built graph (the AICPU's watchdog on the legacy one, the
/// supervisor's on the resident one), each on a device of its own (the first stays stuck).
#[test]
fn a_kernel_that_never_returns_is_bounded_by_the_watchdog_and_named() {
    for executor in [Executor::Legacy, Executor::Resident] {
        // Watchdog 200 ms, exit 200 ms, stream budget 30 s: the run must end long before 30 s.
        let (dev, _k) = device_with(Timeouts::new(200_000, 200_000, 30_000_000));
        let hang = dev.register_kernel("hangs", CoreType::Aiv, k_hangs).unwrap();
        let x = dev.alloc::<f32>(&[16]).unwrap();
        let graph = dev.build(|g| g.submit(Task::aiv(hang).output(&x.tensor())).map(|_| ())).unwrap();
        let started = Instant::now();
        let d = device_error(dev.run_with(&graph, &RunConfig::default().with_executor(executor)).unwrap_err());
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{executor}: bounded by the watchdog, not the stream budget: {took:?}");
        assert_eq!(d.code, ErrorCode::Device(DeviceFault::KernelHung), "{executor}: {d}");
        assert_eq!(d.site, Site::Completion, "{executor}");
        assert_eq!(d.task, Some(0), "{executor}");
        assert!(d.core.is_some(), "{executor}");
        // The device says why it cannot be used.
        let why = dev.unusable_reason().expect("the device is unusable while a core is stuck");
        assert!(why.contains("KERNEL_HUNG"), "{executor}: {why}");
        assert!(matches!(dev.alloc::<f32>(&[4]), Err(Error::Unusable(_))), "{executor}");
        // Dropping the device returns in bounded time (the stuck thread is detached).
        let started = Instant::now();
        drop(x);
        drop(graph);
        drop(dev);
        assert!(started.elapsed() < Duration::from_secs(10), "{executor}: drop took {:?}", started.elapsed());
    }
    RELEASE_HUNG.store(true, Ordering::Release);
}

// Finding 8: one device shared by several host threads; a forgotten prepared run.

#[test]
fn runs_from_several_threads_take_turns() {
    let (dev, k) = device();
    std::thread::scope(|s| {
        for t in 0..3 {
            let (dev, k) = (&dev, &k);
            s.spawn(move || {
                for i in 0..40 {
                    let rt = if (i + t) % 2 == 0 { RuntimeKind::HostBuiltGraph } else { RuntimeKind::TensormapRing };
                    let o =
                        pto_testkit::vector(dev, k, rt).unwrap_or_else(|e| panic!("thread {t} run {i} ({rt}): {e}"));
                    assert_eq!(o.report.tasks, 5);
                }
            });
        }
    });
}

#[test]
fn a_forgotten_prepared_run_does_not_wedge_the_device() {
    let base = Timeouts::new(2_000_000, 1_000_000, 20_000_000).with_turns(10_000_000, 100_000);
    let (dev, k) = device_with(base);
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(k.fill1).output(&x.tensor())).map(|_| ())).unwrap();
    std::mem::forget(dev.prepare(&graph, &RunConfig::default()).unwrap());
    // The next run waits for the lease (100 ms), reclaims the slot and runs.
    dev.run(&graph).unwrap();
    assert_eq!(x.read::<f32>().unwrap(), vec![1.0; 16]);
    // A prepared run that outlived its lease while another run waited loses its slot, and
    // cannot launch into it afterwards.
    let stale = dev.prepare(&graph, &RunConfig::default()).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let next = dev.prepare(&graph, &RunConfig::default()).unwrap();
    assert!(matches!(stale.launch(), Err(Error::Expired { micros: 100_000 })));
    next.launch().unwrap().wait().unwrap();
    // Without waiting, the same situation is `Busy`.
    let held = dev.prepare(&graph, &RunConfig::default()).unwrap();
    assert!(matches!(dev.try_prepare(&graph, &RunConfig::default()), Err(Error::Busy(_))));
    held.launch().unwrap().wait().unwrap();
    still_works(&dev, &k);
}

// Finding 9: error plumbing.

fn k_long_panic(_k: &mut dyn KernelContext) {
    panic!("{}", "a long kernel message that goes on. ".repeat(6));
}

#[test]
fn errors_keep_their_codes_sources_and_whole_messages() {
    let (dev, k) = device();
    // A host dtype mismatch is a dtype error, not a size error.
    let x = dev.alloc::<f32>(&[16]).unwrap();
    assert!(matches!(x.read::<i32>(), Err(Error::Dtype { tensor: "f32", host: "i32" })));
    // A zero-length view says so.
    assert_eq!(x.tensor().view(&[0], &[0]).unwrap_err(), GraphError::ZeroExtent { dim: 0 });
    // Kernel fault text longer than 96 bytes arrives whole (up to the fault text's capacity).
    let long = dev.register_kernel("long_panic", CoreType::Aiv, k_long_panic).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(long).inout(&x.tensor())).map(|_| ())).unwrap();
    let d = device_error(dev.run(&graph).unwrap_err());
    assert!(d.message.len() > 200, "{} bytes: {}", d.message.len(), d.message);
    // Graph errors print their message once in a source chain.
    let e = Error::Graph(GraphError::ShapeTooLarge);
    assert!(std::error::Error::source(&e).is_none());
    assert!(e.to_string().contains("too large"));
    // INVALID_ARGS from the device-side runtime names the argument in its detail word.
    let p = dev.register_orchestration("aliased", aliased_program).unwrap();
    let y = dev.alloc::<f32>(&[4, 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor()).scalar(k.add.0 as u64);
    let d = device_error(
        dev.run_program(&p, &args, &RunConfig::default().with_runtime(RuntimeKind::TensormapRing)).unwrap_err(),
    );
    assert_eq!(d.code, ErrorCode::Orch(OrchError::InvalidArgs));
    assert_eq!(d.detail, 2, "argument 2 is the aliased one");
    assert!(d.message.contains("arguments 0 and 2"), "{}", d.message);
    // Runtimes parse and print.
    assert_eq!("hbg".parse::<RuntimeKind>().unwrap(), RuntimeKind::HostBuiltGraph);
    assert_eq!(RuntimeKind::TensormapRing.to_string(), "trb");
    assert!("xyz".parse::<RuntimeKind>().is_err());
    still_works(&dev, &k);
}

fn aliased_program(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let y = a.t(0)?;
    let top = y.view(&[0, 0], &[2, 16])?;
    o.submit(Task::aiv(FuncId(a.s(0)? as u16)).input(&top).input(&top).output(&top))?;
    Ok(())
}

// Finding 10: a scope tensor that escapes its scope inside a task.

fn smuggle(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let f = FuncId(a.s(0)? as u16);
    let task = o.scope(|s| {
        let t = s.alloc::<f32>(&[16])?;
        Ok(Task::aiv(f).output(&t))
    })?;
    o.submit(task)?;
    Ok(())
}

#[test]
fn an_escaped_scope_tensor_is_the_same_named_error_on_both_runtimes() {
    let (dev, k) = device();
    let p = dev.register_orchestration("smuggle", smuggle).unwrap();
    let args = OrchArgs::new().scalar(k.fill1.0 as u64);
    for rt in pto_testkit::RUNTIMES {
        let e = dev.run_program(&p, &args, &RunConfig::default().with_runtime(rt)).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::Orch(OrchError::InvalidArgs)), "{rt}: {e}");
        assert!(
            e.to_string().contains("task 0 argument 0 names a tensor of a scope that has ended")
                || e.to_string().contains("names a tensor of a scope that has ended"),
            "{rt}: {e}"
        );
    }
    still_works(&dev, &k);
}

// Trust: a run keeps everything it touches alive until its fence, the graph's heap included.

/// Fills argument 0 with 7.
fn k_fill7(k: &mut dyn KernelContext) {
    let n = k.arg(0).elem_count() as usize;
    k.store(0, &vec![7.0f32; n]);
}

/// Copies argument 0 into argument 1.
fn k_copy(k: &mut dyn KernelContext) {
    let v = k.load::<f32>(0);
    k.store(1, &v);
}

/// A graph dropped after `prepare` and before the run's fence: the run still writes its
/// intermediates into the graph's heap, so the heap must not be freed (and handed to the next
/// allocation) before the fence. On both executors, through `wait` and through dropping the
/// run handle; the bystander allocated after the drop is the block the freed heap would be.
#[test]
fn a_graph_dropped_before_its_run_ends_keeps_its_heap_until_the_fence() {
    let (dev, _k) = device();
    let fill = dev.register_kernel("fill7", CoreType::Aiv, k_fill7).unwrap();
    let copy = dev.register_kernel("copy", CoreType::Aiv, k_copy).unwrap();
    for executor in [Executor::Legacy, Executor::Resident] {
        for by_drop in [false, true] {
            let out = dev.alloc::<f32>(&[1024]).unwrap();
            let graph = dev
                .build(|g| {
                    let h = g.alloc_tensor(DType::F32, &[1024])?;
                    g.submit(Task::aiv(fill).output(&h))?;
                    g.submit(Task::aiv(copy).input(&h).output(&out.tensor()))?;
                    Ok(())
                })
                .unwrap();
            let prepared = dev.prepare(&graph, &RunConfig::default().with_executor(executor)).unwrap();
            drop(graph);
            let bystander = dev.tensor_from(&[1024], &[-1.0f32; 1024]).unwrap();
            let run = prepared.launch().unwrap();
            if by_drop {
                drop(run);
            } else {
                let report = run.wait().unwrap();
                assert_eq!(report.executor, executor);
            }
            let seen = bystander.read::<f32>().unwrap();
            let clobbered = seen.iter().filter(|&&v| v != -1.0).count();
            assert_eq!(clobbered, 0, "{executor:?} (dropped handle: {by_drop}): the run wrote a later allocation");
            assert!(out.read::<f32>().unwrap().iter().all(|&v| v == 7.0), "{executor:?}: wrong output");
        }
    }
}

/// Writes 1 into its tensor argument (scalar 0 names the func).
fn program_one(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    o.submit(Task::aiv(FuncId(a.s(0)? as u16)).output(&a.t(0)?))?;
    Ok(())
}

/// Writes nothing: device B's other program, which a foreign handle used to run.
fn program_two(_o: &mut Orch<'_>, _a: &OrchArgs) -> Result<(), OrchFail> {
    Ok(())
}

/// Handles name their device: a program registered on device A and a graph built on A are
/// refused by name on device B, on both runtimes, before anything runs; B still works.
#[test]
fn a_program_or_graph_of_another_device_is_refused_by_name() {
    let (a, _ka) = device();
    let (b, kb) = device();
    let fill = b.register_kernel("fill7", CoreType::Aiv, k_fill7).unwrap();
    // B registers a program of its own first, so A's program handle has a namesake index on B.
    let _b_two = b.register_orchestration("two", program_two).unwrap();
    let _a_pad = a.register_orchestration("pad", program_two).unwrap();
    let a_one = a.register_orchestration("one", program_one).unwrap();
    let y = b.tensor_from(&[16], &[0.0f32; 16]).unwrap();
    let args = OrchArgs::new().tensor(y.tensor()).scalar(fill.0 as u64);
    for rt in pto_testkit::RUNTIMES {
        match b.run_program(&a_one, &args, &RunConfig::default().with_runtime(rt)) {
            Err(Error::ForeignHandle { what: "program", name, owner, device }) => {
                assert_eq!((name.as_str(), owner, device), ("one", a.serial(), b.serial()), "{rt}");
            }
            other => panic!("{rt}: expected a foreign-program error, got {other:?}"),
        }
    }
    assert!(matches!(b.build_program(&a_one, &args), Err(Error::ForeignHandle { what: "program", .. })));
    let (_x, a_graph) = pto_testkit::add1_chain(&a, 2).unwrap();
    match b.run(&a_graph) {
        Err(Error::ForeignHandle { what: "graph", owner, device, .. }) => {
            assert_eq!((owner, device), (a.serial(), b.serial()));
        }
        other => panic!("expected a foreign-graph error, got {other:?}"),
    }
    assert_eq!(y.read::<f32>().unwrap(), vec![0.0; 16], "nothing ran");
    still_works(&b, &kb);
}

/// Forgotten run handles (`mem::forget`) do not wedge the device: a run that needs a slot
/// fences a launched run whose handle let it be past its lease (100 ms here) and keeps the
/// outcome for the handle; `try_prepare` does the same for runs that have ended. A handle
/// that is only slow, not forgotten, still gets its own report from `wait`.
#[test]
fn forgotten_run_handles_do_not_wedge_the_device() {
    let base = Timeouts::new(2_000_000, 1_000_000, 20_000_000).with_turns(3_000_000, 100_000);
    let (dev, k) = device_with(base);
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(k.fill1).output(&x.tensor())).map(|_| ())).unwrap();
    for _ in 0..2 {
        std::mem::forget(dev.prepare(&graph, &RunConfig::default()).unwrap().launch().unwrap());
        std::mem::forget(dev.prepare(&graph, &RunConfig::default()).unwrap().launch().unwrap());
        // Both slots hold launched runs nobody will wait for: the next run fences them.
        dev.run(&graph).unwrap_or_else(|e| panic!("the device is wedged by forgotten handles: {e}"));
    }
    // Without waiting: both slots hold ended runs past their lease.
    std::mem::forget(dev.prepare(&graph, &RunConfig::default()).unwrap().launch().unwrap());
    std::mem::forget(dev.prepare(&graph, &RunConfig::default()).unwrap().launch().unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let p = dev.try_prepare(&graph, &RunConfig::default()).expect("try_prepare fences an ended, forgotten run");
    p.launch().unwrap().wait().unwrap();
    // A slow handle: the device fences its run for another run, and keeps its report.
    let slow = dev.prepare(&graph, &RunConfig::default()).unwrap().launch().unwrap();
    let epoch = slow.epoch();
    let other = dev.prepare(&graph, &RunConfig::default()).unwrap().launch().unwrap();
    std::thread::sleep(Duration::from_millis(150));
    dev.run(&graph).unwrap();
    assert_eq!(slow.wait().expect("the kept report").epoch, epoch);
    other.wait().unwrap();
    assert_eq!(dev.deferred_frees(), 0);
    still_works(&dev, &k);
}

static RELEASE_SLOW: AtomicBool = AtomicBool::new(false);

/// Returns only when the test releases it: a kernel far slower than the watchdog.
fn k_slow(_k: &mut dyn KernelContext) {
    while !RELEASE_SLOW.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A kernel slower than the watchdog: the run's `KERNEL_HUNG` arrives within the watchdog plus
/// a small margin (the AICPU does not wait the exit budget for the core it names, the host
/// does not wait the cores' budget for the AICore program: `HUNG_GRACE_US`), not after
/// watchdog + exit + the core budget (5.2 s with these budgets). The device says why it is
/// unusable while the core is stuck, and is usable again once the kernel returns.
#[test]
fn a_kernel_slower_than_the_watchdog_is_reported_in_time_and_the_device_recovers() {
    // Watchdog 1 s, exit 1 s: the core budget is 2 x 1 + 1 = 3 s.
    let (dev, k) = device_with(Timeouts::new(1_000_000, 1_000_000, 30_000_000));
    let slow = dev.register_kernel("slow", CoreType::Aiv, k_slow).unwrap();
    let x = dev.alloc::<f32>(&[16]).unwrap();
    let graph = dev.build(|g| g.submit(Task::aiv(slow).output(&x.tensor())).map(|_| ())).unwrap();
    let started = Instant::now();
    let d = device_error(dev.run(&graph).unwrap_err());
    let took = started.elapsed();
    assert_eq!(d.code, ErrorCode::Device(DeviceFault::KernelHung), "{d}");
    // Watchdog (1 s) + the hung grace (0.2 s), with room for a loaded machine; the old bound
    // was at least 1 + 1 + 3.2 s of waiting.
    assert!(took < Duration::from_millis(3_500), "KERNEL_HUNG after {took:?}, not within the watchdog plus its margin");
    let why = dev.unusable_reason().expect("unusable while the core is stuck");
    assert!(why.contains("KERNEL_HUNG") && why.contains("usable again"), "{why}");
    assert!(matches!(dev.alloc::<f32>(&[4]), Err(Error::Unusable(_))));
    RELEASE_SLOW.store(true, Ordering::Release);
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Some(why) = dev.unusable_reason() {
        assert!(Instant::now() < deadline, "the device did not recover after the kernel returned: {why}");
        std::thread::sleep(Duration::from_millis(20));
    }
    still_works(&dev, &k);
    drop(graph);
    assert_eq!(dev.deferred_frees(), 0);
}

// Trust, round four: a runtime-allocated tensor is checked by its extent and address, not only
// by its identity.

/// Widens a heap tensor of 16 elements to 4 MiB (1 << 20 elements).
fn widen(t: &mut Tensor) {
    t.buffer.bytes = 4 << 20;
    t.shape[0] = 1 << 20;
}

/// Moves a heap tensor to an offset that wraps below the heap's base.
fn wrap(t: &mut Tensor) {
    t.buffer.placement = pto::runtime::graph::Placement::Heap(u64::MAX - 63);
}

/// A heap tensor whose fields were altered (widened, or placed at an offset that wraps) is
/// refused by name when it is submitted, on both executors, and nothing is written: the tensor
/// allocated after `prepare` (which the widened write used to overwrite whole) keeps its values.
#[test]
fn a_widened_or_moved_heap_tensor_is_refused_by_name_on_both_executors() {
    let (dev, _k) = device();
    let fill = dev.register_kernel("fill7", CoreType::Aiv, k_fill7).unwrap();
    for executor in [Executor::Legacy, Executor::Resident] {
        for (what, forge) in [("size", widen as fn(&mut Tensor)), ("address", wrap)] {
            let built = dev.build(|g| {
                let mut t = g.alloc_tensor(DType::F32, &[16])?;
                forge(&mut t);
                g.submit(Task::aiv(fill).output(&t))?;
                Ok(())
            });
            match built {
                Err(Error::Graph(
                    ref e @ GraphError::UnusableTensor {
                        task: 0,
                        arg: 0,
                        why: TensorProblem::NotItsAllocation { what: w, .. },
                    },
                )) => {
                    assert_eq!(w, what, "{executor:?}: {e}");
                    assert!(e.to_string().contains(&format!("whose {what}")), "{e}");
                }
                Err(other) => panic!("{executor:?} {what}: expected a named refusal, got {other:?}"),
                Ok(graph) => {
                    let prepared = dev.prepare(&graph, &RunConfig::default().with_executor(executor));
                    let victim = dev.tensor_from(&[4096], &[-1.0f32; 4096]).unwrap();
                    let outcome = prepared.and_then(|p| p.launch()).and_then(|r| r.wait());
                    let seen = victim.read::<f32>().unwrap();
                    let clobbered = seen.iter().filter(|&&v| v != -1.0).count();
                    panic!(
                        "{executor:?} {what}: accepted ({outcome:?}); {clobbered} of 4096 later elements overwritten"
                    );
                }
            }
        }
    }
    still_works(&dev, &_k);
}

/// Allocates a scope tensor, then submits a write of a hand-made ring view whose owner is
/// that allocation's record (ring 1, local 0: `TaskId(1 << 30)`) but whose address is the
/// tensor of scalar 1, which the run never names (scalar 0 names the func).
fn forge_ring_view(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let f = FuncId(a.s(0)? as u16);
    let victim = a.s(1)?;
    o.scope(|s| {
        let _mine = s.alloc::<f32>(&[64])?;
        let owner = pto::runtime::graph::TaskId(1 << 30);
        let b = BufferRef {
            device: 0,
            id: (1 << 62) | 1,
            placement: pto::runtime::graph::Placement::Ring { addr: GmAddr(victim), owner },
            bytes: 64 * 4,
            dtype: DType::F32,
        };
        s.submit(Task::aiv(f).output(&Tensor::whole(b, &[64])?))?;
        Ok(())
    })
}

/// A hand-made ring view naming a live allocation record but not that record's address is
/// refused by name on the device-side runtime (and as a foreign tensor on the host-built
/// graph); the tensor it pointed at is not written.
#[test]
fn a_hand_made_ring_view_with_a_live_owner_is_refused_by_name() {
    let (dev, k) = device();
    let fill = dev.register_kernel("fill7", CoreType::Aiv, k_fill7).unwrap();
    let p = dev.register_orchestration("forge_ring_view", forge_ring_view).unwrap();
    for rt in pto_testkit::RUNTIMES {
        let victim = dev.tensor_from(&[64], &[-1.0f32; 64]).unwrap();
        let args = OrchArgs::new().scalar(fill.0 as u64).scalar(victim.addr().0);
        let e = dev.run_program(&p, &args, &RunConfig::default().with_runtime(rt)).unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::Orch(OrchError::InvalidArgs)), "{rt}: {e}");
        let named = match rt {
            RuntimeKind::TensormapRing => "whose address",
            _ => "runtime-allocated tensor of another graph",
        };
        assert!(e.to_string().contains(named), "{rt}: {e}");
        let clobbered = victim.read::<f32>().unwrap().iter().filter(|&&v| v != -1.0).count();
        assert_eq!(clobbered, 0, "{rt}: {clobbered} of 64 elements of a tensor the run never named were overwritten");
    }
    still_works(&dev, &k);
}
