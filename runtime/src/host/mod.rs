//! The host side: open a device, register kernels, allocate and copy tensors, build graphs,
//! and run them through two pipeline slots.
//!
//! ```no_run
//! # fn demo<P: pto_hal::HostPlatform>(dev: pto_runtime::host::Device<P>) -> Result<(), pto_runtime::host::Error>
//! # {
//! use pto_hal::{CoreType, KernelContext};
//! use pto_runtime::{graph::Task, kernel::KernelIo};
//!
//! fn add_one(k: &mut dyn KernelContext) {
//!     let x: Vec<f32> = k.load::<f32>(0).into_iter().map(|v| v + 1.0).collect();
//!     k.store(0, &x);
//! }
//! let f = dev.register_kernel("add_one", CoreType::Aiv, add_one)?;
//! let x = dev.tensor_from(&[16], &[0.0f32; 16])?;
//! let graph = dev.build(|g| {
//!     g.submit(Task::aiv(f).inout(&x.tensor()))?;
//!     Ok(())
//! })?;
//! dev.run(&graph)?;
//! assert_eq!(x.read::<f32>()?, vec![1.0; 16]);
//! # Ok(()) }
//! ```
//!
//! The module is split by concern: [`config`] (budgets, run options, ring sizes), `memory`
//! (device tensors and the allocation table), `build` (graphs), `resident` (the executor
//! choice and the resident executor's initial state), `publish` (launch images), `slots`
//! (pipeline slots and reservation), `turns` (which run may use which slot, and leases),
//! `prepare` (prepare and launch), `fence` (the completion fence), `report` (what a run
//! reports) and [`error`]; [`trace`] and [`dump`] collect a run's trace and args dump, and
//! [`documents`] holds the files they write, as the types that write them and read them back.

mod build;
pub mod config;
pub mod documents;
pub mod dump;
pub mod error;
mod fence;
mod memory;
mod prepare;
mod publish;
mod report;
mod resident;
pub(crate) mod slots;
pub mod trace;
mod turns;

use crate::sync::{AtomicBool, AtomicU64, Ordering};
use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::string::{String, ToString};
use std::sync::Arc;
use std::vec::Vec;

use pto_hal::{
    CoreType, DeviceMemory, GmAddr, Handle, HostPlatform, KernelFn, KernelSource, Loader, OrchestrationSource,
    ProgramKind, Topology,
};

pub use build::{Graph, GraphBytes};
pub use config::{AicoreProgram, ConfigError, MAX_RING_HEAP, RingConfig, RunConfig, Timeouts};
use error::platform;
pub use error::{DeviceError, Error, PlatformError};
pub use fence::{HUNG_GRACE_US, RunHandle};
pub use memory::DeviceTensor;
pub use prepare::PreparedRun;
use publish::SlotMem;
pub use report::{CaptureReport, RunReport};
pub use resident::{Executor, LegacyReason};
pub use trace::Trace;

use crate::graph::FuncId;
use crate::hbg::FuncTable;
use crate::layout::SlotArena;
use crate::orch::OrchFn;
use slots::{PIPELINE_DEPTH, SlotTable};

/// An orchestration registered with a device: runs on either runtime.
#[derive(Clone, Debug)]
pub struct Program {
    name: String,
    /// The serial of the device the program was registered on ([`Device::serial`]).
    device: u64,
    handle: u64,
    f: OrchFn,
}

impl Program {
    /// The name given at registration.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The runtime's device programs on one device (see [`crate::programs`]).
#[derive(Copy, Clone, Debug)]
struct DevicePrograms {
    hbg: Handle,
    trb: Handle,
    aicore: Handle,
}

struct Streams<P: HostPlatform> {
    aicpu: P::AicpuStream,
    aicore: P::AicoreStream,
}

pub(crate) struct Inner<P: HostPlatform> {
    dev: P::Device,
    topo: Topology,
    timeouts: Timeouts,
    funcs: Mutex<(FuncTable, HashMap<String, FuncId>)>,
    streams: Mutex<Streams<P>>,
    programs: DevicePrograms,
    slot_table: SlotTable,
    slot_mem: [Mutex<SlotMem>; PIPELINE_DEPTH],
    turns: turns::Turns,
    /// Each slot's launched run, until its fence.
    in_flight: [Mutex<Option<fence::InFlight<P>>>; PIPELINE_DEPTH],
    /// Runs that never ended (a core stuck in a kernel), with the reason the device gave, kept
    /// with their slots, pins and graphs until their programs end ([`Inner::recover`]).
    stuck: Mutex<Vec<(fence::InFlight<P>, String)>>,
    /// Outcomes of runs the device fenced for their handles (oldest first), by epoch.
    fenced: Mutex<std::collections::VecDeque<(u64, Result<RunReport, Error>)>>,
    epoch: AtomicU64,
    next_graph: AtomicU64,
    allocs: memory::Allocations,
    closed: AtomicBool,
    unusable: Mutex<Option<String>>,
}

impl<P: HostPlatform> Inner<P> {
    fn lock_streams(&self) -> MutexGuard<'_, Streams<P>> {
        self.streams.lock()
    }

    /// Usable now (after recovering a run whose stuck core came back, if one did).
    fn check_usable(&self) -> Result<(), Error> {
        self.recover();
        self.check_usable_now()
    }

    /// Usable now, without trying to recover (for callers holding the turn lock).
    fn check_usable_now(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(why) = self.unusable.lock().clone() {
            return Err(Error::Unusable(why));
        }
        Ok(())
    }

    fn mark_unusable(&self, why: String) {
        let mut u = self.unusable.lock();
        u.get_or_insert(why);
    }
}

impl<P: HostPlatform> Drop for Inner<P> {
    fn drop(&mut self) {
        for m in &self.slot_mem {
            let m = m.lock();
            let _ = self.dev.free(m.arena);
            for (a, _) in [m.image, m.heaps, m.trace, m.dump_mem, m.resident].into_iter().flatten() {
                let _ = self.dev.free(a);
            }
        }
    }
}

/// An opened device. Cheap to clone (a shared handle); `Send + Sync` when the platform's
/// parts are, so several host threads can share one device: their runs take turns.
pub struct Device<P: HostPlatform> {
    inner: Arc<Inner<P>>,
}

impl<P: HostPlatform> Clone for Device<P> {
    fn clone(&self) -> Self {
        Device { inner: self.inner.clone() }
    }
}

impl<P: HostPlatform> core::fmt::Debug for Device<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("serial", &self.inner.allocs.device())
            .field("topology", &self.inner.topo)
            .finish_non_exhaustive()
    }
}

impl<P: HostPlatform> Device<P> {
    /// Take ownership of an opened platform device. The runtime's device programs must be
    /// loadable by name ([`crate::programs`]): installed for an in-process platform (see
    /// [`Device::new_in_process`]) or present in the platform's device library.
    pub fn new(dev: P::Device, timeouts: Timeouts) -> Result<Device<P>, Error> {
        timeouts.validate()?;
        let topo = P::topology(&dev);
        let load = |kind, name| dev.load_program(kind, name).map_err(platform("device program load"));
        let programs = DevicePrograms {
            hbg: load(ProgramKind::Aicpu, crate::programs::HBG_AICPU)?,
            trb: load(ProgramKind::Aicpu, crate::programs::TRB_AICPU)?,
            aicore: load(ProgramKind::Aicore, crate::programs::LEGACY_AICORE)?,
        };
        let (aicpu, aicore) = P::create_streams(&dev).map_err(platform("stream creation"))?;
        let arena_bytes = SlotArena { workers: topo.workers() }.bytes();
        let mut mems = Vec::new();
        for _ in 0..PIPELINE_DEPTH {
            let arena = dev.alloc(arena_bytes, 64).map_err(platform("slot allocation"))?;
            dev.memset(arena, 0, arena_bytes).map_err(platform("slot initialisation"))?;
            mems.push(Mutex::new(SlotMem {
                arena,
                image: None,
                heaps: None,
                trace: None,
                dump_mem: None,
                dump: None,
                dump_buffers: Default::default(),
                resident: None,
            }));
        }
        let mut mems = mems.into_iter();
        let slot_mem = [mems.next().ok_or(Error::Closed)?, mems.next().ok_or(Error::Closed)?];
        Ok(Device {
            inner: Arc::new(Inner {
                dev,
                topo,
                timeouts,
                funcs: Mutex::new((FuncTable::default(), HashMap::new())),
                streams: Mutex::new(Streams { aicpu, aicore }),
                programs,
                slot_table: SlotTable::new(),
                slot_mem,
                turns: turns::Turns::default(),
                in_flight: Default::default(),
                stuck: Mutex::new(Vec::new()),
                fenced: Mutex::new(std::collections::VecDeque::new()),
                epoch: AtomicU64::new(0),
                next_graph: AtomicU64::new(1),
                allocs: memory::Allocations::new(memory::next_device_serial()),
                closed: AtomicBool::new(false),
                unusable: Mutex::new(None),
            }),
        })
    }

    /// Take ownership of a device of a platform whose device half runs in this process (the
    /// simulator, the on-target harness): install the runtime's device programs, then
    /// [`Device::new`]. A device of more clusters than the platform's AICPU agent holds
    /// ([`pto_hal::AicpuAgent::MaxClusters`]) is refused ([`ConfigError::DeviceOverBound`]).
    pub fn new_in_process(dev: P::Device, timeouts: Timeouts) -> Result<Device<P>, Error>
    where
        P: pto_hal::Platform,
    {
        // The device programs about to be installed hold at most the AICPU agent's bound of
        // clusters (their per-core tables are sized by it): a device with more is refused here,
        // by name, rather than each of its launches at boot (`TOPOLOGY_BOUND`).
        let topo = P::topology(&dev);
        config::check_device_bound(topo.clusters, <P::Aicpu as pto_hal::AicpuAgent>::MAX_CLUSTERS)?;
        crate::programs::install::<P>(&dev).map_err(platform("device program install"))?;
        Device::new(dev, timeouts)
    }

    /// Register a kernel from its source: a Rust body for platforms that run kernels as
    /// functions, a binary (a shared object on the simulator, a kernel binary on hardware; see
    /// [`KernelSource`]). Same id rules as [`Device::register_kernel`].
    ///
    /// Before the first call the loader checks what it can: that the object loads, exports
    /// the entry (the symbol named like the kernel, else `kernel_entry`) and defines the ABI
    /// marker `pto_abi_version` that `include/pto_kernel.h` emits, with this runtime's
    /// version; an object without the marker (a system library, say) is refused by name. It
    /// cannot check what the code does.
    ///
    /// # Safety
    ///
    /// With a `binary`, this loads native code into the process (its initialisers run when
    /// it loads) and the runtime later calls its entry with the native kernel ABI. The caller
    /// promises that `binary` is a kernel object built for this ABI with
    /// `include/pto_kernel.h`, that its initialisers are sound, and that its entry touches
    /// only the views and argument block it is given (the simulator cannot contain a native
    /// kernel's stray writes to host memory). Without a `binary` nothing is loaded and the
    /// call is as safe as [`Device::register_kernel`].
    pub unsafe fn register_kernel_source(&self, source: &KernelSource<'_>) -> Result<FuncId, Error> {
        self.register_source(source)
    }

    /// [`Device::register_kernel_source`], for callers that have upheld its contract (or name
    /// no binary).
    fn register_source(&self, source: &KernelSource<'_>) -> Result<FuncId, Error> {
        self.register_loaded(source.name, source.core, || {
            self.inner.dev.load_kernel(source).map_err(platform("kernel load"))
        })
    }

    /// The device's topology.
    pub fn topology(&self) -> Topology {
        self.inner.topo
    }

    /// The device's budgets.
    pub fn timeouts(&self) -> Timeouts {
        self.inner.timeouts
    }

    /// Where pipeline slot `slot`'s launch descriptor lives (for tools and tests that inspect
    /// the device side).
    pub fn slot_descriptor(&self, slot: usize) -> Option<GmAddr> {
        self.inner.slot_mem.get(slot).map(|m| m.lock().arena)
    }

    /// The platform device underneath (for platform-specific controls such as fault injection).
    pub fn platform(&self) -> &P::Device {
        &self.inner.dev
    }

    /// Close the device: later calls fail with [`Error::Closed`]. Memory is returned when the
    /// last handle (device, tensors, graphs) is dropped.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    /// Why the device is unusable, if an earlier run left it so.
    pub fn unusable_reason(&self) -> Option<String> {
        self.inner.recover();
        self.inner.unusable.lock().clone()
    }

    /// Register `kernel` under `name` for `core` cores; returns its func id. Registering the
    /// same name for the other core type gives the same id (one func id, two binaries).
    pub fn register_kernel(&self, name: &str, core: CoreType, kernel: KernelFn) -> Result<FuncId, Error> {
        // No binary: nothing is loaded, only the Rust function is registered.
        self.register_source(&KernelSource { name, core, function: Some(kernel), binary: None })
    }

    fn register_loaded(
        &self,
        name: &str,
        core: CoreType,
        load: impl FnOnce() -> Result<Handle, Error>,
    ) -> Result<FuncId, Error> {
        self.inner.check_usable()?;
        let mut f = self.inner.funcs.lock();
        let (table, names) = &mut *f;
        let id = match names.get(name) {
            Some(&id) => {
                let info =
                    table.get(id.0).ok_or(Error::Kernel { name: name.to_string(), why: "inconsistent table" })?;
                let have = match core {
                    CoreType::Aic => info.aic.is_some(),
                    CoreType::Aiv => info.aiv.is_some(),
                };
                if have {
                    return Err(Error::Kernel { name: name.to_string(), why: "already registered for this core type" });
                }
                id
            }
            None => FuncId(
                table
                    .next_free()
                    .ok_or(Error::Kernel { name: name.to_string(), why: "all 1024 func ids are taken" })?,
            ),
        };
        let bin = load()?;
        table.insert(id.0, name, core, bin.0)?;
        names.insert(name.to_string(), id);
        Ok(id)
    }

    /// The func id registered under `name`.
    pub fn func(&self, name: &str) -> Option<FuncId> {
        self.inner.funcs.lock().1.get(name).copied()
    }

    /// Register an orchestration program: the same function runs on the host (host-built
    /// graph) or on the device's highest AICPU thread (device-side runtime).
    pub fn register_orchestration(&self, name: &str, f: OrchFn) -> Result<Program, Error> {
        self.inner.check_usable()?;
        let source = OrchestrationSource { name, function: Some(f), binary: None };
        let handle = self.inner.dev.load_orchestration(&source).map_err(platform("orchestration program load"))?;
        Ok(Program { name: name.to_string(), device: self.inner.allocs.device(), handle: handle.0, f })
    }

    /// `program` was registered on this device: its handle means nothing on another.
    pub(crate) fn check_program(&self, program: &Program) -> Result<(), Error> {
        let device = self.inner.allocs.device();
        if program.device != device {
            return Err(Error::ForeignHandle {
                what: "program",
                name: program.name.clone(),
                owner: program.device,
                device,
            });
        }
        Ok(())
    }
}
