//! `pto-sim`: the simulated device.
//!
//! The device runs as threads on this machine: one per AICPU thread and one per AICore of the
//! board's topology, started when the device is opened and reused by every run. GM is an arena
//! owned by the device; registers are per-core words whose writes wake the agent waiting on
//! them, so idle agents park instead of spinning and 100+ threads behave on a two-core host.
//!
//! The simulator implements every HAL trait; which coherence contract it obeys is the type
//! parameter `C` ([`pto_hal::HostNonCoherent`] for a simulated a2a3, [`pto_hal::HostCoherent`]
//! for a simulated a5). This crate holds the coherent cache model: every maintenance operation
//! is an inlined no-op.
//!
//! ```
//! use pto_hal::{DeviceMemory, HostCoherent, Topology};
//! use pto_sim::{SimConfig, SimDevice};
//!
//! let dev = SimDevice::<HostCoherent>::open(
//!     Topology { clusters: 2, aicpu_threads: 2 },
//!     SimConfig::default(),
//! ).unwrap();
//! let a = dev.alloc(256, 64).unwrap();
//! dev.copy_h2d(a, &[7u8; 256]).unwrap();
//! let mut back = [0u8; 256];
//! dev.copy_d2h(&mut back, a).unwrap();
//! assert_eq!(back, [7u8; 256]);
//! ```

mod agent;
mod device;
mod error;
mod faithful;
mod gm;
mod panics;
mod park;
mod protect;
mod stream;

use std::marker::PhantomData;

use pto_hal::{
    Clock, Contract, CoreType, DeviceMemory, ErrorType, GmAddr, KernelFn, KernelLoader, Platform, ProgramLoader, Ticks,
    Topology,
};

pub use agent::{SimAicpu, SimCore};
pub use device::{DROP_JOIN_BUDGET, SimDevice, detached_threads};
pub use error::SimError;
pub use faithful::{COHERENCE_STATUS, CacheModel, Missing, Violation};
pub use gm::GM_BASE;
pub use stream::{SimAicoreStream, SimAicpuStream, SimEvent};

/// Status an agent reports when its program panicked.
pub const AGENT_PANIC_STATUS: i32 = -99;

/// Settings of a simulated device.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Device counter frequency in Hz (a2a3: 50 MHz, a5: 1 GHz).
    pub freq_hz: u64,
    /// Size of the GM arena in bytes (reserved lazily: untouched pages cost nothing).
    pub gm_bytes: u64,
    /// How long an idle AICPU thread spins before it parks, in microseconds.
    pub aicpu_spin_us: u64,
    /// How long an idle AICore spins before it parks, in microseconds.
    pub aicore_spin_us: u64,
    /// Most agents spinning at once (further capped by the host's CPU count).
    pub max_spinners: u32,
    /// The cache model (the environment variable `PTO_SIM_CACHE` overrides it at open).
    pub cache: CacheModel,
    /// Memory protection: every kernel access to GM is checked against its task's tensor
    /// arguments — a read must lie on the elements of one argument, a write on the elements of
    /// one argument the task may write through — and an access outside them is refused (nothing
    /// lands) and fails the run as the kernel's fault, naming the access and the nearest
    /// argument. On by default; the environment variable `PTO_SIM_PROTECT=off|on` overrides it at
    /// open, and [`SimDevice::set_protection`] switches it between runs.
    pub protect: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            freq_hz: 50_000_000,
            gm_bytes: 1 << 30,
            aicpu_spin_us: 50,
            aicore_spin_us: 20,
            max_spinners: 64,
            cache: CacheModel::Coherent,
            protect: true,
        }
    }
}

/// The simulator as a [`Platform`], for contract `C`.
pub struct Sim<C: Contract>(PhantomData<fn() -> C>);

impl<C: Contract> Platform for Sim<C> {
    type Contract = C;
    type Error = SimError;
    type Device = SimDevice<C>;
    type Aicpu = SimAicpu<C>;
    type Aicore = SimCore<C>;
    type AicpuStream = SimAicpuStream<C>;
    type AicoreStream = SimAicoreStream<C>;

    fn topology(device: &SimDevice<C>) -> Topology {
        device.topology()
    }

    fn create_streams(device: &SimDevice<C>) -> Result<(SimAicpuStream<C>, SimAicoreStream<C>), SimError> {
        if device.inner.shutdown.load(std::sync::atomic::Ordering::Acquire) {
            return Err(SimError::Closed);
        }
        Ok((SimAicpuStream::new(device.inner.clone()), SimAicoreStream::new(device.inner.clone())))
    }
}

impl<C: Contract> ErrorType for SimDevice<C> {
    type Error = SimError;
}

impl<C: Contract> SimDevice<C> {
    fn host_range(&self, addr: GmAddr, len: u64) -> Result<u64, SimError> {
        self.inner.gm.offset_of(addr, len).ok_or(SimError::InvalidAddress { addr: addr.0, len })
    }
}

impl<C: Contract> DeviceMemory for SimDevice<C> {
    fn alloc(&self, size: u64, align: u64) -> Result<GmAddr, SimError> {
        self.inner.gm.alloc(size, align)
    }
    fn free(&self, addr: GmAddr) -> Result<(), SimError> {
        self.inner.gm.free(addr)
    }
    fn copy_h2d(&self, dst: GmAddr, src: &[u8]) -> Result<(), SimError> {
        let off = self.host_range(dst, src.len() as u64)?;
        self.inner.gm.write_bytes(off, src);
        if let Some(f) = self.inner.model() {
            f.host_write(dst.0, src.len() as u64);
        }
        Ok(())
    }
    fn copy_d2h(&self, dst: &mut [u8], src: GmAddr) -> Result<(), SimError> {
        let off = self.host_range(src, dst.len() as u64)?;
        if let Some(f) = self.inner.model() {
            f.host_read(src.0, dst.len() as u64).map_err(SimError::Coherence)?;
        }
        self.inner.gm.read_bytes(off, dst);
        Ok(())
    }
    fn memset(&self, dst: GmAddr, byte: u8, len: u64) -> Result<(), SimError> {
        let off = self.host_range(dst, len)?;
        self.inner.gm.fill(off, byte, len);
        if let Some(f) = self.inner.model() {
            f.host_write(dst.0, len);
        }
        Ok(())
    }
}

impl<C: Contract> KernelLoader for SimDevice<C> {
    fn load_kernel(&self, kernel: KernelFn, core: CoreType) -> Result<u64, SimError> {
        let mut t = self.inner.kernels.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = t.iter().position(|&(f, c)| std::ptr::fn_addr_eq(f, kernel) && c == core) {
            return Ok(device::KERNEL_BASE + i as u64);
        }
        t.push((kernel, core));
        Ok(device::KERNEL_BASE + (t.len() - 1) as u64)
    }
}

impl<C: Contract> ProgramLoader for SimDevice<C> {
    fn load_program<F: Copy + Send + Sync + PartialEq + 'static>(&self, program: F) -> Result<u64, SimError> {
        let mut t = self.inner.programs.write().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = t.iter().position(|p| p.downcast_ref::<F>() == Some(&program)) {
            return Ok(device::PROGRAM_BASE + i as u64);
        }
        t.push(Box::new(program));
        Ok(device::PROGRAM_BASE + (t.len() - 1) as u64)
    }
}

impl<C: Contract> Clock for SimDevice<C> {
    fn now_ticks(&self) -> Ticks {
        self.inner.now_ticks()
    }
    fn freq_hz(&self) -> u64 {
        self.inner.config.freq_hz
    }
}
