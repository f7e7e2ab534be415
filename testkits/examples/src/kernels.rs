//! The kernels the workloads run (plain Rust over the kernel context, one per func) and [`f`],
//! their func ids fixed by registration order.

use pto_hal::{CoreType, HostPlatform, KernelContext, KernelContextExt};
use pto_runtime::graph::Task;
use pto_runtime::host::Error;
use pto_runtime::kernel::KernelIo;

use crate::{Device, DeviceTensor, Graph};

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

/// The func ids of the kernels, fixed by registration order (checked by [`Kernels::register`](crate::Kernels::register)),
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
