//! One add, then 512 `+1` tasks each reading the previous output: out = a + b + 512.
//!
//! `cargo run --release --example chain513 [-- --dump full --dump-dir DIR]` (the args dump:
//! every task's input at dispatch and output at completion; read it with `pto dump DIR/hbg`).

use pto::board::{Board, Selected};

fn main() -> std::process::ExitCode {
    pto_testkit::example_main("chain513", Selected::NAME, pto::open, pto_testkit::chain513)
}
