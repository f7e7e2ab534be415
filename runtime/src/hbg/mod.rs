//! Host-built graph: the host runs the orchestration, discovers dependencies from tensor
//! regions, and emits one position-independent image the device runs.
//!
//! Dependencies:
//! * read-after-write and write-after-write are found by region overlap of each argument's
//!   view with earlier writers of the same buffer, per dimension ([`crate::tensormap`]: each
//!   lookup is `O(log n + k)`, so building a graph is linear in its size);
//! * write-after-read is **not** discovered: declare it with [`Task::after`] or
//!   [`GraphBuilder::depend`];
//! * views of one layout are compared exactly per dimension; anything else conservatively
//!   (a dependency may be added, never lost).
//!
//! The image holds ids and self-relative offsets only, so it runs from wherever it is copied.
//!
//! The rooms: `funcs` (the func table), `cycles` (the acyclicity check), `emit` (the image)
//! and `orchestration` (the [`Orchestrator`](crate::orch::Orchestrator) calls) on the host;
//! [`aicpu`], the runtime's AICPU program on the device, which boots from the image and runs
//! it on either executor. This file holds the builder itself and its dependency discovery.

pub mod aicpu;
mod cycles;
mod emit;
mod funcs;
mod orchestration;
#[cfg(test)]
mod tests;

use alloc::string::String;
use alloc::vec::Vec;

use pto_hal::CoreType;

use crate::codes::OrchError;
use crate::graph::{BufferRef, DType, Direction, GraphError, Placement, Task, TaskId, Tensor, TensorProblem};
use crate::layout::Shape;
use crate::orch::{OrchFail, ScopeMode};
use crate::tensormap::TensorMap;

/// Most tasks of one graph.
pub const MAX_TASKS: u32 = 1 << 24;

/// Buffer ids with this bit set are runtime-allocated (graph heap) buffers.
pub const HEAP_ID_BIT: u64 = 1 << 63;

pub use funcs::{FuncInfo, FuncTable};

struct Node {
    task: Task,
    fanin: Vec<u32>,
}

/// Builds one graph on the host.
///
/// ```
/// # use pto_runtime::{graph::*, hbg::*};
/// # use pto_hal::{CoreType, GmAddr};
/// let mut funcs = FuncTable::default();
/// funcs.insert(0, "add", CoreType::Aiv, 0x100).unwrap();
/// let mut g = GraphBuilder::new(&funcs, 1);
/// let buf = BufferRef { device: 0, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes: 64, dtype: DType::F32 };
/// let x = Tensor::whole(buf, &[16]).unwrap();
/// let tmp = g.alloc_tensor(DType::F32, &[16]).unwrap();
/// let a = g.submit(Task::aiv(FuncId(0)).input(&x).output(&tmp)).unwrap();
/// let b = g.submit(Task::aiv(FuncId(0)).input(&tmp).output(&x)).unwrap();
/// assert_eq!(g.producers(b), &[a.0]);
/// ```
pub struct GraphBuilder<'f> {
    funcs: &'f FuncTable,
    graph_id: u64,
    heap_bytes: u64,
    heap_buffers: u64,
    nodes: Vec<Node>,
    writers: TensorMap<u32>,
    backward_edges: bool,
    scratch: Vec<u32>,
    /// Open scopes (true = manual).
    scopes: Vec<ScopeMode>,
    /// Largest sync-start cohort per shape, with its task.
    sync_max: [Option<(u32, u32)>; Shape::QUEUED],
    /// Text of an error the orchestration API raised.
    fatal: Option<String>,
    clusters: u32,
    /// Serial of each open scope (parallel to `scopes`), and the next serial to hand out.
    scope_serials: Vec<u64>,
    next_scope: u64,
    /// Heap buffer `n + 1`: the scope serial that owns it (0: the graph) and its extent.
    heap_allocs: Vec<HeapAlloc>,
    /// Checks an external tensor against the device's live allocations.
    tensor_check: Option<&'f TensorCheck<'f>>,
}

/// One runtime-allocated tensor of a graph's heap: what a tensor naming it must agree with.
#[derive(Copy, Clone, Debug)]
struct HeapAlloc {
    /// The scope serial that owns it (0: the graph).
    owner: u64,
    /// Its offset in the heap.
    offset: u64,
    /// Its size in bytes.
    bytes: u64,
    /// Its element type.
    dtype: DType,
}

impl HeapAlloc {
    /// Whether `b` is this allocation: its offset, size and element type, else the first that
    /// disagrees.
    fn judge(&self, b: &BufferRef, offset: u64) -> Result<(), TensorProblem> {
        TensorProblem::same_allocation((offset, b.bytes, b.dtype), (self.offset, self.bytes, self.dtype))
    }
}

/// A check of an external buffer against a device's live allocations (see
/// [`GraphBuilder::with_tensor_check`]).
/// It receives the buffer, the task and the argument index naming it (`u32::MAX`: the
/// predicate).
pub type TensorCheck<'a> = dyn Fn(&BufferRef, u32, u32) -> Result<(), TensorProblem> + 'a;

/// Most bytes of runtime-allocated tensors one graph may hold (1 TiB: more than any device).
pub const MAX_GRAPH_HEAP: u64 = 1 << 40;

impl<'f> GraphBuilder<'f> {
    /// A new, empty graph over `funcs`. `graph_id` distinguishes this graph's heap tensors.
    pub fn new(funcs: &'f FuncTable, graph_id: u64) -> Self {
        GraphBuilder {
            funcs,
            graph_id: graph_id & 0x7FFF_FFFF,
            heap_bytes: 0,
            heap_buffers: 0,
            nodes: Vec::new(),
            writers: TensorMap::new(usize::MAX),
            backward_edges: false,
            scratch: Vec::new(),
            scopes: Vec::new(),
            sync_max: [None; Shape::QUEUED],
            fatal: None,
            clusters: 0,
            scope_serials: Vec::new(),
            next_scope: 1,
            heap_allocs: Vec::new(),
            tensor_check: None,
        }
    }

    /// Check every external tensor a task names with `check` when it is submitted (the host
    /// passes its device's allocation table, so a stale, foreign or forged tensor is refused
    /// with the task and argument that named it).
    pub fn with_tensor_check(mut self, check: &'f TensorCheck<'f>) -> Self {
        self.tensor_check = Some(check);
        self
    }

    /// Refuse external tensors the device cannot use and heap tensors of ended scopes.
    fn check_tensors(&self, task: &Task, id: u32) -> Result<(), GraphError> {
        let named = task.args().iter().map(|a| &a.tensor).enumerate().map(|(i, t)| (i as u32, t));
        for (arg, t) in named.chain(task.predicate().map(|p| (u32::MAX, p))) {
            match t.buffer.placement {
                Placement::External(_) => {
                    if let Some(check) = self.tensor_check {
                        check(&t.buffer, id, arg).map_err(|why| GraphError::UnusableTensor { task: id, arg, why })?;
                    }
                }
                Placement::Heap(offset) => {
                    if t.buffer.id & HEAP_ID_BIT == 0 || (t.buffer.id >> 32) & 0x7FFF_FFFF != self.graph_id {
                        return Err(GraphError::ForeignHeapTensor { task: id, arg });
                    }
                    let n = (t.buffer.id & 0xFFFF_FFFF) as usize;
                    let Some(heap) = n.checked_sub(1).and_then(|i| self.heap_allocs.get(i)) else {
                        return Err(GraphError::ForeignHeapTensor { task: id, arg });
                    };
                    // A heap tensor's extent is the allocation's: a widened, moved or retyped
                    // copy would reach other tensors of the heap (or past it).
                    heap.judge(&t.buffer, offset).map_err(|why| GraphError::UnusableTensor { task: id, arg, why })?;
                    match heap.owner {
                        0 => {}
                        s if self.scope_serials.contains(&s) => {}
                        _ => return Err(GraphError::EndedScopeTensor { task: id, arg }),
                    }
                }
                Placement::Ring { .. } => return Err(GraphError::ForeignHeapTensor { task: id, arg }),
            }
        }
        Ok(())
    }

    /// The largest sync-start cohort of `shape`: `(task, block_num)`.
    pub fn sync_start_max(&self, shape: Shape) -> Option<(u32, u32)> {
        self.sync_max.get(shape as usize).copied().flatten()
    }

    /// The message of an error the orchestration API raised (EXPLICIT_ORCH_FATAL, misuse).
    pub fn fatal_message(&self) -> Option<&str> {
        self.fatal.as_deref()
    }

    /// Tell the orchestration how many clusters the device has.
    pub fn set_clusters(&mut self, clusters: u32) {
        self.clusters = clusters;
    }

    fn refuse(&mut self, message: &str) -> OrchFail {
        self.fatal.get_or_insert_with(|| String::from(message));
        OrchFail::Code { code: OrchError::InvalidArgs, detail: 0 }
    }

    /// A runtime-allocated tensor from this graph's heap (lives as long as the graph). Its
    /// contents are undefined until a task writes it.
    pub fn alloc_tensor(&mut self, dtype: DType, shape: &[u32]) -> Result<Tensor, GraphError> {
        let bytes = crate::graph::shape_bytes(dtype, shape)?;
        let off = self.heap_bytes;
        let end = off.checked_add(bytes.max(1)).and_then(|e| e.checked_next_multiple_of(64));
        let end = end.filter(|&e| e <= MAX_GRAPH_HEAP).ok_or(GraphError::ShapeTooLarge)?;
        self.heap_bytes = end;
        self.heap_buffers += 1;
        // The innermost open scope owns the tensor (0: the graph itself).
        let owner = self.scope_serials.last().copied().unwrap_or(0);
        self.heap_allocs.push(HeapAlloc { owner, offset: off, bytes, dtype });
        let buf = BufferRef {
            device: 0,
            id: HEAP_ID_BIT | (self.graph_id << 32) | self.heap_buffers,
            placement: Placement::Heap(off),
            bytes,
            dtype,
        };
        Tensor::whole(buf, shape)
    }

    /// Submit a task; returns its id. Dependencies on earlier tasks are discovered here.
    pub fn submit(&mut self, task: Task) -> Result<TaskId, GraphError> {
        let id = self.nodes.len() as u32;
        if id >= MAX_TASKS {
            return Err(GraphError::TooManyTasks { max: MAX_TASKS });
        }
        task.validate(id)?;
        for (lane, f) in task.kind().lane_funcs().iter().enumerate() {
            let Some((f, core)) = *f else { continue };
            let info = self.funcs.get(f.0).ok_or(GraphError::UnknownFunc { task: id, lane: lane as u32, func: f.0 })?;
            let loaded = match core {
                CoreType::Aic => info.aic.is_some(),
                CoreType::Aiv => info.aiv.is_some(),
            };
            if !loaded {
                return Err(GraphError::WrongCoreType { task: id, lane: lane as u32, func: f.0, core });
            }
        }
        self.check_tensors(&task, id)?;
        let mut fanin = core::mem::take(&mut self.scratch);
        fanin.clear();
        for d in task.explicit_deps() {
            if d.0 >= id {
                return Err(GraphError::UnknownDependency { task: id, dep: d.0 });
            }
            fanin.push(d.0);
        }
        let auto = self.scopes.last() != Some(&ScopeMode::Manual);
        if auto {
            for a in task.args() {
                if a.dir.reads() || matches!(a.dir, Direction::Out | Direction::InOut) {
                    self.writers.lookup(&a.tensor.region(), &mut fanin);
                }
            }
            if let Some(p) = task.predicate() {
                self.writers.lookup(&p.region(), &mut fanin);
            }
            for a in task.args() {
                if a.dir.writes() {
                    // Unbounded on the host: the map never refuses.
                    let _ = self.writers.insert(&a.tensor.region(), id);
                }
            }
        }
        let shape = task.kind().shape();
        if task.is_sync_start() && (shape as usize) < Shape::QUEUED {
            let m = &mut self.sync_max[shape as usize];
            if m.is_none_or(|(_, b)| task.block_num() > b) {
                *m = Some((id, task.block_num()));
            }
        }
        fanin.sort_unstable();
        fanin.dedup();
        let node_fanin = fanin.clone();
        self.scratch = fanin;
        self.nodes.push(Node { task, fanin: node_fanin });
        Ok(TaskId(id))
    }

    /// Explicit dependency between two submitted tasks: `consumer` runs after `producer`.
    pub fn depend(&mut self, consumer: TaskId, producer: TaskId) -> Result<(), GraphError> {
        let n = self.nodes.len() as u32;
        if consumer.0 >= n {
            return Err(GraphError::UnknownDependency { task: consumer.0, dep: consumer.0 });
        }
        if producer.0 >= n {
            return Err(GraphError::UnknownDependency { task: consumer.0, dep: producer.0 });
        }
        if producer == consumer {
            return Err(GraphError::SelfDependency { task: consumer.0 });
        }
        let f = &mut self.nodes[consumer.0 as usize].fanin;
        if let Err(pos) = f.binary_search(&producer.0) {
            f.insert(pos, producer.0);
        }
        if producer.0 > consumer.0 {
            self.backward_edges = true;
        }
        Ok(())
    }

    /// Producers of `t` found so far.
    pub fn producers(&self, t: TaskId) -> &[u32] {
        &self.nodes[t.0 as usize].fanin
    }

    /// Number of tasks.
    pub fn task_count(&self) -> u32 {
        self.nodes.len() as u32
    }

    /// Bytes of graph heap the runtime-allocated tensors need.
    pub fn heap_bytes(&self) -> u64 {
        self.heap_bytes
    }

    /// First task of `shape`, if any.
    pub fn first_of(&self, shape: Shape) -> Option<u32> {
        self.nodes.iter().position(|n| n.task.kind().shape() == shape).map(|i| i as u32)
    }
}
