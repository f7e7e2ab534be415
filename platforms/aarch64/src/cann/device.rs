//! [`CannDevice`]: device selection, device memory, and the loader (the device images, kernels
//! and orchestrations).

use core::cell::RefCell;
use core::ffi::{CStr, c_void};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::rc::Rc;
use std::string::ToString;
use std::time::Instant;
use std::vec::Vec;

use pto_hal::{
    Clock, CoreType, DeviceMemory, ErrorType, GmAddr, Handle, HostPlatform, KernelSource, Loader, OrchestrationSource,
    ProgramKind, Ticks, Topology,
};

use super::shared::{Program, Shared};
use super::stream::{CannAicoreStream, CannAicpuStream, CannStream};
use super::{CannError, ChipFacts, VendorRuntime, check, ffi};

/// What a board loads onto a device when it opens it.
#[derive(Copy, Clone, Debug)]
pub struct DeviceImages<'a> {
    /// The AICPU library (`libpto_device.so` built for the chip): read on the host and loaded
    /// with `aclrtBinaryLoadFromData` in CPU-kernel mode 2; its programs are registered by
    /// name (`aclrtRegisterCpuFunc`).
    pub aicpu_library: &'a CStr,
    /// The AICore binary holding the runtime's AICore program (the executor compiled by the
    /// vendor toolchain): loaded with `aclrtBinaryLoadFromFile`.
    pub aicore_binary: &'a CStr,
    /// The orchestration programs of the AICPU image's program table, in table order (the
    /// order its `install_programs` table lists them): orchestration `name` is handle
    /// `1 + index`.
    pub orchestrations: &'a [&'a str],
}

/// The host's handle on one device: selected with `aclrtSetDevice`, released (after its last
/// stream) on drop.
#[derive(Debug)]
pub struct CannDevice {
    pub(super) shared: Rc<Shared>,
}

impl CannDevice {
    /// Select device `id` for this thread (`aclrtSetDevice`) on the process's vendor runtime
    /// ([`VendorRuntime::get`]) and load the board's device images. `chip` is what the host
    /// needs to know of the chip (each chip crate has its `cann::CHIP`).
    pub fn open(id: i32, chip: ChipFacts, images: &DeviceImages<'_>) -> Result<CannDevice, CannError> {
        let api = VendorRuntime::get()?.api();
        let aicpu_bytes =
            std::fs::read(std::path::Path::new(&*images.aicpu_library.to_string_lossy())).map_err(|_| {
                CannError::InvalidArgument("the AICPU library cannot be read (DeviceImages::aicpu_library)")
            })?;
        // SAFETY: plain integer argument.
        check("aclrtSetDevice", unsafe { (api.aclrtSetDevice)(id) })?;
        // From here on, dropping `shared` resets the device (and unloads what was loaded).
        let mut shared = Shared {
            api,
            id,
            chip,
            aicpu_bin: None,
            aicore_bin: None,
            kernel_bins: RefCell::new(Vec::new()),
            orchestrations: images.orchestrations.iter().map(|s| s.to_string()).collect(),
            programs: RefCell::new(Vec::new()),
            allocs: RefCell::new(BTreeMap::new()),
            reg_windows: RefCell::new(None),
            opened: Instant::now(),
        };
        let mut opt = ffi::AclrtBinaryLoadOption {
            kind: ffi::ACL_RT_BINARY_LOAD_OPT_CPU_KERNEL_MODE,
            value: ffi::AclrtBinaryLoadOptionValue { cpu_kernel_mode: ffi::CPU_KERNEL_MODE_REGISTER, rsv: [0; 3] },
        };
        let opts = ffi::AclrtBinaryLoadOptions { options: &mut opt, num_opt: 1 };
        let mut raw: ffi::AclrtBinHandle = core::ptr::null_mut();
        // SAFETY: `aicpu_bytes` is valid for its length during the call (which copies it);
        // `opts` points at one live option; `raw` is a valid out-pointer.
        check("aclrtBinaryLoadFromData", unsafe {
            (api.aclrtBinaryLoadFromData)(aicpu_bytes.as_ptr().cast(), aicpu_bytes.len(), &opts, &mut raw)
        })?;
        shared.aicpu_bin = Some(raw);
        let mut raw: ffi::AclrtBinHandle = core::ptr::null_mut();
        // SAFETY: the path is NUL-terminated and outlives the call; null options select the
        // defaults; `raw` is a valid out-pointer.
        check("aclrtBinaryLoadFromFile", unsafe {
            (api.aclrtBinaryLoadFromFile)(images.aicore_binary.as_ptr(), core::ptr::null_mut(), &mut raw)
        })?;
        shared.aicore_bin = Some(raw);
        Ok(CannDevice { shared: Rc::new(shared) })
    }

    /// The device id.
    pub fn id(&self) -> i32 {
        self.shared.id
    }

    /// Give the AICore register-window table the AICPU programs use (`windows[i]`: the base of
    /// physical core `i`'s registers as the AICPU process maps them, 0 for none): copied into
    /// device memory this device owns, named by every later AICPU launch. AscendCL has no call
    /// that returns these windows; the board obtains them (from the driver) and gives them
    /// here. Replaces an earlier table.
    pub fn set_register_windows(&self, windows: &[u64]) -> Result<(), CannError> {
        if windows.is_empty() {
            return Err(CannError::InvalidArgument("an empty register-window table"));
        }
        let count =
            u32::try_from(windows.len()).map_err(|_| CannError::InvalidArgument("register-window table too long"))?;
        let bytes: Vec<u8> = windows.iter().flat_map(|w| w.to_le_bytes()).collect();
        let table = self.alloc(bytes.len() as u64, 64)?;
        if let Err(e) = self.copy_h2d(table, &bytes) {
            let _ = self.free(table);
            return Err(e);
        }
        let old = self.shared.reg_windows.borrow_mut().replace((table.0, count));
        if let Some((old, _)) = old {
            self.shared.free_raw(old)?;
        }
        Ok(())
    }

    /// A new stream on this device (the run needs two: one for the AICPU program, one for the
    /// AICore program — never both on one stream, which deadlocks;
    /// [`CannHost`](super::CannHost) makes that unrepresentable).
    pub fn create_stream(&self) -> Result<CannStream, CannError> {
        CannStream::create(self.shared.clone())
    }

    fn dev_ptr(addr: GmAddr) -> *mut c_void {
        addr.0 as usize as *mut c_void
    }

    fn push_program(&self, kind: ProgramKind, name: &str, func: ffi::AclrtFuncHandle) -> Handle {
        let mut programs = self.shared.programs.borrow_mut();
        programs.push(Program { kind, name: name.into(), func });
        Handle(programs.len() as u64)
    }

    /// The binary at `path`, loaded on first use (`aclrtBinaryLoadFromFile`).
    fn kernel_binary(&self, path: &str) -> Result<ffi::AclrtBinHandle, CannError> {
        if let Some(&(_, b)) = self.shared.kernel_bins.borrow().iter().find(|(p, _)| p == path) {
            return Ok(b);
        }
        let c = CString::new(path).map_err(|_| CannError::InvalidArgument("kernel binary path contains a NUL byte"))?;
        let mut raw: ffi::AclrtBinHandle = core::ptr::null_mut();
        // SAFETY: `c` is NUL-terminated and outlives the call; null options select the
        // defaults; `raw` is a valid out-pointer.
        check("aclrtBinaryLoadFromFile", unsafe {
            (self.shared.api.aclrtBinaryLoadFromFile)(c.as_ptr(), core::ptr::null_mut(), &mut raw)
        })?;
        self.shared.kernel_bins.borrow_mut().push((path.into(), raw));
        Ok(raw)
    }
}

fn symbol(name: &str) -> Result<CString, CannError> {
    CString::new(name).map_err(|_| CannError::InvalidArgument("device program name contains a NUL byte"))
}

impl Loader for CannDevice {
    /// AICore programs: `name` looked up in the AICore binary (`aclrtBinaryGetFunction`).
    /// AICPU programs: `name` registered from the AICPU library (`aclrtRegisterCpuFunc`, entry
    /// and operator type both `name`). The same name twice gives the same handle; an unknown
    /// name is an error naming it and the vendor's code.
    fn load_program(&self, kind: ProgramKind, name: &str) -> Result<Handle, CannError> {
        if let Some(i) = self.shared.programs.borrow().iter().position(|p| p.kind == kind && p.name == name) {
            return Ok(Handle(i as u64 + 1));
        }
        let sym = symbol(name)?;
        let mut func: ffi::AclrtFuncHandle = core::ptr::null_mut();
        let api = self.shared.api;
        let (call, code) = match kind {
            ProgramKind::Aicore => {
                let bin = self.shared.aicore_bin.ok_or(CannError::InvalidArgument("no AICore binary loaded"))?;
                // SAFETY: `bin` is live (unloaded only when `Shared` drops); `sym` is
                // NUL-terminated and outlives the call; `func` is a valid out-pointer.
                ("aclrtBinaryGetFunction", unsafe { (api.aclrtBinaryGetFunction)(bin, sym.as_ptr(), &mut func) })
            }
            ProgramKind::Aicpu => {
                let bin = self.shared.aicpu_bin.ok_or(CannError::InvalidArgument("no AICPU library loaded"))?;
                // SAFETY: as above; entry and operator type are the same NUL-terminated name.
                ("aclrtRegisterCpuFunc", unsafe {
                    (api.aclrtRegisterCpuFunc)(bin, sym.as_ptr(), sym.as_ptr(), &mut func)
                })
            }
        };
        if code != ffi::ACL_SUCCESS {
            return Err(CannError::UnknownProgram { name: name.into(), call, code });
        }
        Ok(self.push_program(kind, name, func))
    }

    /// The kernel's device entry address for its core type: its binary
    /// (`KernelSource::binary`, loaded once per path with `aclrtBinaryLoadFromFile`), its
    /// function (`aclrtBinaryGetFunction`) and that function's AIC or AIV entry
    /// (`aclrtGetFunctionAddr`). A kernel without a binary, or without an entry for its core
    /// type, is an error naming it.
    fn load_kernel(&self, kernel: &KernelSource<'_>) -> Result<Handle, CannError> {
        let Some(path) = kernel.binary else {
            return Err(CannError::UnsupportedProgram {
                kind: ProgramKind::Aicore,
                name: kernel.name.into(),
                missing: "a chip runs kernels from their device binary (KernelSource::binary); this kernel has none",
            });
        };
        let bin = self.kernel_binary(path)?;
        let sym = symbol(kernel.name)?;
        let api = self.shared.api;
        let mut func: ffi::AclrtFuncHandle = core::ptr::null_mut();
        // SAFETY: `bin` is live until `Shared` drops; `sym` is NUL-terminated; `func` is a
        // valid out-pointer.
        let code = unsafe { (api.aclrtBinaryGetFunction)(bin, sym.as_ptr(), &mut func) };
        if code != ffi::ACL_SUCCESS {
            return Err(CannError::UnknownProgram { name: kernel.name.into(), call: "aclrtBinaryGetFunction", code });
        }
        let (mut aic, mut aiv) = (core::ptr::null_mut(), core::ptr::null_mut());
        // SAFETY: `func` was just returned for a live binary; both out-pointers are valid.
        check("aclrtGetFunctionAddr", unsafe { (api.aclrtGetFunctionAddr)(func, &mut aic, &mut aiv) })?;
        let entry = match kernel.core {
            CoreType::Aic => aic,
            CoreType::Aiv => aiv,
        };
        if entry.is_null() {
            return Err(CannError::UnsupportedProgram {
                kind: ProgramKind::Aicore,
                name: kernel.name.into(),
                missing: "its binary has no entry for the kernel's core type (aclrtGetFunctionAddr gave null)",
            });
        }
        Ok(Handle(entry as usize as u64))
    }

    /// The orchestration's handle in the AICPU image's program table: `1 + ` its index in the
    /// list the board gave ([`DeviceImages::orchestrations`]). The host cannot place a
    /// function on the device, so a name the image does not hold is an error naming it.
    fn load_orchestration<F: Copy + Send + Sync + PartialEq + 'static>(
        &self,
        program: &OrchestrationSource<'_, F>,
    ) -> Result<Handle, CannError> {
        match self.shared.orchestrations.iter().position(|n| n == program.name) {
            Some(i) => Ok(Handle(i as u64 + 1)),
            None => Err(CannError::UnknownProgram {
                name: program.name.into(),
                call: "the AICPU image's program table (DeviceImages::orchestrations) does not list it",
                code: 0,
            }),
        }
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
        let bytes = usize::try_from(size)
            .map_err(|_| CannError::InvalidArgument("allocation larger than the host's address space"))?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; size and policy are plain values.
        check("aclrtMalloc", unsafe { (self.shared.api.aclrtMalloc)(&mut p, bytes, ffi::ACL_MEM_MALLOC_HUGE_FIRST) })?;
        let addr = p as usize as u64;
        if addr == 0 || !addr.is_multiple_of(align) {
            // SAFETY: `p` was just returned by aclrtMalloc (a null is rejected by aclrtFree).
            let _ = unsafe { (self.shared.api.aclrtFree)(p) };
            return Err(CannError::Unsupported(
                "aclrtMalloc returned memory not aligned as requested; over-aligned allocation is not implemented",
            ));
        }
        self.shared.allocs.borrow_mut().insert(addr, size);
        Ok(GmAddr(addr))
    }

    fn free(&self, addr: GmAddr) -> Result<(), CannError> {
        self.shared.free_raw(addr.0)
    }

    fn copy_h2d(&self, dst: GmAddr, src: &[u8]) -> Result<(), CannError> {
        // SAFETY: `src` is valid for `src.len()` bytes for the (synchronous) call; the device
        // range is validated by the vendor runtime.
        check("aclrtMemcpy(H2D)", unsafe {
            (self.shared.api.aclrtMemcpy)(
                Self::dev_ptr(dst),
                src.len(),
                src.as_ptr().cast(),
                src.len(),
                ffi::ACL_MEMCPY_HOST_TO_DEVICE,
            )
        })
    }

    fn copy_d2h(&self, dst: &mut [u8], src: GmAddr) -> Result<(), CannError> {
        // SAFETY: `dst` is valid for writes of `dst.len()` bytes for the (synchronous) call;
        // the device range is validated by the vendor runtime.
        check("aclrtMemcpy(D2H)", unsafe {
            (self.shared.api.aclrtMemcpy)(
                dst.as_mut_ptr().cast(),
                dst.len(),
                Self::dev_ptr(src).cast_const(),
                dst.len(),
                ffi::ACL_MEMCPY_DEVICE_TO_HOST,
            )
        })
    }

    fn memset(&self, dst: GmAddr, byte: u8, len: u64) -> Result<(), CannError> {
        let len =
            usize::try_from(len).map_err(|_| CannError::InvalidArgument("memset longer than the address space"))?;
        // SAFETY: device pointer and sizes only; the vendor runtime validates the range.
        check("aclrtMemset", unsafe { (self.shared.api.aclrtMemset)(Self::dev_ptr(dst), len, byte as i32, len) })
    }
}

/// The host half of the chip over the vendor runtime: a [`HostPlatform`] whose device is a
/// [`CannDevice`]. Its topology is the chip's. There is no device half here
/// (the AICore side is compiled by the vendor toolchain; the AICPU side is `pto-device`).
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
