//! Native kernels (C++ in the native kernel ABI, `testkits/examples/kernels/`) on the simulator:
//! the examples' golden with them on both runtimes and both executors, the block and lane ids
//! they are given, the faults they are charged with, and the faithful cache model at their
//! boundary catching a missing write-back.

use parking_lot::Mutex;

use pto::board::{Board, SimA2a3};
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::host::{self, Timeouts};
use pto::runtime::orch::RuntimeKind;
use pto_sim::{CacheModel, Missing, SimError};
use pto_testkit::KernelChoice;
use pto_testkit::native::register_native;

/// The breakage switch is process-wide, and the faithful model's reports are per device: one
/// test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// (runtime, executor) pairs: the host-built graph on both executors, the device-side runtime
/// (which always dispatches from the AICPU).
const ROUTES: [(RuntimeKind, Executor); 3] = [
    (RuntimeKind::HostBuiltGraph, Executor::Legacy),
    (RuntimeKind::HostBuiltGraph, Executor::Resident),
    (RuntimeKind::TensormapRing, Executor::Auto),
];

#[test]
fn the_examples_with_native_kernels_match_their_golden_on_both_runtimes_and_executors() {
    let _s = SERIAL.lock();
    let (dev, k) = pto_testkit::setup_with(pto::open, KernelChoice::Native).unwrap();
    let workloads: [(&str, pto_testkit::Workload<pto::SelectedPlatform>); 5] = [
        ("vector", pto_testkit::vector),
        ("chain513", pto_testkit::chain513),
        ("mix", pto_testkit::mix),
        ("bgemm", pto_testkit::attention::bgemm),
        ("manual_scope", pto_testkit::manual_scope),
    ];
    for (name, w) in workloads {
        for (rt, ex) in ROUTES {
            let o = pto_testkit::executed(ex, || w(&dev, &k, rt))
                .unwrap_or_else(|e| panic!("{name} on {} / {ex}: {e}", rt.name()));
            assert!(o.checked > 0, "{name}");
            if rt == RuntimeKind::HostBuiltGraph && ex != Executor::Auto {
                assert_eq!(o.report.executor, ex, "{name}");
            }
        }
    }
    // The kernels the examples ran are the native ones: the registered sources are binaries.
    for name in ["add", "add_scalar", "mul", "mix_matmul", "mix_vec_half", "attn_tile_matmul", "attn_tile_accumulate"] {
        assert!(dev.func(name).is_some(), "{name} registered");
    }
}

/// One task of func scalar 0 over tensors x (arg 0) and y (arg 1), as scalar 2 says: 0 an AIV
/// task writing y; 1 an AIV task reading x, writing y; 2 a MIX task (AIC func scalar 3) reading
/// x, writing y. Scalar 1: its SPMD blocks.
fn orch_one(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y) = (a.t(0)?, a.t(1)?);
    let f = FuncId(a.s(0)? as u16);
    let t = match a.s(2)? {
        0 => Task::aiv(f).output(&y),
        1 => Task::aiv(f).input(&x).output(&y),
        _ => Task::mix(FuncId(a.s(3)? as u16), f).input(&x).output(&y),
    };
    o.submit(t.blocks(a.s(1)? as u32))?;
    Ok(())
}

/// What one task of native kernel `file` (AIV) gives on every route: the run, and y after
/// it (x is `n` fives, y `n` zeros).
fn run_one(file: &str, n: u32, shape: u64, blocks: u32) -> Vec<(String, Result<Vec<f32>, Error>)> {
    let dev = pto::open().unwrap();
    let f = register_native(&dev, file, CoreType::Aiv, file).unwrap();
    let aic = register_native(&dev, "nop", CoreType::Aic, "nop").unwrap();
    let p = dev.register_orchestration("one", orch_one).unwrap();
    ROUTES
        .iter()
        .map(|&(rt, ex)| {
            let x = dev.tensor_from(&[n], &vec![5.0f32; n as usize]).unwrap();
            let y = dev.alloc::<f32>(&[n]).unwrap();
            let args = OrchArgs::new()
                .tensor(x.tensor())
                .tensor(y.tensor())
                .scalar(f.0 as u64)
                .scalar(blocks as u64)
                .scalar(shape)
                .scalar(aic.0 as u64);
            let cfg = RunConfig::default().with_runtime(rt).with_executor(ex);
            let r = dev.run_program(&p, &args, &cfg).and_then(|_| y.read::<f32>());
            (format!("{} / {ex}", rt.name()), r)
        })
        .collect()
}

#[test]
fn spmd_blocks_and_mix_lanes_reach_the_native_kernel() {
    let _s = SERIAL.lock();
    // Element 16 k of y, per (block, lane) k = 2 block + lane; the rest stays 0.
    let lines = |v: &[f32]| v.iter().step_by(16).copied().collect::<Vec<f32>>();
    // Four AIV blocks: slot 2b is 400 + b; the odd slots (lane 1) are never written.
    for (route, r) in run_one("block_ids", 8 * 16, 1, 4) {
        let y = r.unwrap_or_else(|e| panic!("{route}: {e}"));
        assert_eq!(lines(&y), vec![400.0, 0.0, 401.0, 0.0, 402.0, 0.0, 403.0, 0.0], "{route}");
        assert_eq!(y.iter().filter(|&&v| v != 0.0).count(), 4, "{route}");
    }
    // Two MIX blocks: both AIV lanes of each, lane 1 told so (its 1000); the AIC does nothing.
    for (route, r) in run_one("block_ids", 4 * 16, 2, 2) {
        let y = r.unwrap_or_else(|e| panic!("{route}: {e}"));
        assert_eq!(lines(&y), vec![200.0, 1200.0, 201.0, 1201.0], "{route}");
    }
}

#[test]
fn a_native_kernels_error_code_and_stray_writes_are_its_fault() {
    let _s = SERIAL.lock();
    for (file, shape, says) in [
        ("fail7", 0, "native kernel `fail7` (libfail7.so): returned error code 7"),
        (
            "write_past_end",
            0,
            "native kernel `write_past_end` (libwrite_past_end.so): wrote outside the view of tensor argument 0 (byte 64 from its first element",
        ),
        (
            "write_input",
            1,
            "native kernel `write_input` (libwrite_input.so): wrote tensor argument 0, which the task passed read-only (byte 12 of its view",
        ),
    ] {
        for (route, r) in run_one(file, 16, shape, 1) {
            let e = match r {
                Err(Error::Device(e)) => e,
                other => panic!("{file} on {route}: expected the kernel's fault, got {other:?}"),
            };
            assert_eq!(
                e.code,
                ErrorCode::Device(pto::runtime::codes::DeviceFault::KernelFault),
                "{file} on {route}: {e}"
            );
            assert!(e.message.contains(says), "{file} on {route}: {}", e.message);
            assert_eq!(e.kernel.as_deref(), Some(file), "{file} on {route}: the kernel is named");
        }
    }
}

#[test]
fn a_native_kernel_that_cannot_load_is_an_error_naming_it() {
    let dev = pto::open().unwrap();
    let e = register_native(&dev, "nowhere", CoreType::Aiv, "does_not_exist").unwrap_err().to_string();
    assert!(e.contains("native kernel nowhere") && e.contains("libdoes_not_exist.so"), "{e}");
    // An object not built with pto_kernel.h (the C library): refused by name for its missing
    // ABI marker before anything in it is called, even when it exports a function named like
    // the kernel (`free`, which called as a kernel aborted the process).
    for name in ["k", "free"] {
        let src = pto::hal::KernelSource { name, core: CoreType::Aiv, function: None, binary: Some("libc.so.6") };
        // SAFETY: the object is refused before anything in it is called (what this checks);
        // loading the C library runs no initialiser that is not already run.
        let e = unsafe { dev.register_kernel_source(&src) }.unwrap_err().to_string();
        assert!(e.contains("does not define the ABI marker `pto_abi_version`"), "{e}");
        assert!(e.contains("refused before any call"), "{e}");
        assert!(dev.func(name).is_none(), "{name} was registered");
    }
    // A kit kernel's file name naming another directory is refused before anything loads.
    let e = register_native(&dev, "free", CoreType::Aiv, "../../libc").unwrap_err().to_string();
    assert!(e.contains("names no directory"), "{e}");
}

/// A device of the a2a3 board under the faithful cache model without random eviction.
fn faithful() -> host::Device<<SimA2a3 as Board>::Platform> {
    let raw = SimA2a3::open().unwrap();
    raw.set_cache_model(CacheModel::Faithful { seed: 7, evict_per_mille: 0 }).unwrap();
    host::Device::new_in_process(raw, Timeouts::new(2_000_000, 1_000_000, 30_000_000)).unwrap()
}

/// The faithful model at the native kernel boundary: what a native kernel changed is dirty in
/// its core's cache when it returns, so a runtime that signals FIN before writing it back is
/// caught, exactly as with a Rust kernel.
#[test]
fn a_fin_before_the_write_back_of_a_native_kernels_output_is_caught() {
    let _s = SERIAL.lock();
    let dev = faithful();
    let f = register_native(&dev, "add1", CoreType::Aiv, "add1").unwrap();
    let y = dev.alloc::<f32>(&[8, 16]).unwrap();
    let g = dev
        .build(|g| {
            for i in 0..8 {
                g.submit(Task::aiv(f).inout(&y.tensor().view(&[i, 0], &[1, 16])?))?;
            }
            Ok(())
        })
        .unwrap();
    let legacy = RunConfig::default().with_executor(Executor::Legacy);
    dev.run_with(&g, &legacy).unwrap();
    assert_eq!(y.read::<f32>().unwrap(), vec![1.0; 128]);
    let _b = breakage::activate(breakage::FIN_BEFORE_PUBLISH);
    let r = dev.run_with(&g, &legacy);
    let violation = |e: &Error| match e.platform_error::<SimError>() {
        Some(SimError::Coherence(v)) => Some(v.missing),
        _ => None,
    };
    let missing = match &r {
        Err(e @ Error::Device(d)) => violation(e).or_else(|| d.also.as_deref().and_then(violation)),
        Err(e) => violation(e),
        Ok(_) => None,
    };
    assert_eq!(missing, Some(Missing::WriteBackBeforeSignal), "{r:?}");
}
