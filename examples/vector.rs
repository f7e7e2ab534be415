//! f = (a+b+1)(a+b+2) + (a+b) on 16384 f32, on the selected board, checked against a golden
//! computed on the host.
//!
//! `cargo run --release --example vector` (add `--features board-sim-a5` for the a5 board).

#[path = "common/mod.rs"]
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    let (dev, k) = match common::setup() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("vector: cannot open the device: {e}");
            return ExitCode::FAILURE;
        }
    };
    match common::vector(&dev, &k) {
        Ok(o) => {
            println!("{}", o.summary());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vector FAIL: {e}");
            ExitCode::FAILURE
        }
    }
}
