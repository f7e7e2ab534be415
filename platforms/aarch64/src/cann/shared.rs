//! What a device and its streams share ([`Shared`]): the vendor runtime, the loaded images
//! and programs, the live allocations; the device is reset when the last of them goes.

use core::cell::RefCell;
use core::ffi::c_void;
use std::collections::BTreeMap;
use std::string::String;
use std::time::Instant;
use std::vec::Vec;

use pto_hal::{Handle, ProgramKind};

use super::{CannError, ChipFacts, check, ffi};

/// A device program found in the device images: handle `h` is entry `h - 1`.
#[derive(Debug)]
pub(super) struct Program {
    pub(super) kind: ProgramKind,
    pub(super) name: String,
    pub(super) func: ffi::AclrtFuncHandle,
}

/// What a device and its streams share: the device is reset, and its binaries unloaded, when
/// the last of them is dropped (so no stream outlives its device). Not `Send`: the device was
/// selected (`aclrtSetDevice`) for the thread that opened it.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) api: &'static ffi::Acl,
    pub(super) id: i32,
    /// The chip's facts (topology, counter frequency).
    pub(super) chip: ChipFacts,
    pub(super) aicpu_bin: Option<ffi::AclrtBinHandle>,
    pub(super) aicore_bin: Option<ffi::AclrtBinHandle>,
    /// The kernels' binaries, by path, loaded on first use.
    pub(super) kernel_bins: RefCell<Vec<(String, ffi::AclrtBinHandle)>>,
    /// The AICPU image's orchestration programs, in table order.
    pub(super) orchestrations: Vec<String>,
    /// Device programs looked up so far.
    pub(super) programs: RefCell<Vec<Program>>,
    /// Live allocations (base → bytes), for the GM span an AICPU launch names.
    pub(super) allocs: RefCell<BTreeMap<u64, u64>>,
    /// The AICore register-window table in device memory (address, entries), and whether this
    /// binding allocated it.
    pub(super) reg_windows: RefCell<Option<(u64, u32)>>,
    /// When the device was opened (the origin of the host-side [`Clock`]).
    pub(super) opened: Instant,
}

impl Shared {
    /// The function of program `handle`, if it is a program of `kind`.
    pub(super) fn function(&self, kind: ProgramKind, handle: Handle) -> Option<ffi::AclrtFuncHandle> {
        let programs = self.programs.borrow();
        let p = programs.get(usize::try_from(handle.0.checked_sub(1)?).ok()?)?;
        (p.kind == kind).then_some(p.func)
    }

    /// The span of this device's live allocations, `(base, bytes)`, if any.
    pub(super) fn gm_span(&self) -> Option<(u64, u64)> {
        let allocs = self.allocs.borrow();
        let (&lo, _) = allocs.first_key_value()?;
        let hi = allocs.iter().map(|(&b, &n)| b.saturating_add(n)).max()?;
        Some((lo, hi - lo))
    }

    pub(super) fn free_raw(&self, addr: u64) -> Result<(), CannError> {
        // SAFETY: the vendor runtime validates that `addr` is a live allocation of this device
        // and returns an error otherwise; no host memory is touched.
        check("aclrtFree", unsafe { (self.api.aclrtFree)(addr as usize as *mut c_void) })?;
        self.allocs.borrow_mut().remove(&addr);
        Ok(())
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some((table, _)) = self.reg_windows.borrow_mut().take() {
            let _ = self.free_raw(table);
        }
        let bins = self.kernel_bins.borrow_mut().drain(..).map(|(_, b)| b).collect::<Vec<_>>();
        for bin in bins.into_iter().chain(self.aicore_bin.take()).chain(self.aicpu_bin.take()) {
            // SAFETY: `bin` is a live handle loaded by this device, unloaded once; every
            // function looked up in it dies with this table.
            let _ = unsafe { (self.api.aclrtBinaryUnLoad)(bin) };
        }
        // SAFETY: plain integer argument; the device was set by `open`. A failure cannot be
        // reported from drop and leaves nothing to clean up.
        let _ = unsafe { (self.api.aclrtResetDevice)(self.id) };
    }
}
