//! Graphs built from Python as the runtime runs them: a [`Spec`], and the one orchestration that
//! replays it on either runtime.
//!
//! A `pto.Graph` (module `graph`) records tasks (kernel, ordered tensor arguments with their directions,
//! scalars, SPMD blocks, explicit dependencies) over device tensors and graph-local tensors.
//! At run time it becomes a [`Spec`], registered under a fresh id in a process-wide table,
//! and the device's `python_graph` orchestration ([`orch_python`], registered at open) replays
//! it: on the host-built graph the host runs it while building the graph; on the device-side
//! runtime the device's orchestrator thread runs it (the simulator runs the device half in this
//! process, so the table is in its reach). The id travels as the orchestration's one scalar,
//! the device tensors as its tensor arguments, so the runtime checks and pins them as for any
//! program.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use pto::runtime::codes::OrchError;
use pto::runtime::graph::{DType, Direction, Kind, Task, TaskId, Tensor};
use pto::runtime::orch::{Local, Orch, OrchArgs, OrchFail};

/// The name of the orchestration of graphs built from Python.
pub(crate) const PROGRAM: &str = "python_graph";

/// What a task argument names: a device tensor (by its index among the graph's device
/// tensors) or a graph-local tensor (by its index among the graph's locals).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Base {
    /// A device tensor: tensor argument `i` of the orchestration.
    Device(usize),
    /// A tensor the graph allocates (`pto.Graph.local`).
    Local(usize),
}

/// One tensor argument: the tensor, an optional view of it, and how the task uses it.
#[derive(Clone, Debug)]
pub(crate) struct ArgSpec {
    pub(crate) base: Base,
    pub(crate) view: Option<(Vec<u32>, Vec<u32>)>,
    pub(crate) dir: Direction,
}

/// One task of a graph built from Python.
#[derive(Clone, Debug)]
pub(crate) struct TaskSpec {
    pub(crate) kind: Kind,
    pub(crate) args: Vec<ArgSpec>,
    pub(crate) scalars: Vec<u64>,
    pub(crate) blocks: u32,
    pub(crate) after: Vec<usize>,
    pub(crate) sync_start: bool,
    pub(crate) allow_alias: bool,
    pub(crate) dump: u64,
    pub(crate) when: Option<ArgSpec>,
}

/// A graph built from Python, as the orchestration replays it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Spec {
    pub(crate) locals: Vec<(DType, Vec<u32>)>,
    pub(crate) tasks: Vec<TaskSpec>,
}

/// Graphs being run, by id.
static SPECS: Mutex<Option<HashMap<u64, Arc<Spec>>>> = Mutex::new(None);
/// The next id of [`SPECS`].
static NEXT_SPEC: AtomicU64 = AtomicU64::new(1);

/// A graph registered in [`SPECS`] for one run; unregistered when dropped.
pub(crate) struct Registered(u64);

impl Registered {
    /// Register `spec` under a fresh id.
    pub(crate) fn new(spec: Arc<Spec>) -> Registered {
        let id = NEXT_SPEC.fetch_add(1, Ordering::Relaxed);
        SPECS.lock().get_or_insert_with(HashMap::new).insert(id, spec);
        Registered(id)
    }
    /// The id the orchestration is given.
    pub(crate) fn id(&self) -> u64 {
        self.0
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(m) = SPECS.lock().as_mut() {
            m.remove(&self.0);
        }
    }
}

/// A resolved tensor argument: a device tensor's view or a local's.
enum Resolved<'s> {
    Device(Tensor),
    Local(Local<'s>),
}

fn resolve<'s>(a: &ArgSpec, ext: &[Tensor], locals: &[Local<'s>]) -> Result<Resolved<'s>, OrchFail> {
    let bad = |detail| OrchFail::Code { code: OrchError::InvalidArgs, detail };
    Ok(match a.base {
        Base::Device(i) => {
            let t = *ext.get(i).ok_or(bad(i as u64))?;
            Resolved::Device(match &a.view {
                Some((o, s)) => t.view(o, s)?,
                None => t,
            })
        }
        Base::Local(i) => {
            let l = *locals.get(i).ok_or(bad(i as u64))?;
            Resolved::Local(match &a.view {
                Some((o, s)) => l.view(o, s)?,
                None => l,
            })
        }
    })
}

/// The orchestration of graphs built from Python: scalar 0 names the [`Spec`], the tensor
/// arguments are its device tensors. Each local is allocated in the orchestration's scope,
/// each task submitted in order; `after` names earlier tasks by their index.
pub(crate) fn orch_python(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let id = args.s(0)?;
    let spec = SPECS
        .lock()
        .as_ref()
        .and_then(|m| m.get(&id).cloned())
        .ok_or(OrchFail::Code { code: OrchError::InvalidArgs, detail: id })?;
    let ext = args.tensors();
    let mut locals = Vec::with_capacity(spec.locals.len());
    for (dtype, shape) in &spec.locals {
        locals.push(o.alloc_tensor(*dtype, shape)?);
    }
    let mut ids: Vec<TaskId> = Vec::with_capacity(spec.tasks.len());
    for t in &spec.tasks {
        let mut task = Task::new(t.kind);
        for a in &t.args {
            task = match resolve(a, ext, &locals)? {
                Resolved::Device(x) => task.arg(&x, a.dir),
                Resolved::Local(x) => task.arg(&x, a.dir),
            };
        }
        if let Some(w) = &t.when {
            task = match resolve(w, ext, &locals)? {
                Resolved::Device(x) => task.when(&x),
                Resolved::Local(x) => task.when(&x),
            };
        }
        for s in &t.scalars {
            task = task.scalar(*s);
        }
        for &i in &t.after {
            task = task.after(ids[i]);
        }
        if t.sync_start {
            task = task.sync_start();
        }
        if t.allow_alias {
            task = task.allow_alias();
        }
        if t.dump != 0 {
            task = task.dump(t.dump);
        }
        ids.push(o.submit(task.blocks(t.blocks))?);
    }
    Ok(())
}
