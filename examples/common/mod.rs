//! Shared by the examples, the integration tests and the benchmark: kernels, workloads and
//! their goldens. Each workload builds its graph, runs it, and checks the result against a
//! golden computed on the host.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use pto::prelude::*;

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

/// x[0] += 1 (INOUT)
pub fn k_inc0(k: &mut dyn KernelContext) {
    let v: f32 = k.get(0, &[0]);
    k.set(0, &[0], v + 1.0);
}

/// x[:] = 1 (OUT)
pub fn k_fill1(k: &mut dyn KernelContext) {
    let n = k.arg(0).elem_count() as usize;
    k.store(0, &vec![1.0f32; n]);
}

/// y += x (IN x, INOUT y)
pub fn k_accumulate(k: &mut dyn KernelContext) {
    let x = k.load::<f32>(0);
    let mut y = k.load::<f32>(1);
    for (a, b) in y.iter_mut().zip(&x) {
        *a += b;
    }
    k.store(1, &y);
}

/// y += 1 (INOUT)
pub fn k_add1(k: &mut dyn KernelContext) {
    let y: Vec<f32> = k.load::<f32>(0).into_iter().map(|v| v + 1.0).collect();
    k.store(0, &y);
}

/// AIC: C = A @ B for square tiles (args: A, B, C, D, E; the AIC uses A, B, C).
pub fn k_mix_matmul(k: &mut dyn KernelContext) {
    let a = k.load::<f32>(0);
    let b = k.load::<f32>(1);
    let n = k.arg(0).shape[0] as usize;
    let mut c = vec![0.0f32; n * n];
    for i in 0..n {
        for p in 0..n {
            let av = a[i * n + p];
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j];
            }
        }
    }
    k.store(2, &c);
}

/// AIV lane `sub_block_id` of a MIX task: its half of E = 2·D + 1 (args: A, B, C, D, E).
pub fn k_mix_vec_half(k: &mut dyn KernelContext) {
    let lane = k.sub_block_id() as usize;
    let d = k.load::<f32>(3);
    let half = d.len() / 2;
    let cols = k.arg(4).shape[1];
    let rows_half = k.arg(4).shape[0] / 2;
    for (i, v) in d[lane * half..(lane + 1) * half].iter().enumerate() {
        let r = lane as u32 * rows_half + i as u32 / cols;
        k.set(4, &[r, i as u32 % cols], 2.0 * v + 1.0);
    }
}

/// A kernel that panics (for the fault tests).
pub fn k_panic(_k: &mut dyn KernelContext) {
    panic!("deliberate kernel failure");
}

/// Register every kernel the workloads use.
pub struct Kernels {
    pub add: FuncId,
    pub mul: FuncId,
    pub add_scalar: FuncId,
    pub inc0: FuncId,
    pub fill1: FuncId,
    pub accumulate: FuncId,
    pub add1: FuncId,
    pub matmul: FuncId,
    pub vec_half: FuncId,
}

impl Kernels {
    pub fn register(dev: &Device) -> Result<Kernels, Error> {
        Ok(Kernels {
            add: dev.register_kernel("add", CoreType::Aiv, k_add)?,
            mul: dev.register_kernel("mul", CoreType::Aiv, k_mul)?,
            add_scalar: dev.register_kernel("add_scalar", CoreType::Aiv, k_add_scalar)?,
            inc0: dev.register_kernel("inc0", CoreType::Aiv, k_inc0)?,
            fill1: dev.register_kernel("fill1", CoreType::Aiv, k_fill1)?,
            accumulate: dev.register_kernel("accumulate", CoreType::Aiv, k_accumulate)?,
            add1: dev.register_kernel("add1", CoreType::Aiv, k_add1)?,
            matmul: dev.register_kernel("mix_matmul", CoreType::Aic, k_mix_matmul)?,
            vec_half: dev.register_kernel("mix_vec_half", CoreType::Aiv, k_mix_vec_half)?,
        })
    }
}

// ---------------------------------------------------------------- outcome

/// What a workload run reports.
#[derive(Debug)]
pub struct Outcome {
    pub name: String,
    pub report: RunReport,
    pub build: Duration,
    pub checked: usize,
}

impl Outcome {
    pub fn summary(&self) -> String {
        format!(
            "{:<12} board={} runtime=host-built-graph tasks={} cores={} build={:.3} ms run={:.3} ms checked={} values PASS",
            self.name,
            Selected::NAME,
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
        if (g - w).abs() > 1e-5 * w.abs().max(1.0) {
            return Err(format!("{name}: value {i} is {g}, golden {w}"));
        }
    }
    Ok(got.len())
}

/// A workload failure: the run failed, or its result differs from the golden.
#[derive(Debug)]
pub enum Failure {
    Run(Error),
    Golden(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Run(e)
    }
}

impl From<GraphError> for Failure {
    fn from(e: GraphError) -> Self {
        Failure::Run(e.into())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Run(e) => write!(f, "{e}"),
            Failure::Golden(s) => write!(f, "golden mismatch: {s}"),
        }
    }
}

// ---------------------------------------------------------------- vector

pub const VECTOR_N: u32 = 16384;

/// f = (a+b+1)(a+b+2) + (a+b) on 16384 f32: a diamond of five AIV tasks.
pub fn vector(dev: &Device, k: &Kernels) -> Result<Outcome, Failure> {
    let n = VECTOR_N;
    let a_host: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25).collect();
    let b_host: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 3.0).collect();
    let a = dev.tensor_from(&[n], &a_host)?;
    let b = dev.tensor_from(&[n], &b_host)?;
    let f = dev.alloc::<f32>(&[n])?;
    let graph = dev.build(|g| {
        let c = g.alloc_tensor(DType::F32, &[n])?;
        let d = g.alloc_tensor(DType::F32, &[n])?;
        let e = g.alloc_tensor(DType::F32, &[n])?;
        let h = g.alloc_tensor(DType::F32, &[n])?;
        g.submit(Task::aiv(k.add).input(&a.tensor()).input(&b.tensor()).output(&c))?;
        g.submit(Task::aiv(k.add_scalar).input(&c).output(&d).scalar_f32(1.0))?;
        g.submit(Task::aiv(k.add_scalar).input(&c).output(&e).scalar_f32(2.0))?;
        g.submit(Task::aiv(k.mul).input(&d).input(&e).output(&h))?;
        g.submit(Task::aiv(k.add).input(&h).input(&c).output(&f.tensor()))?;
        Ok(())
    })?;
    let report = dev.run(&graph)?;
    let golden: Vec<f32> = a_host.iter().zip(&b_host).map(|(a, b)| (a + b + 1.0) * (a + b + 2.0) + (a + b)).collect();
    let checked = check_close("vector f", &f.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "vector".into(), report, build: graph.build_time(), checked })
}

// ---------------------------------------------------------------- chain513

pub const CHAIN_N: u32 = 4096;

/// One add, then 512 `+1` tasks each reading the previous output: out = a + b + 512.
pub fn chain513(dev: &Device, k: &Kernels) -> Result<Outcome, Failure> {
    let n = CHAIN_N;
    let a_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b_host: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let a = dev.tensor_from(&[n], &a_host)?;
    let b = dev.tensor_from(&[n], &b_host)?;
    let out = dev.alloc::<f32>(&[n])?;
    let graph = dev.build(|g| {
        let mut prev = g.alloc_tensor(DType::F32, &[n])?;
        g.submit(Task::aiv(k.add).input(&a.tensor()).input(&b.tensor()).output(&prev))?;
        for i in 0..512 {
            let next = if i == 511 { out.tensor() } else { g.alloc_tensor(DType::F32, &[n])? };
            g.submit(Task::aiv(k.add_scalar).input(&prev).output(&next).scalar_f32(1.0))?;
            prev = next;
        }
        Ok(())
    })?;
    let report = dev.run(&graph)?;
    let golden: Vec<f32> = a_host.iter().zip(&b_host).map(|(a, b)| a + b + 512.0).collect();
    let checked = check_close("chain513 out", &out.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "chain513".into(), report, build: graph.build_time(), checked })
}

// ---------------------------------------------------------------- mix

pub const MIX_TILE: u32 = 32;
pub const MIX_TILES: u32 = 8;

/// MIX (1C2V) tasks: per tile, the AIC computes C = A·B while the two AIV lanes each compute
/// half of E = 2·D + 1; then an AIV task adds F = C + E.
pub fn mix(dev: &Device, k: &Kernels) -> Result<Outcome, Failure> {
    let t = MIX_TILE;
    let tiles = MIX_TILES;
    let e2 = (t * t) as usize;
    let host =
        |seed: u32| -> Vec<f32> { (0..tiles * t * t).map(|i| ((i * 7 + seed) % 11) as f32 * 0.125 - 0.5).collect() };
    let (a_h, b_h, d_h) = (host(1), host(5), host(9));
    let a = dev.tensor_from(&[tiles * t, t], &a_h)?;
    let b = dev.tensor_from(&[tiles * t, t], &b_h)?;
    let d = dev.tensor_from(&[tiles * t, t], &d_h)?;
    let f = dev.alloc::<f32>(&[tiles * t, t])?;
    let graph = dev.build(|g| {
        for i in 0..tiles {
            let tile = |x: &DeviceTensor| x.tensor().view(&[i * t, 0], &[t, t]);
            let c = g.alloc_tensor(DType::F32, &[t, t])?;
            let e = g.alloc_tensor(DType::F32, &[t, t])?;
            g.submit(
                Task::mix(k.matmul, k.vec_half)
                    .input(&tile(&a)?)
                    .input(&tile(&b)?)
                    .output(&c)
                    .input(&tile(&d)?)
                    .output(&e),
            )?;
            g.submit(Task::aiv(k.add).input(&c).input(&e).output(&tile(&f)?))?;
        }
        Ok(())
    })?;
    let report = dev.run(&graph)?;
    let mut golden = vec![0.0f32; (tiles * t * t) as usize];
    let n = t as usize;
    for i in 0..tiles as usize {
        let base = i * e2;
        for r in 0..n {
            for c in 0..n {
                let mut s = 0.0f32;
                for p in 0..n {
                    s += a_h[base + r * n + p] * b_h[base + p * n + c];
                }
                golden[base + r * n + c] = s + 2.0 * d_h[base + r * n + c] + 1.0;
            }
        }
    }
    let checked = check_close("mix f", &f.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "mix".into(), report, build: graph.build_time(), checked })
}

// ---------------------------------------------------------------- dispatch shapes

/// The benchmark shapes of `shared/bench/anchor.md`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ShapeKind {
    Chain,
    Fanout,
    Independent,
    DummyChain,
    DummyFanout,
}

impl ShapeKind {
    pub const ALL: [ShapeKind; 5] =
        [ShapeKind::Chain, ShapeKind::Fanout, ShapeKind::Independent, ShapeKind::DummyChain, ShapeKind::DummyFanout];
    pub fn name(self) -> &'static str {
        match self {
            ShapeKind::Chain => "chain",
            ShapeKind::Fanout => "fanout",
            ShapeKind::Independent => "independent",
            ShapeKind::DummyChain => "dummy_chain",
            ShapeKind::DummyFanout => "dummy_fanout",
        }
    }
}

/// A dispatch shape prepared on a device: its tensors and its built graph.
pub struct Prepared {
    pub kind: ShapeKind,
    pub n: u32,
    pub x: DeviceTensor,
    pub y: DeviceTensor,
    pub graph: Graph,
}

/// Build `kind` with `n` tasks (N+1 for the fanouts). Returns the graph and its build time.
pub fn build_shape(dev: &Device, k: &Kernels, kind: ShapeKind, n: u32) -> Result<Prepared, Failure> {
    let x = dev.alloc::<f32>(&[16])?;
    let y = dev.alloc::<f32>(&[n.max(1), 16])?;
    let graph = dev.build(|g| {
        let xt = x.tensor();
        let row = |i: u32| y.tensor().view(&[i, 0], &[1, 16]);
        match kind {
            ShapeKind::Chain => {
                for _ in 0..n {
                    g.submit(Task::aiv(k.inc0).inout(&xt))?;
                }
            }
            ShapeKind::Fanout => {
                g.submit(Task::aiv(k.fill1).output(&xt))?;
                for i in 0..n {
                    g.submit(Task::aiv(k.accumulate).input(&xt).inout(&row(i)?))?;
                }
            }
            ShapeKind::Independent => {
                for i in 0..n {
                    g.submit(Task::aiv(k.add1).inout(&row(i)?))?;
                }
            }
            ShapeKind::DummyChain => {
                for _ in 0..n {
                    g.submit(Task::dummy().inout(&xt))?;
                }
            }
            ShapeKind::DummyFanout => {
                g.submit(Task::dummy().output(&xt))?;
                for i in 0..n {
                    g.submit(Task::dummy().input(&xt).inout(&row(i)?))?;
                }
            }
        }
        Ok(())
    })?;
    Ok(Prepared { kind, n, x, y, graph })
}

impl Prepared {
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

    /// Reset, run and check once.
    pub fn run_checked(&self, dev: &Device) -> Result<RunReport, Failure> {
        self.reset()?;
        let r = dev.run(&self.graph)?;
        self.check(&r).map_err(Failure::Golden)?;
        Ok(r)
    }
}

/// The `main` of a single-workload example: open the board, run `workload`, print its summary
/// (or the failure) and exit accordingly.
pub fn example_main(name: &str, workload: fn(&Device, &Kernels) -> Result<Outcome, Failure>) -> std::process::ExitCode {
    let (dev, k) = match setup() {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{name}: cannot open the device: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match workload(&dev, &k) {
        Ok(o) => {
            println!("{}", o.summary());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name} FAIL: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Open the selected board and register the kernels.
pub fn setup() -> Result<(Device, Kernels), Error> {
    let dev = pto::open()?;
    let k = Kernels::register(&dev)?;
    Ok((dev, k))
}

/// Time `f`.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let s = Instant::now();
    let v = f();
    (v, s.elapsed())
}
