//! The args dump: selection levels, the two stages, payloads against the goldens, strided
//! views, truncation, back-pressure and accounting, the files and their reader.

use pto::runtime::dump::DumpLevel;
use pto::runtime::host::dump::{Dump, Stage};
use pto::runtime::orch::RuntimeKind;
use pto_testkit as kit;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pto-dump-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// chain513 at Full: every task's input at dispatch and output at completion; task k's output
/// at completion equals task k+1's input at dispatch, bit for bit, and each equals the golden.
#[test]
fn chain513_full_records_every_boundary_and_matches_the_golden() {
    let (dev, k) = kit::setup(pto::open).unwrap();
    for rt in kit::RUNTIMES {
        let dir = tmp("chain513");
        let o = kit::dumped(Some(DumpLevel::Full), Some(dir.clone()), || kit::chain513(&dev, &k, rt)).unwrap();
        let rep = o.report.dump.as_ref().expect("a dump report");
        let acc = rep.accounting;
        eprintln!("{rt:?}: {acc:?} bytes {}", rep.payload_bytes);
        assert_eq!(acc.total, Some(acc.collected + acc.dropped.unwrap()), "{rt:?}: {acc:?}");
        assert_eq!(acc.dropped, Some(0), "{rt:?}");
        let d = Dump::open(&rep.dir).unwrap();
        assert_eq!(d.accounting, acc);
        // 513 tasks: the add has 2 inputs + 1 output; each +1 has 1 input, 1 output, 1 scalar.
        assert_eq!(d.records.len(), 3 + 512 * 3, "{rt:?}");
        let n = kit::CHAIN_N as usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
        let mut tasks: Vec<u32> = d.by_task().keys().copied().collect();
        tasks.sort();
        assert_eq!(tasks.len(), 513);
        for (k, &t) in tasks.iter().enumerate() {
            let out = d.find(t, if k == 0 { 2 } else { 1 }, Stage::AfterCompletion).expect("output record");
            let got: Vec<f32> = d.data(out).unwrap();
            let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y + k as f32).collect();
            assert_eq!(got, want, "{rt:?} task {k} output");
            if k + 1 < tasks.len() {
                let next_in = d.find(tasks[k + 1], 0, Stage::BeforeDispatch).expect("input record");
                assert_eq!(d.bytes(next_in), d.bytes(out), "{rt:?} task {} input", k + 1);
            }
        }
        let _ = rt == RuntimeKind::HostBuiltGraph;
    }
}
