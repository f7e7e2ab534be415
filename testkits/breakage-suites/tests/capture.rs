//! The args dump on the resident route (`docs/args-dump.md`, "The resident route"): simulator
//! scenes for the guarantees numbered 1, 2, 7, 8, 9, 10 and 11 there, each on the simulated a5
//! board with the coherent and with the faithful cache model, and the chain513 equality of the
//! two routes' records, every example dumped on both routes, and hostile runs (a gang lane that
//! faults, one that never returns, two host threads dumping at once). Items 3–6 are loom models
//! (`runtime/src/exec/resident/capture/loom_tests.rs`).

use parking_lot::Mutex;

use pto::board::{Board, SimA5};
use pto::hal::HostPlatform;
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::codes::{DeviceFault, ErrorCode, Site};
use pto::runtime::dump::DumpLevel;
use pto::runtime::graph::DType;
use pto::runtime::host::dump::{Dump, Stage};
use pto::runtime::host::{self, CaptureReport, Executor, Timeouts};
use pto_sim::CacheModel;
use pto_testkit as kit;

/// Breakage is process-wide: every test takes this first.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> parking_lot::MutexGuard<'static, ()> {
    SERIAL.lock()
}

type Dev = host::Device<<SimA5 as Board>::Platform>;

/// A simulated a5 device for scenes that succeed, coherent or under the faithful cache model:
/// a 10 s watchdog (a boundary's budget is half of it), so the suite passes on a loaded
/// 2-core machine (at load 19 a 2 s watchdog ran out: a test budget is not a performance
/// claim).
fn device(faithful: bool) -> Dev {
    device_with(faithful, Timeouts::new(10_000_000, 2_000_000, 60_000_000))
}

/// A simulated a5 device for scenes that must fail at a boundary: a 4 s watchdog, so the
/// boundary budget (2 s) runs out first with 2 s to spare for a loaded machine before the
/// schedulers' own watchdog would, and a failing scene ends in seconds.
fn failing_device(faithful: bool) -> Dev {
    device_with(faithful, Timeouts::new(4_000_000, 2_000_000, 60_000_000))
}

fn device_with(faithful: bool, t: Timeouts) -> Dev {
    let raw = SimA5::open().unwrap_or_else(|e| panic!("open: {e}"));
    if faithful {
        raw.set_cache_model(CacheModel::Faithful { seed: 11, evict_per_mille: 0 }).unwrap();
    }
    host::Device::new_in_process(raw, t).unwrap()
}

/// A scratch directory for this test's files, removed when the test ends.
fn tmp(name: &str) -> pto_testkit::ScratchDir {
    pto_testkit::ScratchDir::new("pto-capture-test", name)
}

fn func<P: HostPlatform>(dev: &host::Device<P>, name: &str, ty: CoreType, k: fn(&mut dyn KernelContext)) -> FuncId {
    dev.func(name).unwrap_or_else(|| dev.register_kernel(name, ty, k).unwrap())
}

/// AIC lane of the mixed task: `x += 1` (INOUT x, arg 0).
fn k_bump(k: &mut dyn KernelContext) {
    let x: Vec<f32> = k.load::<f32>(0).into_iter().map(|v| v + 1.0).collect();
    k.store(0, &x);
}

/// AIV lanes of the mixed task: each writes its half of `y` (OUT, arg 1) with 2.
fn k_half_two(k: &mut dyn KernelContext) {
    let lane = k.sub_block_id();
    let n = k.arg(1).elem_count() as u32;
    for i in lane * n / 2..(lane + 1) * n / 2 {
        k.set(1, &[i], 2.0f32);
    }
}

/// Lane `part` of three (AIC 0, AIV lanes 1 and 2) of the every-lane-writes task: `x += 1`
/// over its third of `x` (INOUT, arg 0), cut at 64-byte lines (no two lanes write one line).
fn bump_third(k: &mut dyn KernelContext, part: u32) {
    let n = k.arg(0).elem_count() as u32;
    let cut = |p: u32| if p == 3 { n } else { p * n / 3 / 16 * 16 };
    for i in cut(part)..cut(part + 1) {
        let v: f32 = k.get(0, &[i]);
        k.set(0, &[i], v + 1.0);
    }
}

/// AIC lane of the every-lane-writes task: its third of `x`.
fn k_bump_third(k: &mut dyn KernelContext) {
    bump_third(k, 0);
}

/// AIV lanes of the every-lane-writes task: their thirds of `x`, and their halves of `y` (OUT,
/// arg 1) with 2.
fn k_bump_third_half_two(k: &mut dyn KernelContext) {
    let part = 1 + k.sub_block_id();
    bump_third(k, part);
    k_half_two(k);
}

/// Run `g` resident with the dump at `cfg`'s level into a fresh directory; the report and the
/// dump read back.
fn run(dev: &Dev, g: &host::Graph<<SimA5 as Board>::Platform>, cfg: RunConfig, name: &str) -> (RunReport, Dump) {
    let dir = tmp(name);
    let r = dev
        .run_with(g, &cfg.with_executor(Executor::Resident).with_dump_dir(&dir))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(r.executor, Executor::Resident, "{name}");
    let d = Dump::open(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (r, d)
}

fn capture(r: &RunReport) -> CaptureReport {
    r.capture.expect("a resident dumping run reports its capture")
}

/// The item 1 scene: one 1C2V task whose three lanes each rewrite a third of the captured
/// in-out `x` in place (so whichever lanes are peers, a lane that ran before the input capture
/// was sealed shows in the input record) and whose AIV lanes write `y`; `x` starts at
/// `0, 1, 2, ...`. The run's report and dump, and `x`'s initial values.
fn every_lane_writes(dev: &Dev, name: &str) -> (RunReport, Dump, FuncId, FuncId, Vec<f32>) {
    let aic = func(dev, "bump_third", CoreType::Aic, k_bump_third);
    let aiv = func(dev, "bump_third_half_two", CoreType::Aiv, k_bump_third_half_two);
    let init: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let x = dev.tensor_from(&[4096], &init).unwrap();
    let y = dev.alloc::<f32>(&[4096]).unwrap();
    let g = dev.build(|g| g.submit(Task::mix(aic, aiv).inout(&x.tensor()).output(&y.tensor())).map(|_| ())).unwrap();
    // 64 KiB arena: 4 KiB steps, so the 16 KiB input takes four.
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(64 * 1024);
    let (r, d) = run(dev, &g, cfg, name);
    (r, d, aic, aiv, init)
}

/// Item 1: a 1C2V task yields one record set carrying all three func ids, and no subtask
/// executes before its input capture is sealed — the input record is the value before any
/// lane ran, although the capture takes several service steps (every lane rewrites its third
/// of the captured in-out in place: [`every_lane_writes`]). The broken variant (peers that do
/// not wait for the seal) is caught every time:
/// [`reproducer_peers_that_skip_the_seal_are_caught_every_time`].
#[test]
fn acceptance_01_mixed_subtasks() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let (r, d, aic, aiv, init) = every_lane_writes(&dev, "mixed");
        let c = capture(&r);
        assert_eq!((c.requests, c.claims, c.unsettled_slots), (2, 1, 0), "{c:?}");
        assert!(c.steps >= 4 && c.largest_step <= c.max_step, "{c:?}");
        let recs = d.by_task();
        let set = &recs[&0];
        assert_eq!(set.len(), 3, "one record set: x before, x and y after");
        for rec in set {
            assert_eq!(rec.func_ids, vec![aic.0, aiv.0, aiv.0], "every record carries the three func ids");
        }
        let before = d.find(0, 0, Stage::BeforeDispatch).unwrap();
        assert_eq!(d.data::<f32>(before).unwrap(), init, "faithful={faithful}: the input as the task read it");
        let after = d.find(0, 0, Stage::AfterCompletion).unwrap();
        assert_eq!(d.data::<f32>(after).unwrap(), init.iter().map(|v| v + 1.0).collect::<Vec<_>>());
        let y_after = d.find(0, 1, Stage::AfterCompletion).unwrap();
        assert_eq!(d.data::<f32>(y_after).unwrap(), vec![2.0f32; 4096]);
        assert!(d.find(0, 1, Stage::BeforeDispatch).is_none(), "an output has no input capture");
        assert!(dev.platform().take_violations().is_empty());
    }
}

/// Item 1's broken variant, `CAPTURE_PEERS_SKIP_SEAL`: the peers of the input capture do not
/// wait for its seal (the breakage forces the interleaving: the publisher asks only after the
/// peers ran). In 10 of 10 runs per cache model the input record shows the peers' writes.
#[test]
fn reproducer_peers_that_skip_the_seal_are_caught_every_time() {
    let _s = serial();
    let _b = breakage::activate(breakage::CAPTURE_PEERS_SKIP_SEAL);
    for faithful in [false, true] {
        let dev = device(faithful);
        for rep in 0..10 {
            let (_, d, _, _, init) = every_lane_writes(&dev, "peers-skip");
            let before = d.find(0, 0, Stage::BeforeDispatch).unwrap();
            let got = d.data::<f32>(before).unwrap();
            let changed = got.iter().zip(&init).filter(|(g, i)| g != i).count();
            assert!(changed >= 1360, "faithful={faithful} rep {rep}: not caught ({changed} elements changed)");
        }
    }
}

/// Item 2: every cluster requests at once (a task per core, and gangs, all ready at the
/// start): the run completes with every record, no core starved, no slot left claimed, and
/// only the gangs claim a slot.
#[test]
fn acceptance_02_concurrent_cores() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let add1 = func(&dev, "add1", CoreType::Aiv, kit::k_add1);
        let aic = func(&dev, "bump", CoreType::Aic, k_bump);
        let aiv = func(&dev, "half_two", CoreType::Aiv, k_half_two);
        let workers = dev.topology().workers();
        let rows = dev.tensor_from(&[workers, 64], &vec![1.0f32; (workers * 64) as usize]).unwrap();
        let keep: Vec<_> = (0..workers).map(|_| dev.alloc::<f32>(&[64]).unwrap()).collect();
        let g = dev
            .build(|g| {
                for w in 0..workers {
                    let row = rows.tensor().view(&[w, 0], &[1, 64])?;
                    if w % 4 == 3 {
                        g.submit(Task::mix(aic, aiv).inout(&row).output(&keep[w as usize].tensor()))?;
                    } else {
                        g.submit(Task::aiv(add1).inout(&row))?;
                    }
                }
                Ok(())
            })
            .unwrap();
        // 108 cores queue at once behind five AICPU threads on a two-core host (1-3 s in a
        // debug build under the faithful model): the boundary budget (half the device's 10 s
        // watchdog) covers the queue.
        let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full));
        let (r, d) = run(&dev, &g, cfg, "concurrent");
        let c = capture(&r);
        let tasks = workers as u64;
        let mixes = (0..workers).filter(|w| w % 4 == 3).count() as u64;
        assert_eq!(r.tasks, tasks);
        // Only the gangs meet at a rendezvous slot; a single-lane task claims none.
        assert_eq!(c.claims, mixes, "{c:?}");
        assert_eq!(c.requests, 2 * tasks, "{c:?}");
        // Every phase commits a record, so it took at least one step; the service adds the
        // steps that sealed a phase to the header's count late, when it finishes at the
        // latest, and the count read after the run must hold them all.
        assert!(c.steps >= c.requests, "a requested phase's steps missing from the count: {c:?}");
        assert_eq!(c.unsettled_slots, 0, "no slot left READY: {c:?}");
        assert_eq!(c.overtakes, 0, "every AICPU thread served in order of first observation: {c:?}");
        let acc = r.dump.unwrap().accounting;
        assert_eq!(acc.dropped, Some(0));
        assert_eq!(acc.total, Some(2 * tasks + mixes), "{acc:?}");
        assert_eq!(d.records.len() as u64, acc.collected);
        let got: Vec<f32> = rows.read().unwrap();
        assert!(got.iter().all(|&v| v == 2.0), "faithful={faithful}");
    }
}

/// Item 2's broken variant, `CAPTURE_SERVE_NEWEST`: a service that serves the latest
/// observed request first. Every core requests at once behind one AICPU thread, so requests
/// wait side by side and the later ones overtake: caught (overtakes counted) in 5 of 5 runs.
#[test]
fn reproducer_a_service_that_serves_the_newest_first_is_caught_every_time() {
    let _s = serial();
    let dev = device(false);
    let add1 = func(&dev, "add1", CoreType::Aiv, kit::k_add1);
    let workers = dev.topology().workers();
    let rows = dev.tensor_from(&[workers, 64], &vec![1.0f32; (workers * 64) as usize]).unwrap();
    let g = dev
        .build(|g| {
            for w in 0..workers {
                g.submit(Task::aiv(add1).inout(&rows.tensor().view(&[w, 0], &[1, 64])?))?;
            }
            Ok(())
        })
        .unwrap();
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_aicpu_threads(1);
    let _b = breakage::activate(breakage::CAPTURE_SERVE_NEWEST);
    for rep in 0..5 {
        let (r, _) = run(&dev, &g, cfg.clone(), "newest-first");
        let c = capture(&r);
        assert!(c.overtakes > 0, "rep {rep}: not caught: {c:?}");
    }
}

/// Item 7: the exact handoff. Task 0 writes `c = a + b`, task 1 reads `c` and writes
/// `d = c + b`: task 0's output at its completion reads `a + b`, task 1's input at its dispatch
/// reads `a + b` and its output `a + 2b`, each matched on the run, task, argument and stage;
/// the order of the two tasks is taken from the run's trace, not from the bytes. Two later
/// unmarked tasks overwrite `c` and `d` (with `2b`), so a capture taken after the run instead
/// of at the boundary would fail every comparison.
#[test]
fn acceptance_07_exact_handoff() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let add = func(&dev, "add", CoreType::Aiv, kit::k_add);
        let av: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let bv: Vec<f32> = (0..256).map(|i| 1000.0 + i as f32).collect();
        let a = dev.tensor_from(&[256], &av).unwrap();
        let b = dev.tensor_from(&[256], &bv).unwrap();
        let c = dev.alloc::<f32>(&[256]).unwrap();
        let e = dev.alloc::<f32>(&[256]).unwrap();
        let g = dev
            .build(|g| {
                g.submit(Task::aiv(add).input(&a.tensor()).input(&b.tensor()).output(&c.tensor()).dump(0b100))?;
                let t1 =
                    g.submit(Task::aiv(add).input(&c.tensor()).input(&b.tensor()).output(&e.tensor()).dump(0b101))?;
                // Both buffers change after the boundaries recorded (`2b`, unmarked): a capture
                // taken after the run, not at the boundary, would read these values instead.
                // (The tensor map orders a write after earlier writers, not after readers: the
                // rewrite of `c` names task 1 explicitly.)
                g.submit(Task::aiv(add).input(&b.tensor()).input(&b.tensor()).output(&c.tensor()).after(t1))?;
                g.submit(Task::aiv(add).input(&b.tensor()).input(&b.tensor()).output(&e.tensor()))?;
                Ok(())
            })
            .unwrap();
        let cfg = RunConfig::default().with_dump(Some(DumpLevel::Partial)).with_trace(true);
        let (r, d) = run(&dev, &g, cfg, "handoff");
        let t = r.trace.as_ref().expect("a trace");
        let span = |task: u32| {
            let s = t.subtasks.iter().find(|s| s.task == task).expect("the task ran");
            (s.start, s.end)
        };
        let (first, second) = (span(0), span(1));
        assert!(first.1 <= second.0, "the trace orders task 0 before task 1: {first:?} {second:?}");
        assert_eq!(d.run.epoch, r.epoch, "the records are this run's");
        let ab: Vec<f32> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
        let a2b: Vec<f32> = ab.iter().zip(&bv).map(|(x, y)| x + y).collect();
        let out0 = d.find(0, 2, Stage::AfterCompletion).expect("task 0's output at completion");
        assert_eq!(d.data::<f32>(out0).unwrap(), ab);
        let in1 = d.find(1, 0, Stage::BeforeDispatch).expect("task 1's input at dispatch");
        assert_eq!(d.data::<f32>(in1).unwrap(), ab);
        let out1 = d.find(1, 2, Stage::AfterCompletion).expect("task 1's output at completion");
        assert_eq!(d.data::<f32>(out1).unwrap(), a2b);
        assert_eq!(d.records.len(), 3, "only the marked arguments: {:?}", d.records);
        let b2: Vec<f32> = bv.iter().map(|x| x + x).collect();
        assert_eq!(c.read::<f32>().unwrap(), b2, "c changed after task 1 read it");
        assert_eq!(e.read::<f32>().unwrap(), b2, "e changed after task 1 wrote it");
    }
}

/// Item 8: FULL on a chained workload with a 4 KiB arena back-pressures without deadlock;
/// records complete (none dropped, however many WOULD_BLOCK answers the lane gave), and
/// `total == collected + dropped`; and the same on chain513 with a 32 KiB arena. Each scene
/// asserts that the lane did push back (WOULD_BLOCK answers counted).
#[test]
fn acceptance_08_arena_pressure() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let add1 = func(&dev, "add1", CoreType::Aiv, kit::k_add1);
        let x = dev.tensor_from(&[256], &vec![0.0f32; 256]).unwrap();
        let g = dev
            .build(|g| {
                for _ in 0..48 {
                    g.submit(Task::aiv(add1).inout(&x.tensor()))?;
                }
                Ok(())
            })
            .unwrap();
        let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(4096);
        let (r, d) = run(&dev, &g, cfg, "pressure");
        let c = capture(&r);
        let acc = r.dump.unwrap().accounting;
        assert_eq!(acc.total, Some(acc.collected + acc.dropped.unwrap()), "{acc:?}");
        assert_eq!(acc.dropped, Some(0), "a would-block that cleared is no dropped record: {c:?}");
        let mut keys: Vec<_> = d.records.iter().map(|r| (r.task, r.arg, r.stage, r.lane, r.seq)).collect();
        keys.sort_by_key(|k| (k.0, k.1, k.2 as u8));
        for w in keys.windows(2) {
            assert_ne!((w[0].0, w[0].1, w[0].2), (w[1].0, w[1].1, w[1].2), "one record per capture: {w:?}");
        }
        assert_eq!(acc.total, Some(96));
        for task in 0..48u32 {
            let before = d.find(task, 0, Stage::BeforeDispatch).unwrap();
            assert_eq!(d.data::<f32>(before).unwrap(), vec![task as f32; 256]);
            let after = d.find(task, 0, Stage::AfterCompletion).unwrap();
            assert_eq!(d.data::<f32>(after).unwrap(), vec![task as f32 + 1.0; 256]);
        }
        assert_eq!(c.unsettled_slots, 0);
        assert!(c.would_block > 0, "faithful={faithful}: the arena never pushed back: {c:?}");
    }
    // FULL on chain513 with a 32 KiB arena (two 16 KiB records): the lane pushes back (WOULD_BLOCK answers, asserted,
    // so the scene cannot pass without pressure) and every record still arrives, value for value.
    let (dev, k) = kit::setup(pto::open).unwrap();
    let dir = tmp("chain513-pressure");
    let o = kit::executed(Executor::Resident, || {
        kit::dumped_with_arena(Some(DumpLevel::Full), Some(dir.clone()), Some(32 * 1024), || {
            kit::chain513(&dev, &k, RuntimeKind::HostBuiltGraph)
        })
    })
    .unwrap();
    let c = capture(&o.report);
    assert!(c.would_block > 0, "chain513: the arena never pushed back: {c:?}");
    let rep = o.report.dump.expect("a dump report");
    assert_eq!(rep.accounting.dropped, Some(0), "{c:?}");
    let d = Dump::open(&rep.dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(kit::check_chain513_dump(&d), Ok(3 + 512 * 3));
}

/// Item 9: one argument sized at the arena clamp (half the arena) and one strided with a
/// non-unit innermost stride: no service step copies more than `max_bytes`, the large one
/// takes many steps, and both payloads are exact.
#[test]
fn acceptance_09_bounded_service() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let acc = func(&dev, "accumulate", CoreType::Aiv, kit::k_accumulate);
        let arena = 8192u64;
        let n = (arena / 2 / 4) as u32;
        let xs: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let x = dev.tensor_from(&[n], &xs).unwrap();
        let host_m: Vec<f32> = (0..2 * n).map(|i| -(i as f32)).collect();
        let m = dev.tensor_from(&[2 * n], &host_m).unwrap();
        // Every other element: n of them, innermost stride 2.
        let y = pto::runtime::graph::Tensor::strided(m.tensor().buffer, DType::F32, 0, &[n], &[2]).unwrap();
        let g = dev.build(|g| g.submit(Task::aiv(acc).input(&x.tensor()).inout(&y)).map(|_| ())).unwrap();
        let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(arena);
        let (r, d) = run(&dev, &g, cfg, "bounded");
        let c = capture(&r);
        // The clamp-sized argument's steps copy `max_bytes` each: the largest step is that,
        // never more.
        assert_eq!(c.largest_step, c.max_step, "no step past max_bytes, and the large argument's fill it: {c:?}");
        assert!(c.steps >= 2 * (arena / 2) / c.max_step, "the clamp-sized argument took many steps: {c:?}");
        let x0 = d.find(0, 0, Stage::BeforeDispatch).unwrap();
        assert!(!x0.truncated && x0.payload_len == arena / 2);
        assert_eq!(d.data::<f32>(x0).unwrap(), xs);
        let y0 = d.find(0, 1, Stage::BeforeDispatch).unwrap();
        let want: Vec<f32> = (0..n).map(|i| -((2 * i) as f32)).collect();
        assert_eq!(d.data::<f32>(y0).unwrap(), want);
        let y1 = d.find(0, 1, Stage::AfterCompletion).unwrap();
        assert_eq!(d.data::<f32>(y1).unwrap(), want.iter().zip(&xs).map(|(a, b)| a + b).collect::<Vec<_>>());
    }
}

/// Item 6 at the service: a request that asks while another core's reservation is open on
/// the lane is answered WOULD_BLOCK (nothing reserved, nothing accounted), asks again, and is
/// served once the open record commits. One AICPU thread serves every core; the service holds
/// the first reservation open (`CAPTURE_HOLD_OPEN`) until it has told the other core
/// WOULD_BLOCK, so the schedule is forced, not hoped for (a service that left the second
/// request unanswered would let its budget run out: ARGS_CAPTURE_TIMEOUT).
#[test]
fn a_request_behind_an_open_reservation_is_told_would_block_and_served_after() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let acc = func(&dev, "accumulate", CoreType::Aiv, kit::k_accumulate);
        // 64 KiB arena: 4 KiB steps, so each 16 KiB input is a reservation over four.
        let n = 4096u32;
        let xs: Vec<Vec<f32>> = (0..2).map(|t| (0..n).map(|i| (t * 10_000 + i) as f32).collect()).collect();
        let x: Vec<_> = xs.iter().map(|v| dev.tensor_from(&[n], v).unwrap()).collect();
        let y: Vec<_> = (0..2).map(|_| dev.tensor_from(&[16], &[1.0f32; 16]).unwrap()).collect();
        let g = dev
            .build(|g| {
                for (x, y) in x.iter().zip(&y) {
                    g.submit(Task::aiv(acc).input(&x.tensor()).inout(&y.tensor()))?;
                }
                Ok(())
            })
            .unwrap();
        let cfg =
            RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(64 * 1024).with_aicpu_threads(1);
        let (r, d) = {
            let _b = breakage::activate(breakage::CAPTURE_HOLD_OPEN);
            run(&dev, &g, cfg, "held-open")
        };
        let c = capture(&r);
        assert!(c.would_block >= 1, "faithful={faithful}: the second request was told WOULD_BLOCK: {c:?}");
        assert!(c.answered_while_open >= 1, "faithful={faithful}: answered between the open record's steps: {c:?}");
        assert_eq!(c.overtakes, 0, "faithful={faithful}: served in order of first observation: {c:?}");
        assert_eq!(c.unsettled_slots, 0, "{c:?}");
        let rep = r.dump.as_ref().expect("a dump report");
        assert_eq!(rep.accounting.dropped, Some(0), "a WOULD_BLOCK is not a dropped record");
        for t in 0..2u32 {
            let x0 = d.find(t, 0, Stage::BeforeDispatch).unwrap();
            assert_eq!(d.data::<f32>(x0).unwrap(), xs[t as usize], "task {t}'s input, whole");
        }
        assert_eq!(d.records.len(), 2 * 3, "per task: x before, y before and after");
    }
}

/// Two independent tasks `y += x` (`x` 16 KiB of ones, an input: a reservation over four
/// 4 KiB steps under a 64 KiB arena; `y` 16 floats, an in-out). Returns the graph and the
/// tensors it names.
#[allow(clippy::type_complexity)]
fn two_accumulates(
    dev: &Dev,
) -> (host::Graph<<SimA5 as Board>::Platform>, Vec<host::DeviceTensor<<SimA5 as Board>::Platform>>) {
    let acc = func(dev, "accumulate", CoreType::Aiv, kit::k_accumulate);
    let n = 4096u32;
    let x: Vec<_> = (0..2).map(|_| dev.tensor_from(&[n], &vec![1.0f32; n as usize]).unwrap()).collect();
    let y: Vec<_> = (0..2).map(|_| dev.tensor_from(&[16], &[1.0f32; 16]).unwrap()).collect();
    let g = dev
        .build(|g| {
            for (x, y) in x.iter().zip(&y) {
                g.submit(Task::aiv(acc).input(&x.tensor()).inout(&y.tensor()))?;
            }
            Ok(())
        })
        .unwrap();
    (g, x.into_iter().chain(y).collect())
}

/// Item 9's broken variant, `CAPTURE_SILENT_WHILE_OPEN`: a service that answers nobody while
/// a reservation is open between its steps. With the reservation held open until another core
/// was answered (`CAPTURE_HOLD_OPEN`, the forced schedule of the scene above), the waiting
/// core is never answered and the run ends in ARGS_CAPTURE_TIMEOUT — 3 of 3 runs.
#[test]
fn reproducer_a_service_silent_while_a_reservation_is_open_is_caught_every_time() {
    let _s = serial();
    let dev = failing_device(false);
    let (g, _tensors) = two_accumulates(&dev);
    let dir = tmp("silent-while-open");
    let cfg = RunConfig::default()
        .with_dump(Some(DumpLevel::Full))
        .with_dump_arena(64 * 1024)
        .with_aicpu_threads(1)
        .with_executor(Executor::Resident)
        .with_dump_dir(&dir);
    let _b = breakage::activate(breakage::CAPTURE_HOLD_OPEN | breakage::CAPTURE_SILENT_WHILE_OPEN);
    for rep in 0..3 {
        match dev.run_with(&g, &cfg) {
            Err(Error::Device(e)) => {
                assert_eq!(e.code, ErrorCode::Device(DeviceFault::ArgsCaptureTimeout), "rep {rep}: {e}")
            }
            other => panic!("rep {rep}: not caught: {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(tmp("silent-while-open"));
}

/// Item 10: an induced capture timeout (the AICPU stops advancing an open reservation): the
/// run fails with ARGS_CAPTURE_TIMEOUT at the boundary, the lane is left unsettled (the
/// accounting is unknown), no record of the abandoned reservation is committed and the task
/// never completed; the device is usable for the next run.
#[test]
fn acceptance_10_failure_close() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = failing_device(faithful);
        let add1 = func(&dev, "add1", CoreType::Aiv, kit::k_add1);
        let x = dev.tensor_from(&[4096], &vec![0.0f32; 4096]).unwrap();
        let g = dev.build(|g| g.submit(Task::aiv(add1).inout(&x.tensor())).map(|_| ())).unwrap();
        let dir = tmp("failure");
        let cfg = RunConfig::default()
            .with_dump(Some(DumpLevel::Full))
            .with_dump_arena(64 * 1024)
            .with_executor(Executor::Resident)
            .with_dump_dir(&dir);
        let r = {
            let _b = breakage::activate(breakage::CAPTURE_STALL_OPEN);
            dev.run_with(&g, &cfg)
        };
        match r {
            Err(Error::Device(e)) => {
                assert_eq!(e.code, ErrorCode::Device(DeviceFault::ArgsCaptureTimeout), "{e}");
                assert_eq!(e.site, Site::CaptureBefore, "{e}");
                assert_eq!(e.task, Some(0), "{e}");
            }
            other => panic!("expected ARGS_CAPTURE_TIMEOUT, got {other:?}"),
        }
        let d = Dump::open(&dir).unwrap();
        assert!(!d.accounting.known(), "the lane was left unsettled: {:?}", d.accounting);
        assert!(d.find(0, 0, Stage::BeforeDispatch).is_none(), "nothing of the abandoned reservation");
        assert!(d.find(0, 0, Stage::AfterCompletion).is_none(), "the task never completed");
        assert_eq!(x.read::<f32>().unwrap(), vec![0.0f32; 4096], "the kernel never ran");
        let _ = std::fs::remove_dir_all(&dir);
        // The next run is whole.
        let (r, _) = run(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Full)), "after-failure");
        assert_eq!(r.tasks, 1);
    }
}

/// A 1C2V task `x += 1` (AIC, in-out `x`) and `y` halves with 2 (AIV, output `y`) over 4096
/// floats each, with the full dump and a 64 KiB arena (the 16 KiB input takes four steps).
/// Returns the graph and `[x, y]` (alive as long as the graph runs).
fn gang_graph(
    dev: &Dev,
) -> (host::Graph<<SimA5 as Board>::Platform>, [host::DeviceTensor<<SimA5 as Board>::Platform>; 2]) {
    let aic = func(dev, "bump", CoreType::Aic, k_bump);
    let aiv = func(dev, "half_two", CoreType::Aiv, k_half_two);
    let x = dev.tensor_from(&[4096], &vec![0.0f32; 4096]).unwrap();
    let y = dev.alloc::<f32>(&[4096]).unwrap();
    let g = dev.build(|g| g.submit(Task::mix(aic, aiv).inout(&x.tensor()).output(&y.tensor())).map(|_| ())).unwrap();
    (g, [x, y])
}

fn dumping(dir: &std::path::Path) -> RunConfig {
    RunConfig::default()
        .with_dump(Some(DumpLevel::Full))
        .with_dump_arena(64 * 1024)
        .with_executor(Executor::Resident)
        .with_dump_dir(dir)
}

/// Item 3's stalled claimer, at the simulator: the core that wins the gang's slot claim never
/// initialises it (`CAPTURE_STALL_CLAIMING`, injected). Its two peers find the slot CLAIMING
/// until their budget runs out and end the run with ARGS_CAPTURE_INIT_LOST at the input
/// boundary of task 0; no lane ran; the next run is whole. 3 runs per cache model.
#[test]
fn acceptance_03_a_stalled_claimer_ends_the_run_with_init_lost() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = failing_device(faithful);
        let (g, [x, _y]) = gang_graph(&dev);
        let dir = tmp("init-lost");
        for rep in 0..3 {
            let r = {
                let _b = breakage::activate(breakage::CAPTURE_STALL_CLAIMING);
                dev.run_with(&g, &dumping(&dir))
            };
            match r {
                Err(Error::Device(e)) => {
                    assert_eq!(e.code, ErrorCode::Device(DeviceFault::ArgsCaptureInitLost), "rep {rep}: {e}");
                    assert_eq!((e.site, e.task), (Site::CaptureBefore, Some(0)), "rep {rep}: {e}");
                }
                other => panic!("faithful={faithful} rep {rep}: expected ARGS_CAPTURE_INIT_LOST, got {other:?}"),
            }
            assert_eq!(x.read::<f32>().unwrap(), vec![0.0f32; 4096], "no lane ran");
        }
        let _ = std::fs::remove_dir_all(&dir);
        let (r, _) = run(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Full)), "after-init-lost");
        assert_eq!(r.tasks, 1);
    }
}

/// Item 3's broken variant: a late participant that claims from CLAIMING
/// (`CAPTURE_CLAIM_FROM_CLAIMING`) re-initialises the stalled claimer's slot and goes on, so
/// the run does not end with ARGS_CAPTURE_INIT_LOST — caught in 3 of 3 runs.
#[test]
fn reproducer_03_claim_from_claiming_hides_the_stalled_claimer() {
    let _s = serial();
    let dev = failing_device(false);
    let (g, _xy) = gang_graph(&dev);
    let dir = tmp("init-lost-broken");
    let _b = breakage::activate(breakage::CAPTURE_STALL_CLAIMING | breakage::CAPTURE_CLAIM_FROM_CLAIMING);
    for rep in 0..3 {
        let r = dev.run_with(&g, &dumping(&dir));
        let lost = matches!(&r, Err(Error::Device(e)) if e.code == ErrorCode::Device(DeviceFault::ArgsCaptureInitLost));
        assert!(!lost, "rep {rep}: not caught: {r:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 10 with peers: the gang's input capture times out (`CAPTURE_STALL_OPEN`): the AICPU
/// answers the phase ABORTED once, and all three participants — the publisher and both peers —
/// take that answer (none leaves unacknowledged); the run ends in ARGS_CAPTURE_TIMEOUT at the
/// input boundary, no lane ran, and nothing of the abandoned reservation is recorded. 3 runs
/// per cache model. The broken variant (a peer that ignores ABORTED) is caught below.
#[test]
fn acceptance_10_every_participant_takes_the_abort() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = failing_device(faithful);
        let (g, [x, _y]) = gang_graph(&dev);
        let dir = tmp("gang-abort");
        for rep in 0..3 {
            let (e, c) = aborted_gang(&dev, &g, &dir, breakage::CAPTURE_STALL_OPEN);
            assert_eq!(e.code, ErrorCode::Device(DeviceFault::ArgsCaptureTimeout), "rep {rep}: {e}");
            assert_eq!((e.site, e.task), (Site::CaptureBefore, Some(0)), "rep {rep}: {e}");
            // One ABORTED answer, taken by the publisher and both peers (a peer that sees the
            // run's stop looks at the answer once more: the abort was written before it).
            assert_eq!((c.aborts_answered, c.aborts_taken), (1, 3), "faithful={faithful} rep {rep}: {c:?}");
            let d = Dump::open(&dir).unwrap();
            assert!(!d.accounting.known(), "{:?}", d.accounting);
            assert!(d.find(0, 0, Stage::BeforeDispatch).is_none(), "nothing of the abandoned reservation");
            assert_eq!(x.read::<f32>().unwrap(), vec![0.0f32; 4096], "no lane ran");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Item 10, the stop after the abort: the run's stop (`DMB_EXIT`) lands between the
/// publisher's look at its acknowledgement and its read of DMB (`CAPTURE_STOP_AFTER_LOOK` forces
/// it), after the AICPU answered the phase ABORTED: the publisher looks once more and takes the
/// answer, as the peers do, so all three participants take the abort. On the thread engine under
/// load this interleaving came by itself once (`aborts_taken` 2 of 3 in
/// `acceptance_10_every_participant_takes_the_abort`). 3 runs. The broken variant (the publisher
/// leaves on the stop without that look) is caught below.
#[test]
fn acceptance_10_a_publisher_overtaken_by_the_stop_takes_the_abort() {
    let _s = serial();
    let dev = failing_device(false);
    let (g, [x, _y]) = gang_graph(&dev);
    let dir = tmp("gang-abort-stop");
    for rep in 0..3 {
        let (e, c) = aborted_gang(&dev, &g, &dir, breakage::CAPTURE_STALL_OPEN | breakage::CAPTURE_STOP_AFTER_LOOK);
        assert_eq!(e.code, ErrorCode::Device(DeviceFault::ArgsCaptureTimeout), "rep {rep}: {e}");
        assert_eq!((c.aborts_answered, c.aborts_taken), (1, 3), "rep {rep}: {c:?}");
        assert_eq!(x.read::<f32>().unwrap(), vec![0.0f32; 4096], "no lane ran");
    }
}

/// The broken variant of the test above: a publisher that leaves on the run's stop without
/// looking at its acknowledgement again (`CAPTURE_PUBLISHER_EXIT_NO_RELOOK`) leaves the ABORTED
/// answer untaken — caught in 3 of 3 runs.
#[test]
fn reproducer_10_a_publisher_that_leaves_on_the_stop_is_caught_every_time() {
    let _s = serial();
    let dir = tmp("gang-abort-stop-broken");
    let bits =
        breakage::CAPTURE_STALL_OPEN | breakage::CAPTURE_STOP_AFTER_LOOK | breakage::CAPTURE_PUBLISHER_EXIT_NO_RELOOK;
    for rep in 0..3 {
        let dev = failing_device(false);
        let (g, _xy) = gang_graph(&dev);
        let (_, c) = aborted_gang(&dev, &g, &dir, bits);
        assert_eq!((c.aborts_answered, c.aborts_taken), (1, 2), "rep {rep}: not caught: {c:?}");
    }
}

/// Item 10 with no reservation open: two tasks behind one AICPU thread, the first one's
/// reservation stalled open (`CAPTURE_STALL_OPEN`), the second told WOULD_BLOCK until its
/// budget runs out too; the owner's abort is answered after the other's
/// (`CAPTURE_ABORT_OWNER_LAST`, which forces the schedule: without it the first latch may stop
/// the run before the second budget ends). The service answers the waiting phase ABORTED with
/// no reservation of its own open — nothing of it is abandoned or charged — and its publisher
/// takes the answer. 3 runs. (The owner's own answer may lose the race with the run's stop
/// under load; it is not asserted.)
#[test]
fn acceptance_10_an_abort_with_no_reservation_open_is_answered() {
    let _s = serial();
    let dev = failing_device(false);
    let (g, _tensors) = two_accumulates(&dev);
    let dir = tmp("abort-not-open");
    let _b = breakage::activate(breakage::CAPTURE_STALL_OPEN | breakage::CAPTURE_ABORT_OWNER_LAST);
    for rep in 0..3 {
        match dev.run_with(&g, &dumping(&dir).with_aicpu_threads(1)) {
            Err(Error::Device(e)) => {
                assert_eq!(e.code, ErrorCode::Device(DeviceFault::ArgsCaptureTimeout), "rep {rep}: {e}");
                let c = e.capture.expect("capture counters");
                assert!(c.would_block >= 1, "rep {rep}: the second request waited behind the open one: {c:?}");
                // The first abort answered is never the owner's: at least one answered and
                // taken is the waiting request's, answered with no reservation of its own open.
                // (The owner's own answer may come after the run stopped, or not at all: its
                // core may see EXIT first.)
                assert!(c.aborts_answered >= 1 && c.aborts_taken >= 1, "rep {rep}: {c:?}");
                assert!(c.aborts_taken <= c.aborts_answered, "rep {rep}: {c:?}");
            }
            other => panic!("rep {rep}: expected ARGS_CAPTURE_TIMEOUT, got {other:?}"),
        }
        let d = Dump::open(&dir).unwrap();
        assert!(d.records.iter().all(|r| r.stage != Stage::BeforeDispatch || r.arg != 0), "no input record of x");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Item 10's broken variant, `CAPTURE_PEER_IGNORES_ABORTED`: the peers wait out their own
/// budgets instead of taking the AICPU's ABORTED answer; only the publisher takes it — caught
/// in 3 of 3 runs.
#[test]
fn reproducer_10_peers_that_ignore_the_abort_are_caught_every_time() {
    let _s = serial();
    let dev = failing_device(false);
    let (g, _xy) = gang_graph(&dev);
    let dir = tmp("gang-abort-broken");
    for rep in 0..3 {
        let (_, c) =
            aborted_gang(&dev, &g, &dir, breakage::CAPTURE_STALL_OPEN | breakage::CAPTURE_PEER_IGNORES_ABORTED);
        assert!(c.aborts_taken < 3, "rep {rep}: not caught: {c:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run the gang with `bits` active, expecting a device error: the error, and the capture
/// counters it carries.
fn aborted_gang(
    dev: &Dev,
    g: &host::Graph<<SimA5 as Board>::Platform>,
    dir: &std::path::Path,
    bits: u64,
) -> (host::DeviceError, CaptureReport) {
    let _b = breakage::activate(bits);
    match dev.run_with(g, &dumping(dir)) {
        Err(Error::Device(e)) => {
            let c = *e.capture.clone().expect("a failed resident dumping run reports its capture counters");
            (e, c)
        }
        other => panic!("expected a device error, got {other:?}"),
    }
}

/// Item 11: diagnostics off. With the dump off a resident run reserves no capture region
/// (`RunReport::capture` is `None`); with PARTIAL and nothing marked the region exists but no
/// phase is requested and no slot is claimed — counted, not timed.
#[test]
fn acceptance_11_diagnostics_off() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let (y, g) = kit::add1_chain(&dev, 16).unwrap();
        let r = dev.run_with(&g, &RunConfig::default().with_executor(Executor::Resident)).unwrap();
        assert_eq!(r.capture, None, "no control storage with the dump off");
        assert_eq!(r.dump, None);
        let (r, d) = run(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Partial)), "off");
        let c = capture(&r);
        assert_eq!((c.requests, c.claims, c.steps), (0, 0, 0), "nothing marked: no rendezvous, no request: {c:?}");
        assert!(d.records.is_empty());
        assert_eq!(y.read::<f32>().unwrap(), vec![32.0f32; 16]);
    }
}

/// A dump's records with the lane, sequence and payload offset cleared (where a record landed,
/// not what it says) and the device address too (two runs' runtime-allocated tensors live at
/// different addresses; the element offset in a user allocation stays), each with its payload
/// bytes, sorted.
fn records_of(d: &Dump) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = d
        .records
        .iter()
        .map(|r| {
            let mut r2 = r.clone();
            (r2.lane, r2.seq, r2.payload_offset, r2.addr) = (0, 0, 0, None);
            (format!("{r2:?}"), d.bytes(r).to_vec())
        })
        .collect();
    v.sort();
    v
}

/// Run example `f` on the host-built graph on executor `e` with the full dump into a fresh
/// directory named `name`; the dump read back (the example checks its own result).
fn dump_example<P: HostPlatform>(
    dev: &host::Device<P>,
    k: &kit::Kernels,
    name: &str,
    e: Executor,
    f: kit::Workload<P>,
) -> Dump {
    let dir = tmp(&format!("{name}-{e}"));
    let o = kit::executed(e, || {
        kit::dumped(Some(DumpLevel::Full), Some(dir.clone()), || f(dev, k, RuntimeKind::HostBuiltGraph))
    })
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(o.report.executor, e, "{name}");
    let rep = o.report.dump.expect("a dump report");
    assert_eq!(rep.accounting.dropped, Some(0), "{name} on {e}: a record was dropped");
    let d = Dump::open(&rep.dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    d
}

/// Where the reference refuses, pto-rt captures: on chain513 the resident route's records
/// equal the legacy route's value for value (task, argument, stage, view and payload bytes).
#[test]
fn chain513_resident_records_equal_legacy_records() {
    let _s = serial();
    let (dev, k) = kit::setup(pto::open).unwrap();
    let res = dump_example(&dev, &k, "chain513", Executor::Resident, kit::chain513);
    let leg = dump_example(&dev, &k, "chain513", Executor::Legacy, kit::chain513);
    let (r, l) = (records_of(&res), records_of(&leg));
    assert_eq!(r.len(), 3 + 512 * 3);
    assert!(r == l, "the resident route's records differ from the legacy route's");
    assert_eq!(kit::check_chain513_dump(&res), Ok(3 + 512 * 3));
}

/// `--executor resident --dump full` works on every example: each runs resident with the full
/// dump, checks its own result, drops nothing, and records what the legacy route records,
/// value for value.
#[test]
fn every_example_dumps_on_the_resident_route() {
    let _s = serial();
    let (dev, k) = kit::setup(pto::open).unwrap();
    for (name, f) in kit::examples() {
        let res = records_of(&dump_example(&dev, &k, name, Executor::Resident, f));
        let leg = records_of(&dump_example(&dev, &k, name, Executor::Legacy, f));
        assert!(!res.is_empty(), "{name}: no records on the resident route");
        assert_eq!(res.len(), leg.len(), "{name}: record counts differ");
        assert!(res == leg, "{name}: the resident route's records differ from the legacy route's");
    }
}

/// AIV lanes of the faulting gang: lane 1 panics after lane 0 and the AIC lane did their
/// work, so its peers reach the AFTER rendezvous and wait for a participant that never comes.
fn k_half_two_lane1_panics(k: &mut dyn KernelContext) {
    if k.sub_block_id() == 1 {
        panic!("deliberate fault in a gang's second AIV lane");
    }
    k_half_two(k);
}

/// A hostile run: one lane of a dumping 1C2V gang faults while its peers wait for it at the
/// AFTER boundary. The run ends in bounded time with the kernel's fault (KERNEL_FAULT at the
/// kernel site, naming the task) — the first latch, not a capture timeout it caused; no AFTER
/// record is committed for the task (its output capture never sealed); the next run on the
/// same device is whole.
#[test]
fn a_fault_in_a_dumping_gang_is_the_kernels_and_seals_nothing() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let aic = func(&dev, "bump", CoreType::Aic, k_bump);
        let bad = func(&dev, "half_two_lane1_panics", CoreType::Aiv, k_half_two_lane1_panics);
        let x = dev.tensor_from(&[1024], &vec![0.0f32; 1024]).unwrap();
        let y = dev.alloc::<f32>(&[1024]).unwrap();
        let g =
            dev.build(|g| g.submit(Task::mix(aic, bad).inout(&x.tensor()).output(&y.tensor())).map(|_| ())).unwrap();
        let dir = tmp("gang-fault");
        let cfg =
            RunConfig::default().with_dump(Some(DumpLevel::Full)).with_executor(Executor::Resident).with_dump_dir(&dir);
        let started = std::time::Instant::now();
        match dev.run_with(&g, &cfg) {
            Err(Error::Device(e)) => {
                assert_eq!(e.code, ErrorCode::Device(DeviceFault::KernelFault), "faithful={faithful}: {e}");
                assert_eq!(e.site, Site::Kernel, "{e}");
                assert_eq!(e.task, Some(0), "{e}");
            }
            other => panic!("faithful={faithful}: expected KERNEL_FAULT, got {other:?}"),
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "bounded: {:?}", started.elapsed());
        let d = Dump::open(&dir).unwrap();
        assert!(d.find(0, 0, Stage::AfterCompletion).is_none(), "no output capture of a task that faulted");
        assert!(d.find(0, 1, Stage::AfterCompletion).is_none(), "no output capture of a task that faulted");
        let _ = std::fs::remove_dir_all(&dir);
        let (y2, g2) = kit::add1_chain(&dev, 16).unwrap();
        let (r, d) = run(&dev, &g2, RunConfig::default().with_dump(Some(DumpLevel::Full)), "after-gang-fault");
        assert_eq!(r.tasks, 16);
        assert_eq!(d.records.len(), 16 * 2, "x before and after, per task");
        assert_eq!(y2.read::<f32>().unwrap(), vec![16.0f32; 16]);
    }
}

/// The middle task of the faulting chain: `x` (INOUT, arg 0) is read, then the kernel faults.
fn k_reads_then_panics(k: &mut dyn KernelContext) {
    let _ = k.load::<f32>(0);
    panic!("deliberate fault in the middle of a dumping chain");
}

/// A hostile run: the middle task of a dumping chain of three single-lane tasks (each a lone
/// participant at its boundaries, `x += 1` in place) faults. The run ends with the kernel's
/// fault naming task 1; the dump keeps what was sealed before it — task 0 before and after,
/// task 1 before (the inputs it read) — and nothing runs or is recorded after it: no output
/// capture of task 1, nothing of task 2 (its consumer). The next run on the device is whole.
/// With the faulted subtask releasing its consumers (`RELEASE_ON_FAULT`) it fails.
#[test]
fn a_fault_in_the_middle_of_a_dumping_chain_records_nothing_after_it() {
    let _s = serial();
    for faithful in [false, true] {
        let dev = device(faithful);
        let add1 = func(&dev, "add1", CoreType::Aiv, kit::k_add1);
        let bad = func(&dev, "reads_then_panics", CoreType::Aiv, k_reads_then_panics);
        let x = dev.tensor_from(&[256], &vec![0.0f32; 256]).unwrap();
        let g = dev
            .build(|g| {
                for f in [add1, bad, add1] {
                    g.submit(Task::aiv(f).inout(&x.tensor()))?;
                }
                Ok(())
            })
            .unwrap();
        let dir = tmp("chain-fault");
        let cfg =
            RunConfig::default().with_dump(Some(DumpLevel::Full)).with_executor(Executor::Resident).with_dump_dir(&dir);
        match dev.run_with(&g, &cfg) {
            Err(Error::Device(e)) => {
                assert_eq!(e.code, ErrorCode::Device(DeviceFault::KernelFault), "faithful={faithful}: {e}");
                assert_eq!((e.site, e.task), (Site::Kernel, Some(1)), "{e}");
            }
            other => panic!("faithful={faithful}: expected KERNEL_FAULT, got {other:?}"),
        }
        let d = Dump::open(&dir).unwrap();
        assert_eq!(d.data::<f32>(d.find(0, 0, Stage::BeforeDispatch).unwrap()).unwrap(), vec![0.0f32; 256]);
        assert_eq!(d.data::<f32>(d.find(0, 0, Stage::AfterCompletion).unwrap()).unwrap(), vec![1.0f32; 256]);
        let read = d.find(1, 0, Stage::BeforeDispatch).expect("the faulted task's input, as it read it");
        assert_eq!(d.data::<f32>(read).unwrap(), vec![1.0f32; 256]);
        assert!(d.find(1, 0, Stage::AfterCompletion).is_none(), "faithful={faithful}: no output of the faulted task");
        assert!(!d.by_task().contains_key(&2), "faithful={faithful}: nothing of the faulted task's consumer");
        let _ = std::fs::remove_dir_all(&dir);
        let (y2, g2) = kit::add1_chain(&dev, 16).unwrap();
        let (r, d) = run(&dev, &g2, RunConfig::default().with_dump(Some(DumpLevel::Full)), "after-chain-fault");
        assert_eq!(r.tasks, 16);
        assert_eq!(d.records.len(), 16 * 2, "x before and after, per task");
        assert_eq!(y2.read::<f32>().unwrap(), vec![16.0f32; 16]);
    }
}

static RELEASE_HUNG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// AIV lanes of the hanging gang: lane 1 never returns until the test releases it.
fn k_half_two_lane1_hangs(k: &mut dyn KernelContext) {
    if k.sub_block_id() == 1 {
        while !RELEASE_HUNG.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    k_half_two(k);
}

/// A hostile run: one lane of a dumping 1C2V gang never returns while its peers wait for it at
/// the AFTER boundary. The run ends in bounded time, and the error names the hung kernel
/// (KERNEL_HUNG at the completion wait), not the capture timeout its peers ran into.
#[test]
fn a_hung_lane_in_a_dumping_gang_is_reported_as_hung() {
    let _s = serial();
    let raw = SimA5::open().unwrap_or_else(|e| panic!("open: {e}"));
    let dev: Dev = host::Device::new_in_process(raw, Timeouts::new(1_000_000, 1_000_000, 30_000_000)).unwrap();
    let aic = func(&dev, "bump", CoreType::Aic, k_bump);
    let bad = func(&dev, "half_two_lane1_hangs", CoreType::Aiv, k_half_two_lane1_hangs);
    let x = dev.tensor_from(&[1024], &vec![0.0f32; 1024]).unwrap();
    let y = dev.alloc::<f32>(&[1024]).unwrap();
    let g = dev.build(|g| g.submit(Task::mix(aic, bad).inout(&x.tensor()).output(&y.tensor())).map(|_| ())).unwrap();
    let dir = tmp("gang-hang");
    let cfg =
        RunConfig::default().with_dump(Some(DumpLevel::Full)).with_executor(Executor::Resident).with_dump_dir(&dir);
    let started = std::time::Instant::now();
    let r = dev.run_with(&g, &cfg);
    let took = started.elapsed();
    RELEASE_HUNG.store(true, std::sync::atomic::Ordering::Release);
    match r {
        Err(Error::Device(e)) => {
            assert_eq!(e.code, ErrorCode::Device(DeviceFault::KernelHung), "{e}");
            assert_eq!((e.site, e.task), (Site::Completion, Some(0)), "{e}");
        }
        other => panic!("expected KERNEL_HUNG, got {other:?}"),
    }
    assert!(took < std::time::Duration::from_secs(20), "bounded by the watchdog: {took:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A hostile host: two threads run dumping resident graphs on one device at once. The runs
/// take turns; each gets its own complete dump (every record, none dropped) and its result.
#[test]
fn dumping_runs_from_two_host_threads_each_get_their_whole_dump() {
    let _s = serial();
    let dev = device(false);
    // Registered once up front: the threads' graphs share it.
    func(&dev, "add1", CoreType::Aiv, kit::k_add1);
    std::thread::scope(|s| {
        for t in 0..2u32 {
            let dev = &dev;
            s.spawn(move || {
                for i in 0..5 {
                    let n = 8 + t * 4 + i;
                    let (y, g) = kit::add1_chain(dev, n).unwrap();
                    let (r, d) = run(
                        dev,
                        &g,
                        RunConfig::default().with_dump(Some(DumpLevel::Full)),
                        &format!("threads-{t}-{i}"),
                    );
                    assert_eq!(r.tasks, n as u64);
                    assert_eq!(r.dump.as_ref().and_then(|x| x.accounting.dropped), Some(0));
                    assert_eq!(d.records.len(), 2 * n as usize, "thread {t} run {i}: x before and after, per task");
                    assert_eq!(y.read::<f32>().unwrap(), vec![n as f32; 16]);
                }
            });
        }
    });
}
