//! `pto-runtime`: the task-graph runtime of pto-rt, written once against the HAL.
//!
//! Every module but `host` is device-side, `no_std + alloc`, and reaches shared memory,
//! ordering, time and events only through [`pto_hal`]: the device ABI ([`layout`], one file
//! per protocol), the task model (`graph`, `region`) and orchestration API (`orch`), the
//! two runtimes' AICPU programs ([`aicpu`], [`trb`]), the executors with both of their halves
//! (`exec`), core ownership (`lifecycle`), the args dump (`dump`) and the trace rings
//! (`trace`). The `std` feature adds `host`: the runner a user drives.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate alloc;
#[cfg(any(feature = "std", test))]
extern crate std;

// The logging shim's macros (`trace!` … `error!`): declared first, so every module sees them.
#[macro_use]
mod fmt;
#[cfg(test)]
mod test_words;
// What the loom models share; the models sit beside their code (`loom_tests` modules).
#[cfg(all(test, loom))]
mod loom_support;

/// The half-precision element types ([`half::f16`] for `DType::F16`, [`half::bf16`] for
/// `DType::BF16`), re-exported so users name the same crate version the runtime implements
/// [`Element`](graph::Element) for.
pub use half;

pub(crate) mod args;
pub(crate) mod backoff;
pub mod breakage;
pub mod codes;
pub mod dump;
pub mod exec;
pub(crate) mod fixed;
pub mod graph;
pub mod hbg;
pub mod kernel;
pub mod layout;
pub(crate) mod lifecycle;
pub mod orch;
pub mod programs;
pub(crate) mod region;
pub(crate) mod sync;
pub mod tensormap;
pub(crate) mod trace;
pub mod trb;

/// The host-built graph's AICPU program, where it was before it moved beside its builder.
#[deprecated(since = "0.1.0", note = "moved to `pto_runtime::hbg::aicpu`")]
pub mod aicpu {
    pub use crate::hbg::aicpu::*;
}

#[cfg(feature = "std")]
pub mod host;

use pto_hal::{AicpuCache, Contract, GmAddr};

/// Make bytes the host wrote with DMA visible before an AICPU reads them: an invalidate on
/// host-non-coherent platforms, an inlined no-op on coherent ones. Every host-published read
/// of the runtime goes through this one helper.
#[inline(always)]
pub fn observe_host<A: AicpuCache + ?Sized>(a: &A, addr: GmAddr, len: u64) {
    <A::Contract as Contract>::observe_host_write(a, addr, len)
}
