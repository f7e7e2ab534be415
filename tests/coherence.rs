//! The faithful cache model catches each class of coherence bug, with a diagnostic naming the
//! missing operation; the correct runtime passes the same runs. Also: the coherence contract
//! is a type, and what each contract emits per run is exactly the documented set.
//!
//! Breakage is process-wide, so every test here takes `SERIAL` first.

#[path = "../examples/common/mod.rs"]
mod common;

use std::sync::Mutex;

use pto::board::{Board, SimA2a3, SimA5};
use pto::hal::{AicpuLaunch, AicpuStream, GmMemory, HostPlatform, Loader, Platform, ProgramKind, Stream};
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::host::{self, Timeouts};
use pto_sim::{CacheModel, Missing, SimAicpu};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
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
    host::Device::new_in_process(raw, Timeouts::new(300_000, 300_000, 20_000_000)).unwrap()
}

trait FaithfulDevice {
    fn faithful(&self, evict_per_mille: u32);
}

impl<C: pto::hal::Contract> FaithfulDevice for pto_sim::SimDevice<C> {
    fn faithful(&self, evict_per_mille: u32) {
        self.set_cache_model(CacheModel::Faithful { seed: 7, evict_per_mille }).unwrap();
    }
}

/// One AIV task per 16-float row of a tensor: each adds 1.
fn rows_graph<P: Platform>(dev: &host::Device<P>, rows: u32) -> (host::DeviceTensor<P>, host::Graph<P>)
where
    P::Error: std::fmt::Display,
{
    let f = dev.func("add1").unwrap_or_else(|| dev.register_kernel("add1", CoreType::Aiv, common::k_add1).unwrap());
    let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
    let g = dev
        .build(|g| {
            for i in 0..rows {
                g.submit(Task::aiv(f).inout(&y.tensor().view(&[i, 0], &[1, 16])?))?;
            }
            Ok(())
        })
        .unwrap();
    (y, g)
}

/// The run failed with a coherence violation whose text names `missing`.
fn assert_caught<T: std::fmt::Debug>(r: Result<T, Error>, missing: Missing) {
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
        let (dev, k) = common::setup().unwrap();
        dev.platform()
            .set_cache_model(CacheModel::Faithful { seed: 11 + evict as u64, evict_per_mille: evict })
            .unwrap();
        for rt in common::RUNTIMES {
            let on = |w: common::Workload, name: &str| {
                w(&dev, &k, rt).unwrap_or_else(|e| panic!("{name} on {}, evict {evict}: {e}", rt.name()));
            };
            on(common::vector, "vector");
            on(common::chain513, "chain513");
            on(common::mix, "mix");
            on(common::tiny_rings, "tiny_rings");
            on(common::manual_scope, "manual_scope");
            for kind in common::ShapeKind::ALL {
                let p = common::build_shape(&dev, &k, kind, 64).unwrap_or_else(|e| panic!("{e}"));
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
    assert_caught(dev.run(&g), Missing::InvalidateAfterHostDma);
    let v = dev.platform().take_violations();
    assert!(v.iter().any(|v| v.agent == "aicpu 0" && v.last_writer.starts_with("host")), "{v:?}");
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
            assert_caught(second.wait(), Missing::InvalidateAfterHostDma);
        } else {
            second.wait().unwrap();
        }
    }
}

/// Class 2: two AICores write different halves of one line; both write back.
#[test]
fn two_cores_writing_one_line_are_caught() {
    let _s = serial();
    fn half(k: &mut dyn KernelContext) {
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
        let r = dev.run(&g);
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
    dev.run(&g).unwrap();
    assert_eq!(y.read::<f32>().unwrap(), vec![1.0; 128]);
    let _b = breakage::activate(breakage::FIN_BEFORE_PUBLISH);
    assert_caught(dev.run(&g), Missing::WriteBackBeforeSignal);
}

/// Class 5: an AICPU store (the dispatch payload) read by an AICore through a cached load
/// without the AICore invalidating first.
#[test]
fn cached_payload_read_without_invalidate_is_caught() {
    let _s = serial();
    let cfg = RunConfig::default().with_clusters(1).with_aicpu_threads(1);
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
/// per AICPU thread and one of the graph image — and no clean.
#[test]
fn contract_decides_the_aicpu_cache_operations() {
    let _s = serial();
    fn per_run<B: Board<Platform = pto_sim::Sim<C>>, C: pto::hal::Contract>() -> (u64, u64) {
        let dev = pto::open_board::<B>().unwrap();
        let (_y, g) = rows_graph(&dev, 8);
        dev.run(&g).unwrap();
        let (i0, f0) = dev.platform().aicpu_cache_ops();
        dev.run(&g).unwrap();
        let (i1, f1) = dev.platform().aicpu_cache_ops();
        (i1 - i0, f1 - f0)
    }
    assert_eq!(per_run::<SimA5, _>(), (0, 0));
    let threads = SimA2a3::TOPOLOGY.aicpu_threads as u64;
    assert_eq!(per_run::<SimA2a3, _>(), (threads + 1, 0));
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

/// Per iteration, in its own scope: t = x_i + 1 into a scope tensor, y_i = t + 1. With tiny
/// rings, every iteration's argument records reuse the heap bytes of an earlier iteration's.
fn reuse_records(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y) = (a.t(0)?, a.t(1)?);
    let f = FuncId(a.s(0)? as u16);
    for i in 0..x.shape[0] {
        o.scope(|s| {
            let t = s.alloc::<f32>(&[1, 16])?;
            s.submit(Task::aiv(f).input(&x.view(&[i, 0], &[1, 16])?).output(&t).scalar_f32(1.0))?;
            s.submit(Task::aiv(f).input(&t).output(&y.view(&[i, 0], &[1, 16])?).scalar_f32(1.0))?;
            Ok(())
        })?;
    }
    Ok(())
}

/// Class 7, device-side runtime only: a core reads a task's argument record through the line
/// it cached for an earlier task whose record occupied the same ring heap bytes (the AICore
/// skipped its invalidate). The host-built graph never reuses record bytes within a run; the
/// device-side runtime does as soon as rings are reclaimed — and the faithful model catches it.
#[test]
fn a_reused_argument_record_read_through_a_stale_line_is_caught() {
    let _s = serial();
    let run = |broken: bool| {
        let dev = faithful::<SimA2a3>();
        let f = dev.register_kernel("add_scalar", CoreType::Aiv, common::k_add_scalar).unwrap();
        let p = dev.register_orchestration("reuse_records", reuse_records).unwrap();
        let rows = 32u32;
        let x_h: Vec<f32> = (0..rows * 16).map(|i| i as f32).collect();
        let x = dev.tensor_from(&[rows, 16], &x_h).unwrap();
        let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
        let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).scalar(f.0 as u64);
        // One cluster (two AIV cores, so records come back to a core that cached them) and rings
        // of 4 slots and 2 KiB.
        let cfg = RunConfig::default()
            .with_runtime(RuntimeKind::TensormapRing)
            .with_clusters(1)
            .with_rings(RingConfig::uniform(4, 2048, 16));
        let _b = broken.then(|| breakage::activate(breakage::SKIP_ARGS_OBSERVE));
        let r = dev.run_program(&p, &args, &cfg);
        (r, y.read::<f32>().unwrap(), x_h)
    };
    let (ok, y, x_h) = run(false);
    ok.unwrap();
    assert_eq!(y, x_h.iter().map(|v| v + 2.0).collect::<Vec<f32>>());
    let (broken, _, _) = run(true);
    assert_caught(broken, Missing::Invalidate);
}
