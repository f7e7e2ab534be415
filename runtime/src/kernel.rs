//! Typed tensor access for kernels.
//!
//! Kernels move data the way an AICore does: load a tile from GM into local memory, compute,
//! store it back. [`KernelIo`] does that for whole tensor arguments (any view, strided or not)
//! and checks the element type against the argument's dtype. Its accessors are
//! `#[track_caller]`: a misuse (a wrong dtype, an index out of range, a store through an input)
//! panics naming the kernel's own line, which the run's `KERNEL_FAULT` message carries.

use alloc::vec::Vec;

use pto_hal::{KernelContext, KernelContextExt, MAX_TENSOR_DIMS, TensorArg};

use crate::graph::{DType, Element};

/// Typed loads and stores of tensor arguments, for every kernel context.
///
/// ```
/// use pto_runtime::kernel::KernelIo;
/// use pto_hal::KernelContext;
///
/// // A kernel: out = a + b, element-wise.
/// fn add(k: &mut dyn KernelContext) {
///     let a = k.load::<f32>(0);
///     let b = k.load::<f32>(1);
///     let out: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
///     k.store(2, &out);
/// }
/// ```
pub trait KernelIo: KernelContext {
    /// All elements of tensor argument `arg`, in row-major order of its view.
    #[track_caller]
    fn load<T: Element>(&self, arg: usize) -> Vec<T> {
        let t = checked::<T>(self.arg(arg), arg);
        let mut out = alloc::vec![T::zeroed(); t.elem_count() as usize];
        walk(&t, |elem_off, dst_off, n| {
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out[dst_off..dst_off + n]);
            self.gm().read(t.addr.offset(elem_off * t.elem_bytes as u64), bytes);
        });
        out
    }

    /// Store `data` (row-major over the view) into tensor argument `arg`.
    #[track_caller]
    fn store<T: Element>(&self, arg: usize, data: &[T]) {
        let t = writable::<T, _>(self, arg);
        if data.len() as u64 != t.elem_count() {
            panic!("kernel stores {} elements into tensor argument {arg}, which has {}", data.len(), t.elem_count());
        }
        walk(&t, |elem_off, src_off, n| {
            let bytes: &[u8] = bytemuck::cast_slice(&data[src_off..src_off + n]);
            self.gm().write(t.addr.offset(elem_off * t.elem_bytes as u64), bytes);
        });
    }

    /// Element `idx` (one index per dimension) of tensor argument `arg`.
    #[track_caller]
    fn get<T: Element>(&self, arg: usize, idx: &[u32]) -> T {
        let t = checked::<T>(self.arg(arg), arg);
        let mut v = T::zeroed();
        self.gm().read(t.addr.offset(elem_offset(&t, idx, arg) * t.elem_bytes as u64), bytemuck::bytes_of_mut(&mut v));
        v
    }

    /// Set element `idx` of tensor argument `arg`.
    #[track_caller]
    fn set<T: Element>(&self, arg: usize, idx: &[u32], v: T) {
        let t = writable::<T, _>(self, arg);
        self.gm().write(t.addr.offset(elem_offset(&t, idx, arg) * t.elem_bytes as u64), bytemuck::bytes_of(&v));
    }

    /// Scalar argument `i` as an `f32` (low 32 bits).
    fn scalar_f32(&self, i: usize) -> f32 {
        f32::from_bits(self.scalar_arg(i) as u32)
    }
}

impl<K: KernelContext + ?Sized> KernelIo for K {}

/// Argument `arg` for a store: refused (a panic, which the core reports as a kernel fault)
/// when the task passed it as an input only — its writes would race readers nobody ordered.
#[track_caller]
fn writable<T: Element, K: KernelContext + ?Sized>(k: &K, arg: usize) -> TensorArg {
    if !k.writable(arg) {
        panic!("kernel writes through tensor argument {arg}, which the task passed as an input only");
    }
    checked::<T>(k.arg(arg), arg)
}

#[track_caller]
fn checked<T: Element>(t: TensorArg, arg: usize) -> TensorArg {
    if t.dtype != u32::from(T::DTYPE) || t.elem_bytes as usize != core::mem::size_of::<T>() {
        let actual = DType::try_from(t.dtype)
            .map(|d| alloc::format!("{d:?}"))
            .unwrap_or_else(|_| alloc::format!("code {}", t.dtype));
        panic!("kernel accesses tensor argument {arg} as {:?}, but it holds {actual}", T::DTYPE);
    }
    t
}

#[track_caller]
fn elem_offset(t: &TensorArg, idx: &[u32], arg: usize) -> u64 {
    if idx.len() != t.ndims as usize {
        panic!("tensor argument {arg} has {} dimensions, indexed with {}", t.ndims, idx.len());
    }
    let mut off = 0u64;
    for (k, &i) in idx.iter().enumerate() {
        if i >= t.shape[k] {
            panic!("index {i} out of range {} in dimension {k} of tensor argument {arg}", t.shape[k]);
        }
        off += i as u64 * t.strides[k] as u64;
    }
    off
}

/// Visit the view as runs of contiguous elements: `f(element offset in GM, dense offset, len)`.
fn walk(t: &TensorArg, mut f: impl FnMut(u64, usize, usize)) {
    let nd = (t.ndims as usize).clamp(1, MAX_TENSOR_DIMS);
    if t.is_contiguous() {
        f(0, 0, t.elem_count() as usize);
        return;
    }
    // Innermost run: contiguous along the last dimension when its stride is 1.
    let inner = if t.strides[nd - 1] == 1 { t.shape[nd - 1] as usize } else { 1 };
    let outer_dims = if inner > 1 { nd - 1 } else { nd };
    let mut idx = [0u32; MAX_TENSOR_DIMS];
    let mut dense = 0usize;
    loop {
        let off: u64 = (0..outer_dims).map(|k| idx[k] as u64 * t.strides[k] as u64).sum();
        f(off, dense, inner);
        dense += inner;
        // Odometer over the outer dimensions.
        let mut k = outer_dims;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < t.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
}
