//! `pto dump` and `pto trace` on files a run wrote: they read them through the documents'
//! types, `pto dump --json` writes numbers as JSON numbers (every dtype, 64-bit integers
//! exactly), and a file of another version is refused with its name and the versions.

use std::path::Path;
use std::process::{Command, Output};

use pto::runtime::dump::DumpLevel;
use pto::runtime::graph::DType;
use pto::runtime::host::RunConfig;
use serde_json::Value;

/// A scratch directory for this test's files, removed when the test ends.
fn tmp(name: &str) -> pto_testkit::ScratchDir {
    pto_testkit::ScratchDir::new("pto-cli-test", name)
}

fn pto(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pto")).args(args).output().expect("run pto")
}

fn ok_json(args: &[&str]) -> Value {
    let o = pto(args);
    assert!(o.status.success(), "pto {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("pto {args:?}: not JSON: {e}"))
}

/// An f32 as `pto dump --json` should print it: the JSON number that reads back as the same
/// f32, or the string of a non-finite value.
fn f32_value(v: f32) -> Value {
    if v.is_finite() {
        serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap()
    } else {
        non_finite(v.into())
    }
}

/// An f64 likewise.
fn f64_value(v: f64) -> Value {
    if v.is_finite() { serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap() } else { non_finite(v) }
}

fn non_finite(v: f64) -> Value {
    Value::from(if v.is_nan() {
        "NaN"
    } else if v > 0.0 {
        "inf"
    } else {
        "-inf"
    })
}

/// The values `pto dump --json` should print for `bytes` of `dtype`.
fn want(dtype: DType, bytes: &[u8]) -> Vec<Value> {
    macro_rules! each {
        ($t:ty, $f:expr) => {
            bytes.chunks_exact(size_of::<$t>()).map(|c| $f(<$t>::from_le_bytes(c.try_into().unwrap()))).collect()
        };
    }
    match dtype {
        DType::F32 => each!(f32, f32_value),
        DType::F64 => each!(f64, f64_value),
        DType::F16 => each!(u16, |h| f32_value(half(h))),
        DType::BF16 => each!(u16, |h| f32_value(f32::from_bits(u32::from(h) << 16))),
        DType::I8 => each!(i8, Value::from),
        DType::I16 => each!(i16, Value::from),
        DType::I32 => each!(i32, Value::from),
        DType::I64 => each!(i64, Value::from),
        DType::U8 => each!(u8, Value::from),
        DType::U16 => each!(u16, Value::from),
        DType::U32 => each!(u32, Value::from),
        DType::U64 => each!(u64, Value::from),
    }
}

/// The test values' f16s (the every-dtype workload's), by table.
fn half(h: u16) -> f32 {
    match h {
        0x3c00 => 1.0,
        0xc100 => -2.5,
        0x7bff => 65504.0,
        0x0001 => 2f32.powi(-24),
        0x7c00 => f32::INFINITY,
        other => panic!("no f16 {other:#06x} in the table"),
    }
}

/// Dump the every-dtype workload at Full into `dir`.
fn every_dtype_dump(dir: &Path) -> Vec<(DType, Vec<u8>)> {
    let dev = pto::open().unwrap();
    let w = pto_testkit::every_dtype(&dev).unwrap();
    let cfg = RunConfig::default().with_dump(Some(DumpLevel::Full)).with_dump_dir(dir);
    dev.run_with(&w.graph, &cfg).unwrap();
    w.expected
}

#[test]
fn dump_json_writes_every_dtype_as_numbers() {
    let dir = tmp("dtypes");
    let expected = every_dtype_dump(&dir);
    let d = dir.to_str().unwrap();
    // The summary: typed fields, and the first 16 values of each payload (all of them here).
    let v = ok_json(&["dump", d, "--json", "--task", "0"]);
    assert_eq!(v["format_version"], 1);
    assert_eq!(v["level"], "full");
    assert_eq!(v["run"]["runtime"], "hbg");
    assert_eq!(v["run"]["complete"], true);
    assert_eq!(v["accounting"]["dropped"], 0);
    let records = v["tasks"][0]["records"].as_array().unwrap();
    for (arg, (dtype, bytes)) in expected.iter().enumerate() {
        let r = &records[arg];
        assert_eq!(r["arg"], arg);
        assert_eq!(r["dtype"], serde_json::to_value(dtype).unwrap());
        assert_eq!(r["direction"], "input");
        assert_eq!(r["first_values"], Value::from(want(*dtype, bytes)), "{dtype:?}");
        // `--task 0 --arg K`: the whole argument.
        let t = ok_json(&["dump", d, "--json", "--task", "0", "--arg", &arg.to_string()]);
        assert_eq!(t["records"][0]["values"], Value::from(want(*dtype, bytes)), "{dtype:?}");
    }
    // 64-bit integers beyond 2^53 are JSON integers, exact.
    let u64s = &records[9]["first_values"];
    assert_eq!(u64s[0].as_u64(), Some(u64::MAX));
    assert_eq!(u64s[1].as_u64(), Some((1 << 53) + 1));
    let i64s = &records[4]["first_values"];
    assert_eq!(i64s[0].as_i64(), Some(i64::MIN));
    assert_eq!(i64s[2].as_i64(), Some((1 << 53) + 1));
    // The scalar: its raw 64-bit value, an integer; no values.
    let s = &records[expected.len()];
    assert_eq!(s["value"].as_u64(), Some(u64::MAX - 1));
    assert_eq!(s["first_values"], Value::Null);
    // The text listing decodes every dtype too.
    let o = pto(&["dump", d, "--task", "0"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(o.status.success(), "{text}");
    assert!(text.contains("f16 [5] strides [1] offset 0 payload 10 bytes = [1, -2.5, 65504, 0.000000059604645, inf"));
    assert!(
        text.contains("u64 [3] strides [1] offset 0 payload 24 bytes = [18446744073709551615, 9007199254740993, 0]")
    );
}

#[test]
fn a_document_of_another_version_is_refused_with_its_name() {
    // A dump.
    let dir = tmp("version");
    every_dtype_dump(&dir);
    let m = dir.join("args_dump.json");
    let text = std::fs::read_to_string(&m).unwrap();
    assert!(text.contains(r#""format_version":2"#), "the host writes compact JSON");
    std::fs::write(&m, text.replacen(r#""format_version":2"#, r#""format_version":7"#, 1)).unwrap();
    let o = pto(&["dump", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&m.display().to_string()) && err.contains("format_version is 7, this reader reads version 2"));
    // A trace, written by `pto run --trace`.
    let t_dir = tmp("trace");
    std::fs::create_dir_all(&t_dir).unwrap();
    let t = t_dir.join("trace.json");
    let o = pto(&["run", "vector", "--runtime", "hbg", "--trace", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = pto(&["trace", t.to_str().unwrap(), "--summary"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("critical path:"), "{summary}");
    assert!(summary.contains("host (time per phase") && summary.contains("fence "), "{summary}");
    let text = std::fs::read_to_string(&t).unwrap();
    std::fs::write(&t, text.replacen(r#""format_version":2,"#, "", 1)).unwrap();
    let o = pto(&["trace", t.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains(&t.display().to_string()) && err.contains("no otherData.format_version"), "{err}");
}

/// `pto run --json` prints one JSON object per runtime and nothing else on standard output:
/// the workload, board, runtime, executor that ran, cache model, tasks, timings and PASS, with
/// its format version; `--trace` lines go to standard error then.
#[test]
fn run_json_is_one_object_per_runtime() {
    let trace_dir = tmp("run-json");
    std::fs::create_dir_all(&trace_dir).unwrap();
    let trace = trace_dir.join("trace.json");
    let o = pto(&[
        "run",
        "vector",
        "--board",
        "sim-mini",
        "--cache",
        "faithful:5",
        "--json",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))).collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (l, rt) in lines.iter().zip(["hbg", "trb"]) {
        assert_eq!(l["format_version"], 2, "{l}");
        assert_eq!(l["checks"], "off", "{l}");
        assert_eq!(l["schedule"], "os", "{l}");
        assert_eq!(l["workload"], "vector", "{l}");
        assert_eq!(l["board"], "sim-mini", "{l}");
        assert_eq!(l["runtime"], rt, "{l}");
        assert_eq!(l["cache_model"], "faithful:5", "{l}");
        assert_eq!(l["tasks"], 5, "{l}");
        assert_eq!(l["result"], "PASS", "{l}");
        assert!(l["run_us"].as_f64().is_some_and(|t| t > 0.0), "{l}");
        assert!(["legacy", "resident"].contains(&l["executor"].as_str().unwrap()), "{l}");
    }
    assert!(lines[0]["build_us"].is_number() && lines[1]["orchestration_us"].is_number());
    assert!(String::from_utf8_lossy(&o.stderr).contains("trace"), "the trace line went to stderr");
    let _ = std::fs::remove_file(&trace);
    let _ = std::fs::remove_file(trace.with_extension("trb.json"));
}

#[test]
fn run_json_names_the_checks_that_ran() {
    let o = pto(&["run", "manual_scope", "--runtime", "trb", "--check", "race,init", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l: Value = serde_json::from_str(String::from_utf8(o.stdout).unwrap().trim()).unwrap();
    assert_eq!((l["checks"].as_str(), l["result"].as_str()), (Some("race,init"), Some("PASS")), "{l}");
    let o = pto(&["run", "vector", "--check", "race,,init"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("race,,init"));
}

/// A reader that goes away (`pto run vector | head -0`) is not a failure: the command runs to
/// the end, exits 0 and does not panic. The read end is closed before the command can have
/// printed anything (it opens a device and runs a workload first), so every line it prints
/// meets a closed pipe.
#[test]
fn a_closed_standard_output_ends_nothing_and_panics_nothing() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pto"))
        .args(["run", "vector"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run pto");
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("wait for pto");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.status.success(), "{:?}: {err}", o.status);
}
