//! Code shared by the a2a3 and a5 crates.
//!
//! This directory is compiled into **both** `pto-a2a3` and `pto-a5` (the a5 crate includes it
//! with `#[path]`): the two chips' AICPUs are the same kind of aarch64 core under the same Linux
//! user space, and their host sides bind the same vendor runtime. What differs — register
//! offsets, the window open/close sequences and cache maintenance — lives in each crate.
//! Platform crates depend on `pto-hal` only, never on each other, so the sharing is by source.

pub mod gm;
pub mod mmio;
pub mod programs;

#[cfg(target_arch = "aarch64")]
pub mod arm;

#[cfg(feature = "cann")]
pub mod acl;

/// The store-store barrier behind `GmAtomic::store_direct` (the "st_dev + store barrier" of the
/// HAL): `dmb ishst` on aarch64; elsewhere (host builds of the portable parts) a release fence.
pub mod barrier {
    /// Order every earlier store before every later store.
    #[inline(always)]
    pub fn store_store() {
        #[cfg(target_arch = "aarch64")]
        super::arm::dmb_ishst();
        #[cfg(not(target_arch = "aarch64"))]
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
    }
}
