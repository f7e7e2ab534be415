//! The `tiny_rings` workload on both runtimes (`--runtime hbg|trb|both`), checked against its
//! golden. See `examples/common/mod.rs` for the orchestration.
//!
//! `cargo run --release --example tiny_rings`

#[path = "common/mod.rs"]
mod common;

fn main() -> std::process::ExitCode {
    common::example_main("tiny_rings", common::tiny_rings)
}
