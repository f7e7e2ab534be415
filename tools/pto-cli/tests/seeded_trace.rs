//! A seeded schedule reproduces its trace file: the same `pto run --schedule N --trace FILE`
//! run twice, as two processes, writes the same bytes, on the host-built graph's legacy and
//! resident executors and on the device-side runtime (`docs/profiling.md`, "Seeded
//! schedules"). Before, the host's wall-clock phases were mapped onto the virtual counter and
//! set the origin, so every device `ts` of the device-side runtime's file shifted from run to
//! run.

use std::path::Path;
use std::process::Command;

/// A scratch directory for this test's files, removed when the test ends.
fn tmp(name: &str) -> pto_testkit::ScratchDir {
    pto_testkit::ScratchDir::new("pto-cli-seeded-trace", name)
}

/// `pto run chain513 --schedule 7 --trace FILE` with `extra`; the trace files it wrote.
fn run(dir: &Path, tag: &str, extra: &[&str]) -> Vec<Vec<u8>> {
    let file = dir.join(format!("{tag}.json"));
    let mut args = vec!["run", "chain513", "--schedule", "7", "--trace", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = Command::new(env!("CARGO_BIN_EXE_pto")).args(&args).output().expect("run pto");
    assert!(o.status.success(), "pto {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    let mut files = vec![std::fs::read(&file).expect("trace written")];
    let trb = dir.join(format!("{tag}.trb.json"));
    if trb.exists() {
        files.push(std::fs::read(trb).unwrap());
    }
    files
}

#[test]
fn a_seeded_schedule_writes_the_same_trace_file_every_time() {
    let dir = tmp("same");
    std::fs::create_dir_all(&*dir).unwrap();
    let configs: [(&str, &[&str]); 3] = [
        ("hbg-legacy", &["--runtime", "hbg", "--executor", "legacy"]),
        ("hbg-resident", &["--runtime", "hbg", "--executor", "resident"]),
        ("both", &["--runtime", "both"]),
    ];
    for (tag, extra) in configs {
        let first = run(&dir, &format!("{tag}-1"), extra);
        let second = run(&dir, &format!("{tag}-2"), extra);
        assert_eq!(first.len(), second.len(), "{tag}: the same files");
        for (a, b) in first.iter().zip(&second) {
            let doc: serde_json::Value = serde_json::from_slice(a).unwrap();
            let events = doc["traceEvents"].as_array().unwrap();
            assert!(events.iter().any(|e| e["cat"] == "task"), "{tag}: the device's records are in it");
            assert!(
                events.iter().all(|e| e["pid"] != 3),
                "{tag}: no host phase in a seeded schedule's trace (they are wall time)"
            );
            if a != b {
                let (da, db) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
                let line = da.lines().zip(db.lines()).find(|(x, y)| x != y);
                panic!("{tag}: the two runs' trace files differ, first at {line:?}");
            }
        }
        assert_eq!(first.len(), if tag == "both" { 2 } else { 1 }, "{tag}: files written");
    }
}
