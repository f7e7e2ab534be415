//! What a run gives back, as Python objects: the report, its trace (Chrome JSON, SVG, the
//! subtasks and phases), the args dump's report and the dump read back from its directory.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::PyArray1;
use pto::dump::{Dump, DumpReport, Record};
use pto::runtime::graph::DType;
use pto::runtime::host::Trace;
use pto::{Executor, RunReport};
use pyo3::exceptions::{PyIOError, PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::dtype::numpy_name;

/// `json.loads(text)`.
fn json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

fn micros(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A run's swimlane trace.
#[pyclass(name = "Trace", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyTrace {
    t: Arc<Trace>,
}

impl PyTrace {
    /// Wrap a trace.
    pub(crate) fn new(t: Trace) -> PyTrace {
        PyTrace { t: Arc::new(t) }
    }
}

#[pymethods]
impl PyTrace {
    /// Ticks per second of the board's counter.
    #[getter]
    fn freq_hz(&self) -> u64 {
        self.t.freq_hz
    }
    /// `hbg` or `trb`.
    #[getter]
    fn runtime(&self) -> &'static str {
        self.t.runtime.name()
    }
    /// Clusters launched.
    #[getter]
    fn clusters(&self) -> u32 {
        self.t.clusters
    }
    /// AICPU threads launched.
    #[getter]
    fn threads(&self) -> u32 {
        self.t.threads
    }
    /// Records that did not fit their rings.
    #[getter]
    fn dropped(&self) -> u64 {
        self.t.dropped()
    }
    /// Every ring closed and nothing dropped.
    #[getter]
    fn complete(&self) -> bool {
        self.t.is_complete()
    }
    /// Registered func names by id.
    #[getter]
    fn funcs(&self) -> std::collections::BTreeMap<u16, String> {
        self.t.funcs.clone()
    }
    /// Producer → consumer task edges, when known.
    #[getter]
    fn edges(&self) -> Option<Vec<(u32, u32)>> {
        self.t.edges.clone()
    }
    /// Every subtask that ran on a core, by start tick: dicts of task, block, lane, core,
    /// kernel (its name), func, dispatch, start, end, completion (ticks) and thread.
    #[getter]
    fn subtasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for s in &self.t.subtasks {
            let d = PyDict::new(py);
            d.set_item("task", s.task)?;
            d.set_item("block", s.block)?;
            d.set_item("lane", s.lane)?;
            d.set_item("core", s.core)?;
            d.set_item("kernel", self.t.func_name(s))?;
            d.set_item("func", s.func)?;
            d.set_item("dispatch", s.dispatch)?;
            d.set_item("start", s.start)?;
            d.set_item("end", s.end)?;
            d.set_item("completion", s.completion)?;
            d.set_item("thread", s.thread)?;
            l.append(d)?;
        }
        Ok(l)
    }
    /// Every recorded AICPU phase: dicts of thread, phase, start and end (ticks).
    #[getter]
    fn phases<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for p in &self.t.phases {
            let d = PyDict::new(py);
            d.set_item("thread", p.thread)?;
            d.set_item("phase", format!("{:?}", p.phase))?;
            d.set_item("start", p.start)?;
            d.set_item("end", p.end)?;
            l.append(d)?;
        }
        Ok(l)
    }
    /// The Chrome trace-event JSON (Perfetto, chrome://tracing) as text.
    fn chrome_json(&self) -> String {
        self.t.to_chrome_json()
    }
    /// The Chrome trace-event document as a Python object.
    fn chrome<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json(py, &self.t.to_chrome_json())
    }
    /// The SVG swimlane as text.
    fn svg(&self) -> String {
        self.t.to_svg()
    }
    /// Write the Chrome JSON to `path`; returns the path.
    fn write_chrome(&self, path: PathBuf) -> PyResult<PathBuf> {
        std::fs::write(&path, self.t.to_chrome_json())
            .map_err(|e| PyIOError::new_err(format!("cannot write {}: {e}", path.display())))?;
        Ok(path)
    }
    /// Write the SVG swimlane to `path`; returns the path.
    fn write_svg(&self, path: PathBuf) -> PyResult<PathBuf> {
        std::fs::write(&path, self.t.to_svg())
            .map_err(|e| PyIOError::new_err(format!("cannot write {}: {e}", path.display())))?;
        Ok(path)
    }
    fn __repr__(&self) -> String {
        format!(
            "Trace(runtime={}, subtasks={}, phases={}, dropped={})",
            self.t.runtime.name(),
            self.t.subtasks.len(),
            self.t.phases.len(),
            self.t.dropped()
        )
    }
}

/// What the args dump of a run wrote.
#[pyclass(name = "DumpReport", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyDumpReport {
    r: DumpReport,
}

#[pymethods]
impl PyDumpReport {
    /// The directory holding `args_dump.json` and `args.bin`.
    #[getter]
    fn dir(&self) -> PathBuf {
        self.r.dir.clone()
    }
    /// `partial`, `hybrid` or `full`.
    #[getter]
    fn level(&self) -> &'static str {
        self.r.level.name()
    }
    /// Records collected.
    #[getter]
    fn collected(&self) -> u64 {
        self.r.accounting.collected
    }
    /// Records dropped (`None` when unknown).
    #[getter]
    fn dropped(&self) -> Option<u64> {
        self.r.accounting.dropped
    }
    /// Records the device produced (`None` when unknown).
    #[getter]
    fn total(&self) -> Option<u64> {
        self.r.accounting.total
    }
    /// Payload bytes written.
    #[getter]
    fn payload_bytes(&self) -> u64 {
        self.r.payload_bytes
    }
    /// Read the dump back from its directory.
    fn open(&self) -> PyResult<PyDump> {
        PyDump::open(self.r.dir.clone())
    }
    fn __repr__(&self) -> String {
        format!(
            "DumpReport(level={}, collected={}, payload_bytes={}, dir={:?})",
            self.r.level.name(),
            self.r.accounting.collected,
            self.r.payload_bytes,
            self.r.dir
        )
    }
}

/// An args dump read back from its directory (`args_dump.json` and `args.bin`).
#[pyclass(name = "Dump", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyDump {
    d: Dump,
    dir: PathBuf,
}

fn record_dict<'py>(py: Python<'py>, i: usize, r: &Record) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("index", i)?;
    d.set_item("task", r.task)?;
    d.set_item("func_ids", r.func_ids.clone())?;
    d.set_item("stage", r.stage.name())?;
    d.set_item("arg", r.arg)?;
    d.set_item("direction", r.direction.name())?;
    d.set_item("kind", if r.is_scalar() { "scalar" } else { "tensor" })?;
    d.set_item("dtype", r.dtype.map(DType::name))?;
    d.set_item("shape", r.shape.clone())?;
    d.set_item("strides", r.strides.clone())?;
    d.set_item("offset", r.offset)?;
    d.set_item("addr", r.addr)?;
    d.set_item("payload_len", r.payload_len)?;
    d.set_item("truncated", r.truncated)?;
    d.set_item("view_bytes", r.view_bytes)?;
    d.set_item("value", r.value)?;
    d.set_item("lane", r.lane)?;
    d.set_item("seq", r.seq)?;
    Ok(d)
}

impl PyDump {
    fn open(dir: PathBuf) -> PyResult<PyDump> {
        let d = Dump::open(&dir).map_err(|e| PyIOError::new_err(format!("cannot read the args dump: {e}")))?;
        Ok(PyDump { d, dir })
    }

    fn record(&self, index: usize) -> PyResult<&Record> {
        self.d.records.get(index).ok_or_else(|| {
            PyIndexError::new_err(format!("record {index}: the dump has {} records", self.d.records.len()))
        })
    }
}

#[pymethods]
impl PyDump {
    /// Read the dump in `dir`.
    #[new]
    fn py_new(dir: PathBuf) -> PyResult<PyDump> {
        PyDump::open(dir)
    }
    /// The directory.
    #[getter]
    fn dir(&self) -> PathBuf {
        self.dir.clone()
    }
    /// `partial`, `hybrid` or `full`.
    #[getter]
    fn level(&self) -> &'static str {
        self.d.level.name()
    }
    /// The counts: `{"total", "collected", "dropped"}` (`None`: unknown).
    #[getter]
    fn accounting<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("total", self.d.accounting.total)?;
        d.set_item("collected", self.d.accounting.collected)?;
        d.set_item("dropped", self.d.accounting.dropped)?;
        Ok(d)
    }
    /// The run: `{"epoch", "runtime", "complete"}`.
    #[getter]
    fn run<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("epoch", self.d.run.epoch)?;
        d.set_item("runtime", self.d.run.runtime.name())?;
        d.set_item("complete", self.d.run.complete)?;
        Ok(d)
    }
    /// Every record, as dicts (their `index` is what `data` takes).
    #[getter]
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let l = PyList::empty(py);
        for (i, r) in self.d.records.iter().enumerate() {
            l.append(record_dict(py, i, r)?)?;
        }
        Ok(l)
    }
    /// The record of `task`'s argument `arg` at `stage` (`before_dispatch` or
    /// `after_completion`), or `None`.
    fn find<'py>(&self, py: Python<'py>, task: u32, arg: u32, stage: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
        let stage = match stage {
            "before_dispatch" => pto::dump::Stage::BeforeDispatch,
            "after_completion" => pto::dump::Stage::AfterCompletion,
            s => {
                return Err(PyValueError::new_err(format!(
                    "stage {s:?}: expected \"before_dispatch\" or \"after_completion\""
                )));
            }
        };
        match self.d.records.iter().position(|r| r.task == task && r.arg == arg && r.stage == stage) {
            Some(i) => Ok(Some(record_dict(py, i, &self.d.records[i])?)),
            None => Ok(None),
        }
    }
    /// The payload of record `index` (or of a record dict) as a flat numpy array of its
    /// dtype (bf16: uint16 bits); `raw=True` gives its bytes as uint8.
    #[pyo3(signature = (record, *, raw = false))]
    fn data<'py>(&self, py: Python<'py>, record: &Bound<'py, PyAny>, raw: bool) -> PyResult<Bound<'py, PyAny>> {
        let index: usize = match record.downcast::<PyDict>() {
            Ok(d) => d
                .get_item("index")?
                .ok_or_else(|| PyValueError::new_err("a record dict has an \"index\""))?
                .extract()?,
            Err(_) => record.extract()?,
        };
        let r = self.record(index)?;
        let bytes = self.d.bytes(r);
        let u8s = PyArray1::from_slice(py, bytes).into_any();
        if raw {
            return Ok(u8s);
        }
        let Some(dtype) = r.dtype else {
            return Err(PyValueError::new_err(format!("record {index} is a scalar's (see its \"value\")")));
        };
        let np_name = numpy_name(dtype);
        u8s.call_method1("view", (np_name,))
    }
    fn __len__(&self) -> usize {
        self.d.records.len()
    }
    fn __repr__(&self) -> String {
        format!("Dump(level={}, records={}, dir={:?})", self.d.level.name(), self.d.records.len(), self.dir)
    }
}

/// What a completed run reports.
#[pyclass(name = "RunReport", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyRunReport {
    r: RunReport,
    /// The board it ran on.
    #[pyo3(get)]
    board: &'static str,
    /// `hbg` or `trb`.
    #[pyo3(get)]
    runtime: &'static str,
    /// The cache model it ran under (`coherent`, `faithful:SEED`).
    #[pyo3(get)]
    cache_model: String,
    /// The host graph build (host-built graph), microseconds; `None` on the device-side runtime.
    #[pyo3(get)]
    build_us: Option<f64>,
    /// The executor asked for (`auto`, `legacy`, `resident`).
    #[pyo3(get)]
    executor_requested: &'static str,
}

impl PyRunReport {
    /// Wrap a report.
    pub(crate) fn new(
        r: RunReport,
        board: &'static str,
        runtime: pto::runtime::orch::RuntimeKind,
        cache_model: String,
        build: Option<std::time::Duration>,
        executor_requested: Executor,
    ) -> PyRunReport {
        PyRunReport {
            r,
            board,
            runtime: runtime.name(),
            cache_model,
            build_us: build.map(micros),
            executor_requested: executor_requested.name(),
        }
    }
}

#[pymethods]
impl PyRunReport {
    /// The run's epoch on its device.
    #[getter]
    fn epoch(&self) -> u64 {
        self.r.epoch
    }
    /// Tasks completed.
    #[getter]
    fn tasks(&self) -> u64 {
        self.r.tasks
    }
    /// Subtasks dispatched to cores.
    #[getter]
    fn dispatched(&self) -> u64 {
        self.r.dispatched
    }
    /// Cores that handshook.
    #[getter]
    fn cores(&self) -> u64 {
        self.r.cores
    }
    /// Cores released through their gates.
    #[getter]
    fn released(&self) -> u64 {
        self.r.released
    }
    /// Host wall time from launch to the completion fence, microseconds.
    #[getter]
    fn wall_us(&self) -> f64 {
        micros(self.r.wall)
    }
    /// How long the orchestration ran on the device (device-side runtime), microseconds.
    #[getter]
    fn orchestration_us(&self) -> Option<f64> {
        self.r.orchestration.map(micros)
    }
    /// Of `orchestration_us`, the part it waited in flow control (room in a ring or the tensor
    /// map), microseconds (device-side runtime).
    #[getter]
    fn orchestration_flow_wait_us(&self) -> Option<f64> {
        self.r.orchestration_flow_wait.map(micros)
    }
    /// The pipeline slot used.
    #[getter]
    fn slot(&self) -> usize {
        self.r.slot
    }
    /// The executor that ran: `legacy` or `resident`.
    #[getter]
    fn executor(&self) -> &'static str {
        self.r.executor.name()
    }
    /// Why the run was on the legacy executor (`None` on the resident one).
    #[getter]
    fn legacy_reason(&self) -> Option<String> {
        self.r.legacy_reason.map(|r| r.to_string())
    }
    /// The swimlane trace, when the run traced.
    #[getter]
    fn trace(&self) -> Option<PyTrace> {
        self.r.trace.clone().map(PyTrace::new)
    }
    /// What the args dump wrote, when the run dumped.
    #[getter]
    fn dump(&self) -> Option<PyDumpReport> {
        self.r.dump.clone().map(|r| PyDumpReport { r })
    }
    /// The resident route's boundary capture counters (resident runs with the dump on).
    #[getter]
    fn capture<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(c) = &self.r.capture else { return Ok(None) };
        let d = PyDict::new(py);
        for (k, v) in [
            ("region_bytes", c.region_bytes),
            ("requests", c.requests),
            ("claims", c.claims),
            ("steps", c.steps),
            ("would_block", c.would_block),
            ("largest_step", c.largest_step),
            ("max_step", c.max_step),
            ("overtakes", c.overtakes),
            ("answered_while_open", c.answered_while_open),
            ("aborts_answered", c.aborts_answered),
            ("aborts_taken", c.aborts_taken),
            ("unsettled_slots", c.unsettled_slots),
        ] {
            d.set_item(k, v)?;
        }
        Ok(Some(d))
    }
    /// The report as a dict of plain values (the trace and dump as their presence).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("board", self.board)?;
        d.set_item("runtime", self.runtime)?;
        d.set_item("executor", self.executor())?;
        d.set_item("executor_requested", self.executor_requested)?;
        d.set_item("legacy_reason", self.legacy_reason())?;
        d.set_item("cache_model", &self.cache_model)?;
        d.set_item("epoch", self.r.epoch)?;
        d.set_item("tasks", self.r.tasks)?;
        d.set_item("dispatched", self.r.dispatched)?;
        d.set_item("cores", self.r.cores)?;
        d.set_item("released", self.r.released)?;
        d.set_item("wall_us", self.wall_us())?;
        d.set_item("build_us", self.build_us)?;
        d.set_item("orchestration_us", self.orchestration_us())?;
        d.set_item("orchestration_flow_wait_us", self.orchestration_flow_wait_us())?;
        d.set_item("slot", self.r.slot)?;
        d.set_item("traced", self.r.trace.is_some())?;
        d.set_item("dump_dir", self.r.dump.as_ref().map(|r| r.dir.clone()))?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        format!(
            "RunReport(board={}, runtime={}, executor={}, cache={}, tasks={}, wall_us={:.1})",
            self.board,
            self.runtime,
            self.r.executor.name(),
            self.cache_model,
            self.r.tasks,
            self.wall_us()
        )
    }
}

/// A built-in workload's run: its report, and how many output values matched its golden.
#[pyclass(name = "WorkloadResult", module = "pto", frozen)]
#[derive(Debug)]
pub(crate) struct PyWorkloadResult {
    /// The workload.
    #[pyo3(get)]
    pub(crate) name: String,
    /// Output values checked against the golden (all matched: a mismatch raises
    /// `pto.GoldenMismatch`).
    #[pyo3(get)]
    pub(crate) checked: usize,
    /// The run's report.
    #[pyo3(get)]
    pub(crate) report: Py<PyRunReport>,
}

#[pymethods]
impl PyWorkloadResult {
    /// Always `"PASS"`: a failed run or golden raises instead.
    #[getter]
    fn result(&self) -> &'static str {
        "PASS"
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        format!("WorkloadResult({}, checked={}, {})", self.name, self.checked, self.report.borrow(py).__repr__())
    }
}
