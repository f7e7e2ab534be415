//! Graphs and orchestrations several breakage suites run (each suite uses some of them).
#![allow(dead_code, reason = "a module shared by several test crates, each using a part")]

use pto::prelude::*;
use pto::runtime::breakage;
use pto::runtime::host;

/// `add1` on AIV cores (registered on first use).
pub fn add1<P: pto::hal::Platform>(dev: &host::Device<P>) -> FuncId
where
    P::Error: std::fmt::Display,
{
    dev.func("add1").unwrap_or_else(|| dev.register_kernel("add1", CoreType::Aiv, pto_testkit::k_add1).unwrap())
}

/// `add1` on AIC cores (registered on first use).
pub fn add1_aic<P: pto::hal::Platform>(dev: &host::Device<P>) -> FuncId
where
    P::Error: std::fmt::Display,
{
    dev.func("add1_aic").unwrap_or_else(|| dev.register_kernel("add1_aic", CoreType::Aic, pto_testkit::k_add1).unwrap())
}

/// One AIV task per 16-float row of a tensor: each adds 1 (a row is one line: no false
/// sharing).
pub fn rows_graph<P: pto::hal::Platform>(dev: &host::Device<P>, rows: u32) -> (host::DeviceTensor<P>, host::Graph<P>)
where
    P::Error: std::fmt::Display,
{
    let f = add1(dev);
    let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
    let g = dev
        .build(|g| {
            for i in 0..rows {
                g.submit(Task::aiv(f).inout(&y.tensor().view(&[i, 0], &[1, 16])?))?;
            }
            Ok(())
        })
        .unwrap();
    (y, g)
}

/// `len` tasks adding 1 to row 0 of `y`, AIV and AIC in turn (each consumer runs on another
/// core than its producer: a core that took the consumer it released itself would hide a
/// missing write-back in its own program order), then one AIV task per other row.
pub fn chain_and_rows<P: pto::hal::Platform>(
    dev: &host::Device<P>,
    y: &host::DeviceTensor<P>,
    len: u32,
) -> host::Graph<P>
where
    P::Error: std::fmt::Display,
{
    let (aiv, aic) = (add1(dev), add1_aic(dev));
    let rows = y.tensor().shape[0];
    dev.build(|g| {
        for i in 0..len {
            let t = if i % 2 == 0 { Task::aiv(aiv) } else { Task::aic(aic) };
            g.submit(t.inout(&y.tensor().view(&[0, 0], &[1, 16])?))?;
        }
        for r in 1..rows {
            g.submit(Task::aiv(aiv).inout(&y.tensor().view(&[r, 0], &[1, 16])?))?;
        }
        Ok(())
    })
    .unwrap()
}

/// Per iteration, in its own scope: t = x_i + 1 into a scope tensor, y_i = t + 1. With tiny
/// rings, every iteration's argument records reuse the heap bytes of an earlier iteration's.
pub fn reuse_records(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    reuse_records_every(o, a, std::time::Duration::ZERO)
}

/// [`reuse_records`] with the orchestrator behind the cores: it pauses for scalar 1 (µs)
/// before each iteration, so the previous scope's tasks have retired, the empty rings rebase,
/// and each iteration's argument records land in the very heap bytes the previous one's held.
pub fn reuse_records_paced(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    reuse_records_every(o, a, std::time::Duration::from_micros(a.s(1)?))
}

/// [`reuse_records`], pausing for `pace` before each iteration.
fn reuse_records_every(o: &mut Orch<'_>, a: &OrchArgs, pace: std::time::Duration) -> Result<(), OrchFail> {
    let (x, y) = (a.t(0)?, a.t(1)?);
    let f = FuncId(a.s(0)? as u16);
    for i in 0..x.shape[0] {
        if !pace.is_zero() {
            std::thread::sleep(pace);
        }
        o.scope(|s| {
            let t = s.alloc::<f32>(&[1, 16])?;
            s.submit(Task::aiv(f).input(&x.view(&[i, 0], &[1, 16])?).output(&t).scalar_f32(1.0))?;
            s.submit(Task::aiv(f).input(&t).output(&y.view(&[i, 0], &[1, 16])?).scalar_f32(1.0))?;
            Ok(())
        })?;
    }
    Ok(())
}

/// Who runs ahead in the reused-records scene: the two regimes reuse heap bytes differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pace {
    /// The orchestrator as fast as it goes: it fills the rings and waits for space, and
    /// records wrap around the heap.
    Ahead,
    /// The orchestrator 300 µs behind the cores each iteration ([`reuse_records_paced`]):
    /// every iteration's records land in the previous iteration's bytes.
    Behind,
}

/// Every pace, for tests that run the scene in each.
pub const PACES: [Pace; 2] = [Pace::Ahead, Pace::Behind];

/// The reused-records scene on the device-side runtime: 32 rows through [`reuse_records`] (or
/// [`reuse_records_paced`]) on one cluster (two AIV cores, so records come back to a core that
/// cached them) with rings of 4 slots and 2 KiB, on `base`'s other settings, with
/// `SKIP_ARGS_OBSERVE` when `broken`. The run's outcome, `y` read back, and `x` as written (a
/// correct run gives `y = x + 2`).
pub fn run_reused_records<P: pto::hal::Platform>(
    dev: &host::Device<P>,
    base: RunConfig,
    pace: Pace,
    broken: bool,
) -> (Result<RunReport, Error>, Vec<f32>, Vec<f32>)
where
    P::Error: std::fmt::Display,
{
    let f = dev
        .func("add_scalar")
        .unwrap_or_else(|| dev.register_kernel("add_scalar", CoreType::Aiv, pto_testkit::k_add_scalar).unwrap());
    let p = match pace {
        Pace::Ahead => dev.register_orchestration("reuse_records", reuse_records),
        Pace::Behind => dev.register_orchestration("reuse_records_paced", reuse_records_paced),
    }
    .unwrap();
    let rows = 32u32;
    let x_h: Vec<f32> = (0..rows * 16).map(|i| i as f32).collect();
    let x = dev.tensor_from(&[rows, 16], &x_h).unwrap();
    let y = dev.alloc::<f32>(&[rows, 16]).unwrap();
    let args = OrchArgs::new().tensor(x.tensor()).tensor(y.tensor()).scalar(f.0 as u64).scalar(300);
    let cfg =
        base.with_runtime(RuntimeKind::TensormapRing).with_clusters(1).with_rings(RingConfig::uniform(4, 2048, 16));
    let _b = broken.then(|| breakage::activate(breakage::SKIP_ARGS_OBSERVE));
    let r = dev.run_program(&p, &args, &cfg);
    (r, y.read::<f32>().unwrap(), x_h)
}
