//! `pto-aarch64`: what the a2a3 and a5 AICPUs share — the same kind of aarch64 core under the
//! same Linux user space — and the vendor-runtime host side both chips bind.
//!
//! * [`GmRegion`]: GM as an AICPU thread sees it (a mapped region of its address space; every
//!   access checked against it), [`Observer`] / [`MmioOp`] (test instrumentation that costs
//!   nothing in production), and [`impl_aicpu_agent_traits!`], which implements the traits both
//!   chips' AICPU agents share (`GmAtomic`, `GmMemory`; on aarch64 `Barriers`, `Clock`,
//!   `Events`) for a chip's agent type.
//! * [`RegWindows`]: per-core register windows, 32-bit MMIO through `volatile`.
//! * `arm` (aarch64 only): barriers (`dsb`, `dmb`, `isb`), data-cache maintenance by address
//!   (`dc civac`, `dc cvac`, `CTR_EL0`), and the generic timer (`arm::GenericTimer`, also an
//!   embedded-hal `DelayNs`).
//! * [`ProgramTable`], [`install_programs`], [`resolve_program`]: orchestration programs linked
//!   into an AICPU image, by handle.
//! * [`devlog`]: the device's log ring in GM; with the `defmt` feature, the process's
//!   `#[defmt::global_logger]`, writing the runtime's defmt frames into it.
//! * `cann` (feature `cann`): device memory, streams, both launches and the loader over the
//!   vendor runtime (AscendCL, opened at run time), parametrised by the chip's facts
//!   (`cann::ChipFacts`); checked against the public headers and run against a recording
//!   stand-in for the vendor library (`testkits/cann-stub`), never on a chip.
//!
//! What differs between the chips — register offsets, the window open/close sequences, cache
//! maintenance and the contract — lives in `pto-a2a3` and `pto-a5`, which build their agents on
//! this crate. The crate is `#![no_std]` (the `cann` feature links `std`).
#![no_std]

#[cfg(feature = "cann")]
extern crate std;

pub mod devlog;
mod gm;
mod mmio;
mod programs;

#[cfg(target_arch = "aarch64")]
pub mod arm;

#[cfg(feature = "cann")]
pub mod cann;

pub use gm::{GmRegion, MmioOp, Observer};
pub use mmio::RegWindows;
pub use programs::{ProgramTable, install_programs, resolve_program};

/// The HAL, for [`impl_aicpu_agent_traits!`] (so the macro does not depend on the caller's
/// crate names). Not part of the API.
#[doc(hidden)]
pub use pto_hal as __hal;

/// The store-store barrier behind `GmAtomic::store_direct` (the "st_dev + store barrier" of the
/// HAL): `dmb ishst` on aarch64; elsewhere (host builds of the portable parts) a release fence.
pub mod barrier {
    /// Order every earlier store before every later store.
    #[inline(always)]
    pub fn store_store() {
        #[cfg(target_arch = "aarch64")]
        crate::arm::dmb_ishst();
        #[cfg(not(target_arch = "aarch64"))]
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
    }
}
