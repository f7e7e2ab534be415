//! What the loom models share (`#[cfg(all(test, loom))]`): the loom device ([`hal`]), running
//! a model and tallying its outcomes ([`harness`]), spawning participants in every order
//! ([`jobs`]), and the std prelude a model file of this `no_std` crate imports ([`prelude`]).
//!
//! The models live beside the code they check, as `loom_tests` child modules of their rooms
//! (`exec::aicpu::queue`, `host::slots`, `exec::legacy`, `lifecycle`, `trb`, `exec::aicpu`,
//! `exec::resident`, `exec::resident::capture`, `dump`), and run as library tests:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std,breakage --lib loom_tests
//! ```
//!
//! Without `--cfg loom` none of them is compiled. Every model is one `#[test]` whose doc
//! comment states the invariant it checks; each prints its execution count and wall time
//! (`.ci/run` runs them in groups, see "loom models" there).
//!
//! What loom does **not** cover, so these models do not either:
//!
//! * Load buffering (a load reading a store that comes later in the interleaving) is not
//!   modelled, so a missing barrier between a core's payload **read** and its later ACK store
//!   would go unnoticed.
//! * Loom 0.7's partial-order reduction only remembers the last access to each atomic, so it
//!   can miss interleavings in which one thread's early load should be moved after another
//!   thread's load-then-RMW (tokio-rs/loom#392, #166). The models therefore keep every
//!   protocol participant in a spawned thread, run under several spawn orders, and assert that
//!   each interesting outcome is actually reached.
//! * Loom does not guarantee that a thread spinning with `yield_now` is eventually served the
//!   newest value (seen with the ready queue: a consumer read a published slot's initial
//!   sequence number ~60 times across yields), so models where several threads wait for each
//!   other bound those waits or use a preemption bound, and check the result afterwards.
//! * Preemption-bounded models (marked as such) cover every interleaving with at most that many
//!   preemptions, not every interleaving. `LOOM_MAX_PREEMPTIONS` overrides every model's bound.
//! * The transcribed AICPU and core loops are only as faithful as the transcription: they
//!   mirror `exec/legacy/sched/` / `exec/legacy/core.rs` as of this writing and must follow
//!   changes there.

#[allow(dead_code)]
pub(crate) mod hal;
pub(crate) mod harness;
pub(crate) mod jobs;

/// The std prelude and macros a model file imports (the crate is `no_std`).
#[allow(unused_imports)]
pub(crate) mod prelude {
    pub(crate) use std::borrow::ToOwned;
    pub(crate) use std::boxed::Box;
    pub(crate) use std::string::{String, ToString};
    pub(crate) use std::vec::Vec;
    pub(crate) use std::{eprintln, format, println, vec};
}
