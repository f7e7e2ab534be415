//! The simulated boards behind one object-safe interface: every board is compiled into the
//! extension (`pto-boards`' platform features) and chosen at run time by name, so the Python
//! classes hold an `Arc<dyn DynDevice>` and `Arc<dyn DynTensor>` whatever the board.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pto::board::{Board, SimA2a3, SimA5, SimMini};
use pto::dump::DumpLevel;
use pto::hal::check::Checks;
use pto::hal::{CoreType, HostPlatform, KernelFn, Platform, Topology};
use pto::half::{bf16, f16};
use pto::runtime::graph::{DType, FuncId, Tensor};
use pto::runtime::orch::{OrchArgs, RuntimeKind};
use pto::{ConfigError, Error, Executor, Program, RunConfig, RunReport};
use pto_sim::{AicpuWritePolicy, CacheModel};
use pto_testkit::{Failure, Kernels, Outcome};

use crate::spec;

/// The simulated boards, by the name `pto run --board` uses.
pub(crate) const BOARDS: [&str; 3] = [SimA2a3::NAME, SimA5::NAME, SimMini::NAME];

/// Host data of one tensor: a vector of its element type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum HostData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U32(Vec<u32>),
    U8(Vec<u8>),
    I8(Vec<i8>),
    F64(Vec<f64>),
    U64(Vec<u64>),
    I16(Vec<i16>),
    U16(Vec<u16>),
}

/// Calls `$body` with `$v` bound to the vector inside a [`HostData`], whatever its type.
macro_rules! with_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            HostData::F32($v) => $body,
            HostData::F16($v) => $body,
            HostData::BF16($v) => $body,
            HostData::I32($v) => $body,
            HostData::I64($v) => $body,
            HostData::U32($v) => $body,
            HostData::U8($v) => $body,
            HostData::I8($v) => $body,
            HostData::F64($v) => $body,
            HostData::U64($v) => $body,
            HostData::I16($v) => $body,
            HostData::U16($v) => $body,
        }
    };
}
pub(crate) use with_data;

/// A device tensor of any board.
pub(crate) trait DynTensor: Send + Sync {
    /// The whole tensor, for task arguments.
    fn tensor(&self) -> Tensor;
    /// The device address of the first element.
    fn addr(&self) -> u64;
    /// Copy `data` (every element, of the tensor's element type) to the device.
    fn write(&self, data: &HostData) -> Result<(), Error>;
    /// Copy every element back.
    fn read(&self) -> Result<HostData, Error>;
}

impl<P: HostPlatform> DynTensor for pto::runtime::host::DeviceTensor<P>
where
    pto::runtime::host::DeviceTensor<P>: Send + Sync,
{
    fn tensor(&self) -> Tensor {
        pto::runtime::host::DeviceTensor::tensor(self)
    }

    fn addr(&self) -> u64 {
        pto::runtime::host::DeviceTensor::addr(self).0
    }

    fn write(&self, data: &HostData) -> Result<(), Error> {
        with_data!(data, v => pto::runtime::host::DeviceTensor::write(self, v))
    }

    fn read(&self) -> Result<HostData, Error> {
        let t = pto::runtime::host::DeviceTensor::tensor(self);
        Ok(match t.dtype() {
            DType::F32 => HostData::F32(self.read()?),
            DType::F16 => HostData::F16(self.read()?),
            DType::BF16 => HostData::BF16(self.read()?),
            DType::I32 => HostData::I32(self.read()?),
            DType::I64 => HostData::I64(self.read()?),
            DType::U32 => HostData::U32(self.read()?),
            DType::U8 => HostData::U8(self.read()?),
            DType::I8 => HostData::I8(self.read()?),
            DType::F64 => HostData::F64(self.read()?),
            DType::U64 => HostData::U64(self.read()?),
            DType::I16 => HostData::I16(self.read()?),
            DType::U16 => HostData::U16(self.read()?),
        })
    }
}

/// The simulator's switches, set on an opened device between runs.
#[derive(Clone, Debug, Default)]
pub(crate) struct SimSettings {
    /// The cache model.
    pub(crate) cache: Option<CacheModel>,
    /// The AICPU write policy of the faithful model.
    pub(crate) aicpu_writes: Option<AicpuWritePolicy>,
    /// Memory protection of kernel accesses.
    pub(crate) protect: Option<bool>,
    /// The schedule-independent checks (racecheck, initcheck).
    pub(crate) check: Option<Checks>,
}

/// What a workload run is asked for (the workloads build their own run configuration; these
/// are the settings they take from their caller).
#[derive(Clone, Debug)]
pub(crate) struct WorkloadSettings {
    /// The runtime.
    pub(crate) runtime: RuntimeKind,
    /// The executor of the host-built graph's runs.
    pub(crate) executor: Executor,
    /// Record a trace.
    pub(crate) trace: bool,
    /// Record the args dump at this level.
    pub(crate) dump: Option<DumpLevel>,
    /// Where the dump writes (into `DIR/hbg` or `DIR/trb`).
    pub(crate) dump_dir: Option<PathBuf>,
}

/// An opened device of any simulated board, with the examples' kernels and programs registered.
pub(crate) trait DynDevice: Send + Sync {
    /// The board's name.
    fn board(&self) -> &'static str;
    /// The device's topology.
    fn topology(&self) -> Topology;
    /// The device's serial (every tensor it allocates names it).
    fn serial(&self) -> u64;
    /// Allocate a zeroed tensor.
    fn alloc(&self, dtype: DType, shape: &[u32]) -> Result<Arc<dyn DynTensor>, Error>;
    /// The func id registered under `name`.
    fn func(&self, name: &str) -> Option<FuncId>;
    /// Register `kernel` under `name` for `core`.
    fn register(&self, name: &str, core: CoreType, kernel: KernelFn) -> Result<FuncId, Error>;
    /// Register the native kernel `name` (C/C++ in the native kernel ABI) from the host shared
    /// object at `path`, for `core`.
    fn register_library(&self, name: &str, core: CoreType, path: &str) -> Result<FuncId, Error>;
    /// Run the built-in workload `name` (one of [`pto_testkit::examples`]), golden checked.
    fn run_workload(&self, name: &str, s: &WorkloadSettings) -> Result<Outcome, Failure>;
    /// Run a graph built from Python: `ext` are its device tensors (in the order the graph
    /// numbered them). Returns the report and the host graph build time.
    fn run_graph(&self, spec: Arc<spec::Spec>, ext: &[Tensor], cfg: &RunConfig)
    -> Result<(RunReport, Duration), Error>;
    /// Apply the simulator's switches.
    fn configure(&self, s: &SimSettings) -> Result<(), String>;
    /// The cache model in effect.
    fn cache(&self) -> CacheModel;
    /// The AICPU write policy in effect.
    fn aicpu_writes(&self) -> AicpuWritePolicy;
    /// Whether memory protection is on.
    fn protection(&self) -> bool;
    /// Close the device.
    fn close(&self);
    /// Why the device is unusable, if an earlier run left it so.
    fn unusable_reason(&self) -> Option<String>;
}

/// What the extension needs of a simulated device beyond the runtime (as `pto run` does).
pub(crate) trait SimControl {
    fn set_cache(&self, m: CacheModel) -> Result<(), String>;
    fn cache(&self) -> CacheModel;
    fn set_writes(&self, p: AicpuWritePolicy) -> Result<(), String>;
    fn writes(&self) -> AicpuWritePolicy;
    fn set_protect(&self, on: bool) -> Result<(), String>;
    fn protect(&self) -> bool;
    fn set_checks(&self, c: Checks) -> Result<(), String>;
}

impl<C: pto::hal::Contract> SimControl for pto_sim::SimDevice<C> {
    fn set_cache(&self, m: CacheModel) -> Result<(), String> {
        self.set_cache_model(m).map_err(|e| e.to_string())
    }
    fn cache(&self) -> CacheModel {
        self.cache_model()
    }
    fn set_writes(&self, p: AicpuWritePolicy) -> Result<(), String> {
        self.set_aicpu_writes(p).map(|_| ()).map_err(|e| e.to_string())
    }
    fn writes(&self) -> AicpuWritePolicy {
        self.aicpu_writes()
    }
    fn set_protect(&self, on: bool) -> Result<(), String> {
        self.set_protection(on).map_err(|e| e.to_string())
    }
    fn protect(&self) -> bool {
        self.protection()
    }
    fn set_checks(&self, c: Checks) -> Result<(), String> {
        pto_sim::SimDevice::set_checks(self, c).map_err(|e| e.to_string())
    }
}

/// An opened simulated board `B`.
struct SimBoard<B: Board> {
    dev: pto_testkit::Device<B::Platform>,
    kernels: Kernels,
    /// The orchestration that replays a graph built from Python ([`spec::orch_python`]).
    program: Program,
}

impl<B: Board> DynDevice for SimBoard<B>
where
    B::Platform: Platform,
    <B::Platform as HostPlatform>::Device: SimControl,
    pto_testkit::Device<B::Platform>: Send + Sync,
    pto::runtime::host::DeviceTensor<B::Platform>: Send + Sync,
    Kernels: Send + Sync,
{
    fn board(&self) -> &'static str {
        B::NAME
    }

    fn topology(&self) -> Topology {
        self.dev.topology()
    }

    fn serial(&self) -> u64 {
        self.dev.serial()
    }

    fn alloc(&self, dtype: DType, shape: &[u32]) -> Result<Arc<dyn DynTensor>, Error> {
        Ok(Arc::new(self.dev.alloc_dtype(dtype, shape)?))
    }

    fn func(&self, name: &str) -> Option<FuncId> {
        self.dev.func(name)
    }

    fn register(&self, name: &str, core: CoreType, kernel: KernelFn) -> Result<FuncId, Error> {
        self.dev.register_kernel(name, core, kernel)
    }

    fn register_library(&self, name: &str, core: CoreType, path: &str) -> Result<FuncId, Error> {
        let source = pto::hal::KernelSource { name, core, function: None, binary: Some(path) };
        // SAFETY: reached only from `register_kernel(..., library=path, trust_native_code=True)`:
        // the Python caller opted in, promising `path` is a kernel object built with
        // include/pto_kernel.h that touches only its views (the documented contract of
        // `Device::register_kernel_source`); the loader still refuses one without the ABI marker.
        unsafe { self.dev.register_kernel_source(&source) }
    }

    fn run_workload(&self, name: &str, s: &WorkloadSettings) -> Result<Outcome, Failure> {
        let (_, w) = pto_testkit::examples::<B::Platform>()
            .into_iter()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| Failure::Run(ConfigError::Unknown { what: "workload", name: name.to_string() }.into()))?;
        pto_testkit::dumped(s.dump, s.dump_dir.clone(), || {
            pto_testkit::executed(s.executor, || {
                pto_testkit::traced(s.trace, || w(&self.dev, &self.kernels, s.runtime))
            })
        })
    }

    fn run_graph(
        &self,
        spec: Arc<spec::Spec>,
        ext: &[Tensor],
        cfg: &RunConfig,
    ) -> Result<(RunReport, Duration), Error> {
        let entry = spec::Registered::new(spec);
        let args = ext.iter().fold(OrchArgs::new(), |a, t| a.tensor(*t)).scalar(entry.id());
        pto_testkit::run_on(&self.dev, &self.program, &args, cfg.runtime, cfg)
    }

    fn configure(&self, s: &SimSettings) -> Result<(), String> {
        let d = self.dev.platform();
        if let Some(m) = s.cache {
            d.set_cache(m)?;
        }
        if let Some(p) = s.aicpu_writes {
            d.set_writes(p)?;
        }
        if let Some(on) = s.protect {
            d.set_protect(on)?;
        }
        if let Some(c) = s.check {
            d.set_checks(c)?;
        }
        Ok(())
    }

    fn cache(&self) -> CacheModel {
        self.dev.platform().cache()
    }

    fn aicpu_writes(&self) -> AicpuWritePolicy {
        self.dev.platform().writes()
    }

    fn protection(&self) -> bool {
        self.dev.platform().protect()
    }

    fn close(&self) {
        self.dev.close()
    }

    fn unusable_reason(&self) -> Option<String> {
        self.dev.unusable_reason()
    }
}

/// Open board `B`, apply `settings`, register the examples' kernels and programs and the
/// orchestration of graphs built from Python.
fn open_sim<B: Board>(settings: &SimSettings) -> Result<Arc<dyn DynDevice>, String>
where
    SimBoard<B>: DynDevice + 'static,
    B::Platform: Platform,
{
    let dev = pto::open_board::<B>().map_err(|e| format!("cannot open board {}: {e}", B::NAME))?;
    let board = SimBoard::<B> {
        kernels: Kernels::register(&dev).map_err(|e| format!("cannot register the examples' kernels: {e}"))?,
        program: dev
            .register_orchestration(spec::PROGRAM, spec::orch_python)
            .map_err(|e| format!("cannot register the graph program: {e}"))?,
        dev,
    };
    board.configure(settings)?;
    Ok(Arc::new(board))
}

/// Open the simulated board `name` (one of [`BOARDS`]); `None` for an unknown name.
pub(crate) fn open(name: &str, settings: &SimSettings) -> Option<Result<Arc<dyn DynDevice>, String>> {
    Some(match name {
        n if n == SimA2a3::NAME => open_sim::<SimA2a3>(settings),
        n if n == SimA5::NAME => open_sim::<SimA5>(settings),
        n if n == SimMini::NAME => open_sim::<SimMini>(settings),
        _ => return None,
    })
}

/// A cache model as `PTO_SIM_CACHE` and `pto run --cache` spell it (`coherent`, `faithful:SEED`).
pub(crate) fn cache_name(m: CacheModel) -> String {
    match m {
        CacheModel::Coherent => "coherent".into(),
        CacheModel::Faithful { seed, .. } => format!("faithful:{seed}"),
    }
}

/// Parse a cache model spelt as `PTO_SIM_CACHE` does: `coherent`, `faithful` or
/// `faithful:SEED`, optionally followed by `:through` or `:back` (the AICPU write policy).
pub(crate) fn parse_cache(s: &str) -> Result<(CacheModel, Option<AicpuWritePolicy>), String> {
    CacheModel::parse_spec(s).ok_or_else(|| format!("cache model {s:?}: expected {}", CacheModel::SYNTAX))
}
