//! Per-core register windows: 32-bit MMIO through the `volatile` crate.

use core::ptr::NonNull;

use volatile::VolatilePtr;

use crate::gm::{MmioOp, Observer};

/// The register windows of the device's cores, indexed by physical core id: one base address
/// per core (0 for a core without a window), as the host's register-address table lists them.
///
/// Built by an agent's `unsafe` constructor, which promises that every non-zero base maps at
/// least the chip's window size of device registers. Accesses outside a window, or to a core
/// without one, panic (a device fault) instead of touching unmapped memory.
#[derive(Copy, Clone, Debug)]
pub struct RegWindows<'r> {
    bases: &'r [u64],
    window_bytes: u32,
}

impl<'r> RegWindows<'r> {
    /// Windows at `bases`, each `window_bytes` long.
    ///
    /// # Safety
    ///
    /// Every non-zero entry of `bases` is the address of `window_bytes` bytes valid for
    /// volatile 32-bit reads and writes for `'r` (device registers, or memory standing in for
    /// them), never accessed through Rust references while the windows exist.
    ///
    /// # Panics
    ///
    /// If a non-zero base is not 4-byte aligned or the window would wrap the address space.
    pub unsafe fn new(bases: &'r [u64], window_bytes: u32) -> Self {
        for (core, &b) in bases.iter().enumerate() {
            if b != 0 && (b % 4 != 0 || b.checked_add(window_bytes as u64).is_none_or(|e| e > usize::MAX as u64)) {
                panic!("register window of core {core} at {b:#x} is misaligned or wraps the address space");
            }
        }
        RegWindows { bases, window_bytes }
    }

    /// Number of windows (physical cores).
    pub fn len(&self) -> usize {
        self.bases.len()
    }

    /// Whether the table has no windows at all.
    pub fn is_empty(&self) -> bool {
        self.bases.is_empty()
    }

    /// The register at `offset` of `core`'s window.
    #[inline]
    #[track_caller]
    fn reg(&self, core: u32, offset: u32) -> VolatilePtr<'r, u32> {
        let base = match self.bases.get(core as usize) {
            Some(&b) if b != 0 => b,
            Some(_) => panic!("core {core} has no register window (base 0)"),
            None => panic!("no register window for core {core}: {} windows", self.bases.len()),
        };
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.window_bytes,
            "register offset {offset:#x} outside the window"
        );
        // SAFETY: `base` is a non-zero window base, so by `new`'s contract `[base, base +
        // window_bytes)` is valid for volatile 32-bit accesses for `'r`; `offset + 4` lies in
        // the window and both are 4-aligned, so the pointer is non-null, aligned and in bounds.
        unsafe { VolatilePtr::new(NonNull::new_unchecked((base + offset as u64) as usize as *mut u32)) }
    }

    /// Volatile 32-bit load of `offset` in `core`'s window.
    #[inline]
    #[track_caller]
    pub fn read<O: Observer>(&self, obs: &O, core: u32, offset: u32) -> u32 {
        let value = self.reg(core, offset).read();
        obs.mmio(MmioOp::Read { core, offset, value });
        value
    }

    /// Volatile 32-bit store of `value` to `offset` in `core`'s window.
    #[inline]
    #[track_caller]
    pub fn write<O: Observer>(&self, obs: &O, core: u32, offset: u32, value: u32) {
        self.reg(core, offset).write(value);
        obs.mmio(MmioOp::Write { core, offset, value });
    }
}
