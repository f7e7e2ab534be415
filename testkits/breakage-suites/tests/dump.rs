//! The args dump: selection levels, the two stages, payloads against the goldens, strided
//! views, truncation, back-pressure and accounting, the files and their reader.

use parking_lot::Mutex;

use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::hal::{HostPlatform, Platform};
use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::dump::DumpLevel;
use pto::runtime::graph::{DType, GraphError};
use pto::runtime::host::dump::{
    ArgDirection, BinFile, Dump, DumpError, Manifest, ManifestRecord, Record, RunInfo, Stage,
};
use pto::runtime::host::{self, Timeouts};
use pto_sim::CacheModel;
use pto_testkit as kit;

/// Breakage is process-wide: every test takes this first.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> parking_lot::MutexGuard<'static, ()> {
    SERIAL.lock()
}

/// A scratch directory for this test's files, removed when the test ends.
fn tmp(name: &str) -> pto_testkit::ScratchDir {
    pto_testkit::ScratchDir::new("pto-dump-test", name)
}

/// chain513 at Full: every task's input at dispatch and output at completion; task k's output
/// at completion equals task k+1's input at dispatch, bit for bit, and each equals the golden.
#[test]
fn chain513_full_records_every_boundary_and_matches_the_golden() {
    let _s = serial();
    let (dev, k) = kit::setup(pto::open).unwrap();
    for rt in kit::RUNTIMES {
        let dir = tmp("chain513");
        let o = kit::dumped(Some(DumpLevel::Full), Some(dir.clone()), || kit::chain513(&dev, &k, rt)).unwrap();
        let rep = o.report.dump.as_ref().expect("a dump report");
        let acc = rep.accounting;
        assert_eq!(acc.total, Some(acc.collected + acc.dropped.unwrap()), "{rt:?}: {acc:?}");
        assert_eq!(acc.dropped, Some(0), "{rt:?}");
        let d = Dump::open(&rep.dir).unwrap();
        assert_eq!(d.accounting, acc);
        assert_eq!(kit::check_chain513_dump(&d), Ok(3 + 512 * 3), "{rt:?}");
    }
}

/// A device of board `B` with short budgets, optionally under the faithful cache model.
fn device<B: Board>(faithful: bool) -> host::Device<B::Platform>
where
    B::Platform: Platform<Device = pto_sim::SimDevice<<B::Platform as pto::hal::DevicePlatform>::Contract>>,
{
    let raw = B::open().unwrap_or_else(|e| panic!("open: {e}"));
    if faithful {
        raw.set_cache_model(CacheModel::Faithful { seed: 7, evict_per_mille: 0 }).unwrap();
    }
    host::Device::new_in_process(raw, Timeouts::new(2_000_000, 1_000_000, 30_000_000)).unwrap()
}

fn add1<P: HostPlatform>(dev: &host::Device<P>) -> FuncId {
    dev.func("add1").unwrap_or_else(|| dev.register_kernel("add1", CoreType::Aiv, kit::k_add1).unwrap())
}

fn accumulate<P: HostPlatform>(dev: &host::Device<P>) -> FuncId {
    dev.func("accumulate")
        .unwrap_or_else(|| dev.register_kernel("accumulate", CoreType::Aiv, kit::k_accumulate).unwrap())
}

/// `y += x` on row r of two [rows, 16] tensors, with a scalar; task r marks `mark(r)`.
fn rows<P: HostPlatform>(
    dev: &host::Device<P>,
    n: u32,
    mark: impl Fn(u32) -> u64,
) -> (host::DeviceTensor<P>, host::DeviceTensor<P>, host::Graph<P>) {
    let f = accumulate(dev);
    let xs: Vec<f32> = (0..n * 16).map(|i| i as f32).collect();
    let x = dev.tensor_from(&[n, 16], &xs).unwrap();
    let y = dev.tensor_from(&[n, 16], &vec![100.0f32; (n * 16) as usize]).unwrap();
    let g = dev
        .build(|g| {
            for r in 0..n {
                let t = Task::aiv(f)
                    .input(&x.tensor().view(&[r, 0], &[1, 16])?)
                    .inout(&y.tensor().view(&[r, 0], &[1, 16])?)
                    .scalar(r as u64)
                    .dump(mark(r));
                g.submit(t)?;
            }
            Ok(())
        })
        .unwrap();
    (x, y, g)
}

fn run_dump<P: HostPlatform>(dev: &host::Device<P>, g: &host::Graph<P>, cfg: RunConfig, name: &str) -> (RunReport, Dump)
where
    P::Error: std::fmt::Display,
{
    let dir = tmp(name);
    let r = dev.run_with(g, &cfg.with_dump_dir(&dir)).unwrap_or_else(|e| panic!("{name}: {e:?}"));
    let d = Dump::open(&dir).unwrap();
    (r, d)
}

#[test]
fn partial_records_only_marked_arguments_and_hybrid_keeps_data_only_for_them() {
    let _s = serial();
    let dev = pto::open().unwrap();
    // Task 1 marks its input (arg 0), task 2 its scalar (arg 2); the others mark nothing.
    let (_x, _y, g) = rows(&dev, 4, |r| match r {
        1 => 0b001,
        2 => 0b100,
        _ => 0,
    });
    let (rep, d) = run_dump(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Partial)), "partial");
    let acc = rep.dump.unwrap().accounting;
    assert_eq!((acc.total, acc.collected, acc.dropped), (Some(2), 2, Some(0)));
    let r = d.find(1, 0, Stage::BeforeDispatch).unwrap();
    assert_eq!(d.data::<f32>(r).unwrap(), (16..32).map(|i| i as f32).collect::<Vec<_>>());
    let s = d.find(2, 2, Stage::BeforeDispatch).unwrap();
    assert_eq!((s.value, s.payload_len), (Some(2), 0));

    // Hybrid: every argument of every task, data only where marked.
    let (rep, d) = run_dump(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Hybrid)), "hybrid");
    // Per task: input (before), in-out (before and after), scalar (before).
    assert_eq!(rep.dump.unwrap().accounting.collected, 4 * 4);
    for rec in &d.records {
        let marked = (rec.task == 1 && rec.arg == 0) || rec.arg == 2;
        assert_eq!(rec.payload_len > 0, marked && rec.arg != 2, "{rec:?}");
    }
    // The in-out of task 3 before and after: y = 100, then 100 + x.
    let (b, a) = (d.find(3, 1, Stage::BeforeDispatch).unwrap(), d.find(3, 1, Stage::AfterCompletion).unwrap());
    assert_eq!(b.direction, ArgDirection::InOut);
    assert_eq!((b.payload_len, a.payload_len), (0, 0));

    // Partial with no marks anywhere: nothing recorded, accounting still exact.
    let (_x2, _y2, g0) = rows(&dev, 3, |_| 0);
    let (rep, d) = run_dump(&dev, &g0, RunConfig::default().with_dump(Some(DumpLevel::Partial)), "unmarked");
    let acc = rep.dump.unwrap().accounting;
    assert_eq!((acc.total, acc.collected), (Some(0), 0));
    assert!(d.records.is_empty());
}

#[test]
fn full_records_in_outs_at_both_stages_with_offsets_and_func_ids() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let (_x, _y, g) = rows(&dev, 3, |_| 0);
    let (_, d) = run_dump(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Full)), "full");
    let f = accumulate(&dev).0;
    for t in 0..3u32 {
        let before = d.find(t, 1, Stage::BeforeDispatch).unwrap();
        let after = d.find(t, 1, Stage::AfterCompletion).unwrap();
        assert_eq!(d.data::<f32>(before).unwrap(), vec![100.0; 16]);
        let want: Vec<f32> = (0..16).map(|i| 100.0 + (t * 16 + i) as f32).collect();
        assert_eq!(d.data::<f32>(after).unwrap(), want);
        assert_eq!(before.offset, Some(t as u64 * 16), "element offset of row {t} in its allocation");
        assert_eq!(before.func_ids, vec![f]);
        assert_eq!(before.dtype, Some(DType::F32));
        assert_eq!(before.shape, vec![1, 16]);
        // The input is captured before dispatch only.
        assert!(d.find(t, 0, Stage::AfterCompletion).is_none());
    }
}

/// The host memory a pipeline slot's collector filled is reused by the slot's next dumping
/// run and carries nothing into it: after a larger dump in each slot, a small graph's manifest
/// holds exactly its own records (tasks, arguments, stages, element offsets, values and
/// payloads), as on the device's first dump, on both executors.
#[test]
fn a_dump_after_a_larger_one_holds_only_its_own_records() {
    let _s = serial();
    let dev = pto::open().unwrap();
    // What a record says, less where it sits (lane, sequence, place in `args.bin`).
    let summary = |d: &Dump| {
        let mut v: Vec<_> = d
            .records
            .iter()
            .map(|r| ((r.task, r.arg, r.stage, r.offset, r.value, r.payload_len), d.bytes(r).to_vec()))
            .collect();
        v.sort();
        v
    };
    for exec in [Executor::Legacy, Executor::Resident] {
        let cfg = RunConfig::default().with_executor(exec).with_dump(Some(DumpLevel::Full));
        let (_x, _y, small) = rows(&dev, 3, |_| 0);
        let (_bx, _by, big) = rows(&dev, 40, |_| 0);
        let (rep, first) = run_dump(&dev, &small, cfg.clone(), "reuse-first");
        let want = summary(&first);
        assert_eq!(rep.dump.unwrap().accounting.collected, want.len() as u64);
        assert!(want.iter().any(|r| r.0.2 == Stage::AfterCompletion), "{exec:?}: outputs recorded");
        // Two pipeline slots: a larger dump in each before the small graph runs in each again.
        for round in 0..2 {
            let (_, b) = run_dump(&dev, &big, cfg.clone(), "reuse-big");
            assert!(b.records.len() > want.len(), "{exec:?}");
            for again in 0..2 {
                // Every run of `small` adds x to y again, so y's payloads differ from run to run;
                // everything else a record says does not.
                let (rep, d) = run_dump(&dev, &small, cfg.clone(), "reuse-again");
                let got = summary(&d);
                assert_eq!(rep.dump.unwrap().accounting.collected, got.len() as u64, "{exec:?} {round} {again}");
                assert_eq!(
                    got.iter().map(|r| r.0).collect::<Vec<_>>(),
                    want.iter().map(|r| r.0).collect::<Vec<_>>(),
                    "{exec:?} round {round} run {again}: the records themselves"
                );
                // x (argument 0) never changes: its payloads are the first run's, byte for byte.
                for (g, w) in got.iter().zip(&want).filter(|(g, _)| g.0.1 == 0) {
                    assert_eq!(g.1, w.1, "{exec:?}: task {} input payload", g.0.0);
                }
            }
        }
    }
}

#[test]
fn a_strided_view_is_captured_element_by_element() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let f = add1(&dev);
    let host: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let m = dev.tensor_from(&[8, 8], &host).unwrap();
    // Every other column of rows 1..5: innermost stride 2.
    let v = pto::runtime::graph::Tensor::strided(m.tensor().buffer, DType::F32, 8, &[4, 4], &[8, 2]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(f).inout(&v)).map(|_| ())).unwrap();
    let (_, d) = run_dump(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Full)), "strided");
    let before = d.find(0, 0, Stage::BeforeDispatch).unwrap();
    let want: Vec<f32> = (0..4).flat_map(|r| (0..4).map(move |c| (8 + r * 8 + c * 2) as f32)).collect();
    assert_eq!(d.data::<f32>(before).unwrap(), want);
    assert_eq!(before.strides, vec![8, 2]);
    let after = d.find(0, 0, Stage::AfterCompletion).unwrap();
    assert_eq!(d.data::<f32>(after).unwrap(), want.iter().map(|v| v + 1.0).collect::<Vec<_>>());
}

#[test]
fn an_argument_larger_than_half_the_arena_is_truncated_and_says_so() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let f = add1(&dev);
    let host: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let y = dev.tensor_from(&[4096], &host).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(f).inout(&y.tensor())).map(|_| ())).unwrap();
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(8192);
    let (_, d) = run_dump(&dev, &g, cfg, "truncated");
    let r = d.find(0, 0, Stage::BeforeDispatch).unwrap();
    assert!(r.truncated);
    assert_eq!(r.payload_len, 4096, "clamped to arena / 2");
    assert_eq!(d.data::<f32>(r).unwrap(), host[..1024].to_vec());
}

#[test]
fn a_tiny_arena_back_pressures_without_deadlock_and_counts_exactly() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let (_x, _y, g) = rows(&dev, 200, |_| 0);
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(4096);
    let (rep, d) = run_dump(&dev, &g, cfg, "tiny");
    let acc = rep.dump.unwrap().accounting;
    assert_eq!(acc.total, Some(acc.collected + acc.dropped.unwrap()), "{acc:?}");
    assert_eq!(acc.total, Some(200 * 4), "{acc:?}");
    assert_eq!(d.records.len() as u64, acc.collected);
    // Whatever was collected is right.
    for r in d.records.iter().filter(|r| r.arg == 0) {
        let want: Vec<f32> = (0..16).map(|i| (r.task * 16 + i) as f32).collect();
        assert_eq!(d.data::<f32>(r).unwrap(), want);
    }
}

#[test]
fn dump_off_reserves_nothing_and_reports_nothing() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let (_x, _y, g) = rows(&dev, 2, |_| u64::MAX);
    let r = dev.run(&g).unwrap();
    assert!(r.dump.is_none());
}

#[test]
fn bad_dump_input_is_refused_with_named_errors() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let (_x, _y, g) = rows(&dev, 1, |_| 0);
    for arena in [100, 64, 1 << 40] {
        let e = dev.run_with(&g, &RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_arena(arena));
        assert!(matches!(&e, Err(Error::Config(ConfigError::DumpArena { arena: a, .. })) if *a == arena), "{e:?}");
        assert!(e.as_ref().is_err_and(|e| e.to_string().contains("dump_arena")), "{e:?}");
    }
    // A mark beyond the task's arguments.
    let f = add1(&dev);
    let y = dev.alloc::<f32>(&[16]).unwrap();
    let e = dev.build(|g| g.submit(Task::aiv(f).inout(&y.tensor()).dump(0b10)).map(|_| ()));
    assert!(matches!(e, Err(Error::Graph(GraphError::BadDumpMask { task: 0, mask: 2, args: 1 }))), "{e:?}");
    // "partial" and friends parse; anything else is named.
    assert_eq!("hybrid".parse::<DumpLevel>(), Ok(DumpLevel::Hybrid));
    assert!("everything".parse::<DumpLevel>().is_err());
}

#[test]
fn a_failed_run_reports_its_accounting_as_unknown() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let bad = dev.func("panic").unwrap_or_else(|| dev.register_kernel("panic", CoreType::Aiv, kit::k_panic).unwrap());
    let (_x, y, _) = rows(&dev, 1, |_| 0);
    let inc = add1(&dev);
    let g = dev
        .build(|g| {
            g.submit(Task::aiv(inc).inout(&y.tensor()))?;
            g.submit(Task::aiv(bad).inout(&y.tensor()))?;
            Ok(())
        })
        .unwrap();
    let dir = tmp("failed");
    let e = dev.run_with(&g, &RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&dir));
    assert!(matches!(e, Err(Error::Device(_))), "{e:?}");
    let d = Dump::open(&dir).unwrap();
    assert_eq!(d.accounting.total, None, "never short: unknown");
    assert_eq!(d.accounting.collected, d.records.len() as u64);
    assert!(!d.run.complete);
    // The device is still usable.
    let (_a, _b, ok) = rows(&dev, 1, |_| 0);
    dev.run(&ok).unwrap();
}

/// Two runs in flight cannot dump into one directory: the second (of the same device, or of
/// another) is refused at prepare with `DumpFiles` naming the directory, nothing of it
/// launched; the first's files are untouched
/// (its dump reads back whole and exact, with a record count the second run's graph could not
/// give), and once the first is fenced the directory takes a new run.
#[test]
fn a_directory_another_run_is_dumping_into_is_refused_and_the_first_dump_is_whole() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let dir = tmp("shared-dir");
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&dir);
    let (_x, y, first) = rows(&dev, 12, |_| 0);
    let (_x2, _y2, second) = rows(&dev, 5, |_| 0);
    let running = dev.prepare(&first, &cfg).unwrap().launch().unwrap();
    match dev.prepare(&second, &cfg) {
        Err(Error::DumpFiles { path, why }) => {
            assert_eq!(path, *dir, "the error names the directory");
            assert!(why.contains("another run"), "{why}");
        }
        Err(e) => panic!("the second run failed, but not on its dump directory: {e:?}"),
        Ok(_) => panic!("a second run was prepared to dump into a directory another run is writing"),
    }
    // Nor may another device's run (the lock is the file's, not the device's).
    let other = pto::open().unwrap();
    let (_x3, _y3, third) = rows(&other, 3, |_| 0);
    let e = other.run_with(&third, &cfg);
    assert!(matches!(&e, Err(Error::DumpFiles { why, .. }) if why.contains("another run")), "{e:?}");
    let rep = running.wait().unwrap();
    assert_eq!(rep.dump.as_ref().unwrap().accounting.dropped, Some(0));
    let d = Dump::open(&dir).unwrap();
    assert!(d.run.complete);
    // Twelve tasks, each its input, inout and scalar before dispatch and its inout after.
    assert_eq!(d.records.len(), 12 * 4, "the first run's records, all of them");
    assert_eq!(d.accounting.collected, d.records.len() as u64);
    let ys: Vec<f32> = y.read().unwrap();
    let last = d.find(11, 1, Stage::AfterCompletion).expect("task 11's inout after completion");
    assert_eq!(d.data::<f32>(last).unwrap(), ys[11 * 16..12 * 16].to_vec(), "its payload is the device's result");
    // Fenced: the directory is free again.
    dev.run_with(&second, &cfg).unwrap();
    assert_eq!(Dump::open(&dir).unwrap().records.len(), 5 * 4);
}

/// The faithful model: a payload published without its write-back is caught on a2a3; the
/// correct code passes on every board.
#[test]
fn a_payload_published_without_write_back_is_caught_and_the_correct_lane_passes_everywhere() {
    let _s = serial();
    fn clean<B: Board>()
    where
        B::Platform: Platform<Device = pto_sim::SimDevice<<B::Platform as pto::hal::DevicePlatform>::Contract>>,
    {
        let dev = device::<B>(true);
        let (_x, _y, g) = rows(&dev, 6, |_| 0);
        let (rep, d) = run_dump(&dev, &g, RunConfig::default().with_dump(Some(DumpLevel::Full)), B::NAME);
        assert_eq!(rep.dump.unwrap().accounting.dropped, Some(0), "{}", B::NAME);
        assert_eq!(d.records.len(), 6 * 4, "{}", B::NAME);
        assert!(dev.platform().take_violations().is_empty(), "{}", B::NAME);
    }
    clean::<SimA2a3>();
    clean::<SimA5>();
    clean::<SimMini>();

    let dev = device::<SimA2a3>(true);
    let (_x, _y, g) = rows(&dev, 6, |_| 0);
    let _b = breakage::activate(breakage::SKIP_DUMP_CLEAN);
    let dir = tmp("broken");
    let r = dev.run_with(&g, &RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&dir));
    match r {
        Err(Error::Platform { op, message, .. }) => {
            assert_eq!(op, "args-dump collection", "{message}");
            assert!(message.contains(pto_sim::Missing::AicpuClean.describe()), "{message}");
        }
        other => panic!("expected the collector to report the stale payload, got {other:?}"),
    }
}

/// A dumping run's manifest read back through its types: the document says what the run did,
/// field for field, and written again it is the same text.
#[test]
fn a_written_manifest_reads_back_through_its_types() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let (x, y, g) = rows(&dev, 3, |_| 0);
    let dir = tmp("manifest");
    let r = dev.run_with(&g, &RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&dir)).unwrap();
    let rep = r.dump.as_ref().unwrap();
    let path = dir.join("args_dump.json");
    let m = Manifest::read(&path).unwrap();
    assert_eq!(m.format_version, pto::runtime::host::dump::FORMAT_VERSION);
    assert_eq!(m.run, RunInfo { epoch: r.epoch, runtime: RuntimeKind::HostBuiltGraph, complete: true });
    assert_eq!(m.level, DumpLevel::Full);
    assert_eq!(m.accounting, rep.accounting);
    assert_eq!(m.bin_file, BinFile::ArgsBin);
    // Per task: x (input, before), y (in-out, before and after), the scalar (before).
    assert_eq!(m.records.len(), 3 * 4);
    let f = accumulate(&dev).0;
    for rec in &m.records {
        match rec {
            ManifestRecord::Tensor(t) => {
                assert_eq!((t.dtype, &t.shape[..], &t.strides[..]), (Some(DType::F32), &[1, 16][..], &[16, 1][..]));
                assert_eq!(t.func_ids, vec![f]);
                assert_eq!((t.payload_len, t.view_bytes, t.truncated), (64, 64, false));
                assert_eq!(t.offset, Some(u64::from(t.task) * 16));
                let (dir, base) = if t.arg == 0 { (ArgDirection::Input, &x) } else { (ArgDirection::InOut, &y) };
                assert_eq!(t.direction, dir);
                assert_eq!(t.addr, base.addr().0 + u64::from(t.task) * 64);
                if t.arg == 0 {
                    assert_eq!(t.stage, Stage::BeforeDispatch);
                }
            }
            ManifestRecord::Scalar(s) => {
                assert_eq!((s.arg, s.value, s.stage), (2, u64::from(s.task), Stage::BeforeDispatch));
                assert_eq!(s.direction, ArgDirection::Input);
            }
        }
    }
    // The reader's flat records are the manifest's.
    let d = Dump::open(&dir).unwrap();
    assert_eq!(d.records, m.records.iter().map(Record::from).collect::<Vec<_>>());
    assert_eq!((d.level, d.run, d.accounting), (m.level, m.run, m.accounting));
    assert_eq!(m.to_json(), std::fs::read_to_string(&path).unwrap());
}

/// Every dtype's payload, 64-bit integers beyond 2^53 and a 64-bit scalar among them, reads
/// back exactly, with its dtype named.
#[test]
fn every_dtype_is_recorded_and_read_back_exactly() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let w = kit::every_dtype(&dev).unwrap();
    let (_, d) = run_dump(&dev, &w.graph, RunConfig::default().with_dump(Some(DumpLevel::Full)), "dtypes");
    for (arg, (dtype, bytes)) in w.expected.iter().enumerate() {
        let r = d.find(0, arg as u32, Stage::BeforeDispatch).unwrap_or_else(|| panic!("argument {arg}"));
        assert_eq!(r.dtype, Some(*dtype), "argument {arg}");
        assert_eq!(d.bytes(r), &bytes[..], "{dtype:?}");
    }
    let u = d.find(0, 9, Stage::BeforeDispatch).unwrap();
    assert_eq!(d.data::<u64>(u).unwrap(), vec![u64::MAX, (1 << 53) + 1, 0]);
    let i = d.find(0, 4, Stage::BeforeDispatch).unwrap();
    assert_eq!(d.data::<i64>(i).unwrap(), vec![i64::MIN, -(1 << 53) - 1, (1 << 53) + 1, i64::MAX]);
    let s = d.find(0, w.expected.len() as u32, Stage::BeforeDispatch).unwrap();
    assert!(s.is_scalar());
    assert_eq!(s.value, Some(kit::EveryDtype::<pto::SelectedPlatform>::SCALAR));
}

/// A manifest of another version, or missing a field, or naming an unknown dtype, is refused
/// with the file and the version or the field named.
#[test]
fn a_manifest_of_another_version_or_missing_a_field_is_refused_by_name() {
    let _s = serial();
    let dev = pto::open().unwrap();
    let (_x, _y, g) = rows(&dev, 1, |_| 0);
    let good = tmp("good");
    let _ = dev.run_with(&g, &RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&good)).unwrap();
    let text = std::fs::read_to_string(good.join("args_dump.json")).unwrap();
    // The first occurrence of `from` replaced by `to` (the host writes compact JSON).
    let edited = |name: &str, from: &str, to: &str| {
        assert!(text.contains(from), "{from}");
        let dir = tmp(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(good.join("args.bin"), dir.join("args.bin")).unwrap();
        std::fs::write(dir.join("args_dump.json"), text.replacen(from, to, 1)).unwrap();
        (Dump::open(&dir).unwrap_err(), dir.join("args_dump.json"))
    };
    let v = pto::runtime::host::dump::FORMAT_VERSION;
    let (e, p) = edited("vnext", &format!(r#""format_version":{v}"#), &format!(r#""format_version":{}"#, v + 1));
    assert!(
        matches!(&e, DumpError::Version { found: Some(f), expected, .. } if *f == (v + 1).to_string() && *expected == v),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(
        m.contains(&p.display().to_string())
            && m.contains(&format!("format_version is {}, this reader reads version {v}", v + 1))
    );
    let (e, _) = edited("v0", &format!(r#""format_version":{v},"#), "");
    assert!(e.to_string().ends_with(&format!("no format_version (this reader reads version {v})")), "{e}");
    let (e, p) = edited("noseq", r#""seq":0,"#, "");
    let m = e.to_string();
    assert!(matches!(e, DumpError::Format { .. }), "{m}");
    assert!(m.contains(&p.display().to_string()) && m.contains("missing field `seq`"), "{m}");
    let (e, _) = edited("f8", r#""dtype":"f32""#, r#""dtype":"f8""#);
    assert!(e.to_string().contains("unknown variant `f8`"), "{e}");
    let (e, _) = edited("extra", r#""complete":true"#, r#""complete":true,"host":"x""#);
    assert!(e.to_string().contains("unknown field `host`"), "{e}");
}

/// A good full dump of three `rows` tasks (12 records, 3 × 2 f32 tensors of 64 bytes at
/// dispatch, 3 at completion, 3 scalars), and a copy of it edited by `edit` (its manifest as a
/// JSON value, and `args.bin`'s bytes): what `Dump::open` says of the copy.
fn open_edited(name: &str, edit: impl FnOnce(&mut serde_json::Value, &mut Vec<u8>)) -> Result<Dump, String> {
    let dev = pto::open().unwrap();
    let (_x, _y, g) = rows(&dev, 3, |_| 0);
    let good = tmp(&format!("{name}-good"));
    let _ = dev.run_with(&g, &RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(&good)).unwrap();
    Dump::open(&good).expect("the dump as written reads back");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(good.join("args_dump.json")).unwrap()).unwrap();
    let mut bin = std::fs::read(good.join("args.bin")).unwrap();
    edit(&mut m, &mut bin);
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("args.bin"), bin).unwrap();
    std::fs::write(dir.join("args_dump.json"), m.to_string()).unwrap();
    Dump::open(&dir).map_err(|e| e.to_string())
}

/// The first tensor record of a manifest value.
fn first_tensor(m: &mut serde_json::Value) -> &mut serde_json::Value {
    m["records"].as_array_mut().unwrap().iter_mut().find(|r| r["kind"] == "tensor").unwrap()
}

/// A manifest whose record list is longer or shorter than its `accounting.collected` is
/// refused, naming `records`, the count found and the count `accounting.collected` gives.
/// (Before: read as it was, 24 records or 6 with `collected: 12`.)
#[test]
fn a_record_count_other_than_collected_is_refused_by_name() {
    let _s = serial();
    let doubled = open_edited("count-doubled", |m, _| {
        let recs = m["records"].as_array().unwrap().clone();
        assert_eq!(recs.len(), 12);
        m["records"].as_array_mut().unwrap().extend(recs);
    })
    .map(|d| d.records.len())
    .unwrap_err();
    assert!(doubled.contains("records is 24 records, expected 12 records (accounting.collected)"), "{doubled}");
    let halved = open_edited("count-halved", |m, _| {
        m["records"].as_array_mut().unwrap().truncate(6);
    })
    .map(|d| d.records.len())
    .unwrap_err();
    assert!(halved.contains("records is 6 records, expected 12 records (accounting.collected)"), "{halved}");
}

/// An f32 record whose `payload_len` is not its view's (3 bytes of a [1, 16] f32 view), whose
/// `view_bytes` is not its dtype times its shape, or that says it is truncated with the whole
/// view or a part of an element, is refused naming the field, the value found and the value
/// expected. (Before: all four read, the 3-byte payload as 3 bytes of f32.)
#[test]
fn a_payload_length_that_disagrees_with_dtype_and_shape_is_refused_by_name() {
    let _s = serial();
    let e = open_edited("len3", |m, _| first_tensor(m)["payload_len"] = 3.into()).map(|_| ()).unwrap_err();
    assert!(e.contains("records[0].payload_len (task 0 arg 0 before_dispatch) is 3, expected view_bytes 64"), "{e}");
    let e = open_edited("view3", |m, _| {
        let t = first_tensor(m);
        t["view_bytes"] = 3.into();
        t["payload_len"] = 3.into();
    })
    .map(|_| ())
    .unwrap_err();
    assert!(
        e.contains("records[0].view_bytes (task 0 arg 0 before_dispatch) is 3, expected 64 (f32 × [1, 16])"),
        "{e}"
    );
    let e = open_edited("trunc-whole", |m, _| first_tensor(m)["truncated"] = true.into()).map(|_| ()).unwrap_err();
    assert!(e.contains("records[0].payload_len") && e.contains("is 64, expected a truncated prefix"), "{e}");
    let e = open_edited("trunc3", |m, _| {
        let t = first_tensor(m);
        t["truncated"] = true.into();
        t["payload_len"] = 3.into();
    })
    .map(|_| ())
    .unwrap_err();
    assert!(e.contains("is 3, expected a truncated prefix") && e.contains("a multiple of 4"), "{e}");
}

/// One bit flipped in `args.bin` is refused: the record whose payload holds it is named, with
/// the checksum the manifest gives and the one the bytes have. (Before: read, the flipped
/// value returned as data; there was no checksum.)
#[test]
fn a_bit_flipped_payload_is_refused_by_its_checksum() {
    let _s = serial();
    let e = open_edited("flip", |_, bin| {
        assert!(bin.len() > 100);
        bin[100] ^= 0x10;
    })
    .map(|_| ())
    .unwrap_err();
    assert!(e.contains("].payload_crc32 (task ") && e.contains("the payload was changed after it was written"), "{e}");
}
