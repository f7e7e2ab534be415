//! A kernel's misuse of its arguments — a wrong element type, an index out of range, a store
//! through an input — is the kernel's fault (KERNEL_FAULT at the kernel site, naming the task),
//! and its message points at the kernel's own line, not at the runtime's accessor: the
//! accessors of `KernelIo` are `#[track_caller]`. The error names the kernel and prints its
//! detail word.

use pto::prelude::*;

fn k_wrong_dtype(k: &mut dyn KernelContext) {
    let _: Vec<f64> = k.load(0);
}

fn k_out_of_range(k: &mut dyn KernelContext) {
    let _: f32 = k.get(0, &[16]);
}

fn k_store_to_input(k: &mut dyn KernelContext) {
    k.store(0, &[0.0f32; 16]);
}

/// Run one task over an input-only `[16]` f32 tensor with kernel `kernel`; the fault.
fn fault_of(name: &str, kernel: fn(&mut dyn KernelContext)) -> pto::runtime::host::DeviceError {
    let dev = pto::open().expect("open the selected board");
    let f = dev.register_kernel(name, CoreType::Aiv, kernel).unwrap();
    let x = dev.tensor_from(&[16], &[1.0f32; 16]).unwrap();
    let g = dev.build(|g| g.submit(Task::aiv(f).input(&x.tensor())).map(|_| ())).unwrap();
    match dev.run(&g) {
        Err(Error::Device(e)) => e,
        other => panic!("{name}: expected the kernel's fault, got {other:?}"),
    }
}

#[test]
fn a_kernels_misuse_names_the_kernels_line() {
    for (name, kernel, says) in [
        ("wrong_dtype", k_wrong_dtype as fn(&mut dyn KernelContext), "as F64, but it holds F32"),
        ("out_of_range", k_out_of_range, "index 16 out of range 16"),
        ("store_to_input", k_store_to_input, "as an input only"),
    ] {
        let e = fault_of(name, kernel);
        assert_eq!(e.code, ErrorCode::Device(pto::runtime::codes::DeviceFault::KernelFault), "{name}: {e}");
        assert_eq!(e.task, Some(0), "{name}: {e}");
        assert!(e.message.contains(says), "{name}: {}", e.message);
        assert!(e.message.contains("tests/kernel_errors.rs:"), "{name}: the kernel's line: {}", e.message);
        assert_eq!(e.kernel.as_deref(), Some(name), "{name}: the kernel is named");
        let text = e.to_string();
        assert!(text.contains(&format!("kernel `{name}`")), "{text}");
        assert!(text.contains(&format!("(detail {:#x})", e.detail)), "{text}");
    }
}
