//! `pto-conformance`: the checks every implementation of the pto-rt HAL must pass.
//!
//! Each check is a function generic over the HAL traits it exercises and returns
//! `Result<(), Failure>`; a [`Failure`] names the check, the assertion that failed and the
//! expected and observed values. [`run_aicpu`] and [`run_aicore`] run every single-agent check an
//! agent of that tier supports and return a [`Report`] listing which checks ran and which were
//! skipped (and why). The tier is in the types: an AICPU agent implements
//! [`AicpuCache`](pto_hal::AicpuCache) (range maintenance) and an AICore
//! [`AicoreCache`](pto_hal::AicoreCache) (line maintenance), each cache check is bounded by the
//! one it exercises, and the checks of the other tier are reported as skipped. Checks that
//! need two parties — a producer and a consumer on different threads or tiers — are the
//! [`handoff`] functions; runners call them on two agents and [`Report::record`] the outcome.
//!
//! The crate is `#![no_std]` and allocation-free, so the same checks run inside a simulated
//! launch, on an emulated aarch64 CPU and on a device. The `std` feature adds `StdHostClock`
//! (a host time source for [`clock_rate`]) and `handoff::run_pair` (the two-thread publication
//! test on scoped threads).
//!
//! # What the checks establish, and how
//!
//! * **GM atomics** ([`gm_atomic`]): compare-exchange returns the observed value on success and
//!   failure; swap and fetch_add return the previous value (fetch_add wraps); fetch_or /
//!   fetch_and return the previous value and leave the documented result; the `u32` pair load
//!   returns `(low, high)` halves of one 64-bit word; `store_direct_u32` leaves the other half
//!   and the neighbouring word untouched.
//! * **No idle writes** ([`gm_atomic_writes`]): fetch_or of bits already set, fetch_and that
//!   clears nothing and a failing compare-exchange must not store. A store of the value already
//!   there is invisible to every load — on this thread or any other — so no value-based method,
//!   with or without a concurrent observer, can detect it. The check therefore asks the platform
//!   under test to *count its own stores* (a closure returning a running count) and compares the
//!   count around each operation; positive controls (operations that must store exactly once)
//!   prove the counter is live, so the negative checks are not vacuous. A platform that cannot
//!   count its stores gets the check skipped; the suite then still checks the HAL's default
//!   fetch_or / fetch_and algorithm over the platform's primitives through [`CountingAtomic`]
//!   (see [`Check::HalDefaultRmwWrites`]).
//! * **Caches** (per tier): AICPU range maintenance rounds out to whole
//!   [`LINE_BYTES`](pto_hal::LINE_BYTES) lines. Where the platform can report which lines a range
//!   operation touches (the a2a3 AICPU agent exposes the exact iterator its `dc` loops run),
//!   [`range_lines`] compares them with [`line_span`](pto_hal::line_span). The AICore line
//!   composites are checked by construction through [`CountingCache`], which records every line
//!   op the composites issue (and forwards it to the platform, so every line of the span is
//!   maintained for real). Every maintenance operation must preserve the agent's own data
//!   ([`cache_ranges`] on an AICPU, [`cache_lines`] and [`cache_invalidate_all`] on an AICore),
//!   and plain stores published with the tier's maintenance must be visible to device-direct
//!   loads, and the reverse after an invalidate ([`gm_coherence_aicpu`],
//!   [`gm_coherence_aicore`]).
//! * **Order**: barriers and register hand-offs keep the documented order — the [`handoff`]
//!   tests publish a payload many times (producer: write, `wmb`, register write; consumer:
//!   register read, `rmb`, read) and check that the consumer never sees a stale word.
//! * **Time**: the clock never goes backwards and advances; [`clock_rate`] brackets a ~20 ms
//!   interval with a host time source and checks the clock's frequency (tolerance documented
//!   there).
#![no_std]

#[cfg(feature = "std")]
extern crate std;

mod atomic;
mod cache;
mod clock;
pub mod handoff;
mod regs;
mod report;
mod suite;

pub use atomic::{CountingAtomic, gm_atomic, gm_atomic_writes, gm_memory, hal_default_rmw_writes};
pub use cache::{
    CacheCounts, CountingCache, LinesOf, cache_invalidate_all, cache_lines, cache_ranges, gm_coherence_aicore,
    gm_coherence_aicpu, range_lines,
};
#[cfg(feature = "std")]
pub use clock::StdHostClock;
pub use clock::{CLOCK_RATE_TOLERANCE_PPM, HostClock, clock, clock_rate, events};
pub use regs::{barriers, core_registers_reset, registers};
pub use report::{Check, Failure, FailureRecord, Outcome, Report, Status};
pub use suite::{SCRATCH_BYTES, Target, Tier, run_aicore, run_aicpu};
