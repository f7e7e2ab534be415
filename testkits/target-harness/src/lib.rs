//! `pto-target-harness`: test support for the aarch64 platform crates (`pto-a2a3`, `pto-a5`),
//! shared by their tests as a dev-dependency.
//!
//! * [`mem`] (every target): heap buffers standing in for GM and for the cores' register
//!   windows, an [`Observer`](pto_aarch64::Observer) that records what an agent did, and the
//!   two-thread hand-off runner.
//! * `platform` (aarch64 only): `OnTarget`, an in-process
//!   [`Platform`](pto_hal::Platform) whose AICPU threads are the chip's **real** AICPU agent
//!   (`A2a3Aicpu` / `A5Aicpu`) over GM in process memory and register windows as plain memory,
//!   and whose AICores are threads running the runtime's legacy executor over
//!   `TargetAicore`. The runtime's host
//!   (`pto_runtime::host::Device::new_in_process`) drives it exactly as it drives the
//!   simulator: it installs the runtime's device programs, loads them by name, and launches them
//!   on the harness's streams.
//! * `workloads` (aarch64 only): the `vector` and `chain513` workloads (kernels,
//!   orchestrations and host goldens, written again here so the platform crates need neither
//!   the examples nor the `pto` facade), run on both runtimes.
//! * `devlog` (aarch64, feature `defmt`): the GM log ring the device half's defmt frames go
//!   to, drained and decoded on the host side with `defmt-decoder`.
//! * [`suite`]: the runtime's on-target suite, one for both chips
//!   ([`runtime_on_target!`]), which each chip crate's `tests/runtime_on_target.rs` expands
//!   for its chip.
//!
//! On-target means the target instruction set under qemu user mode: the AICPU program, the
//! AICore executor and the kernels all run as aarch64 code, with the real barriers, atomics
//! (LSE or LL/SC, as the emulated CPU has them), cache maintenance instructions and counter.
//! The AICore side of real hardware is compiled by the vendor toolchain; here it is the Rust
//! executor, which is what the layouts in `pto_runtime::layout` are the ABI of.

pub mod mem;
pub mod suite;

/// The crates [`runtime_on_target!`]'s expansion names, so that it resolves them through this
/// crate whatever the chip crate's own dependencies are.
#[doc(hidden)]
pub mod deps {
    pub use parking_lot;
    pub use pto_hal;
    pub use pto_runtime;
}

#[cfg(all(target_arch = "aarch64", feature = "defmt"))]
pub mod devlog;

#[cfg(target_arch = "aarch64")]
pub mod platform;

#[cfg(target_arch = "aarch64")]
pub mod workloads;
