//! The a2a3 AICPU agent.

use pto_hal::{GmAddr, Reg, Registers};

use pto_aarch64::{GmRegion, Observer, RegWindows};

use crate::{COND_OFFSET, DMB_OFFSET, FAST_PATH_CLOSE, FAST_PATH_OFFSET, FAST_PATH_OPEN, REG_WINDOW_BYTES};

/// An a2a3 AICPU thread: GM, the cores' register windows, and (on aarch64) barriers, cache
/// maintenance, the counter and waits — the HAL's [`AicpuAgent`](pto_hal::AicpuAgent).
///
/// Built over the GM region the process has mapped and the register-window table the host
/// prepared; every GM access is checked against the region and panics outside it.
///
/// `O` is an [`Observer`] told about every `GmAtomic` store and MMIO access (tests); the
/// default `()` costs nothing.
///
/// Cache maintenance (aarch64): `invalidate_range` = `dc civac` on every line of the range
/// rounded out to whole lines, then `dsb sy; isb`; `flush_range` = the same with `dc cvac`. The
/// line is the CPU's smallest data-cache line, read from `CTR_EL0.DminLine` when the agent is
/// built (64 bytes on the a2a3 AICPU; [`A2a3Aicpu::maintenance_lines`] is the exact iterator the
/// loops run). That is the whole of its maintenance — the HAL's
/// [`AicpuCache`](pto_hal::AicpuCache): it has no line operations and no `invalidate_all`
/// (whole-cache maintenance needs set/way operations, which EL0 cannot issue); those are the
/// AICore's ([`AicoreCache`](pto_hal::AicoreCache)), which this type does not implement.
#[derive(Debug)]
pub struct A2a3Aicpu<'r, O: Observer = ()> {
    gm: GmRegion,
    regs: RegWindows<'r>,
    line: u64,
    obs: O,
}

impl<'r> A2a3Aicpu<'r> {
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

impl<'r, O: Observer> A2a3Aicpu<'r, O> {
    /// Like [`A2a3Aicpu::new`], with an [`Observer`].
    ///
    /// # Safety
    ///
    /// As for [`A2a3Aicpu::new`].
    pub unsafe fn with_observer(gm: GmRegion, reg_windows: &'r [u64], observer: O) -> Self {
        // SAFETY: the caller promised every non-zero base maps REG_WINDOW_BYTES of registers.
        let regs = unsafe { RegWindows::new(reg_windows, REG_WINDOW_BYTES) };
        A2a3Aicpu { gm, regs, line: dcache_line(), obs: observer }
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

    /// The data-cache line range maintenance steps by: `CTR_EL0.DminLine` on aarch64
    /// (read once, when the agent was built); [`pto_hal::LINE_BYTES`] elsewhere.
    pub fn line_bytes(&self) -> u64 {
        self.line
    }

    /// The lines `invalidate_range` / `flush_range` maintain for `[addr, addr + len)`, in
    /// order: the range rounded out to whole [`A2a3Aicpu::line_bytes`] lines; none for an empty
    /// range. This is the iterator the `dc` loops run.
    pub fn maintenance_lines(&self, addr: GmAddr, len: u64) -> MaintenanceLines {
        MaintenanceLines::new(addr, len, self.line)
    }

    #[inline]
    fn offset(reg: Reg) -> u32 {
        match reg {
            Reg::Dmb => DMB_OFFSET,
            Reg::Cond => COND_OFFSET,
        }
    }
}

/// The smallest data-cache line of the CPU the agent is built on.
fn dcache_line() -> u64 {
    #[cfg(target_arch = "aarch64")]
    {
        pto_aarch64::arm::dcache_line_bytes() as u64
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        pto_hal::LINE_BYTES
    }
}

/// The cache lines covering a range, ascending: see [`A2a3Aicpu::maintenance_lines`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MaintenanceLines {
    next: u64,
    end: u64,
    step: u64,
}

impl MaintenanceLines {
    /// The `line`-byte lines (a power of two) covering `[addr, addr + len)`.
    pub fn new(addr: GmAddr, len: u64, line: u64) -> MaintenanceLines {
        debug_assert!(line.is_power_of_two());
        let first = addr.0 & !(line - 1);
        if len == 0 {
            return MaintenanceLines { next: first, end: first, step: line };
        }
        let end = addr.0.saturating_add(len).saturating_add(line - 1) & !(line - 1);
        MaintenanceLines { next: first, end, step: line }
    }
}

impl Iterator for MaintenanceLines {
    type Item = GmAddr;
    #[inline]
    fn next(&mut self) -> Option<GmAddr> {
        if self.next >= self.end {
            return None;
        }
        let l = self.next;
        self.next += self.step;
        Some(GmAddr(l))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.end.saturating_sub(self.next) / self.step) as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for MaintenanceLines {}

pto_aarch64::impl_aicpu_agent_traits!(A2a3Aicpu);

impl<O: Observer> Registers for A2a3Aicpu<'_, O> {
    #[inline]
    fn read_reg(&self, core: u32, reg: Reg) -> u32 {
        self.regs.read(&self.obs, core, Self::offset(reg))
    }
    #[inline]
    fn write_reg(&self, core: u32, reg: Reg, value: u32) {
        self.regs.write(&self.obs, core, Self::offset(reg), value)
    }
    /// FAST_PATH := open (0xE), then DMB := `idle` — two posted stores, in that order (the
    /// window is Device-nGnRE, which keeps the order of stores to one device).
    fn open_window(&self, core: u32, idle: u32) {
        self.regs.write(&self.obs, core, FAST_PATH_OFFSET, FAST_PATH_OPEN);
        self.regs.write(&self.obs, core, DMB_OFFSET, idle);
    }
    /// DMB := `idle`, FAST_PATH := close (0xF), then a load of FAST_PATH from the same window:
    /// a posted store is complete once a load to the same window returned. The caller's one
    /// `rmb` after a group of closes orders later stores after the read-backs.
    fn close_window(&self, core: u32, idle: u32) {
        self.regs.write(&self.obs, core, DMB_OFFSET, idle);
        self.regs.write(&self.obs, core, FAST_PATH_OFFSET, FAST_PATH_CLOSE);
        let _ = self.regs.read(&self.obs, core, FAST_PATH_OFFSET);
    }
}

#[cfg(target_arch = "aarch64")]
mod maintenance {
    use pto_aarch64::arm::{dc_civac, dc_cvac, dsb_sy, isb};
    use pto_hal::{AicpuAgent, AicpuCache, GmAddr};

    use super::A2a3Aicpu;
    use crate::Observer;

    impl<O: Observer> A2a3Aicpu<'_, O> {
        /// Run `op` on every line of `[addr, addr + len)` rounded out, after checking that
        /// `[check, check + check_len)` — non-empty, and sharing a page with every one of those
        /// lines — lies in the region.
        #[inline]
        #[track_caller]
        fn each_line(&self, check: GmAddr, check_len: u64, addr: GmAddr, len: u64, op: unsafe fn(u64)) {
            let _ = self.gm.ptr(check, check_len, 1);
            for line in self.maintenance_lines(addr, len) {
                // SAFETY: the checked bytes lie in the mapped region, and every line maintained
                // here shares a page with one of them (pages are larger than, and aligned to,
                // both cache lines and the 64-byte HAL line), so it is mapped readable too.
                unsafe { op(line.0) }
            }
        }
    }

    /// The AICPU tier only: range operations. (Whole-cache maintenance needs set/way
    /// operations, which EL0 cannot issue; it is an AICore operation and no AICPU type has it.)
    impl<O: Observer> AicpuCache for A2a3Aicpu<'_, O> {
        type Contract = pto_hal::HostNonCoherent;

        /// `dc civac` per line of the rounded-out range, then `dsb sy; isb`. Empty: nothing.
        fn invalidate_range(&self, addr: GmAddr, len: u64) {
            if len == 0 {
                return;
            }
            self.each_line(addr, len, addr, len, dc_civac);
            dsb_sy();
            isb();
        }
        /// `dc cvac` per line of the rounded-out range, then `dsb sy; isb`. Empty: nothing.
        fn flush_range(&self, addr: GmAddr, len: u64) {
            if len == 0 {
                return;
            }
            self.each_line(addr, len, addr, len, dc_cvac);
            dsb_sy();
            isb();
        }
    }

    impl<O: Observer> AicpuAgent for A2a3Aicpu<'_, O> {
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
}
