//! Batched tile GEMM: C[b] += A[b] · B[b] over 16×16 f32 tiles (batch 4, 4×4 output tiles,
//! 8 k-steps), one AIC matmul and one AIV accumulate per k-step: 1024 tasks, one scope per
//! output tile. Checked against a host matmul.
//!
//! `cargo run --release --example bgemm [-- --runtime hbg|trb|both]`. Both runtimes by default.

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main("bgemm", Selected::NAME, pto::open, pto_testkit::attention::bgemm)
}
