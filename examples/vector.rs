//! f = (a+b+1)(a+b+2) + (a+b) on 16384 f32, on the selected board, checked against a golden
//! computed on the host.
//!
//! `cargo run --release --example vector [-- --runtime hbg|trb|both] [--trace t.json] [--svg t.svg]
//! [--dump partial|hybrid|full [--dump-dir DIR]]`
//! (add `--features board-sim-a5` for the a5 board). Both runtimes by default; every example
//! takes the same flags and refuses anything else (exit status 2).

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main("vector", Selected::NAME, pto::open, pto_testkit::vector)
}
