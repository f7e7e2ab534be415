//! The a5 AICPU agent.

use pto_hal::{AicpuCache, GmAddr, Reg, Registers};

use pto_aarch64::{GmRegion, Observer, RegWindows};

use crate::{COND_OFFSET, DMB_OFFSET, REG_WINDOW_BYTES};

/// An a5 AICPU thread: GM, the cores' register windows, and (on aarch64) barriers, the
/// counter and waits — the HAL's [`AicpuAgent`](pto_hal::AicpuAgent). Cache maintenance is
/// empty: a5 AICPU caches are coherent with host DMA and with the AICores' published lines.
///
/// Built over the GM region the process has mapped and the register-window table the host
/// prepared; every GM access is checked against the region and panics outside it.
///
/// `O` is an [`Observer`] told about every `GmAtomic` store and MMIO access (tests); the
/// default `()` costs nothing.
#[derive(Debug)]
pub struct A5Aicpu<'r, O: Observer = ()> {
    gm: GmRegion,
    regs: RegWindows<'r>,
    obs: O,
}

impl<'r> A5Aicpu<'r> {
    /// An agent over `gm` and the register windows `reg_windows` (indexed by physical core id,
    /// 0 for a core without a window).
    ///
    /// # Safety
    ///
    /// * Every byte of `gm` is mapped in this process at the address its [`GmAddr`] names,
    ///   readable and writable, for as long as the agent exists, and is not covered by a live
    ///   Rust reference (GM is reached through agents and raw pointers only).
    /// * A GM word that another agent (thread, core or the host) may access concurrently is
    ///   accessed by all of them only through atomic operations (`GmAtomic`) — the HAL's
    ///   whole-line rule.
    /// * Every non-zero entry of `reg_windows` is the base of [`REG_WINDOW_BYTES`] bytes valid
    ///   for volatile 32-bit reads and writes (device registers mapped Device-nGnRE, or memory
    ///   standing in for them in tests) for `'r`, not covered by a live Rust reference.
    ///
    /// # Panics
    ///
    /// If a non-zero window base is misaligned or its window wraps the address space.
    pub unsafe fn new(gm: GmRegion, reg_windows: &'r [u64]) -> Self {
        // SAFETY: the caller upholds this function's contract, which is `with_observer`'s.
        unsafe { Self::with_observer(gm, reg_windows, ()) }
    }
}

impl<'r, O: Observer> A5Aicpu<'r, O> {
    /// Like [`A5Aicpu::new`], with an [`Observer`].
    ///
    /// # Safety
    ///
    /// As for [`A5Aicpu::new`].
    pub unsafe fn with_observer(gm: GmRegion, reg_windows: &'r [u64], observer: O) -> Self {
        // SAFETY: the caller promised every non-zero base maps REG_WINDOW_BYTES of registers.
        let regs = unsafe { RegWindows::new(reg_windows, REG_WINDOW_BYTES) };
        A5Aicpu { gm, regs, obs: observer }
    }

    /// The GM region this agent may touch.
    pub fn gm(&self) -> GmRegion {
        self.gm
    }

    /// Number of register windows (physical cores) this agent knows.
    pub fn cores(&self) -> u32 {
        self.regs.len() as u32
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.obs
    }

    #[inline]
    fn offset(reg: Reg) -> u32 {
        match reg {
            Reg::Dmb => DMB_OFFSET,
            Reg::Cond => COND_OFFSET,
        }
    }
}

pto_aarch64::impl_aicpu_agent_traits!(A5Aicpu);

impl<O: Observer> Registers for A5Aicpu<'_, O> {
    #[inline]
    fn read_reg(&self, core: u32, reg: Reg) -> u32 {
        self.regs.read(&self.obs, core, Self::offset(reg))
    }
    #[inline]
    fn write_reg(&self, core: u32, reg: Reg, value: u32) {
        self.regs.write(&self.obs, core, Self::offset(reg), value)
    }
    /// DMB := `idle`: a5 has no fast-path register; the idle write *is* the open.
    fn open_window(&self, core: u32, idle: u32) {
        self.regs.write(&self.obs, core, DMB_OFFSET, idle);
    }
    /// DMB := `idle`, then a load of DMB — the same 4 KiB granule as the store (COND at 0x5108
    /// is not): a posted store is complete once a load to the same window returned. The
    /// caller's one `rmb` after a group of closes orders later stores after the read-backs.
    fn close_window(&self, core: u32, idle: u32) {
        self.regs.write(&self.obs, core, DMB_OFFSET, idle);
        let _ = self.regs.read(&self.obs, core, DMB_OFFSET);
    }
}

/// a5: every operation is empty and inlined. Host DMA is coherent with AICPU caches
/// ([`pto_hal::HostCoherent`]) and AICore producers publish their own lines; ordering still
/// needs the barriers.
impl<O: Observer> AicpuCache for A5Aicpu<'_, O> {
    type Contract = pto_hal::HostCoherent;
    #[inline(always)]
    fn invalidate_range(&self, _addr: GmAddr, _len: u64) {}
    #[inline(always)]
    fn flush_range(&self, _addr: GmAddr, _len: u64) {}
}

#[cfg(target_arch = "aarch64")]
impl<O: Observer> pto_hal::AicpuAgent for A5Aicpu<'_, O> {
    /// The chip's own clusters: a launch never has more.
    type MaxClusters = pto_hal::typenum::U<{ crate::CLUSTERS as usize }>;
    fn resolve_program<F: Copy + 'static>(&self, handle: u64) -> Option<F> {
        pto_aarch64::resolve_program(handle)
    }
    /// Calls `body`: on the device a panicking program aborts the AICPU program, which the
    /// host's stream reports as a failed launch.
    fn run_program(&self, body: &mut dyn FnMut()) -> Result<(), pto_hal::KernelFault> {
        body();
        Ok(())
    }
}
