//! `pto-testkit`: shared by the examples, the integration tests and the benchmark of `pto` —
//! kernels, orchestrations, workloads and their goldens. Each orchestration is written once and
//! runs on both runtimes (host-built graph and device-side tensormap-and-ringbuffer); each
//! workload checks the result against a golden computed on the host.
//!
//! The kit does not depend on the `pto` facade (it is one of its dev-dependencies): it is
//! generic over the platform, and the caller opens the board and passes the device (or the
//! opener) in:
//!
//! ```ignore
//! let (dev, k) = pto_testkit::setup(pto::open)?; // the selected board, kernels registered
//! let outcome = pto_testkit::vector(&dev, &k, RuntimeKind::TensormapRing)?;
//! println!("{}", outcome.summary(<pto::board::Selected as Board>::NAME));
//! ```

pub mod attention;

use std::time::{Duration, Instant};

use pto_hal::{CoreType, HostPlatform, KernelContext, KernelContextExt};
use pto_runtime::dump::DumpLevel;
use pto_runtime::graph::{DType, FuncId, GraphError, Task, Tensor};
use pto_runtime::host::dump::{Dump, Stage};
use pto_runtime::host::{Error, Executor, Program, RingConfig, RunConfig, RunReport};
use pto_runtime::kernel::KernelIo;
use pto_runtime::orch::{Orch, OrchArgs, OrchFail, RuntimeKind};

/// A device of platform `P` (`pto::Device` is `Device<pto::SelectedPlatform>`).
pub type Device<P> = pto_runtime::host::Device<P>;
/// A device tensor of platform `P`.
pub type DeviceTensor<P> = pto_runtime::host::DeviceTensor<P>;
/// A built graph of platform `P`.
pub type Graph<P> = pto_runtime::host::Graph<P>;

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

/// `x[0] += 1` (INOUT)
pub fn k_inc0(k: &mut dyn KernelContext) {
    let v: f32 = k.get(0, &[0]);
    k.set(0, &[0], v + 1.0);
}

/// `x[:] = 1` (OUT)
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

/// A chain of `n` AIV tasks that each add 1 to one 16-float row (`[1, 16]`, zero at first):
/// each task consumes its predecessor's output. The kernel is the device's `add1` func,
/// registered here if it is not yet.
pub fn add1_chain<P: HostPlatform>(dev: &Device<P>, n: u32) -> Result<(DeviceTensor<P>, Graph<P>), Error> {
    let f = match dev.func("add1") {
        Some(f) => f,
        None => dev.register_kernel("add1", CoreType::Aiv, k_add1)?,
    };
    let y = dev.alloc::<f32>(&[1, 16])?;
    let g = dev.build(|g| {
        for _ in 0..n {
            g.submit(Task::aiv(f).inout(&y.tensor()))?;
        }
        Ok(())
    })?;
    Ok((y, g))
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

/// The func ids of the kernels, fixed by registration order (checked by [`Kernels::register`]),
/// so orchestrations can name them as constants.
pub mod f {
    use pto_runtime::graph::FuncId;
    /// [`super::k_add`]
    pub const ADD: FuncId = FuncId(0);
    /// [`super::k_mul`]
    pub const MUL: FuncId = FuncId(1);
    /// [`super::k_add_scalar`]
    pub const ADD_SCALAR: FuncId = FuncId(2);
    /// [`super::k_inc0`]
    pub const INC0: FuncId = FuncId(3);
    /// [`super::k_fill1`]
    pub const FILL1: FuncId = FuncId(4);
    /// [`super::k_accumulate`]
    pub const ACCUMULATE: FuncId = FuncId(5);
    /// [`super::k_add1`]
    pub const ADD1: FuncId = FuncId(6);
    /// [`super::k_mix_matmul`]
    pub const MATMUL: FuncId = FuncId(7);
    /// [`super::k_mix_vec_half`]
    pub const VEC_HALF: FuncId = FuncId(8);
}

/// Every kernel and orchestration the workloads use, registered on one device.
pub struct Kernels {
    /// [`k_add`]
    pub add: FuncId,
    /// [`k_mul`]
    pub mul: FuncId,
    /// [`k_add_scalar`]
    pub add_scalar: FuncId,
    /// [`k_inc0`]
    pub inc0: FuncId,
    /// [`k_fill1`]
    pub fill1: FuncId,
    /// [`k_accumulate`]
    pub accumulate: FuncId,
    /// [`k_add1`]
    pub add1: FuncId,
    /// [`k_mix_matmul`] (AIC half of the MIX task).
    pub matmul: FuncId,
    /// [`k_mix_vec_half`] (AIV lanes of the MIX task).
    pub vec_half: FuncId,
    /// The orchestrations.
    pub programs: Programs,
}

/// The orchestration programs of the workloads.
pub struct Programs {
    /// [`orch_vector`]
    pub vector: Program,
    /// [`orch_chain513`]
    pub chain513: Program,
    /// [`orch_mix`]
    pub mix: Program,
    /// [`orch_shape`] (every dispatch shape).
    pub shape: Program,
    /// [`orch_tiny_rings`]
    pub tiny_rings: Program,
    /// [`orch_manual_scope`]
    pub manual_scope: Program,
}

impl Kernels {
    /// Register every kernel and orchestration on `dev`; fails if the func ids differ from [`f`].
    pub fn register<P: HostPlatform>(dev: &Device<P>) -> Result<Kernels, Error> {
        let k = Kernels {
            add: dev.register_kernel("add", CoreType::Aiv, k_add)?,
            mul: dev.register_kernel("mul", CoreType::Aiv, k_mul)?,
            add_scalar: dev.register_kernel("add_scalar", CoreType::Aiv, k_add_scalar)?,
            inc0: dev.register_kernel("inc0", CoreType::Aiv, k_inc0)?,
            fill1: dev.register_kernel("fill1", CoreType::Aiv, k_fill1)?,
            accumulate: dev.register_kernel("accumulate", CoreType::Aiv, k_accumulate)?,
            add1: dev.register_kernel("add1", CoreType::Aiv, k_add1)?,
            matmul: dev.register_kernel("mix_matmul", CoreType::Aic, k_mix_matmul)?,
            vec_half: dev.register_kernel("mix_vec_half", CoreType::Aiv, k_mix_vec_half)?,
            programs: Programs {
                vector: dev.register_orchestration("vector", orch_vector)?,
                chain513: dev.register_orchestration("chain513", orch_chain513)?,
                mix: dev.register_orchestration("mix", orch_mix)?,
                shape: dev.register_orchestration("dispatch_shape", orch_shape)?,
                tiny_rings: dev.register_orchestration("tiny_rings", orch_tiny_rings)?,
                manual_scope: dev.register_orchestration("manual_scope", orch_manual_scope)?,
            },
        };
        let ids = [k.add, k.mul, k.add_scalar, k.inc0, k.fill1, k.accumulate, k.add1, k.matmul, k.vec_half];
        let fixed = [f::ADD, f::MUL, f::ADD_SCALAR, f::INC0, f::FILL1, f::ACCUMULATE, f::ADD1, f::MATMUL, f::VEC_HALF];
        if ids != fixed {
            return Err(Error::Config(format!("kernels registered as {ids:?}, the orchestrations expect {fixed:?}")));
        }
        Ok(k)
    }
}

thread_local! {
    /// Set by [`traced`]: every [`run_on`] of this thread records a trace.
    static TRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

thread_local! {
    /// Set by [`dumped`]: every [`run_on`] of this thread dumps arguments.
    static DUMP: std::cell::RefCell<Option<DumpSetting>> = const { std::cell::RefCell::new(None) };
}

/// What [`dumped_with_arena`] set: level, directory, arena bytes per AICPU thread.
type DumpSetting = (DumpLevel, Option<std::path::PathBuf>, Option<u64>);

/// Run `f` with the args dump at `level` (writing into `dir`, or a fresh temporary directory)
/// for every workload run it makes on this thread ([`RunConfig::with_dump`]); what was written
/// arrives in [`Outcome::report`]`.dump`.
pub fn dumped<T>(level: Option<DumpLevel>, dir: Option<std::path::PathBuf>, f: impl FnOnce() -> T) -> T {
    dumped_with_arena(level, dir, None, f)
}

/// [`dumped`], with a payload arena of `arena` bytes per AICPU thread
/// ([`RunConfig::with_dump_arena`]) when given.
pub fn dumped_with_arena<T>(
    level: Option<DumpLevel>,
    dir: Option<std::path::PathBuf>,
    arena: Option<u64>,
    f: impl FnOnce() -> T,
) -> T {
    let before = DUMP.with(|d| d.replace(level.map(|l| (l, dir, arena))));
    let v = f();
    DUMP.with(|d| *d.borrow_mut() = before);
    v
}

thread_local! {
    /// The executor every host-built-graph run of this thread asks for ([`executed`]).
    static EXECUTOR: std::cell::Cell<Executor> = const { std::cell::Cell::new(Executor::Auto) };
}

/// Run `f` with every host-built-graph workload run it makes on this thread on executor `e`
/// ([`RunConfig::with_executor`]); the device-side runtime always runs on the legacy one.
pub fn executed<T>(e: Executor, f: impl FnOnce() -> T) -> T {
    let before = EXECUTOR.with(|x| x.replace(e));
    let v = f();
    EXECUTOR.with(|x| x.set(before));
    v
}

/// Run `f` with tracing on (or off) for every workload run it makes on this thread
/// ([`RunConfig::with_trace`]); the trace arrives in [`Outcome::report`]`.trace`.
pub fn traced<T>(on: bool, f: impl FnOnce() -> T) -> T {
    let before = TRACE.with(|t| t.replace(on));
    let v = f();
    TRACE.with(|t| t.set(before));
    v
}

/// Both runtimes, in the order examples run them.
pub const RUNTIMES: [RuntimeKind; 2] = [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing];

/// Run `program` on `rt`: on the host-built graph the build is timed separately.
pub fn run_on<P: HostPlatform>(
    dev: &Device<P>,
    program: &Program,
    args: &OrchArgs,
    rt: RuntimeKind,
    cfg: &RunConfig,
) -> Result<(RunReport, Duration), Error> {
    let mut cfg = cfg.clone().with_runtime(rt).with_trace(cfg.trace || TRACE.with(|t| t.get()));
    if rt == RuntimeKind::HostBuiltGraph && cfg.executor == Executor::Auto {
        cfg = cfg.with_executor(EXECUTOR.with(|x| x.get()));
    }
    if let Some((level, dir, arena)) = DUMP.with(|d| d.borrow().clone()) {
        cfg = cfg.with_dump(Some(level));
        if let Some(bytes) = arena {
            cfg = cfg.with_dump_arena(bytes);
        }
        if let Some(dir) = dir {
            cfg = cfg.with_dump_dir(dir.join(rt.name()));
        }
    }
    match rt {
        RuntimeKind::HostBuiltGraph => {
            let g = dev.build_program(program, args)?;
            let r = dev.run_with(&g, &cfg)?;
            Ok((r, g.build_time()))
        }
        RuntimeKind::TensormapRing => Ok((dev.run_program(program, args, &cfg)?, Duration::ZERO)),
    }
}

// ---------------------------------------------------------------- outcome

/// What a workload run reports.
#[derive(Debug)]
pub struct Outcome {
    /// The workload's name.
    pub name: String,
    /// The runtime it ran on.
    pub runtime: RuntimeKind,
    /// The run's report.
    pub report: RunReport,
    /// The host graph build time (host-built graph; zero on the device-side runtime).
    pub build: Duration,
    /// How many output values matched the golden.
    pub checked: usize,
}

impl Outcome {
    /// One line: the submission figure is the host graph build (hbg) or the orchestration
    /// time on the device (trb, overlapped with execution).
    /// `board` is the name printed (`pto::board::Selected::NAME` for the selected board).
    pub fn summary(&self, board: &str) -> String {
        let submit = match self.report.orchestration {
            Some(d) => format!("orch={:.3} ms", d.as_secs_f64() * 1e3),
            None => format!("build={:.3} ms", self.build.as_secs_f64() * 1e3),
        };
        format!(
            "{:<22} board={} runtime={} executor={} tasks={} cores={} {submit} run={:.3} ms checked={} values PASS",
            self.name,
            board,
            self.runtime.name(),
            self.report.executor,
            self.report.tasks,
            self.report.cores,
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

/// A workload failure: the run failed, or its result differs from the golden.
#[derive(Debug)]
pub enum Failure {
    /// The run failed.
    Run(Error),
    /// The result differs from the golden.
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

/// Elements of each `vector` tensor.
pub const VECTOR_N: u32 = 16384;

/// f = (a+b+1)(a+b+2) + (a+b): a diamond of five AIV tasks. Args: a, b, f.
pub fn orch_vector(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, out) = (args.t(0)?, args.t(1)?, args.t(2)?);
    let n = a.elem_count() as u32;
    let c = o.alloc::<f32>(&[n])?;
    let d = o.alloc::<f32>(&[n])?;
    let e = o.alloc::<f32>(&[n])?;
    let h = o.alloc::<f32>(&[n])?;
    o.submit(Task::aiv(f::ADD).input(&a).input(&b).output(&c))?;
    o.submit(Task::aiv(f::ADD_SCALAR).input(&c).output(&d).scalar_f32(1.0))?;
    o.submit(Task::aiv(f::ADD_SCALAR).input(&c).output(&e).scalar_f32(2.0))?;
    o.submit(Task::aiv(f::MUL).input(&d).input(&e).output(&h))?;
    o.submit(Task::aiv(f::ADD).input(&h).input(&c).output(&out))?;
    Ok(())
}

/// The `vector` workload on `rt`.
pub fn vector<P: HostPlatform>(dev: &Device<P>, k: &Kernels, rt: RuntimeKind) -> Result<Outcome, Failure> {
    let n = VECTOR_N;
    let a_host: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25).collect();
    let b_host: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 3.0).collect();
    let a = dev.tensor_from(&[n], &a_host)?;
    let b = dev.tensor_from(&[n], &b_host)?;
    let f = dev.alloc::<f32>(&[n])?;
    let args = OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(f.tensor());
    let (report, build) = run_on(dev, &k.programs.vector, &args, rt, &RunConfig::default())?;
    let golden: Vec<f32> = a_host.iter().zip(&b_host).map(|(a, b)| (a + b + 1.0) * (a + b + 2.0) + (a + b)).collect();
    let checked = check_close("vector f", &f.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "vector".into(), runtime: rt, report, build, checked })
}

// ---------------------------------------------------------------- chain513

/// Elements of each `chain513` tensor.
pub const CHAIN_N: u32 = 4096;

/// One add, then 512 `+1` tasks each reading the previous output. The intermediates
/// ping-pong between two scope tensors: task i reads one and writes the other, so task i + 1
/// (which waits for task i's output) may overwrite what task i read. Args: a, b, out.
pub fn orch_chain513(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, out) = (args.t(0)?, args.t(1)?, args.t(2)?);
    let n = a.elem_count() as u32;
    let ping = [o.alloc::<f32>(&[n])?, o.alloc::<f32>(&[n])?];
    o.submit(Task::aiv(f::ADD).input(&a).input(&b).output(&ping[0]))?;
    for i in 0..511 {
        let (src, dst) = (&ping[i % 2], &ping[(i + 1) % 2]);
        o.submit(Task::aiv(f::ADD_SCALAR).input(src).output(dst).scalar_f32(1.0))?;
    }
    o.submit(Task::aiv(f::ADD_SCALAR).input(&ping[1]).output(&out).scalar_f32(1.0))?;
    Ok(())
}

/// The `chain513` workload on `rt`: out = a + b + 512.
pub fn chain513<P: HostPlatform>(dev: &Device<P>, k: &Kernels, rt: RuntimeKind) -> Result<Outcome, Failure> {
    let n = CHAIN_N;
    let a_host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b_host: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let a = dev.tensor_from(&[n], &a_host)?;
    let b = dev.tensor_from(&[n], &b_host)?;
    let out = dev.alloc::<f32>(&[n])?;
    let args = OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(out.tensor());
    let (report, build) = run_on(dev, &k.programs.chain513, &args, rt, &RunConfig::default())?;
    let golden: Vec<f32> = a_host.iter().zip(&b_host).map(|(a, b)| a + b + 512.0).collect();
    let checked = check_close("chain513 out", &out.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "chain513".into(), runtime: rt, report, build, checked })
}

/// Check a `chain513` dump taken at [`DumpLevel::Full`]: exact accounting with nothing
/// dropped; for every task its output at completion equals the golden at that stage (a + b +
/// k), and equals the next task's input at dispatch, bit for bit. Returns the records checked.
pub fn check_chain513_dump(d: &Dump) -> Result<usize, String> {
    let acc = d.accounting;
    if acc.total != Some(acc.collected) || acc.dropped != Some(0) {
        return Err(format!("accounting: {acc:?} (expected every record collected, none dropped)"));
    }
    // The add: 2 inputs + 1 output; each +1: 1 input, 1 output, 1 scalar.
    if d.records.len() != 3 + 512 * 3 {
        return Err(format!("{} records, expected {}", d.records.len(), 3 + 512 * 3));
    }
    let n = CHAIN_N as usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let tasks: Vec<u32> = d.by_task().keys().copied().collect();
    if tasks.len() != 513 {
        return Err(format!("{} tasks recorded, expected 513", tasks.len()));
    }
    for (k, &t) in tasks.iter().enumerate() {
        let out_arg = if k == 0 { 2 } else { 1 };
        let out = d.find(t, out_arg, Stage::AfterCompletion).ok_or(format!("task {k}: no output record"))?;
        let got: Vec<f32> = d.data(out).ok_or(format!("task {k}: payload is not f32s"))?;
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y + k as f32).collect();
        if got != want {
            return Err(format!("task {k}: output at completion differs from the golden"));
        }
        if let Some(&next) = tasks.get(k + 1) {
            let input = d.find(next, 0, Stage::BeforeDispatch).ok_or(format!("task {}: no input record", k + 1))?;
            if d.bytes(input) != d.bytes(out) {
                return Err(format!("task {}: input at dispatch differs from task {k}'s output", k + 1));
            }
        }
    }
    Ok(d.records.len())
}

// ---------------------------------------------------------------- every dtype

/// A kernel that does nothing (its task only has its arguments recorded).
pub fn k_nothing(_k: &mut dyn KernelContext) {}

/// One tensor per [`DType`], holding values at the edges of its range, all read by one task of
/// [`k_nothing`] that also takes the scalar [`EveryDtype::SCALAR`]: a dump of it at `Full`
/// records a payload of every dtype (64-bit integers beyond 2^53, f16 and bf16 bit patterns,
/// infinities and NaN among them) and a 64-bit scalar.
pub struct EveryDtype<P: HostPlatform> {
    /// The tensors, in argument order (they live as long as the graph needs them).
    pub tensors: Vec<DeviceTensor<P>>,
    /// The graph: one task.
    pub graph: Graph<P>,
    /// Argument `i`'s dtype and its bytes (little-endian, as the dump's payload holds them).
    pub expected: Vec<(DType, Vec<u8>)>,
}

impl<P: HostPlatform> EveryDtype<P> {
    /// The task's scalar argument (index `expected.len()`): beyond 2^53.
    pub const SCALAR: u64 = u64::MAX - 1;
}

/// The little-endian bytes of an array of numbers.
macro_rules! le_bytes {
    ($v:expr) => {
        $v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()
    };
}

/// Build [`EveryDtype`] on `dev` (registers [`k_nothing`] as `nothing` if it is not yet).
pub fn every_dtype<P: HostPlatform>(dev: &Device<P>) -> Result<EveryDtype<P>, String> {
    use pto_hal::DeviceMemory;
    let f = match dev.func("nothing") {
        Some(f) => f,
        None => dev.register_kernel("nothing", CoreType::Aiv, k_nothing).map_err(|e| e.to_string())?,
    };
    let half: [u16; 5] = [0x3c00, 0xc100, 0x7bff, 0x0001, 0x7c00]; // 1, -2.5, 65504, 2^-24, inf
    let bhalf: [u16; 4] = [0x3f80, 0xc040, 0x3e20, 0x7f7f]; // 1, -3, 0.15625, the largest
    let expected: Vec<(DType, Vec<u8>)> = vec![
        (DType::F32, le_bytes!([0.1f32, -2.5, f32::MAX, f32::INFINITY, f32::NAN])),
        (DType::F16, le_bytes!(half)),
        (DType::BF16, le_bytes!(bhalf)),
        (DType::I32, le_bytes!([i32::MIN, -1, 0, i32::MAX])),
        (DType::I64, le_bytes!([i64::MIN, -(1i64 << 53) - 1, (1i64 << 53) + 1, i64::MAX])),
        (DType::U32, le_bytes!([0u32, u32::MAX])),
        (DType::U8, le_bytes!([0u8, 255])),
        (DType::I8, le_bytes!([-128i8, 127])),
        (DType::F64, le_bytes!([0.1f64, -1e300, f64::MIN_POSITIVE])),
        (DType::U64, le_bytes!([u64::MAX, (1u64 << 53) + 1, 0])),
        (DType::I16, le_bytes!([i16::MIN, i16::MAX])),
        (DType::U16, le_bytes!([0u16, u16::MAX])),
    ];
    let mut tensors = Vec::new();
    for (dtype, bytes) in &expected {
        let n = (bytes.len() / dtype.size() as usize) as u32;
        let t = dev.alloc_dtype(*dtype, &[n]).map_err(|e| e.to_string())?;
        dev.platform().copy_h2d(t.addr(), bytes).map_err(|e| format!("upload of the {dtype:?} tensor: {e:?}"))?;
        tensors.push(t);
    }
    let graph = dev
        .build(|g| {
            let task = tensors.iter().fold(Task::aiv(f), |task, t| task.input(&t.tensor()));
            g.submit(task.scalar(EveryDtype::<P>::SCALAR))?;
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    Ok(EveryDtype { tensors, graph, expected })
}

// ---------------------------------------------------------------- mix

/// Side of a `mix` tile.
pub const MIX_TILE: u32 = 32;
/// Tiles in the `mix` workload.
pub const MIX_TILES: u32 = 8;

/// Per tile, a MIX task (AIC: C = A·B; both AIV lanes: half of E = 2·D + 1 each), then an AIV
/// add F = C + E, each tile in its own scope. Args: A, B, D, F ([tiles·t, t] each).
pub fn orch_mix(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, d, out) = (args.t(0)?, args.t(1)?, args.t(2)?, args.t(3)?);
    let t = a.shape[1];
    let tiles = a.shape[0] / t;
    for i in 0..tiles {
        o.scope(|s| {
            let tile = |x: &Tensor| x.view(&[i * t, 0], &[t, t]);
            let c = s.alloc::<f32>(&[t, t])?;
            let e = s.alloc::<f32>(&[t, t])?;
            s.submit(
                Task::mix(f::MATMUL, f::VEC_HALF)
                    .input(&tile(&a)?)
                    .input(&tile(&b)?)
                    .output(&c)
                    .input(&tile(&d)?)
                    .output(&e),
            )?;
            s.submit(Task::aiv(f::ADD).input(&c).input(&e).output(&tile(&out)?))?;
            Ok(())
        })?;
    }
    Ok(())
}

/// The `mix` workload on `rt`.
pub fn mix<P: HostPlatform>(dev: &Device<P>, k: &Kernels, rt: RuntimeKind) -> Result<Outcome, Failure> {
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
    let args = OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(d.tensor()).tensor(f.tensor());
    let (report, build) = run_on(dev, &k.programs.mix, &args, rt, &RunConfig::default())?;
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
    Ok(Outcome { name: "mix".into(), runtime: rt, report, build, checked })
}

// ---------------------------------------------------------------- tiny_rings

/// Iterations (scopes) of `tiny_rings`.
pub const TINY_ITERS: u32 = 64;
/// Elements per `tiny_rings` row.
pub const TINY_N: u32 = 256;

/// Rings far smaller than the work: every iteration's scope must be reclaimed many times
/// over during the run.
pub fn tiny_ring_config() -> RunConfig {
    RunConfig::default().with_rings(RingConfig::uniform(8, 16 << 10, 16).with_tensormap_entries(32))
}

/// Per iteration i, in its own scope: tmp = x_i + 1 (a scope tensor), y_i = tmp · tmp.
/// Args: x, y ([iters, n] each).
pub fn orch_tiny_rings(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y) = (args.t(0)?, args.t(1)?);
    let (iters, n) = (x.shape[0], x.shape[1]);
    for i in 0..iters {
        o.scope(|s| {
            let tmp = s.alloc::<f32>(&[1, n])?;
            let xi = x.view(&[i, 0], &[1, n])?;
            s.submit(Task::aiv(f::ADD_SCALAR).input(&xi).output(&tmp).scalar_f32(1.0))?;
            s.submit(Task::aiv(f::MUL).input(&tmp).input(&tmp).output(&y.view(&[i, 0], &[1, n])?))?;
            Ok(())
        })?;
    }
    Ok(())
}

/// The `tiny_rings` workload on `rt` (rings of 8 slots, 16 KiB heap, 16 edges per depth).
pub fn tiny_rings<P: HostPlatform>(dev: &Device<P>, k: &Kernels, rt: RuntimeKind) -> Result<Outcome, Failure> {
    let (iters, n) = (TINY_ITERS, TINY_N);
    let x_h: Vec<f32> = (0..iters * n).map(|i| (i % 17) as f32 * 0.5 - 2.0).collect();
    let x = dev.tensor_from(&[iters, n], &x_h)?;
    let y = dev.alloc::<f32>(&[iters, n])?;
    let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor());
    let (report, build) = run_on(dev, &k.programs.tiny_rings, &args, rt, &tiny_ring_config())?;
    let golden: Vec<f32> = x_h.iter().map(|v| (v + 1.0) * (v + 1.0)).collect();
    let checked = check_close("tiny_rings y", &y.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "tiny_rings".into(), runtime: rt, report, build, checked })
}

// ---------------------------------------------------------------- manual_scope

/// Explicit dependencies only, in a manual scope: x = 1 (fill), y += x (accumulate, after
/// the fill), then x is overwritten with x + 1 — a write-after-read that must wait for the
/// accumulate (declared), and z = x · y after both. Args: x, y, z (`[n]` each).
pub fn orch_manual_scope(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (x, y, z) = (args.t(0)?, args.t(1)?, args.t(2)?);
    o.manual_scope(|s| {
        let fill = s.submit(Task::aiv(f::FILL1).output(&x))?;
        let acc = s.submit(Task::aiv(f::ACCUMULATE).input(&x).inout(&y).after(fill))?;
        let bump = s.submit(Task::aiv(f::ADD1).inout(&x).after(acc))?;
        s.submit(Task::aiv(f::MUL).input(&x).input(&y).output(&z).after(bump).after(acc))?;
        Ok(())
    })
}

/// Elements of each `manual_scope` tensor.
pub const MANUAL_N: u32 = 1024;

/// The `manual_scope` workload on `rt`: y0 + 1 then z = 2 · (y0 + 1).
pub fn manual_scope<P: HostPlatform>(dev: &Device<P>, k: &Kernels, rt: RuntimeKind) -> Result<Outcome, Failure> {
    let n = MANUAL_N;
    let y_h: Vec<f32> = (0..n).map(|i| (i % 5) as f32).collect();
    let x = dev.alloc::<f32>(&[n])?;
    let y = dev.tensor_from(&[n], &y_h)?;
    let z = dev.alloc::<f32>(&[n])?;
    let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).tensor(z.tensor());
    let (report, build) = run_on(dev, &k.programs.manual_scope, &args, rt, &RunConfig::default())?;
    let golden: Vec<f32> = y_h.iter().map(|v| 2.0 * (v + 1.0)).collect();
    let checked = check_close("manual_scope z", &z.read::<f32>()?, &golden).map_err(Failure::Golden)?;
    Ok(Outcome { name: "manual_scope".into(), runtime: rt, report, build, checked })
}

// ---------------------------------------------------------------- dispatch shapes

/// The benchmark shapes of `docs/benchmarks.md`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ShapeKind {
    /// `N` dependent `x[0] += 1` tasks.
    Chain,
    /// One fill, then `N` accumulates reading it.
    Fanout,
    /// `N` independent `+1` tasks.
    Independent,
    /// `N` dependent dummy (no-kernel) tasks.
    DummyChain,
    /// One dummy producer, then `N` dummy consumers.
    DummyFanout,
}

impl ShapeKind {
    /// Every shape, in benchmark order (the index is the orchestration's scalar 0).
    pub const ALL: [ShapeKind; 5] =
        [ShapeKind::Chain, ShapeKind::Fanout, ShapeKind::Independent, ShapeKind::DummyChain, ShapeKind::DummyFanout];
    /// The shape's name, as printed.
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

/// The dispatch shapes as one orchestration. Args: x (`[16]`), y (`[n, 16]`); scalars: shape
/// index in [`ShapeKind::ALL`], n.
pub fn orch_shape(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (xt, y) = (args.t(0)?, args.t(1)?);
    let kind = ShapeKind::ALL[args.s(0)? as usize % ShapeKind::ALL.len()];
    let n = args.s(1)? as u32;
    let row = |i: u32| y.view(&[i, 0], &[1, 16]);
    match kind {
        ShapeKind::Chain => {
            for _ in 0..n {
                o.submit(Task::aiv(f::INC0).inout(&xt))?;
            }
        }
        ShapeKind::Fanout => {
            o.submit(Task::aiv(f::FILL1).output(&xt))?;
            for i in 0..n {
                o.submit(Task::aiv(f::ACCUMULATE).input(&xt).inout(&row(i)?))?;
            }
        }
        ShapeKind::Independent => {
            for i in 0..n {
                o.submit(Task::aiv(f::ADD1).inout(&row(i)?))?;
            }
        }
        ShapeKind::DummyChain => {
            for _ in 0..n {
                o.submit(Task::dummy().inout(&xt))?;
            }
        }
        ShapeKind::DummyFanout => {
            o.submit(Task::dummy().output(&xt))?;
            for i in 0..n {
                o.submit(Task::dummy().input(&xt).inout(&row(i)?))?;
            }
        }
    }
    Ok(())
}

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

/// The workload signature shared by the examples.
pub type Workload<P> = fn(&Device<P>, &Kernels, RuntimeKind) -> Result<Outcome, Failure>;

/// Every example's workload, by the example's name (each runs on both runtimes and checks its
/// own result).
pub fn examples<P: HostPlatform>() -> [(&'static str, Workload<P>); 7] {
    [
        ("mix", mix),
        ("vector", vector),
        ("chain513", chain513),
        ("bgemm", attention::bgemm),
        ("paged_attention_small", attention::paged_attention_small),
        ("tiny_rings", tiny_rings),
        ("manual_scope", manual_scope),
    ]
}

/// Which runtimes a command line names (`--runtime hbg|trb|both`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RuntimeChoice {
    /// The host-built graph.
    Hbg,
    /// The device-side runtime.
    Trb,
    /// Both, host-built graph first.
    #[default]
    Both,
}

impl RuntimeChoice {
    /// The runtimes, in the order the examples run them.
    pub fn list(self) -> Vec<RuntimeKind> {
        match self {
            RuntimeChoice::Hbg => vec![RuntimeKind::HostBuiltGraph],
            RuntimeChoice::Trb => vec![RuntimeKind::TensormapRing],
            RuntimeChoice::Both => RUNTIMES.to_vec(),
        }
    }
}

/// The examples' command line, as clap parses it.
#[derive(clap::Parser, Debug)]
#[command(
    no_binary_name = true,
    disable_version_flag = true,
    about = "A pto-rt example: runs its workload on the selected board and checks it against its golden.",
    after_help = "With both runtimes, the device-side runtime's trace files get `.trb` before their extension; \
                  each run's args dump goes to DIR/hbg or DIR/trb, by its runtime; the executor applies to the \
                  host-built graph (the device-side runtime always dispatches from the AICPU)."
)]
struct ExampleCli {
    /// The runtimes to run on.
    #[arg(long, value_enum, default_value_t = RuntimeChoice::Both)]
    runtime: RuntimeChoice,
    /// The host-built graph's executor: auto, legacy or resident.
    #[arg(long, value_name = "EXECUTOR", value_parser = parse_executor, default_value = "auto")]
    executor: Executor,
    /// Write each run's Chrome trace-event JSON (Perfetto) here.
    #[arg(long, value_name = "FILE.json")]
    trace: Option<std::path::PathBuf>,
    /// Write each run's SVG swimlane here.
    #[arg(long, value_name = "FILE.svg")]
    svg: Option<std::path::PathBuf>,
    /// Record each run's arguments (the args dump): partial, hybrid or full.
    #[arg(long, value_name = "LEVEL", value_parser = parse_dump_level)]
    dump: Option<DumpLevel>,
    /// Where the args dump writes (each run into DIR/<runtime>).
    #[arg(long, value_name = "DIR", requires = "dump")]
    dump_dir: Option<std::path::PathBuf>,
}

/// An example's command line: `[--runtime hbg|trb|both] [--executor auto|legacy|resident]
/// [--trace FILE.json] [--svg FILE.svg] [--dump partial|hybrid|full [--dump-dir DIR]]`,
/// parsed by clap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExampleArgs {
    /// The runtimes to run on (default both).
    pub runtimes: Vec<RuntimeKind>,
    /// The executor of the host-built-graph runs (default auto).
    pub executor: Executor,
    /// Where to write the Chrome trace-event JSON of each run.
    pub trace: Option<std::path::PathBuf>,
    /// Where to write the SVG swimlane of each run.
    pub svg: Option<std::path::PathBuf>,
    /// Record the runs' arguments at this level (the args dump).
    pub dump: Option<DumpLevel>,
    /// Where the args dump writes: each run into `DIR/<runtime>` (`hbg`, `trb`). Without it,
    /// each run writes the runtime's default, `<temp>/pto-dump/run-<process>-<device>-<epoch>`.
    pub dump_dir: Option<std::path::PathBuf>,
}

/// Usage of an example's command line (clap's help, under the example's name).
pub fn example_usage(name: &str) -> String {
    use clap::CommandFactory;
    ExampleCli::command().bin_name(name.to_string()).render_help().to_string()
}

impl ExampleArgs {
    /// Parse `args` (without the program name). Anything unknown, a missing value or a bad
    /// one is an error naming it (clap's message, with the usage); so is `--dump-dir` without
    /// `--dump`. `-h` / `--help` is `Err("help")`.
    pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<ExampleArgs, String> {
        Self::parse_named("example", args)
    }

    /// [`ExampleArgs::parse`] for the example `name` (its usage line names it).
    pub fn parse_named<I: IntoIterator<Item = String>>(name: &str, args: I) -> Result<ExampleArgs, String> {
        use clap::{CommandFactory, FromArgMatches};
        let parsed = ExampleCli::command()
            .bin_name(name.to_string())
            .try_get_matches_from(args)
            .and_then(|m| ExampleCli::from_arg_matches(&m));
        match parsed {
            Ok(c) => Ok(ExampleArgs {
                runtimes: c.runtime.list(),
                executor: c.executor,
                trace: c.trace,
                svg: c.svg,
                dump: c.dump,
                dump_dir: c.dump_dir,
            }),
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Err(String::from("help")),
            Err(e) => Err(e.to_string().trim_end().to_string()),
        }
    }
}

/// The value of `--executor`: `auto`, `legacy` or `resident`; anything else is an error naming
/// it.
pub fn parse_executor(s: &str) -> Result<Executor, String> {
    match s {
        "auto" => Ok(Executor::Auto),
        "legacy" => Ok(Executor::Legacy),
        "resident" => Ok(Executor::Resident),
        other => Err(format!("--executor takes auto, legacy or resident, got {other:?}")),
    }
}

/// The value of `--dump`: `partial`, `hybrid` or `full`; anything else is an error naming it.
pub fn parse_dump_level(s: &str) -> Result<DumpLevel, String> {
    s.parse().map_err(|_| format!("--dump takes partial, hybrid or full, got {s:?}"))
}

/// `--dump-dir` only means something with `--dump`: an error otherwise.
pub fn check_dump_dir(level: Option<DumpLevel>, dir: Option<&std::path::Path>) -> Result<(), String> {
    match (level, dir) {
        (None, Some(d)) => Err(format!("--dump-dir {} needs --dump partial|hybrid|full", d.display())),
        _ => Ok(()),
    }
}

/// One line on what a run's args dump wrote: records collected, dropped (or `unknown`),
/// payload bytes and the directory. An error when the run carries no dump report.
pub fn dump_summary(report: &RunReport) -> Result<String, String> {
    let d = report.dump.as_ref().ok_or_else(|| String::from("the run carries no args-dump report"))?;
    Ok(dump_line(d.level.name(), &d.accounting, d.payload_bytes, &d.dir))
}

/// The same line for a run that failed, read back from the dump directory it left: `None` when
/// there is no readable manifest there written at or after `since` (the run's start), so a
/// stale dump of an earlier run is never reported as this one's. Its accounting is unknown.
pub fn failed_dump_summary(dir: &std::path::Path, since: std::time::SystemTime) -> Option<String> {
    let written = std::fs::metadata(dir.join("args_dump.json")).and_then(|m| m.modified()).ok()?;
    if written < since {
        return None;
    }
    let d = pto_runtime::host::dump::Dump::open(dir).ok()?;
    let bytes = d.records.iter().map(|r| r.payload_len).sum();
    Some(dump_line(d.level.name(), &d.accounting, bytes, dir))
}

fn dump_line(
    level: &str,
    a: &pto_runtime::host::dump::Accounting,
    payload_bytes: u64,
    dir: &std::path::Path,
) -> String {
    let unknown = || String::from("unknown");
    format!(
        "dump: level={level} records={} dropped={} total={} payload={payload_bytes} bytes dir={}",
        a.collected,
        a.dropped.map_or_else(unknown, |n| n.to_string()),
        a.total.map_or_else(unknown, |n| n.to_string()),
        dir.display()
    )
}

/// The runtimes named by the command line (`--runtime hbg|trb|both`, default both); anything
/// else on it is an error.
pub fn runtimes_from_args() -> Result<Vec<RuntimeKind>, String> {
    ExampleArgs::parse(std::env::args().skip(1)).map(|a| a.runtimes)
}

/// `path` for runtime `rt`'s trace: `path` itself for the host-built graph or when one
/// runtime runs; the device-side runtime's run of a two-runtime invocation gets the runtime's
/// name before the extension (`t.json` → `t.trb.json`).
pub fn trace_path(path: &std::path::Path, rt: RuntimeKind, several: bool) -> std::path::PathBuf {
    if !several || rt == RuntimeKind::HostBuiltGraph {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}.{}.{}", rt.name(), e.to_string_lossy()),
        None => format!("{stem}.{}", rt.name()),
    };
    path.with_file_name(name)
}

/// Write `report`'s trace as Chrome JSON to `json` and as SVG to `svg` (each if given);
/// returns a line describing what was written.
pub fn write_trace(
    report: &RunReport,
    json: Option<&std::path::Path>,
    svg: Option<&std::path::Path>,
) -> Result<String, String> {
    let Some(t) = &report.trace else { return Err(String::from("the run carries no trace")) };
    let mut said = format!(
        "trace: {} subtasks, {} phases, {} records dropped, {} rings unclosed",
        t.subtasks.len(),
        t.phases.len(),
        t.dropped(),
        t.unclosed()
    );
    if let Some(p) = json {
        std::fs::write(p, t.to_chrome_json()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        said += &format!(", JSON {}", p.display());
    }
    if let Some(p) = svg {
        std::fs::write(p, t.to_svg()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        said += &format!(", SVG {}", p.display());
    }
    Ok(said)
}

/// The `main` of a single-workload example: open the board named `board` with `open`
/// (`pto::open` for the selected board), run `workload` on the runtimes the command line names
/// (both by default), print each summary (or the failure) and exit accordingly. With `--dump`
/// each run records its arguments ([`dumped`]) and a line says what its dump wrote.
pub fn example_main<P: HostPlatform>(
    name: &str,
    board: &str,
    open: impl FnOnce() -> Result<Device<P>, Error>,
    workload: Workload<P>,
) -> std::process::ExitCode {
    let args = match ExampleArgs::parse_named(name, std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e == "help" => {
            println!("{}", example_usage(name));
            return std::process::ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let tracing = args.trace.is_some() || args.svg.is_some();
    let several = args.runtimes.len() > 1;
    let (dev, k) = match setup(open) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{name}: cannot open the device: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for &rt in &args.runtimes {
        let started = std::time::SystemTime::now();
        let run = || executed(args.executor, || traced(tracing, || workload(&dev, &k, rt)));
        match dumped(args.dump, args.dump_dir.clone(), run) {
            Ok(o) => {
                println!("{}", o.summary(board));
                if tracing {
                    let json = args.trace.as_deref().map(|p| trace_path(p, rt, several));
                    let svg = args.svg.as_deref().map(|p| trace_path(p, rt, several));
                    match write_trace(&o.report, json.as_deref(), svg.as_deref()) {
                        Ok(line) => println!("{name:<22} {line}"),
                        Err(e) => {
                            eprintln!("{name} runtime={} trace: {e}", rt.name());
                            ok = false;
                        }
                    }
                }
                if args.dump.is_some() {
                    match dump_summary(&o.report) {
                        Ok(line) => println!("{name:<22} {line}"),
                        Err(e) => {
                            eprintln!("{name} runtime={} dump: {e}", rt.name());
                            ok = false;
                        }
                    }
                }
            }
            Err(e) => {
                eprintln!("{name} runtime={} FAIL: {e}", rt.name());
                // What a failed run collected is still on disk, its accounting unknown.
                if let Some(line) =
                    args.dump_dir.as_ref().and_then(|d| failed_dump_summary(&d.join(rt.name()), started))
                {
                    eprintln!("{name:<22} {line}");
                }
                ok = false;
            }
        }
    }
    if ok { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::FAILURE }
}

/// Open a device with `open` (`pto::open` for the selected board) and register the kernels.
pub fn setup<P: HostPlatform>(open: impl FnOnce() -> Result<Device<P>, Error>) -> Result<(Device<P>, Kernels), Error> {
    let dev = open()?;
    let k = Kernels::register(&dev)?;
    Ok((dev, k))
}

/// Time `f`.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let s = Instant::now();
    let v = f();
    (v, s.elapsed())
}

// The command-line parser of the examples (`ExampleArgs`, above `example_main`).
#[cfg(test)]
mod example_args_tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ExampleArgs, String> {
        ExampleArgs::parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults_run_both_runtimes_without_dump() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.runtimes, RUNTIMES.to_vec());
        assert_eq!((a.dump, a.dump_dir), (None, None));
    }

    #[test]
    fn dump_levels_and_dir_parse_in_both_spellings() {
        for (word, level) in [("partial", DumpLevel::Partial), ("hybrid", DumpLevel::Hybrid), ("full", DumpLevel::Full)]
        {
            assert_eq!(parse(&["--dump", word]).unwrap().dump, Some(level));
            assert_eq!(parse(&[&format!("--dump={word}")]).unwrap().dump, Some(level));
        }
        let a = parse(&["--runtime", "hbg", "--dump", "full", "--dump-dir", "/tmp/d"]).unwrap();
        assert_eq!(a.runtimes, vec![RuntimeKind::HostBuiltGraph]);
        assert_eq!(a.dump, Some(DumpLevel::Full));
        assert_eq!(a.dump_dir.as_deref(), Some(std::path::Path::new("/tmp/d")));
        // Order does not matter: --dump-dir may come first.
        let b = parse(&["--dump-dir=/tmp/d", "--dump=hybrid"]).unwrap();
        assert_eq!((b.dump, b.dump_dir.as_deref()), (Some(DumpLevel::Hybrid), Some(std::path::Path::new("/tmp/d"))));
    }

    #[test]
    fn bad_dump_flags_are_errors_naming_them() {
        let e = parse(&["--dump", "everything"]).unwrap_err();
        assert!(e.contains("--dump") && e.contains("\"everything\"") && e.contains("partial, hybrid or full"), "{e}");
        let e = parse(&["--dump"]).unwrap_err();
        assert!(e.contains("--dump <LEVEL>") && e.contains("value is required"), "{e}");
        let e = parse(&["--dump", "full", "--dump-dir"]).unwrap_err();
        assert!(e.contains("--dump-dir <DIR>") && e.contains("value is required"), "{e}");
        let e = parse(&["--dump-dir", "/tmp/d"]).unwrap_err();
        assert!(e.contains("--dump <LEVEL>") && e.contains("required"), "{e}");
        let e = parse(&["--dump", "FULL"]).unwrap_err();
        assert!(e.contains("\"FULL\""), "{e}");
        let e = parse(&["--dumps", "full"]).unwrap_err();
        assert!(e.contains("unexpected argument '--dumps'"), "{e}");
    }

    #[test]
    fn runtime_and_executor_parse_and_bad_values_are_named() {
        let a = parse(&["--runtime", "trb", "--executor", "resident"]).unwrap();
        assert_eq!((a.runtimes, a.executor), (vec![RuntimeKind::TensormapRing], Executor::Resident));
        assert_eq!(parse(&[]).unwrap().executor, Executor::Auto);
        let e = parse(&["--runtime", "xyz"]).unwrap_err();
        assert!(e.contains("'xyz'") && e.contains("--runtime"), "{e}");
        let e = parse(&["--executor", "fast"]).unwrap_err();
        assert!(e.contains("auto, legacy or resident") && e.contains("\"fast\""), "{e}");
        assert_eq!(parse(&["--help"]).unwrap_err(), "help");
    }

    #[test]
    fn usage_names_the_flags() {
        let u = example_usage("vector");
        for flag in ["--runtime", "--executor", "--trace", "--svg", "--dump <LEVEL>", "--dump-dir <DIR>"] {
            assert!(u.contains(flag), "{flag} missing from: {u}");
        }
        assert!(u.contains("vector"), "{u}");
    }
}
