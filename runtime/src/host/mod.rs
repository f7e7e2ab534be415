//! The host side: open a device, register kernels, allocate and copy tensors, build graphs,
//! and run them through two pipeline slots.
//!
//! ```no_run
//! # fn demo<P: pto_hal::Platform>(dev: pto_runtime::host::Device<P>) -> Result<(), pto_runtime::host::Error>
//! # where P::Error: core::fmt::Display {
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

mod error;
pub mod slots;

use std::collections::HashMap;
use std::string::{String, ToString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use std::vec::Vec;

use pto_hal::{
    AicoreStream, AicpuStream, CoreType, DeviceMemory, GmAddr, KernelFn, KernelLoader, Platform, ProgramLoader, Stream,
    Topology,
};
use zerocopy::{FromBytes, IntoBytes};

use error::platform;
pub use error::{DeviceError, Error};

use crate::codes::OrchError;
use crate::codes::{ErrorCode, Site};
use crate::graph::{BufferRef, DType, Element, FuncId, GraphError, Placement, Tensor};
use crate::hbg::{FuncTable, GraphBuilder};
use crate::layout::{
    DESC_MAGIC, FuncEntry, LAYOUT_VERSION, LaunchConfig, LaunchDesc, ORCH_MAGIC, OrchImage, OrchTensor, RINGS,
    RUNTIME_HBG, RUNTIME_TRB, RingSpec, Shape, orch_flags,
};
use crate::orch::{Orch, OrchArgs, OrchFail, OrchFn, Orchestrator, RuntimeKind, ScopeMode};
use slots::{PIPELINE_DEPTH, Refused, SlotTable};

/// Budgets of a device, in microseconds. The chain is: scheduler watchdog < exit budget +
/// watchdog < core wait budget < host stream budget.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// AICPU no-progress watchdog (also bounds the handshake).
    pub watchdog_us: u64,
    /// Budget for a core group's EXIT acknowledgement.
    pub exit_us: u64,
    /// Host budget for a run's completion fence.
    pub stream_us: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { watchdog_us: 10_000_000, exit_us: 1_000_000, stream_us: 50_000_000 }
    }
}

/// Per-run options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunConfig {
    /// Clusters to launch (default: all of the board's).
    pub clusters: Option<u32>,
    /// AICPU threads to launch (default: all of the board's).
    pub aicpu_threads: Option<u32>,
    /// The run may use AIV cores only (the AIC cores are kept for other work): a graph with AIC
    /// or MIX tasks is refused before anything is uploaded. The AIC cores of the launched
    /// clusters still handshake and retire; they receive no task.
    pub aiv_only: bool,
    /// Override the scheduler watchdog for this run.
    pub watchdog_us: Option<u64>,
    /// Which runtime runs an orchestration program ([`Device::run_program`]); a graph built
    /// with [`Device::build`] always runs on the host-built-graph runtime.
    pub runtime: RuntimeKind,
    /// Ring sizes and budgets of the device-side runtime.
    pub rings: RingConfig,
}

/// Sizes of the device-side runtime's rings, per scope depth (ring `min(depth, 3)`; the
/// orchestration's own outer scope is depth 0), and its orchestrator budgets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Task-window slots per ring (powers of two). A scope may hold fewer tasks than this.
    pub window: [u32; RINGS],
    /// Heap bytes per ring (multiples of 64): argument records and scope-allocated tensors.
    pub heap: [u64; RINGS],
    /// Dependency-list entries per ring (one per producer → consumer edge of a live task).
    pub dep_pool: [u32; RINGS],
    /// Most live tensor-map entries.
    pub tensormap_entries: u32,
    /// Budget of one orchestrator wait (tensor data, ring reclaim) in microseconds; default:
    /// the scheduler watchdog.
    pub wait_us: Option<u64>,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            window: [4096, 512, 512, 512],
            heap: [4 << 20, 1 << 20, 1 << 20, 1 << 20],
            dep_pool: [8192, 2048, 2048, 2048],
            tensormap_entries: 65536,
            wait_us: None,
        }
    }
}

impl RingConfig {
    /// The same sizes for every ring.
    pub fn uniform(window: u32, heap: u64, dep_pool: u32) -> RingConfig {
        RingConfig { window: [window; RINGS], heap: [heap; RINGS], dep_pool: [dep_pool; RINGS], ..Self::default() }
    }

    fn validate(&self) -> Result<(), Error> {
        for r in 0..RINGS {
            let w = self.window[r];
            if !w.is_power_of_two() || !(2..=1 << crate::trb::ring::HANDLE_SLOT_BITS).contains(&w) {
                return Err(Error::Config(std::format!(
                    "rings.window[{r}] = {w}: a ring's task window must be a power of two in 2..=2^28"
                )));
            }
            if self.heap[r] < 64 || self.heap[r] % 64 != 0 {
                return Err(Error::Config(std::format!(
                    "rings.heap[{r}] = {}: a ring's heap must be a non-zero multiple of 64 bytes",
                    self.heap[r]
                )));
            }
            if self.dep_pool[r] == 0 || self.dep_pool[r] >= 1 << crate::trb::ring::HANDLE_SLOT_BITS {
                return Err(Error::Config(std::format!("rings.dep_pool[{r}] must be in 1..2^28")));
            }
        }
        if self.tensormap_entries == 0 {
            return Err(Error::Config("rings.tensormap_entries must be at least 1".to_string()));
        }
        Ok(())
    }
}

/// An orchestration registered with a device: runs on either runtime.
#[derive(Clone, Debug)]
pub struct Program {
    name: String,
    handle: u64,
    f: OrchFn,
}

impl Program {
    /// The name given at registration.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What a completed run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunReport {
    /// The run's epoch.
    pub epoch: u64,
    /// Tasks completed.
    pub tasks: u64,
    /// Subtasks dispatched to cores.
    pub dispatched: u64,
    /// Cores that handshook.
    pub cores: u64,
    /// Cores released through their gates.
    pub released: u64,
    /// Host wall time from launch to the completion fence.
    pub wall: Duration,
    /// Device-side runtime: how long the orchestration function ran on the device (its
    /// submission time, overlapped with execution). `None` on the host-built graph, whose
    /// submission is the graph build ([`Graph::build_time`]).
    pub orchestration: Option<Duration>,
    /// Pipeline slot used.
    pub slot: usize,
}

/// Device memory of one run slot: descriptor, handshakes, gates, payloads, image.
struct SlotMem {
    arena: GmAddr,
    image: Option<(GmAddr, u64)>,
    /// The device-side runtime's ring heaps (one allocation, cut per ring).
    heaps: Option<(GmAddr, u64)>,
}

struct Streams<P: Platform> {
    aicpu: P::AicpuStream,
    aicore: P::AicoreStream,
}

pub(crate) struct Inner<P: Platform> {
    dev: P::Device,
    topo: Topology,
    timeouts: Timeouts,
    funcs: Mutex<(FuncTable, HashMap<String, FuncId>)>,
    streams: Mutex<Streams<P>>,
    slot_table: SlotTable,
    slot_mem: [Mutex<SlotMem>; PIPELINE_DEPTH],
    epoch: AtomicU64,
    next_buffer: AtomicU64,
    closed: AtomicBool,
    unusable: Mutex<Option<String>>,
}

impl<P: Platform> Inner<P> {
    fn lock_streams(&self) -> MutexGuard<'_, Streams<P>> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_usable(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if let Some(why) = self.unusable.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Err(Error::Unusable(why));
        }
        Ok(())
    }

    fn mark_unusable(&self, why: String) {
        let mut u = self.unusable.lock().unwrap_or_else(|e| e.into_inner());
        u.get_or_insert(why);
    }
}

/// Bytes of one slot's arena: descriptor head, then per worker a handshake line, a gate line
/// and two payload lines.
fn arena_bytes(topo: Topology) -> u64 {
    core::mem::size_of::<LaunchDesc>() as u64 + topo.workers() as u64 * (64 + 64 + 128)
}

impl<P: Platform> Drop for Inner<P> {
    fn drop(&mut self) {
        for m in &self.slot_mem {
            let m = m.lock().unwrap_or_else(|e| e.into_inner());
            let _ = self.dev.free(m.arena);
            for (a, _) in [m.image, m.heaps].into_iter().flatten() {
                let _ = self.dev.free(a);
            }
        }
    }
}

/// An opened device. Cheap to clone (a shared handle).
pub struct Device<P: Platform> {
    inner: Arc<Inner<P>>,
}

impl<P: Platform> Clone for Device<P> {
    fn clone(&self) -> Self {
        Device { inner: self.inner.clone() }
    }
}

impl<P: Platform> core::fmt::Debug for Device<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device").field("topology", &self.inner.topo).finish_non_exhaustive()
    }
}

impl<P: Platform> Device<P>
where
    P::Error: core::fmt::Display,
{
    /// Take ownership of an opened platform device.
    pub fn new(dev: P::Device, timeouts: Timeouts) -> Result<Device<P>, Error> {
        let topo = P::topology(&dev);
        let (aicpu, aicore) = P::create_streams(&dev).map_err(platform("stream creation"))?;
        let arena_bytes = arena_bytes(topo);
        let mut mems = Vec::new();
        for _ in 0..PIPELINE_DEPTH {
            let arena = dev.alloc(arena_bytes, 64).map_err(platform("slot allocation"))?;
            dev.memset(arena, 0, arena_bytes).map_err(platform("slot initialisation"))?;
            mems.push(Mutex::new(SlotMem { arena, image: None, heaps: None }));
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
                slot_table: SlotTable::new(),
                slot_mem,
                epoch: AtomicU64::new(0),
                next_buffer: AtomicU64::new(1),
                closed: AtomicBool::new(false),
                unusable: Mutex::new(None),
            }),
        })
    }

    /// The device's topology.
    pub fn topology(&self) -> Topology {
        self.inner.topo
    }

    /// Where pipeline slot `slot`'s launch descriptor lives (for tools and tests that inspect
    /// the device side).
    pub fn slot_descriptor(&self, slot: usize) -> Option<GmAddr> {
        self.inner.slot_mem.get(slot).map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).arena)
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

    /// Register `kernel` under `name` for `core` cores; returns its func id. Registering the
    /// same name for the other core type gives the same id (one func id, two binaries).
    pub fn register_kernel(&self, name: &str, core: CoreType, kernel: KernelFn) -> Result<FuncId, Error> {
        self.inner.check_usable()?;
        let mut f = self.inner.funcs.lock().unwrap_or_else(|e| e.into_inner());
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
        let bin = self.inner.dev.load_kernel(kernel, core).map_err(platform("kernel load"))?;
        table.insert(id.0, name, core, bin)?;
        names.insert(name.to_string(), id);
        Ok(id)
    }

    /// The func id registered under `name`.
    pub fn func(&self, name: &str) -> Option<FuncId> {
        self.inner.funcs.lock().unwrap_or_else(|e| e.into_inner()).1.get(name).copied()
    }

    /// Allocate a zeroed device tensor of `shape` and element type `T`.
    pub fn alloc<T: Element>(&self, shape: &[u32]) -> Result<DeviceTensor<P>, Error> {
        self.alloc_dtype(T::DTYPE, shape)
    }

    /// Allocate a zeroed device tensor of `shape` and element type `dtype`.
    pub fn alloc_dtype(&self, dtype: DType, shape: &[u32]) -> Result<DeviceTensor<P>, Error> {
        self.inner.check_usable()?;
        let elems: u64 = shape.iter().map(|&d| d as u64).product();
        let bytes = elems * dtype.size() as u64;
        if bytes == 0 {
            return Err(Error::Graph(GraphError::ZeroExtent {
                dim: shape.iter().position(|&d| d == 0).unwrap_or(0) as u32,
            }));
        }
        let addr = self.inner.dev.alloc(bytes, 64).map_err(platform("tensor allocation"))?;
        let buffer = BufferRef {
            id: self.inner.next_buffer.fetch_add(1, Ordering::Relaxed),
            placement: Placement::External(addr),
            bytes,
            dtype,
        };
        let tensor = match Tensor::whole(buffer, shape) {
            Ok(t) => t,
            Err(e) => {
                let _ = self.inner.dev.free(addr);
                return Err(e.into());
            }
        };
        self.inner.dev.memset(addr, 0, bytes).map_err(platform("tensor zeroing"))?;
        Ok(DeviceTensor { dev: self.inner.clone(), tensor, addr })
    }

    /// Allocate a tensor of `shape` holding `data`.
    pub fn tensor_from<T: Element>(&self, shape: &[u32], data: &[T]) -> Result<DeviceTensor<P>, Error> {
        let t = self.alloc::<T>(shape)?;
        t.write(data)?;
        Ok(t)
    }

    /// Register an orchestration program: the same function runs on the host (host-built
    /// graph) or on the device's highest AICPU thread (device-side runtime).
    pub fn register_orchestration(&self, name: &str, f: OrchFn) -> Result<Program, Error> {
        self.inner.check_usable()?;
        let handle = self.inner.dev.load_program(f).map_err(platform("orchestration program load"))?;
        Ok(Program { name: name.to_string(), handle, f })
    }

    /// Build a graph: `f` submits tasks to the builder; dependencies are discovered as it
    /// goes. The image is emitted once and uploaded once per run.
    pub fn build<F>(&self, f: F) -> Result<Graph<P>, Error>
    where
        F: FnOnce(&mut GraphBuilder<'_>) -> Result<(), GraphError>,
    {
        self.build_inner(|b| f(b).map_err(Error::Graph))
    }

    /// Run `program` on the host into a graph (the host-built-graph runtime). Run the graph
    /// any number of times.
    pub fn build_program(&self, program: &Program, args: &OrchArgs) -> Result<Graph<P>, Error> {
        self.build_inner(|b| {
            b.set_clusters(self.inner.topo.clusters);
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                b.scope_begin(ScopeMode::Auto).and_then(|()| (program.f)(&mut Orch::new(&mut *b), args))
            }));
            let r = match ran {
                Ok(r) => r,
                // As on the device: a panicking orchestration is EXPLICIT_ORCH_FATAL.
                Err(p) => {
                    let text = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a non-text panic".to_string());
                    return Err(orch_error(
                        OrchFail::Code { code: OrchError::ExplicitOrchFatal, detail: 0 },
                        Some(&std::format!("orchestration panicked: {text}")),
                    ));
                }
            };
            let r = r.and_then(|()| b.scope_end());
            r.map_err(|e| orch_error(e, b.fatal_message()))
        })
    }

    fn build_inner(&self, f: impl FnOnce(&mut GraphBuilder<'_>) -> Result<(), Error>) -> Result<Graph<P>, Error> {
        self.inner.check_usable()?;
        let started = Instant::now();
        let funcs = self.inner.funcs.lock().unwrap_or_else(|e| e.into_inner()).0.clone();
        let graph_id = self.inner.next_buffer.fetch_add(1, Ordering::Relaxed);
        let mut b = GraphBuilder::new(&funcs, graph_id);
        f(&mut b)?;
        b.check_acyclic()?;
        let heap = match b.heap_bytes() {
            0 => None,
            // Not cleared: a runtime-allocated tensor is written by its producer before any
            // consumer reads it (the dependency guarantees it), as on the reference's heap.
            n => Some(self.inner.dev.alloc(n, 64).map_err(platform("graph heap allocation"))?),
        };
        let image = match b.emit(heap.unwrap_or(GmAddr::NULL)) {
            Ok(i) => i,
            Err(e) => {
                if let Some(h) = heap {
                    let _ = self.inner.dev.free(h);
                }
                return Err(e.into());
            }
        };
        let first = [Shape::Aic, Shape::Aiv, Shape::Mix].map(|s| b.first_of(s));
        let sync_max = [Shape::Aic, Shape::Aiv, Shape::Mix].map(|s| b.sync_start_max(s));
        Ok(Graph {
            dev: self.inner.clone(),
            image,
            heap,
            task_count: b.task_count(),
            first,
            sync_max,
            build_time: started.elapsed(),
        })
    }

    /// Drain: wait (bounded by the stream budget) until every program submitted to the device
    /// has finished, and surface any device program failure. Run handles still report their
    /// own runs.
    pub fn drain(&self) -> Result<(), Error> {
        let budget = self.inner.timeouts.stream_us;
        let mut s = self.inner.lock_streams();
        let a = s.aicpu.synchronize(budget).map_err(|e| timeout_or("AICPU stream drain", budget, e));
        let c = s.aicore.synchronize(budget).map_err(|e| timeout_or("AICore stream drain", budget, e));
        a.and(c)
    }

    /// Prepare, launch and wait for one run of `graph` with the default configuration.
    pub fn run(&self, graph: &Graph<P>) -> Result<RunReport, Error> {
        self.run_with(graph, &RunConfig::default())
    }

    /// Prepare, launch and wait for one run of `graph`.
    pub fn run_with(&self, graph: &Graph<P>, cfg: &RunConfig) -> Result<RunReport, Error> {
        self.prepare(graph, cfg)?.launch()?.wait()
    }

    /// Run `program` on the runtime `cfg.runtime` names: build on the host and run the graph,
    /// or orchestrate on the device.
    pub fn run_program(&self, program: &Program, args: &OrchArgs, cfg: &RunConfig) -> Result<RunReport, Error> {
        self.prepare_program(program, args, cfg)?.launch()?.wait()
    }

    /// Prepare one run of `program` on the runtime `cfg.runtime` names (see
    /// [`Device::prepare`] for the pipeline rules).
    pub fn prepare_program<'d>(
        &'d self,
        program: &Program,
        args: &OrchArgs,
        cfg: &RunConfig,
    ) -> Result<PreparedRun<'d, P>, Error> {
        match cfg.runtime {
            RuntimeKind::HostBuiltGraph => {
                let graph = self.build_program(program, args)?;
                let mut prepared = self.prepare(&graph, cfg)?;
                prepared.keep = Some(graph);
                Ok(prepared)
            }
            RuntimeKind::TensormapRing => {
                let (clusters, threads) = self.check_config(cfg)?;
                if threads < 2 {
                    return Err(Error::Config(std::format!(
                        "the device-side runtime needs at least 2 AICPU threads (one orchestrates, the others schedule), got {threads}"
                    )));
                }
                cfg.rings.validate()?;
                let wait_us = cfg.rings.wait_us.unwrap_or(cfg.watchdog_us.unwrap_or(self.inner.timeouts.watchdog_us));
                let watchdog = cfg.watchdog_us.unwrap_or(self.inner.timeouts.watchdog_us);
                if wait_us == 0 || wait_us > 2 * watchdog {
                    return Err(Error::Config(std::format!(
                        "rings.wait_us = {wait_us} must be in 1..=2 x watchdog ({} us): idle cores give up after that",
                        2 * watchdog
                    )));
                }
                let image = self.orch_image(program, args, cfg, wait_us)?;
                self.prepare_in_slot(clusters, threads, None, RuntimeKind::TensormapRing, |slot| {
                    self.publish_trb(slot, image, clusters, threads, cfg)
                })
            }
        }
    }

    /// Prepare a run: reserve a pipeline slot and publish the launch image (descriptor and
    /// graph image, synchronously, exactly once). A second run can be prepared while the first
    /// is launched: it takes the other slot.
    pub fn prepare<'d>(&'d self, graph: &Graph<P>, cfg: &RunConfig) -> Result<PreparedRun<'d, P>, Error> {
        if !Arc::ptr_eq(&graph.dev, &self.inner) {
            return Err(Error::Config("the graph was built for another device".to_string()));
        }
        let (clusters, threads) = self.check_config(cfg)?;
        graph.check_placeable(cfg, clusters, threads)?;
        let tasks = Some(graph.task_count);
        self.prepare_in_slot(clusters, threads, tasks, RuntimeKind::HostBuiltGraph, |slot| {
            self.publish(slot, &graph.image, graph.task_count, RUNTIME_HBG, clusters, threads, cfg)
        })
    }

    /// Reserve a pipeline slot and `publish` the run's launch image into it (returning the
    /// epoch); the slot is given back when publishing fails.
    fn prepare_in_slot<'d>(
        &'d self,
        clusters: u32,
        threads: u32,
        tasks: Option<u32>,
        runtime: RuntimeKind,
        publish: impl FnOnce(usize) -> Result<u64, Error>,
    ) -> Result<PreparedRun<'d, P>, Error> {
        let slot = self.reserve_slot()?;
        match publish(slot) {
            Ok(epoch) => {
                Ok(PreparedRun { dev: self, slot: Some(slot), epoch, clusters, threads, tasks, runtime, keep: None })
            }
            Err(e) => {
                self.inner.slot_table.release(slot);
                Err(e)
            }
        }
    }

    /// Clusters and threads of a run, after checking the configuration.
    fn check_config(&self, cfg: &RunConfig) -> Result<(u32, u32), Error> {
        let inner = &*self.inner;
        inner.check_usable()?;
        let clusters = cfg.clusters.unwrap_or(inner.topo.clusters);
        if clusters == 0 || clusters > inner.topo.clusters {
            return Err(Error::Config(std::format!("clusters must be 1..={}, got {clusters}", inner.topo.clusters)));
        }
        let threads = cfg.aicpu_threads.unwrap_or(inner.topo.aicpu_threads);
        if threads == 0 || threads > inner.topo.aicpu_threads {
            return Err(Error::Config(std::format!(
                "aicpu_threads must be 1..={}, got {threads}",
                inner.topo.aicpu_threads
            )));
        }
        if let Some(w) = cfg.watchdog_us {
            let core_wait = 2 * w + inner.timeouts.exit_us;
            if w == 0 || core_wait >= inner.timeouts.stream_us {
                return Err(Error::Config(std::format!(
                    "watchdog_us = {w} breaks the budget chain: it must be non-zero and 2 x watchdog + exit ({core_wait} us) must stay below the host stream budget ({} us)",
                    inner.timeouts.stream_us
                )));
            }
        }
        Ok((clusters, threads))
    }

    fn reserve_slot(&self) -> Result<usize, Error> {
        self.inner.slot_table.reserve().map_err(|r| match r {
            Refused::Full => Error::Busy("both pipeline slots hold live runs"),
            Refused::PredecessorNotLaunched => Error::Busy("the other prepared run must be launched first"),
        })
    }

    /// The orchestration image of a device-side run (without ring addresses yet).
    fn orch_image(&self, program: &Program, args: &OrchArgs, cfg: &RunConfig, wait_us: u64) -> Result<Vec<u8>, Error> {
        let funcs = self.inner.funcs.lock().unwrap_or_else(|e| e.into_inner()).0.clone();
        let mut tensors = Vec::with_capacity(args.tensors().len());
        for (i, t) in args.tensors().iter().enumerate() {
            let Placement::External(addr) = t.buffer.placement else {
                return Err(Error::Config(std::format!(
                    "orchestration argument {i} is not a device tensor (graph-heap tensors belong to one graph)"
                )));
            };
            tensors.push(OrchTensor {
                buffer_id: t.buffer.id,
                addr: addr.0,
                bytes: t.buffer.bytes,
                offset: t.offset,
                dtype: t.buffer.dtype.into(),
                ndims: t.ndims,
                shape: t.shape,
                strides: t.strides,
            });
        }
        let freq = pto_hal::Clock::freq_hz(&self.inner.dev);
        let head = OrchImage {
            magic: ORCH_MAGIC,
            version: LAYOUT_VERSION,
            program: program.handle,
            total_len: 0,
            func_count: funcs.len() as u32,
            tensor_count: tensors.len() as u32,
            scalar_count: args.scalars().len() as u32,
            tensormap_entries: cfg.rings.tensormap_entries,
            wait_ticks: (wait_us as u128 * freq as u128 / 1_000_000) as u64,
            flags: if cfg.aiv_only { orch_flags::AIV_ONLY } else { 0 },
            reserved: 0,
            rings: [RingSpec::default(); RINGS],
        };
        let mut bytes = head.as_bytes().to_vec();
        for id in 0..funcs.len() {
            let e = match funcs.get(id as u16) {
                Some(f) => FuncEntry { aic: f.aic.unwrap_or(0), aiv: f.aiv.unwrap_or(0) },
                None => FuncEntry::default(),
            };
            bytes.extend_from_slice(e.as_bytes());
        }
        for t in &tensors {
            bytes.extend_from_slice(t.as_bytes());
        }
        for v in args.scalars() {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        Ok(bytes)
    }

    fn publish_trb(
        &self,
        slot: usize,
        mut image: Vec<u8>,
        clusters: u32,
        threads: u32,
        cfg: &RunConfig,
    ) -> Result<u64, Error> {
        let need: u64 = cfg.rings.heap.iter().sum();
        let base = {
            let mut mem = self.inner.slot_mem[slot].lock().unwrap_or_else(|e| e.into_inner());
            match mem.heaps {
                Some((a, cap)) if cap >= need => a,
                old => {
                    if let Some((a, _)) = old {
                        self.inner.dev.free(a).map_err(platform("ring heap free"))?;
                        mem.heaps = None;
                    }
                    let a = self.inner.dev.alloc(need, 64).map_err(platform("ring heap allocation"))?;
                    mem.heaps = Some((a, need));
                    a
                }
            }
        };
        let mut head = OrchImage::read_from_prefix(&image).map_err(|_| Error::Config("bad image".to_string()))?.0;
        head.total_len = image.len() as u64;
        let mut at = base.0;
        for r in 0..RINGS {
            head.rings[r] = RingSpec {
                window: cfg.rings.window[r],
                dep_pool: cfg.rings.dep_pool[r],
                heap: cfg.rings.heap[r],
                heap_base: at,
            };
            at += cfg.rings.heap[r];
        }
        image[..core::mem::size_of::<OrchImage>()].copy_from_slice(head.as_bytes());
        self.publish(slot, &image, 0, RUNTIME_TRB, clusters, threads, cfg)
    }

    #[allow(clippy::too_many_arguments)]
    fn publish(
        &self,
        slot: usize,
        bytes: &[u8],
        task_count: u32,
        runtime: u32,
        clusters: u32,
        threads: u32,
        cfg: &RunConfig,
    ) -> Result<u64, Error> {
        let inner = &*self.inner;
        let dev = &inner.dev;
        let mut mem = inner.slot_mem[slot].lock().unwrap_or_else(|e| e.into_inner());
        let need = bytes.len() as u64;
        let image = match mem.image {
            Some((a, cap)) if cap >= need => a,
            old => {
                if let Some((a, _)) = old {
                    dev.free(a).map_err(platform("image free"))?;
                    mem.image = None;
                }
                let cap = need.next_power_of_two().max(4096);
                let a = dev.alloc(cap, 64).map_err(platform("image allocation"))?;
                mem.image = Some((a, cap));
                a
            }
        };
        let arena = mem.arena;
        let w = inner.topo.workers() as u64;
        let desc_len = core::mem::size_of::<LaunchDesc>() as u64;
        let epoch = inner.epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let freq = |us: u64| (us as u128 * pto_hal::Clock::freq_hz(dev) as u128 / 1_000_000) as u64;
        let watchdog_us = cfg.watchdog_us.unwrap_or(inner.timeouts.watchdog_us);
        let config = LaunchConfig {
            magic: DESC_MAGIC,
            version: LAYOUT_VERSION,
            epoch,
            clusters,
            workers: clusters * 3,
            aicpu_threads: threads,
            task_count,
            physical_cores: inner.topo.workers(),
            runtime,
            image: image.0,
            image_len: need,
            handshakes: arena.0 + desc_len,
            gates: arena.0 + desc_len + w * 64,
            payloads: arena.0 + desc_len + w * 128,
            watchdog_ticks: freq(watchdog_us),
            exit_ticks: freq(inner.timeouts.exit_us),
            core_wait_ticks: freq(2 * watchdog_us + inner.timeouts.exit_us),
            reserved: [0; 3],
        };
        let image_bytes = LaunchImage::prepare(config, bytes);
        image_bytes.publish(dev, arena, image)?;
        Ok(epoch)
    }
}

/// The host error for an orchestration API failure.
fn orch_error(e: OrchFail, message: Option<&str>) -> Error {
    match e {
        OrchFail::Graph(g) => Error::Graph(g),
        OrchFail::Code { code, detail } => Error::Device(DeviceError {
            code: ErrorCode::Orch(code),
            site: Site::Orchestrator,
            task: None,
            core: None,
            detail,
            message: message.unwrap_or("").to_string(),
        }),
        OrchFail::Stopped => Error::Device(DeviceError {
            code: ErrorCode::Orch(OrchError::InvalidArgs),
            site: Site::Orchestrator,
            task: None,
            core: None,
            detail: 0,
            message: "the orchestration used the API after a failure".to_string(),
        }),
    }
}

/// The bytes of one run's launch: descriptor head and graph image. Published exactly once
/// (the method consumes it), synchronously, before the run's kernels are submitted.
struct LaunchImage<'g> {
    desc: LaunchDesc,
    graph: &'g [u8],
}

impl<'g> LaunchImage<'g> {
    fn prepare(config: LaunchConfig, graph: &'g [u8]) -> Self {
        LaunchImage { desc: LaunchDesc { config, ..LaunchDesc::default() }, graph }
    }

    fn publish<D: DeviceMemory>(self, dev: &D, desc_at: GmAddr, image_at: GmAddr) -> Result<(), Error>
    where
        D::Error: core::fmt::Display,
    {
        dev.copy_h2d(image_at, self.graph).map_err(platform("image upload"))?;
        // Descriptor last: the fatal latch, counters and fault text are cleared with it.
        dev.copy_h2d(desc_at, self.desc.as_bytes()).map_err(platform("descriptor upload"))
    }
}

/// A run whose launch image is on the device, ready to launch. Dropping it frees its slot.
pub struct PreparedRun<'d, P: Platform> {
    dev: &'d Device<P>,
    slot: Option<usize>,
    epoch: u64,
    clusters: u32,
    threads: u32,
    tasks: Option<u32>,
    runtime: RuntimeKind,
    /// A graph built for this run only (a program on the host-built-graph runtime).
    keep: Option<Graph<P>>,
}

impl<'d, P: Platform> PreparedRun<'d, P>
where
    P::Error: core::fmt::Display,
{
    /// The pipeline slot this run holds.
    pub fn slot(&self) -> usize {
        self.slot.unwrap_or(usize::MAX)
    }

    /// Submit the run: the AICore program first, then the AICPU program, each on its own
    /// stream, each followed by a completion event. Never waits for the device.
    pub fn launch(mut self) -> Result<RunHandle<'d, P>, Error> {
        let inner = &*self.dev.inner;
        let slot = self.slot.take().ok_or(Error::Closed)?;
        if let Err(e) = inner.check_usable() {
            inner.slot_table.release(slot);
            return Err(e);
        }
        let desc = inner.slot_mem[slot].lock().unwrap_or_else(|e| e.into_inner()).arena;
        let started = Instant::now();
        let mut s = inner.lock_streams();
        let launched = (|| {
            s.aicore
                .launch_aicore(crate::exec::legacy::aicore_entry::<P::Aicore>, desc, self.clusters)
                .map_err(platform("AICore launch"))?;
            let core_ev = s.aicore.record_event().map_err(platform("AICore event"))?;
            let entry = match self.runtime {
                RuntimeKind::HostBuiltGraph => crate::aicpu::aicpu_entry::<P::Aicpu>,
                RuntimeKind::TensormapRing => crate::trb::aicpu_entry::<P::Aicpu>,
            };
            s.aicpu.launch_aicpu(entry, desc, self.threads).map_err(platform("AICPU launch"))?;
            let cpu_ev = s.aicpu.record_event().map_err(platform("AICPU event"))?;
            Ok::<_, Error>((cpu_ev, core_ev))
        })();
        drop(s);
        match launched {
            Ok((cpu_ev, core_ev)) => {
                inner.slot_table.launched(slot);
                Ok(RunHandle {
                    dev: self.dev,
                    slot: Some(slot),
                    epoch: self.epoch,
                    desc,
                    cpu_ev,
                    core_ev,
                    started,
                    tasks: self.tasks,
                    _keep: self.keep.take(),
                })
            }
            Err(e) => {
                // A half-submitted launch cannot be proven complete: the device is unusable.
                inner.mark_unusable(std::format!("launch failed: {e}"));
                inner.slot_table.release(slot);
                Err(e)
            }
        }
    }
}

impl<P: Platform> Drop for PreparedRun<'_, P> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.dev.inner.slot_table.release(slot);
        }
    }
}

/// A launched run. [`RunHandle::wait`] is its completion fence; dropping the handle waits too.
pub struct RunHandle<'d, P: Platform> {
    dev: &'d Device<P>,
    slot: Option<usize>,
    epoch: u64,
    desc: GmAddr,
    cpu_ev: <P::AicpuStream as Stream>::Event,
    core_ev: <P::AicoreStream as Stream>::Event,
    started: Instant,
    tasks: Option<u32>,
    _keep: Option<Graph<P>>,
}

impl<'d, P: Platform> RunHandle<'d, P>
where
    P::Error: core::fmt::Display,
{
    /// Non-blocking: have both of this run's boundaries completed?
    pub fn is_done(&self) -> Result<bool, Error> {
        let s = self.dev.inner.lock_streams();
        Ok(s.aicpu.query_event(self.cpu_ev).map_err(platform("AICPU event query"))?
            && s.aicore.query_event(self.core_ev).map_err(platform("AICore event query"))?)
    }

    /// Wait for the run (bounded by the device's stream budget) and report it.
    pub fn wait(mut self) -> Result<RunReport, Error> {
        self.finish()
    }

    /// The completion fence: both boundaries (AICPU first, then AICore), each bounded by the
    /// stream budget. `Err` only when a boundary never completed; a program that completed
    /// but failed is returned as `Ok(Some(failure))`.
    fn fence(&self) -> Result<Option<Error>, Error> {
        let inner = &*self.dev.inner;
        let budget = inner.timeouts.stream_us;
        let deadline = Instant::now() + Duration::from_micros(budget);
        let chunk = 2_000u64;
        let mut failure = None;
        for aicpu in [true, false] {
            let what = if aicpu { "AICPU program" } else { "AICore program" };
            loop {
                let left = deadline.saturating_duration_since(Instant::now()).as_micros() as u64;
                let s = inner.lock_streams();
                let r = if aicpu {
                    s.aicpu.wait_event(self.cpu_ev, chunk.min(left))
                } else {
                    s.aicore.wait_event(self.core_ev, chunk.min(left))
                };
                match r {
                    Ok(()) => break,
                    Err(e) if pto_hal::Error::kind(&e) == pto_hal::ErrorKind::Timeout => {
                        if left <= chunk {
                            return Err(Error::Timeout { what, micros: budget });
                        }
                    }
                    Err(e) => {
                        failure.get_or_insert(Error::Platform {
                            op: what,
                            kind: pto_hal::Error::kind(&e),
                            message: std::format!("{e}"),
                        });
                        break;
                    }
                }
            }
        }
        Ok(failure)
    }

    fn finish(&mut self) -> Result<RunReport, Error> {
        let Some(slot) = self.slot.take() else {
            return Err(Error::Closed);
        };
        let inner = &*self.dev.inner;
        let fenced = self.fence();
        let wall = self.started.elapsed();
        let result = match fenced {
            Err(e) => {
                inner.mark_unusable(std::format!("run {} never completed: {e}", self.epoch));
                Err(e)
            }
            Ok(None) => self.collect(slot, wall),
            // A program failed (e.g. the platform found a coherence violation): that is the
            // report; what the descriptor latched, if anything, is added to it.
            Ok(Some(Error::Platform { op, kind, message })) => {
                let also = match self.collect(slot, wall) {
                    Err(e) => std::format!("; the run also reported: {e}"),
                    Ok(_) => String::new(),
                };
                Err(Error::Platform { op, kind, message: message + &also })
            }
            Ok(Some(e)) => Err(e),
        };
        inner.slot_table.release(slot);
        result
    }

    fn collect(&self, slot: usize, wall: Duration) -> Result<RunReport, Error> {
        let inner = &*self.dev.inner;
        let mut d = LaunchDesc::default();
        inner.dev.copy_d2h(d.as_mut_bytes(), self.desc).map_err(platform("status read-back"))?;
        let workers = d.config.workers as u64;
        if d.fatal.claimed != 0 {
            let code = ErrorCode::from_i32(d.fatal.code as i32);
            let site = Site::try_from(d.fatal.site as u32).ok();
            let text = &d.fault_text.bytes;
            let n = text.iter().position(|&b| b == 0).unwrap_or(text.len());
            let err = DeviceError {
                code: code.unwrap_or(ErrorCode::Device(crate::codes::DeviceFault::BadImage)),
                site: site.unwrap_or(Site::Boot),
                task: (d.fatal.task != u64::MAX).then_some(d.fatal.task as u32),
                core: (d.fatal.core != u64::MAX).then_some(d.fatal.core as u32),
                detail: d.fatal.detail,
                message: String::from_utf8_lossy(&text[..n]).into_owned(),
            };
            // Surface (and clear) any program status too, so it cannot leak into the next run;
            // the latched fault is the better report, so the stream's own error is dropped.
            let _ = self.sync_streams();
            if d.run.cores_released < d.run.cores_ready || d.run.threads_done < d.config.aicpu_threads as u64 {
                inner.mark_unusable(std::format!("run {} left cores unreleased after: {err}", self.epoch));
            }
            return Err(Error::Device(err));
        }
        if d.run.threads_done != d.config.aicpu_threads as u64
            || d.run.cores_released != workers
            || self.tasks.is_some_and(|n| d.run.completed != n as u64)
        {
            // No latched fault but the run's own record is incomplete: ask the streams.
            self.sync_streams()?;
            inner.mark_unusable(std::format!("run {} ended without a complete record", self.epoch));
            return Err(Error::Unusable(std::format!(
                "run {} ended with {}/{:?} tasks, {}/{} threads, {}/{} cores released",
                self.epoch,
                d.run.completed,
                self.tasks,
                d.run.threads_done,
                d.config.aicpu_threads,
                d.run.cores_released,
                workers
            )));
        }
        Ok(RunReport {
            epoch: self.epoch,
            tasks: d.run.completed,
            dispatched: d.run.dispatched,
            cores: d.run.cores_ready,
            released: d.run.cores_released,
            wall,
            slot,
            orchestration: (d.config.runtime == RUNTIME_TRB).then(|| {
                let hz = pto_hal::Clock::freq_hz(&inner.dev).max(1);
                Duration::from_nanos((d.run.orch_ticks as u128 * 1_000_000_000 / hz as u128) as u64)
            }),
        })
    }

    fn sync_streams(&self) -> Result<(), Error> {
        let inner = &*self.dev.inner;
        let budget = inner.timeouts.stream_us;
        let mut s = inner.lock_streams();
        let a = s.aicpu.synchronize(budget).map_err(platform("AICPU stream"));
        let c = s.aicore.synchronize(budget).map_err(platform("AICore stream"));
        a.and(c)
    }
}

fn timeout_or<E: pto_hal::Error + core::fmt::Display>(what: &'static str, micros: u64, e: E) -> Error {
    if e.kind() == pto_hal::ErrorKind::Timeout {
        Error::Timeout { what, micros }
    } else {
        Error::Platform { op: what, kind: e.kind(), message: std::format!("{e}") }
    }
}

impl<P: Platform> Drop for RunHandle<'_, P> {
    fn drop(&mut self) {
        if self.slot.is_some() {
            let inner = &*self.dev.inner;
            // Fence before the slot can be reused, whatever the outcome.
            let budget = Duration::from_micros(inner.timeouts.stream_us);
            let deadline = Instant::now() + budget;
            let done = loop {
                let s = inner.lock_streams();
                let a = s.aicpu.query_event(self.cpu_ev).unwrap_or(true);
                let c = s.aicore.query_event(self.core_ev).unwrap_or(true);
                drop(s);
                if a && c {
                    break true;
                }
                if Instant::now() >= deadline {
                    break false;
                }
                std::thread::sleep(Duration::from_micros(200));
            };
            if !done {
                inner.mark_unusable(std::format!("run {} never completed", self.epoch));
            }
            if let Some(slot) = self.slot.take() {
                inner.slot_table.release(slot);
            }
        }
    }
}

/// A device tensor owned by the host. Freed when dropped.
pub struct DeviceTensor<P: Platform> {
    dev: Arc<Inner<P>>,
    tensor: Tensor,
    addr: GmAddr,
}

impl<P: Platform> DeviceTensor<P>
where
    P::Error: core::fmt::Display,
{
    /// The whole tensor, for task arguments (make views of it with [`Tensor::view`]).
    pub fn tensor(&self) -> Tensor {
        self.tensor
    }

    /// Device address of the first element.
    pub fn addr(&self) -> GmAddr {
        self.addr
    }

    /// Copy `data` (all elements) to the device.
    pub fn write<T: Element>(&self, data: &[T]) -> Result<(), Error> {
        self.check::<T>(data.len())?;
        self.dev.dev.copy_h2d(self.addr, bytemuck::cast_slice(data)).map_err(platform("tensor upload"))
    }

    /// Copy all elements back from the device.
    pub fn read<T: Element>(&self) -> Result<Vec<T>, Error> {
        let n = self.tensor.elem_count() as usize;
        self.check::<T>(n)?;
        let mut out = std::vec![T::zeroed(); n];
        self.dev.dev.copy_d2h(bytemuck::cast_slice_mut(&mut out), self.addr).map_err(platform("tensor download"))?;
        Ok(out)
    }

    fn check<T: Element>(&self, len: usize) -> Result<(), Error> {
        let want = self.tensor.elem_count();
        if T::DTYPE != self.tensor.dtype() || len as u64 != want {
            return Err(Error::Size { expected: want, got: len as u64, dtype: dtype_name(self.tensor.dtype()) });
        }
        Ok(())
    }
}

fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U32 => "u32",
        DType::U8 => "u8",
        DType::I8 => "i8",
        DType::F64 => "f64",
        DType::U64 => "u64",
        DType::I16 => "i16",
        DType::U16 => "u16",
    }
}

impl<P: Platform> Drop for DeviceTensor<P> {
    fn drop(&mut self) {
        let _ = self.dev.dev.free(self.addr);
    }
}

/// A built graph: its image and its heap of runtime-allocated tensors. Run it any number of
/// times.
pub struct Graph<P: Platform> {
    dev: Arc<Inner<P>>,
    image: Vec<u8>,
    heap: Option<GmAddr>,
    task_count: u32,
    first: [Option<u32>; 3],
    sync_max: [Option<(u32, u32)>; 3],
    build_time: Duration,
}

impl<P: Platform> Graph<P> {
    /// Number of tasks.
    pub fn task_count(&self) -> u32 {
        self.task_count
    }
    /// Size of the image uploaded per run.
    pub fn image_len(&self) -> usize {
        self.image.len()
    }
    /// Time the build took (orchestration, discovery, emission).
    pub fn build_time(&self) -> Duration {
        self.build_time
    }

    fn check_placeable(&self, cfg: &RunConfig, clusters: u32, threads: u32) -> Result<(), Error> {
        // A sync-start cohort starts on the cores of one scheduler thread.
        let per_thread = clusters / threads.max(1);
        for (i, shape) in [Shape::Aic, Shape::Aiv, Shape::Mix].into_iter().enumerate() {
            if let Some((task, blocks)) = self.sync_max[i] {
                let cap = if shape == Shape::Aiv { 2 * per_thread } else { per_thread };
                if blocks > cap {
                    return Err(Error::Device(DeviceError {
                        code: ErrorCode::Orch(OrchError::RequireSyncStartInvalid),
                        site: Site::Orchestrator,
                        task: Some(task),
                        core: None,
                        detail: blocks as u64,
                        message: std::format!(
                            "task {task}: a sync-start cohort of {blocks} {shape:?} blocks; one scheduler thread hosts at most {cap}"
                        ),
                    }));
                }
            }
        }
        if cfg.aiv_only {
            if let Some(t) = self.first[Shape::Mix as usize] {
                return Err(GraphError::Unplaceable {
                    task: t,
                    shape: Shape::Mix,
                    why: "the run is AIV-only: no complete 1C2V cluster",
                }
                .into());
            }
            if let Some(t) = self.first[Shape::Aic as usize] {
                return Err(GraphError::Unplaceable {
                    task: t,
                    shape: Shape::Aic,
                    why: "the run is AIV-only: no AIC core",
                }
                .into());
            }
        }
        Ok(())
    }
}

impl<P: Platform> Drop for Graph<P> {
    fn drop(&mut self) {
        if let Some(h) = self.heap.take() {
            let _ = self.dev.dev.free(h);
        }
    }
}
