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

use alloc::string::String;
use alloc::vec::Vec;

use pto_hal::{CoreType, GmAddr};
use zerocopy::IntoBytes;

use crate::codes::OrchError;
use crate::graph::{BufferRef, DType, Direction, GraphError, Placement, Task, TaskId, Tensor, TensorProblem};
use crate::layout::{FuncEntry, IMAGE_MAGIC, ImageHeader, LAYOUT_VERSION, MAX_FUNC_ID, NO_FUNC, Shape, TaskRecord};
use crate::orch::{OrchFail, Orchestrator, RuntimeKind, ScopeMode};
use crate::tensormap::TensorMap;

/// Most tasks of one graph.
pub const MAX_TASKS: u32 = 1 << 24;

/// Buffer ids with this bit set are runtime-allocated (graph heap) buffers.
pub const HEAP_ID_BIT: u64 = 1 << 63;

/// The kernels a device knows: func id → name and binary per core type.
#[derive(Clone, Debug, Default)]
pub struct FuncTable {
    entries: Vec<Option<FuncInfo>>,
}

/// One registered func id.
#[derive(Clone, Debug)]
pub struct FuncInfo {
    /// The name given at registration.
    pub name: String,
    /// Binary for AIC cores, if loaded.
    pub aic: Option<u64>,
    /// Binary for AIV cores, if loaded.
    pub aiv: Option<u64>,
}

impl FuncTable {
    /// Record `bin` as func `id`'s binary for `core`.
    pub fn insert(&mut self, id: u16, name: &str, core: CoreType, bin: u64) -> Result<(), GraphError> {
        if id as u32 >= MAX_FUNC_ID {
            return Err(GraphError::UnknownFunc { task: u32::MAX, lane: 0, func: id });
        }
        let i = id as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        let e = self.entries[i].get_or_insert_with(|| FuncInfo { name: String::from(name), aic: None, aiv: None });
        match core {
            CoreType::Aic => e.aic = Some(bin),
            CoreType::Aiv => e.aiv = Some(bin),
        }
        Ok(())
    }
    /// The entry of `id`.
    pub fn get(&self, id: u16) -> Option<&FuncInfo> {
        self.entries.get(id as usize)?.as_ref()
    }
    /// Number of slots (highest id + 1).
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }
    /// The next unused func id.
    pub fn next_free(&self) -> Option<u16> {
        let i = self.entries.iter().position(Option::is_none).unwrap_or(self.entries.len());
        (i < MAX_FUNC_ID as usize).then_some(i as u16)
    }
}

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
    /// The scope serial that owns heap buffer `n + 1` (0: the graph).
    heap_owner: Vec<u64>,
    /// Checks an external tensor against the device's live allocations.
    tensor_check: Option<&'f TensorCheck<'f>>,
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
            heap_owner: Vec::new(),
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
                Placement::Heap(_) => {
                    if t.buffer.id & HEAP_ID_BIT != 0 && (t.buffer.id >> 32) & 0x7FFF_FFFF != self.graph_id {
                        return Err(GraphError::ForeignHeapTensor { task: id, arg });
                    }
                    let n = (t.buffer.id & 0xFFFF_FFFF) as usize;
                    let owner = n.checked_sub(1).and_then(|i| self.heap_owner.get(i)).copied();
                    match owner {
                        None => return Err(GraphError::ForeignHeapTensor { task: id, arg }),
                        Some(0) => {}
                        Some(s) if self.scope_serials.contains(&s) => {}
                        Some(_) => return Err(GraphError::EndedScopeTensor { task: id, arg }),
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
        self.heap_owner.push(self.scope_serials.last().copied().unwrap_or(0));
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

    /// Reject dependency cycles (possible only through [`GraphBuilder::depend`] edges that
    /// point forward). Reports tasks on one cycle.
    pub fn check_acyclic(&self) -> Result<(), GraphError> {
        if !self.backward_edges {
            return Ok(());
        }
        let n = self.nodes.len();
        let mut indeg: Vec<u32> = self.nodes.iter().map(|x| x.fanin.len() as u32).collect();
        let mut consumers: Vec<Vec<u32>> = alloc::vec![Vec::new(); n];
        for (c, node) in self.nodes.iter().enumerate() {
            for &p in &node.fanin {
                consumers[p as usize].push(c as u32);
            }
        }
        let mut stack: Vec<u32> = (0..n as u32).filter(|&i| indeg[i as usize] == 0).collect();
        let mut seen = 0;
        while let Some(t) = stack.pop() {
            seen += 1;
            for &c in &consumers[t as usize] {
                indeg[c as usize] -= 1;
                if indeg[c as usize] == 0 {
                    stack.push(c);
                }
            }
        }
        if seen == n {
            return Ok(());
        }
        // Walk producers among the unresolved tasks until one repeats: that is a cycle.
        let start = (0..n).find(|&i| indeg[i] > 0).unwrap_or(0) as u32;
        let mut path: Vec<u32> = Vec::new();
        let mut cur = start;
        loop {
            if let Some(pos) = path.iter().position(|&x| x == cur) {
                let mut tasks = path.split_off(pos);
                tasks.sort_unstable();
                tasks.truncate(16);
                return Err(GraphError::Cycle { tasks });
            }
            path.push(cur);
            cur = match self.nodes[cur as usize].fanin.iter().find(|&&p| indeg[p as usize] > 0) {
                Some(&p) => p,
                None => return Err(GraphError::Cycle { tasks: path }),
            };
        }
    }

    /// Emit the image, resolving heap tensors against `heap_base`.
    pub fn emit(&self, heap_base: GmAddr) -> Result<Vec<u8>, GraphError> {
        self.check_acyclic()?;
        let n = self.nodes.len();
        let mut fanout_count = alloc::vec![0u32; n];
        for node in &self.nodes {
            for &p in &node.fanin {
                fanout_count[p as usize] += 1;
            }
        }
        let mut fanout_start = alloc::vec![0u32; n];
        let mut acc = 0u32;
        for i in 0..n {
            fanout_start[i] = acc;
            acc += fanout_count[i];
        }
        let fanout_len = acc as usize;
        let mut fanout = alloc::vec![0u32; fanout_len];
        let mut fill = fanout_start.clone();
        for (c, node) in self.nodes.iter().enumerate() {
            for &p in &node.fanin {
                fanout[fill[p as usize] as usize] = c as u32;
                fill[p as usize] += 1;
            }
        }

        let hdr = core::mem::size_of::<ImageHeader>();
        let tasks_off = hdr;
        let fanout_off = tasks_off + n * core::mem::size_of::<TaskRecord>();
        let funcs_off = (fanout_off + fanout_len * 4).div_ceil(8) * 8;
        let func_count = self.funcs.len();
        let args_off = funcs_off + func_count * core::mem::size_of::<FuncEntry>();
        let args_bytes: usize = self.nodes.iter().map(|x| crate::args::record_len(&x.task) as usize).sum();
        let total = args_off + args_bytes;
        let mut img = alloc::vec![0u8; total];

        let header = ImageHeader {
            magic: IMAGE_MAGIC,
            version: LAYOUT_VERSION,
            task_count: n as u32,
            func_count: func_count as u32,
            total_len: total as u64,
            tasks_off: tasks_off as u64,
            fanout_off: fanout_off as u64,
            fanout_len: fanout_len as u64,
            funcs_off: funcs_off as u64,
            args_off: args_off as u64,
        };
        img[..hdr].copy_from_slice(header.as_bytes());
        for (i, &f) in fanout.iter().enumerate() {
            img[fanout_off + i * 4..fanout_off + i * 4 + 4].copy_from_slice(&f.to_le_bytes());
        }
        for id in 0..func_count {
            let e = match self.funcs.get(id as u16) {
                Some(f) => FuncEntry { aic: f.aic.unwrap_or(0), aiv: f.aiv.unwrap_or(0) },
                None => FuncEntry::default(),
            };
            let o = funcs_off + id * 16;
            img[o..o + 16].copy_from_slice(e.as_bytes());
        }
        let mut args_pos = args_off;
        for (i, node) in self.nodes.iter().enumerate() {
            let t = &node.task;
            let rec_pos = tasks_off + i * 32;
            let mut funcs = [NO_FUNC; 3];
            for (lane, f) in t.kind().lane_funcs().iter().enumerate() {
                if let Some((f, _)) = f {
                    funcs[lane] = f.0;
                }
            }
            let args_len = crate::args::record_len(t) as usize;
            let rec = TaskRecord {
                funcs,
                shape: t.kind().shape() as u8,
                lanes: t.kind().lanes(),
                block_num: t.block_num(),
                fanin: node.fanin.len() as u32,
                fanout_start: fanout_start[i],
                fanout_count: fanout_count[i],
                args_rel: (args_pos - rec_pos) as i32,
                args_len: args_len as u32,
            };
            img[rec_pos..rec_pos + 32].copy_from_slice(rec.as_bytes());
            crate::args::encode(t, heap_base, &mut img[args_pos..args_pos + args_len]);
            args_pos += args_len;
        }
        debug_assert_eq!(args_pos, total);
        Ok(img)
    }
}

/// The host-built graph runs the orchestration API on the host: scopes only select the
/// discovery mode (the graph heap lives as long as the graph), and tensor data cannot be read
/// or written while the graph is being built (nothing has run yet).
impl Orchestrator for GraphBuilder<'_> {
    fn runtime(&self) -> RuntimeKind {
        RuntimeKind::HostBuiltGraph
    }
    fn submit_task(&mut self, task: Task) -> Result<TaskId, OrchFail> {
        Ok(self.submit(task)?)
    }
    fn alloc(&mut self, dtype: DType, shape: &[u32]) -> Result<Tensor, OrchFail> {
        Ok(self.alloc_tensor(dtype, shape)?)
    }
    fn scope_begin(&mut self, mode: ScopeMode) -> Result<(), OrchFail> {
        if mode == ScopeMode::Auto && self.scopes.last() == Some(&ScopeMode::Manual) {
            return Err(self.refuse("an auto scope inside a manual scope"));
        }
        if self.scopes.len() >= crate::trb::orchestrator::MAX_SCOPE_DEPTH {
            self.fatal.get_or_insert_with(|| String::from("scopes nested too deep"));
            return Err(OrchFail::Code { code: OrchError::ScopeTasksOverflow, detail: self.scopes.len() as u64 });
        }

        self.scopes.push(mode);
        self.scope_serials.push(self.next_scope);
        self.next_scope += 1;
        Ok(())
    }
    fn scope_end(&mut self) -> Result<(), OrchFail> {
        match self.scopes.pop() {
            Some(_) => {
                self.scope_serials.pop();
                Ok(())
            }
            None => Err(self.refuse("scope_end without a matching scope_begin")),
        }
    }
    fn read_element(&mut self, _t: &Tensor, _index: &[u32], _out: &mut [u8]) -> Result<(), OrchFail> {
        Err(self
            .refuse("tensor data cannot be read while a host-built graph is being built (use the device-side runtime)"))
    }
    fn write_element(&mut self, _t: &Tensor, _index: &[u32], _bytes: &[u8]) -> Result<(), OrchFail> {
        Err(self.refuse(
            "tensor data cannot be written while a host-built graph is being built (use the device-side runtime)",
        ))
    }
    fn fatal(&mut self, message: &str) -> OrchFail {
        self.fatal.get_or_insert_with(|| String::from(message));
        OrchFail::Code { code: OrchError::ExplicitOrchFatal, detail: 0 }
    }
    fn clusters(&self) -> u32 {
        self.clusters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::FuncId;
    use crate::layout::{ArgsHeader, TensorDesc};

    fn ext(id: u64, bytes: u64) -> BufferRef {
        BufferRef { device: 0, id, placement: Placement::External(GmAddr(0x10000 * id)), bytes, dtype: DType::F32 }
    }

    fn table() -> FuncTable {
        let mut f = FuncTable::default();
        f.insert(0, "k", CoreType::Aiv, 0x100).unwrap();
        f.insert(1, "c", CoreType::Aic, 0x200).unwrap();
        f
    }

    #[test]
    fn column_tiles_keep_both_writers() {
        // Two writers of interleaved column tiles: a reader of rows 1.. of the left tile must
        // still depend on the left writer (a bounding-range "latest writer" map loses it).
        let f = table();
        let mut g = GraphBuilder::new(&f, 1);
        let x = Tensor::whole(ext(1, 8 * 8 * 4), &[8, 8]).unwrap();
        let left = g.submit(Task::aiv(FuncId(0)).output(&x.view(&[0, 0], &[8, 4]).unwrap())).unwrap();
        let right = g.submit(Task::aiv(FuncId(0)).output(&x.view(&[0, 4], &[8, 4]).unwrap())).unwrap();
        let r = g.submit(Task::aiv(FuncId(0)).input(&x.view(&[1, 0], &[7, 4]).unwrap())).unwrap();
        assert_eq!(g.producers(r), &[left.0]);
        let both = g.submit(Task::aiv(FuncId(0)).input(&x.view(&[2, 3], &[1, 2]).unwrap())).unwrap();
        assert_eq!(g.producers(both), &[left.0, right.0]);
    }

    #[test]
    fn raw_waw_discovered_war_needs_explicit() {
        let f = table();
        let mut g = GraphBuilder::new(&f, 1);
        let x = Tensor::whole(ext(1, 256), &[64]).unwrap();
        let lo = x.view(&[0], &[32]).unwrap();
        let hi = x.view(&[32], &[32]).unwrap();
        let w_lo = g.submit(Task::aiv(FuncId(0)).output(&lo)).unwrap();
        let w_hi = g.submit(Task::aiv(FuncId(0)).output(&hi)).unwrap();
        let r_all = g.submit(Task::aiv(FuncId(0)).input(&x)).unwrap();
        assert_eq!(g.producers(r_all), &[w_lo.0, w_hi.0]);
        // Write-after-read is not discovered...
        let w2 = g.submit(Task::aiv(FuncId(0)).output(&lo)).unwrap();
        assert_eq!(g.producers(w2), &[w_lo.0], "WAW on lo only");
        // ...unless declared.
        let w3 = g.submit(Task::aiv(FuncId(0)).output(&hi).after(r_all)).unwrap();
        assert_eq!(g.producers(w3), &[w_hi.0, r_all.0]);
        // NoDep and disjoint views add nothing.
        let y = Tensor::whole(ext(2, 256), &[64]).unwrap();
        let nd = g.submit(Task::aiv(FuncId(0)).no_dep(&x).output(&y)).unwrap();
        assert!(g.producers(nd).is_empty());
    }

    #[test]
    fn bad_input_is_named() {
        let f = table();
        let mut g = GraphBuilder::new(&f, 1);
        let x = Tensor::whole(ext(1, 256), &[64]).unwrap();
        assert_eq!(
            g.submit(Task::aiv(FuncId(9)).input(&x)),
            Err(GraphError::UnknownFunc { task: 0, lane: 1, func: 9 })
        );
        assert!(matches!(g.submit(Task::aic(FuncId(0))), Err(GraphError::WrongCoreType { func: 0, .. })));
        let mut t = Task::aiv(FuncId(0));
        for _ in 0..33 {
            t = t.input(&x);
        }
        assert_eq!(g.submit(t), Err(GraphError::TooManyTensorArgs { task: 0, count: 33 }));
        let mut t = Task::aiv(FuncId(0));
        for i in 0..17 {
            t = t.scalar(i);
        }
        assert_eq!(g.submit(t), Err(GraphError::TooManyScalarArgs { task: 0, count: 17 }));
        assert_eq!(
            g.submit(Task::aiv(FuncId(0)).after(TaskId(5))),
            Err(GraphError::UnknownDependency { task: 0, dep: 5 })
        );
        assert_eq!(g.submit(Task::aiv(FuncId(0)).blocks(0)), Err(GraphError::BadBlockNum { task: 0, block_num: 0 }));
        assert_eq!(g.task_count(), 0, "failed submissions leave nothing behind");
    }

    #[test]
    fn cycles_through_explicit_edges_are_rejected() {
        let f = table();
        let mut g = GraphBuilder::new(&f, 1);
        let a = g.submit(Task::dummy()).unwrap();
        let b = g.submit(Task::dummy().after(a)).unwrap();
        let c = g.submit(Task::dummy().after(b)).unwrap();
        assert!(g.check_acyclic().is_ok());
        g.depend(a, c).unwrap();
        assert_eq!(g.check_acyclic(), Err(GraphError::Cycle { tasks: alloc::vec![0, 1, 2] }));
        assert_eq!(g.depend(a, a), Err(GraphError::SelfDependency { task: 0 }));
    }

    #[test]
    fn image_is_self_describing() {
        use zerocopy::FromBytes;
        let f = table();
        let mut g = GraphBuilder::new(&f, 7);
        let tmp = g.alloc_tensor(DType::F32, &[16]).unwrap();
        let x = Tensor::whole(ext(1, 64), &[16]).unwrap();
        g.submit(Task::aiv(FuncId(0)).input(&x).output(&tmp).scalar(5)).unwrap();
        g.submit(Task::aiv(FuncId(0)).input(&tmp).output(&x)).unwrap();
        let img = g.emit(GmAddr(0x9000_0000)).unwrap();
        let h = ImageHeader::read_from_prefix(&img).unwrap().0;
        assert_eq!((h.magic, h.task_count, h.fanout_len), (IMAGE_MAGIC, 2, 1));
        let r0 = TaskRecord::read_from_prefix(&img[h.tasks_off as usize..]).unwrap().0;
        assert_eq!((r0.fanin, r0.fanout_count), (0, 1));
        let args = h.tasks_off as i64 + r0.args_rel as i64;
        let ah = ArgsHeader::read_from_prefix(&img[args as usize..]).unwrap().0;
        assert_eq!((ah.tensors, ah.scalars), (2, 1));
        let d1 =
            TensorDesc::read_from_prefix(&img[args as usize + crate::layout::ARGS_HEAD as usize + 64..]).unwrap().0;
        assert_eq!(d1.addr, 0x9000_0000, "heap tensor resolved against the heap base");
    }
}
