//! Host side over the vendor runtime (CANN's `libascendcl`), behind the `cann` feature.
//!
//! **Untested.** Nothing here has run: this repository is built and tested without the vendor
//! SDK or a device, so these bindings are only type-checked (`cargo check --features cann`).
//! The `extern "C"` declarations are reconstructed from the public AscendCL API and the
//! reference runtime's use of it; signatures, enum values and error codes must be verified
//! against the SDK headers (`acl/acl_rt.h`, `acl/acl_base.h`) before first use. Linking needs
//! `libascendcl.so` on the library path (e.g. `RUSTFLAGS="-L $ASCEND_HOME/lib64"`).
//!
//! What exists: [`CannDevice`] (device selection, [`DeviceMemory`](pto_hal::DeviceMemory) over
//! `aclrtMalloc` / `aclrtFree` / `aclrtMemcpy` / `aclrtMemset`), [`CannStream`]
//! ([`Stream`](pto_hal::Stream) over `aclrtCreateStream`, `aclrtCreateEvent`,
//! `aclrtRecordEvent`, `aclrtQueryEventStatus` and `aclrtSynchronizeStreamWithTimeout`), and
//! kernel launch of a function found in a device binary ([`CannBinary`], [`CannStream::launch`]
//! over `aclrtBinaryLoadFromFile` / `aclrtBinaryGetFunction` / `aclrtLaunchKernel`).
//!
//! What does not: `pto_hal::AicpuStream` / `AicoreStream` / `KernelLoader`. Those take **host
//! function pointers** (`AicpuEntry`, `AicoreEntry`, `KernelFn`) — a real device cannot run a
//! host process's functions; its programs are separately built device binaries named by symbol.
//! [`CannDevice::load_kernel_fn`] and [`CannStream::launch_entry`] say so as
//! [`ErrorKind::Unsupported`](pto_hal::ErrorKind::Unsupported) errors instead of pretending.

use core::ffi::{CStr, c_int, c_void};
use core::fmt;
use core::marker::PhantomData;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use pto_hal::{DeviceMemory, ErrorKind, ErrorType, GmAddr, Stream};

/// Raw declarations of the vendor runtime (AscendCL). Unverified; see the module docs.
pub mod ffi {
    use core::ffi::{c_char, c_int, c_void};

    /// `aclError`: 0 on success.
    pub type AclError = c_int;
    /// `aclrtStream`.
    pub type AclrtStream = *mut c_void;
    /// `aclrtEvent`.
    pub type AclrtEvent = *mut c_void;
    /// `aclrtBinHandle`.
    pub type AclrtBinHandle = *mut c_void;
    /// `aclrtFuncHandle`.
    pub type AclrtFuncHandle = *mut c_void;

    /// `ACL_SUCCESS`.
    pub const ACL_SUCCESS: AclError = 0;
    /// `ACL_ERROR_RT_MEMORY_ALLOCATION`: device memory exhausted.
    pub const ACL_ERROR_RT_MEMORY_ALLOCATION: AclError = 207_001;
    /// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`: a stream synchronize ran out of time.
    pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: AclError = 507_046;
    /// `ACL_ERROR_RT_AICPU_EXCEPTION`: an AICPU program faulted (surfaced by synchronize).
    pub const ACL_ERROR_RT_AICPU_EXCEPTION: AclError = 507_018;

    /// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST`.
    pub const ACL_MEM_MALLOC_HUGE_FIRST: c_int = 0;
    /// `aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE`.
    pub const ACL_MEMCPY_HOST_TO_DEVICE: c_int = 1;
    /// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST`.
    pub const ACL_MEMCPY_DEVICE_TO_HOST: c_int = 2;
    /// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_COMPLETE`.
    pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: c_int = 1;

    #[link(name = "ascendcl")]
    unsafe extern "C" {
        /// `aclError aclInit(const char *configPath)`; once per process.
        pub fn aclInit(config_path: *const c_char) -> AclError;
        /// `aclError aclrtSetDevice(int32_t deviceId)`.
        pub fn aclrtSetDevice(device_id: i32) -> AclError;
        /// `aclError aclrtResetDevice(int32_t deviceId)`.
        pub fn aclrtResetDevice(device_id: i32) -> AclError;
        /// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`.
        pub fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: c_int) -> AclError;
        /// `aclError aclrtFree(void *devPtr)`.
        pub fn aclrtFree(dev_ptr: *mut c_void) -> AclError;
        /// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
        /// aclrtMemcpyKind kind)`; synchronous.
        pub fn aclrtMemcpy(
            dst: *mut c_void,
            dest_max: usize,
            src: *const c_void,
            count: usize,
            kind: c_int,
        ) -> AclError;
        /// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)`.
        pub fn aclrtMemset(dev_ptr: *mut c_void, max_count: usize, value: i32, count: usize) -> AclError;
        /// `aclError aclrtCreateStream(aclrtStream *stream)`.
        pub fn aclrtCreateStream(stream: *mut AclrtStream) -> AclError;
        /// `aclError aclrtDestroyStream(aclrtStream stream)`.
        pub fn aclrtDestroyStream(stream: AclrtStream) -> AclError;
        /// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`;
        /// `timeout` in ms, -1 waits forever.
        pub fn aclrtSynchronizeStreamWithTimeout(stream: AclrtStream, timeout: i32) -> AclError;
        /// `aclError aclrtCreateEvent(aclrtEvent *event)`.
        pub fn aclrtCreateEvent(event: *mut AclrtEvent) -> AclError;
        /// `aclError aclrtDestroyEvent(aclrtEvent event)`.
        pub fn aclrtDestroyEvent(event: AclrtEvent) -> AclError;
        /// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
        pub fn aclrtRecordEvent(event: AclrtEvent, stream: AclrtStream) -> AclError;
        /// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)`.
        pub fn aclrtQueryEventStatus(event: AclrtEvent, status: *mut c_int) -> AclError;
        /// `aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)`
        /// (declared for completeness; [`super::CannStream`] polls instead, so its timeout
        /// does not depend on an error code).
        pub fn aclrtSynchronizeEventWithTimeout(event: AclrtEvent, timeout: i32) -> AclError;
        /// `aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions
        /// *options, aclrtBinHandle *binHandle)`.
        pub fn aclrtBinaryLoadFromFile(
            bin_path: *const c_char,
            options: *mut c_void,
            bin: *mut AclrtBinHandle,
        ) -> AclError;
        /// `aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle)`.
        pub fn aclrtBinaryUnLoad(bin: AclrtBinHandle) -> AclError;
        /// `aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char
        /// *kernelName, aclrtFuncHandle *funcHandle)`.
        pub fn aclrtBinaryGetFunction(bin: AclrtBinHandle, name: *const c_char, func: *mut AclrtFuncHandle)
        -> AclError;
        /// `aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t blockDim, const void
        /// *argsData, size_t argsSize, aclrtStream stream)`.
        pub fn aclrtLaunchKernel(
            func: AclrtFuncHandle,
            block_dim: u32,
            args: *const c_void,
            args_size: usize,
            stream: AclrtStream,
        ) -> AclError;
    }
}

/// Errors of the vendor-runtime host side.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CannError {
    /// A vendor call returned a non-zero `aclError`.
    Call {
        /// The call.
        call: &'static str,
        /// Its `aclError`.
        code: i32,
    },
    /// A bounded wait ran out.
    Timeout {
        /// The wait.
        call: &'static str,
        /// Its budget in microseconds.
        timeout_us: u64,
    },
    /// A synchronize surfaced a device program's failure.
    DeviceFault {
        /// The call that surfaced it.
        call: &'static str,
        /// Its `aclError` (e.g. 507018, an AICPU exception).
        code: i32,
    },
    /// A request the binding refuses (names what was wrong).
    InvalidArgument(&'static str),
    /// Something this binding cannot do honestly (names what is missing).
    Unsupported(&'static str),
}

impl fmt::Display for CannError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CannError::Call { call, code } => write!(f, "{call} failed with aclError {code}"),
            CannError::Timeout { call, timeout_us } => write!(f, "{call} did not complete within {timeout_us} us"),
            CannError::DeviceFault { call, code } => write!(f, "{call} reported a device fault (aclError {code})"),
            CannError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            CannError::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

impl std::error::Error for CannError {}

impl pto_hal::Error for CannError {
    fn kind(&self) -> ErrorKind {
        match self {
            CannError::Call { code: ffi::ACL_ERROR_RT_MEMORY_ALLOCATION, .. } => ErrorKind::OutOfMemory,
            CannError::Call { .. } | CannError::InvalidArgument(_) => ErrorKind::Other,
            CannError::Timeout { .. } => ErrorKind::Timeout,
            CannError::DeviceFault { .. } => ErrorKind::DeviceFault,
            CannError::Unsupported(_) => ErrorKind::Unsupported,
        }
    }
}

fn check(call: &'static str, code: ffi::AclError) -> Result<(), CannError> {
    if code == ffi::ACL_SUCCESS { Ok(()) } else { Err(CannError::Call { call, code }) }
}

/// Milliseconds for a vendor timeout argument: rounded up, at least 1, at most `i32::MAX`.
fn timeout_ms(timeout_us: u64) -> i32 {
    timeout_us.div_ceil(1000).clamp(1, i32::MAX as u64) as i32
}

/// Initialise the vendor runtime for this process (`aclInit` without a config file). Call once
/// per process, before [`CannDevice::open`].
pub fn init() -> Result<(), CannError> {
    // SAFETY: a null config path is documented as "no configuration file"; the call has no
    // other pointer arguments.
    check("aclInit", unsafe { ffi::aclInit(core::ptr::null()) })
}

/// The host's handle on one device: selected with `aclrtSetDevice`, released on drop.
#[derive(Debug)]
pub struct CannDevice {
    id: i32,
}

impl CannDevice {
    /// Select device `id` for this thread (`aclrtSetDevice`).
    pub fn open(id: i32) -> Result<CannDevice, CannError> {
        // SAFETY: plain integer argument.
        check("aclrtSetDevice", unsafe { ffi::aclrtSetDevice(id) })?;
        Ok(CannDevice { id })
    }

    /// The device id.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// A new stream on this device (the run needs two: one for the AICPU program, one for the
    /// AICore program — never both on one stream, which deadlocks).
    pub fn create_stream(&self) -> Result<CannStream<'_>, CannError> {
        let mut raw: ffi::AclrtStream = core::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer for the stream handle.
        check("aclrtCreateStream", unsafe { ffi::aclrtCreateStream(&mut raw) })?;
        Ok(CannStream { raw, events: VecDeque::new(), next_seq: 0, _dev: PhantomData })
    }

    /// Load a device binary (`aclrtBinaryLoadFromFile`).
    pub fn load_binary(&self, path: &CStr) -> Result<CannBinary<'_>, CannError> {
        let mut raw: ffi::AclrtBinHandle = core::ptr::null_mut();
        // SAFETY: `path` is NUL-terminated and outlives the call; null options select the
        // defaults; `raw` is a valid out-pointer.
        check("aclrtBinaryLoadFromFile", unsafe {
            ffi::aclrtBinaryLoadFromFile(path.as_ptr(), core::ptr::null_mut(), &mut raw)
        })?;
        Ok(CannBinary { raw, _dev: PhantomData })
    }

    /// `pto_hal::KernelLoader::load_kernel` cannot be provided: it hands over a host function
    /// pointer, which a device cannot call. Always `Unsupported`; load a device binary with
    /// [`CannDevice::load_binary`] instead.
    pub fn load_kernel_fn(&self, _kernel: pto_hal::KernelFn, _core: pto_hal::CoreType) -> Result<u64, CannError> {
        Err(CannError::Unsupported(
            "a host KernelFn cannot run on a device core: kernels must be device binaries \
             (load_binary + function), which pto_hal::KernelLoader cannot name",
        ))
    }

    fn dev_ptr(addr: GmAddr) -> *mut c_void {
        addr.0 as usize as *mut c_void
    }
}

impl Drop for CannDevice {
    fn drop(&mut self) {
        // SAFETY: plain integer argument; the device was set by `open`. A failure cannot be
        // reported from drop and leaves nothing to clean up.
        let _ = unsafe { ffi::aclrtResetDevice(self.id) };
    }
}

impl ErrorType for CannDevice {
    type Error = CannError;
}

impl DeviceMemory for CannDevice {
    /// `aclrtMalloc` (huge pages first). The vendor allocator's alignment is checked, not
    /// assumed: an allocation that is not `align`-aligned is freed and reported `Unsupported`
    /// (over-aligning by padding is not implemented).
    fn alloc(&self, size: u64, align: u64) -> Result<GmAddr, CannError> {
        if size == 0 {
            return Err(CannError::InvalidArgument("zero-byte device allocation"));
        }
        if !align.is_power_of_two() || align < 64 {
            return Err(CannError::InvalidArgument("alignment must be a power of two of at least 64"));
        }
        let size = usize::try_from(size)
            .map_err(|_| CannError::InvalidArgument("allocation larger than the host's address space"))?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; size and policy are plain values.
        check("aclrtMalloc", unsafe { ffi::aclrtMalloc(&mut p, size, ffi::ACL_MEM_MALLOC_HUGE_FIRST) })?;
        let addr = p as usize as u64;
        if addr == 0 || addr % align != 0 {
            // SAFETY: `p` was just returned by aclrtMalloc (a null is rejected by aclrtFree).
            let _ = unsafe { ffi::aclrtFree(p) };
            return Err(CannError::Unsupported(
                "aclrtMalloc returned memory not aligned as requested; over-aligned allocation is not implemented",
            ));
        }
        Ok(GmAddr(addr))
    }

    fn free(&self, addr: GmAddr) -> Result<(), CannError> {
        // SAFETY: the vendor runtime validates that `addr` is a live allocation of this device
        // and returns an error otherwise; no host memory is touched.
        check("aclrtFree", unsafe { ffi::aclrtFree(Self::dev_ptr(addr)) })
    }

    fn copy_h2d(&self, dst: GmAddr, src: &[u8]) -> Result<(), CannError> {
        // SAFETY: `src` is valid for `src.len()` bytes for the (synchronous) call; the device
        // range is validated by the vendor runtime.
        check("aclrtMemcpy(H2D)", unsafe {
            ffi::aclrtMemcpy(
                Self::dev_ptr(dst),
                src.len(),
                src.as_ptr() as *const c_void,
                src.len(),
                ffi::ACL_MEMCPY_HOST_TO_DEVICE,
            )
        })
    }

    fn copy_d2h(&self, dst: &mut [u8], src: GmAddr) -> Result<(), CannError> {
        // SAFETY: `dst` is valid for writes of `dst.len()` bytes for the (synchronous) call;
        // the device range is validated by the vendor runtime.
        check("aclrtMemcpy(D2H)", unsafe {
            ffi::aclrtMemcpy(
                dst.as_mut_ptr() as *mut c_void,
                dst.len(),
                Self::dev_ptr(src) as *const c_void,
                dst.len(),
                ffi::ACL_MEMCPY_DEVICE_TO_HOST,
            )
        })
    }

    fn memset(&self, dst: GmAddr, byte: u8, len: u64) -> Result<(), CannError> {
        let len =
            usize::try_from(len).map_err(|_| CannError::InvalidArgument("memset longer than the address space"))?;
        // SAFETY: device pointer and sizes only; the vendor runtime validates the range.
        check("aclrtMemset", unsafe { ffi::aclrtMemset(Self::dev_ptr(dst), len, byte as i32, len) })
    }
}

/// A device binary loaded with [`CannDevice::load_binary`]; unloaded on drop.
#[derive(Debug)]
pub struct CannBinary<'d> {
    raw: ffi::AclrtBinHandle,
    _dev: PhantomData<&'d CannDevice>,
}

impl CannBinary<'_> {
    /// The kernel function `name` of this binary (`aclrtBinaryGetFunction`).
    pub fn function(&self, name: &CStr) -> Result<CannFunction<'_>, CannError> {
        let mut raw: ffi::AclrtFuncHandle = core::ptr::null_mut();
        // SAFETY: `self.raw` is a live binary handle; `name` is NUL-terminated; `raw` is a
        // valid out-pointer.
        check("aclrtBinaryGetFunction", unsafe { ffi::aclrtBinaryGetFunction(self.raw, name.as_ptr(), &mut raw) })?;
        Ok(CannFunction { raw, _bin: PhantomData })
    }
}

impl Drop for CannBinary<'_> {
    fn drop(&mut self) {
        // SAFETY: `self.raw` is the live handle from `load_binary`, unloaded exactly once.
        let _ = unsafe { ffi::aclrtBinaryUnLoad(self.raw) };
    }
}

/// A kernel function of a loaded [`CannBinary`].
#[derive(Debug)]
pub struct CannFunction<'b> {
    raw: ffi::AclrtFuncHandle,
    _bin: PhantomData<&'b ()>,
}

/// A completion event of a [`CannStream`]: the `seq`-th event recorded on it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CannEvent {
    seq: u64,
}

/// A vendor stream with its recorded events; destroyed (events included) on drop.
///
/// Events are created per record and destroyed once known complete: an event recorded after
/// another on the same stream completes after it, so completion of the newest retires every
/// older one.
#[derive(Debug)]
pub struct CannStream<'d> {
    raw: ffi::AclrtStream,
    events: VecDeque<(u64, ffi::AclrtEvent)>,
    next_seq: u64,
    _dev: PhantomData<&'d CannDevice>,
}

impl CannStream<'_> {
    /// Launch `func` on `block_dim` cores with `args` (copied by the runtime at submission).
    pub fn launch(&mut self, func: &CannFunction<'_>, block_dim: u32, args: &[u8]) -> Result<(), CannError> {
        if block_dim == 0 {
            return Err(CannError::InvalidArgument("kernel launch on zero cores"));
        }
        // SAFETY: `func.raw` is a live function handle (its binary outlives it); `args` is
        // valid for `args.len()` bytes during the call, which copies it; `self.raw` is live.
        check("aclrtLaunchKernel", unsafe {
            ffi::aclrtLaunchKernel(func.raw, block_dim, args.as_ptr() as *const c_void, args.len(), self.raw)
        })
    }

    /// The HAL's `launch_aicpu` / `launch_aicore` shape (a host function pointer as the entry)
    /// cannot be provided on hardware. Always `Unsupported`.
    pub fn launch_entry(&mut self) -> Result<(), CannError> {
        Err(CannError::Unsupported(
            "pto_hal AicpuStream/AicoreStream launch a host fn pointer; a device runs device binaries \
             (AICPU .so via the vendor's CPU-kernel launch, AICore .o via a function handle)",
        ))
    }

    fn status(&self, ev: ffi::AclrtEvent) -> Result<bool, CannError> {
        let mut st: c_int = 0;
        // SAFETY: `ev` is a live event of this stream; `st` is a valid out-pointer.
        check("aclrtQueryEventStatus", unsafe { ffi::aclrtQueryEventStatus(ev, &mut st) })?;
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
                let _ = unsafe { ffi::aclrtDestroyEvent(ev) };
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

impl Drop for CannStream<'_> {
    fn drop(&mut self) {
        for (_, ev) in self.events.drain(..) {
            // SAFETY: each event is live and destroyed once.
            let _ = unsafe { ffi::aclrtDestroyEvent(ev) };
        }
        // SAFETY: `self.raw` is the live stream from `create_stream`, destroyed once.
        let _ = unsafe { ffi::aclrtDestroyStream(self.raw) };
    }
}

impl ErrorType for CannStream<'_> {
    type Error = CannError;
}

impl Stream for CannStream<'_> {
    type Event = CannEvent;

    fn record_event(&mut self) -> Result<CannEvent, CannError> {
        self.retire_complete()?;
        let mut ev: ffi::AclrtEvent = core::ptr::null_mut();
        // SAFETY: `ev` is a valid out-pointer.
        check("aclrtCreateEvent", unsafe { ffi::aclrtCreateEvent(&mut ev) })?;
        // SAFETY: `ev` was just created; `self.raw` is live.
        if let Err(e) = check("aclrtRecordEvent", unsafe { ffi::aclrtRecordEvent(ev, self.raw) }) {
            // SAFETY: `ev` is live, never recorded, destroyed once.
            let _ = unsafe { ffi::aclrtDestroyEvent(ev) };
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
        let code = unsafe { ffi::aclrtSynchronizeStreamWithTimeout(self.raw, timeout_ms(timeout_us)) };
        match code {
            ffi::ACL_SUCCESS => {
                for (_, ev) in self.events.drain(..) {
                    // SAFETY: the stream drained, so every event is complete; destroyed once.
                    let _ = unsafe { ffi::aclrtDestroyEvent(ev) };
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
