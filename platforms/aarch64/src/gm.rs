//! GM as an AICPU thread sees it: a mapped region of its own address space.

use pto_hal::GmAddr;

/// The device memory (GM) an AICPU agent may touch: `[base, base + len)` of the AICPU process's
/// virtual address space, where a [`GmAddr`] *is* the virtual address.
///
/// A region is only numbers; the promise that the bytes are mapped is made by the `unsafe`
/// constructor of the agent built over it. Every access of the agent is checked against the
/// region, and one outside it panics (a device fault) instead of touching unmapped memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct GmRegion {
    base: u64,
    len: u64,
}

impl GmRegion {
    /// The region `[base, base + len)`; `None` when `base` is null, `len` is zero, or the end
    /// overflows the address space of this target.
    pub const fn new(base: GmAddr, len: u64) -> Option<GmRegion> {
        if base.0 == 0 || len == 0 {
            return None;
        }
        match base.0.checked_add(len) {
            Some(end) if end <= usize::MAX as u64 => Some(GmRegion { base: base.0, len }),
            _ => None,
        }
    }
    /// First address of the region.
    pub const fn base(&self) -> GmAddr {
        GmAddr(self.base)
    }
    /// Length of the region in bytes.
    pub const fn len(&self) -> u64 {
        self.len
    }
    /// Always `false`: a region is never empty.
    pub const fn is_empty(&self) -> bool {
        false
    }
    /// Whether `[addr, addr + len)` lies inside the region (an empty range at any address of
    /// the region, or at its end, does).
    pub const fn contains(&self, addr: GmAddr, len: u64) -> bool {
        match addr.0.checked_add(len) {
            Some(end) => addr.0 >= self.base && end <= self.base + self.len,
            None => false,
        }
    }
    /// The address of `[addr, addr + len)` as a pointer, after checking the range lies in the
    /// region and `addr` is aligned to `align`. Panics otherwise: on the device an access
    /// outside GM is a fault, reported with the address instead of corrupting memory. `align`
    /// is a power of two.
    ///
    /// The pointer is only a number: whether it may be dereferenced is the promise of whoever
    /// built the region (an agent's `unsafe` constructor).
    #[inline]
    #[track_caller]
    pub fn ptr(&self, addr: GmAddr, len: u64, align: u64) -> *mut u8 {
        if !self.contains(addr, len) {
            panic!("AICPU access {:#x}+{} outside the mapped GM region {:#x}+{:#x}", addr.0, len, self.base, self.len);
        }
        debug_assert!(align.is_power_of_two());
        if addr.0 & (align - 1) != 0 {
            panic!("misaligned AICPU GM access at {:#x} (needs {}-byte alignment)", addr.0, align);
        }
        addr.0 as usize as *mut u8
    }
}

/// One access to a register window, as an [`Observer`] is told about it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MmioOp {
    /// A 32-bit load of `offset` in `core`'s window returned `value`.
    Read {
        /// Physical core id.
        core: u32,
        /// Byte offset in the window.
        offset: u32,
        /// The value loaded.
        value: u32,
    },
    /// A 32-bit store of `value` to `offset` in `core`'s window.
    Write {
        /// Physical core id.
        core: u32,
        /// Byte offset in the window.
        offset: u32,
        /// The value stored.
        value: u32,
    },
}

/// Instrumentation of an AICPU agent: told, right after it happens, about every store the agent
/// performs to a GM word through `GmAtomic` and every register-window access.
///
/// The agent's default observer is `()`, whose methods are empty and inlined: production agents
/// pay nothing. Tests plug in an observer to count stores (the conformance suite's "no idle
/// writes" check) and to trace the exact MMIO sequence of window open / close — the agent's real
/// code paths, not a model of them.
pub trait Observer {
    /// A `GmAtomic` operation stored to the word at `addr` (store, 32-bit store, swap,
    /// fetch_add, or a compare-exchange that succeeded; a failed compare-exchange stores nothing).
    #[inline(always)]
    fn gm_store(&self, addr: GmAddr) {
        let _ = addr;
    }
    /// A register-window access was performed.
    #[inline(always)]
    fn mmio(&self, op: MmioOp) {
        let _ = op;
    }
}

/// The production observer: observes nothing, costs nothing.
impl Observer for () {}

/// Implements the traits both chips' AICPU agents share — `GmAtomic`, `GmMemory` (all targets)
/// and, on aarch64, `Barriers`, `Clock`, `Events` and `Pause` (the generic timer's `DelayNs`)
/// — for `$ty<'r, O>`, a struct of the
/// calling crate with fields `gm: GmRegion` and `obs: O: Observer` whose `unsafe` constructor
/// carries the GM safety contract (every byte of `gm` mapped, readable and writable for the
/// agent's life; shared words accessed only atomically).
///
/// It also adds a private inherent method `word(&self, GmAddr) -> &AtomicU64` to `$ty`.
#[macro_export]
macro_rules! impl_aicpu_agent_traits {
    ($ty:ident) => {
        impl<O: $crate::Observer> $ty<'_, O> {
            /// The GM word at `addr` as an atomic (checked: inside the region, 8-aligned).
            #[inline]
            #[track_caller]
            fn word(&self, addr: $crate::__hal::GmAddr) -> &core::sync::atomic::AtomicU64 {
                let p = self.gm.ptr(addr, 8, 8) as *mut u64;
                // SAFETY: `p` is 8-aligned and its 8 bytes lie inside the GM region, which the
                // agent's `unsafe` constructor promised is mapped, readable and writable for the
                // agent's whole life, and whose shared words are accessed only atomically (the
                // HAL's whole-line rule: a word several agents write is touched only through
                // `GmAtomic`). The reference does not outlive `&self`.
                unsafe { core::sync::atomic::AtomicU64::from_ptr(p) }
            }
        }

        impl<O: $crate::Observer> $crate::__hal::GmAtomic for $ty<'_, O> {
            #[inline]
            fn query(&self, addr: $crate::__hal::GmAddr) -> u64 {
                self.word(addr).load(core::sync::atomic::Ordering::Acquire)
            }
            #[inline]
            fn store_direct(&self, addr: $crate::__hal::GmAddr, value: u64) {
                self.word(addr).store(value, core::sync::atomic::Ordering::Release);
                self.obs.gm_store(addr);
                $crate::barrier::store_store();
            }
            #[inline]
            fn store_direct_u32(&self, addr: $crate::__hal::GmAddr, value: u32) {
                let p = self.gm.ptr(addr, 4, 4) as *mut u32;
                // SAFETY: as for `word`: 4-aligned, inside the mapped region, accessed
                // atomically. A 32-bit store is single-copy atomic and touches only its 4 bytes.
                let w = unsafe { core::sync::atomic::AtomicU32::from_ptr(p) };
                w.store(value, core::sync::atomic::Ordering::Release);
                self.obs.gm_store(addr);
                $crate::barrier::store_store();
            }
            #[inline]
            fn swap(&self, addr: $crate::__hal::GmAddr, value: u64) -> u64 {
                let old = self.word(addr).swap(value, core::sync::atomic::Ordering::AcqRel);
                self.obs.gm_store(addr);
                old
            }
            #[inline]
            fn fetch_add(&self, addr: $crate::__hal::GmAddr, value: u64) -> u64 {
                let old = self.word(addr).fetch_add(value, core::sync::atomic::Ordering::AcqRel);
                self.obs.gm_store(addr);
                old
            }
            #[inline]
            fn compare_exchange(&self, addr: $crate::__hal::GmAddr, expected: u64, desired: u64) -> u64 {
                use core::sync::atomic::Ordering::{AcqRel, Acquire};
                match self.word(addr).compare_exchange(expected, desired, AcqRel, Acquire) {
                    Ok(seen) => {
                        self.obs.gm_store(addr);
                        seen
                    }
                    Err(seen) => seen,
                }
            }
            /// One 64-bit load of the word at `addr` (8-aligned): `(bytes 0..4, bytes 4..8)` as
            /// little-endian `u32`s — a single-copy atomic view of both halves.
            #[inline]
            fn query_u32_pair(&self, addr: $crate::__hal::GmAddr) -> (u32, u32) {
                let v = self.word(addr).load(core::sync::atomic::Ordering::Acquire);
                (v as u32, (v >> 32) as u32)
            }
            // fetch_or / fetch_and: the HAL's default CAS loops, which do not store when
            // nothing would change.
        }

        impl<O: $crate::Observer> $crate::__hal::GmMemory for $ty<'_, O> {
            #[inline]
            fn read(&self, addr: $crate::__hal::GmAddr, dst: &mut [u8]) {
                let src = self.gm.ptr(addr, dst.len() as u64, 1);
                // SAFETY: `[src, src + dst.len())` lies inside the mapped GM region (checked);
                // `dst` is a distinct live buffer of that length. `copy` tolerates overlap, so
                // even a `dst` that itself lives in GM is handled. No reference to GM is formed.
                unsafe { core::ptr::copy(src as *const u8, dst.as_mut_ptr(), dst.len()) }
            }
            #[inline]
            fn write(&self, addr: $crate::__hal::GmAddr, src: &[u8]) {
                let dst = self.gm.ptr(addr, src.len() as u64, 1);
                // SAFETY: as for `read`, with the roles swapped; the region is writable.
                unsafe { core::ptr::copy(src.as_ptr(), dst, src.len()) }
            }
        }

        #[cfg(target_arch = "aarch64")]
        impl<O: $crate::Observer> $crate::__hal::Barriers for $ty<'_, O> {
            /// `dsb ld`.
            #[inline(always)]
            fn rmb(&self) {
                $crate::arm::dsb_ld()
            }
            /// `dsb st`.
            #[inline(always)]
            fn wmb(&self) {
                $crate::arm::dsb_st()
            }
            /// `dmb ishst`.
            #[inline(always)]
            fn store_store(&self) {
                $crate::arm::dmb_ishst()
            }
            /// `dsb sy`.
            #[inline(always)]
            fn full(&self) {
                $crate::arm::dsb_sy()
            }
            /// `dsb sy` (an AICore operation; on the AICPU the strongest barrier there is).
            #[inline(always)]
            fn store_barrier(&self) {
                $crate::arm::dsb_sy()
            }
        }

        #[cfg(target_arch = "aarch64")]
        impl<O: $crate::Observer> $crate::__hal::Clock for $ty<'_, O> {
            /// `cntvct_el0` (after an `isb`, so the read is not hoisted above earlier code).
            #[inline]
            fn now_ticks(&self) -> $crate::__hal::Ticks {
                $crate::arm::cntvct()
            }
            /// `cntfrq_el0`.
            #[inline]
            fn freq_hz(&self) -> u64 {
                $crate::arm::cntfrq()
            }
        }

        /// Waiting is a spin hint: `wfe` is not usable in user space unless the other side
        /// issues `sev` (an AICore writing COND or a GM word does not), so a `wfe` could sleep
        /// until the next timer event. Each call spins briefly and returns; callers re-check
        /// their condition and budget, as the HAL requires.
        #[cfg(target_arch = "aarch64")]
        impl<O: $crate::Observer> $crate::__hal::Events for $ty<'_, O> {
            #[inline]
            fn wait_for_event(&self, deadline: $crate::__hal::Ticks) {
                if $crate::arm::cntvct() < deadline {
                    core::hint::spin_loop();
                }
            }
            /// Nothing to do: no agent of this platform sleeps in `wfe`.
            #[inline(always)]
            fn send_event(&self) {}
            #[inline]
            fn wait_for_word(&self, addr: $crate::__hal::GmAddr, seen: u64, deadline: $crate::__hal::Ticks) {
                if $crate::__hal::GmAtomic::query(self, addr) == seen && $crate::arm::cntvct() < deadline {
                    core::hint::spin_loop();
                }
            }
        }

        /// The generic timer: a delay is a busy wait on the counter the deadlines count in.
        #[cfg(target_arch = "aarch64")]
        impl<O: $crate::Observer> $crate::__hal::Pause for $ty<'_, O> {
            type Delay = $crate::arm::GenericTimer;
            #[inline(always)]
            fn delay(&self) -> $crate::arm::GenericTimer {
                $crate::arm::GenericTimer
            }
        }
    };
}
