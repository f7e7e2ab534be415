//! `pto.Graph`: task graphs built from Python over device tensors and graph-local tensors,
//! recorded as a [`Spec`] that the `python_graph` orchestration (`crate::spec`) replays on
//! either runtime.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use pto::hal::CoreType;
use pto::runtime::graph::{DType, Direction, FuncId, Kind};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::dtype::parse_dtype;
use crate::errors::graph_error;
use crate::spec::{ArgSpec, Base, Spec, TaskSpec};
use crate::tensor::{PyTensor, PyView};

/// A kernel registered on a device: its func id and the core types it has a body for.
#[pyclass(name = "Kernel", module = "pto", frozen)]
#[derive(Clone, Debug)]
pub(crate) struct PyKernel {
    /// The name it was registered under.
    #[pyo3(get)]
    pub(crate) name: String,
    /// Its func id.
    #[pyo3(get)]
    pub(crate) id: u16,
    /// It has an AIC body.
    #[pyo3(get)]
    pub(crate) aic: bool,
    /// It has an AIV body.
    #[pyo3(get)]
    pub(crate) aiv: bool,
    /// The serial of its device.
    pub(crate) device: u64,
}

#[pymethods]
impl PyKernel {
    fn __repr__(&self) -> String {
        let cores: Vec<&str> = [(self.aic, "aic"), (self.aiv, "aiv")].iter().filter(|c| c.0).map(|c| c.1).collect();
        format!("Kernel({:?}, id={}, cores={})", self.name, self.id, cores.join("+"))
    }
}

/// A tensor the graph allocates: it lives in the run (on the device-side runtime, in the
/// orchestration's scope) and is not readable from the host.
#[pyclass(name = "Local", module = "pto", frozen)]
#[derive(Clone, Debug)]
pub(crate) struct PyLocal {
    graph: u64,
    index: usize,
    /// Extents.
    #[pyo3(get)]
    shape: Vec<u32>,
    dtype: DType,
}

#[pymethods]
impl PyLocal {
    /// The element type's name (`f32`, `bf16`, ...).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }
    /// A view: `shape` elements from `offsets`.
    fn view(slf: &Bound<'_, Self>, offsets: Vec<u32>, shape: Vec<u32>) -> PyView {
        PyView { base: slf.clone().into_any().unbind(), offsets, shape }
    }
    fn __repr__(&self) -> String {
        format!("Local(#{}, shape={:?}, dtype={})", self.index, self.shape, self.dtype.name())
    }
}

/// One task argument: a tensor (device tensor, local or view) and its direction. Made by
/// `pto.In`, `pto.Out`, `pto.InOut`, `pto.OutputExisting` and `pto.NoDep`.
#[pyclass(name = "Arg", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyArg {
    target: Py<PyAny>,
    dir: Direction,
}

#[pymethods]
impl PyArg {
    /// The direction's name.
    #[getter]
    fn direction(&self) -> &'static str {
        dir_name(self.dir)
    }
    /// The tensor.
    #[getter]
    fn tensor(&self, py: Python<'_>) -> Py<PyAny> {
        self.target.clone_ref(py)
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        let t = self.target.bind(py).repr().map(|r| r.to_string()).unwrap_or_default();
        format!("{}({t})", dir_name(self.dir))
    }
}

fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::In => "In",
        Direction::Out => "Out",
        Direction::InOut => "InOut",
        Direction::OutputExisting => "OutputExisting",
        Direction::NoDep => "NoDep",
    }
}

/// An input (read): the task waits for earlier writers.
#[pyfunction(name = "In")]
pub(crate) fn arg_in(t: Py<PyAny>) -> PyArg {
    PyArg { target: t, dir: Direction::In }
}
/// An output (written whole).
#[pyfunction(name = "Out")]
pub(crate) fn arg_out(t: Py<PyAny>) -> PyArg {
    PyArg { target: t, dir: Direction::Out }
}
/// An input-output (read and written).
#[pyfunction(name = "InOut")]
pub(crate) fn arg_inout(t: Py<PyAny>) -> PyArg {
    PyArg { target: t, dir: Direction::InOut }
}
/// An output into an existing buffer, without an overlap lookup.
#[pyfunction(name = "OutputExisting")]
pub(crate) fn arg_output_existing(t: Py<PyAny>) -> PyArg {
    PyArg { target: t, dir: Direction::OutputExisting }
}
/// An argument with no dependency tracking.
#[pyfunction(name = "NoDep")]
pub(crate) fn arg_nodep(t: Py<PyAny>) -> PyArg {
    PyArg { target: t, dir: Direction::NoDep }
}

static NEXT_GRAPH: AtomicU64 = AtomicU64::new(1);

/// A task graph built from Python: run it with `Device.run(graph, runtime=...)` on either
/// runtime, any number of times.
#[pyclass(name = "Graph", module = "pto")]
#[derive(Debug)]
pub(crate) struct PyGraph {
    id: u64,
    spec: Spec,
    /// The graph's device tensors, in orchestration-argument order.
    devices: Vec<Py<PyTensor>>,
    /// The serial of the device whose kernels and tensors the graph names, once it names one.
    device: Option<u64>,
}

impl PyGraph {
    /// The spec and the device tensors, for a run.
    pub(crate) fn parts(&self, py: Python<'_>) -> (Arc<Spec>, Vec<Py<PyTensor>>) {
        (Arc::new(self.spec.clone()), self.devices.iter().map(|t| t.clone_ref(py)).collect())
    }

    /// The device the graph names, if any.
    pub(crate) fn device(&self) -> Option<u64> {
        self.device
    }

    fn bind_device(&mut self, serial: u64, what: &str) -> PyResult<()> {
        match self.device {
            Some(d) if d != serial => Err(graph_error(format!(
                "{what} belongs to device #{serial}, but this graph already names device #{d}: a graph runs on one device"
            ))),
            _ => {
                self.device = Some(serial);
                Ok(())
            }
        }
    }

    /// The argument naming `obj` (a `Tensor`, `Local` or `View` of either).
    fn arg_spec(&mut self, obj: &Bound<'_, PyAny>, dir: Direction, what: &str) -> PyResult<ArgSpec> {
        if let Ok(v) = obj.downcast::<PyView>() {
            let v = v.get();
            let mut a = self.arg_spec(v.base.bind(obj.py()), dir, what)?;
            a.view = Some((v.offsets.clone(), v.shape.clone()));
            return Ok(a);
        }
        if let Ok(l) = obj.downcast::<PyLocal>() {
            let l = l.get();
            if l.graph != self.id {
                return Err(graph_error(format!("{what}: {} belongs to another graph", l.__repr__())));
            }
            return Ok(ArgSpec { base: Base::Local(l.index), view: None, dir });
        }
        if let Ok(t) = obj.downcast::<PyTensor>() {
            let serial = t.get().device_serial();
            self.bind_device(serial, &format!("{what}'s tensor"))?;
            let i = match self.devices.iter().position(|d| d.bind(obj.py()).is(t)) {
                Some(i) => i,
                None => {
                    self.devices.push(t.clone().unbind());
                    self.devices.len() - 1
                }
            };
            return Ok(ArgSpec { base: Base::Device(i), view: None, dir });
        }
        Err(PyTypeError::new_err(format!(
            "{what}: expected a pto.Tensor, pto.Local or a view of one, got {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        )))
    }

    fn push(&mut self, kind: Kind, t: TaskOptions<'_, '_>) -> PyResult<usize> {
        let n = self.spec.tasks.len();
        let mut args = Vec::new();
        for (i, a) in t.args.iter().enumerate() {
            let what = format!("task {n} argument {i}");
            let arg = a.downcast::<PyArg>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{what}: expected pto.In(t), pto.Out(t), pto.InOut(t), pto.OutputExisting(t) or pto.NoDep(t), got {}",
                    a.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
            let arg = arg.get();
            args.push(self.arg_spec(arg.target.bind(a.py()), arg.dir, &what)?);
        }
        let when = match t.when {
            Some(w) => Some(self.arg_spec(w, Direction::In, &format!("task {n} predicate"))?),
            None => None,
        };
        let mut scalars = Vec::new();
        for (i, s) in t.scalars.iter().enumerate() {
            scalars.push(scalar_bits(s).map_err(|why| PyTypeError::new_err(format!("task {n} scalar {i}: {why}")))?);
        }
        for &a in &t.after {
            if a >= n {
                return Err(graph_error(format!(
                    "task {n}: `after` names task {a}, which is not an earlier task of this graph (it has {n})"
                )));
            }
        }
        self.spec.tasks.push(TaskSpec {
            kind,
            args,
            scalars,
            blocks: t.blocks,
            after: t.after,
            sync_start: t.sync_start,
            allow_alias: t.allow_alias,
            dump: t.dump,
            when,
        });
        Ok(n)
    }

    fn kernel(&mut self, k: &PyKernel) -> PyResult<FuncId> {
        self.bind_device(k.device, &format!("kernel {:?}", k.name))?;
        Ok(FuncId(k.id))
    }
}

/// A task's options beyond its kind, as the Python methods take them.
struct TaskOptions<'a, 'py> {
    args: Vec<Bound<'py, PyAny>>,
    scalars: Vec<Bound<'py, PyAny>>,
    blocks: u32,
    after: Vec<usize>,
    sync_start: bool,
    allow_alias: bool,
    dump: u64,
    when: Option<&'a Bound<'py, PyAny>>,
}

/// A scalar argument's 64 bits: a Python int as its two's complement (it must fit 64 bits), a
/// Python float as the bits of the nearest `f32` (what `KernelContext::scalar_f32` reads).
fn scalar_bits(s: &Bound<'_, PyAny>) -> Result<u64, String> {
    if s.is_instance_of::<pyo3::types::PyBool>() {
        return Err("a bool is not a scalar (pass 0 or 1)".into());
    }
    if let Ok(v) = s.extract::<u64>() {
        return Ok(v);
    }
    if let Ok(v) = s.extract::<i64>() {
        return Ok(v as u64);
    }
    if s.is_instance_of::<pyo3::types::PyInt>() {
        return Err(format!("{s} does not fit 64 bits"));
    }
    if let Ok(v) = s.extract::<f64>() {
        return Ok((v as f32).to_bits() as u64);
    }
    Err(format!("expected an int or a float, got {}", s.get_type().name().map(|n| n.to_string()).unwrap_or_default()))
}

#[pymethods]
impl PyGraph {
    #[new]
    fn new() -> PyGraph {
        PyGraph {
            id: NEXT_GRAPH.fetch_add(1, Ordering::Relaxed),
            spec: Spec::default(),
            devices: Vec::new(),
            device: None,
        }
    }

    /// A tensor of `shape` and `dtype` that the graph allocates for its run (an intermediate:
    /// not readable from the host).
    #[pyo3(signature = (shape, dtype = "f32"))]
    fn local(&mut self, shape: Vec<u32>, dtype: &str) -> PyResult<PyLocal> {
        let dtype = parse_dtype(dtype)?;
        if shape.is_empty() || shape.contains(&0) {
            return Err(PyValueError::new_err(format!(
                "a local needs a non-empty shape of non-zero extents, got {shape:?}"
            )));
        }
        self.spec.locals.push((dtype, shape.clone()));
        Ok(PyLocal { graph: self.id, index: self.spec.locals.len() - 1, shape, dtype })
    }

    /// Add a task of `kernel` on one core and return its index. `args` are `pto.In(t)`,
    /// `pto.Out(t)`, ... in the kernel's argument order; `scalars` are ints (64-bit) or floats
    /// (as f32 bits); `after` are indices of earlier tasks it must follow; `core` is `"aiv"` or
    /// `"aic"` (default: the kernel's one core type); `when` a 4-byte-integer tensor whose first
    /// element decides whether the task runs; `dump` the args-dump mark mask.
    #[pyo3(signature = (kernel, args = Vec::new(), scalars = Vec::new(), *, core = None, blocks = 1, after = Vec::new(), sync_start = false, allow_alias = false, dump = 0, when = None))]
    #[allow(clippy::too_many_arguments)]
    fn task<'py>(
        &mut self,
        kernel: PyRef<'py, PyKernel>,
        args: Vec<Bound<'py, PyAny>>,
        scalars: Vec<Bound<'py, PyAny>>,
        core: Option<&str>,
        blocks: u32,
        after: Vec<usize>,
        sync_start: bool,
        allow_alias: bool,
        dump: u64,
        when: Option<Bound<'py, PyAny>>,
    ) -> PyResult<usize> {
        let f = self.kernel(&kernel)?;
        let core = match (core, kernel.aic, kernel.aiv) {
            (Some("aiv"), _, true) | (None, false, true) => CoreType::Aiv,
            (Some("aic"), true, _) | (None, true, false) => CoreType::Aic,
            (None, true, true) => {
                return Err(PyValueError::new_err(format!(
                    "kernel {:?} has AIC and AIV bodies: say core=\"aic\" or core=\"aiv\"",
                    kernel.name
                )));
            }
            (Some(c @ ("aic" | "aiv")), _, _) => {
                return Err(PyValueError::new_err(format!("kernel {:?} has no {c} body", kernel.name)));
            }
            (Some(c), _, _) => return Err(PyValueError::new_err(format!("core {c:?}: expected \"aic\" or \"aiv\""))),
            (None, false, false) => return Err(PyValueError::new_err("the kernel has no body")),
        };
        let kind = if core == CoreType::Aic { Kind::Aic(f) } else { Kind::Aiv(f) };
        self.push(
            kind,
            TaskOptions { args, scalars, blocks, after, sync_start, allow_alias, dump, when: when.as_ref() },
        )
    }

    /// Add a MIX task (one cluster: the AIC kernel `aic` and an AIV kernel on each lane —
    /// `aiv` on both, or `aiv1` on lane 1) and return its index. Options as for `task`.
    #[pyo3(signature = (aic, aiv, args = Vec::new(), scalars = Vec::new(), *, aiv1 = None, blocks = 1, after = Vec::new(), sync_start = false, allow_alias = false, dump = 0, when = None))]
    #[allow(clippy::too_many_arguments)]
    fn mix<'py>(
        &mut self,
        aic: PyRef<'py, PyKernel>,
        aiv: PyRef<'py, PyKernel>,
        args: Vec<Bound<'py, PyAny>>,
        scalars: Vec<Bound<'py, PyAny>>,
        aiv1: Option<PyRef<'py, PyKernel>>,
        blocks: u32,
        after: Vec<usize>,
        sync_start: bool,
        allow_alias: bool,
        dump: u64,
        when: Option<Bound<'py, PyAny>>,
    ) -> PyResult<usize> {
        for (k, want_aic) in [(&aic, true), (&aiv, false)].into_iter().chain(aiv1.as_ref().map(|k| (k, false))) {
            if (want_aic && !k.aic) || (!want_aic && !k.aiv) {
                let c = if want_aic { "AIC" } else { "AIV" };
                return Err(PyValueError::new_err(format!("kernel {:?} has no {c} body for this MIX lane", k.name)));
            }
        }
        let kind = Kind::Mix {
            aic: self.kernel(&aic)?,
            aiv0: self.kernel(&aiv)?,
            aiv1: match &aiv1 {
                Some(k) => self.kernel(k)?,
                None => self.kernel(&aiv)?,
            },
        };
        self.push(
            kind,
            TaskOptions { args, scalars, blocks, after, sync_start, allow_alias, dump, when: when.as_ref() },
        )
    }

    /// Add a dummy task (no kernel: it completes once its producers have) and return its index.
    #[pyo3(signature = (args = Vec::new(), *, after = Vec::new()))]
    fn dummy<'py>(&mut self, args: Vec<Bound<'py, PyAny>>, after: Vec<usize>) -> PyResult<usize> {
        let t = TaskOptions {
            args,
            scalars: Vec::new(),
            blocks: 1,
            after,
            sync_start: false,
            allow_alias: false,
            dump: 0,
            when: None,
        };
        self.push(Kind::Dummy, t)
    }

    /// The number of tasks.
    fn __len__(&self) -> usize {
        self.spec.tasks.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Graph({} tasks, {} locals, {} device tensors)",
            self.spec.tasks.len(),
            self.spec.locals.len(),
            self.devices.len()
        )
    }
}
