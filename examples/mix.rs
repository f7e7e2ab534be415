//! MIX (1C2V) tasks: an AIC tile matmul and two AIV lanes each handling half a tile.
//!
//! `cargo run --release --example mix`

#[path = "common/mod.rs"]
mod common;

fn main() -> std::process::ExitCode {
    common::example_main("mix", common::mix)
}
