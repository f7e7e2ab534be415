//! The `manual_scope` workload on both runtimes (`--runtime hbg|trb|both`), checked against its
//! golden. See `examples/common/mod.rs` for the orchestration.
//!
//! `cargo run --release --example manual_scope`

#[path = "common/mod.rs"]
mod common;

fn main() -> std::process::ExitCode {
    common::example_main("manual_scope", common::manual_scope)
}
