//! One add, then 512 `+1` tasks each reading the previous output: out = a + b + 512.
//!
//! `cargo run --release --example chain513`

#[path = "common/mod.rs"]
mod common;

use std::process::ExitCode;

fn main() -> ExitCode {
    let (dev, k) = match common::setup() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("chain513: cannot open the device: {e}");
            return ExitCode::FAILURE;
        }
    };
    match common::chain513(&dev, &k) {
        Ok(o) => {
            println!("{}", o.summary());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chain513 FAIL: {e}");
            ExitCode::FAILURE
        }
    }
}
