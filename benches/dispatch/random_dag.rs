//! The scale point: a seeded random DAG of N tasks (`--shape random-dag --n N`), on both
//! runtimes, with the host memory it takes.
//!
//! Task `i` writes row `i` of `y` (`[N, 16]` f32) and reads 1–4 distinct rows among the 64
//! written just before it (task 0 reads none; task `i < 64` chooses among the `i` before it),
//! drawn from a SplitMix64 stream seeded with `--seed`. Its kernel writes `max(inputs) + 1` to
//! every element of its row, so row `i` ends up holding the length of the longest dependency
//! path ending at task `i`: a task that ran before one of its producers would read a zero (the
//! rows are cleared before every run) and leave a shorter path. Every run is checked against
//! that golden, computed on the host from the same stream.
//!
//! Memory is counted by the bench binary's global allocator ([`Counting`]), switched on at the
//! start of this mode only (the main table's timings run without it): the live heap bytes
//! before and after `Device::build_program` (the graph kept alive, the builder's transient
//! structures freed) give the bytes the host-built graph holds, and the highest live count
//! during the build and during each run gives the transient peak. The peak resident set
//! (`VmHWM`) is printed beside it as a cross-check of the whole process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use pto::prelude::*;
use serde::Serialize;

use super::{Spread, median, us};

/// A global allocator that counts live heap bytes and their peak while [`ON`] is set.
pub struct Counting;

/// Whether [`Counting`] counts (set once, at the start of the scale mode).
pub static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by as isize, Relaxed) + by as isize;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are side effects only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System::alloc`'s.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() && ON.load(Relaxed) {
            grew(l.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(l) };
        if !p.is_null() && ON.load(Relaxed) {
            grew(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as `alloc`.
        unsafe { System.dealloc(p, l) };
        if ON.load(Relaxed) {
            LIVE.fetch_sub(l.size() as isize, Relaxed);
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        // SAFETY: as `alloc`.
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() && ON.load(Relaxed) {
            if new >= l.size() {
                grew(new - l.size());
            } else {
                LIVE.fetch_sub((l.size() - new) as isize, Relaxed);
            }
        }
        q
    }
}

/// Live heap bytes now.
fn live() -> isize {
    LIVE.load(Relaxed)
}

/// Restart the peak at the live count; returns it.
fn reset_peak() -> isize {
    let now = live();
    PEAK.store(now, Relaxed);
    now
}

fn peak() -> isize {
    PEAK.load(Relaxed)
}

/// A field of `/proc/self/status` in kB (`VmHWM`, `VmRSS`); `None` off Linux.
fn proc_status_kb(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The most inputs of one task, and the window they are chosen in.
const MAX_INPUTS: u64 = 4;
const WINDOW: u32 = 64;

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Task `i`'s inputs (distinct tasks among the 64 before it) into `out`; returns how many.
    fn inputs(&mut self, i: u32, out: &mut [u32; MAX_INPUTS as usize]) -> usize {
        let window = i.min(WINDOW);
        if window == 0 {
            return 0;
        }
        let k = ((1 + self.next() % MAX_INPUTS) as u32).min(window) as usize;
        let mut got = 0;
        while got < k {
            let p = i - 1 - (self.next() % window as u64) as u32;
            if !out[..got].contains(&p) {
                out[got] = p;
                got += 1;
            }
        }
        got
    }
}

/// `y[i, :] = max over the inputs of their rows + 1` (arg 0: the output row; args 1..: inputs).
pub fn k_dag_step(k: &mut dyn KernelContext) {
    let mut m = vec![0.0f32; 16];
    for a in 1..k.tensor_count() {
        for (m, v) in m.iter_mut().zip(k.load::<f32>(a)) {
            *m = m.max(v);
        }
    }
    for v in &mut m {
        *v += 1.0;
    }
    k.store(0, &m);
}

/// Tasks per scope of the random DAG. The device-side runtime keeps every task of an open
/// scope in its rings, so one scope of 100k tasks would not fit (DEP_POOL_OVERFLOW at the
/// default ring sizes); scopes of 512 let it reclaim as it goes, in bounded ring memory.
/// Dependencies cross scopes as usual (through the tensor map, `y` is external).
const SCOPE_TASKS: u32 = 512;

/// The random DAG, submitted in scopes of [`SCOPE_TASKS`]. Args: y (`[N, 16]` f32); scalars: the step kernel's func id, N, the seed.
pub fn orch_random_dag(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let y = args.t(0)?;
    let (func, n, seed) = (FuncId(args.s(0)? as u16), args.s(1)? as u32, args.s(2)?);
    let mut rng = Rng(seed);
    let mut ins = [0u32; MAX_INPUTS as usize];
    for first in (0..n).step_by(SCOPE_TASKS as usize) {
        o.scope(|s| {
            for i in first..n.min(first + SCOPE_TASKS) {
                let mut t = Task::aiv(func).output(&y.view(&[i, 0], &[1, 16])?);
                let k = rng.inputs(i, &mut ins);
                for &p in &ins[..k] {
                    t = t.input(&y.view(&[p, 0], &[1, 16])?);
                }
                s.submit(t)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Per task, the longest path ending at it (what its row holds after a run), and the edges.
fn golden(n: u32, seed: u64) -> (Vec<f32>, u64) {
    let mut rng = Rng(seed);
    let mut ins = [0u32; MAX_INPUTS as usize];
    let mut depth = Vec::with_capacity(n as usize);
    let mut edges = 0u64;
    for i in 0..n {
        let k = rng.inputs(i, &mut ins);
        edges += k as u64;
        let d = ins[..k].iter().map(|&p| depth[p as usize]).fold(0.0f32, f32::max) + 1.0;
        depth.push(d);
    }
    (depth, edges)
}

/// One runtime at the scale point (JSON).
#[derive(Serialize)]
pub struct ScaleRuntime {
    runtime: &'static str,
    executor: &'static str,
    /// Run time per round (samples in µs and their spread).
    run: Spread,
    /// Graph build (hbg, one per round) or the device orchestrator's time (trb), µs.
    submit: Spread,
    /// Highest live host heap during a run over the live heap before it, bytes per task
    /// (the largest of the rounds).
    run_peak_heap_bytes_per_task: f64,
}

/// The host-built graph's memory at the scale point (JSON), bytes.
#[derive(Serialize)]
pub struct HbgMemory {
    /// What the counting allocator saw the graph keep: live heap after the build (graph
    /// alive) minus before.
    retained_bytes: i64,
    retained_bytes_per_task: f64,
    /// The highest live heap during the build over the live heap before it.
    build_peak_bytes: i64,
    build_peak_bytes_per_task: f64,
    /// `Graph::host_bytes`, by part, after the runs (the resident state included if built).
    image: usize,
    resident_states: usize,
    externals: usize,
    fixed: usize,
    /// The image's parts, computed from the graph's shape: task records, fan-out lists and
    /// argument records.
    image_task_records: u64,
    image_fanout: u64,
    image_args: u64,
}

/// The scale point's JSON document (`target/bench-random-dag.json`).
#[derive(Serialize)]
pub struct ScaleReport {
    format_version: u32,
    board: &'static str,
    shape: &'static str,
    n: u32,
    seed: u64,
    edges: u64,
    rounds: usize,
    runtimes: Vec<ScaleRuntime>,
    hbg_memory: Option<HbgMemory>,
    /// Peak resident set of the whole process at the end, kB (`null` off Linux).
    vm_hwm_kb: Option<u64>,
}

/// Argument record bytes of a task with `tensors` tensor arguments and no scalar: the record
/// header and a 64-byte descriptor per tensor (the runtime's `args::record_len`).
fn args_record(tensors: u64) -> u64 {
    pto::runtime::layout::ARGS_HEAD + 64 * tensors
}

/// Run the scale point: build, run and check the random DAG of `n` tasks on `runtimes`.
pub fn run(
    dev: &Device,
    (n, seed, rounds): (u32, u64, usize),
    runtimes: &[RuntimeKind],
    executor: Executor,
    format_version: u32,
) -> ScaleReport {
    assert!(ON.load(Relaxed), "the counting allocator is on in the scale mode");
    let step = dev.register_kernel("dag_step", CoreType::Aiv, k_dag_step).expect("register dag_step");
    let prog = dev.register_orchestration("random_dag", orch_random_dag).expect("register random_dag");
    let y = dev.alloc::<f32>(&[n.max(1), 16]).expect("alloc y");
    let args = OrchArgs::new().tensor(y.tensor()).scalar(step.0 as u64).scalar(n as u64).scalar(seed);
    let (want, edges) = golden(n, seed);
    let zeros = vec![0.0f32; n.max(1) as usize * 16];
    let check = |rep: &RunReport| {
        assert_eq!(rep.tasks, n as u64, "random_dag: tasks completed");
        let got = y.read::<f32>().expect("read y");
        for (i, w) in want.iter().enumerate() {
            let row = &got[i * 16..i * 16 + 16];
            assert!(row.iter().all(|v| v == w), "random_dag: row {i} holds {row:?}, expected {w} (the longest path)");
        }
    };
    println!(
        "random_dag N={n} seed={seed}: {edges} edges ({:.2} per task), rows of 16 f32; rounds {rounds} (after 1 warm-up)",
        edges as f64 / n as f64
    );
    let mut out = Vec::new();
    let mut counts = None;
    let mut hbg = None;
    let cfg = RunConfig::default().with_executor(executor);
    for &rt in runtimes {
        let mut graph = None;
        let mut builds = Vec::new();
        if rt == RuntimeKind::HostBuiltGraph {
            // One build per round (the last one is run); the memory of the first.
            for r in 0..rounds {
                drop(graph.take()); // the previous graph is dropped before the next is built
                let before = reset_peak();
                let t = Instant::now();
                let g = dev.build_program(&prog, &args).expect("build random_dag");
                builds.push(t.elapsed());
                if r == 0 {
                    let retained = (live() - before) as i64;
                    let build_peak = (peak() - before) as i64;
                    counts = Some((retained, build_peak));
                }
                graph = Some(g);
            }
        }
        let mut runs = Vec::new();
        let mut orchs = Vec::new();
        let mut run_peak = 0isize;
        let mut ran_on = Executor::Legacy;
        for r in 0..rounds + 1 {
            y.write(&zeros).expect("clear y");
            let before = reset_peak();
            let t = Instant::now();
            let rep = match &graph {
                Some(g) => dev.run_with(g, &cfg),
                None => dev.run_program(&prog, &args, &cfg.clone().with_runtime(rt)),
            }
            .unwrap_or_else(|e| panic!("random_dag N={n} {}: {e}", rt.name()));
            let el = t.elapsed();
            run_peak = run_peak.max(peak() - before);
            check(&rep);
            ran_on = rep.executor;
            if r >= 1 {
                runs.push(el);
                orchs.push(rep.orchestration.unwrap_or_default());
            }
        }
        let submit = if rt == RuntimeKind::HostBuiltGraph { builds } else { orchs };
        let executor = if rt == RuntimeKind::HostBuiltGraph { ran_on.name() } else { "-" };
        let (run_m, sub_m) = (median(runs.clone()), median(submit.clone()));
        println!(
            "  {:<4} {:<8} run {:>9.1} ms  submit {:>8.1} ms  whole {:>9.1} ms  ({:.2} us/task)  run's peak heap growth {:.0} B/task",
            rt.name(),
            executor,
            us(run_m) / 1e3,
            us(sub_m) / 1e3,
            us(run_m + if rt == RuntimeKind::HostBuiltGraph { sub_m } else { Duration::ZERO }) / 1e3,
            us(run_m) / n as f64,
            run_peak as f64 / n as f64,
        );
        if let (Some(g), Some((retained, build_peak))) = (&graph, counts) {
            let b = g.host_bytes();
            let tensors = n as u64 + edges;
            let record = std::mem::size_of::<pto::runtime::layout::TaskRecord>() as u64;
            let (records, fanout, argrec) = (record * n as u64, 4 * edges, n as u64 * args_record(0) + 64 * tensors);
            let per = |x: f64| x / n as f64;
            println!(
                "  hbg host memory: graph kept {:.1} B/task ({retained} B), build peak {:.1} B/task ({build_peak} B) [counting allocator]",
                per(retained as f64),
                per(build_peak as f64)
            );
            println!("    where the kept bytes go (Graph::host_bytes, B/task):");
            println!(
                "      image           {:>7.1}  (task records {:.1}, fan-out lists {:.1}, argument records {:.1}: {:.2} tensors per task x 64 B + {} B header)",
                per(b.image as f64),
                per(records as f64),
                per(fanout as f64),
                per(argrec as f64),
                tensors as f64 / n as f64,
                args_record(0)
            );
            println!("      resident states {:>7.1}", per(b.resident_states as f64));
            println!("      externals+fixed {:>7.1}", per((b.externals + b.fixed) as f64));
            println!("      accounted       {:>7.1}  of {:.1} measured", per(b.total() as f64), per(retained as f64));
            hbg = Some(HbgMemory {
                retained_bytes: retained,
                retained_bytes_per_task: per(retained as f64),
                build_peak_bytes: build_peak,
                build_peak_bytes_per_task: per(build_peak as f64),
                image: b.image,
                resident_states: b.resident_states,
                externals: b.externals,
                fixed: b.fixed,
                image_task_records: records,
                image_fanout: fanout,
                image_args: argrec,
            });
        }
        out.push(ScaleRuntime {
            runtime: rt.name(),
            executor,
            run: Spread::of(&runs),
            submit: Spread::of(&submit),
            run_peak_heap_bytes_per_task: run_peak as f64 / n as f64,
        });
    }
    let vm_hwm_kb = proc_status_kb("VmHWM:");
    if let Some(kb) = vm_hwm_kb {
        println!("  process peak resident set (VmHWM) {:.1} MB", kb as f64 / 1024.0);
    }
    ScaleReport {
        format_version,
        board: Selected::NAME,
        shape: "random_dag",
        n,
        seed,
        edges,
        rounds,
        runtimes: out,
        hbg_memory: hbg,
        vm_hwm_kb,
    }
}
