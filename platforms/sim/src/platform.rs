//! The simulator as a HAL [`Platform`]: [`Sim`] (streams and installed device programs), and
//! the host-side traits of a [`SimDevice`] — device memory, the loader, the clock.

use std::marker::PhantomData;

use pto_hal::check::{Checks, GraphNotes};
use pto_hal::{
    AicoreEntry, AicpuEntry, Clock, Contract, DeviceMemory, DevicePlatform, ErrorType, GmAddr, Handle, HostPlatform,
    Kernel, KernelSource, Loader, OrchestrationSource, Platform, ProgramKind, Ticks, Topology,
};

use crate::agent::{SimAicpu, SimCore};
use crate::device::SimDevice;
use crate::error::SimError;
use crate::faithful;
use crate::stream::{SimAicoreStream, SimAicpuStream};

/// The simulator as a [`Platform`], for contract `C`.
pub struct Sim<C: Contract>(PhantomData<fn() -> C>);

impl<C: Contract> HostPlatform for Sim<C> {
    type Error = SimError;
    type Device = SimDevice<C>;
    type AicpuStream = SimAicpuStream<C>;
    type AicoreStream = SimAicoreStream<C>;

    fn topology(device: &SimDevice<C>) -> Topology {
        device.topology()
    }

    fn create_streams(device: &SimDevice<C>) -> Result<(SimAicpuStream<C>, SimAicoreStream<C>), SimError> {
        if device.shared().shutdown.load(std::sync::atomic::Ordering::Acquire) {
            return Err(SimError::Closed);
        }
        Ok((SimAicpuStream::new(device.inner.clone()), SimAicoreStream::new(device.inner.clone())))
    }

    /// Every simulated agent, AICPU thread or core, runs on this machine's processors.
    fn cores_share_host(_device: &SimDevice<C>) -> bool {
        true
    }

    fn set_checks(device: &SimDevice<C>, checks: Checks) -> bool {
        device.set_checks(checks).is_ok()
    }

    fn checks(device: &SimDevice<C>) -> Checks {
        device.checks()
    }

    fn note_graph(device: &SimDevice<C>, launch: GmAddr, graph: &GraphNotes<'_>) {
        let c = &device.shared().checker;
        if c.on() {
            c.note_graph(launch.0, graph);
        }
    }

    fn first_unwritten(device: &SimDevice<C>, addr: GmAddr, len: u64) -> Option<GmAddr> {
        device.shared().checker.first_unwritten(addr.0, addr.0.saturating_add(len)).map(GmAddr)
    }
}

impl<C: Contract> DevicePlatform for Sim<C> {
    type Contract = C;
    type Aicpu = SimAicpu<C>;
    type Aicore = SimCore<C>;
}

impl<C: Contract> Platform for Sim<C> {
    fn install_aicpu_program(
        device: &SimDevice<C>,
        name: &'static str,
        entry: AicpuEntry<SimAicpu<C>>,
    ) -> Result<(), SimError> {
        let mut t = device.inner.device_programs.write();
        t.aicpu.install(name, entry).map_err(|_| SimError::InvalidArgument("too many AICPU programs installed"))?;
        Ok(())
    }
    fn install_aicore_program(
        device: &SimDevice<C>,
        name: &'static str,
        entry: AicoreEntry<SimCore<C>>,
    ) -> Result<(), SimError> {
        let mut t = device.inner.device_programs.write();
        t.aicore.install(name, entry).map_err(|_| SimError::InvalidArgument("too many AICore programs installed"))?;
        Ok(())
    }
}

impl<C: Contract> ErrorType for SimDevice<C> {
    type Error = SimError;
}

impl<C: Contract> SimDevice<C> {
    fn host_range(&self, addr: GmAddr, len: u64) -> Result<u64, SimError> {
        self.shared().gm.offset_of(addr, len).ok_or(SimError::InvalidAddress { addr: addr.0, len })
    }
    fn host_word(&self, addr: GmAddr) -> Result<u64, SimError> {
        if !addr.0.is_multiple_of(8) {
            return Err(SimError::InvalidArgument("a device word address must be 8-aligned"));
        }
        self.host_range(addr, 8)
    }
}

impl<C: Contract> DeviceMemory for SimDevice<C> {
    fn alloc(&self, size: u64, align: u64) -> Result<GmAddr, SimError> {
        let at = self.shared().gm.alloc(size, align)?;
        self.shared().checker.host_alloc(at.0, at.0.saturating_add(size));
        Ok(at)
    }
    fn free(&self, addr: GmAddr) -> Result<(), SimError> {
        let len = self.shared().gm.free(addr)?;
        self.shared().checker.host_wrote(addr.0, addr.0.saturating_add(len));
        Ok(())
    }
    fn copy_h2d(&self, dst: GmAddr, src: &[u8]) -> Result<(), SimError> {
        let off = self.host_range(dst, src.len() as u64)?;
        let gm = &self.shared().gm;
        match self.shared().model() {
            // Memory and the lines' records change together (`Faithful::host_write`).
            Some(f) => f.host_write(dst.0, src.len() as u64, |at, n| {
                let i = (at - dst.0) as usize;
                gm.write_bytes(off + i as u64, &src[i..i + n as usize]);
            }),
            None => gm.write_bytes(off, src),
        }
        self.shared().checker.host_wrote(dst.0, dst.0 + src.len() as u64);
        Ok(())
    }
    fn copy_d2h(&self, dst: &mut [u8], src: GmAddr) -> Result<(), SimError> {
        let off = self.host_range(src, dst.len() as u64)?;
        if let Some(f) = self.shared().model() {
            f.host_read(src.0, dst.len() as u64).map_err(SimError::Coherence)?;
        }
        self.shared().gm.read_bytes(off, dst);
        Ok(())
    }
    fn memset(&self, dst: GmAddr, byte: u8, len: u64) -> Result<(), SimError> {
        let off = self.host_range(dst, len)?;
        let gm = &self.shared().gm;
        match self.shared().model() {
            Some(f) => f.host_write(dst.0, len, |at, n| gm.fill(off + (at - dst.0), byte, n)),
            None => gm.fill(off, byte, len),
        }
        self.shared().checker.host_wrote(dst.0, dst.0 + len);
        Ok(())
    }
    fn load_word(&self, addr: GmAddr) -> Result<u64, SimError> {
        let off = self.host_word(addr)?;
        let v = self.shared().gm.word(off).load(std::sync::atomic::Ordering::Acquire);
        if let Some(f) = self.shared().model() {
            // An acquire: what the device published before storing this word happens before
            // the host's later reads (so a payload read without its write-back is caught).
            f.word_load(faithful::HOST, off, addr.0);
        }
        Ok(v)
    }
    fn store_word(&self, addr: GmAddr, value: u64) -> Result<(), SimError> {
        let off = self.host_word(addr)?;
        if let Some(f) = self.shared().model() {
            f.word_store(faithful::HOST, off, addr.0, false);
        }
        self.shared().gm.word(off).store(value, std::sync::atomic::Ordering::SeqCst);
        self.shared().word_written(addr.0);
        Ok(())
    }
}

impl<C: Contract> Loader for SimDevice<C> {
    fn load_program(&self, kind: ProgramKind, name: &str) -> Result<Handle, SimError> {
        let t = self.inner.device_programs.read();
        let found = match kind {
            ProgramKind::Aicpu => t.aicpu.handle(name),
            ProgramKind::Aicore => t.aicore.handle(name),
        };
        found.ok_or_else(|| SimError::NotInstalled(name.to_string()))
    }

    fn load_kernel(&self, kernel: &KernelSource<'_>) -> Result<Handle, SimError> {
        // A binary is a native kernel (a host shared object); it wins over a Rust body.
        let k = match (kernel.binary, kernel.function) {
            (Some(path), _) => {
                let (id, entry) = self.shared().natives.load(kernel.name, path)?;
                Kernel::Native { entry, id }
            }
            (None, Some(f)) => Kernel::Rust(f),
            (None, None) => {
                return Err(SimError::NotInstalled(format!("kernel {} has no Rust body and no binary", kernel.name)));
            }
        };
        let core = kernel.core;
        self.shared().checker.name_kernel(crate::check::kernel_key(&k), kernel.name);
        let same = |a: &Kernel, b: &Kernel| match (a, b) {
            (Kernel::Rust(f), Kernel::Rust(g)) => std::ptr::fn_addr_eq(*f, *g),
            (Kernel::Native { id: i, .. }, Kernel::Native { id: j, .. }) => i == j,
            _ => false,
        };
        let mut t = self.shared().kernels.write();
        t.find_or_push((k, core), |(g, c)| same(g, &k) && *c == core)
            .map_err(|_| SimError::InvalidArgument("too many kernels loaded"))
    }

    fn load_orchestration<F: Copy + Send + Sync + PartialEq + 'static>(
        &self,
        program: &OrchestrationSource<'_, F>,
    ) -> Result<Handle, SimError> {
        let f = program
            .function
            .ok_or_else(|| SimError::NotInstalled(format!("orchestration {} has no Rust function", program.name)))?;
        let mut t = self.shared().programs.write();
        if let Some(h) = t.find(|p| p.downcast_ref::<F>() == Some(&f)) {
            return Ok(h);
        }
        t.push(Box::new(f)).map_err(|_| SimError::InvalidArgument("too many orchestrations loaded"))
    }
}

impl<C: Contract> Clock for SimDevice<C> {
    fn now_ticks(&self) -> Ticks {
        self.shared().now_ticks()
    }
    fn freq_hz(&self) -> u64 {
        self.shared().config.freq_hz
    }
    fn is_virtual(&self) -> bool {
        self.shared().engine.deterministic()
    }
}
