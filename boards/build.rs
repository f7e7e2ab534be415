//! Resolves the board features of `pto-boards` to one board and emits it as
//! `cfg(board = "…")`, from which `src/lib.rs` defines `Selected`.
//!
//! The rule: the default board (`board-sim-a2a3`) yields to one non-default board feature; two
//! non-default board features, or none at all, fail the build with a message naming every
//! selected feature and the allowed ones.

use std::process::ExitCode;

/// Every board feature, with the value of `cfg(board)` it selects. The first is the default.
const BOARDS: [(&str, &str); 5] = [
    ("board-sim-a2a3", "sim-a2a3"),
    ("board-sim-a5", "sim-a5"),
    ("board-sim-mini", "sim-mini"),
    ("board-a2a3", "a2a3"),
    ("board-a5", "a5"),
];

fn main() -> ExitCode {
    println!("cargo::rerun-if-changed=build.rs");
    let values: Vec<String> = BOARDS.iter().map(|(_, cfg)| format!("\"{cfg}\"")).collect();
    println!("cargo::rustc-check-cfg=cfg(board, values({}))", values.join(", "));

    // Every enabled `board-*` feature (cargo exports feature `board-x-y` as
    // `CARGO_FEATURE_BOARD_X_Y`), known or not.
    let mut selected: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| k.strip_prefix("CARGO_FEATURE_BOARD_").map(|rest| rest.to_owned()))
        .map(|rest| format!("board-{}", rest.to_ascii_lowercase().replace('_', "-")))
        .collect();
    selected.sort();
    let allowed = BOARDS
        .iter()
        .enumerate()
        .map(|(i, (f, _))| if i == 0 { format!("`{f}` (the default)") } else { format!("`{f}`") })
        .collect::<Vec<_>>()
        .join(", ");
    let quoted = |fs: &[String]| fs.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");

    let fail = |why: String| {
        eprintln!(
            "error: pto-boards: {why}. Enable exactly one board feature (a non-default one wins over the default); allowed: {allowed}."
        );
        ExitCode::FAILURE
    };
    if let Some(unknown) = selected.iter().find(|f| !BOARDS.iter().any(|(b, _)| b == f)) {
        return fail(format!("unknown board feature `{unknown}` (selected: {})", quoted(&selected)));
    }
    let (default, others) = (BOARDS[0].0, &BOARDS[1..]);
    let non_default: Vec<&(&str, &str)> = others.iter().filter(|(f, _)| selected.iter().any(|s| s == f)).collect();
    let board = match non_default.as_slice() {
        [one] => one.1,
        [] if selected.iter().any(|s| s == default) => BOARDS[0].1,
        [] => return fail("no board selected (no `board-*` feature is enabled)".to_owned()),
        _ => return fail(format!("more than one non-default board selected (enabled: {})", quoted(&selected))),
    };
    println!("cargo::rustc-cfg=board=\"{board}\"");
    ExitCode::SUCCESS
}
