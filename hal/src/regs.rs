//! Per-core control registers.

/// A per-core control register.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Reg {
    /// Dispatch register (`DATA_MAIN_BASE`): written by the AICPU, read by the AICore.
    Dmb,
    /// Status register (`COND`): written by the AICore, read by the AICPU.
    Cond,
}

/// The AICPU side of the per-core register windows (memory-mapped I/O).
///
/// Accesses are plain 32-bit device accesses and emit **no barrier**: callers issue
/// [`Barriers::wmb`](crate::Barriers::wmb) before a register write that publishes plain-memory
/// data, and [`Barriers::rmb`](crate::Barriers::rmb) after a register read that guards data.
///
/// `core` is the physical core id the AICore reported in its handshake.
pub trait Registers {
    /// Read a register of `core`. Tier: AICPU.
    fn read_reg(&self, core: u32, reg: Reg) -> u32;
    /// Write a register of `core`. Tier: AICPU. On the simulator the write wakes the core.
    fn write_reg(&self, core: u32, reg: Reg, value: u32);
    /// Open `core`'s register window and write `idle` to its dispatch register (a2a3: fast path
    /// open, then DMB; a5: DMB only). The write of `idle` is the ACK of the core's report.
    fn open_window(&self, core: u32, idle: u32);
    /// Close `core`'s register window after writing `idle` to DMB, then read the window back so
    /// the posted stores have completed. Callers issue one `rmb` after a group of closes.
    fn close_window(&self, core: u32, idle: u32);
}

/// The AICore side of its own registers (special-purpose registers, not MMIO).
pub trait CoreRegisters {
    /// Read this core's dispatch register. Tier: AICore.
    fn read_dmb(&self) -> u32;
    /// Write this core's status register. Tier: AICore. On the simulator the write wakes the
    /// AICPU thread that last wrote this core's DMB.
    fn write_cond(&self, value: u32);
}
