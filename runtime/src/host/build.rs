//! Building host-built graphs: from a closure or from a registered orchestration program.

use crate::sync::Ordering;
use std::cell::RefCell;
use std::collections::HashMap;
use std::string::{String, ToString};
use std::sync::Arc;
use std::time::{Duration, Instant};
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr, HostPlatform};

use super::error::platform;
use super::resident::Plan;
use super::{Device, DeviceError, Error, Inner, Program, RunConfig};
use crate::codes::{ErrorCode, OrchError, Site};
use crate::graph::{BufferRef, GraphError};
use crate::hbg::GraphBuilder;
use crate::layout::Shape;
use crate::orch::{Orch, OrchArgs, OrchFail, Orchestrator, ScopeMode};

/// A built graph: its image and its heap of runtime-allocated tensors. Run it any number of
/// times; each run checks that every device tensor the graph names is still allocated.
pub struct Graph<P: HostPlatform> {
    /// Shared with every run prepared from the graph, which keeps it (its heap above all)
    /// until the run's fence: dropping the graph does not free what a run still uses.
    pub(crate) core: Arc<GraphCore<P>>,
}

/// A built graph's state: what the device reads (image, heap) and what the host decided
/// when it built it ([`Plan`]).
pub(crate) struct GraphCore<P: HostPlatform> {
    pub(crate) dev: Arc<Inner<P>>,
    pub(crate) image: Vec<u8>,
    heap: Option<GmAddr>,
    /// Bytes of the heap.
    heap_bytes: u64,
    pub(crate) task_count: u32,
    first: [Option<u32>; 3],
    sync_max: [Option<(u32, u32)>; 3],
    build_time: Duration,
    /// When the build started and ended, until the graph's first run takes it (a host phase of
    /// that run's trace).
    built: parking_lot::Mutex<Option<(Instant, Instant)>>,
    /// Every external buffer the graph names, with the first task and argument naming it.
    pub(crate) externals: Vec<(BufferRef, u32, u32)>,
    /// The executor eligibility, edges and resident initial states, decided at build.
    pub(crate) plan: Plan,
}

impl<P: HostPlatform> core::fmt::Debug for Graph<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Graph").field("tasks", &self.core.task_count).finish_non_exhaustive()
    }
}

impl<P: HostPlatform> Graph<P> {
    /// Number of tasks.
    pub fn task_count(&self) -> u32 {
        self.core.task_count
    }
    /// Size of the image uploaded per run.
    pub fn image_len(&self) -> usize {
        self.core.image.len()
    }
    /// Time the build took (orchestration, discovery, emission).
    pub fn build_time(&self) -> Duration {
        self.core.build_time
    }
    /// The host memory the built graph holds, by part (the capacities of its allocations;
    /// the graph heap of runtime-allocated tensors is device memory and is not counted).
    pub fn host_bytes(&self) -> GraphBytes {
        let c = &*self.core;
        GraphBytes {
            image: c.image.capacity(),
            resident_states: c.plan.host_bytes(),
            externals: c.externals.capacity() * core::mem::size_of::<(BufferRef, u32, u32)>(),
            fixed: core::mem::size_of::<GraphCore<P>>(),
        }
    }
}

/// The host memory a built graph holds, by part ([`Graph::host_bytes`]), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphBytes {
    /// The image the device runs (uploaded at every run): header, 32-byte task records,
    /// fan-out lists (4 bytes per edge), the func table and the argument records (a header
    /// and a 64-byte descriptor per tensor argument, 8 bytes per scalar).
    pub image: usize,
    /// The resident executor's initial states built so far (one per cluster count run).
    pub resident_states: usize,
    /// Every external buffer the graph names, with the first task and argument naming it.
    pub externals: usize,
    /// The graph's own record.
    pub fixed: usize,
}

impl GraphBytes {
    /// Every part summed.
    pub fn total(&self) -> usize {
        self.image + self.resident_states + self.externals + self.fixed
    }
}

impl<P: HostPlatform> GraphCore<P> {
    pub(crate) fn check_placeable(&self, cfg: &RunConfig, clusters: u32, threads: u32) -> Result<(), Error> {
        // A sync-start cohort starts on the cores of one scheduler thread.
        let per_thread = clusters / threads.max(1);
        for (i, shape) in [Shape::Aic, Shape::Aiv, Shape::Mix].into_iter().enumerate() {
            if let Some((task, blocks)) = self.sync_max[i] {
                let cap = if shape == Shape::Aiv { 2 * per_thread } else { per_thread };
                if blocks > cap {
                    return Err(Error::Device(DeviceError::new(
                        ErrorCode::Orch(OrchError::RequireSyncStartInvalid),
                        Site::Orchestrator,
                        Some(task),
                        None,
                        blocks as u64,
                        std::format!(
                            "task {task}: a sync-start cohort of {blocks} {shape:?} blocks; one scheduler thread hosts at most {cap}"
                        ),
                    )));
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

impl<P: HostPlatform> Drop for GraphCore<P> {
    fn drop(&mut self) {
        if let Some(h) = self.heap.take() {
            let _ = self.dev.dev.free(h);
        }
    }
}

impl<P: HostPlatform> Device<P> {
    /// Build a graph: `f` submits tasks to the builder; dependencies are discovered as it
    /// goes. The image is emitted once and uploaded once per run. A task naming a device
    /// tensor that was dropped, belongs to another device or was altered is refused with
    /// [`GraphError::UnusableTensor`].
    pub fn build<F>(&self, f: F) -> Result<Graph<P>, Error>
    where
        F: FnOnce(&mut GraphBuilder<'_>) -> Result<(), GraphError>,
    {
        self.build_inner(|b| f(b).map_err(Error::Graph))
    }

    /// Run `program` on the host into a graph (the host-built-graph runtime). Run the graph
    /// any number of times.
    pub fn build_program(&self, program: &Program, args: &OrchArgs) -> Result<Graph<P>, Error> {
        self.check_program(program)?;
        self.check_program_args(args)?;
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

    /// Every tensor argument of a program must be a live allocation of this device.
    pub(crate) fn check_program_args(&self, args: &OrchArgs) -> Result<(), Error> {
        for (i, t) in args.tensors().iter().enumerate() {
            self.inner.allocs.check(&t.buffer).map_err(|why| GraphError::UnusableProgramArg { arg: i as u32, why })?;
        }
        Ok(())
    }

    fn build_inner(&self, f: impl FnOnce(&mut GraphBuilder<'_>) -> Result<(), Error>) -> Result<Graph<P>, Error> {
        self.inner.check_usable()?;
        let started = Instant::now();
        let funcs = self.inner.funcs.lock().0.clone();
        let graph_id = self.inner.next_graph.fetch_add(1, Ordering::Relaxed);
        let _span = tracing::debug_span!(target: "pto::host", "build", graph = graph_id).entered();
        let seen: RefCell<HashMap<u64, (BufferRef, u32, u32)>> = RefCell::new(HashMap::new());
        let allocs = &self.inner.allocs;
        let check = |b: &BufferRef, task: u32, arg: u32| {
            allocs.check(b)?;
            seen.borrow_mut().entry(b.id).or_insert((*b, task, arg));
            Ok(())
        };
        let mut b = GraphBuilder::new(&funcs, graph_id).with_tensor_check(&check);
        f(&mut b)?;
        b.check_acyclic()?;
        let heap_bytes = b.heap_bytes();
        let heap = match heap_bytes {
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
        let plan = match Plan::of(&image) {
            Ok(p) => p,
            Err(e) => {
                if let Some(h) = heap {
                    let _ = self.inner.dev.free(h);
                }
                return Err(super::ConfigError::ImageRefused { error: e }.into());
            }
        };
        let first = [Shape::Aic, Shape::Aiv, Shape::Mix].map(|s| b.first_of(s));
        let sync_max = [Shape::Aic, Shape::Aiv, Shape::Mix].map(|s| b.sync_start_max(s));
        let task_count = b.task_count();
        drop(b);
        let mut externals: Vec<_> = seen.into_inner().into_values().collect();
        externals.sort_unstable_by_key(|&(_, task, arg)| (task, arg));
        let ended = Instant::now();
        tracing::debug!(
            target: "pto::host",
            "build: graph {graph_id} {task_count} tasks, image {} bytes, in {} us",
            image.len(),
            (ended - started).as_micros()
        );
        Ok(Graph {
            core: Arc::new(GraphCore {
                dev: self.inner.clone(),
                image,
                heap,
                heap_bytes,
                task_count,
                first,
                sync_max,
                build_time: ended - started,
                built: parking_lot::Mutex::new(Some((started, ended))),
                externals,
                plan,
            }),
        })
    }
}

impl<P: HostPlatform> GraphCore<P> {
    /// The build's start and end, the first time it is asked (by the graph's first run).
    pub(crate) fn take_build(&self) -> Option<(Instant, Instant)> {
        self.built.lock().take()
    }

    /// Tell a checking platform about a run of this graph at launch descriptor `launch`: its
    /// tasks, edges, and its heap (fresh at every run).
    pub(crate) fn note_run(&self, launch: GmAddr) {
        let fresh: &[(GmAddr, u64)] = match self.heap {
            Some(h) => &[(h, self.heap_bytes)],
            None => &[],
        };
        // The edges are read from the image only for a platform that checks this run.
        if !P::checks(&self.dev.dev).any() {
            return;
        }
        let edges = Plan::edges(&self.image);
        let notes = pto_hal::check::GraphNotes { tasks: self.task_count, edges: &edges, fresh };
        P::note_graph(&self.dev.dev, launch, &notes);
    }
}

/// The host error for an orchestration API failure.
pub(crate) fn orch_error(e: OrchFail, message: Option<&str>) -> Error {
    match e {
        OrchFail::Graph(g) => Error::Graph(g),
        OrchFail::Code { code, detail } => Error::Device(DeviceError::new(
            ErrorCode::Orch(code),
            Site::Orchestrator,
            None,
            None,
            detail,
            message.unwrap_or("").to_string(),
        )),
        OrchFail::Stopped => Error::Device(DeviceError::new(
            ErrorCode::Orch(OrchError::InvalidArgs),
            Site::Orchestrator,
            None,
            None,
            0,
            "the orchestration used the API after a failure".to_string(),
        )),
    }
}
