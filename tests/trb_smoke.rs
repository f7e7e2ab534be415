use pto::prelude::*;

fn k_add(k: &mut dyn KernelContext) {
    let a = k.load::<f32>(0);
    let b = k.load::<f32>(1);
    k.store(2, &a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<f32>>());
}

fn orch(o: &mut Orch<'_>, args: &OrchArgs) -> Result<(), OrchFail> {
    let (a, b, out) = (args.t(0)?, args.t(1)?, args.t(2)?);
    let add = FuncId(args.s(0)? as u16);
    let c = o.alloc::<f32>(&[16])?;
    o.submit(Task::aiv(add).input(&a).input(&b).output(&c))?;
    o.scope(|s| {
        let d = s.alloc::<f32>(&[16])?;
        s.submit(Task::aiv(add).input(&c).input(&c).output(&d))?;
        s.submit(Task::aiv(add).input(&d).input(&a).output(&out))?;
        Ok(())
    })
}

#[test]
fn smoke_both_runtimes() {
    let dev = pto::open().unwrap();
    let add = dev.register_kernel("add", CoreType::Aiv, k_add).unwrap();
    let prog = dev.register_orchestration("smoke", orch).unwrap();
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        let a = dev.tensor_from(&[16], &[1.0f32; 16]).unwrap();
        let b = dev.tensor_from(&[16], &[2.0f32; 16]).unwrap();
        let out = dev.alloc::<f32>(&[16]).unwrap();
        let args = OrchArgs::new().tensor(a.tensor()).tensor(b.tensor()).tensor(out.tensor()).scalar(add.0 as u64);
        let cfg = RunConfig { runtime: rt, ..RunConfig::default() };
        let r = dev.run_program(&prog, &args, &cfg).unwrap();
        assert_eq!(r.tasks, 3, "{rt:?}");
        assert_eq!(out.read::<f32>().unwrap(), vec![7.0f32; 16], "{rt:?}");
    }
}
