//! Barriers and register windows (single-agent parts; ordering is checked by [`crate::handoff`]).

use pto_hal::{Barriers, CoreRegisters, Reg, Registers};

use crate::Check;
use crate::Outcome;
use crate::atomic::expect;

/// Every barrier executes and returns. (Whether they order anything is what the two-party
/// [`handoff`](crate::handoff) checks establish.)
pub fn barriers<B: Barriers + ?Sized>(b: &B) -> Outcome {
    b.rmb();
    b.wmb();
    b.store_store();
    b.full();
    b.store_barrier();
    Ok(())
}

/// The idle value the runtime writes to DMB when it opens or closes a window
/// (`AICPU_IDLE_TASK_ID`).
const DMB_IDLE: u32 = 0x7FFF_FFFD;

/// The AICPU side of `core`'s register window: DMB writes read back, `open_window` and
/// `close_window` leave DMB at the idle value, and the window ends closed with DMB = 0 (the
/// value a launch resets it to). `core` must be a core no program is running on.
pub fn registers<R: Registers + ?Sized>(r: &R, core: u32) -> Outcome {
    const C: Check = Check::Registers;
    for v in [0x1234_5678u32, 1, 0x7FFF_FFF0, 0] {
        r.write_reg(core, Reg::Dmb, v);
        expect(C, "DMB reads back what the AICPU wrote", v as u64, r.read_reg(core, Reg::Dmb) as u64)?;
    }
    r.open_window(core, DMB_IDLE);
    expect(C, "open_window leaves DMB idle", DMB_IDLE as u64, r.read_reg(core, Reg::Dmb) as u64)?;
    r.write_reg(core, Reg::Dmb, 42);
    expect(C, "DMB dispatch value in an open window", 42, r.read_reg(core, Reg::Dmb) as u64)?;
    r.close_window(core, DMB_IDLE);
    expect(C, "close_window leaves DMB idle", DMB_IDLE as u64, r.read_reg(core, Reg::Dmb) as u64)?;
    r.write_reg(core, Reg::Dmb, 0);
    Ok(())
}

/// The AICore side at the start of a launch: DMB reads 0 ("window not open"), because every
/// kernel launch resets the core's registers.
pub fn core_registers_reset<R: CoreRegisters + ?Sized>(r: &R) -> Outcome {
    expect(Check::CoreRegistersReset, "DMB is 0 at the start of a launch", 0, r.read_dmb() as u64)
}
