//! `pto-a5`: the a5 chip as the runtime needs to know it.
//!
//! This crate holds the chip's facts — topology, counter frequency, register offsets and its
//! cache contract (host DMA **is** coherent with AICPU caches, so the runtime emits no AICPU
//! cache maintenance). The aarch64 device primitives and the vendor-runtime host side are not
//! implemented yet: there is no `Platform` for real a5 hardware in this crate. Simulated a5
//! boards use these facts with `pto-sim`.
#![no_std]

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

/// The chip's topology.
pub const TOPOLOGY: pto_hal::Topology = pto_hal::Topology { clusters: CLUSTERS, aicpu_threads: AICPU_THREADS };
