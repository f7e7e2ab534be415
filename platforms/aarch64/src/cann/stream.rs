//! [`CannStream`]: a vendor stream with its events; the two streams of a run and their
//! launches.

use core::ffi::c_int;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use pto_hal::{AicoreStream, AicpuStream, ErrorType, GmAddr, Handle, ProgramKind, Stream};

use super::shared::Shared;
use super::{CannError, check, ffi, timeout_ms};

/// A completion event of a [`CannStream`]: the `seq`-th event recorded on it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CannEvent {
    seq: u64,
}

/// A vendor stream with its recorded events; destroyed (events included) on drop. It keeps its
/// device open.
///
/// Events are created per record and destroyed once known complete: an event recorded after
/// another on the same stream completes after it, so completion of the newest retires every
/// older one.
#[derive(Debug)]
pub struct CannStream {
    raw: ffi::AclrtStream,
    events: VecDeque<(u64, ffi::AclrtEvent)>,
    next_seq: u64,
    shared: Rc<Shared>,
}

impl CannStream {
    pub(super) fn create(shared: Rc<Shared>) -> Result<CannStream, CannError> {
        let mut raw: ffi::AclrtStream = core::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer for the stream handle.
        check("aclrtCreateStream", unsafe { (shared.api.aclrtCreateStream)(&mut raw) })?;
        Ok(CannStream { raw, events: VecDeque::new(), next_seq: 0, shared })
    }

    /// # Safety
    ///
    /// `func` is a live function handle of this stream's device.
    unsafe fn launch_raw(
        &mut self,
        func: ffi::AclrtFuncHandle,
        block_dim: u32,
        args: &mut [u8],
    ) -> Result<(), CannError> {
        if block_dim == 0 {
            return Err(CannError::InvalidArgument("kernel launch on zero cores"));
        }
        // SAFETY: `func` is live (the caller's promise); `args` is valid for `args.len()` bytes
        // during the call, which copies it (host arguments); no configuration and no
        // placeholders; `self.raw` is live.
        check("aclrtLaunchKernelWithHostArgs", unsafe {
            (self.shared.api.aclrtLaunchKernelWithHostArgs)(
                func,
                block_dim,
                self.raw,
                core::ptr::null_mut(),
                args.as_mut_ptr().cast(),
                args.len(),
                core::ptr::null_mut(),
                0,
            )
        })
    }

    fn status(&self, ev: ffi::AclrtEvent) -> Result<bool, CannError> {
        let mut st: c_int = 0;
        // SAFETY: `ev` is a live event of this stream; `st` is a valid out-pointer.
        check("aclrtQueryEventStatus", unsafe { (self.shared.api.aclrtQueryEventStatus)(ev, &mut st) })?;
        Ok(st == ffi::ACL_EVENT_RECORDED_STATUS_COMPLETE)
    }

    /// Destroy every event up to and including the newest complete one.
    fn retire_complete(&mut self) -> Result<(), CannError> {
        let mut newest_done = None;
        for (i, &(_, ev)) in self.events.iter().enumerate().rev() {
            if self.status(ev)? {
                newest_done = Some(i);
                break;
            }
        }
        if let Some(i) = newest_done {
            for (_, ev) in self.events.drain(..=i) {
                // SAFETY: `ev` is a live event of this stream, complete, destroyed once.
                let _ = unsafe { (self.shared.api.aclrtDestroyEvent)(ev) };
            }
        }
        Ok(())
    }

    fn find(&self, ev: CannEvent) -> Result<Option<ffi::AclrtEvent>, CannError> {
        if ev.seq >= self.next_seq {
            return Err(CannError::InvalidArgument("event was not recorded on this stream"));
        }
        Ok(self.events.iter().find(|&&(s, _)| s == ev.seq).map(|&(_, e)| e))
    }
}

impl Drop for CannStream {
    fn drop(&mut self) {
        for (_, ev) in self.events.drain(..) {
            // SAFETY: each event is live and destroyed once.
            let _ = unsafe { (self.shared.api.aclrtDestroyEvent)(ev) };
        }
        // SAFETY: `self.raw` is the live stream from `create_stream`, destroyed once.
        let _ = unsafe { (self.shared.api.aclrtDestroyStream)(self.raw) };
    }
}

impl ErrorType for CannStream {
    type Error = CannError;
}

impl Stream for CannStream {
    type Event = CannEvent;

    fn record_event(&mut self) -> Result<CannEvent, CannError> {
        self.retire_complete()?;
        let mut ev: ffi::AclrtEvent = core::ptr::null_mut();
        // SAFETY: `ev` is a valid out-pointer.
        check("aclrtCreateEvent", unsafe { (self.shared.api.aclrtCreateEvent)(&mut ev) })?;
        // SAFETY: `ev` was just created; `self.raw` is live.
        if let Err(e) = check("aclrtRecordEvent", unsafe { (self.shared.api.aclrtRecordEvent)(ev, self.raw) }) {
            // SAFETY: `ev` is live, never recorded, destroyed once.
            let _ = unsafe { (self.shared.api.aclrtDestroyEvent)(ev) };
            return Err(e);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.events.push_back((seq, ev));
        Ok(CannEvent { seq })
    }

    /// Non-blocking. Note: on the reference SDK an event completes even when the program before
    /// it faulted; only [`Stream::synchronize`] surfaces device errors.
    fn query_event(&self, ev: CannEvent) -> Result<bool, CannError> {
        match self.find(ev)? {
            None => Ok(true), // retired: known complete
            Some(raw) => self.status(raw),
        }
    }

    /// Polls the event (with a short sleep between polls) until it completes or `timeout_us`
    /// passes on the host's monotonic clock.
    fn wait_event(&self, ev: CannEvent, timeout_us: u64) -> Result<(), CannError> {
        let Some(raw) = self.find(ev)? else { return Ok(()) };
        let deadline = Instant::now() + Duration::from_micros(timeout_us);
        loop {
            if self.status(raw)? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(CannError::Timeout { call: "aclrtQueryEventStatus (wait_event)", timeout_us });
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// `aclrtSynchronizeStreamWithTimeout`: 507046 is a timeout; any other failure is the
    /// device's verdict on the programs of this stream (`DeviceFault` with the vendor code).
    /// Whether the vendor runtime clears the error after reporting it is the SDK's behaviour
    /// and unverified here.
    fn synchronize(&mut self, timeout_us: u64) -> Result<(), CannError> {
        // SAFETY: `self.raw` is live; the timeout is a plain value.
        let code = unsafe { (self.shared.api.aclrtSynchronizeStreamWithTimeout)(self.raw, timeout_ms(timeout_us)) };
        match code {
            ffi::ACL_SUCCESS => {
                for (_, ev) in self.events.drain(..) {
                    // SAFETY: the stream drained, so every event is complete; destroyed once.
                    let _ = unsafe { (self.shared.api.aclrtDestroyEvent)(ev) };
                }
                Ok(())
            }
            ffi::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT => {
                Err(CannError::Timeout { call: "aclrtSynchronizeStreamWithTimeout", timeout_us })
            }
            code => Err(CannError::DeviceFault { call: "aclrtSynchronizeStreamWithTimeout", code }),
        }
    }
}

/// The stream of a run that carries the AICPU program (see [`CannHost::create_streams`](super::CannHost)).
#[derive(Debug)]
pub struct CannAicpuStream(pub CannStream);

/// The stream of a run that carries the AICore program (see [`CannHost::create_streams`](super::CannHost)).
#[derive(Debug)]
pub struct CannAicoreStream(pub CannStream);

macro_rules! delegate_stream {
    ($ty:ident) => {
        impl ErrorType for $ty {
            type Error = CannError;
        }

        impl Stream for $ty {
            type Event = CannEvent;
            fn record_event(&mut self) -> Result<CannEvent, CannError> {
                self.0.record_event()
            }
            fn query_event(&self, ev: CannEvent) -> Result<bool, CannError> {
                self.0.query_event(ev)
            }
            fn wait_event(&self, ev: CannEvent, timeout_us: u64) -> Result<(), CannError> {
                self.0.wait_event(ev, timeout_us)
            }
            fn synchronize(&mut self, timeout_us: u64) -> Result<(), CannError> {
                self.0.synchronize(timeout_us)
            }
        }
    };
}

delegate_stream!(CannAicpuStream);
delegate_stream!(CannAicoreStream);

/// `"PTOL"`, little-endian: the first word of the AICPU launch block (`pto-device`'s
/// `DeviceLaunch`).
pub const LAUNCH_MAGIC: u32 = u32::from_le_bytes(*b"PTOL");
/// The layout version of the AICPU launch block.
pub const LAUNCH_VERSION: u32 = 1;
/// Bytes of the AICPU launch block.
pub const LAUNCH_BYTES: usize = 48;

/// The AICPU launch block (`pto-device`'s `DeviceLaunch`, `#[repr(C)]`): magic, version, the
/// runtime's descriptor, GM base and length, the register-window table and its entries, zero.
pub fn launch_block(desc: u64, gm: (u64, u64), windows: (u64, u32)) -> [u8; LAUNCH_BYTES] {
    let mut b = [0u8; LAUNCH_BYTES];
    b[0..4].copy_from_slice(&LAUNCH_MAGIC.to_le_bytes());
    b[4..8].copy_from_slice(&LAUNCH_VERSION.to_le_bytes());
    b[8..16].copy_from_slice(&desc.to_le_bytes());
    b[16..24].copy_from_slice(&gm.0.to_le_bytes());
    b[24..32].copy_from_slice(&gm.1.to_le_bytes());
    b[32..40].copy_from_slice(&windows.0.to_le_bytes());
    b[40..44].copy_from_slice(&windows.1.to_le_bytes());
    b
}

impl AicpuStream for CannAicpuStream {
    /// `aclrtLaunchKernelWithHostArgs` of the program's registered CPU function on `threads`
    /// blocks; the host arguments are the AICPU launch block ([`launch_block`]): `args` (the
    /// runtime's descriptor), GM as the span of this device's live allocations, and the
    /// register-window table the board gave
    /// ([`CannDevice::set_register_windows`](super::CannDevice::set_register_windows)) — without
    /// one the launch is `Unsupported`, saying so. A handle that is not an AICPU program of this
    /// device is `InvalidArgument`.
    fn launch_aicpu(&mut self, program: Handle, args: GmAddr, threads: u32) -> Result<(), CannError> {
        let shared = &self.0.shared;
        let func = shared
            .function(ProgramKind::Aicpu, program)
            .ok_or(CannError::InvalidArgument("not an AICPU program handle of this device"))?;
        let windows = (*shared.reg_windows.borrow()).ok_or(CannError::Unsupported(
            "AICPU launch: no AICore register-window table (DeviceLaunch.reg_windows); AscendCL has no call \
             that returns the register windows, so the board must give them (CannDevice::set_register_windows)",
        ))?;
        let gm = shared.gm_span().ok_or(CannError::InvalidArgument("AICPU launch on a device with no allocation"))?;
        let mut block = launch_block(args.0, gm, windows);
        // SAFETY: `func` was registered from the AICPU library this stream's `Shared` keeps
        // loaded, so it is live for the call.
        unsafe { self.0.launch_raw(func, threads, &mut block) }
    }
}

impl AicoreStream for CannAicoreStream {
    /// `aclrtLaunchKernelWithHostArgs` of the program's function on `clusters` blocks; the
    /// host arguments are `args` as 8 little-endian bytes (the device address of the launch
    /// descriptor). A handle that is not an AICore program of this device is
    /// `InvalidArgument`.
    fn launch_aicore(&mut self, program: Handle, args: GmAddr, clusters: u32) -> Result<(), CannError> {
        let func = self
            .0
            .shared
            .function(ProgramKind::Aicore, program)
            .ok_or(CannError::InvalidArgument("not an AICore program handle of this device"))?;
        // SAFETY: `func` was looked up in the AICore binary this stream's `Shared` keeps
        // loaded, so it is live for the call.
        unsafe { self.0.launch_raw(func, clusters, &mut args.0.to_le_bytes()) }
    }
}
