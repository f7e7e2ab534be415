//! Recorded runs of the chip boards (`pto_boards::A2a3`, `pto_boards::A5`, opened by
//! `pto::open_chip_board`) over the stand-in for the vendor runtime: the `vector` workload end
//! to end as far as the host is concerned, the call sequence it makes, and injected vendor
//! failures surfacing as the board's error with nothing left allocated.
//!
//! Where the run stops: the stand-in executes no device program, so after both launches
//! complete (their events) the run's completion record in the launch descriptor — written on a
//! chip by the AICPU and AICore programs — is empty. The host reads it back, asks both streams
//! for their status (`aclrtSynchronizeStreamWithTimeout`), and reports the run as not having
//! completed (`Error::Unusable`, naming the tasks, threads and cores it expected). That is the
//! first point the stand-in cannot satisfy honestly; every call up to it is asserted.

use std::collections::BTreeMap;
use std::sync::Once;

use parking_lot::Mutex;
use pto::board::Board;
use pto_cann_stub::{Call, Stub, parse};
use pto_hal::{CoreType, KernelFn, KernelSource};
use pto_runtime::host::{Device, Error};
use pto_runtime::orch::RuntimeKind;

/// A chip board: its platform is the vendor-runtime host half.
trait ChipBoard: Board<Platform = CannHost> {}
impl<B: Board<Platform = CannHost>> ChipBoard for B {}
use pto_aarch64::cann::CannHost;
use pto_testkit::{Failure, Kernels, Programs};

/// The stand-in's state is process-wide: the tests take turns.
static TURN: Mutex<()> = Mutex::new(());
static SETUP: Once = Once::new();

/// The orchestrations of the stand-in AICPU image's program table, in table order.
const ORCHESTRATIONS: [&str; 6] = ["vector", "chain513", "mix", "dispatch_shape", "tiny_rings", "manual_scope"];
/// The kernels, in func-id order (`pto_testkit::f`).
const KERNELS: [(&str, CoreType); 9] = [
    ("add", CoreType::Aiv),
    ("mul", CoreType::Aiv),
    ("add_scalar", CoreType::Aiv),
    ("inc0", CoreType::Aiv),
    ("fill1", CoreType::Aiv),
    ("accumulate", CoreType::Aiv),
    ("add1", CoreType::Aiv),
    ("mix_matmul", CoreType::Aic),
    ("mix_vec_half", CoreType::Aiv),
];

/// Where this test process writes its stand-in device images: under cargo's scratch
/// directory for integration tests (inside `target/`, gone with `cargo clean`), one directory
/// per process so two runs of the suite never read each other's half-written files.
fn dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pto-cann-stub-{}", std::process::id()))
}

/// Stand-in device images: files whose bytes name the symbols they hold (the stand-in looks
/// names up in them), and the environment the chip boards read. Loads the vendor runtime
/// (the stand-in) once, checking `aclInit` is its first call.
fn setup() -> Stub {
    SETUP.call_once(|| {
        let d = dir();
        std::fs::create_dir_all(&d).expect("temp dir");
        let image = |name: &str, symbols: &[&str]| {
            let mut bytes = b"\x7fELF stand-in\0".to_vec();
            for s in symbols {
                bytes.extend_from_slice(s.as_bytes());
                bytes.push(0);
            }
            let p = d.join(name);
            std::fs::write(&p, bytes).expect("write a stand-in image");
            p.display().to_string()
        };
        let aicpu = image("libpto_device.so", &["pto_hbg_aicpu", "pto_trb_aicpu"]);
        let aicore = image("pto_aicore.o", &["pto_legacy_aicore"]);
        let kernels: Vec<&str> = KERNELS.iter().map(|k| k.0).collect();
        image("kernels.o", &kernels);
        // SAFETY: set once, before any device is opened, by the test holding the turn that
        // every test of this binary takes before anything else; nothing else in this process
        // reads the environment concurrently.
        unsafe {
            std::env::set_var("PTO_ASCENDCL_LIBRARY", pto_cann_stub::LIBRARY);
            std::env::set_var("PTO_DEVICE_LIBRARY", aicpu);
            std::env::set_var("PTO_AICORE_BINARY", aicore);
            std::env::set_var("PTO_DEVICE_PROGRAMS", ORCHESTRATIONS.join(","));
        }
        let rt = pto_aarch64::cann::VendorRuntime::get().expect("the stand-in loads");
        assert_eq!(rt.path(), pto_cann_stub::LIBRARY);
        let first = parse(&Stub::open().log());
        assert_eq!(first.first().map(|c| c.name.as_str()), Some("aclInit"), "aclInit comes first: {first:?}");
    });
    let stub = Stub::open();
    stub.reset();
    stub
}

/// Open board `B`, give it register windows, register the kernels (from their binary) and
/// the orchestrations, and run `vector` on the host-built graph route.
fn run_vector<B: ChipBoard>(stub: &Stub) -> (Result<(), Failure>, Vec<Call>) {
    let result = (|| {
        let dev = pto::open_chip_board::<B>()?;
        let workers = B::TOPOLOGY.workers() as u64;
        let windows: Vec<u64> = (0..workers).map(|i| 0x3000_0000 + i * 0x1000).collect();
        dev.platform().set_register_windows(&windows).map_err(|e| Error::platform("register windows", e))?;
        let k = register(&dev)?;
        pto_testkit::vector(&dev, &k, RuntimeKind::HostBuiltGraph).map(|_| ())
    })();
    (result, parse(&stub.log()))
}

fn register<P: pto_hal::HostPlatform>(dev: &Device<P>) -> Result<Kernels, Error> {
    let bin = dir().join("kernels.o").display().to_string();
    let mut ids = Vec::new();
    for (name, core) in KERNELS {
        // SAFETY: `bin` is this test's kernel object, built for the chip from the test's own
        // sources; the stand-in runtime records the calls and runs none of its code.
        ids.push(unsafe {
            dev.register_kernel_source(&KernelSource { name, core, function: None::<KernelFn>, binary: Some(&bin) })
        }?);
    }
    let orch = |name: &str, f| dev.register_orchestration(name, f);
    Ok(Kernels {
        add: ids[0],
        mul: ids[1],
        add_scalar: ids[2],
        inc0: ids[3],
        fill1: ids[4],
        accumulate: ids[5],
        add1: ids[6],
        matmul: ids[7],
        vec_half: ids[8],
        programs: Programs {
            vector: orch("vector", pto_testkit::orch_vector)?,
            chain513: orch("chain513", pto_testkit::orch_chain513)?,
            mix: orch("mix", pto_testkit::orch_mix)?,
            shape: orch("dispatch_shape", pto_testkit::orch_shape)?,
            tiny_rings: orch("tiny_rings", pto_testkit::orch_tiny_rings)?,
            manual_scope: orch("manual_scope", pto_testkit::orch_manual_scope)?,
        },
    })
}

/// Every `aclrtMalloc` is matched by one `aclrtFree` of its pointer, and the stand-in holds
/// nothing (no allocation, stream, event or binary) once the device is gone.
fn assert_nothing_left(calls: &[Call], stub: &Stub) {
    let mut live: BTreeMap<String, usize> = BTreeMap::new();
    for c in calls {
        match (c.name.as_str(), c.code) {
            ("aclrtMalloc", 0) => *live.entry(c.arg("ptr").expect("ptr").to_string()).or_default() += 1,
            ("aclrtFree", 0) => {
                let p = c.arg("ptr").expect("ptr");
                let n = live.get_mut(p).unwrap_or_else(|| panic!("aclrtFree of {p}, never allocated"));
                *n -= 1;
                if *n == 0 {
                    live.remove(p);
                }
            }
            _ => {}
        }
    }
    assert!(live.is_empty(), "allocations never freed: {live:?}");
    assert_eq!(stub.live(), 0, "the stand-in still holds objects");
    assert_eq!(calls.last().map(|c| c.name.as_str()), Some("aclrtResetDevice"), "the device is reset last");
}

/// The index of the first call at or after `from` that `pick` accepts, or a panic naming it.
fn next(calls: &[Call], from: usize, what: &str, pick: impl Fn(&Call) -> bool) -> usize {
    calls[from..]
        .iter()
        .position(pick)
        .map(|i| from + i)
        .unwrap_or_else(|| panic!("no {what} after call {from}: {:#?}", &calls[from..]))
}

fn hex_le(bytes: &str, at: usize, len: usize) -> u64 {
    let mut v = 0u64;
    for i in (0..len).rev() {
        v = (v << 8) | u64::from_str_radix(&bytes[2 * (at + i)..2 * (at + i) + 2], 16).expect("hex");
    }
    v
}

fn ptr(c: &Call, key: &str) -> u64 {
    u64::from_str_radix(c.arg(key).expect("pointer").trim_start_matches("0x"), 16).expect("hex pointer")
}

/// The recorded run of `vector` on board `B`: the sequence up to the point the stand-in
/// cannot satisfy, and teardown.
fn vector_is_recorded<B: ChipBoard>() {
    let _turn = TURN.lock();
    let stub = setup();
    let (result, calls) = run_vector::<B>(&stub);
    let topo = B::TOPOLOGY;

    // Where it stops: the completion record is empty (no device program ran).
    match &result {
        Err(Failure::Run(Error::Unusable(why))) => {
            assert!(why.contains("ended with 0/"), "{why}");
            assert!(why.contains(&format!("0/{} threads", topo.aicpu_threads)), "{why}");
            assert!(why.contains(&format!("0/{} cores released", topo.workers())), "{why}");
        }
        other => panic!("expected the run to stop at its empty completion record, got {other:?}"),
    }

    // Opening: device, the two images, the runtime's three programs, two streams.
    let i = next(&calls, 0, "aclrtSetDevice", |c| c.name == "aclrtSetDevice" && c.arg("device") == Some("0"));
    assert_eq!(i, 0, "the device is selected first: {:?}", calls[0]);
    let i = next(&calls, i, "the AICPU library", |c| {
        c.name == "aclrtBinaryLoadFromData" && c.arg("numOpt") == Some("1") && c.arg("cpuKernelMode") == Some("2")
    });
    let i = next(&calls, i, "the AICore binary", |c| {
        c.name == "aclrtBinaryLoadFromFile" && c.arg("path").is_some_and(|p| p.ends_with("pto_aicore.o"))
    });
    let i = next(&calls, i, "pto_hbg_aicpu", |c| {
        c.name == "aclrtRegisterCpuFunc"
            && c.arg("funcName") == Some("pto_hbg_aicpu")
            && c.arg("kernelName") == Some("pto_hbg_aicpu")
    });
    let i = next(&calls, i, "pto_trb_aicpu", |c| {
        c.name == "aclrtRegisterCpuFunc" && c.arg("funcName") == Some("pto_trb_aicpu")
    });
    let i = next(&calls, i, "pto_legacy_aicore", |c| {
        c.name == "aclrtBinaryGetFunction" && c.arg("name") == Some("pto_legacy_aicore")
    });
    let i = next(&calls, i, "stream 1", |c| c.name == "aclrtCreateStream");
    let cpu_stream = calls[i].arg("stream").expect("stream").to_string();
    let i = next(&calls, i + 1, "stream 2", |c| c.name == "aclrtCreateStream");
    let core_stream = calls[i].arg("stream").expect("stream").to_string();
    assert_ne!(cpu_stream, core_stream, "two distinct streams");

    // The register-window table, then every kernel by its device entry for its core type.
    let i = next(&calls, i, "the window table", |c| {
        c.name == "aclrtMalloc" && c.arg("size") == Some(&*format!("{}", topo.workers() * 8))
    });
    let table = ptr(&calls[i], "ptr");
    let mut j = next(&calls, i, "the kernels' binary", |c| {
        c.name == "aclrtBinaryLoadFromFile" && c.arg("path").is_some_and(|p| p.ends_with("kernels.o"))
    });
    for (name, core) in KERNELS {
        j = next(&calls, j, name, |c| c.name == "aclrtBinaryGetFunction" && c.arg("name") == Some(name));
        j = next(&calls, j, "its entry", |c| c.name == "aclrtGetFunctionAddr");
        assert_ne!(calls[j].arg(if core == CoreType::Aic { "aic" } else { "aiv" }), Some("(nil)"));
    }

    // The launches: AICore program first on its stream, then the AICPU program on the other,
    // each followed by its completion event on the same stream.
    let l1 = next(&calls, j, "the AICore launch", |c| c.name == "aclrtLaunchKernelWithHostArgs");
    let core = &calls[l1];
    assert_eq!(core.arg("func"), Some("pto_legacy_aicore"));
    assert_eq!(core.arg("stream"), Some(&*core_stream));
    assert_eq!(core.arg("blockDim"), Some(&*topo.clusters.to_string()));
    assert_eq!((core.arg("cfg"), core.arg("placeHolders")), (Some("null"), Some("0")));
    let args = core.arg("args").expect("args");
    assert_eq!(args.len(), 16, "the AICore argument is the descriptor's 8-byte address");
    let desc = hex_le(args, 0, 8);
    let e1 = next(&calls, l1, "the AICore event", |c| c.name == "aclrtRecordEvent");
    assert_eq!(calls[e1].arg("stream"), Some(&*core_stream));
    let l2 = next(&calls, e1, "the AICPU launch", |c| c.name == "aclrtLaunchKernelWithHostArgs");
    let cpu = &calls[l2];
    assert_eq!(cpu.arg("func"), Some("pto_hbg_aicpu"));
    assert_eq!(cpu.arg("stream"), Some(&*cpu_stream));
    assert_eq!(cpu.arg("blockDim"), Some(&*topo.aicpu_threads.to_string()));
    let block = cpu.arg("args").expect("args");
    assert_eq!(block.len(), 2 * 48, "the AICPU argument is the 48-byte launch block");
    assert_eq!(hex_le(block, 0, 4), u32::from_le_bytes(*b"PTOL") as u64, "magic");
    assert_eq!(hex_le(block, 4, 4), 1, "version");
    assert_eq!(hex_le(block, 8, 8), desc, "the same descriptor");
    let (gm_base, gm_len) = (hex_le(block, 16, 8), hex_le(block, 24, 8));
    assert!(gm_base <= desc && desc < gm_base + gm_len, "GM covers the descriptor");
    let mut live = BTreeMap::new();
    for c in &calls[..l2] {
        match (c.name.as_str(), c.code) {
            ("aclrtMalloc", 0) => {
                live.insert(ptr(c, "ptr"), c.arg("size").and_then(|n| n.parse::<u64>().ok()).expect("size"));
            }
            ("aclrtFree", 0) => {
                live.remove(&ptr(c, "ptr"));
            }
            _ => {}
        }
    }
    let lo = *live.keys().next().expect("allocations");
    let hi = live.iter().map(|(b, n)| b + n).max().expect("allocations");
    assert_eq!((gm_base, gm_len), (lo, hi - lo), "GM is the span of the device's live allocations");
    assert_eq!(hex_le(block, 32, 8), table, "the window table");
    assert_eq!(hex_le(block, 40, 4), topo.workers() as u64, "its entries");
    let e2 = next(&calls, l2, "the AICPU event", |c| c.name == "aclrtRecordEvent");
    assert_eq!(calls[e2].arg("stream"), Some(&*cpu_stream));
    assert_eq!(calls[l1..l2].iter().filter(|c| c.name == "aclrtLaunchKernelWithHostArgs").count(), 1);

    // The fence: both events complete, the descriptor read back, both streams synchronised.
    let q = next(&calls, e2, "an event query", |c| c.name == "aclrtQueryEventStatus" && c.arg("status") == Some("1"));
    let r = next(&calls, q, "the descriptor read", |c| {
        c.name == "aclrtMemcpy" && c.arg("kind") == Some("2") && ptr(c, "src") == desc
    });
    let s1 = next(&calls, r, "AICPU synchronize", |c| {
        c.name == "aclrtSynchronizeStreamWithTimeout" && c.arg("stream") == Some(&*cpu_stream)
    });
    next(&calls, s1, "AICore synchronize", |c| {
        c.name == "aclrtSynchronizeStreamWithTimeout" && c.arg("stream") == Some(&*core_stream)
    });
    assert!(calls.iter().all(|c| c.code == 0), "no call failed: {:?}", calls.iter().find(|c| c.code != 0));

    // Teardown: streams destroyed, the binaries unloaded, the device reset, nothing left.
    let d = next(&calls, s1, "stream teardown", |c| c.name == "aclrtDestroyStream");
    next(&calls, d + 1, "the other stream", |c| c.name == "aclrtDestroyStream");
    assert_eq!(calls.iter().filter(|c| c.name == "aclrtBinaryUnLoad").count(), 3, "AICPU, AICore and kernel binaries");
    assert_nothing_left(&calls, &stub);
}

/// An injected vendor failure: the board reports it naming the function and the code, and
/// nothing is left allocated once the device is gone.
fn failure_is_reported<B: ChipBoard>(function: &str, nth: i32, code: i32, says: &str) {
    let _turn = TURN.lock();
    let stub = setup();
    stub.fail(function, nth, code);
    let (result, calls) = run_vector::<B>(&stub);
    let err = match result {
        Err(e) => e.to_string(),
        Ok(()) => panic!("the injected {function} failure was not reported"),
    };
    assert!(err.contains(function) && err.contains(&code.to_string()) && err.contains(says), "{err}");
    let failed: Vec<&Call> = calls.iter().filter(|c| c.injected).collect();
    assert_eq!(failed.len(), 1, "exactly the injected call failed: {failed:?}");
    assert_eq!(failed[0].name, function);
    assert_nothing_left(&calls, &stub);
}

#[test]
fn a2a3_runs_vector_as_far_as_the_host_goes() {
    vector_is_recorded::<pto_boards::A2a3>();
}

#[test]
fn a5_runs_vector_as_far_as_the_host_goes() {
    vector_is_recorded::<pto_boards::A5>();
}

#[test]
fn a2a3_failed_launch_is_the_boards_error() {
    failure_is_reported::<pto_boards::A2a3>("aclrtLaunchKernelWithHostArgs", 1, 507_000, "AICore launch");
}

#[test]
fn a5_failed_launch_is_the_boards_error() {
    failure_is_reported::<pto_boards::A5>("aclrtLaunchKernelWithHostArgs", 1, 507_000, "AICore launch");
}

#[test]
fn a2a3_failed_synchronize_is_the_boards_error() {
    failure_is_reported::<pto_boards::A2a3>("aclrtSynchronizeStreamWithTimeout", 1, 507_018, "device fault");
}

#[test]
fn a5_failed_synchronize_is_the_boards_error() {
    failure_is_reported::<pto_boards::A5>("aclrtSynchronizeStreamWithTimeout", 1, 507_015, "device fault");
}

#[test]
fn a_program_missing_from_the_images_is_named() {
    let _turn = TURN.lock();
    let stub = setup();
    // The AICore binary does not hold the runtime's AICore program under this name.
    stub.fail("aclrtBinaryGetFunction", 1, 507_027);
    let err = pto::open_chip_board::<pto_boards::A2a3>().map(|_| ()).expect_err("the lookup failed");
    let err = err.to_string();
    assert!(err.contains("pto_legacy_aicore") && err.contains("507027"), "{err}");
    assert_nothing_left(&parse(&stub.log()), &stub);
}
