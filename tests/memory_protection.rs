//! Memory protection in the simulator, on by default: a kernel touches only its task's views, in
//! their directions. A raw GM access outside them is refused — nothing lands — and fails the run
//! as a KERNEL_FAULT naming the task, the core and the access, on both runtimes, even when the
//! kernel catches the panic itself. With protection off the same device runs legal kernels
//! unchanged (and lets the illegal access through).

use std::panic::AssertUnwindSafe;

use pto::SelectedPlatform;
use pto::hal::GmAddr;
use pto::prelude::*;
use pto::runtime::codes::{DeviceFault, Site};
use pto::runtime::host::{DeviceError, Timeouts};
use pto_sim::{CacheModel, SimConfig};

const RUNTIMES: [RuntimeKind; 2] = [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing];
const IN: u64 = 0;
const OUT: u64 = 1;
const INOUT: u64 = 2;
/// What the raw writes store.
const MARK: u32 = 0xdead_beef;

// ---------------------------------------------------------------- kernels

fn k_nop(_k: &mut dyn KernelContext) {}

/// Task scalars `[arg, byte offset]`: store `MARK` raw at `arg.addr + offset`.
fn k_raw_write(k: &mut dyn KernelContext) {
    let t = k.arg(k.scalar_arg(0) as usize);
    k.gm().write(GmAddr(t.addr.0.wrapping_add(k.scalar_arg(1))), &MARK.to_le_bytes());
}

/// Task scalars `[arg, byte offset]`: load 4 bytes raw from `arg.addr + offset`.
fn k_raw_read(k: &mut dyn KernelContext) {
    let t = k.arg(k.scalar_arg(0) as usize);
    let mut b = [0u8; 4];
    k.gm().read(GmAddr(t.addr.0.wrapping_add(k.scalar_arg(1))), &mut b);
}

/// Argument 0 is a strided f32 column: store `100 + r` raw into each element `r`; then, when
/// scalar 0 is 1, store into the gap right after element 0.
fn k_column(k: &mut dyn KernelContext) {
    let t = k.arg(0);
    let step = t.strides[0] as u64 * t.elem_bytes as u64;
    for r in 0..t.shape[0] as u64 {
        k.gm().write(t.addr.offset(r * step), &(100.0 + r as f32).to_le_bytes());
    }
    if k.scalar_arg(0) == 1 {
        k.gm().write(t.addr.offset(t.elem_bytes as u64), &MARK.to_le_bytes());
    }
}

/// Writes one element past argument 0, catches the panic, then stores 1.0 into argument 0
/// legally and returns normally.
fn k_catches(k: &mut dyn KernelContext) {
    let t = k.arg(0);
    let past = t.addr.offset(t.elem_count() * t.elem_bytes as u64);
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| k.gm().write(past, &MARK.to_le_bytes())));
    if r.is_ok() {
        panic!("the illegal write went through");
    }
    k.store(0, &vec![1.0f32; t.elem_count() as usize]);
}

/// y += 1 through the typed accessors (INOUT).
fn k_add1(k: &mut dyn KernelContext) {
    let y: Vec<f32> = k.load::<f32>(0).into_iter().map(|v| v + 1.0).collect();
    k.store(0, &y);
}

/// Scalars `[nop, func, n, dir_0 .. dir_n-1, task scalars..]`: task 0 runs `nop`, task 1 runs
/// `func` over the tensors in their directions with the task scalars.
fn two_tasks(o: &mut Orch<'_>, a: &OrchArgs) -> Result<(), OrchFail> {
    o.submit(Task::aiv(FuncId(a.s(0)? as u16)))?;
    let mut t = Task::aiv(FuncId(a.s(1)? as u16));
    let n = a.s(2)? as usize;
    for i in 0..n {
        let dir = match a.s(3 + i)? {
            IN => Direction::In,
            OUT => Direction::Out,
            _ => Direction::InOut,
        };
        t = t.arg(&a.t(i)?, dir);
    }
    for &v in &a.scalars()[3 + n..] {
        t = t.scalar(v);
    }
    o.submit(t)?;
    Ok(())
}

struct Kernels {
    nop: FuncId,
    raw_write: FuncId,
    raw_read: FuncId,
    column: FuncId,
    catches: FuncId,
    add1: FuncId,
    program: Program,
}

fn register(dev: &Device) -> Kernels {
    Kernels {
        nop: dev.register_kernel("nop", CoreType::Aiv, k_nop).unwrap(),
        raw_write: dev.register_kernel("raw_write", CoreType::Aiv, k_raw_write).unwrap(),
        raw_read: dev.register_kernel("raw_read", CoreType::Aiv, k_raw_read).unwrap(),
        column: dev.register_kernel("column", CoreType::Aiv, k_column).unwrap(),
        catches: dev.register_kernel("catches", CoreType::Aiv, k_catches).unwrap(),
        add1: dev.register_kernel("add1", CoreType::Aiv, k_add1).unwrap(),
        program: dev.register_orchestration("two_tasks", two_tasks).unwrap(),
    }
}

/// The selected board with protection on (whatever `PTO_SIM_PROTECT` says).
fn device() -> (Device, Kernels) {
    let dev = pto::open().expect("open the selected board");
    dev.platform().set_protection(true).unwrap();
    let k = register(&dev);
    (dev, k)
}

/// Run task 1 = `func` over `tensors` (with directions) and `scalars` on `rt`.
fn run(
    dev: &Device,
    k: &Kernels,
    rt: RuntimeKind,
    func: FuncId,
    tensors: &[(Tensor, u64)],
    scalars: &[u64],
) -> Result<RunReport, Error> {
    let mut args = OrchArgs::new().scalar(k.nop.0 as u64).scalar(func.0 as u64).scalar(tensors.len() as u64);
    for &(_, d) in tensors {
        args = args.scalar(d);
    }
    for &s in scalars {
        args = args.scalar(s);
    }
    for &(t, _) in tensors {
        args = args.tensor(t);
    }
    dev.run_program(&k.program, &args, &RunConfig::default().with_runtime(rt))
}

/// The run failed with KERNEL_FAULT of task 1 on an AIV core; its message.
fn kernel_fault(dev: &Device, rt: RuntimeKind, r: Result<RunReport, Error>) -> String {
    let e = r.err().unwrap_or_else(|| panic!("{rt:?}: the run succeeded"));
    assert_eq!(e.code(), Some(ErrorCode::Device(DeviceFault::KernelFault)), "{rt:?}: {e}");
    let Error::Device(DeviceError { site, task, core, message, .. }) = &e else { unreachable!() };
    assert_eq!(*site, Site::Kernel, "{rt:?}: {e}");
    assert_eq!(*task, Some(1), "{rt:?}: the fault names the task: {e}");
    let core = core.unwrap_or_else(|| panic!("{rt:?}: the fault names its core: {e}"));
    assert!(core >= dev.topology().clusters && core < dev.topology().workers(), "{rt:?}: an AIV core, got {core}");
    assert!(e.to_string().contains("KERNEL_FAULT"), "{e}");
    message.clone()
}

fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// The device still runs a legal kernel on both runtimes.
fn still_works(dev: &Device, k: &Kernels) {
    for rt in RUNTIMES {
        let y = dev.alloc::<f32>(&[16]).unwrap();
        y.write(&iota(16)).unwrap();
        run(dev, k, rt, k.add1, &[(y.tensor(), INOUT)], &[]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        assert_eq!(y.read::<f32>().unwrap(), (1..=16).map(|i| i as f32).collect::<Vec<_>>(), "{rt:?}");
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn protection_is_on_by_default() {
    assert!(SimConfig::default().protect);
    let dev = pto::open().unwrap();
    assert!(dev.platform().config().protect);
    if std::env::var_os("PTO_SIM_PROTECT").is_none() {
        assert!(dev.platform().protection());
    }
}

#[test]
fn a_raw_write_one_element_past_the_output_is_a_kernel_fault_and_lands_nowhere() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let y = dev.alloc::<f32>(&[2, 16]).unwrap();
        y.write(&iota(32)).unwrap();
        let row0 = y.tensor().view(&[0, 0], &[1, 16]).unwrap();
        // The last element of the view: legal.
        run(&dev, &k, rt, k.raw_write, &[(row0, OUT)], &[0, 60]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        assert_eq!(y.read::<f32>().unwrap()[15].to_bits(), MARK, "{rt:?}: the legal write landed");
        // One element past it: the neighbouring row.
        let msg = kernel_fault(&dev, rt, run(&dev, &k, rt, k.raw_write, &[(row0, OUT)], &[0, 64]));
        let past = y.addr().0 + 64;
        assert!(msg.starts_with(&format!("write {past:#x}+4 outside views")), "{rt:?}: {msg}");
        assert!(msg.contains(&format!("arg 0 [{:#x},{past:#x}) writable", y.addr().0)), "{rt:?}: {msg}");
        assert_eq!(&y.read::<f32>().unwrap()[16..], &iota(32)[16..], "{rt:?}: the neighbouring row is unchanged");
    }
    still_works(&dev, &k);
}

#[test]
fn a_raw_write_into_an_input_only_argument_is_a_kernel_fault() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let x = dev.alloc::<f32>(&[16]).unwrap();
        let out = dev.alloc::<f32>(&[16]).unwrap();
        x.write(&iota(16)).unwrap();
        let r = run(&dev, &k, rt, k.raw_write, &[(x.tensor(), IN), (out.tensor(), OUT)], &[0, 8]);
        let msg = kernel_fault(&dev, rt, r);
        assert!(msg.starts_with(&format!("write {:#x}+4 outside writable views", x.addr().0 + 8)), "{rt:?}: {msg}");
        assert!(msg.contains("arg 0") && msg.contains("input-only"), "{rt:?}: {msg}");
        assert_eq!(x.read::<f32>().unwrap(), iota(16), "{rt:?}: the input is unchanged");
        // The output may be written.
        run(&dev, &k, rt, k.raw_write, &[(x.tensor(), IN), (out.tensor(), OUT)], &[1, 8]).unwrap();
        assert_eq!(out.read::<f32>().unwrap()[2].to_bits(), MARK, "{rt:?}");
    }
    still_works(&dev, &k);
}

#[test]
fn a_raw_read_outside_every_view_is_a_kernel_fault() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let x = dev.alloc::<f32>(&[16]).unwrap();
        let out = dev.alloc::<f32>(&[16]).unwrap();
        let tensors = [(x.tensor(), IN), (out.tensor(), OUT)];
        // Reads of an input and of an output are legal.
        run(&dev, &k, rt, k.raw_read, &tensors, &[0, 60]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        run(&dev, &k, rt, k.raw_read, &tensors, &[1, 0]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        // 1 MiB past the input.
        let msg = kernel_fault(&dev, rt, run(&dev, &k, rt, k.raw_read, &tensors, &[0, 1 << 20]));
        assert!(msg.starts_with(&format!("read {:#x}+4 outside views", x.addr().0 + (1 << 20))), "{rt:?}: {msg}");
        // Straddling the end of the input.
        let msg = kernel_fault(&dev, rt, run(&dev, &k, rt, k.raw_read, &tensors, &[0, 62]));
        assert!(msg.starts_with(&format!("read {:#x}+4 outside views", x.addr().0 + 62)), "{rt:?}: {msg}");
    }
    still_works(&dev, &k);
}

#[test]
fn a_strided_column_admits_its_elements_and_refuses_its_gaps() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let m = dev.alloc::<f32>(&[8, 8]).unwrap();
        // Column 2 of the 8x8 matrix.
        let col = Tensor::strided(m.tensor().buffer, DType::F32, 2, &[8], &[8]).unwrap();
        m.write(&[0.0f32; 64]).unwrap();
        run(&dev, &k, rt, k.column, &[(col, OUT)], &[0]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        let got = m.read::<f32>().unwrap();
        for (i, v) in got.iter().enumerate() {
            let want = if i % 8 == 2 { 100.0 + (i / 8) as f32 } else { 0.0 };
            assert_eq!(*v, want, "{rt:?}: element {i}");
        }
        // Into the gap after element 0 (column 3 of row 0), inside the column's bounding range.
        m.write(&[0.0f32; 64]).unwrap();
        let msg = kernel_fault(&dev, rt, run(&dev, &k, rt, k.column, &[(col, OUT)], &[1]));
        let gap = m.addr().0 + 3 * 4;
        assert!(msg.starts_with(&format!("write {gap:#x}+4 between elements of arg 0")), "{rt:?}: {msg}");
        assert_eq!(m.read::<f32>().unwrap()[3], 0.0, "{rt:?}: nothing landed in the gap");
    }
    still_works(&dev, &k);
}

#[test]
fn a_kernel_that_catches_the_panic_is_still_reported() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let y = dev.alloc::<f32>(&[2, 16]).unwrap();
        y.write(&iota(32)).unwrap();
        let row0 = y.tensor().view(&[0, 0], &[1, 16]).unwrap();
        let msg = kernel_fault(&dev, rt, run(&dev, &k, rt, k.catches, &[(row0, OUT)], &[]));
        assert!(msg.starts_with(&format!("write {:#x}+4 outside views", y.addr().0 + 64)), "{rt:?}: {msg}");
        assert_eq!(&y.read::<f32>().unwrap()[16..], &iota(32)[16..], "{rt:?}: the neighbouring row is unchanged");
    }
    still_works(&dev, &k);
}

#[test]
fn with_protection_off_legal_kernels_run_unchanged() {
    // A device of the selected board opened with `SimConfig { protect: false, .. }`.
    let base = pto::open().unwrap();
    let config = SimConfig { protect: false, ..*base.platform().config() };
    let topo = base.topology();
    drop(base);
    let sim = <SelectedPlatform as pto::hal::HostPlatform>::Device::open(topo, config).unwrap();
    let t = Selected::timeouts();
    let dev = Device::new_in_process(sim, Timeouts::new(t.watchdog_us, t.exit_us, t.stream_us)).unwrap();
    if std::env::var("PTO_SIM_PROTECT").is_ok_and(|v| v == "on") {
        eprintln!("PTO_SIM_PROTECT=on overrides the configuration: skipped");
        return;
    }
    assert!(!dev.platform().protection());
    let k = register(&dev);
    still_works(&dev, &k);
    for rt in RUNTIMES {
        let y = dev.alloc::<f32>(&[2, 16]).unwrap();
        y.write(&iota(32)).unwrap();
        let row0 = y.tensor().view(&[0, 0], &[1, 16]).unwrap();
        run(&dev, &k, rt, k.raw_write, &[(row0, OUT)], &[0, 60]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
        assert_eq!(y.read::<f32>().unwrap()[15].to_bits(), MARK, "{rt:?}");
        // Nothing checks the access: it lands in the neighbouring row. (The faithful cache model
        // still fails the run: the stray line is never published before FIN.)
        if dev.platform().cache_model() == CacheModel::Coherent {
            run(&dev, &k, rt, k.raw_write, &[(row0, OUT)], &[0, 64]).unwrap_or_else(|e| panic!("{rt:?}: {e}"));
            assert_eq!(y.read::<f32>().unwrap()[16].to_bits(), MARK, "{rt:?}");
        }
    }
    // Switched on between runs, the same device refuses it.
    dev.platform().set_protection(true).unwrap();
    let y = dev.alloc::<f32>(&[2, 16]).unwrap();
    let row0 = y.tensor().view(&[0, 0], &[1, 16]).unwrap();
    let rt = RuntimeKind::HostBuiltGraph;
    kernel_fault(&dev, rt, run(&dev, &k, rt, k.raw_write, &[(row0, OUT)], &[0, 64]));
}
