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
//! * **Host side** — behind the `cann` feature, the `cann` module: device memory, streams, both
//!   launches and the loader over the vendor runtime (AscendCL, opened at run time), checked
//!   against the public headers and run against a recording stand-in for the vendor library
//!   (`testkits/cann-stub`); never on a chip. What it cannot do honestly is an error naming
//!   what is missing, never a fake success.
//!
//! The AICore side of real hardware is compiled by the vendor toolchain, not Rust. There is no
//! `Platform` for real a5 hardware in this crate yet.
//!
//! What both chips share — the GM region and the agent traits over it, barriers, MMIO windows,
//! the generic timer, the program table and the vendor host side — is the `pto-aarch64` crate;
//! this crate adds the chip's facts, window sequences and cache maintenance.
//!
//! The aarch64 primitives are tested on an emulated CPU (qemu user mode, see the repository's
//! `.cargo/config.toml`): `cargo test -p pto-a5 --target aarch64-unknown-linux-gnu`.
#![no_std]

mod aicpu;

pub use aicpu::A5Aicpu;
#[cfg(target_arch = "aarch64")]
pub use pto_aarch64::arm::GenericTimer;
pub use pto_aarch64::{GmRegion, MmioOp, Observer, ProgramTable, install_programs, resolve_program};

/// Host side over the vendor runtime (feature `cann`): `pto_aarch64::cann` with this chip's
/// facts. Run against a recording stand-in for the vendor library, never on a chip.
#[cfg(feature = "cann")]
pub mod cann {
    pub use pto_aarch64::cann::*;

    /// What the host side needs to know of this chip: open a device with
    /// `CannDevice::open(id, CHIP, &images)`.
    pub const CHIP: ChipFacts = ChipFacts { topology: crate::TOPOLOGY, counter_hz: crate::COUNTER_HZ };
}

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
