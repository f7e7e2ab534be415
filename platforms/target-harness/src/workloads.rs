//! The `vector` and `chain513` workloads on an [`OnTarget`] device, on both runtimes, checked
//! against goldens computed on the host.
//!
//! The kernels and orchestrations are those of the repository's examples, written again here:
//! the platform crates' tests depend on neither the examples nor the `pto` facade.

use std::time::{Duration, Instant};

use pto_hal::{CoreType, KernelContext, Topology};
use pto_runtime::graph::{FuncId, Task};
use pto_runtime::host::{Device, Error, Program, RunConfig, RunReport, Timeouts};
use pto_runtime::kernel::KernelIo;
use pto_runtime::orch::{Orch, OrchArgs, OrchFail, RuntimeKind};

use crate::platform::{Chip, Config, OnTarget, TargetDevice};

/// The runtime's host device over an on-target device of chip `C`.
pub type TargetRuntime<C> = Device<OnTarget<C>>;

/// A small device: few threads, so an emulated run on a small machine finishes quickly.
pub fn small_topology(aicpu_threads: u32) -> Topology {
    Topology { clusters: 2, aicpu_threads }
}

/// Budgets for an emulated device that shares the machine with other work: generous, so a
/// slow scheduler is not mistaken for a hang (a real hang still ends in a watchdog error).
pub fn emulated_timeouts() -> Timeouts {
    Timeouts::new(60_000_000, 20_000_000, 180_000_000)
}

/// Open an on-target device of chip `C` with `topology` and 64 MiB of GM, and hand it to the
/// runtime's host the way the simulator is: `Device::new_in_process` installs the runtime's
/// device programs and loads them by name.
pub fn open<C: Chip>(topology: Topology) -> Result<TargetRuntime<C>, Error> {
    let dev = TargetDevice::<C>::open(Config { topology, gm_bytes: 64 << 20 });
    Device::new_in_process(dev, emulated_timeouts())
}

// ---------------------------------------------------------------- kernels

/// out = a + b
pub fn k_add(k: &mut dyn KernelContext) {
    let a = k.load::<f32>(0);
    let b = k.load::<f32>(1);
    k.store(2, &a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<f32>>());
}

/// out = a * b
pub fn k_mul(k: &mut dyn KernelContext) {
    let a = k.load::<f32>(0);
    let b = k.load::<f32>(1);
    k.store(2, &a.iter().zip(&b).map(|(x, y)| x * y).collect::<Vec<f32>>());
}

/// out = a + scalar0
pub fn k_add_scalar(k: &mut dyn KernelContext) {
    let s = k.scalar_f32(0);
    let a = k.load::<f32>(0);
    k.store(1, &a.iter().map(|x| x + s).collect::<Vec<f32>>());
}

/// Func ids, fixed by registration order (checked by [`Workloads::register`]).
const ADD: FuncId = FuncId(0);
const MUL: FuncId = FuncId(1);
const ADD_SCALAR: FuncId = FuncId(2);

// ---------------------------------------------------------------- orchestrations

/// f = (a+b+1)(a+b+2) + (a+b): a diamond of five AIV tasks. Args: a, b, f.
pub fn orch_vector(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, out) = (args.t(0)?, args.t(1)?, args.t(2)?);
    let n = a.elem_count() as u32;
    let c = o.alloc::<f32>(&[n])?;
    let d = o.alloc::<f32>(&[n])?;
    let e = o.alloc::<f32>(&[n])?;
    let h = o.alloc::<f32>(&[n])?;
    o.submit(Task::aiv(ADD).input(&a).input(&b).output(&c))?;
    o.submit(Task::aiv(ADD_SCALAR).input(&c).output(&d).scalar_f32(1.0))?;
    o.submit(Task::aiv(ADD_SCALAR).input(&c).output(&e).scalar_f32(2.0))?;
    o.submit(Task::aiv(MUL).input(&d).input(&e).output(&h))?;
    o.submit(Task::aiv(ADD).input(&h).input(&c).output(&out))?;
    Ok(())
}

/// One add, then 512 `+1` tasks each reading the previous output (ping-ponging between two
/// scope tensors). Args: a, b, out.
pub fn orch_chain513(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, out) = (args.t(0)?, args.t(1)?, args.t(2)?);
    let n = a.elem_count() as u32;
    let ping = [o.alloc::<f32>(&[n])?, o.alloc::<f32>(&[n])?];
    o.submit(Task::aiv(ADD).input(&a).input(&b).output(&ping[0]))?;
    for i in 0..511 {
        let (src, dst) = (&ping[i % 2], &ping[(i + 1) % 2]);
        o.submit(Task::aiv(ADD_SCALAR).input(src).output(dst).scalar_f32(1.0))?;
    }
    o.submit(Task::aiv(ADD_SCALAR).input(&ping[1]).output(&out).scalar_f32(1.0))?;
    Ok(())
}

// ---------------------------------------------------------------- workloads

/// The registered kernels and programs of the workloads on one device.
pub struct Workloads {
    vector: Program,
    chain513: Program,
}

/// What a workload run reports.
#[derive(Debug)]
pub struct Outcome {
    /// Workload name.
    pub name: &'static str,
    /// The runtime it ran on.
    pub runtime: RuntimeKind,
    /// The run's report.
    pub report: RunReport,
    /// Host graph build time (host-built graph only).
    pub build: Duration,
    /// Values compared with the golden.
    pub checked: usize,
}

impl core::fmt::Display for Outcome {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:<9} runtime={} tasks={} cores={} build={:.3} ms run={:.3} ms checked={} values PASS",
            self.name,
            self.runtime.name(),
            self.report.tasks,
            self.report.cores,
            self.build.as_secs_f64() * 1e3,
            self.report.wall.as_secs_f64() * 1e3,
            self.checked
        )
    }
}

fn check_close(name: &str, got: &[f32], want: &[f32]) -> Result<usize, String> {
    if got.len() != want.len() {
        return Err(format!("{name}: {} values, golden has {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || (g - w).abs() > 1e-5 * w.abs().max(1.0) {
            return Err(format!("{name}: value {i} is {g}, golden {w}"));
        }
    }
    Ok(got.len())
}

/// Elements of the `vector` workload.
pub const VECTOR_N: u32 = 16384;
/// Elements of the `chain513` workload.
pub const CHAIN_N: u32 = 4096;

impl Workloads {
    /// Register the kernels (ids 0, 1, 2 in this order) and the two orchestrations.
    pub fn register<C: Chip>(dev: &TargetRuntime<C>) -> Result<Workloads, String> {
        let ids = [
            dev.register_kernel("add", CoreType::Aiv, k_add),
            dev.register_kernel("mul", CoreType::Aiv, k_mul),
            dev.register_kernel("add_scalar", CoreType::Aiv, k_add_scalar),
        ]
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
        if ids != [ADD, MUL, ADD_SCALAR] {
            return Err(format!(
                "kernels registered as {ids:?}, the orchestrations expect {:?}",
                [ADD, MUL, ADD_SCALAR]
            ));
        }
        Ok(Workloads {
            vector: dev.register_orchestration("vector", orch_vector).map_err(|e| e.to_string())?,
            chain513: dev.register_orchestration("chain513", orch_chain513).map_err(|e| e.to_string())?,
        })
    }

    fn run<C: Chip>(
        dev: &TargetRuntime<C>,
        program: &Program,
        args: &OrchArgs,
        rt: RuntimeKind,
    ) -> Result<(RunReport, Duration), Error> {
        let cfg = RunConfig::default().with_runtime(rt);
        match rt {
            RuntimeKind::HostBuiltGraph => {
                let g = dev.build_program(program, args)?;
                let r = dev.run_with(&g, &cfg)?;
                Ok((r, g.build_time()))
            }
            RuntimeKind::TensormapRing => Ok((dev.run_program(program, args, &cfg)?, Duration::ZERO)),
        }
    }

    /// `vector` on `rt`: f = (a+b+1)(a+b+2) + (a+b) on 16384 f32.
    pub fn vector<C: Chip>(&self, dev: &TargetRuntime<C>, rt: RuntimeKind) -> Result<Outcome, String> {
        let n = VECTOR_N;
        let a_host: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25).collect();
        let b_host: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 3.0).collect();
        let run = || -> Result<(RunReport, Duration, Vec<f32>), Error> {
            let a = dev.tensor_from(&[n], &a_host)?;
            let b = dev.tensor_from(&[n], &b_host)?;
            let f = dev.alloc::<f32>(&[n])?;
            let args = OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(f.tensor());
            let (report, build) = Self::run(dev, &self.vector, &args, rt)?;
            Ok((report, build, f.read::<f32>()?))
        };
        let (report, build, got) = run().map_err(|e| format!("vector on {}: {e}", rt.name()))?;
        let golden: Vec<f32> =
            a_host.iter().zip(&b_host).map(|(a, b)| (a + b + 1.0) * (a + b + 2.0) + (a + b)).collect();
        let checked = check_close("vector f", &got, &golden)?;
        Ok(Outcome { name: "vector", runtime: rt, report, build, checked })
    }

    /// `chain513` on `rt`: out = a + b + 512.
    pub fn chain513<C: Chip>(&self, dev: &TargetRuntime<C>, rt: RuntimeKind) -> Result<Outcome, String> {
        let n = CHAIN_N;
        let a_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b_host: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
        let run = || -> Result<(RunReport, Duration, Vec<f32>), Error> {
            let a = dev.tensor_from(&[n], &a_host)?;
            let b = dev.tensor_from(&[n], &b_host)?;
            let out = dev.alloc::<f32>(&[n])?;
            let args = OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(out.tensor());
            let (report, build) = Self::run(dev, &self.chain513, &args, rt)?;
            Ok((report, build, out.read::<f32>()?))
        };
        let (report, build, got) = run().map_err(|e| format!("chain513 on {}: {e}", rt.name()))?;
        let golden: Vec<f32> = a_host.iter().zip(&b_host).map(|(a, b)| a + b + 512.0).collect();
        let checked = check_close("chain513 out", &got, &golden)?;
        Ok(Outcome { name: "chain513", runtime: rt, report, build, checked })
    }
}

/// Open a device of chip `C` with `topology`, run `vector` and `chain513` on both runtimes,
/// print a line per run, and panic with the first failure (run error or golden mismatch).
pub fn run_all<C: Chip>(topology: Topology) {
    let start = Instant::now();
    let dev = open::<C>(topology).unwrap_or_else(|e| panic!("{}: open: {e}", C::NAME));
    let w = Workloads::register(&dev).unwrap_or_else(|e| panic!("{}: register: {e}", C::NAME));
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        for (outcome, tasks) in [(w.vector(&dev, rt), 5), (w.chain513(&dev, rt), 513)] {
            match outcome {
                Ok(o) => {
                    assert_eq!(o.report.tasks, tasks, "{}: {} on {} completed every task", C::NAME, o.name, rt.name());
                    assert_eq!(o.report.cores, u64::from(topology.workers()), "{}: every core took part", C::NAME);
                    assert_eq!(o.report.released, u64::from(topology.workers()), "{}: every core released", C::NAME);
                    println!("{} {o}", C::NAME);
                }
                Err(e) => panic!("{} on target: {e}", C::NAME),
            }
        }
    }
    println!("{}: both workloads on both runtimes in {:?}", C::NAME, start.elapsed());
}
