//! The workloads: each uploads its inputs, runs its orchestration on one runtime, and checks
//! the result against a golden computed on the host; [`examples`] lists them by name.

use pto_hal::HostPlatform;
use pto_runtime::host::dump::{Dump, Stage};
use pto_runtime::host::{RingConfig, RunConfig};
use pto_runtime::orch::{OrchArgs, RuntimeKind};

use crate::Device;
use crate::attention;
use crate::outcome::{Failure, Outcome, check_close};
use crate::registry::Kernels;
use crate::run::run_on;

/// Elements of each `vector` tensor.
pub const VECTOR_N: u32 = 16384;

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

/// Elements of each `chain513` tensor.
pub const CHAIN_N: u32 = 4096;

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

/// Check a `chain513` dump taken at [`DumpLevel::Full`](pto_runtime::dump::DumpLevel::Full): exact accounting with nothing
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

/// Side of a `mix` tile.
pub const MIX_TILE: u32 = 32;
/// Tiles in the `mix` workload.
pub const MIX_TILES: u32 = 8;

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

/// Iterations (scopes) of `tiny_rings`.
pub const TINY_ITERS: u32 = 64;
/// Elements per `tiny_rings` row.
pub const TINY_N: u32 = 256;

/// Rings far smaller than the work: every iteration's scope must be reclaimed many times
/// over during the run.
pub fn tiny_ring_config() -> RunConfig {
    RunConfig::default().with_rings(RingConfig::uniform(8, 16 << 10, 16).with_tensormap_entries(32))
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
