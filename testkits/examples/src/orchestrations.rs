//! The orchestrations the workloads register, each written once and run on both runtimes: on the
//! host it builds the graph, on the device it submits as it goes. [`ShapeKind`] is what
//! [`orch_shape`] decodes from its first scalar.

use pto_runtime::graph::{Task, Tensor};
use pto_runtime::orch::{Orch, OrchArgs, OrchFail};

use crate::kernels::f;

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
