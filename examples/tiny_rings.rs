//! The `tiny_rings` workload on both runtimes (`--runtime hbg|trb|both`), checked against its
//! golden. See `testkits/examples/src/orchestrations.rs` for the orchestration.
//!
//! `cargo run --release --example tiny_rings`

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main("tiny_rings", Selected::NAME, pto::open, pto_testkit::tiny_rings)
}
