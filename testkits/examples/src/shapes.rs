//! The dispatch shapes prepared on a device for the benchmark: their tensors, arguments and
//! host-built graph, reset and checked around each run.

use pto_hal::HostPlatform;
use pto_runtime::host::{Error, Program, RunConfig, RunReport};
use pto_runtime::orch::{OrchArgs, RuntimeKind};

use crate::orchestrations::ShapeKind;
use crate::outcome::{Failure, check_close};
use crate::registry::Kernels;
use crate::run::EXECUTOR;
use crate::{Device, DeviceTensor, Graph};

/// A dispatch shape prepared on a device: its tensors, its orchestration arguments and the
/// graph the host-built-graph runtime runs.
pub struct Prepared<P: HostPlatform> {
    /// The shape.
    pub kind: ShapeKind,
    /// Its `N`.
    pub n: u32,
    /// `x` (`[16]` f32).
    pub x: DeviceTensor<P>,
    /// `y` (`[N, 16]` f32).
    pub y: DeviceTensor<P>,
    /// The orchestration arguments.
    pub args: OrchArgs,
    /// The orchestration (for the device-side runtime).
    pub program: Program,
    /// The graph built on the host (for the host-built graph).
    pub graph: Graph<P>,
}

/// Build `kind` with `n` tasks (N+1 for the fanouts) for the host-built graph (its build time
/// is the graph's), with the arguments to run it on the device-side runtime too.
pub fn build_shape<P: HostPlatform>(
    dev: &Device<P>,
    k: &Kernels,
    kind: ShapeKind,
    n: u32,
) -> Result<Prepared<P>, Failure> {
    let x = dev.alloc::<f32>(&[16])?;
    let y = dev.alloc::<f32>(&[n.max(1), 16])?;
    let idx = ShapeKind::ALL.iter().position(|&s| s == kind).unwrap_or(0) as u64;
    let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).scalar(idx).scalar(n as u64);
    let graph = dev.build_program(&k.programs.shape, &args)?;
    Ok(Prepared { kind, n, x, y, args, program: k.programs.shape.clone(), graph })
}

impl<P: HostPlatform> Prepared<P> {
    /// Reset the tensors the shape updates in place.
    pub fn reset(&self) -> Result<(), Error> {
        self.x.write(&[0.0f32; 16])?;
        self.y.write(&vec![0.0f32; self.n.max(1) as usize * 16])
    }

    /// Check the result of one run against the golden.
    pub fn check(&self, report: &RunReport) -> Result<usize, String> {
        let expect_tasks = match self.kind {
            ShapeKind::Fanout | ShapeKind::DummyFanout => self.n as u64 + 1,
            _ => self.n as u64,
        };
        if report.tasks != expect_tasks {
            return Err(format!("{}: {} tasks completed, expected {expect_tasks}", self.kind.name(), report.tasks));
        }
        let x = self.x.read::<f32>().map_err(|e| e.to_string())?;
        let y = self.y.read::<f32>().map_err(|e| e.to_string())?;
        let rows = self.n as usize;
        match self.kind {
            ShapeKind::Chain => check_close("chain x[0]", &x[..1], &[self.n as f32]),
            ShapeKind::Fanout => check_close("fanout y", &y[..rows * 16], &vec![1.0; rows * 16]),
            ShapeKind::Independent => check_close("independent y", &y[..rows * 16], &vec![1.0; rows * 16]),
            ShapeKind::DummyChain | ShapeKind::DummyFanout => {
                check_close("dummy data untouched", &y, &vec![0.0; y.len()])
            }
        }
    }

    /// Reset, run on `rt` and check once.
    pub fn run_checked(&self, dev: &Device<P>, rt: RuntimeKind) -> Result<RunReport, Failure> {
        self.reset()?;
        let r = match rt {
            RuntimeKind::HostBuiltGraph => {
                dev.run_with(&self.graph, &RunConfig::default().with_executor(EXECUTOR.with(|x| x.get())))?
            }
            RuntimeKind::TensormapRing => {
                dev.run_program(&self.program, &self.args, &RunConfig::default().with_runtime(rt))?
            }
        };
        self.check(&r).map_err(Failure::Golden)?;
        Ok(r)
    }
}
