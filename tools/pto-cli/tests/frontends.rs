//! The command line agrees with the other front ends and with itself: output paths are made
//! ready before a run (never a PASS and then a failure to write), `--cache` takes every
//! `PTO_SIM_CACHE` spelling, `--executor resident` on the device-side runtime is refused as
//! the runtime and Python refuse it, `NO_COLOR` turns the `-v` log's colours off, `--json` is a
//! flag on every command that reports, and `pto explore` shows its progress on a terminal.

use std::process::{Command, Output};

use serde_json::Value;

/// A scratch directory for this test's files, removed when the test ends.
fn tmp(name: &str) -> pto_testkit::ScratchDir {
    pto_testkit::ScratchDir::new("pto-cli-frontends", name)
}

fn pto(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pto")).args(args).env_remove("NO_COLOR").output().expect("run pto")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// `pto ARGS` with standard output and standard error on a pseudo-terminal (util-linux
/// `script`), and `env` set: what the terminal showed. `None` where `script` is missing.
fn on_terminal(args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    let mut line = String::from(env!("CARGO_BIN_EXE_pto"));
    for a in args {
        line.push(' ');
        line.push_str(a);
    }
    let mut c = Command::new("script");
    c.args(["-qec", &line, "/dev/null"]).env_remove("NO_COLOR").env("COLUMNS", "120");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().ok()?;
    assert!(o.status.success(), "{line}: {}", String::from_utf8_lossy(&o.stdout));
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `--trace`, `--svg`, `--json-file` into a directory that does not exist: its parents are
/// created before the run, the files are written, and the command succeeds. A path that
/// cannot be made (its parent is a file) is refused before anything runs, naming the flag and
/// the path, with status 2 and no PASS. (Before: PASS printed, then exit 1 at the write.)
#[test]
fn output_paths_are_made_ready_before_the_run() {
    let dir = tmp("paths");
    let trace = dir.join("no/such/dir/t.json");
    let svg = dir.join("other/t.svg");
    let dump = dir.join("deep/dump");
    let o = pto(&[
        "run",
        "vector",
        "--runtime",
        "hbg",
        "--trace",
        trace.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
        "--dump",
        "full",
        "--dump-dir",
        dump.to_str().unwrap(),
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(trace.is_file() && svg.is_file() && dump.join("hbg/args_dump.json").is_file(), "{out}");

    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let bad = file.join("t.json");
    let o = pto(&["run", "vector", "--runtime", "hbg", "--trace", bad.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(!out.contains("PASS"), "nothing runs: {out}");
    assert!(err.contains(&format!("--trace {}", bad.display())) && err.contains("nothing was run"), "{err}");
    let o = pto(&["run", "vector", "--runtime", "hbg", "--dump", "full", "--dump-dir", bad.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(err.contains("--dump-dir") && !out.contains("PASS"), "{out}{err}");

    let json = dir.join("bench/out/b.json");
    let o = pto(&["bench", "--shapes", "chain", "--n", "8", "--rounds", "1", "--json-file", json.to_str().unwrap()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["results"].as_array().unwrap().len(), 2);
}

/// `--cache` takes every `PTO_SIM_CACHE` spelling, the AICPU write policy among them
/// (`faithful:42:back`), through the simulator's own parser; a bad one names the syntax.
/// (Before: `faithful:42:back` and `coherent:through` were refused.)
#[test]
fn cache_takes_every_pto_sim_cache_spelling() {
    for spec in ["coherent", "faithful", "faithful:42", "faithful:42:back", "faithful:7:through", "coherent:through"] {
        let o = pto(&["run", "vector", "--runtime", "hbg", "--board", "sim-mini", "--cache", spec, "--json"]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "--cache {spec}: {out}{err}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        let want = if spec.starts_with("faithful:42") {
            "faithful:42"
        } else if spec.starts_with("faithful:7") {
            "faithful:7"
        } else if spec == "faithful" {
            "faithful:24301"
        } else {
            "coherent"
        };
        assert_eq!(v["cache_model"], want, "--cache {spec}");
    }
    let o = pto(&["run", "vector", "--cache", "faithful:42:sideways"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("optionally followed by :through or :back"), "{err}");
}

/// `--executor resident` with the device-side runtime is refused before anything runs,
/// naming both flags and the runtime's reason, as the runtime (`ConfigError::ResidentRefused`)
/// and Python (`ConfigError`) refuse it. (Before: ran on the legacy executor, exit 0.)
#[test]
fn resident_on_the_device_side_runtime_is_refused_naming_both() {
    for rt in ["trb", "both"] {
        let o = pto(&["run", "vector", "--runtime", rt, "--executor", "resident"]);
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{out}{err}");
        assert!(!out.contains("PASS"), "{out}");
        assert!(err.contains(&format!("--runtime {rt} with --executor resident")), "{err}");
        assert!(err.contains("the device-side runtime schedules on the AICPU"), "{err}");
    }
    let o = pto(&["bench", "--runtime", "trb", "--executor", "resident", "--n", "8", "--rounds", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    let o = pto(&["run", "vector", "--runtime", "hbg", "--executor", "resident"]);
    assert!(o.status.success(), "{}", text(&o).1);
}

/// The `-v` log is coloured on a terminal, and not when `NO_COLOR` is set there.
/// (Before: coloured whatever `NO_COLOR` said.)
#[test]
fn the_verbose_log_honours_no_color_on_a_terminal() {
    let args = ["-v", "run", "vector", "--runtime", "hbg"];
    let Some(coloured) = on_terminal(&args, &[]) else { return };
    assert!(coloured.contains("\u{1b}["), "a terminal gets colours: {coloured}");
    let plain = on_terminal(&args, &[("NO_COLOR", "1")]).unwrap();
    assert!(plain.contains("fence") && !plain.contains("\u{1b}["), "{plain}");
}

/// `--json` is a flag that prints JSON on standard output on every command that reports:
/// `bench` (before: it took a path), `explore` and `trace` (before: no `--json`).
#[test]
fn json_is_a_flag_on_every_reporting_command() {
    let o = pto(&["bench", "--shapes", "chain", "--n", "8", "--rounds", "1", "--runtime", "hbg", "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!((v["format_version"].as_u64(), v["results"][0]["shape"].as_str()), (Some(1), Some("chain")));

    let o = pto(&["explore", "vector", "--runtime", "hbg", "--seeds", "2", "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!((v["result"].as_str(), v["schedules"].as_u64()), (Some("PASS"), Some(2)));

    let dir = tmp("trace-json");
    let t = dir.join("t.json");
    let o = pto(&["run", "vector", "--runtime", "hbg", "--trace", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o).1);
    let o = pto(&["trace", t.to_str().unwrap(), "--json"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["runtime"], "hbg");
    assert!(v["subtasks"].as_u64().unwrap() > 0 && !v["per_core"].as_array().unwrap().is_empty(), "{v}");
}

/// `pto explore` draws its progress on standard error when that is a terminal, and nothing
/// when it is not (a pipe, a log). (Before: no progress.)
#[test]
fn explore_shows_progress_on_a_terminal_only() {
    let args = ["explore", "vector", "--runtime", "hbg", "--seeds", "3"];
    let o = pto(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(!err.contains("schedules") && !err.contains("3/3"), "no bar off a terminal: {err:?}");
    let Some(shown) = on_terminal(&args, &[]) else { return };
    assert!(shown.contains("/3 schedules"), "{shown}");
}
