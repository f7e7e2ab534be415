//! Device structures: the ABI between host, AICPU and AICore, one file per protocol.
//!
//! Every structure is `#[repr(C)]` with compile-time size and offset assertions beside it.
//! Each cache line has exactly one writer through caches, or is touched only through
//! [`GmAtomic`](pto_hal::GmAtomic) (see `docs/cache-contract.md`). Each file starts with its
//! protocol's writer/reader table:
//!
//! | file | protocol |
//! |---|---|
//! | [`launch`] | the launch descriptor (configuration, fatal latch, counters, fault text), the slot arena's per-worker handshake, teardown-gate and dispatch-payload lines, the DMB/COND register values |
//! | [`image`] | the host-built graph's image: header, task records, fan-out, func table, argument records |
//! | [`orch`] | the device-side runtime's image (rings, tensor arguments) and a ring slot's packed task description |
//! | [`resident`] | the resident executor's scheduler state |
//! | [`capture`] | the resident route's boundary-capture control region |
//! | [`trace`] | the per-core and per-thread trace rings |
//! | [`dump`] | the args-dump region and its lanes |
//! | [`c_abi`] | not a protocol: these structures as C (`include/pto_abi.h`), generated |
//!
//! Everything is re-exported here, so `crate::layout::LaunchConfig` and
//! `crate::layout::launch::LaunchConfig` name the same item.

pub mod c_abi;
pub mod capture;
pub mod dump;
pub mod image;
pub mod launch;
pub mod orch;
pub mod resident;
pub mod trace;

pub use capture::*;
pub use dump::*;
pub use image::*;
pub use launch::*;
pub use orch::*;
pub use resident::*;
pub use trace::*;

/// Layout version of the launch descriptor and of both images ([`ImageHeader::version`],
/// [`OrchImage::version`], [`LaunchConfig::version`]).
pub const LAYOUT_VERSION: u32 = 2;
