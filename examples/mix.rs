//! MIX (1C2V) tasks: an AIC tile matmul and two AIV lanes each handling half a tile.
//!
//! `cargo run --release --example mix`

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main("mix", Selected::NAME, pto::open, pto_testkit::mix)
}
