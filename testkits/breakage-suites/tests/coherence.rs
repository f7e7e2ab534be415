//! The faithful cache model catches each class of coherence bug, with a diagnostic naming the
//! missing operation; the correct runtime passes the same runs. Also: the coherence contract
//! is a type, and what each contract emits per run is exactly the documented set.
//!
//! Breakage is process-wide, so every test here takes `SERIAL` first.

use parking_lot::Mutex;

use pto::board::{Board, SimA2a3, SimA5};
use pto::hal::{AicpuLaunch, AicpuStream, GmMemory, HostPlatform, Loader, Platform, ProgramKind, Stream};
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::host::{self, Timeouts};
use pto_sim::{CacheModel, Missing, SimAicpu, SimError};

mod scenes;
use scenes::{reuse_records, rows_graph};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> parking_lot::MutexGuard<'static, ()> {
    SERIAL.lock()
}

/// A device of board `B` with short budgets (a broken run ends in well under a second) and the
/// faithful cache model with no random eviction (every case is deterministic).
fn faithful<B: Board>() -> host::Device<B::Platform>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: FaithfulDevice,
{
    let raw = B::open().unwrap_or_else(|e| panic!("open: {e}"));
    raw.faithful(0);
    host::Device::new_in_process(raw, Timeouts::new(2_000_000, 1_000_000, 30_000_000)).unwrap()
}

trait FaithfulDevice {
    fn faithful(&self, evict_per_mille: u32);
}

impl<C: pto::hal::Contract> FaithfulDevice for pto_sim::SimDevice<C> {
    fn faithful(&self, evict_per_mille: u32) {
        self.set_cache_model(CacheModel::Faithful { seed: 7, evict_per_mille }).unwrap();
    }
}

/// The legacy executor: the tests of the AICPU's dispatch payloads, FIN and its cache
/// operations per dispatch name it (whatever `Auto` picks).
fn legacy() -> RunConfig {
    RunConfig::default().with_executor(pto::Executor::Legacy)
}

/// The run failed with a coherence violation whose text names `missing`, and the error
/// carries the violation as data (`SimError::Coherence`).
fn assert_caught<T: std::fmt::Debug>(r: Result<T, Error>, missing: Missing) {
    if let Err(e) = &r {
        match e.platform_error::<SimError>() {
            Some(SimError::Coherence(v)) => {
                assert_eq!(v.missing, missing, "{v}");
                assert_eq!(v.seed, 7, "{v}");
                assert!(!v.agent.is_empty() && v.line == v.addr & !63, "{v:?}");
            }
            other => panic!("expected a typed coherence violation ({missing:?}), got {other:?} in {e:?}"),
        }
    }
    // The violation is the platform's report of the program; when the runtime also latched
    // a fault (the broken run went on to fail), the violation rides along as its cause.
    let r = match r {
        Err(Error::Device(d)) if d.also.is_some() => Err(*d.also.unwrap()),
        other => other,
    };
    match r {
        Err(Error::Platform { kind: pto::hal::ErrorKind::DeviceFault, message, .. }) => {
            assert!(message.contains("coherence") || message.contains("faithful"), "{message}");
            assert!(message.contains(missing.describe()), "expected `{}` in: {message}", missing.describe());
            assert!(message.contains("seed 7"), "the report prints the seed: {message}");
        }
        other => panic!("expected a coherence violation ({missing:?}), got {other:?}"),
    }
}

#[test]
fn correct_runtime_passes_every_example_under_the_faithful_model() {
    let _s = serial();
    for evict in [0, 20, 200] {
        let (dev, k) = pto_testkit::setup(pto::open).unwrap();
        dev.platform()
            .set_cache_model(CacheModel::Faithful { seed: 11 + evict as u64, evict_per_mille: evict })
            .unwrap();
        for rt in pto_testkit::RUNTIMES {
            let on = |w: pto_testkit::Workload<pto::SelectedPlatform>, name: &str| {
                w(&dev, &k, rt).unwrap_or_else(|e| panic!("{name} on {}, evict {evict}: {e}", rt.name()));
            };
            on(pto_testkit::vector, "vector");
            on(pto_testkit::chain513, "chain513");
            on(pto_testkit::mix, "mix");
            on(pto_testkit::tiny_rings, "tiny_rings");
            on(pto_testkit::manual_scope, "manual_scope");
            for kind in pto_testkit::ShapeKind::ALL {
                let p = pto_testkit::build_shape(&dev, &k, kind, 64).unwrap_or_else(|e| panic!("{e}"));
                for _ in 0..2 {
                    p.run_checked(&dev, rt).unwrap_or_else(|e| panic!("{} evict {evict}: {e}", kind.name()));
                }
            }
        }
        assert_eq!(dev.platform().take_violations(), vec![]);
    }
}

/// Class 1: the AICPU reads host-DMA'd descriptor bytes without invalidating (a2a3 contract).
#[test]
fn stale_descriptor_after_host_dma_is_caught_on_a2a3_only() {
    let _s = serial();
    // Correct runtime: two runs on one slot pass.
    let dev = faithful::<SimA2a3>();
    let (_y, g) = rows_graph(&dev, 4);
    dev.run(&g).unwrap();
    dev.run(&g).unwrap();
    // Broken: the second run of the slot reads the first run's descriptor from a stale line.
    let dev = faithful::<SimA2a3>();
    let (_y, g) = rows_graph(&dev, 4);
    let _b = breakage::activate(breakage::SKIP_HOST_INVALIDATE);
    dev.run(&g).unwrap();
    let r = dev.run(&g);
    let v = dev.platform().take_violations();
    assert!(
        v.iter().any(|v| v.agent == "aicpu 0"
            && v.last_writer.starts_with("host")
            && v.missing == Missing::InvalidateAfterHostDma),
        "{v:?}"
    );
    match r {
        // The AICPU ran on the previous run's epoch: it may accept the cores' previous reports,
        // drive them, and release their gates with the old epoch, which a core of this run
        // never takes for its release (no early exit) — so the AICore program may not end and
        // the fence reports that instead of the program's coherence status.
        // (With a fault latched — the stale epoch's handshake timeout, a core's RELEASE_TIMEOUT —
        // the timeout rides along.)
        Err(Error::Timeout { what: "AICore program", .. }) => {}
        Err(Error::Device(d)) if matches!(d.also.as_deref(), Some(Error::Timeout { what: "AICore program", .. })) => {}
        r => assert_caught(r, Missing::InvalidateAfterHostDma),
    }
    // The same breakage is harmless under the a5 (host-coherent) contract.
    let dev = faithful::<SimA5>();
    let (_y, g) = rows_graph(&dev, 4);
    dev.run(&g).unwrap();
    dev.run(&g).unwrap();
}

/// Class 1, the first run of a pipeline slot: the reference invalidates only at the end of a
/// run, so a slot's first run reads whatever the AICPU cached before. pto-rt invalidates
/// before the first read.
#[test]
fn a_slots_first_run_is_covered_too() {
    let _s = serial();
    for broken in [false, true] {
        let dev = faithful::<SimA2a3>();
        let (_y, g) = rows_graph(&dev, 4);
        let _b = broken.then(|| breakage::activate(breakage::INVALIDATE_AT_END));
        // An earlier AICPU program read the memory that becomes slot 1's descriptor.
        fn warm(a: &SimAicpu<pto::hal::HostNonCoherent>, l: AicpuLaunch<'_>) -> i32 {
            let mut b = [0u8; 128];
            a.read(l.args, &mut b);
            0
        }
        type P = <SimA2a3 as Board>::Platform;
        P::install_aicpu_program(dev.platform(), "warm", warm).unwrap();
        let warm_handle = dev.platform().load_program(ProgramKind::Aicpu, "warm").unwrap();
        let (mut cpu, _core) = P::create_streams(dev.platform()).unwrap();
        cpu.launch_aicpu(warm_handle, dev.slot_descriptor(1).unwrap(), 1).unwrap();
        cpu.synchronize(5_000_000).unwrap();
        // Slot 0 runs; slot 1 gets its first run as the prepared successor.
        let first = dev.prepare(&g, &RunConfig::default()).unwrap().launch().unwrap();
        let second = dev.prepare(&g, &RunConfig::default()).unwrap();
        assert_eq!(second.slot(), 1);
        let second = second.launch().unwrap();
        first.wait().unwrap();
        if broken {
            // The model records the stale read. Which report the failed run carries depends
            // on timing: usually the violation itself (as `SimError::Coherence`); under heavy
            // host load a core's window timeout has been seen to be reported instead, with the
            // violation only in the model's record (seen once in a dozen loaded runs; the
            // attribution is not understood yet).
            let r = second.wait();
            let v = dev.platform().take_violations();
            assert!(v.iter().any(|v| v.missing == Missing::InvalidateAfterHostDma), "not caught: {v:?} / {r:?}");
            let carried = r.as_ref().err().and_then(|e| match e.platform_error::<SimError>() {
                Some(SimError::Coherence(v)) => Some(v.missing),
                _ => None,
            });
            match carried {
                Some(_) => assert_caught(r, Missing::InvalidateAfterHostDma),
                None => assert!(r.is_err(), "the broken run must fail"),
            }
        } else {
            second.wait().unwrap();
        }
    }
}

/// Blocks of the `half` kernel that have started in the current run.
static HALF_STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Class 2: two AICores write different halves of one line; both write back. Each block
/// waits (at most 5 s) until the other has started, so the two blocks run on two cores at
/// once: an executor is free to run both blocks of a task on one core in turn (the resident
/// one does when the second core is slow to wake), and then no line is shared.
#[test]
fn two_cores_writing_one_line_are_caught() {
    let _s = serial();
    fn half(k: &mut dyn KernelContext) {
        use std::sync::atomic::Ordering;
        HALF_STARTED.fetch_add(1, Ordering::AcqRel);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while HALF_STARTED.load(Ordering::Acquire) < 2 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let b = k.block_idx();
        let stride = k.scalar_arg(0) as u32;
        for j in 0..8 {
            k.set(0, &[b * stride + j], 1.0 + b as f32);
        }
    }
    for (stride, shared_line) in [(16u32, false), (8u32, true)] {
        let dev = faithful::<SimA2a3>();
        let f = dev.register_kernel("half", CoreType::Aiv, half).unwrap();
        let out = dev.alloc::<f32>(&[32]).unwrap();
        let g = dev
            .build(|g| g.submit(Task::aiv(f).output(&out.tensor()).scalar(stride as u64).blocks(2)).map(|_| ()))
            .unwrap();
        HALF_STARTED.store(0, std::sync::atomic::Ordering::Release);
        let r = dev.run(&g);
        assert_eq!(HALF_STARTED.load(std::sync::atomic::Ordering::Acquire), 2);
        if shared_line {
            assert_caught(r, Missing::WholeLineRule);
        } else {
            r.unwrap();
        }
    }
}

/// Class 3: an AICore's handshake report is never written back.
#[test]
fn unpublished_report_is_caught() {
    let _s = serial();
    let dev = faithful::<SimA2a3>();
    let (_y, g) = rows_graph(&dev, 2);
    dev.run(&g).unwrap();
    let _b = breakage::activate(breakage::SKIP_REPORT_PUBLISH);
    assert_caught(dev.run(&g), Missing::WriteBack);
    let v = dev.platform().take_violations();
    assert!(v.iter().any(|v| v.op == "program end with a dirty line" && v.agent.starts_with("core")), "{v:?}");
}

/// Class 4: FIN published before the kernel's output was written back.
#[test]
fn fin_before_write_back_is_caught() {
    let _s = serial();
    let dev = faithful::<SimA2a3>();
    let (y, g) = rows_graph(&dev, 8);
    dev.run_with(&g, &legacy()).unwrap();
    assert_eq!(y.read::<f32>().unwrap(), vec![1.0; 128]);
    let _b = breakage::activate(breakage::FIN_BEFORE_PUBLISH);
    assert_caught(dev.run_with(&g, &legacy()), Missing::WriteBackBeforeSignal);
}

/// Class 4 on the resident executor: a core releases its consumers (their fan-in counts, the
/// ready list) before it writes back the kernel's output (`FIN_BEFORE_PUBLISH` there), so the
/// next core of the chain reads or writes the row while the previous core's new values are
/// still only in its cache. Caught in 20 of 20 runs.
#[test]
fn resident_release_before_write_back_is_caught() {
    let _s = serial();
    let dev = faithful::<SimA2a3>();
    // AIV and AIC tasks in turn: each consumer runs on another core than its producer (a core
    // may take the consumers it released itself, which would hide the missing write-back in
    // its own program order).
    let y = dev.alloc::<f32>(&[1, 16]).unwrap();
    let g = scenes::chain_and_rows(&dev, &y, 8);
    let cfg = RunConfig::default().with_executor(pto::Executor::Resident);
    let r = dev.run_with(&g, &cfg).unwrap();
    assert_eq!(r.executor, pto::Executor::Resident);
    assert_eq!(y.read::<f32>().unwrap(), vec![8.0; 16]);
    let _b = breakage::activate(breakage::FIN_BEFORE_PUBLISH);
    // The breakage forces its interleaving (the producer writes back only after a consumer it
    // released completed), so it is caught in every run: the consumer's load of the row (the
    // producer never wrote it back: WriteBack) or its store beside the producer's dirty copy
    // (WholeLineRule) trips first. Either is the missing write-back before the release.
    for rep in 0..20 {
        let r = dev.run_with(&g, &cfg);
        let found = r.as_ref().err().and_then(|e| match e.platform_error::<SimError>() {
            Some(SimError::Coherence(v)) => Some(v.missing),
            _ => None,
        });
        let missing = found.unwrap_or_else(|| panic!("rep {rep}: expected a coherence violation, got {r:?}"));
        assert!(matches!(missing, Missing::WriteBack | Missing::WholeLineRule), "{missing:?}");
        assert_caught(r, missing);
    }
}

/// The resident executor's AICPU cache operations per run, by contract: the AICPU threads
/// dispatch nothing, so there is no payload to clean; a2a3 invalidates the descriptor's
/// configuration per thread and the graph image once, a5 nothing.
#[test]
fn resident_contract_decides_the_aicpu_cache_operations() {
    let _s = serial();
    fn per_run<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>() -> (u64, u64, u64) {
        let dev = pto::open_board::<B>().unwrap();
        let (_y, g) = rows_graph(&dev, 8);
        let cfg = RunConfig::default().with_executor(pto::Executor::Resident);
        dev.run_with(&g, &cfg).unwrap();
        let (i0, f0) = dev.platform().aicpu_cache_ops();
        let r = dev.run_with(&g, &cfg).unwrap();
        let (i1, f1) = dev.platform().aicpu_cache_ops();
        assert_eq!(r.executor, pto::Executor::Resident);
        (i1 - i0, f1 - f0, r.dispatched)
    }
    assert_eq!(per_run::<SimA5, _>(), (0, 0, 8));
    let threads = SimA2a3::TOPOLOGY.aicpu_threads as u64;
    assert_eq!(per_run::<SimA2a3, _>(), (threads + 1, 0, 8));
}

/// Class 5: an AICPU store (the dispatch payload) read by an AICore through a cached load
/// without the AICore invalidating first.
#[test]
fn cached_payload_read_without_invalidate_is_caught() {
    let _s = serial();
    let cfg = legacy().with_clusters(1).with_aicpu_threads(1);
    let dev = faithful::<SimA2a3>();
    let (_y, g) = rows_graph(&dev, 12);
    dev.run_with(&g, &cfg).unwrap();
    let _b = breakage::activate(breakage::SKIP_PAYLOAD_OBSERVE);
    assert_caught(dev.run_with(&g, &cfg), Missing::Invalidate);
}

/// Class 6: the reference's handshake line written by more than one agent through caches.
#[test]
fn shared_handshake_line_is_caught_and_ours_passes() {
    let _s = serial();
    let dev = faithful::<SimA2a3>();
    let (_y, g) = rows_graph(&dev, 2);
    dev.run(&g).unwrap();
    let _b = breakage::activate(breakage::SHARED_HANDSHAKE_LINE);
    assert_caught(dev.run(&g), Missing::WholeLineRule);
    let v = dev.platform().take_violations();
    assert!(v.iter().any(|v| v.agent.starts_with("aicpu") && v.last_writer.starts_with("core")), "{v:?}");
}

/// The contract is a type: an a5 build issues no AICPU cache maintenance per run; an a2a3
/// build issues exactly the documented set — one invalidate of the descriptor's configuration
/// per AICPU thread and one of the graph image, and one clean per dispatch payload.
#[test]
fn contract_decides_the_aicpu_cache_operations() {
    let _s = serial();
    fn per_run<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>() -> (u64, u64, u64) {
        let dev = pto::open_board::<B>().unwrap();
        let (_y, g) = rows_graph(&dev, 8);
        dev.run_with(&g, &legacy()).unwrap();
        let (i0, f0) = dev.platform().aicpu_cache_ops();
        let r = dev.run_with(&g, &legacy()).unwrap();
        let (i1, f1) = dev.platform().aicpu_cache_ops();
        (i1 - i0, f1 - f0, r.dispatched)
    }
    assert_eq!(per_run::<SimA5, _>(), (0, 0, 8));
    let threads = SimA2a3::TOPOLOGY.aicpu_threads as u64;
    // a2a3: the invalidates of edges 1 and 2, and one clean per dispatch payload (edge 7).
    assert_eq!(per_run::<SimA2a3, _>(), (threads + 1, 8, 8));
}

/// The cache model can be switched between runs, any number of times (a finished launch never
/// counts as active), and a switch while a launch runs is refused.
#[test]
fn cache_model_switches_between_runs() {
    let _s = serial();
    let dev = pto::open_board::<SimA2a3>().unwrap();
    let (_y, g) = rows_graph(&dev, 64);
    for round in 0..6 {
        for _ in 0..5 {
            dev.run(&g).unwrap();
        }
        let model = if round % 2 == 0 {
            CacheModel::Faithful { seed: round, evict_per_mille: 20 }
        } else {
            CacheModel::Coherent
        };
        dev.platform().set_cache_model(model).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_eq!(dev.platform().cache_model(), model);
    }
    let h = dev.prepare(&g, &RunConfig::default()).unwrap().launch().unwrap();
    let refused = dev.platform().set_cache_model(CacheModel::Coherent);
    let done = h.wait();
    done.unwrap();
    // The launch may have finished before the switch was tried; if not, it was refused.
    if let Err(e) = refused {
        assert!(e.to_string().contains("while a launch is active"), "{e}");
    }
}

/// Class 7, device-side runtime only: a core reads a task's argument record through the line
/// it cached for an earlier task whose record occupied the same ring heap bytes (the AICore
/// skipped its invalidate). The host-built graph never reuses record bytes within a run; the
/// device-side runtime does as soon as rings are reclaimed — and the faithful model catches it,
/// every time over five runs, with the orchestrator ahead of the cores (records wrap around the
/// heap) and behind them (each iteration's records rewrite the previous one's bytes).
#[test]
fn a_reused_argument_record_read_through_a_stale_line_is_caught() {
    let _s = serial();
    for pace in scenes::PACES {
        let run = |broken: bool| scenes::run_reused_records(&faithful::<SimA2a3>(), RunConfig::default(), pace, broken);
        let (ok, y, x_h) = run(false);
        ok.unwrap();
        assert_eq!(y, x_h.iter().map(|v| v + 2.0).collect::<Vec<f32>>());
        for rep in 0..5 {
            eprintln!("{pace:?}, broken run {rep}");
            let (broken, _, _) = run(true);
            assert_caught(broken, Missing::Invalidate);
        }
    }
}

/// A device of board `B` as [`faithful`] builds it, with the AICPU write policy `policy`.
fn faithful_with<B: Board>(policy: pto_sim::AicpuWritePolicy) -> host::Device<B::Platform>
where
    B::Platform:
        Platform + HostPlatform<Device = pto_sim::SimDevice<<B::Platform as pto::hal::DevicePlatform>::Contract>>,
{
    let dev = faithful::<B>();
    dev.platform().set_aicpu_writes(policy).unwrap();
    dev
}

/// Class 8, edge 7 under a write-back AICPU cache: the AICPU writes a dispatch payload and never
/// cleans it, so the core (which does invalidate) reads memory without the payload. Harmless
/// with a write-through AICPU cache, which is why the a2a3 AICPU's write policy, an open
/// question (`docs/cache-contract.md`), matters.
#[test]
fn unpublished_payload_is_caught_under_a_write_back_aicpu() {
    use pto_sim::AicpuWritePolicy::{WriteBack, WriteThrough};
    let _s = serial();
    let dev = faithful_with::<SimA2a3>(WriteBack);
    assert_eq!(dev.platform().aicpu_writes(), WriteBack);
    let (y, g) = rows_graph(&dev, 8);
    dev.run_with(&g, &legacy()).unwrap();
    assert_eq!(y.read::<f32>().unwrap(), vec![1.0; 128]);
    {
        let _b = breakage::activate(breakage::SKIP_PAYLOAD_CLEAN);
        assert_caught(dev.run_with(&g, &legacy()), Missing::AicpuClean);
        let v = dev.platform().take_violations();
        assert!(v.iter().any(|v| v.agent.starts_with("core") && v.last_writer.starts_with("aicpu")), "{v:?}");
        // The same breakage under write-through: nothing to catch.
        let dev = faithful_with::<SimA2a3>(WriteThrough);
        let (_y, g) = rows_graph(&dev, 8);
        dev.run_with(&g, &legacy()).unwrap();
        dev.run_with(&g, &legacy()).unwrap();
        // And under the a5 contract a write-back request acts as write-through.
        let dev = faithful::<SimA5>();
        assert_eq!(dev.platform().set_aicpu_writes(WriteBack).unwrap(), WriteThrough);
        let (_y, g) = rows_graph(&dev, 8);
        dev.run_with(&g, &legacy()).unwrap();
    }
}

/// Class 8, edge 13 under a write-back AICPU cache: the device-side orchestrator writes a
/// task's argument record into the ring heap and never cleans it.
#[test]
fn unpublished_argument_record_is_caught_under_a_write_back_aicpu() {
    let _s = serial();
    let run = |broken: bool| {
        let dev = faithful_with::<SimA2a3>(pto_sim::AicpuWritePolicy::WriteBack);
        let f = dev.register_kernel("add_scalar", CoreType::Aiv, pto_testkit::k_add_scalar).unwrap();
        let p = dev.register_orchestration("reuse_records", reuse_records).unwrap();
        let rows = 8u32;
        let x_h: Vec<f32> = (0..rows * 16).map(|i| i as f32).collect();
        let x = dev.tensor_from(&[rows, 16], &x_h).unwrap();
        let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
        let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).scalar(f.0 as u64);
        let cfg = RunConfig::default().with_runtime(RuntimeKind::TensormapRing);
        let _b = broken.then(|| breakage::activate(breakage::SKIP_RECORD_CLEAN));
        let r = dev.run_program(&p, &args, &cfg);
        (r, y.read::<f32>().ok(), x_h)
    };
    let (ok, y, x_h) = run(false);
    ok.unwrap();
    assert_eq!(y.unwrap(), x_h.iter().map(|v| v + 2.0).collect::<Vec<f32>>());
    let (broken, _, _) = run(true);
    assert_caught(broken, Missing::AicpuClean);
}

/// x[i][0] := 100 + i from the orchestration (`Orch::write`, an AICPU plain store on the
/// device-side runtime), then y_i = x_i + 1 on a core.
fn write_then_consume(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y) = (a.t(0)?, a.t(1)?);
    let f = FuncId(a.s(0)? as u16);
    for i in 0..x.shape[0] {
        o.write::<f32>(&x, &[i, 0], 100.0 + i as f32)?;
        o.submit(Task::aiv(f).input(&x.view(&[i, 0], &[1, 16])?).output(&y.view(&[i, 0], &[1, 16])?).scalar_f32(1.0))?;
    }
    Ok(())
}

/// Class 8, edge 14 under a write-back AICPU cache: the device-side orchestrator writes a
/// tensor element with a plain store and never cleans it; the consuming core reads memory.
#[test]
fn unpublished_element_write_is_caught_under_a_write_back_aicpu() {
    let _s = serial();
    let run = |broken: bool| {
        let dev = faithful_with::<SimA2a3>(pto_sim::AicpuWritePolicy::WriteBack);
        let f = dev.register_kernel("add_scalar", CoreType::Aiv, pto_testkit::k_add_scalar).unwrap();
        let p = dev.register_orchestration("write_then_consume", write_then_consume).unwrap();
        let rows = 4u32;
        let x = dev.tensor_from(&[rows, 16], &vec![0.0f32; (rows * 16) as usize]).unwrap();
        let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
        let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).scalar(f.0 as u64);
        let cfg = RunConfig::default().with_runtime(RuntimeKind::TensormapRing);
        let _b = broken.then(|| breakage::activate(breakage::SKIP_ELEMENT_CLEAN));
        let r = dev.run_program(&p, &args, &cfg);
        (r, y.read::<f32>().ok(), x.read::<f32>().ok())
    };
    let (ok, y, x) = run(false);
    ok.unwrap();
    let y = y.unwrap();
    let x = x.unwrap();
    for i in 0..4usize {
        assert_eq!(x[i * 16], 100.0 + i as f32, "the host reads the element the AICPU wrote");
        assert_eq!(y[i * 16], 101.0 + i as f32);
        assert_eq!(y[i * 16 + 1], 1.0);
    }
    let (broken, _, _) = run(true);
    assert_caught(broken, Missing::AicpuClean);
}

/// The AICPU cache operations one run issues, per board contract and runtime, printed (the
/// benchmark-style figure for the publication edges 7, 13, 14): `cargo test --test coherence
/// aicpu_cache_ops_per_run -- --nocapture`.
#[test]
fn aicpu_cache_ops_per_run() {
    let _s = serial();
    fn per_run<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>(rt: RuntimeKind) -> (u64, u64, u64, u64) {
        let dev = pto::open_board::<B>().unwrap();
        let f = dev.register_kernel("add_scalar", CoreType::Aiv, pto_testkit::k_add_scalar).unwrap();
        let p = dev.register_orchestration("reuse_records", reuse_records).unwrap();
        let rows = 16u32;
        let x = dev.tensor_from(&[rows, 16], &vec![1.0f32; (rows * 16) as usize]).unwrap();
        let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
        let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).scalar(f.0 as u64);
        let cfg = legacy().with_runtime(rt);
        dev.run_program(&p, &args, &cfg).unwrap();
        let (i0, f0) = dev.platform().aicpu_cache_ops();
        let r = dev.run_program(&p, &args, &cfg).unwrap();
        let (i1, f1) = dev.platform().aicpu_cache_ops();
        (i1 - i0, f1 - f0, r.tasks, r.dispatched)
    }
    let threads = SimA2a3::TOPOLOGY.aicpu_threads as u64;
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        let (inv, clean, tasks, dispatched) = per_run::<SimA2a3, _>(rt);
        println!(
            "aicpu cache ops per run: board=sim-a2a3 runtime={} tasks={tasks} dispatched={dispatched} invalidate_range={inv} flush_range={clean}",
            rt.name()
        );
        assert_eq!(inv, threads + 1);
        let records = if rt == RuntimeKind::TensormapRing { tasks } else { 0 };
        assert_eq!(
            clean,
            dispatched + records,
            "one clean per payload, plus one per record on the device-side runtime"
        );
        let (inv, clean, tasks, dispatched) = per_run::<SimA5, _>(rt);
        println!(
            "aicpu cache ops per run: board=sim-a5   runtime={} tasks={tasks} dispatched={dispatched} invalidate_range={inv} flush_range={clean}",
            rt.name()
        );
        assert_eq!((inv, clean), (0, 0));
    }
}

/// A device with short budgets: watchdog 100 ms, exit 100 ms (so a core waits 300 ms at most
/// before it escalates), host stream budget `stream_us`.
fn short_budgets<B: Board>(stream_us: u64) -> host::Device<B::Platform>
where
    B::Platform: Platform,
{
    let raw = B::open().unwrap_or_else(|e| panic!("open: {e}"));
    host::Device::new_in_process(raw, Timeouts::new(100_000, 100_000, stream_us)).unwrap()
}

/// The teardown gate has no early exit. Every AICPU thread stalls in retirement after its
/// cores acknowledged EXIT and before it closes and releases them (a stuck AICPU thread that
/// still owns its cores). A core's gate wait outlasts its budget: instead of leaving (which
/// would let the next program on its stream start while this run's AICPU can still write its
/// registers) it latches RELEASE_TIMEOUT at site `Gate`, naming itself, and keeps waiting. Here
/// the stall ends once a fault is latched, the AICPU releases every core, and the run ends with
/// that code; nothing was left unreleased, so the device stays usable.
#[test]
fn a_stuck_aicpu_thread_ends_the_run_with_release_timeout_not_an_early_exit() {
    let _s = serial();
    let dev = short_budgets::<SimA2a3>(20_000_000);
    let (y, g) = rows_graph(&dev, 4);
    dev.run(&g).unwrap();
    let r = {
        let _b = breakage::activate(breakage::STALL_RETIRE);
        dev.run(&g)
    };
    match r {
        Err(Error::Device(d)) => {
            assert_eq!(d.code.name(), "RELEASE_TIMEOUT", "{d}");
            assert_eq!(d.code.value(), 206);
            assert_eq!(d.site, pto::runtime::codes::Site::Gate, "{d}");
            assert!(d.core.is_some(), "the waiting core is named: {d}");
            assert!(d.also.is_none(), "no core left early with a status of its own: {d}");
        }
        other => panic!("expected RELEASE_TIMEOUT, got {other:?}"),
    }
    // Every core was released by its AICPU (none left on its own): the device is usable.
    let report = dev.run(&g).unwrap();
    assert_eq!(report.released, report.cores);
    assert_eq!(y.read::<f32>().unwrap(), vec![3.0; 64]);
}

/// Same, with the AICPU thread stuck past the host's fence: the run still ends with the named
/// code (the latch is the report, the fence's timeout rides along), and the device is marked
/// unusable — no core was released early.
#[test]
fn an_aicpu_thread_stuck_past_the_fence_reports_release_timeout_and_the_device_is_unusable() {
    let _s = serial();
    // Core budget 300 ms; the stall lasts 4 × 300 ms, longer than the host's 1 s fence.
    let dev = short_budgets::<SimA2a3>(1_000_000);
    let (_y, g) = rows_graph(&dev, 4);
    dev.run(&g).unwrap();
    let r = {
        let _b = breakage::activate(breakage::STALL_RETIRE_LONG);
        let r = dev.run(&g);
        // Let the stalled threads finish before the switch goes off (they check it once).
        std::thread::sleep(std::time::Duration::from_millis(400));
        r
    };
    match r {
        Err(Error::Device(d)) => {
            assert_eq!(d.code.name(), "RELEASE_TIMEOUT", "{d}");
            assert_eq!(d.site, pto::runtime::codes::Site::Gate, "{d}");
            assert!(matches!(d.also.as_deref(), Some(Error::Timeout { .. })), "the fence timed out: {d}");
        }
        other => panic!("expected RELEASE_TIMEOUT, got {other:?}"),
    }
    assert!(matches!(dev.run(&g), Err(Error::Unusable(_))));
}

/// The args dump keeps the contract too: a dumping a5 run issues no AICPU cache operation on
/// either executor (its AICPU is coherent with the cores' write-backs and the host's DMA),
/// whatever it captures; a dumping a2a3 run does invalidate (the captured views and the
/// argument records, on the threads that read them).
#[test]
fn the_args_dump_keeps_the_contract() {
    let _s = serial();
    fn per_run<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>(executor: pto::Executor) -> (u64, u64) {
        let dev = pto::open_board::<B>().unwrap();
        let (_y, g) = rows_graph(&dev, 8);
        let dir = std::env::temp_dir().join(format!("pto-coherence-dump-{}-{executor}", std::process::id()));
        let cfg = RunConfig::default()
            .with_executor(executor)
            .with_dump(Some(pto::dump::DumpLevel::Full))
            .with_dump_dir(&dir);
        dev.run_with(&g, &cfg).unwrap();
        let (i0, f0) = dev.platform().aicpu_cache_ops();
        let r = dev.run_with(&g, &cfg).unwrap();
        let (i1, f1) = dev.platform().aicpu_cache_ops();
        assert_eq!(r.executor, executor);
        assert!(r.dump.is_some_and(|d| d.payload_bytes > 0), "the run dumped");
        let _ = std::fs::remove_dir_all(&dir);
        (i1 - i0, f1 - f0)
    }
    for executor in [pto::Executor::Legacy, pto::Executor::Resident] {
        assert_eq!(per_run::<SimA5, _>(executor), (0, 0), "{executor}");
        let (invalidates, _) = per_run::<SimA2a3, _>(executor);
        assert!(invalidates > SimA2a3::TOPOLOGY.aicpu_threads as u64 + 1, "{executor}: {invalidates}");
    }
}

/// Write 5.0 over every element of tensor 0, then fault.
fn k_write_then_fault(k: &mut dyn KernelContext) {
    let n = k.load::<f32>(0).len();
    k.store(0, &vec![5.0f32; n]);
    panic!("deliberate fault after writing");
}

/// One task over one 64-byte row whose kernel writes the row and then faults, on `executor`:
/// the run's error and the host's read-back of the row afterwards.
fn write_then_fault(
    dev: &host::Device<<SimA2a3 as Board>::Platform>,
    executor: pto::Executor,
) -> (Error, Result<Vec<f32>, Error>) {
    let f = dev
        .func("write_then_fault")
        .unwrap_or_else(|| dev.register_kernel("write_then_fault", CoreType::Aiv, k_write_then_fault).unwrap());
    let y = dev.alloc::<f32>(&[1, 16]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(f).inout(&y.tensor())).map(|_| ())).unwrap();
    let e = dev.run_with(&g, &RunConfig::default().with_executor(executor)).expect_err("the kernel faults");
    (e, y.read::<f32>())
}

/// A kernel that faults after writing its output: on both executors the fault exit writes
/// back what the core wrote before it reports, so the run's error is the kernel's fault alone
/// (no coherence violation rides along) and the host reads the row the kernel left — 20 times
/// each under the faithful model on a2a3.
#[test]
fn a_faulting_kernels_writes_are_written_back_on_every_executor() {
    let _s = serial();
    let dev = faithful::<SimA2a3>();
    for executor in [pto::Executor::Legacy, pto::Executor::Resident] {
        for rep in 0..20 {
            let (e, read) = write_then_fault(&dev, executor);
            match &e {
                Error::Device(d) => {
                    assert_eq!(d.code, ErrorCode::Device(pto::runtime::codes::DeviceFault::KernelFault), "{e}");
                    assert!(d.also.is_none(), "{executor:?} rep {rep}: a violation rides along: {e:?}");
                }
                other => panic!("{executor:?} rep {rep}: expected the kernel's fault, got {other:?}"),
            }
            let read = read.unwrap_or_else(|e| panic!("{executor:?} rep {rep}: the read-back failed: {e}"));
            assert_eq!(read, vec![5.0; 16], "{executor:?} rep {rep}");
        }
    }
}

/// The broken variant (`FAULT_EXIT_SKIPS_PUBLISH`: the fault exit leaves the kernel's lines
/// dirty in the core's cache) is caught every time on both executors: the run or the host's
/// read-back reports the missing write-back.
#[test]
fn reproducer_fault_exit_without_write_back_is_caught_every_time() {
    let _s = serial();
    let dev = faithful::<SimA2a3>();
    let _b = breakage::activate(breakage::FAULT_EXIT_SKIPS_PUBLISH);
    for executor in [pto::Executor::Legacy, pto::Executor::Resident] {
        for rep in 0..20 {
            let (e, read) = write_then_fault(&dev, executor);
            let violation = match (&e, &read) {
                (Error::Device(d), _) if d.also.is_some() => d.also.as_deref(),
                (_, Err(r)) => Some(r),
                _ => None,
            };
            let v = violation
                .and_then(|v| match v.platform_error::<SimError>() {
                    Some(SimError::Coherence(v)) => Some(v.missing),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{executor:?} rep {rep}: not caught: run {e:?}, read {read:?}"));
            assert!(matches!(v, Missing::WriteBack | Missing::WriteBackBeforeSignal), "{executor:?}: {v:?}");
        }
    }
}
