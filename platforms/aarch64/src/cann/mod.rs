//! Host side over the vendor runtime (AscendCL, `libascendcl.so`), behind the `cann` feature.
//!
//! **Not run on a chip.** The declarations ([`ffi`]) are checked against the public AscendCL
//! headers (the table in [`ffi`] names each header and its commit), and the whole host path —
//! device selection, allocation, copies, binary loads, both launches on their two streams,
//! events, synchronisation, error surfacing, teardown — runs in the repository's tests against
//! a recording stand-in for the vendor library written in C (`testkits/cann-stub`). What that
//! cannot show — the device running the programs — is listed, item by item, with its
//! first-day check, in `docs/porting-a-board.md`.
//!
//! # The vendor library
//!
//! Nothing here links `libascendcl` at build time: [`VendorRuntime::load`] opens it with
//! `dlopen` (the path in `PTO_ASCENDCL_LIBRARY`, else `libascendcl.so` on the loader's path)
//! and looks every bound function up by name, so a build without the SDK links, and an
//! installed library that lacks a bound function is refused at open, naming it. The process
//! loads one vendor library, once ([`VendorRuntime::get`]).
//!
//! # What is bound
//!
//! * [`CannDevice`]: device selection (`aclrtSetDevice`, after `aclInit`),
//!   [`DeviceMemory`](pto_hal::DeviceMemory) over `aclrtMalloc` / `aclrtFree` / `aclrtMemcpy` /
//!   `aclrtMemset`, and the [`Loader`](pto_hal::Loader):
//!   * **AICore programs** — from the AICore binary the board names ([`DeviceImages`]), loaded
//!     with `aclrtBinaryLoadFromFile`, functions by `aclrtBinaryGetFunction`;
//!   * **AICPU programs** — from the AICPU library (`libpto_device.so`), loaded with
//!     `aclrtBinaryLoadFromData` in CPU-kernel mode 2 and registered by name with
//!     `aclrtRegisterCpuFunc`;
//!   * **kernels** — from each kernel's own binary (`KernelSource::binary`): the handle is the
//!     kernel's device entry address for its core type (`aclrtGetFunctionAddr`);
//!   * **orchestrations** — linked into the AICPU image, whose program table the board lists
//!     by name ([`DeviceImages::orchestrations`]): the handle is `1 + index`, what the image's
//!     `resolve_program` takes. A name the image does not hold is an error naming it.
//! * [`CannStream`]: [`Stream`](pto_hal::Stream) over `aclrtCreateStream`, events
//!   (`aclrtCreateEvent`, `aclrtRecordEvent`, `aclrtQueryEventStatus`) and
//!   `aclrtSynchronizeStreamWithTimeout`; both launches go through
//!   `aclrtLaunchKernelWithHostArgs` (the launch the headers pair with binaries loaded from a
//!   file or from data; `aclrtLaunchKernel` takes its arguments from device memory).
//! * [`CannHost`]: the [`HostPlatform`](pto_hal::HostPlatform), two distinct streams.
//!
//! The AICPU launch's argument is the `DeviceLaunch` block of `pto-device` (48 bytes: the
//! runtime's descriptor, GM as the AICPU process maps it, the AICore register-window table).
//! GM is taken as the span of this device's live allocations (the AICPU process shares the
//! device's address space); the register-window table is the board's to give
//! ([`CannDevice::set_register_windows`]): AscendCL has no call that returns the AICore
//! register windows, so without one an AICPU launch is an error saying so.
//!
//! Nothing reports success for something it did not do.

mod device;
pub mod ffi;
mod shared;
mod stream;

use core::ffi::{CStr, c_char};
use core::fmt;
use std::string::String;
use std::sync::OnceLock;

use pto_hal::{ErrorKind, ProgramKind, Topology};

pub use device::{CannDevice, CannHost, DeviceImages};
pub use stream::{
    CannAicoreStream, CannAicpuStream, CannEvent, CannStream, LAUNCH_BYTES, LAUNCH_MAGIC, LAUNCH_VERSION, launch_block,
};

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
    /// The vendor library could not be opened, or lacks a bound function.
    Library(String),
    /// A device program, kernel or orchestration the device images do not hold (or that
    /// could not be looked up).
    UnknownProgram {
        /// The program's name.
        name: String,
        /// The vendor call that failed (or what was searched).
        call: &'static str,
        /// Its `aclError` (0 when no call failed).
        code: i32,
    },
    /// A device program or kernel this binding cannot load (names it and what is missing).
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
            CannError::Library(what) => write!(f, "vendor runtime library: {what}"),
            CannError::UnknownProgram { name, call, code: 0 } => {
                write!(f, "{name:?} is not in the device images ({call})")
            }
            CannError::UnknownProgram { name, call, code } => {
                write!(f, "{name:?} not found in the device images ({call}: aclError {code})")
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
            CannError::Call { code: ffi::ACL_ERROR_RT_MEMORY_ALLOCATION | ffi::ACL_ERROR_RT_DEVICE_OOM, .. } => {
                ErrorKind::OutOfMemory
            }
            CannError::Call { .. }
            | CannError::InvalidArgument(_)
            | CannError::UnknownProgram { .. }
            | CannError::Library(_) => ErrorKind::Other,
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

/// What the host side needs to know of the chip it drives; each chip crate has its constant
/// (`pto_a2a3::cann::CHIP`, `pto_a5::cann::CHIP`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ChipFacts {
    /// The chip's topology ([`HostPlatform::topology`](pto_hal::HostPlatform::topology) of a
    /// device).
    pub topology: Topology,
    /// The device counter frequency in Hz (the host-side clock counts at it).
    pub counter_hz: u64,
}

/// The vendor runtime of this process: the opened library and its bound functions, initialised
/// (`aclInit`) once.
#[derive(Debug)]
pub struct VendorRuntime {
    api: ffi::Acl,
    path: String,
}

/// The library [`VendorRuntime::get`] opens when none was loaded explicitly: the path in
/// `PTO_ASCENDCL_LIBRARY`, else this name on the dynamic loader's path.
pub const DEFAULT_LIBRARY: &str = "libascendcl.so";

static RUNTIME: OnceLock<Result<VendorRuntime, CannError>> = OnceLock::new();

impl VendorRuntime {
    /// Open `path` (`dlopen`), look up every bound function ([`ffi::Acl::NAMES`]) and call
    /// `aclInit` (no configuration file; a process where it already ran is accepted). The
    /// first load of the process wins: a later call returns that runtime, or its error, and
    /// fails if it names another library.
    pub fn load(path: &CStr) -> Result<&'static VendorRuntime, CannError> {
        let want = path.to_string_lossy().into_owned();
        let rt = RUNTIME.get_or_init(|| Self::open(path)).as_ref().map_err(Clone::clone)?;
        if rt.path != want {
            return Err(CannError::Library(std::format!(
                "this process already loaded {:?}; cannot switch to {want:?}",
                rt.path
            )));
        }
        Ok(rt)
    }

    /// The process's runtime: the one loaded, else the library `PTO_ASCENDCL_LIBRARY` names,
    /// else [`DEFAULT_LIBRARY`].
    pub fn get() -> Result<&'static VendorRuntime, CannError> {
        if let Some(rt) = RUNTIME.get() {
            return rt.as_ref().map_err(Clone::clone);
        }
        let path = std::env::var("PTO_ASCENDCL_LIBRARY").unwrap_or_else(|_| DEFAULT_LIBRARY.into());
        let path = std::ffi::CString::new(path)
            .map_err(|_| CannError::Library("PTO_ASCENDCL_LIBRARY contains a NUL byte".into()))?;
        Self::load(&path)
    }

    fn open(path: &CStr) -> Result<VendorRuntime, CannError> {
        let shown = path.to_string_lossy().into_owned();
        // SAFETY: `path` is NUL-terminated; the handle is never closed (the functions stay
        // callable for the life of the process).
        let lib = unsafe { ffi::dlopen(path.as_ptr(), ffi::RTLD_NOW) };
        if lib.is_null() {
            // SAFETY: dlerror returns null or a NUL-terminated message, read before any other
            // dl call on this thread.
            let why = unsafe { ffi::dlerror() };
            let why = if why.is_null() {
                String::from("unknown reason")
            } else {
                // SAFETY: non-null: a NUL-terminated string owned by the loader.
                unsafe { CStr::from_ptr(why) }.to_string_lossy().into_owned()
            };
            return Err(CannError::Library(std::format!("cannot open {shown:?}: {why}")));
        }
        // SAFETY: `lib` is live; the library is the vendor runtime (or its stand-in), whose
        // symbols of these names have the header prototypes.
        let api = unsafe { ffi::Acl::resolve(lib) }
            .map_err(|name| CannError::Library(std::format!("{shown:?} has no function {name}")))?;
        // SAFETY: a null config path is "no configuration file"; no other pointer argument.
        let code = unsafe { (api.aclInit)(core::ptr::null::<c_char>()) };
        if code != ffi::ACL_SUCCESS && code != ffi::ACL_ERROR_REPEAT_INITIALIZE {
            return Err(CannError::Call { call: "aclInit", code });
        }
        Ok(VendorRuntime { api, path: shown })
    }

    /// The bound functions.
    pub fn api(&self) -> &ffi::Acl {
        &self.api
    }

    /// The library's path as loaded.
    pub fn path(&self) -> &str {
        &self.path
    }
}
