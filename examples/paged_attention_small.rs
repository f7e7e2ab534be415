//! Paged attention on three sequences of 2, 3 and 4 KV blocks (16 tokens, head dim 16) whose
//! blocks are scattered over a shared K/V cache through a block table: per KV block QK (AIC),
//! an online-softmax step (AIV), PV (AIC) and a rescale-add (AIV), chained per sequence
//! through its inout state. Checked against plain host attention.
//!
//! `cargo run --release --example paged_attention_small [-- --runtime hbg|trb|both]`. Both
//! runtimes by default.

#[path = "common/mod.rs"]
mod common;

#[path = "common/attention.rs"]
mod attention;

fn main() -> std::process::ExitCode {
    common::example_main("paged_attention_small", attention::paged_attention_small)
}
