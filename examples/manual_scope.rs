//! The `manual_scope` workload on both runtimes (`--runtime hbg|trb|both`), checked against its
//! golden. See `testkits/examples/src/orchestrations.rs` for the orchestration.
//!
//! `cargo run --release --example manual_scope`

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main("manual_scope", Selected::NAME, pto::open, pto_testkit::manual_scope)
}
