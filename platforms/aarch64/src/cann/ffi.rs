//! The AscendCL declarations this binding uses, checked against the public headers of the
//! vendor runtime (repository `hicann/runtime`, directory `include/external/acl/`):
//!
//! | header | commit | what is taken from it |
//! |---|---|---|
//! | `acl/acl_rt.h` (ACL 1.16.0) | `5f12132144df6e3bdb3a58a48d63893a9b3b60d4` | every function below, `aclrtMemcpyKind`, `aclrtMemMallocPolicy`, `aclrtEventRecordedStatus`, `aclrtBinaryLoadOption*`, `aclrtPlaceHolderInfo`, `aclrtLaunchKernelCfg`, the handle typedefs |
//! | `acl/acl_base_rt.h` | `31e824c95ed22e47c72936f60c67fcd599d59398` | `aclError` (`int`), `aclrtStream` / `aclrtEvent` (`void *`), `ACL_SUCCESS`, `ACL_ERROR_REPEAT_INITIALIZE` |
//! | `acl/error_codes/rt_error_codes.h` | `15c6c8dba7eb6bceeea8a32de42e7241bf35e6e0` | the `ACL_ERROR_RT_*` codes below |
//!
//! Calling convention: the headers declare plain C functions (`ACL_FUNC_VISIBILITY` is only a
//! visibility attribute), so every entry is `extern "C"`. C enums are `int`-sized on the
//! targets this runs on (aarch64 and x86_64 Linux, the SysV and AAPCS64 ABIs), so an enum
//! parameter is a `c_int` and its values are the constants below; `int32_t` is `i32`,
//! `uint32_t` is `u32`, `size_t` is `usize`. Handles (`aclrtStream`, `aclrtEvent`,
//! `aclrtBinHandle`, `aclrtFuncHandle`) are `void *`.
//!
//! The functions are not linked at build time: [`VendorRuntime::load`](super::VendorRuntime::load) opens the vendor library
//! (`libascendcl.so`) with `dlopen` and looks every one of them up by name, so a build without
//! the vendor SDK links, and a library that lacks one of them is refused at open naming it.

use core::ffi::{c_char, c_int, c_void};

/// `aclError` (`typedef int aclError`): 0 on success.
pub type AclError = c_int;
/// `aclrtStream` (`void *`).
pub type AclrtStream = *mut c_void;
/// `aclrtEvent` (`void *`).
pub type AclrtEvent = *mut c_void;
/// `aclrtBinHandle` (`void *`).
pub type AclrtBinHandle = *mut c_void;
/// `aclrtFuncHandle` (`void *`).
pub type AclrtFuncHandle = *mut c_void;

/// `ACL_SUCCESS`.
pub const ACL_SUCCESS: AclError = 0;
/// `ACL_ERROR_REPEAT_INITIALIZE`: `aclInit` was already called in this process.
pub const ACL_ERROR_REPEAT_INITIALIZE: AclError = 100_002;
/// `ACL_ERROR_RT_MEMORY_ALLOCATION`: device memory exhausted.
pub const ACL_ERROR_RT_MEMORY_ALLOCATION: AclError = 207_001;
/// `ACL_ERROR_RT_DEVICE_OOM`: the device ran out of memory.
pub const ACL_ERROR_RT_DEVICE_OOM: AclError = 207_018;
/// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT`: a stream synchronize ran out of time.
pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: AclError = 507_046;
/// `ACL_ERROR_RT_AICORE_EXCEPTION`: an AICore program faulted (surfaced by synchronize).
pub const ACL_ERROR_RT_AICORE_EXCEPTION: AclError = 507_015;
/// `ACL_ERROR_RT_AICPU_EXCEPTION`: an AICPU program faulted (surfaced by synchronize).
pub const ACL_ERROR_RT_AICPU_EXCEPTION: AclError = 507_018;

/// `aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_FIRST` (first enumerator: 0).
pub const ACL_MEM_MALLOC_HUGE_FIRST: c_int = 0;
/// `aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE` (second enumerator: 1).
pub const ACL_MEMCPY_HOST_TO_DEVICE: c_int = 1;
/// `aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST` (third enumerator: 2).
pub const ACL_MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_NOT_READY`.
pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: c_int = 0;
/// `aclrtEventRecordedStatus::ACL_EVENT_RECORDED_STATUS_COMPLETE`.
pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: c_int = 1;
/// `aclrtBinaryLoadOptionType::ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE`.
pub const ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE: c_int = 3;
/// `cpuKernelMode` 2: the binary is loaded from memory (`aclrtBinaryLoadFromData`) and each
/// AICPU function is registered with `aclrtRegisterCpuFunc` (no operator-info JSON file).
pub const CPU_KERNEL_MODE_REGISTER: i32 = 2;

/// `aclrtBinaryLoadOptionValue` (a union of 16 bytes: `isLazyLoad`, `magic`, `cpuKernelMode`,
/// `rsv[4]`). Only `cpuKernelMode` is used; the rest stays zero.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AclrtBinaryLoadOptionValue {
    /// `int32_t cpuKernelMode` (shares its 4 bytes with `isLazyLoad` and `magic`).
    pub cpu_kernel_mode: i32,
    /// The rest of `uint32_t rsv[4]`.
    pub rsv: [u32; 3],
}

/// `aclrtBinaryLoadOption`: an option type and its value.
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AclrtBinaryLoadOption {
    /// `aclrtBinaryLoadOptionType type`.
    pub kind: c_int,
    /// `aclrtBinaryLoadOptionValue value`.
    pub value: AclrtBinaryLoadOptionValue,
}

/// `aclrtBinaryLoadOptions`: `numOpt` options at `options`.
#[repr(C)]
#[derive(Debug)]
pub struct AclrtBinaryLoadOptions {
    /// `aclrtBinaryLoadOption *options`.
    pub options: *mut AclrtBinaryLoadOption,
    /// `size_t numOpt`.
    pub num_opt: usize,
}

/// `aclrtPlaceHolderInfo` (declared for `aclrtLaunchKernelWithHostArgs`; this binding passes
/// none).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AclrtPlaceHolderInfo {
    /// `uint32_t addrOffset`.
    pub addr_offset: u32,
    /// `uint32_t dataOffset`.
    pub data_offset: u32,
}

/// `aclrtLaunchKernelCfg`, opaque here: this binding passes a null configuration.
#[repr(C)]
#[derive(Debug)]
pub struct AclrtLaunchKernelCfg {
    _opaque: [u8; 0],
}

const _: () = assert!(core::mem::size_of::<AclrtBinaryLoadOptionValue>() == 16);
const _: () = assert!(core::mem::size_of::<AclrtBinaryLoadOption>() == 20);
const _: () = assert!(core::mem::size_of::<AclrtPlaceHolderInfo>() == 8);

macro_rules! acl_functions {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {
        /// The vendor runtime's functions this binding calls, looked up in the loaded library.
        /// Each field is the function of its name, with the header's prototype.
        #[allow(non_snake_case, reason = "the fields are the vendor's function names")]
        #[derive(Copy, Clone, Debug)]
        pub struct Acl {
            $($(#[$doc])* pub $name: unsafe extern "C" fn($($arg: $ty),*) -> $ret,)*
        }

        impl Acl {
            /// The names this binding looks up, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Look every function up in `lib` (a `dlopen` handle); the first missing one is
            /// named in the error.
            ///
            /// # Safety
            ///
            /// `lib` is a live `dlopen` handle of a library whose symbols of these names are
            /// functions with these prototypes (the vendor runtime, or a stand-in for it).
            pub(super) unsafe fn resolve(lib: *mut c_void) -> Result<Acl, &'static str> {
                Ok(Acl {
                    $($name: {
                        let sym = concat!(stringify!($name), "\0");
                        // SAFETY: `lib` is live (the caller's promise); the name is
                        // NUL-terminated.
                        let p = unsafe { dlsym(lib, sym.as_ptr().cast()) };
                        if p.is_null() {
                            return Err(stringify!($name));
                        }
                        // SAFETY: a non-null symbol of this name is this function (the
                        // caller's promise); function and data pointers have one size here.
                        unsafe {
                            core::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> $ret>(p)
                        }
                    },)*
                })
            }
        }
    };
}

acl_functions! {
    /// `aclError aclInit(const char *configPath)`; once per process.
    fn aclInit(config_path: *const c_char) -> AclError;
    /// `aclError aclrtSetDevice(int32_t deviceId)`.
    fn aclrtSetDevice(device_id: i32) -> AclError;
    /// `aclError aclrtResetDevice(int32_t deviceId)`.
    fn aclrtResetDevice(device_id: i32) -> AclError;
    /// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`.
    fn aclrtMalloc(dev_ptr: *mut *mut c_void, size: usize, policy: c_int) -> AclError;
    /// `aclError aclrtFree(void *devPtr)`.
    fn aclrtFree(dev_ptr: *mut c_void) -> AclError;
    /// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
    /// aclrtMemcpyKind kind)`; synchronous.
    fn aclrtMemcpy(dst: *mut c_void, dest_max: usize, src: *const c_void, count: usize, kind: c_int) -> AclError;
    /// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)`.
    fn aclrtMemset(dev_ptr: *mut c_void, max_count: usize, value: i32, count: usize) -> AclError;
    /// `aclError aclrtCreateStream(aclrtStream *stream)`.
    fn aclrtCreateStream(stream: *mut AclrtStream) -> AclError;
    /// `aclError aclrtDestroyStream(aclrtStream stream)`.
    fn aclrtDestroyStream(stream: AclrtStream) -> AclError;
    /// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`;
    /// `timeout` in ms, -1 waits forever.
    fn aclrtSynchronizeStreamWithTimeout(stream: AclrtStream, timeout: i32) -> AclError;
    /// `aclError aclrtCreateEvent(aclrtEvent *event)`.
    fn aclrtCreateEvent(event: *mut AclrtEvent) -> AclError;
    /// `aclError aclrtDestroyEvent(aclrtEvent event)`.
    fn aclrtDestroyEvent(event: AclrtEvent) -> AclError;
    /// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
    fn aclrtRecordEvent(event: AclrtEvent, stream: AclrtStream) -> AclError;
    /// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)`.
    fn aclrtQueryEventStatus(event: AclrtEvent, status: *mut c_int) -> AclError;
    /// `aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions
    /// *options, aclrtBinHandle *binHandle)`: an AICore binary (`*.o`).
    fn aclrtBinaryLoadFromFile(
        bin_path: *const c_char,
        options: *mut AclrtBinaryLoadOptions,
        bin: *mut AclrtBinHandle,
    ) -> AclError;
    /// `aclError aclrtBinaryLoadFromData(const void *data, size_t length, const
    /// aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle)`: the AICPU library, with
    /// `cpuKernelMode` 2.
    fn aclrtBinaryLoadFromData(
        data: *const c_void,
        length: usize,
        options: *const AclrtBinaryLoadOptions,
        bin: *mut AclrtBinHandle,
    ) -> AclError;
    /// `aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle)`.
    fn aclrtBinaryUnLoad(bin: AclrtBinHandle) -> AclError;
    /// `aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char
    /// *kernelName, aclrtFuncHandle *funcHandle)`.
    fn aclrtBinaryGetFunction(bin: AclrtBinHandle, kernel_name: *const c_char, func: *mut AclrtFuncHandle)
    -> AclError;
    /// `aclError aclrtRegisterCpuFunc(const aclrtBinHandle handle, const char *funcName,
    /// const char *kernelName, aclrtFuncHandle *funcHandle)`: an AICPU function of a binary
    /// loaded from data.
    fn aclrtRegisterCpuFunc(
        bin: AclrtBinHandle,
        func_name: *const c_char,
        kernel_name: *const c_char,
        func: *mut AclrtFuncHandle,
    ) -> AclError;
    /// `aclError aclrtGetFunctionAddr(aclrtFuncHandle funcHandle, void **aicAddr, void
    /// **aivAddr)`: a kernel's device entry addresses.
    fn aclrtGetFunctionAddr(func: AclrtFuncHandle, aic_addr: *mut *mut c_void, aiv_addr: *mut *mut c_void)
    -> AclError;
    /// `aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t
    /// blockDim, aclrtStream stream, aclrtLaunchKernelCfg *cfg, void *hostArgs, size_t
    /// argsSize, aclrtPlaceHolderInfo *placeHolderArray, size_t placeHolderNum)`.
    fn aclrtLaunchKernelWithHostArgs(
        func: AclrtFuncHandle,
        block_dim: u32,
        stream: AclrtStream,
        cfg: *mut AclrtLaunchKernelCfg,
        host_args: *mut c_void,
        args_size: usize,
        place_holders: *mut AclrtPlaceHolderInfo,
        place_holder_num: usize,
    ) -> AclError;
}

/// `RTLD_NOW` (glibc, every Linux target).
pub(super) const RTLD_NOW: c_int = 2;

unsafe extern "C" {
    /// `void *dlopen(const char *filename, int flags)` (glibc).
    pub(super) fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    /// `void *dlsym(void *handle, const char *symbol)` (glibc).
    pub(super) fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    /// `char *dlerror(void)` (glibc).
    pub(super) fn dlerror() -> *mut c_char;
}
