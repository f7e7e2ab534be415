//! One add, then 512 `+1` tasks each reading the previous output: out = a + b + 512.
//!
//! `cargo run --release --example chain513`

#[path = "common/mod.rs"]
mod common;

fn main() -> std::process::ExitCode {
    common::example_main("chain513", common::chain513)
}
