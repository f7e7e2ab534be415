//! MIX (1C2V) tasks: an AIC tile matmul and two AIV lanes each handling half a tile.
//!
//! `cargo run --release --example mix`

#[path = "common/mod.rs"]
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    let (dev, k) = match common::setup() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("mix: cannot open the device: {e}");
            return ExitCode::FAILURE;
        }
    };
    match common::mix(&dev, &k) {
        Ok(o) => {
            println!("{}", o.summary());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mix FAIL: {e}");
            ExitCode::FAILURE
        }
    }
}
