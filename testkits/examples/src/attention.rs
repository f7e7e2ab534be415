//! Two larger workloads built from tile kernels: a batched tile GEMM (`bgemm`) and a small
//! paged attention (`paged_attention_small`). Like the workloads of the crate root, each one is a
//! set of host tensors, one orchestration written once for both runtimes and a golden
//! computed on the host.
//!
//! The kernels are registered by [`AttnKernels::register`], which looks every name up first,
//! so it may be called any number of times on one device. Func ids are whatever registration
//! handed out, so the orchestrations receive them as scalar arguments instead of constants.
use pto_hal::{CoreType, HostPlatform, KernelContext, KernelContextExt};
use pto_runtime::codes::OrchError;
use pto_runtime::graph::{FuncId, Task, Tensor};
use pto_runtime::host::{Error, Program, RunConfig};
use pto_runtime::kernel::KernelIo;
use pto_runtime::orch::{Orch, OrchArgs, OrchFail, RuntimeKind};

use crate::{Device, Failure, Kernels, Outcome, run_on};

// ---------------------------------------------------------------- kernel helpers

/// `(rows, cols)` of tensor argument `i`, read from its last two dimensions; any leading
/// dimension must have extent 1 (a 2-D tile inside a higher-rank tensor).
fn tile_dims(k: &dyn KernelContext, i: usize) -> (usize, usize) {
    let t = k.arg(i);
    let nd = t.ndims as usize;
    if nd < 2 || t.shape[..nd - 2].iter().any(|&d| d != 1) {
        panic!("tensor argument {i} is not a 2-D tile (shape {:?})", &t.shape[..nd]);
    }
    (t.shape[nd - 2] as usize, t.shape[nd - 1] as usize)
}

// ---------------------------------------------------------------- kernels

/// AIC: `C = A · B` for tiles A `[m, k]`, B `[k, n]`, C `[m, n]` (args: A, B, C).
pub fn k_tile_matmul(k: &mut dyn KernelContext) {
    let (m, kd) = tile_dims(k, 0);
    let (kb, n) = tile_dims(k, 1);
    let (mc, nc) = tile_dims(k, 2);
    if kd != kb || m != mc || n != nc {
        panic!("tile matmul shapes disagree: [{m}, {kd}] · [{kb}, {n}] -> [{mc}, {nc}]");
    }
    let a = k.load::<f32>(0);
    let b = k.load::<f32>(1);
    let mut c = vec![0.0f32; m * n];
    for (a_row, c_row) in a.chunks_exact(kd).zip(c.chunks_exact_mut(n)) {
        for (&av, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
            for (cv, &bv) in c_row.iter_mut().zip(b_row) {
                *cv += av * bv;
            }
        }
    }
    k.store(2, &c);
}

/// AIV: `C += P` element-wise (args: P in, C inout; any shapes of equal element count).
pub fn k_tile_accumulate(k: &mut dyn KernelContext) {
    let p = k.load::<f32>(0);
    let mut c = k.load::<f32>(1);
    if p.len() != c.len() {
        panic!("accumulate: {} elements into {}", p.len(), c.len());
    }
    for (cv, pv) in c.iter_mut().zip(&p) {
        *cv += pv;
    }
    k.store(1, &c);
}

/// AIC: `S = Q · Kᵀ · scale` for Q `[r, d]`, K `[t, d]`, S `[r, t]` (args: Q, K, S; scalar 0:
/// the scale as `f32`).
pub fn k_attn_qk(k: &mut dyn KernelContext) {
    let (r, d) = tile_dims(k, 0);
    let (t, dk) = tile_dims(k, 1);
    let (rs, ts) = tile_dims(k, 2);
    if d != dk || r != rs || t != ts {
        panic!("qk shapes disagree: Q [{r}, {d}], K [{t}, {dk}], S [{rs}, {ts}]");
    }
    let scale = k.scalar_f32(0);
    let q = k.load::<f32>(0);
    let kt = k.load::<f32>(1);
    let s: Vec<f32> =
        q.chunks_exact(d).flat_map(|q_row| kt.chunks_exact(d).map(move |k_row| scale * dot(q_row, k_row))).collect();
    k.store(2, &s);
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// AIV: one online-softmax step over a block of scores. Args: S `[r, t]` in, m `[r, 1]`
/// inout (running row maximum), l `[r, 1]` inout (running row sum), P `[r, t]` out
/// (`exp(S - m_new)`), alpha `[r, 1]` out (`exp(m_old - m_new)`, the factor that rescales
/// what was accumulated under the old maximum).
pub fn k_attn_softmax_step(k: &mut dyn KernelContext) {
    let (rows, cols) = tile_dims(k, 0);
    let s = k.load::<f32>(0);
    let mut m = k.load::<f32>(1);
    let mut l = k.load::<f32>(2);
    if m.len() != rows || l.len() != rows {
        panic!("softmax step: {rows} score rows, state of {} / {} rows", m.len(), l.len());
    }
    let mut p = vec![0.0f32; rows * cols];
    let mut alpha = vec![0.0f32; rows];
    for (r, (s_row, p_row)) in s.chunks_exact(cols).zip(p.chunks_exact_mut(cols)).enumerate() {
        let m_new = s_row.iter().fold(m[r], |acc, &x| acc.max(x));
        let mut sum = 0.0f32;
        for (pv, &sv) in p_row.iter_mut().zip(s_row) {
            *pv = (sv - m_new).exp();
            sum += *pv;
        }
        // exp(-inf) = 0 on the first block: nothing was accumulated yet.
        alpha[r] = (m[r] - m_new).exp();
        l[r] = l[r] * alpha[r] + sum;
        m[r] = m_new;
    }
    k.store(1, &m);
    k.store(2, &l);
    k.store(3, &p);
    k.store(4, &alpha);
}

/// AIV: `O = O · alpha + O_part`, alpha per row. Args: O_part `[r, d]` in, alpha `[r, 1]` in,
/// O `[r, d]` inout.
pub fn k_attn_rescale_add(k: &mut dyn KernelContext) {
    let (_, d) = tile_dims(k, 2);
    let part = k.load::<f32>(0);
    let alpha = k.load::<f32>(1);
    let mut o = k.load::<f32>(2);
    for ((o_row, p_row), &a) in o.chunks_exact_mut(d).zip(part.chunks_exact(d)).zip(&alpha) {
        for (ov, &pv) in o_row.iter_mut().zip(p_row) {
            *ov = *ov * a + pv;
        }
    }
    k.store(2, &o);
}

/// AIV: the starting online-softmax state. Args (all out): m (filled with `-inf`), l and O
/// (filled with zeros).
pub fn k_attn_init_state(k: &mut dyn KernelContext) {
    let count = |i: usize| k.arg(i).elem_count() as usize;
    let (nm, nl, no) = (count(0), count(1), count(2));
    k.store(0, &vec![f32::NEG_INFINITY; nm]);
    k.store(1, &vec![0.0f32; nl]);
    k.store(2, &vec![0.0f32; no]);
}

/// AIV: `out = O / l`, l per row. Args: O `[r, d]` in, l `[r, 1]` in, out `[r, d]` out.
pub fn k_attn_finalize(k: &mut dyn KernelContext) {
    let (_, d) = tile_dims(k, 0);
    let o = k.load::<f32>(0);
    let l = k.load::<f32>(1);
    let out: Vec<f32> = o.chunks_exact(d).zip(&l).flat_map(|(row, &lv)| row.iter().map(move |v| v / lv)).collect();
    k.store(2, &out);
}

// ---------------------------------------------------------------- registration

/// The func ids of the attention kernels on one device, and the two orchestration programs.
#[derive(Clone, Debug)]
pub struct AttnKernels {
    /// AIC tile matmul ([`k_tile_matmul`]).
    pub matmul: FuncId,
    /// AIV tile accumulate ([`k_tile_accumulate`]).
    pub accumulate: FuncId,
    /// AIC scaled `Q · Kᵀ` ([`k_attn_qk`]).
    pub qk: FuncId,
    /// AIV online-softmax step ([`k_attn_softmax_step`]).
    pub softmax: FuncId,
    /// AIV rescale-and-add of the output accumulator ([`k_attn_rescale_add`]).
    pub rescale: FuncId,
    /// AIV state initialisation ([`k_attn_init_state`]).
    pub init: FuncId,
    /// AIV final normalisation ([`k_attn_finalize`]).
    pub finalize: FuncId,
    /// The `bgemm` orchestration ([`orch_bgemm`]).
    pub bgemm: Program,
    /// The `paged_attention_small` orchestration ([`orch_paged_attention`]).
    pub paged_attention: Program,
}

/// The func id of `name`, registering `kernel` for `core` first if nobody has yet.
fn kernel_id<P: HostPlatform>(
    dev: &Device<P>,
    name: &str,
    core: CoreType,
    kernel: fn(&mut dyn KernelContext),
) -> Result<FuncId, Error> {
    match dev.func(name) {
        Some(id) => Ok(id),
        None => dev.register_kernel(name, core, kernel),
    }
}

impl AttnKernels {
    /// Register the attention kernels and programs on `dev` (kernels already registered under
    /// these names are reused, so calling this again is cheap and returns the same ids).
    pub fn register<P: HostPlatform>(dev: &Device<P>) -> Result<AttnKernels, Error> {
        Ok(AttnKernels {
            matmul: kernel_id(dev, "attn_tile_matmul", CoreType::Aic, k_tile_matmul)?,
            accumulate: kernel_id(dev, "attn_tile_accumulate", CoreType::Aiv, k_tile_accumulate)?,
            qk: kernel_id(dev, "attn_qk", CoreType::Aic, k_attn_qk)?,
            softmax: kernel_id(dev, "attn_softmax_step", CoreType::Aiv, k_attn_softmax_step)?,
            rescale: kernel_id(dev, "attn_rescale_add", CoreType::Aiv, k_attn_rescale_add)?,
            init: kernel_id(dev, "attn_init_state", CoreType::Aiv, k_attn_init_state)?,
            finalize: kernel_id(dev, "attn_finalize", CoreType::Aiv, k_attn_finalize)?,
            bgemm: dev.register_orchestration("bgemm", orch_bgemm)?,
            paged_attention: dev.register_orchestration("paged_attention_small", orch_paged_attention)?,
        })
    }
}

// ---------------------------------------------------------------- orchestration helpers

fn bad_args(detail: u64) -> OrchFail {
    OrchFail::Code { code: OrchError::InvalidArgs, detail }
}

/// Scalar `i` of `args` as a func id.
fn func_arg(args: &OrchArgs, i: usize) -> Result<FuncId, OrchFail> {
    let v = args.s(i)?;
    u16::try_from(v).map(FuncId).map_err(|_| bad_args(0x100 + i as u64))
}

/// Scalar `i` of `args` as a `u32`.
fn u32_arg(args: &OrchArgs, i: usize) -> Result<u32, OrchFail> {
    u32::try_from(args.s(i)?).map_err(|_| bad_args(0x100 + i as u64))
}

// ---------------------------------------------------------------- golden comparison

/// Compare `got` with `want`: each value within `atol + rtol · |want|` (NaN never passes).
/// Returns the number of values checked.
pub fn check_tol(name: &str, got: &[f32], want: &[f32], rtol: f32, atol: f32) -> Result<usize, String> {
    if got.len() != want.len() {
        return Err(format!("{name}: {} values, golden has {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= atol + rtol * w.abs();
        if !ok {
            return Err(format!("{name}: value {i} is {g}, golden {w}"));
        }
    }
    Ok(got.len())
}

/// Deterministic pseudo-random values in `[-1, 1)` (a 32-bit integer hash of the index).
fn pattern(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| {
            let mut x = i.wrapping_mul(0x9E37_79B9) ^ seed.wrapping_mul(0x85EB_CA6B);
            x ^= x >> 16;
            x = x.wrapping_mul(0x7FEB_352D);
            x ^= x >> 15;
            (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

// ---------------------------------------------------------------- bgemm

/// Tile edge of the `bgemm` workload.
pub const BGEMM_TILE: u32 = 16;
/// Batch of the `bgemm` workload.
pub const BGEMM_BATCH: u32 = 4;
/// Output tiles per dimension (M and N, in tiles).
pub const BGEMM_MN_TILES: u32 = 4;
/// Reduction tiles (K, in tiles).
pub const BGEMM_K_TILES: u32 = 8;
/// Tasks of the `bgemm` workload: one AIC matmul and one AIV accumulate per (b, i, j, k).
pub const BGEMM_TASKS: u64 = 2 * (BGEMM_BATCH * BGEMM_MN_TILES * BGEMM_MN_TILES * BGEMM_K_TILES) as u64;

/// `C[b] += A[b] · B[b]` over square tiles. Args: A `[batch, M, K]`, B `[batch, K, N]`,
/// C `[batch, M, N]`; scalars: matmul func id, accumulate func id, tile edge. Per output
/// tile, in its own scope, per k-step: an AIC task multiplies two tiles into a scope tile
/// P, then an AIV task adds P into the C tile (inout: the tensor map chains the k-steps).
pub fn orch_bgemm(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, c) = (args.t(0)?, args.t(1)?, args.t(2)?);
    let (f_mm, f_acc) = (func_arg(args, 0)?, func_arg(args, 1)?);
    let t = u32_arg(args, 2)?;
    if a.ndims != 3 || b.ndims != 3 || c.ndims != 3 || t == 0 {
        return Err(bad_args(1));
    }
    let (batch, m, kd, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
    if b.shape[..2] != [batch, kd] || c.shape[..3] != [batch, m, n] || m % t != 0 || kd % t != 0 || n % t != 0 {
        return Err(bad_args(2));
    }
    let tile = |x: &Tensor, bi: u32, r: u32, col: u32| x.view(&[bi, r * t, col * t], &[1, t, t]);
    for bi in 0..batch {
        for i in 0..m / t {
            for j in 0..n / t {
                o.scope(|s| {
                    let c_tile = tile(&c, bi, i, j)?;
                    for kk in 0..kd / t {
                        let p = s.alloc::<f32>(&[t, t])?;
                        s.submit(Task::aic(f_mm).input(&tile(&a, bi, i, kk)?).input(&tile(&b, bi, kk, j)?).output(&p))?;
                        s.submit(Task::aiv(f_acc).input(&p).inout(&c_tile))?;
                    }
                    Ok(())
                })?;
            }
        }
    }
    Ok(())
}

/// The `bgemm` workload on `rt` (registers the attention kernels itself; `_k` is unused).
pub fn bgemm<P: HostPlatform>(dev: &Device<P>, _k: &Kernels, rt: RuntimeKind) -> Result<Outcome, Failure> {
    let ak = AttnKernels::register(dev)?;
    let t = BGEMM_TILE;
    let (batch, m, n, kd) = (BGEMM_BATCH, BGEMM_MN_TILES * t, BGEMM_MN_TILES * t, BGEMM_K_TILES * t);
    let (bs, ms, ns, ks) = (batch as usize, m as usize, n as usize, kd as usize);
    let a_h = pattern(bs * ms * ks, 11);
    let b_h = pattern(bs * ks * ns, 23);
    let c0_h = pattern(bs * ms * ns, 37);
    let a = dev.tensor_from(&[batch, m, kd], &a_h)?;
    let b = dev.tensor_from(&[batch, kd, n], &b_h)?;
    let c = dev.tensor_from(&[batch, m, n], &c0_h)?;
    let args = OrchArgs::new()
        .tensor(a.tensor())
        .tensor(b.tensor())
        .tensor(c.tensor())
        .scalar(ak.matmul.0 as u64)
        .scalar(ak.accumulate.0 as u64)
        .scalar(t as u64);
    let (report, build) = run_on(dev, &ak.bgemm, &args, rt, &RunConfig::default())?;
    let mut golden = vec![0.0f32; bs * ms * ns];
    for bi in 0..bs {
        let (ab, bb, cb) = (&a_h[bi * ms * ks..], &b_h[bi * ks * ns..], bi * ms * ns);
        for i in 0..ms {
            for j in 0..ns {
                let s: f64 = (0..ks).map(|p| ab[i * ks + p] as f64 * bb[p * ns + j] as f64).sum();
                golden[cb + i * ns + j] = (c0_h[cb + i * ns + j] as f64 + s) as f32;
            }
        }
    }
    let checked = check_tol("bgemm C", &c.read::<f32>()?, &golden, 1e-4, 1e-4).map_err(Failure::Golden)?;
    Ok(Outcome { name: "bgemm".into(), runtime: rt, report, build, checked })
}

// ---------------------------------------------------------------- paged_attention_small

/// Head dimension.
pub const PA_HEAD_DIM: u32 = 16;
/// Tokens per KV block.
pub const PA_BLOCK: u32 = 16;
/// Query rows per sequence.
pub const PA_Q_ROWS: u32 = 16;
/// Physical KV blocks in the shared cache (some unused).
pub const PA_PHYS_BLOCKS: u32 = 12;
/// Per sequence, the physical block of each logical KV block.
pub const PA_BLOCK_TABLE: [&[u32]; 3] = [&[7, 2], &[0, 10, 5], &[3, 11, 8, 1]];
/// Tasks of `paged_attention_small`: per sequence an init and a finalise, per KV block QK,
/// softmax step, PV and update.
pub const PA_TASKS: u64 = {
    let mut blocks = 0;
    let mut s = 0;
    while s < PA_BLOCK_TABLE.len() {
        blocks += PA_BLOCK_TABLE[s].len();
        s += 1;
    }
    (2 * PA_BLOCK_TABLE.len() + 4 * blocks) as u64
};

/// Scalars of the paged-attention orchestration, in order.
struct PaArgs {
    qk: FuncId,
    softmax: FuncId,
    matmul: FuncId,
    rescale: FuncId,
    init: FuncId,
    finalize: FuncId,
    scale: f32,
    /// Flattened block table: per sequence its block count, then its physical blocks.
    table: Vec<u32>,
}

/// Scalars: qk, softmax, matmul, rescale, init, finalize func ids; the scale (`f32` bits);
/// the sequence count; per sequence its block count then its physical block ids.
fn pa_args(args: &OrchArgs) -> Result<PaArgs, OrchFail> {
    let scale = f32::from_bits(u32_arg(args, 6)?);
    let table = (8..args.scalars().len()).map(|i| u32_arg(args, i)).collect::<Result<Vec<_>, _>>()?;
    Ok(PaArgs {
        qk: func_arg(args, 0)?,
        softmax: func_arg(args, 1)?,
        matmul: func_arg(args, 2)?,
        rescale: func_arg(args, 3)?,
        init: func_arg(args, 4)?,
        finalize: func_arg(args, 5)?,
        scale,
        table,
    })
}

/// Paged attention over a shared KV cache. Args: Q `[seqs · r, d]`, K cache and V cache
/// `[phys_blocks · t, d]`, out `[seqs · r, d]`; scalars as `pa_args` reads them. Per
/// sequence, in its own scope: init the state (m, l, O), then per KV block QK (AIC), online
/// softmax step (AIV), PV (AIC) and rescale-add into O (AIV) — the state is inout, so the
/// blocks chain through the tensor map — and finally out = O / l (AIV).
pub fn orch_paged_attention(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (q_all, k_cache, v_cache, out) = (args.t(0)?, args.t(1)?, args.t(2)?, args.t(3)?);
    let pa = pa_args(args)?;
    let seqs = u32_arg(args, 7)?;
    if seqs == 0 || q_all.ndims != 2 || q_all.shape[0] % seqs != 0 || k_cache.ndims != 2 || v_cache.ndims != 2 {
        return Err(bad_args(1));
    }
    let (r, d) = (q_all.shape[0] / seqs, q_all.shape[1]);
    let t = PA_BLOCK;
    let mut at = 0usize;
    for seq in 0..seqs {
        let n_blocks = *pa.table.get(at).ok_or(bad_args(2))? as usize;
        let blocks = pa.table.get(at + 1..at + 1 + n_blocks).ok_or(bad_args(3))?;
        at += 1 + n_blocks;
        o.scope(|s| {
            let q = q_all.view(&[seq * r, 0], &[r, d])?;
            let m = s.alloc::<f32>(&[r, 1])?;
            let l = s.alloc::<f32>(&[r, 1])?;
            let acc = s.alloc::<f32>(&[r, d])?;
            s.submit(Task::aiv(pa.init).output(&m).output(&l).output(&acc))?;
            for &phys in blocks {
                let k_blk = k_cache.view(&[phys * t, 0], &[t, d])?;
                let v_blk = v_cache.view(&[phys * t, 0], &[t, d])?;
                let scores = s.alloc::<f32>(&[r, t])?;
                let p = s.alloc::<f32>(&[r, t])?;
                let alpha = s.alloc::<f32>(&[r, 1])?;
                let part = s.alloc::<f32>(&[r, d])?;
                s.submit(Task::aic(pa.qk).input(&q).input(&k_blk).output(&scores).scalar_f32(pa.scale))?;
                s.submit(Task::aiv(pa.softmax).input(&scores).inout(&m).inout(&l).output(&p).output(&alpha))?;
                s.submit(Task::aic(pa.matmul).input(&p).input(&v_blk).output(&part))?;
                s.submit(Task::aiv(pa.rescale).input(&part).input(&alpha).inout(&acc))?;
            }
            s.submit(Task::aiv(pa.finalize).input(&acc).input(&l).output(&out.view(&[seq * r, 0], &[r, d])?))?;
            Ok(())
        })?;
    }
    Ok(())
}

/// Host attention of one sequence: `softmax(Q · Kᵀ · scale) · V` over its gathered rows.
fn host_attention(q: &[f32], k: &[f32], v: &[f32], d: usize, scale: f64) -> Vec<f32> {
    let mut out = Vec::with_capacity(q.len());
    for q_row in q.chunks_exact(d) {
        let scores: Vec<f64> = k
            .chunks_exact(d)
            .map(|k_row| scale * q_row.iter().zip(k_row).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>())
            .collect();
        let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
        let total: f64 = w.iter().sum();
        for c in 0..d {
            let acc: f64 = w.iter().zip(v.chunks_exact(d)).map(|(wi, v_row)| wi * v_row[c] as f64).sum();
            out.push((acc / total) as f32);
        }
    }
    out
}

/// The `paged_attention_small` workload on `rt` (registers the attention kernels itself;
/// `_k` is unused).
pub fn paged_attention_small<P: HostPlatform>(
    dev: &Device<P>,
    _k: &Kernels,
    rt: RuntimeKind,
) -> Result<Outcome, Failure> {
    let ak = AttnKernels::register(dev)?;
    let (d, t, r) = (PA_HEAD_DIM, PA_BLOCK, PA_Q_ROWS);
    let seqs = PA_BLOCK_TABLE.len() as u32;
    let (ds, ts, rs) = (d as usize, t as usize, r as usize);
    let scale = 1.0 / (d as f32).sqrt();
    let q_h: Vec<f32> = pattern((seqs * r * d) as usize, 101).iter().map(|x| 2.0 * x).collect();
    let mut k_h = pattern((PA_PHYS_BLOCKS * t * d) as usize, 202);
    let mut v_h = pattern((PA_PHYS_BLOCKS * t * d) as usize, 303);
    // Blocks no sequence maps hold values that would spoil any output that read them.
    for phys in 0..PA_PHYS_BLOCKS {
        if !PA_BLOCK_TABLE.iter().any(|b| b.contains(&phys)) {
            let rows = phys as usize * ts * ds..(phys as usize + 1) * ts * ds;
            k_h[rows.clone()].fill(40.0);
            v_h[rows].fill(-1000.0);
        }
    }
    let q = dev.tensor_from(&[seqs * r, d], &q_h)?;
    let kc = dev.tensor_from(&[PA_PHYS_BLOCKS * t, d], &k_h)?;
    let vc = dev.tensor_from(&[PA_PHYS_BLOCKS * t, d], &v_h)?;
    let out = dev.alloc::<f32>(&[seqs * r, d])?;
    let mut args = OrchArgs::new().tensor(q.tensor()).tensor(kc.tensor()).tensor(vc.tensor()).tensor(out.tensor());
    for f in [ak.qk, ak.softmax, ak.matmul, ak.rescale, ak.init, ak.finalize] {
        args = args.scalar(f.0 as u64);
    }
    args = args.scalar(scale.to_bits() as u64).scalar(seqs as u64);
    for blocks in PA_BLOCK_TABLE {
        args = args.scalar(blocks.len() as u64);
        for &b in blocks {
            args = args.scalar(b as u64);
        }
    }
    let (report, build) = run_on(dev, &ak.paged_attention, &args, rt, &RunConfig::default())?;
    let mut golden = Vec::with_capacity(q_h.len());
    for (seq, blocks) in PA_BLOCK_TABLE.iter().enumerate() {
        let gather = |cache: &[f32]| -> Vec<f32> {
            blocks
                .iter()
                .flat_map(|&b| cache[b as usize * ts * ds..(b as usize + 1) * ts * ds].iter().copied())
                .collect()
        };
        let q_seq = &q_h[seq * rs * ds..(seq + 1) * rs * ds];
        golden.extend(host_attention(q_seq, &gather(&k_h), &gather(&v_h), ds, scale as f64));
    }
    let checked =
        check_tol("paged_attention out", &out.read::<f32>()?, &golden, 1e-4, 1e-5).map_err(Failure::Golden)?;
    Ok(Outcome { name: "paged_attention_small".into(), runtime: rt, report, build, checked })
}
