//! `pto-a2a3`: the a2a3 chip as the runtime needs to know it.
//!
//! This crate holds the chip's facts — topology, counter frequency, register offsets and its
//! cache contract (host DMA is **not** coherent with AICPU caches). The aarch64 device
//! primitives (`dc civac`/`dc cvac`, `dsb`/`dmb`, MMIO register windows) and the vendor-runtime
//! host side are not implemented yet: there is no `Platform` for real a2a3 hardware in this
//! crate, and nothing pretends otherwise. Simulated a2a3 boards use these facts with `pto-sim`.
#![no_std]

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

/// The chip's topology.
pub const TOPOLOGY: pto_hal::Topology = pto_hal::Topology { clusters: CLUSTERS, aicpu_threads: AICPU_THREADS };
