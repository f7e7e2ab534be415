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
    AicoreStream, AicpuStream, CoreType, DeviceMemory, GmAddr, KernelFn, KernelLoader, Platform, Stream, Topology,
};
use zerocopy::IntoBytes;

use error::platform;
pub use error::{DeviceError, Error};

use crate::codes::{ErrorCode, Site};
use crate::graph::{BufferRef, DType, Element, FuncId, GraphError, Placement, Tensor};
use crate::hbg::{FuncTable, GraphBuilder};
use crate::layout::Shape;
use crate::layout::{DESC_MAGIC, LAYOUT_VERSION, LaunchConfig, LaunchDesc};
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
    /// Pipeline slot used.
    pub slot: usize,
}

/// Device memory of one run slot: descriptor, handshakes, gates, payloads, image.
struct SlotMem {
    arena: GmAddr,
    image: Option<(GmAddr, u64)>,
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
            if let Some((img, _)) = m.image {
                let _ = self.dev.free(img);
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
            mems.push(Mutex::new(SlotMem { arena, image: None }));
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

    /// Build a graph: `f` submits tasks to the builder; dependencies are discovered as it
    /// goes. The image is emitted once and uploaded once per run.
    pub fn build<F>(&self, f: F) -> Result<Graph<P>, Error>
    where
        F: FnOnce(&mut GraphBuilder<'_>) -> Result<(), GraphError>,
    {
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
        Ok(Graph {
            dev: self.inner.clone(),
            image,
            heap,
            task_count: b.task_count(),
            first,
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

    /// Prepare a run: reserve a pipeline slot and publish the launch image (descriptor and
    /// graph image, synchronously, exactly once). A second run can be prepared while the first
    /// is launched: it takes the other slot.
    pub fn prepare<'d>(&'d self, graph: &Graph<P>, cfg: &RunConfig) -> Result<PreparedRun<'d, P>, Error> {
        let inner = &*self.inner;
        inner.check_usable()?;
        if !Arc::ptr_eq(&graph.dev, &self.inner) {
            return Err(Error::Config("the graph was built for another device".to_string()));
        }
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
        graph.check_placeable(cfg)?;
        let slot = inner.slot_table.reserve().map_err(|r| match r {
            Refused::Full => Error::Busy("both pipeline slots hold live runs"),
            Refused::PredecessorNotLaunched => Error::Busy("the other prepared run must be launched first"),
        })?;
        match self.publish(slot, graph, clusters, threads, cfg) {
            Ok(epoch) => {
                Ok(PreparedRun { dev: self, slot: Some(slot), epoch, clusters, threads, tasks: graph.task_count })
            }
            Err(e) => {
                inner.slot_table.release(slot);
                Err(e)
            }
        }
    }

    fn publish(
        &self,
        slot: usize,
        graph: &Graph<P>,
        clusters: u32,
        threads: u32,
        cfg: &RunConfig,
    ) -> Result<u64, Error> {
        let inner = &*self.inner;
        let dev = &inner.dev;
        let mut mem = inner.slot_mem[slot].lock().unwrap_or_else(|e| e.into_inner());
        let need = graph.image.len() as u64;
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
            task_count: graph.task_count,
            physical_cores: inner.topo.workers(),
            runtime: crate::layout::RUNTIME_HBG,
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
        let image_bytes = LaunchImage::prepare(config, &graph.image);
        image_bytes.publish(dev, arena, image)?;
        Ok(epoch)
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
    tasks: u32,
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
            s.aicpu
                .launch_aicpu(crate::aicpu::aicpu_entry::<P::Aicpu>, desc, self.threads)
                .map_err(platform("AICPU launch"))?;
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
    tasks: u32,
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
            || d.run.completed != self.tasks as u64
        {
            // No latched fault but the run's own record is incomplete: ask the streams.
            self.sync_streams()?;
            inner.mark_unusable(std::format!("run {} ended without a complete record", self.epoch));
            return Err(Error::Unusable(std::format!(
                "run {} ended with {}/{} tasks, {}/{} threads, {}/{} cores released",
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

    fn check_placeable(&self, cfg: &RunConfig) -> Result<(), Error> {
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
