//! `pto-a2a3`: the a2a3 chip as the runtime needs to know it, and its AICPU primitives.
//!
//! * **Facts** — topology, counter frequency, register offsets and the cache contract: host DMA
//!   is **not** coherent with AICPU caches ([`Contract`] = [`pto_hal::HostNonCoherent`]).
//!   Simulated a2a3 boards use these with `pto-sim`.
//! * **AICPU agent** — [`A2a3Aicpu`], what an AICPU thread (an aarch64 core running Linux user
//!   space on the device) is: GM atomics over `AtomicU64::from_ptr`, plain GM copies, MMIO
//!   register windows through `volatile` (open = FAST_PATH open then DMB := idle; close = DMB :=
//!   idle, FAST_PATH close, then a read-back of FAST_PATH), and — on aarch64 only — `dsb`/`dmb`
//!   barriers, `dc civac` / `dc cvac` maintenance loops stepping by the `CTR_EL0` line size,
//!   the generic timer (`GenericTimer`, also an embedded-hal `DelayNs`) and spin-hint waits.
//!   On other targets (host builds) only the portable traits exist — `GmAtomic`, `GmMemory`,
//!   `Registers` — so the type is *not* an `AicpuAgent` there: there is no a2a3 AICPU that is
//!   not aarch64, and cache maintenance never degrades into a silent no-op.
//! * **Host side** — behind the `cann` feature, the `cann` module: device memory, streams, both
//!   launches and the loader over the vendor runtime (AscendCL, opened at run time), checked
//!   against the public headers and run against a recording stand-in for the vendor library
//!   (`testkits/cann-stub`); never on a chip. What it cannot do honestly is an error naming
//!   what is missing, never a fake success.
//!
//! The AICore side of real hardware is compiled by the vendor toolchain, not Rust; the Rust
//! layouts are its ABI. There is no `Platform` for real a2a3 hardware in this crate yet.
//!
//! What both chips share — the GM region and the agent traits over it, barriers, MMIO windows,
//! the generic timer, the program table and the vendor host side — is the `pto-aarch64` crate;
//! this crate adds the chip's facts, window sequences and cache maintenance.
//!
//! The aarch64 primitives are tested on an emulated CPU (qemu user mode, see the repository's
//! `.cargo/config.toml`): `cargo test -p pto-a2a3 --target aarch64-unknown-linux-gnu`.
#![no_std]

mod aicpu;

pub use aicpu::{A2a3Aicpu, MaintenanceLines};
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

/// The host-DMA coherence contract of a2a3: AICPU loads may see stale lines after host DMA.
pub type Contract = pto_hal::HostNonCoherent;

/// Clusters usable by a run (`PLATFORM_MAX_BLOCKDIM`).
pub const CLUSTERS: u32 = 24;
/// AICPU threads (1 orchestrator + 3 schedulers in device orchestration; all schedule in HBG).
pub const AICPU_THREADS: u32 = 4;
/// Device counter frequency.
pub const COUNTER_HZ: u64 = 50_000_000;
/// Offset of the dispatch register (`DATA_MAIN_BASE`) in a core's register window.
pub const DMB_OFFSET: u32 = 0xA0;
/// Offset of the status register (`COND`).
pub const COND_OFFSET: u32 = 0x4C8;
/// Offset of the fast-path control register (a2a3 only).
pub const FAST_PATH_OFFSET: u32 = 0x18;
/// Fast-path control: open.
pub const FAST_PATH_OPEN: u32 = 0xE;
/// Fast-path control: close.
pub const FAST_PATH_CLOSE: u32 = 0xF;
/// Bytes of a core's register window the AICPU agent accesses: one 4 KiB page, which holds
/// FAST_PATH, DMB and COND. The real mapping may be larger; it must cover at least this.
pub const REG_WINDOW_BYTES: u32 = 0x1000;

/// The chip's topology.
pub const TOPOLOGY: pto_hal::Topology = pto_hal::Topology { clusters: CLUSTERS, aicpu_threads: AICPU_THREADS };
