//! The runtime's device programs, by name: what a host loads ([`Loader::load_program`]) and
//! launches by handle, and what a device library exports.
//!
//! | name | kind | entry |
//! |---|---|---|
//! | [`HBG_AICPU`] | AICPU | [`crate::hbg::aicpu::aicpu_entry`]: the host-built graph's scheduler |
//! | [`TRB_AICPU`] | AICPU | [`crate::trb::aicpu_entry`]: the device-side runtime (orchestrator + schedulers) |
//! | [`LEGACY_AICORE`] | AICore | [`crate::exec::entry::aicore_entry`]: the legacy executor |
//! | [`NATIVE_AICORE`] | AICore | the legacy executor's AICore program in C (the `pto-aicore-c` crate), chosen per run (`host::RunConfig::aicore`) |
//!
//! A platform that runs its device half in process (the simulator, the on-target harness)
//! gets them with [`install`]; hardware loads them from the device library built by the
//! `pto-device` crate, whose `extern "C"` symbols carry the same names.
//!
//! [`Loader::load_program`]: pto_hal::Loader::load_program

use pto_hal::{AicoreAgent, AicoreEntry, AicpuAgent, AicpuEntry, Platform};

/// The host-built graph's AICPU program.
pub const HBG_AICPU: &str = "pto_hbg_aicpu";
/// The device-side (tensormap-and-ringbuffer) runtime's AICPU program.
pub const TRB_AICPU: &str = "pto_trb_aicpu";
/// The legacy AICore executor.
pub const LEGACY_AICORE: &str = "pto_legacy_aicore";

/// The legacy executor's AICore program in C (`pto-aicore-c`: installed into a simulated device
/// by that crate, compiled for a chip by the vendor toolchain). Not among [`aicore_programs`]:
/// the runtime does not build the C code; a run asks for it with
/// `host::AicoreProgram::Native`.
pub const NATIVE_AICORE: &str = "pto_native_aicore";

/// Every AICPU program of the runtime for agent type `A`, by name.
pub fn aicpu_programs<A: AicpuAgent>() -> [(&'static str, AicpuEntry<A>); 2] {
    [(HBG_AICPU, crate::hbg::aicpu::aicpu_entry::<A>), (TRB_AICPU, crate::trb::aicpu_entry::<A>)]
}

/// Every AICore program of the runtime for agent type `A`, by name.
pub fn aicore_programs<A: AicoreAgent>() -> [(&'static str, AicoreEntry<A>); 1] {
    [(LEGACY_AICORE, crate::exec::entry::aicore_entry::<A>)]
}

/// Install the runtime's device programs in an in-process platform's device.
pub fn install<P: Platform>(device: &P::Device) -> Result<(), P::Error> {
    for (name, entry) in aicpu_programs::<P::Aicpu>() {
        P::install_aicpu_program(device, name, entry)?;
        debug!("installed AICPU program {}", name);
    }
    for (name, entry) in aicore_programs::<P::Aicore>() {
        P::install_aicore_program(device, name, entry)?;
        debug!("installed AICore program {}", name);
    }
    Ok(())
}
