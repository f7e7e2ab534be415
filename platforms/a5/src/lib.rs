//! `pto-a5`: the a5 chip as the runtime needs to know it, and its AICPU primitives.
//!
//! * **Facts** — topology, counter frequency, register offsets and the cache contract: host DMA
//!   **is** coherent with AICPU caches ([`Contract`] = [`pto_hal::HostCoherent`]), so the
//!   runtime emits no AICPU cache maintenance. Simulated a5 boards use these with `pto-sim`.
//! * **AICPU agent** — [`A5Aicpu`], what an AICPU thread (an aarch64 core running Linux user
//!   space on the device) is: GM atomics over `AtomicU64::from_ptr`, plain GM copies, MMIO
//!   register windows through `volatile` (a5 has no fast-path register: open = DMB := idle;
//!   close = DMB := idle, then a read-back of DMB), cache maintenance as empty inlined
//!   functions, and — on aarch64 only — `dsb`/`dmb` barriers, the generic timer
//!   (`GenericTimer`, also an embedded-hal `DelayNs`) and spin-hint waits. On other targets
//!   (host builds) only the portable traits exist, so the type is not an `AicpuAgent` there.
//! * **Host side** — behind the `cann` feature, the `cann` module: device memory and streams
//!   over the vendor runtime. It is **untested**: this repository has neither the vendor SDK
//!   nor a device, so it is only type-checked (`cargo check --features cann`). What the HAL
//!   asks that a real device cannot do — launch a host function pointer — is an `Unsupported`
//!   error naming what is missing, never a fake success.
//!
//! The AICore side of real hardware is compiled by the vendor toolchain, not Rust. There is no
//! `Platform` for real a5 hardware in this crate yet.
//!
//! The aarch64 primitives are tested on an emulated CPU (qemu user mode, see the repository's
//! `.cargo/config.toml`): `cargo test -p pto-a5 --target aarch64-unknown-linux-gnu`.
#![no_std]

#[cfg(feature = "cann")]
extern crate std;

mod aicpu;
// The AICPU/host code both chips share lives in the a2a3 crate's source tree and is compiled
// into this crate too (platform crates never depend on each other).
#[path = "../../a2a3/src/shared/mod.rs"]
mod shared;

pub use aicpu::A5Aicpu;
#[cfg(feature = "cann")]
pub use shared::acl as cann;
#[cfg(target_arch = "aarch64")]
pub use shared::arm::GenericTimer;
pub use shared::gm::{GmRegion, MmioOp, Observer};
pub use shared::programs::{ProgramTable, install_programs, resolve_program};

/// The host-DMA coherence contract of a5: coherent.
pub type Contract = pto_hal::HostCoherent;

/// Clusters usable by a run (2 dies × 18).
pub const CLUSTERS: u32 = 36;
/// AICPU threads (1 orchestrator + 4 schedulers in device orchestration).
pub const AICPU_THREADS: u32 = 5;
/// Device counter frequency.
pub const COUNTER_HZ: u64 = 1_000_000_000;
/// Offset of the dispatch register (`DATA_MAIN_BASE`).
pub const DMB_OFFSET: u32 = 0xD0;
/// Offset of the status register (`COND`).
pub const COND_OFFSET: u32 = 0x5108;
/// Bytes of a core's register window the AICPU agent accesses (DMB through COND, rounded up to
/// whole 4 KiB pages). The real per-core mapping is larger (3 MB); it must cover at least this.
pub const REG_WINDOW_BYTES: u32 = 0x6000;

/// The chip's topology.
pub const TOPOLOGY: pto_hal::Topology = pto_hal::Topology { clusters: CLUSTERS, aicpu_threads: AICPU_THREADS };
