//! Half-precision tensors end to end: `f16` and `bf16` (the `half` crate's types, re-exported
//! as `pto::half`) are written and read by the host exactly, loaded and stored by kernels, run
//! on both runtimes and both executors, and recorded by the args dump with their dtype, read
//! back as the same values.

use pto::half::{bf16, f16};
use pto::prelude::*;
use pto::runtime::dump::DumpLevel;
use pto::runtime::graph::Element;
use pto::runtime::host::dump::{Dump, Stage};

/// Values at the edges of each format: zero and negative zero, one, the largest finite value,
/// the smallest subnormal, and an ordinary fraction.
fn f16_values() -> Vec<f16> {
    let mut v = vec![f16::ZERO, f16::NEG_ZERO, f16::ONE, f16::MAX, f16::MIN, f16::from_bits(1), f16::from_f32(0.333)];
    v.resize(16, f16::from_f32(-2.5));
    v
}

fn bf16_values() -> Vec<bf16> {
    let mut v =
        vec![bf16::ZERO, bf16::NEG_ZERO, bf16::ONE, bf16::MAX, bf16::MIN, bf16::from_bits(1), bf16::from_f32(0.333)];
    v.resize(16, bf16::from_f32(-2.5));
    v
}

/// A half-precision element with its arithmetic done in f32, as AICore vector units widen.
trait Half: Element + Copy + PartialEq + std::fmt::Debug {
    fn to(self) -> f32;
    fn from(v: f32) -> Self;
}

impl Half for f16 {
    fn to(self) -> f32 {
        self.to_f32()
    }
    fn from(v: f32) -> Self {
        f16::from_f32(v)
    }
}

impl Half for bf16 {
    fn to(self) -> f32 {
        self.to_f32()
    }
    fn from(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

/// `out = 2 x` over the whole view, elementwise in f32 (exact for every finite input except
/// overflow to infinity at the top of the range, which the golden computes the same way).
fn k_double<T: Half>(k: &mut dyn KernelContext) {
    let x: Vec<T> = k.load(0);
    let y: Vec<T> = x.iter().map(|v| T::from(v.to() * 2.0)).collect();
    k.store(1, &y);
}

fn golden<T: Half>(x: &[T]) -> Vec<T> {
    x.iter().map(|v| T::from(v.to() * 2.0)).collect()
}

/// Orchestration: `out = 2 x` with args x, out and the kernel's func id as scalar 0.
fn orch_double(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    let f = FuncId(a.s(0)? as u16);
    o.submit(Task::aiv(f).input(&a.t(0)?).output(&a.t(1)?))?;
    Ok(())
}

fn scene<T: Half>(name: &str, values: Vec<T>) {
    let dev = pto::open().expect("open the selected board");
    let f = dev.register_kernel(name, CoreType::Aiv, k_double::<T>).unwrap();
    let p = dev.register_orchestration("double", orch_double).unwrap();
    let x = dev.tensor_from(&[values.len() as u32], &values).unwrap();
    assert_eq!(x.read::<T>().unwrap(), values, "{name}: the host's write reads back exactly");
    let out = dev.alloc::<T>(&[values.len() as u32]).unwrap();
    let args = OrchArgs::new().tensor(x.tensor()).tensor(out.tensor()).scalar(f.0 as u64);
    let want = golden(&values);
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        let executors: &[Executor] =
            if rt == RuntimeKind::HostBuiltGraph { &[Executor::Legacy, Executor::Resident] } else { &[Executor::Auto] };
        for &e in executors {
            let dir = std::env::temp_dir().join(format!("pto-half-{}-{name}-{rt:?}-{e}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let cfg = RunConfig::default()
                .with_runtime(rt)
                .with_executor(e)
                .with_dump(Some(DumpLevel::Full))
                .with_dump_dir(&dir);
            let r = match rt {
                RuntimeKind::HostBuiltGraph => dev.run_with(&dev.build_program(&p, &args).unwrap(), &cfg),
                RuntimeKind::TensormapRing => dev.run_program(&p, &args, &cfg),
            };
            let r = r.unwrap_or_else(|err| panic!("{name} on {rt:?}/{e}: {err}"));
            assert_eq!(r.tasks, 1);
            assert_eq!(out.read::<T>().unwrap(), want, "{name} on {rt:?}/{e}: the kernel's result");
            let d = Dump::open(&r.dump.expect("a dump report").dir).unwrap();
            let input = d.find(0, 0, Stage::BeforeDispatch).unwrap();
            assert_eq!(input.dtype, Some(T::DTYPE), "{name}: the record names its dtype");
            assert_eq!(d.data::<T>(input).unwrap(), values, "{name} on {rt:?}/{e}: the input as recorded");
            assert!(d.data::<u16>(input).is_none(), "a payload is not reinterpreted as another dtype");
            let output = d.find(0, 1, Stage::AfterCompletion).unwrap();
            assert_eq!(d.data::<T>(output).unwrap(), want, "{name} on {rt:?}/{e}: the output as recorded");
            let _ = std::fs::remove_dir_all(&dir);
            out.write(&vec![T::from(0.0); values.len()]).unwrap();
        }
    }
}

#[test]
fn f16_tensors_move_through_host_kernels_and_dump_exactly() {
    scene::<f16>("double_f16", f16_values());
}

#[test]
fn bf16_tensors_move_through_host_kernels_and_dump_exactly() {
    scene::<bf16>("double_bf16", bf16_values());
}
