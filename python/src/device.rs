//! `pto.Device`: an opened simulated board, and the kernels the package ships.

use std::path::PathBuf;
use std::sync::Arc;

use pto::dump::DumpLevel;
use pto::hal::{CoreType, KernelFn};
use pto::runtime::orch::RuntimeKind;
use pto::{Executor, RingConfig, RunConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::board::{self, DynDevice, SimSettings, WorkloadSettings, cache_name, parse_cache};
use crate::dtype::{dtype_of_numpy, parse_dtype};
use crate::errors::{IntoPy, config_error, failure_to_py};
use crate::graph::{PyGraph, PyKernel};
use crate::report::{PyRunReport, PyWorkloadResult};
use crate::tensor::{PyTensor, host_array};

/// The native (Rust) kernels the package ships, by name: the examples' kernels
/// (`pto-testkit`), with the core type each runs on by default.
pub(crate) const KERNELS: [(&str, CoreType, KernelFn, &str); 18] = [
    ("add", CoreType::Aiv, pto_testkit::k_add, "out = a + b (f32; args: In a, In b, Out out)"),
    ("mul", CoreType::Aiv, pto_testkit::k_mul, "out = a * b (f32; args: In a, In b, Out out)"),
    (
        "add_scalar",
        CoreType::Aiv,
        pto_testkit::k_add_scalar,
        "out = a + scalar0 (f32; args: In a, Out out; scalar: float)",
    ),
    ("inc0", CoreType::Aiv, pto_testkit::k_inc0, "x[0] += 1 (f32; args: InOut x)"),
    ("fill1", CoreType::Aiv, pto_testkit::k_fill1, "x[:] = 1 (f32; args: Out x)"),
    ("accumulate", CoreType::Aiv, pto_testkit::k_accumulate, "y += x (f32; args: In x, InOut y)"),
    ("add1", CoreType::Aiv, pto_testkit::k_add1, "y += 1 (f32; args: InOut y)"),
    (
        "mix_matmul",
        CoreType::Aic,
        pto_testkit::k_mix_matmul,
        "AIC of a MIX task: C = A @ B, square tiles (args: In A, In B, Out C, In D, Out E)",
    ),
    (
        "mix_vec_half",
        CoreType::Aiv,
        pto_testkit::k_mix_vec_half,
        "AIV lanes of a MIX task: each lane its half of E = 2 D + 1 (args as mix_matmul)",
    ),
    ("panic", CoreType::Aiv, pto_testkit::k_panic, "panics: a kernel fault (for error tests)"),
    ("nothing", CoreType::Aiv, pto_testkit::k_nothing, "does nothing (its arguments can be dumped)"),
    (
        "attn_tile_matmul",
        CoreType::Aic,
        pto_testkit::attention::k_tile_matmul,
        "attention workloads: tile matmul (AIC)",
    ),
    (
        "attn_tile_accumulate",
        CoreType::Aiv,
        pto_testkit::attention::k_tile_accumulate,
        "attention workloads: tile accumulate",
    ),
    ("attn_qk", CoreType::Aic, pto_testkit::attention::k_attn_qk, "attention workloads: scaled Q K^T (AIC)"),
    (
        "attn_softmax_step",
        CoreType::Aiv,
        pto_testkit::attention::k_attn_softmax_step,
        "attention workloads: online-softmax step",
    ),
    (
        "attn_rescale_add",
        CoreType::Aiv,
        pto_testkit::attention::k_attn_rescale_add,
        "attention workloads: rescale and add",
    ),
    (
        "attn_init_state",
        CoreType::Aiv,
        pto_testkit::attention::k_attn_init_state,
        "attention workloads: state initialisation",
    ),
    (
        "attn_finalize",
        CoreType::Aiv,
        pto_testkit::attention::k_attn_finalize,
        "attention workloads: final normalisation",
    ),
];

fn core_of(name: &str) -> PyResult<CoreType> {
    match name {
        "aiv" => Ok(CoreType::Aiv),
        "aic" => Ok(CoreType::Aic),
        c => Err(PyValueError::new_err(format!("core {c:?}: expected \"aiv\" or \"aic\""))),
    }
}

fn parse_runtime(s: &str) -> PyResult<RuntimeKind> {
    s.parse::<RuntimeKind>().map_err(|e| config_error(e.to_string()))
}

fn parse_executor(s: &str) -> PyResult<Executor> {
    match s {
        "auto" => Ok(Executor::Auto),
        "legacy" => Ok(Executor::Legacy),
        "resident" => Ok(Executor::Resident),
        e => Err(config_error(format!("executor {e:?}: expected \"auto\", \"legacy\" or \"resident\""))),
    }
}

fn parse_dump(s: Option<&str>) -> PyResult<Option<DumpLevel>> {
    s.map(|l| {
        l.parse::<DumpLevel>()
            .map_err(|_| config_error(format!("dump level {l:?}: expected \"partial\", \"hybrid\" or \"full\"")))
    })
    .transpose()
}

/// Ring sizes from a dict: `window`, `heap`, `dep_pool` (an int for every ring or a list of
/// four), `tensormap_entries`, `wait_us`.
fn parse_rings(d: &Bound<'_, PyDict>) -> PyResult<RingConfig> {
    fn four<T: Copy + for<'a> FromPyObject<'a>>(v: &Bound<'_, PyAny>, key: &str) -> PyResult<[T; 4]> {
        if let Ok(x) = v.extract::<T>() {
            return Ok([x; 4]);
        }
        let l: Vec<T> = v.extract().map_err(|_| config_error(format!("rings[{key:?}]: an int or a list of 4 ints")))?;
        l.try_into()
            .map_err(|_| config_error(format!("rings[{key:?}]: a list of exactly 4 ints (one per scope depth)")))
    }
    let mut r = RingConfig::default();
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            "window" => r.window = four(&v, &key)?,
            "heap" => r.heap = four(&v, &key)?,
            "dep_pool" => r.dep_pool = four(&v, &key)?,
            "tensormap_entries" => r.tensormap_entries = v.extract()?,
            "wait_us" => r.wait_us = v.extract()?,
            other => {
                return Err(config_error(format!(
                    "rings: unknown key {other:?} (expected window, heap, dep_pool, tensormap_entries, wait_us)"
                )));
            }
        }
    }
    Ok(r)
}

/// An opened simulated board. The examples' kernels and orchestrations are registered at open
/// (kernels `add`, `mul`, `add_scalar`, `inc0`, `fill1`, `accumulate`, `add1`, `mix_matmul`,
/// `mix_vec_half` — func ids 0..=8 — which the built-in workloads use).
#[pyclass(name = "Device", module = "pto", frozen)]
pub(crate) struct PyDevice {
    pub(crate) dev: Arc<dyn DynDevice>,
}

impl PyDevice {
    fn kernel_object(&self, name: &str) -> Option<PyKernel> {
        let id = self.dev.func(name)?;
        // The device's func table is the runtime's own: which core types a name has a body
        // for is recorded here as the package registers them.
        let (aic, aiv) = self.cores_of(name);
        Some(PyKernel { name: name.to_string(), id: id.0, aic, aiv, device: self.dev.serial() })
    }

    fn cores_of(&self, name: &str) -> (bool, bool) {
        let cores = REGISTERED.lock();
        match cores.get(&(self.dev.serial(), name.to_string())) {
            Some(&c) => c,
            // Registered by a workload under its catalog name (the attention kernels).
            None => match KERNELS.iter().find(|k| k.0 == name) {
                Some((_, CoreType::Aic, ..)) => (true, false),
                Some((_, CoreType::Aiv, ..)) => (false, true),
                None => (false, false),
            },
        }
    }

    fn note(&self, name: &str, core: CoreType) {
        let mut cores = REGISTERED.lock();
        let e = cores.entry((self.dev.serial(), name.to_string())).or_default();
        match core {
            CoreType::Aic => e.0 = true,
            CoreType::Aiv => e.1 = true,
        }
    }
}

/// Which core types each registered kernel has a body for, by device serial and name.
static REGISTERED: parking_lot::Mutex<std::collections::BTreeMap<(u64, String), (bool, bool)>> =
    parking_lot::Mutex::new(std::collections::BTreeMap::new());

/// The kernels `pto_testkit::Kernels::register` registers at open, with their core types.
const OPENED_WITH: [(&str, CoreType); 9] = [
    ("add", CoreType::Aiv),
    ("mul", CoreType::Aiv),
    ("add_scalar", CoreType::Aiv),
    ("inc0", CoreType::Aiv),
    ("fill1", CoreType::Aiv),
    ("accumulate", CoreType::Aiv),
    ("add1", CoreType::Aiv),
    ("mix_matmul", CoreType::Aic),
    ("mix_vec_half", CoreType::Aiv),
];

/// Open a simulated board by name (`sim-a2a3`, `sim-a5`, `sim-mini`).
///
/// `cache`: the cache model, spelt as `PTO_SIM_CACHE` (`coherent`, `faithful`,
/// `faithful:SEED`, optionally `:through` / `:back`); default: the board's own, or
/// `PTO_SIM_CACHE` when set. `aicpu_writes`: `through` or `back` (the faithful model's AICPU
/// write policy). `protect`: memory protection of kernel accesses (default on).
/// `engine`: the simulator's engine, spelt as `PTO_SIM_ENGINE` (`threads`, `coroutines`,
/// `coroutines:N`). `schedule`: `os`, or a seed (`7`, `7:pct`, `seed:7:pct:3`, as `pto run
/// --schedule`) for a reproducible schedule on the simulator's own scheduler. Both are fixed when
/// the device opens.
#[pyfunction]
#[pyo3(signature = (board = "sim-a2a3", *, cache = None, aicpu_writes = None, protect = None, check = None, engine = None, schedule = None))]
#[allow(clippy::too_many_arguments, reason = "the keyword arguments of pto.open")]
pub(crate) fn open(
    py: Python<'_>,
    board: &str,
    cache: Option<&str>,
    aicpu_writes: Option<&str>,
    protect: Option<bool>,
    check: Option<&str>,
    engine: Option<&str>,
    schedule: Option<&str>,
) -> PyResult<PyDevice> {
    let settings = sim_settings(cache, aicpu_writes, protect, check)?;
    let engine = engine
        .map(|e| {
            pto_sim::SimEngine::parse(e)
                .ok_or_else(|| config_error(format!("engine {e:?}: expected {}", pto_sim::SimEngine::SYNTAX)))
        })
        .transpose()?;
    let schedule = schedule
        .map(|v| {
            let spelt = if v == "os" || v.starts_with("seed:") { v.to_string() } else { format!("seed:{v}") };
            pto_sim::Schedule::parse(&spelt)
                .ok_or_else(|| config_error(format!("schedule {v:?}: expected os, N, N:random, N:pct or N:pct:DEPTH")))
        })
        .transpose()?;
    let name = board.to_string();
    let opened = py.allow_threads(move || pto_sim::with_engine(engine, schedule, || board::open(&name, &settings)));
    let dev = match opened {
        None => {
            return Err(config_error(format!("unknown board {board:?}: expected one of {}", board::BOARDS.join(", "))));
        }
        Some(r) => r.map_err(|e| Python::with_gil(|py| crate::errors::pto_error(py, e)))?,
    };
    let d = PyDevice { dev };
    for (name, core) in OPENED_WITH {
        d.note(name, core);
    }
    Ok(d)
}

fn sim_settings(
    cache: Option<&str>,
    aicpu_writes: Option<&str>,
    protect: Option<bool>,
    check: Option<&str>,
) -> PyResult<SimSettings> {
    let mut s = SimSettings { protect, ..SimSettings::default() };
    if let Some(c) = check {
        let parsed = pto::hal::check::Checks::parse(c);
        let why = || format!("check {c:?}: expected {}", pto::hal::check::Checks::SYNTAX);
        s.check = Some(parsed.ok_or_else(|| config_error(why()))?);
    }
    if let Some(c) = cache {
        let (m, p) = parse_cache(c).map_err(config_error)?;
        s.cache = Some(m);
        s.aicpu_writes = p;
    }
    if let Some(w) = aicpu_writes {
        s.aicpu_writes = Some(
            pto_sim::AicpuWritePolicy::parse(w)
                .ok_or_else(|| config_error(format!("aicpu_writes {w:?}: expected \"through\" or \"back\"")))?,
        );
    }
    Ok(s)
}

#[pymethods]
impl PyDevice {
    /// The board's name.
    #[getter]
    fn board(&self) -> &'static str {
        self.dev.board()
    }
    /// `{"clusters", "aicpu_threads", "cores"}`.
    #[getter]
    fn topology<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = self.dev.topology();
        let d = PyDict::new(py);
        d.set_item("clusters", t.clusters)?;
        d.set_item("aicpu_threads", t.aicpu_threads)?;
        d.set_item("cores", t.workers())?;
        Ok(d)
    }
    /// The cache model in effect (`coherent`, `faithful:SEED`).
    #[getter]
    fn cache_model(&self) -> String {
        cache_name(self.dev.cache())
    }
    /// The faithful model's AICPU write policy (`through`, `back`).
    #[getter]
    fn aicpu_writes(&self) -> &'static str {
        self.dev.aicpu_writes().name()
    }
    /// Whether memory protection is on.
    #[getter]
    fn protect(&self) -> bool {
        self.dev.protection()
    }
    /// The device's serial.
    #[getter]
    fn serial(&self) -> u64 {
        self.dev.serial()
    }

    /// Change the simulator's switches between runs (same spellings as `pto.open`).
    #[pyo3(signature = (*, cache = None, aicpu_writes = None, protect = None, check = None))]
    fn configure(
        &self,
        cache: Option<&str>,
        aicpu_writes: Option<&str>,
        protect: Option<bool>,
        check: Option<&str>,
    ) -> PyResult<()> {
        let s = sim_settings(cache, aicpu_writes, protect, check)?;
        self.dev.configure(&s).map_err(config_error)
    }

    /// A zeroed tensor of `shape` and `dtype` (`f32`, `f16`, `bf16`, `i32`, ...).
    #[pyo3(signature = (shape, dtype = "f32"))]
    fn alloc(&self, py: Python<'_>, shape: Vec<u32>, dtype: &str) -> PyResult<PyTensor> {
        let dtype = parse_dtype(dtype)?;
        PyTensor::alloc(py, &self.dev, dtype, shape)
    }

    /// A tensor holding `data` (a numpy array, or anything `numpy.asarray` takes). Its dtype is
    /// the array's (`ml_dtypes.bfloat16` is `bf16`) unless `dtype` names one, then the data is
    /// cast to it under numpy's same-kind rule (floats to `bf16` round to nearest even);
    /// `shape` reshapes a flat array.
    #[pyo3(signature = (data, dtype = None, shape = None))]
    fn tensor(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        dtype: Option<&str>,
        shape: Option<Vec<u32>>,
    ) -> PyResult<PyTensor> {
        let np = py.import("numpy")?;
        let probe = if data.hasattr("__dlpack__")? && !data.is_instance(&np.getattr("ndarray")?)? {
            np.call_method1("from_dlpack", (data,))?
        } else {
            np.call_method1("asarray", (data,))?
        };
        let dtype = match dtype {
            Some(d) => parse_dtype(d)?,
            None => {
                let n: String = probe.getattr("dtype")?.getattr("name")?.extract()?;
                dtype_of_numpy(&n).ok_or_else(|| {
                    pyo3::exceptions::PyTypeError::new_err(format!(
                        "no device element type for numpy {n}: pass dtype= (f32, f16, bf16, i32, ...)"
                    ))
                })?
            }
        };
        let arr = host_array(&probe, dtype, true)?;
        let shape: Vec<u32> = match shape {
            Some(s) => s,
            None => {
                let s: Vec<usize> = arr.getattr("shape")?.extract()?;
                s.into_iter()
                    .map(|d| {
                        u32::try_from(d).map_err(|_| PyValueError::new_err(format!("extent {d} does not fit 32 bits")))
                    })
                    .collect::<PyResult<_>>()?
            }
        };
        if shape.is_empty() {
            return Err(PyValueError::new_err("a device tensor has at least one dimension (got a 0-d array)"));
        }
        let t = PyTensor::alloc(py, &self.dev, dtype, shape)?;
        t.write_array(py, &arr)?;
        Ok(t)
    }

    /// The kernel registered under `name`; a kernel the package ships (see `pto.kernels()`)
    /// is registered on first use, on its default core type.
    fn kernel(&self, py: Python<'_>, name: &str) -> PyResult<PyKernel> {
        if let Some(k) = self.kernel_object(name) {
            return Ok(k);
        }
        self.register_kernel(py, name, None, None, None, false)
    }

    /// Register a kernel the package ships under `name`: `kernel` is its catalog name (default:
    /// `name`, see `pto.kernels()`), `core` `"aiv"` or `"aic"` (default: the kernel's own).
    /// Registering a name again for the other core type gives the same func id. With
    /// `library=` (the path of a C/C++ shared object in the native kernel ABI, see
    /// `docs/kernels-in-c.md`) the kernel is the object's symbol `name`, else its
    /// `kernel_entry`, on `core` (default `"aiv"`). Loading native code runs it in this
    /// process, so `library=` needs `trust_native_code=True` (else a `ConfigError` naming the
    /// opt-in, and nothing is loaded).
    #[pyo3(signature = (name, kernel = None, *, core = None, library = None, trust_native_code = false))]
    fn register_kernel(
        &self,
        py: Python<'_>,
        name: &str,
        kernel: Option<&str>,
        core: Option<&str>,
        library: Option<PathBuf>,
        trust_native_code: bool,
    ) -> PyResult<PyKernel> {
        if let Some(lib) = library {
            if !trust_native_code {
                return Err(config_error(format!(
                    "register_kernel({name:?}, library={}): loading a shared object runs its code in this \
                     process; pass trust_native_code=True to opt in (see docs/kernels-in-c.md)",
                    lib.display()
                )));
            }
            // A native kernel (C/C++ in the native kernel ABI): the shared object's symbol
            // `name`, else `kernel_entry`.
            let core = core_of(core.unwrap_or("aiv"))?;
            let path =
                lib.to_str().ok_or_else(|| config_error(format!("library path {} is not Unicode", lib.display())))?;
            let (dev, n, p) = (self.dev.clone(), name.to_string(), path.to_string());
            py.allow_threads(move || dev.register_library(&n, core, &p)).py()?;
            self.note(name, core);
            return self
                .kernel_object(name)
                .ok_or_else(|| crate::errors::kernel_error(format!("kernel {name:?} vanished")));
        }
        let catalog = kernel.unwrap_or(name);
        let (_, default_core, f, _) = KERNELS.iter().find(|k| k.0 == catalog).copied().ok_or_else(|| {
            let names: Vec<&str> = KERNELS.iter().map(|k| k.0).collect();
            crate::errors::kernel_error(format!(
                "no kernel {catalog:?} ships with the package: expected one of {}",
                names.join(", ")
            ))
        })?;
        let core = match core {
            Some(c) => core_of(c)?,
            None => default_core,
        };
        let dev = self.dev.clone();
        let n = name.to_string();
        py.allow_threads(move || dev.register(&n, core, f)).py()?;
        self.note(name, core);
        self.kernel_object(name).ok_or_else(|| crate::errors::kernel_error(format!("kernel {name:?} vanished")))
    }

    /// Run a graph built from Python and return its report.
    ///
    /// `runtime`: `"hbg"` (host-built graph) or `"trb"` (device-side tensormap-and-ring
    /// runtime); `executor`: `"auto"`, `"legacy"` or `"resident"` (the host-built graph; the
    /// device-side runtime runs on the legacy executor and refuses `"resident"`); `trace`:
    /// record the swimlane trace (`report.trace`), `trace_records=(per_core, per_thread)`;
    /// `dump`: the args dump level (`"partial"`, `"hybrid"`, `"full"`) into `dump_dir`
    /// (default: a fresh temporary directory), `dump_arena` bytes per AICPU thread;
    /// `clusters`, `aicpu_threads`, `aiv_only`, `watchdog_us`; `rings`: the device-side
    /// runtime's ring sizes (a dict, see the docs).
    #[pyo3(signature = (graph, *, runtime = "hbg", executor = "auto", trace = false, trace_records = None, dump = None, dump_dir = None, dump_arena = None, clusters = None, aicpu_threads = None, aiv_only = false, watchdog_us = None, rings = None))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        graph: PyRef<'_, PyGraph>,
        runtime: &str,
        executor: &str,
        trace: bool,
        trace_records: Option<(u32, u32)>,
        dump: Option<&str>,
        dump_dir: Option<PathBuf>,
        dump_arena: Option<u64>,
        clusters: Option<u32>,
        aicpu_threads: Option<u32>,
        aiv_only: bool,
        watchdog_us: Option<u64>,
        rings: Option<Bound<'_, PyDict>>,
    ) -> PyResult<PyRunReport> {
        let rt = parse_runtime(runtime)?;
        let exec = parse_executor(executor)?;
        let mut cfg = RunConfig::default()
            .with_runtime(rt)
            .with_executor(exec)
            .with_trace(trace)
            .with_dump(parse_dump(dump)?)
            .with_aiv_only(aiv_only);
        if let Some((c, t)) = trace_records {
            cfg = cfg.with_trace_records(c, t);
        }
        if let Some(d) = dump_dir {
            cfg = cfg.with_dump_dir(d);
        }
        if let Some(b) = dump_arena {
            cfg = cfg.with_dump_arena(b);
        }
        if let Some(c) = clusters {
            cfg = cfg.with_clusters(c);
        }
        if let Some(t) = aicpu_threads {
            cfg = cfg.with_aicpu_threads(t);
        }
        if let Some(w) = watchdog_us {
            cfg = cfg.with_watchdog_us(w);
        }
        if let Some(r) = rings {
            cfg = cfg.with_rings(parse_rings(&r)?);
        }
        if let Some(d) = graph.device()
            && d != self.dev.serial()
        {
            return Err(crate::errors::graph_error(format!(
                "the graph names kernels or tensors of device #{d}; this is device #{}",
                self.dev.serial()
            )));
        }
        let (spec, tensors) = graph.parts(py);
        drop(graph);
        let ext: Vec<_> = tensors.iter().map(|t| t.get().inner.tensor()).collect();
        let dev = self.dev.clone();
        let (report, build) = py
            .allow_threads(move || {
                let r = dev.run_graph(spec, &ext, &cfg);
                // The device tensors live (in `tensors`) until the run has fenced.
                drop(tensors);
                r
            })
            .py()?;
        let build = (rt == RuntimeKind::HostBuiltGraph).then_some(build);
        Ok(PyRunReport::new(report, self.dev.board(), rt, cache_name(self.dev.cache()), build, exec))
    }

    /// Run the built-in workload `name` (see `pto.workloads()`; what `pto run NAME` runs) on
    /// `runtime`, its golden checked in the runtime's own code. A golden mismatch raises
    /// `pto.GoldenMismatch`, a failed run its error. `executor`, `trace`, `dump` and
    /// `dump_dir` (the dump goes to `dump_dir/hbg` or `dump_dir/trb`) as for `run`.
    #[pyo3(signature = (name, *, runtime = "hbg", executor = "auto", trace = false, dump = None, dump_dir = None))]
    #[allow(clippy::too_many_arguments)]
    fn run_workload(
        &self,
        py: Python<'_>,
        name: &str,
        runtime: &str,
        executor: &str,
        trace: bool,
        dump: Option<&str>,
        dump_dir: Option<PathBuf>,
    ) -> PyResult<PyWorkloadResult> {
        if !crate::WORKLOADS.contains(&name) {
            return Err(config_error(format!(
                "unknown workload {name:?}: expected one of {}",
                crate::WORKLOADS.join(", ")
            )));
        }
        let s = WorkloadSettings {
            runtime: parse_runtime(runtime)?,
            executor: parse_executor(executor)?,
            trace,
            dump: parse_dump(dump)?,
            dump_dir,
        };
        // The workloads take the executor for their host-built-graph runs only; refuse what the
        // device-side runtime cannot do as `run` does, rather than run it on the legacy one.
        if s.runtime == RuntimeKind::TensormapRing && s.executor == Executor::Resident {
            return Err(config_error(
                "executor = resident cannot run on the device-side runtime (trb): it schedules on the AICPU \
                 (the resident executor runs host-built graphs)",
            ));
        }
        let dev = self.dev.clone();
        let n = name.to_string();
        let rt = s.runtime;
        let exec = s.executor;
        let o = py.allow_threads(move || dev.run_workload(&n, &s)).map_err(failure_to_py)?;
        let build = (rt == RuntimeKind::HostBuiltGraph).then_some(o.build);
        let report = PyRunReport::new(o.report, self.dev.board(), rt, cache_name(self.dev.cache()), build, exec);
        Ok(PyWorkloadResult { name: o.name, checked: o.checked, report: Py::new(py, report)? })
    }

    /// Close the device: later calls fail.
    fn close(&self) {
        self.dev.close()
    }

    /// Why the device is unusable, if an earlier run left it so (`None` when usable).
    fn unusable_reason(&self) -> Option<String> {
        self.dev.unusable_reason()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _t: Option<Bound<'_, PyAny>>, _v: Option<Bound<'_, PyAny>>, _tb: Option<Bound<'_, PyAny>>) {
        self.dev.close()
    }

    fn __repr__(&self) -> String {
        format!(
            "Device(board={}, cache={}, serial={})",
            self.dev.board(),
            cache_name(self.dev.cache()),
            self.dev.serial()
        )
    }
}
