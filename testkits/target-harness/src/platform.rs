//! [`OnTarget`]: the chip's real AICPU agent and the runtime's real device programs, in one
//! process, on the target instruction set.
//!
//! * **GM** is one zeroed heap buffer ([`Config::gm_bytes`], 4 KiB aligned). The host side
//!   allocates in it with the simulator's allocator (`pto_inproc::Heap`: first fit, coalescing
//!   frees, checked arithmetic) and copies with plain memory copies — the host's DMA. AICPU threads reach it through the chip's agent ([`Chip::Aicpu`]), AICores
//!   through [`TargetAicore`]; a [`GmAddr`] is the virtual address, as on the device.
//! * **Register windows** are one heap buffer per physical core, [`Chip::REG_WINDOW_BYTES`]
//!   long. The AICPU agent writes DMB and reads COND through its MMIO path (`volatile`); an
//!   AICore reads its DMB and writes its COND with volatile 32-bit accesses of the same bytes.
//!   Physical core ids are the board's worker indices reversed, so a runtime that indexed
//!   windows by worker instead of by the reported physical id would fail.
//! * **Streams** run their launches in order on a worker thread each
//!   (`pto_inproc::WorkerStream`, the simulator's stream queue with a worker); a launch runs its
//!   AICPU threads (or its AICores, one thread per core) on fresh threads and completes when
//!   all returned. A non-zero status is the launch's failure, reported by `wait_event` /
//!   `synchronize` as `DeviceFault` (by `synchronize` once).
//! * **Loader**: device programs are the ones installed by name (`pto_runtime::programs::install`,
//!   called by `Device::new_in_process`); kernels are Rust functions in a per-device table (handle =
//!   index + 1, resolved by [`TargetAicore`]; a function loaded again for the same core type
//!   keeps its handle); orchestrations go into the process's
//!   [`ProgramTable`] (`pto_aarch64::install_programs`), which is what the chip's AICPU agent
//!   resolves them from — the device path, not a harness shortcut.
//!
//! What is not the device: GM and the windows are ordinary cacheable memory (one coherence
//! domain), and the AICores are aarch64 threads rather than vendor-compiled cores.

use parking_lot::{Mutex, RwLock};
use std::any::Any;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use pto_aarch64::arm::{self, GenericTimer};
use pto_aarch64::{GmRegion, ProgramTable};
use pto_hal::{
    AicoreAgent, AicoreCache, AicoreEntry, AicoreLaunch, AicoreStream, AicpuAgent, AicpuCache, AicpuEntry, AicpuLaunch,
    AicpuStream, Barriers, Clock, Contract, CoreRegisters, CoreType, DeviceMemory, DevicePlatform, ErrorKind,
    ErrorType, Events, GmAddr, GmAtomic, GmMemory, Handle, HostPlatform, Kernel, KernelContext, KernelFault, KernelFn,
    KernelSource, LINE_BYTES, Loader, OrchestrationSource, Pause, Platform, ProgramKind, Stream, Ticks, Topology,
};
use pto_inproc::{HandleTable, Heap, HeapError, Registry, WorkerFault, WorkerStream, panic_message};

use crate::mem::{Arena, Windows};

/// A chip as the harness needs to know it: its real AICPU agent and its register layout.
/// Implemented by the chip crates' tests (the chip crates do not depend on this crate).
pub trait Chip: Send + Sync + 'static {
    /// Name, for messages.
    const NAME: &'static str;
    /// Offset of the dispatch register in a core's window.
    const DMB_OFFSET: u32;
    /// Offset of the status register.
    const COND_OFFSET: u32;
    /// Bytes of a core's register window the AICPU agent accesses.
    const REG_WINDOW_BYTES: u32;
    /// The chip's host-DMA coherence contract.
    type Contract: Contract;
    /// The chip's AICPU agent.
    type Aicpu: AicpuAgent + AicpuCache<Contract = Self::Contract> + Sync + 'static;
    /// The chip's AICPU agent over `gm` and the register windows `windows` (by physical core
    /// id).
    ///
    /// # Safety
    ///
    /// The agent constructor's contract: every byte of `gm` is mapped, readable and writable,
    /// for the agent's whole life and shared words are accessed only atomically; every
    /// non-zero entry of `windows` is the base of [`Chip::REG_WINDOW_BYTES`] bytes valid for
    /// volatile 32-bit accesses.
    unsafe fn aicpu(gm: GmRegion, windows: &'static [u64]) -> Self::Aicpu;
}

/// The shape of an on-target device.
#[derive(Copy, Clone, Debug)]
pub struct Config {
    /// Clusters and AICPU threads.
    pub topology: Topology,
    /// Bytes of GM.
    pub gm_bytes: usize,
}

/// An error of the harness's host side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetError {
    /// No free GM range of this size and alignment.
    OutOfMemory {
        /// Bytes asked for.
        size: u64,
    },
    /// An address or range outside GM, or a free of something never allocated.
    InvalidAddress(u64),
    /// A bounded wait ran out (microseconds).
    Timeout(u64),
    /// A launched program returned a non-zero status (or its thread panicked).
    DeviceFault(String),
    /// Something the harness cannot load: the message names it.
    Unsupported(String),
    /// A bad argument: the message names it.
    InvalidArgument(String),
    /// The stream's worker is gone.
    Closed,
}

impl core::fmt::Display for TargetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TargetError::OutOfMemory { size } => write!(f, "on-target GM exhausted ({size} bytes asked)"),
            TargetError::InvalidAddress(a) => write!(f, "address {a:#x} outside on-target GM or not allocated"),
            TargetError::Timeout(us) => write!(f, "wait budget of {us} us exhausted"),
            TargetError::DeviceFault(s) => write!(f, "device program failed: {s}"),
            TargetError::Unsupported(s) => write!(f, "not supported on target: {s}"),
            TargetError::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            TargetError::Closed => f.write_str("stream closed"),
        }
    }
}

impl std::error::Error for TargetError {}

impl pto_hal::Error for TargetError {
    fn kind(&self) -> ErrorKind {
        match self {
            TargetError::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            TargetError::InvalidAddress(_) => ErrorKind::InvalidAddress,
            TargetError::Timeout(_) => ErrorKind::Timeout,
            TargetError::DeviceFault(_) => ErrorKind::DeviceFault,
            TargetError::Unsupported(_) => ErrorKind::Unsupported,
            TargetError::InvalidArgument(_) => ErrorKind::Other,
            TargetError::Closed => ErrorKind::Closed,
        }
    }
}

/// What a device, its streams and its AICores share.
pub struct Shared<C: Chip> {
    topo: Topology,
    /// Owns GM (`region` is its address range).
    _gm: Arena,
    region: GmRegion,
    /// Register windows, by physical core id; leaked so agents can borrow them for `'static`
    /// (a few KiB per opened device, in tests).
    windows: &'static Windows,
    /// The GM allocator, over GM's addresses.
    heap: Mutex<Heap>,
    /// Loaded kernels and the core type each was loaded for; handles from 1.
    kernels: RwLock<HandleTable<(KernelFn, CoreType)>>,
    aicpu_programs: RwLock<Registry<AicpuEntry<C::Aicpu>>>,
    aicore_programs: RwLock<Registry<AicoreEntry<TargetAicore<C>>>>,
}

impl<C: Chip> Shared<C> {
    /// Physical core id of board worker `w`: the worker indices reversed.
    fn physical(&self, w: u32) -> u32 {
        self.topo.workers() - 1 - w
    }
    fn check(&self, addr: GmAddr, len: u64) -> Result<*mut u8, TargetError> {
        if !self.region.contains(addr, len) {
            return Err(TargetError::InvalidAddress(addr.0));
        }
        Ok(self.region.ptr(addr, len, 1))
    }
}

/// The host's handle on an on-target device of chip `C`.
pub struct TargetDevice<C: Chip> {
    shared: Arc<Shared<C>>,
}

impl<C: Chip> core::fmt::Debug for TargetDevice<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TargetDevice").field("chip", &C::NAME).field("topology", &self.shared.topo).finish()
    }
}

impl<C: Chip> TargetDevice<C> {
    /// A device of `config`'s shape: zeroed GM, zeroed register windows, no programs.
    pub fn open(config: Config) -> TargetDevice<C> {
        let gm = Arena::new(config.gm_bytes, 4096);
        let region = GmRegion::new(gm.addr(), gm.len()).expect("GM region");
        let workers = config.topology.workers() as usize;
        let windows: &'static Windows = Box::leak(Box::new(Windows::new(workers, C::REG_WINDOW_BYTES, None)));
        TargetDevice {
            shared: Arc::new(Shared {
                topo: config.topology,
                heap: Mutex::new(Heap::new(gm.addr().0, gm.len()).expect("GM lies in the address space")),
                _gm: gm,
                region,
                windows,
                kernels: RwLock::new(HandleTable::new("kernel", 1, KERNEL_CAPACITY)),
                aicpu_programs: RwLock::new(Registry::new("AICPU program", AICPU_BASE, PROGRAMS_PER_KIND)),
                aicore_programs: RwLock::new(Registry::new("AICore program", AICORE_BASE, PROGRAMS_PER_KIND)),
            }),
        }
    }

    /// The GM region.
    pub fn gm(&self) -> GmRegion {
        self.shared.region
    }
}

impl<C: Chip> ErrorType for TargetDevice<C> {
    type Error = TargetError;
}

impl<C: Chip> DeviceMemory for TargetDevice<C> {
    fn alloc(&self, size: u64, align: u64) -> Result<GmAddr, TargetError> {
        let at = self.shared.heap.lock().alloc(size, align).map_err(|e| match e {
            HeapError::ZeroSize | HeapError::BadAlignment(_) => TargetError::InvalidArgument(e.to_string()),
            HeapError::OutOfMemory { .. }
            | HeapError::TooLarge { .. }
            | HeapError::NotAllocated(_)
            | HeapError::BadRange { .. } => TargetError::OutOfMemory { size },
        })?;
        Ok(GmAddr(at))
    }
    fn free(&self, addr: GmAddr) -> Result<(), TargetError> {
        self.shared.heap.lock().free(addr.0).map(|_| ()).map_err(|_| TargetError::InvalidAddress(addr.0))
    }
    fn copy_h2d(&self, dst: GmAddr, src: &[u8]) -> Result<(), TargetError> {
        let p = self.shared.check(dst, src.len() as u64)?;
        // SAFETY: `[p, p + len)` lies in the GM arena (checked), which this device owns and
        // keeps alive; `src` is a distinct host buffer. The host writes GM only while no
        // launch that reads those bytes runs (the runtime's protocol), as DMA would.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) }
        Ok(())
    }
    fn copy_d2h(&self, dst: &mut [u8], src: GmAddr) -> Result<(), TargetError> {
        let p = self.shared.check(src, dst.len() as u64)?;
        // SAFETY: as for `copy_h2d`, with the roles swapped.
        unsafe { core::ptr::copy_nonoverlapping(p as *const u8, dst.as_mut_ptr(), dst.len()) }
        Ok(())
    }
    fn memset(&self, dst: GmAddr, byte: u8, len: u64) -> Result<(), TargetError> {
        let p = self.shared.check(dst, len)?;
        // SAFETY: as for `copy_h2d`.
        unsafe { core::ptr::write_bytes(p, byte, len as usize) }
        Ok(())
    }
}

/// The device counter, as the AICPU agents read it (same process, same counter).
impl<C: Chip> Clock for TargetDevice<C> {
    fn now_ticks(&self) -> Ticks {
        GenericTimer.now_ticks()
    }
    fn freq_hz(&self) -> u64 {
        GenericTimer.freq_hz()
    }
}

/// Handles of installed AICPU programs are `AICPU_BASE + index`, AICore programs
/// `AICORE_BASE + index` (two disjoint ranges), so a handle of one kind is never launched as
/// the other.
const AICPU_BASE: u64 = 0xA1C0_0000;
const AICORE_BASE: u64 = 0xA1C1_0000;
const PROGRAMS_PER_KIND: u64 = AICORE_BASE - AICPU_BASE;
/// Kernel and orchestration handles count from 1, below the program handles.
const KERNEL_CAPACITY: u64 = AICPU_BASE - 1;

/// The process's orchestration programs (append-only, so handles stay valid; handle =
/// index + 1), mirrored into the `pto_aarch64` program table the AICPU agents resolve from.
static ORCHESTRATIONS: Mutex<HandleTable<&'static (dyn Any + Send + Sync)>> =
    Mutex::new(HandleTable::new("orchestration", 1, KERNEL_CAPACITY));

impl<C: Chip> Loader for TargetDevice<C> {
    fn load_program(&self, kind: ProgramKind, name: &str) -> Result<Handle, TargetError> {
        let found = match kind {
            ProgramKind::Aicpu => self.shared.aicpu_programs.read().handle(name),
            ProgramKind::Aicore => self.shared.aicore_programs.read().handle(name),
        };
        found.ok_or_else(|| TargetError::Unsupported(format!("no {kind:?} program named {name} is installed")))
    }
    fn load_kernel(&self, kernel: &KernelSource<'_>) -> Result<Handle, TargetError> {
        let f = kernel.function.ok_or_else(|| {
            TargetError::Unsupported(format!(
                "kernel {}: no Rust body (the on-target AICores run kernels as Rust functions)",
                kernel.name
            ))
        })?;
        let core = kernel.core;
        let mut k = self.shared.kernels.write();
        k.find_or_push((f, core), |&(g, c)| core::ptr::fn_addr_eq(g, f) && c == core)
            .map_err(|e| TargetError::InvalidArgument(e.to_string()))
    }
    fn load_orchestration<F: Copy + Send + Sync + PartialEq + 'static>(
        &self,
        program: &OrchestrationSource<'_, F>,
    ) -> Result<Handle, TargetError> {
        let f = program.function.ok_or_else(|| {
            TargetError::Unsupported(format!(
                "orchestration {}: no Rust function to link into the AICPU image",
                program.name
            ))
        })?;
        let mut all = ORCHESTRATIONS.lock();
        if let Some(h) = all.find(|p| p.downcast_ref::<F>() == Some(&f)) {
            return Ok(h);
        }
        let h = all.push(Box::leak(Box::new(f))).map_err(|e| TargetError::InvalidArgument(e.to_string()))?;
        // The image's table, as a device image would link it: a new (leaked) table with every
        // program so far, replacing the previous one; earlier handles keep their index.
        let programs: &'static [&'static (dyn Any + Send + Sync)] =
            Box::leak(all.entries().to_vec().into_boxed_slice());
        pto_aarch64::install_programs(Box::leak(Box::new(ProgramTable { programs })));
        Ok(h)
    }
}

/// An on-target platform of chip `C` (uninhabited: a type-level bundle).
pub enum OnTarget<C: Chip> {
    #[doc(hidden)]
    _Never(core::convert::Infallible, PhantomData<C>),
}

impl<C: Chip> HostPlatform for OnTarget<C> {
    type Error = TargetError;
    type Device = TargetDevice<C>;
    type AicpuStream = TargetAicpuStream<C>;
    type AicoreStream = TargetAicoreStream<C>;

    fn topology(device: &TargetDevice<C>) -> Topology {
        device.shared.topo
    }
    fn create_streams(device: &TargetDevice<C>) -> Result<(TargetAicpuStream<C>, TargetAicoreStream<C>), TargetError> {
        Ok((
            TargetAicpuStream { core: spawn_stream("aicpu-stream")?, shared: device.shared.clone() },
            TargetAicoreStream { core: spawn_stream("aicore-stream")?, shared: device.shared.clone() },
        ))
    }
}

impl<C: Chip> DevicePlatform for OnTarget<C> {
    type Contract = C::Contract;
    type Aicpu = C::Aicpu;
    type Aicore = TargetAicore<C>;
}

impl<C: Chip> Platform for OnTarget<C> {
    fn install_aicpu_program(
        device: &TargetDevice<C>,
        name: &'static str,
        entry: AicpuEntry<C::Aicpu>,
    ) -> Result<(), TargetError> {
        let mut p = device.shared.aicpu_programs.write();
        p.install(name, entry).map_err(|e| TargetError::InvalidArgument(e.to_string()))?;
        Ok(())
    }
    fn install_aicore_program(
        device: &TargetDevice<C>,
        name: &'static str,
        entry: AicoreEntry<TargetAicore<C>>,
    ) -> Result<(), TargetError> {
        let mut p = device.shared.aicore_programs.write();
        p.install(name, entry).map_err(|e| TargetError::InvalidArgument(e.to_string()))?;
        Ok(())
    }
}

// ---------------------------------------------------------------- streams

/// A stream: launches in order on a worker thread of its own (`pto_inproc::WorkerStream`).
fn spawn_stream(name: &str) -> Result<WorkerStream<TargetError>, TargetError> {
    WorkerStream::spawn(name, worker_fault).map_err(|e| TargetError::Unsupported(format!("stream thread: {e}")))
}

/// The stream's own faults as the harness's errors.
fn worker_fault(f: WorkerFault) -> TargetError {
    match f {
        WorkerFault::Closed => TargetError::Closed,
        WorkerFault::Panicked(m) => TargetError::DeviceFault(format!("launch panicked: {m}")),
    }
}

macro_rules! impl_stream {
    ($ty:ident) => {
        impl<C: Chip> ErrorType for $ty<C> {
            type Error = TargetError;
        }
        impl<C: Chip> Stream for $ty<C> {
            type Event = u64;
            fn record_event(&mut self) -> Result<u64, TargetError> {
                Ok(self.core.record())
            }
            fn query_event(&self, ev: u64) -> Result<bool, TargetError> {
                Ok(self.core.query(ev))
            }
            fn wait_event(&self, ev: u64, timeout_us: u64) -> Result<(), TargetError> {
                self.core.wait(ev, timeout_us).map_err(|w| w.into_error(TargetError::Timeout))
            }
            fn synchronize(&mut self, timeout_us: u64) -> Result<(), TargetError> {
                self.core.synchronize(timeout_us).map_err(|w| w.into_error(TargetError::Timeout))
            }
        }
    };
}

/// The stream that carries AICPU programs.
pub struct TargetAicpuStream<C: Chip> {
    core: WorkerStream<TargetError>,
    shared: Arc<Shared<C>>,
}

/// The stream that carries AICore programs.
pub struct TargetAicoreStream<C: Chip> {
    core: WorkerStream<TargetError>,
    shared: Arc<Shared<C>>,
}

impl_stream!(TargetAicpuStream);
impl_stream!(TargetAicoreStream);

/// The statuses of a launch's threads, as one result naming the first failure.
fn launch_result(what: &str, statuses: Vec<Result<i32, String>>) -> Result<(), TargetError> {
    for (i, s) in statuses.into_iter().enumerate() {
        match s {
            Ok(0) => {}
            Ok(st) => return Err(TargetError::DeviceFault(format!("{what}: thread {i} returned status {st}"))),
            Err(panic) => return Err(TargetError::DeviceFault(format!("{what}: thread {i} panicked: {panic}"))),
        }
    }
    Ok(())
}

impl<C: Chip> AicpuStream for TargetAicpuStream<C> {
    fn launch_aicpu(&mut self, program: Handle, args: GmAddr, threads: u32) -> Result<(), TargetError> {
        let (name, entry) = self
            .shared
            .aicpu_programs
            .read()
            .entry(program)
            .map_err(|e| TargetError::InvalidArgument(e.to_string()))?;
        if threads == 0 || threads > self.shared.topo.aicpu_threads {
            return Err(TargetError::InvalidArgument(format!("{threads} AICPU threads on a {:?}", self.shared.topo)));
        }
        let shared = self.shared.clone();
        self.core.submit(Box::new(move || {
            // The AICPU program's static storage for this launch.
            let scratch = AtomicPtr::new(core::ptr::null_mut());
            let statuses = std::thread::scope(|s| {
                let hs: Vec<_> = (0..threads)
                    .map(|t| {
                        let (shared, scratch) = (&shared, &scratch);
                        std::thread::Builder::new()
                            .name(format!("aicpu-{t}"))
                            .spawn_scoped(s, move || {
                                // SAFETY: GM is the device's arena, mapped and owned by
                                // `shared`, which outlives this launch; device code reaches it
                                // only through agents (shared words atomically, by the runtime's
                                // whole-line rule) and the host only between launches. The
                                // windows are leaked heap buffers of REG_WINDOW_BYTES each,
                                // accessed only with volatile 32-bit accesses.
                                let a = unsafe { C::aicpu(shared.region, &shared.windows.bases) };
                                entry(&a, AicpuLaunch { thread_idx: t, thread_count: threads, args, scratch })
                            })
                            .expect("spawn an AICPU thread")
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().map_err(|p| panic_message(&*p))).collect::<Vec<_>>()
            });
            launch_result(name, statuses)
        }))
    }
}

impl<C: Chip> AicoreStream for TargetAicoreStream<C> {
    fn launch_aicore(&mut self, program: Handle, args: GmAddr, clusters: u32) -> Result<(), TargetError> {
        let (name, entry) = self
            .shared
            .aicore_programs
            .read()
            .entry(program)
            .map_err(|e| TargetError::InvalidArgument(e.to_string()))?;
        let topo = self.shared.topo;
        if clusters == 0 || clusters > topo.clusters {
            return Err(TargetError::InvalidArgument(format!("{clusters} clusters on a {topo:?}")));
        }
        let shared = self.shared.clone();
        self.core.submit(Box::new(move || {
            // The launch numbers its workers by the launched clusters (AIC `0..k`, AIV `k..3k`),
            // whatever board cores host them.
            let launched = Topology { clusters, aicpu_threads: topo.aicpu_threads };
            let cores: Vec<(u32, u32)> = (0..clusters)
                .flat_map(|c| {
                    [
                        (topo.aic(c), launched.aic(c)),
                        (topo.aiv(c, 0), launched.aiv(c, 0)),
                        (topo.aiv(c, 1), launched.aiv(c, 1)),
                    ]
                })
                .collect();
            let statuses = std::thread::scope(|s| {
                let hs: Vec<_> = cores
                    .iter()
                    .map(|&(board_w, block_idx)| {
                        let shared = &shared;
                        std::thread::Builder::new()
                            .name(format!("aicore-{board_w}"))
                            .spawn_scoped(s, move || {
                                let phys = shared.physical(board_w);
                                let core = TargetAicore::new(shared.clone(), phys);
                                let launch = AicoreLaunch {
                                    block_idx,
                                    core_type: launched.core_type(block_idx),
                                    physical_core_id: phys,
                                    args,
                                };
                                entry(&core, launch)
                            })
                            .expect("spawn an AICore thread")
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().map_err(|p| panic_message(&*p))).collect::<Vec<_>>()
            });
            launch_result(name, statuses)
        }))
    }
}

// ---------------------------------------------------------------- the AICore agent

/// An AICore played by an aarch64 thread: GM in process memory, its own register window (DMB
/// read, COND written with volatile 32-bit accesses of the bytes the AICPU agent's MMIO path
/// uses), kernels as Rust functions from the device's table.
///
/// Cache maintenance is real aarch64 data-cache maintenance by address: `writeback_line` is
/// `dc cvac`, `invalidate_line` is `dc civac` (EL0 may not issue `dc ivac`; clean-and-invalidate
/// is the user-space form of "drop the line", harmless on a clean line), `cache_barrier` is
/// `dsb sy`. `invalidate_all` (whole-cache maintenance needs set/way operations, which EL0
/// cannot issue) is `dsb sy` alone: these "cores" are CPU threads in one inner-shareable,
/// hardware-coherent domain, so there is no private cache left to drop. Waiting yields the
/// thread (`sched_yield`), so idle cores leave the emulated CPUs to the AICPU threads.
pub struct TargetAicore<C: Chip> {
    shared: Arc<Shared<C>>,
    window: u64,
}

impl<C: Chip> TargetAicore<C> {
    fn new(shared: Arc<Shared<C>>, phys: u32) -> TargetAicore<C> {
        let window = shared.windows.bases[phys as usize];
        TargetAicore { shared, window }
    }
    #[track_caller]
    fn word(&self, addr: GmAddr) -> &AtomicU64 {
        let p = self.shared.region.ptr(addr, 8, 8) as *mut u64;
        // SAFETY: 8-aligned and inside the device's GM arena (checked), which `shared` keeps
        // alive at least as long as `&self`; shared words are only accessed atomically.
        unsafe { AtomicU64::from_ptr(p) }
    }
    /// The 32-bit register at `offset` of this core's window.
    fn reg(&self, offset: u32) -> *mut u32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= C::REG_WINDOW_BYTES);
        (self.window + offset as u64) as usize as *mut u32
    }
    /// The line holding `addr`, checked to lie in GM.
    #[track_caller]
    fn line(&self, addr: GmAddr) -> u64 {
        let l = GmAddr(addr.0 & !(LINE_BYTES - 1));
        self.shared.region.ptr(l, LINE_BYTES, 1) as u64
    }
}

impl<C: Chip> GmAtomic for TargetAicore<C> {
    fn query(&self, addr: GmAddr) -> u64 {
        self.word(addr).load(Ordering::Acquire)
    }
    fn store_direct(&self, addr: GmAddr, value: u64) {
        self.word(addr).store(value, Ordering::Release);
        pto_aarch64::barrier::store_store();
    }
    fn store_direct_u32(&self, addr: GmAddr, value: u32) {
        let p = self.shared.region.ptr(addr, 4, 4) as *mut u32;
        // SAFETY: as for `word`, 4-aligned.
        unsafe { AtomicU32::from_ptr(p) }.store(value, Ordering::Release);
        pto_aarch64::barrier::store_store();
    }
    fn swap(&self, addr: GmAddr, value: u64) -> u64 {
        self.word(addr).swap(value, Ordering::AcqRel)
    }
    fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
        self.word(addr).fetch_add(value, Ordering::AcqRel)
    }
    fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
        match self.word(addr).compare_exchange(expected, desired, Ordering::AcqRel, Ordering::Acquire) {
            Ok(v) | Err(v) => v,
        }
    }
}

impl<C: Chip> GmMemory for TargetAicore<C> {
    fn read(&self, addr: GmAddr, dst: &mut [u8]) {
        let src = self.shared.region.ptr(addr, dst.len() as u64, 1);
        // SAFETY: inside the GM arena (checked); `dst` is a distinct buffer; `copy` tolerates
        // overlap. No reference to GM is formed.
        unsafe { core::ptr::copy(src as *const u8, dst.as_mut_ptr(), dst.len()) }
    }
    fn write(&self, addr: GmAddr, src: &[u8]) {
        let dst = self.shared.region.ptr(addr, src.len() as u64, 1);
        // SAFETY: as for `read`, with the roles swapped.
        unsafe { core::ptr::copy(src.as_ptr(), dst, src.len()) }
    }
}

impl<C: Chip> AicoreCache for TargetAicore<C> {
    type Contract = C::Contract;
    fn writeback_line(&self, addr: GmAddr) {
        let l = self.line(addr);
        // SAFETY: the line lies in the GM arena (checked), mapped readable.
        unsafe { arm::dc_cvac(l) }
    }
    fn invalidate_line(&self, addr: GmAddr) {
        let l = self.line(addr);
        // SAFETY: as for `writeback_line`.
        unsafe { arm::dc_civac(l) }
    }
    fn invalidate_all(&self) {
        arm::dsb_sy();
    }
    fn cache_barrier(&self) {
        arm::dsb_sy();
    }
}

impl<C: Chip> Barriers for TargetAicore<C> {
    fn rmb(&self) {
        arm::dsb_ld()
    }
    fn wmb(&self) {
        arm::dsb_st()
    }
    fn store_store(&self) {
        arm::dmb_ishst()
    }
    fn full(&self) {
        arm::dsb_sy()
    }
    fn store_barrier(&self) {
        arm::dsb_sy()
    }
}

impl<C: Chip> CoreRegisters for TargetAicore<C> {
    fn read_dmb(&self) -> u32 {
        // SAFETY: the window is a live (leaked) buffer of REG_WINDOW_BYTES, the offset is in it
        // and 4-aligned (checked); it is only accessed with volatile 32-bit accesses, which
        // are single-copy atomic on aarch64 — the stand-in for MMIO.
        unsafe { core::ptr::read_volatile(self.reg(C::DMB_OFFSET)) }
    }
    fn write_cond(&self, value: u32) {
        // SAFETY: as for `read_dmb`.
        unsafe { core::ptr::write_volatile(self.reg(C::COND_OFFSET), value) }
    }
}

impl<C: Chip> Clock for TargetAicore<C> {
    fn now_ticks(&self) -> Ticks {
        arm::cntvct()
    }
    fn freq_hz(&self) -> u64 {
        arm::cntfrq()
    }
}

impl<C: Chip> Events for TargetAicore<C> {
    fn wait_for_event(&self, deadline: Ticks) {
        if arm::cntvct() < deadline {
            std::thread::yield_now();
        }
    }
    fn send_event(&self) {}
    fn wait_for_word(&self, addr: GmAddr, seen: u64, deadline: Ticks) {
        if self.query(addr) == seen && arm::cntvct() < deadline {
            std::thread::yield_now();
        }
    }
}

/// The chip's generic timer, as the AICPU agents hand out: the same counter the deadlines
/// count in.
impl<C: Chip> Pause for TargetAicore<C> {
    type Delay = GenericTimer;
    fn delay(&self) -> GenericTimer {
        GenericTimer
    }
}

impl<C: Chip> AicoreAgent for TargetAicore<C> {
    fn resolve_kernel(&self, bin: u64) -> Option<Kernel> {
        self.shared.kernels.read().get(Handle(bin)).ok().map(|k| Kernel::Rust(k.0))
    }
    fn run_kernel(&self, kernel: Kernel, ctx: &mut dyn KernelContext) -> Result<(), KernelFault> {
        let Kernel::Rust(kernel) = kernel else {
            return Err(KernelFault::new("the target harness runs Rust kernels only (no native kernel ABI here)"));
        };
        catch_unwind(AssertUnwindSafe(|| kernel(ctx))).map_err(|p| KernelFault::new(&panic_message(&*p)))
    }
    fn as_gm(&self) -> &dyn GmMemory {
        self
    }
}
