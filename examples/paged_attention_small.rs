//! Paged attention on three sequences of 2, 3 and 4 KV blocks (16 tokens, head dim 16) whose
//! blocks are scattered over a shared K/V cache through a block table: per KV block QK (AIC),
//! an online-softmax step (AIV), PV (AIC) and a rescale-add (AIV), chained per sequence
//! through its inout state. Checked against plain host attention.
//!
//! `cargo run --release --example paged_attention_small [-- --runtime hbg|trb|both]`. Both
//! runtimes by default.

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main(
        "paged_attention_small",
        Selected::NAME,
        pto::open,
        pto_testkit::attention::paged_attention_small,
    )
}
