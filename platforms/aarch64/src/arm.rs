//! aarch64 instructions the AICPU agents use: barriers, data-cache maintenance by address, and
//! the generic timer.
//!
//! Every barrier is an `asm!` block without `nomem`, so it is also a compiler barrier: the
//! compiler neither moves memory accesses across it nor caches values in registers over it.

use core::arch::asm;

use pto_hal::{Clock, Ticks};

/// `dsb ld`: every earlier load has completed (including MMIO loads) before any later access.
#[inline(always)]
pub fn dsb_ld() {
    // SAFETY: a data synchronisation barrier has no effect on registers, flags or the stack;
    // it only delays later accesses. Omitting `nomem` makes it a compiler barrier too.
    unsafe { asm!("dsb ld", options(nostack, preserves_flags)) }
}

/// `dsb st`: every earlier store has completed before any later access.
#[inline(always)]
pub fn dsb_st() {
    // SAFETY: as for `dsb_ld`.
    unsafe { asm!("dsb st", options(nostack, preserves_flags)) }
}

/// `dmb ishst`: earlier stores are observed before later stores (inner shareable domain).
#[inline(always)]
pub fn dmb_ishst() {
    // SAFETY: a data memory barrier only orders accesses; no register, flag or stack effect.
    unsafe { asm!("dmb ishst", options(nostack, preserves_flags)) }
}

/// `dsb sy`: every earlier access (and cache maintenance) has completed, full system.
#[inline(always)]
pub fn dsb_sy() {
    // SAFETY: as for `dsb_ld`.
    unsafe { asm!("dsb sy", options(nostack, preserves_flags)) }
}

/// `isb`: later instructions are fetched after everything before has completed.
#[inline(always)]
pub fn isb() {
    // SAFETY: an instruction synchronisation barrier only flushes the pipeline.
    unsafe { asm!("isb", options(nostack, preserves_flags)) }
}

/// `ctr_el0`: the cache type register.
#[inline(always)]
pub fn ctr_el0() -> u64 {
    let v: u64;
    // SAFETY: Linux sets SCTLR_EL1.UCT so EL0 may read CTR_EL0 (or traps and emulates the read
    // with the system-wide safe value); the read touches no memory.
    unsafe { asm!("mrs {v}, ctr_el0", v = out(reg) v, options(nomem, nostack, preserves_flags)) }
    v
}

/// The smallest data-cache line of this CPU in bytes: `4 << CTR_EL0.DminLine` (bits 19:16,
/// log2 of the line in 4-byte words). Data-cache maintenance by address steps by this.
#[inline]
pub fn dcache_line_bytes() -> usize {
    4 << ((ctr_el0() >> 16) & 0xF)
}

/// `dc civac`: clean and invalidate the line holding `addr` to the point of coherency.
///
/// # Safety
///
/// `addr` lies in a page mapped readable in this process.
#[inline(always)]
pub unsafe fn dc_civac(addr: u64) {
    // SAFETY: the caller promised the page is mapped readable, so the instruction cannot
    // fault. It writes back a dirty line and drops it: the bytes every agent reads are
    // unchanged, so no Rust-visible value changes. Without `nomem` it is a compiler
    // barrier, keeping plain accesses on their side of it.
    unsafe { asm!("dc civac, {a}", a = in(reg) addr, options(nostack, preserves_flags)) }
}

/// `dc cvac`: clean (write back) the line holding `addr` to the point of coherency.
///
/// # Safety
///
/// As for [`dc_civac`].
#[inline(always)]
pub unsafe fn dc_cvac(addr: u64) {
    // SAFETY: as for `dc_civac`; a clean does not even drop the line.
    unsafe { asm!("dc cvac, {a}", a = in(reg) addr, options(nostack, preserves_flags)) }
}

/// `cntvct_el0`, read after an `isb` so it is not executed ahead of earlier instructions.
#[inline(always)]
pub fn cntvct() -> u64 {
    let v: u64;
    // SAFETY: reading the virtual counter is permitted at EL0 (Linux sets CNTKCTL_EL1.EL0VCTEN;
    // the vDSO relies on it) and has no side effect; `isb` only orders it.
    unsafe { asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v, options(nostack, preserves_flags)) }
    v
}

/// `cntfrq_el0`: the counter frequency in Hz, as firmware programmed it.
#[inline(always)]
pub fn cntfrq() -> u64 {
    let v: u64;
    // SAFETY: reading CNTFRQ_EL0 is permitted at EL0 whenever the counter is (see `cntvct`);
    // it touches no memory.
    unsafe { asm!("mrs {v}, cntfrq_el0", v = out(reg) v, options(nomem, nostack, preserves_flags)) }
    v
}

/// The aarch64 generic timer as seen from EL0: `cntvct_el0` ticks at `cntfrq_el0` Hz.
///
/// On the device this is the counter the runtime's watchdogs count in (the same domain as the
/// AICore's `get_sys_cnt`). It also implements embedded-hal's `DelayNs` as a bounded busy
/// wait, for back-off.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct GenericTimer;

impl Clock for GenericTimer {
    #[inline]
    fn now_ticks(&self) -> Ticks {
        cntvct()
    }
    #[inline]
    fn freq_hz(&self) -> u64 {
        cntfrq()
    }
}

impl embedded_hal::delay::DelayNs for GenericTimer {
    /// Busy-waits (with a spin hint) until at least `ns` nanoseconds of the counter passed,
    /// rounded up to whole ticks.
    fn delay_ns(&mut self, ns: u32) {
        let f = cntfrq().max(1) as u128;
        let ticks = (ns as u128 * f).div_ceil(1_000_000_000) as u64;
        let start = cntvct();
        while cntvct().wrapping_sub(start) < ticks {
            core::hint::spin_loop();
        }
    }
}
