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
//! On top of these, the host half of the HAL: [`CannHost`] is a
//! [`HostPlatform`](pto_hal::HostPlatform) (the chip's topology, two distinct streams
//! [`CannAicpuStream`] / [`CannAicoreStream`]), and [`CannDevice`] a
//! [`Loader`](pto_hal::Loader). How far each goes:
//!
//! * **AICore programs** — `load_program(ProgramKind::Aicore, name)` looks `name` up
//!   (`aclrtBinaryGetFunction`) in the device library the board names when it opens the device
//!   ([`CannDevice::open_with_library`]); `launch_aicore` launches it with `aclrtLaunchKernel` on
//!   `clusters` blocks, the argument block being the launch argument's 8 bytes (little-endian
//!   device address). An unknown name is an error naming it.
//! * **AICPU programs** — not bound: an AICPU program is a CPU kernel in the AICPU image, started
//!   through the vendor's CPU-kernel load/launch calls, which this binding does not declare.
//!   `load_program(ProgramKind::Aicpu, name)` is an
//!   [`ErrorKind::Unsupported`](pto_hal::ErrorKind::Unsupported) error naming the program and
//!   what is missing, so no AICPU handle exists for `launch_aicpu` to take.
//! * **Kernels and orchestrations** — `Unsupported`: an AICore resolves a kernel by its device
//!   address, which the bound calls do not expose (`aclrtBinaryGetFunction` returns a host-side
//!   handle), and orchestrations are linked into the AICPU image and installed there
//!   ([`install_programs`](crate::install_programs)) — a host cannot place a Rust function on a
//!   device, and the table has no names to look one up by.
//!
//! Nothing reports success for something it did not do.

use core::cell::RefCell;
use core::ffi::{CStr, c_int, c_void};
use core::fmt;
use core::marker::PhantomData;
use std::collections::VecDeque;
use std::ffi::CString;
use std::rc::Rc;
use std::string::String;
use std::time::{Duration, Instant};
use std::vec::Vec;

use pto_hal::{
    AicoreStream, AicpuStream, Clock, DeviceMemory, ErrorKind, ErrorType, GmAddr, Handle, HostPlatform, KernelSource,
    Loader, OrchestrationSource, ProgramKind, Stream, Ticks, Topology,
};

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
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// A device program the device library does not hold (or that could not be looked up).
    UnknownProgram {
        /// The program's name.
        name: String,
        /// The vendor call that failed, and its `aclError`.
        call: &'static str,
        /// Its `aclError`.
        code: i32,
    },
    /// A device program of a kind this binding cannot load (names the program and what is
    /// missing).
    UnsupportedProgram {
        /// The program's kind.
        kind: ProgramKind,
        /// The program's name.
        name: String,
        /// What is missing.
        missing: &'static str,
    },
}

impl fmt::Display for CannError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CannError::Call { call, code } => write!(f, "{call} failed with aclError {code}"),
            CannError::Timeout { call, timeout_us } => write!(f, "{call} did not complete within {timeout_us} us"),
            CannError::DeviceFault { call, code } => write!(f, "{call} reported a device fault (aclError {code})"),
            CannError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            CannError::Unsupported(what) => write!(f, "unsupported: {what}"),
            CannError::UnknownProgram { name, call, code } => {
                write!(f, "device program {name:?} not found in the device library ({call}: aclError {code})")
            }
            CannError::UnsupportedProgram { kind, name, missing } => {
                write!(f, "unsupported: {kind:?} program {name:?}: {missing}")
            }
        }
    }
}

impl std::error::Error for CannError {}

impl pto_hal::Error for CannError {
    fn kind(&self) -> ErrorKind {
        match self {
            CannError::Call { code: ffi::ACL_ERROR_RT_MEMORY_ALLOCATION, .. } => ErrorKind::OutOfMemory,
            CannError::Call { .. } | CannError::InvalidArgument(_) | CannError::UnknownProgram { .. } => {
                ErrorKind::Other
            }
            CannError::Timeout { .. } => ErrorKind::Timeout,
            CannError::DeviceFault { .. } => ErrorKind::DeviceFault,
            CannError::Unsupported(_) | CannError::UnsupportedProgram { .. } => ErrorKind::Unsupported,
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

/// What the host side needs to know of the chip it drives; each chip crate has its constant
/// (`pto_a2a3::cann::CHIP`, `pto_a5::cann::CHIP`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ChipFacts {
    /// The chip's topology ([`HostPlatform::topology`] of a device).
    pub topology: Topology,
    /// The device counter frequency in Hz (the host-side [`Clock`] counts at it).
    pub counter_hz: u64,
}

/// A device program found in the device library: handle `h` is entry `h - 1`.
#[derive(Debug)]
struct Program {
    kind: ProgramKind,
    name: String,
    func: ffi::AclrtFuncHandle,
}

/// What a device and its streams share: the device is reset, and its library unloaded, when
/// the last of them is dropped (so no stream outlives its device). Not `Send`: the device was
/// selected (`aclrtSetDevice`) for the thread that opened it.
#[derive(Debug)]
struct Shared {
    id: i32,
    /// The chip's facts (topology, counter frequency).
    chip: ChipFacts,
    /// The device library the board named (AICore programs), if any.
    library: Option<ffi::AclrtBinHandle>,
    /// Device programs looked up so far.
    programs: RefCell<Vec<Program>>,
    /// When the device was opened (the origin of the host-side [`Clock`]).
    opened: Instant,
}

impl Shared {
    /// The function of program `handle`, if it is a program of `kind`.
    fn function(&self, kind: ProgramKind, handle: Handle) -> Option<ffi::AclrtFuncHandle> {
        let programs = self.programs.borrow();
        let p = programs.get(usize::try_from(handle.0.checked_sub(1)?).ok()?)?;
        (p.kind == kind).then_some(p.func)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(lib) = self.library.take() {
            // SAFETY: `lib` is the live handle loaded by `open_with_library`, unloaded once;
            // every function looked up in it dies with this table.
            let _ = unsafe { ffi::aclrtBinaryUnLoad(lib) };
        }
        // SAFETY: plain integer argument; the device was set by `open`. A failure cannot be
        // reported from drop and leaves nothing to clean up.
        let _ = unsafe { ffi::aclrtResetDevice(self.id) };
    }
}

/// The host's handle on one device: selected with `aclrtSetDevice`, released (after its last
/// stream) on drop.
#[derive(Debug)]
pub struct CannDevice {
    shared: Rc<Shared>,
}

impl CannDevice {
    /// Select device `id` for this thread (`aclrtSetDevice`), with no device library: AICore
    /// programs cannot be loaded by name (see [`CannDevice::open_with_library`]). `chip` is what
    /// the host needs to know of the chip (each chip crate has its `cann::CHIP`).
    pub fn open(id: i32, chip: ChipFacts) -> Result<CannDevice, CannError> {
        Self::open_inner(id, chip, None)
    }

    /// Select device `id` and load the device library `library` (`aclrtBinaryLoadFromFile`):
    /// the binary the board names, holding the runtime's AICore programs, which
    /// [`Loader::load_program`] looks up by symbol.
    pub fn open_with_library(id: i32, chip: ChipFacts, library: &CStr) -> Result<CannDevice, CannError> {
        Self::open_inner(id, chip, Some(library))
    }

    fn open_inner(id: i32, chip: ChipFacts, library: Option<&CStr>) -> Result<CannDevice, CannError> {
        // SAFETY: plain integer argument.
        check("aclrtSetDevice", unsafe { ffi::aclrtSetDevice(id) })?;
        // From here on, dropping `shared` resets the device (and unloads the library).
        let mut shared = Shared { id, chip, library: None, programs: RefCell::new(Vec::new()), opened: Instant::now() };
        if let Some(path) = library {
            let mut raw: ffi::AclrtBinHandle = core::ptr::null_mut();
            // SAFETY: `path` is NUL-terminated and outlives the call; null options select the
            // defaults; `raw` is a valid out-pointer.
            check("aclrtBinaryLoadFromFile", unsafe {
                ffi::aclrtBinaryLoadFromFile(path.as_ptr(), core::ptr::null_mut(), &mut raw)
            })?;
            shared.library = Some(raw);
        }
        Ok(CannDevice { shared: Rc::new(shared) })
    }

    /// The device id.
    pub fn id(&self) -> i32 {
        self.shared.id
    }

    /// A new stream on this device (the run needs two: one for the AICPU program, one for the
    /// AICore program — never both on one stream, which deadlocks; [`CannHost::create_streams`]
    /// makes that unrepresentable).
    pub fn create_stream(&self) -> Result<CannStream, CannError> {
        let mut raw: ffi::AclrtStream = core::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer for the stream handle.
        check("aclrtCreateStream", unsafe { ffi::aclrtCreateStream(&mut raw) })?;
        Ok(CannStream { raw, events: VecDeque::new(), next_seq: 0, shared: self.shared.clone() })
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

    fn dev_ptr(addr: GmAddr) -> *mut c_void {
        addr.0 as usize as *mut c_void
    }
}

impl Loader for CannDevice {
    /// AICore programs: `name` looked up in the device library (`aclrtBinaryGetFunction`); the
    /// same name twice gives the same handle. AICPU programs: `Unsupported` (see the module
    /// docs), naming the program.
    fn load_program(&self, kind: ProgramKind, name: &str) -> Result<Handle, CannError> {
        if kind == ProgramKind::Aicpu {
            return Err(CannError::UnsupportedProgram {
                kind,
                name: name.into(),
                missing: "AICPU programs are CPU kernels of the AICPU image; the vendor's CPU-kernel \
                          load/launch calls are not bound",
            });
        }
        let Some(lib) = self.shared.library else {
            return Err(CannError::UnsupportedProgram {
                kind,
                name: name.into(),
                missing: "no device library: the board opens the device with CannDevice::open_with_library",
            });
        };
        let mut programs = self.shared.programs.borrow_mut();
        if let Some(i) = programs.iter().position(|p| p.kind == kind && p.name == name) {
            return Ok(Handle(i as u64 + 1));
        }
        let symbol =
            CString::new(name).map_err(|_| CannError::InvalidArgument("device program name contains a NUL byte"))?;
        let mut func: ffi::AclrtFuncHandle = core::ptr::null_mut();
        // SAFETY: `lib` is the live library handle (unloaded only when `Shared` drops); `symbol`
        // is NUL-terminated and outlives the call; `func` is a valid out-pointer.
        let code = unsafe { ffi::aclrtBinaryGetFunction(lib, symbol.as_ptr(), &mut func) };
        if code != ffi::ACL_SUCCESS {
            return Err(CannError::UnknownProgram { name: name.into(), call: "aclrtBinaryGetFunction", code });
        }
        programs.push(Program { kind, name: name.into(), func });
        Ok(Handle(programs.len() as u64))
    }

    /// Always `Unsupported`: an AICore resolves a kernel by its device address, which the bound
    /// calls do not expose (`aclrtBinaryGetFunction` returns a host-side handle). Launch a
    /// kernel function directly with [`CannDevice::load_binary`] + [`CannStream::launch`].
    fn load_kernel(&self, _kernel: &KernelSource<'_>) -> Result<Handle, CannError> {
        Err(CannError::Unsupported(
            "kernel handles for AICores need the kernel's device address; the vendor's \
             function-address query is not bound (aclrtBinaryGetFunction gives a host handle)",
        ))
    }

    /// Always `Unsupported`: orchestrations are linked into the AICPU image and installed there
    /// ([`install_programs`](crate::install_programs)); the host cannot place one on the device.
    fn load_orchestration<F: Copy + Send + Sync + PartialEq + 'static>(
        &self,
        _program: &OrchestrationSource<'_, F>,
    ) -> Result<Handle, CannError> {
        Err(CannError::Unsupported(
            "orchestrations are linked into the AICPU image (install_programs); the image's program \
             table has no names for a host to look one up by",
        ))
    }
}

/// The host's view of time: **not** the device counter (the bound calls have no host read of
/// it), but the host's monotonic clock since the device was opened, counted at the chip's
/// counter frequency. Good for converting budgets between microseconds and device ticks; never
/// compare its values with device timestamps.
impl Clock for CannDevice {
    fn now_ticks(&self) -> Ticks {
        let us = self.shared.opened.elapsed().as_micros();
        (us * self.shared.chip.counter_hz as u128 / 1_000_000).min(u64::MAX as u128) as u64
    }
    fn freq_hz(&self) -> u64 {
        self.shared.chip.counter_hz
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
    /// Launch `func` on `block_dim` cores with `args` (copied by the runtime at submission).
    pub fn launch(&mut self, func: &CannFunction<'_>, block_dim: u32, args: &[u8]) -> Result<(), CannError> {
        // SAFETY: `func.raw` is a live function handle: its binary outlives the borrow `func`
        // holds.
        unsafe { self.launch_raw(func.raw, block_dim, args) }
    }

    /// # Safety
    ///
    /// `func` is a live function handle of this stream's device.
    unsafe fn launch_raw(&mut self, func: ffi::AclrtFuncHandle, block_dim: u32, args: &[u8]) -> Result<(), CannError> {
        if block_dim == 0 {
            return Err(CannError::InvalidArgument("kernel launch on zero cores"));
        }
        // SAFETY: `func` is live (the caller's promise); `args` is valid for `args.len()` bytes
        // during the call, which copies it; `self.raw` is live.
        check("aclrtLaunchKernel", unsafe {
            ffi::aclrtLaunchKernel(func, block_dim, args.as_ptr() as *const c_void, args.len(), self.raw)
        })
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

impl Drop for CannStream {
    fn drop(&mut self) {
        for (_, ev) in self.events.drain(..) {
            // SAFETY: each event is live and destroyed once.
            let _ = unsafe { ffi::aclrtDestroyEvent(ev) };
        }
        // SAFETY: `self.raw` is the live stream from `create_stream`, destroyed once.
        let _ = unsafe { ffi::aclrtDestroyStream(self.raw) };
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

/// The stream of a run that carries the AICPU program (see [`CannHost::create_streams`]).
#[derive(Debug)]
pub struct CannAicpuStream(pub CannStream);

/// The stream of a run that carries the AICore program (see [`CannHost::create_streams`]).
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

impl AicpuStream for CannAicpuStream {
    /// Always fails: no AICPU program can be loaded by this binding (see the module docs), so
    /// `program` is not one of this device's AICPU programs — `Unsupported`, naming what is
    /// missing.
    fn launch_aicpu(&mut self, _program: Handle, _args: GmAddr, _threads: u32) -> Result<(), CannError> {
        Err(CannError::Unsupported(
            "AICPU program launch: the vendor's CPU-kernel launch is not bound (and no AICPU program handle exists)",
        ))
    }
}

impl AicoreStream for CannAicoreStream {
    /// `aclrtLaunchKernel` of the program's function on `clusters` blocks; the argument block is
    /// `args` as 8 little-endian bytes (the device address of the launch descriptor). A handle
    /// that is not an AICore program of this device is `InvalidArgument`.
    fn launch_aicore(&mut self, program: Handle, args: GmAddr, clusters: u32) -> Result<(), CannError> {
        let func = self
            .0
            .shared
            .function(ProgramKind::Aicore, program)
            .ok_or(CannError::InvalidArgument("not an AICore program handle of this device"))?;
        // SAFETY: `func` was looked up in the device library this stream's `Shared` keeps
        // loaded, so it is live for the call.
        unsafe { self.0.launch_raw(func, clusters, &args.0.to_le_bytes()) }
    }
}

/// The host half of the chip over the vendor runtime: a [`HostPlatform`] whose device is a
/// [`CannDevice`]. Its topology is the chip's; see the module docs for what its loader and
/// streams can and cannot do. There is no device half here (the AICore side is compiled by the
/// vendor toolchain; the AICPU agent is this crate's AICPU type).
#[derive(Debug)]
pub enum CannHost {}

impl HostPlatform for CannHost {
    type Error = CannError;
    type Device = CannDevice;
    type AicpuStream = CannAicpuStream;
    type AicoreStream = CannAicoreStream;

    fn topology(device: &CannDevice) -> Topology {
        device.shared.chip.topology
    }

    fn create_streams(device: &CannDevice) -> Result<(CannAicpuStream, CannAicoreStream), CannError> {
        Ok((CannAicpuStream(device.create_stream()?), CannAicoreStream(device.create_stream()?)))
    }
}
