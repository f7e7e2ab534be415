//! What a native kernel is given: per tensor argument, the GM byte range its view spans and
//! whether the task may read or write it ([`native_accesses`]), and the contiguous element runs
//! inside that range the simulator stages in and out.

use std::ops::Range;

use pto_hal::{KernelContext, TensorArg};

/// One tensor argument of a native kernel, as the simulator hands it over: the kernel reads
/// its staged copy when it starts (if `read`) and what it changed is written through the
/// core's cache when it returns (if `write`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeAccess {
    /// The tensor argument's index (its slot in the argument block).
    pub arg: usize,
    /// GM addresses from the view's first element to one past its last byte. A strided view
    /// has gaps inside this range that are not part of it.
    pub range: Range<u64>,
    /// The task may read through this argument (input, in-out or untracked).
    pub read: bool,
    /// The task may write through this argument (output, in-out or untracked).
    pub write: bool,
}

/// The tensor arguments a native kernel is given by `ctx`, in argument order: the per-task
/// list of (argument, byte range, read/write) that the simulator stages for a native kernel.
/// A view whose span overflows the address space has an empty range.
pub fn native_accesses(ctx: &dyn KernelContext) -> Vec<NativeAccess> {
    (0..ctx.tensor_count())
        .filter_map(|i| ctx.tensor(i).map(|t| (i, t)))
        .map(|(arg, t)| NativeAccess { arg, range: span(&t), read: ctx.readable(arg), write: ctx.writable(arg) })
        .collect()
}

/// `[first byte, one past the last byte)` of the view; empty when it overflows.
pub(crate) fn span(t: &TensorArg) -> Range<u64> {
    let lo = t.addr.0;
    let mut last = 0u64;
    for k in 0..(t.ndims as usize).min(pto_hal::MAX_TENSOR_DIMS) {
        match (t.shape[k].max(1) as u64 - 1).checked_mul(t.strides[k] as u64).and_then(|s| last.checked_add(s)) {
            Some(l) => last = l,
            None => return lo..lo,
        }
    }
    match (last + 1).checked_mul(t.elem_bytes as u64).and_then(|b| lo.checked_add(b)) {
        Some(hi) => lo..hi,
        None => lo..lo,
    }
}

/// The view's elements as runs of contiguous bytes: `(byte offset from the view's first
/// element, bytes)`, in row-major order. A dense view is one run; otherwise a run is one row
/// of a unit-stride innermost dimension, or one element.
pub(crate) fn runs(t: &TensorArg) -> Vec<(u64, u64)> {
    let nd = (t.ndims as usize).min(pto_hal::MAX_TENSOR_DIMS);
    let e = t.elem_bytes as u64;
    if nd == 0 || t.elem_count() == 0 {
        return Vec::new();
    }
    if t.is_contiguous() {
        return vec![(0, t.elem_count() * e)];
    }
    // The innermost dimension is one run when its stride is 1.
    let (outer, run) = if t.strides[nd - 1] == 1 { (nd - 1, t.shape[nd - 1] as u64 * e) } else { (nd, e) };
    let mut out = Vec::new();
    let mut idx = [0u32; pto_hal::MAX_TENSOR_DIMS];
    loop {
        let elem: u64 = (0..outer).map(|k| idx[k] as u64 * t.strides[k] as u64).sum();
        out.push((elem * e, run));
        // Advance the outer index, last dimension fastest.
        let mut k = outer;
        loop {
            if k == 0 {
                return out;
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

#[cfg(test)]
mod tests {
    use super::*;
    use pto_hal::GmAddr;

    fn view(shape: &[u32], strides: &[u32]) -> TensorArg {
        let mut t = TensorArg {
            addr: GmAddr(0x1000),
            dtype: 0,
            elem_bytes: 4,
            ndims: shape.len() as u32,
            shape: [1; 5],
            strides: [1; 5],
        };
        t.shape[..shape.len()].copy_from_slice(shape);
        t.strides[..strides.len()].copy_from_slice(strides);
        t
    }

    #[test]
    fn a_dense_view_is_one_run_over_its_span() {
        let t = view(&[4, 8], &[8, 1]);
        assert_eq!(span(&t), 0x1000..0x1000 + 128);
        assert_eq!(runs(&t), vec![(0, 128)]);
    }

    #[test]
    fn a_tile_of_a_wider_matrix_is_one_run_per_row() {
        // 2 rows of 3 of a matrix 10 wide.
        let t = view(&[2, 3], &[10, 1]);
        assert_eq!(span(&t), 0x1000..0x1000 + 4 * 13);
        assert_eq!(runs(&t), vec![(0, 12), (40, 12)]);
    }

    #[test]
    fn a_column_is_one_run_per_element() {
        let t = view(&[3, 1], &[5, 2]);
        assert_eq!(runs(&t), vec![(0, 4), (20, 4), (40, 4)]);
        let t = view(&[2, 2], &[1, 2]);
        assert_eq!(runs(&t), vec![(0, 4), (8, 4), (4, 4), (12, 4)]);
    }

    #[test]
    fn an_empty_view_has_no_runs() {
        assert!(runs(&view(&[0, 4], &[4, 1])).is_empty());
    }
}
