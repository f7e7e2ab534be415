//! Regions of buffers and how two of them overlap: the geometry the tensor map discovers
//! dependencies with and a task's aliasing check refuses overlapping written arguments with.
//! Pure arithmetic over element offsets, shapes and strides; a tensor view names its region
//! with `Tensor::region` (in the task model).

use pto_hal::MAX_TENSOR_DIMS;

/// A tensor's footprint for dependency discovery: which buffer, and which elements of it.
///
/// The element set is `{ offset + Σ i_k · strides[k] : 0 ≤ i_k < shape[k], k < ndims }`;
/// element `x` occupies bytes `[x · elem_bytes, (x + 1) · elem_bytes)` of the buffer. A
/// region with a zero extent or a zero element size touches no byte. `ndims` above
/// [`MAX_TENSOR_DIMS`] is read as [`MAX_TENSOR_DIMS`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// The buffer's id (its `BufferRef::id`).
    pub buffer: u64,
    /// Element offset of the first element.
    pub offset: u64,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents (entries past `ndims` are ignored).
    pub shape: [u32; MAX_TENSOR_DIMS],
    /// Strides in elements (entries past `ndims` are ignored).
    pub strides: [u32; MAX_TENSOR_DIMS],
}

impl Region {
    /// `[first byte, one past the last byte)` the region can touch, relative to its buffer:
    /// its bounding byte range. Empty (`start == end`) when the region touches no byte.
    pub fn byte_range(&self) -> (u64, u64) {
        let (s, e) = self.bounds();
        (sat(s), sat(e))
    }

    /// Dimensions actually in use.
    pub(crate) fn dims(&self) -> usize {
        (self.ndims as usize).min(MAX_TENSOR_DIMS)
    }

    /// Whether the region touches no byte at all.
    pub(crate) fn is_void(&self) -> bool {
        self.elem_bytes == 0 || self.shape[..self.dims()].contains(&0)
    }

    /// Exact bounding byte range, without overflow.
    fn bounds(&self) -> (u128, u128) {
        if self.is_void() {
            let s = self.offset as u128 * self.elem_bytes as u128;
            return (s, s);
        }
        let n = self.dims();
        let reach: u128 =
            self.shape[..n].iter().zip(&self.strides[..n]).map(|(&d, &st)| (d as u128 - 1) * st as u128).sum();
        let es = self.elem_bytes as u128;
        (self.offset as u128 * es, (self.offset as u128 + reach + 1) * es)
    }

    /// Whether the region's elements fill its bounding range with no hole.
    ///
    /// Sufficient, not necessary: taking dimensions by increasing stride, the elements seen
    /// so far fill `[0, reach]`; a dimension with stride at most `reach + 1` repeats that run
    /// with no gap, so the run stays contiguous. A region failing the test is treated as
    /// having holes, which can only make the classification more conservative.
    pub(crate) fn is_dense(&self) -> bool {
        let n = self.dims();
        let mut order: [usize; MAX_TENSOR_DIMS] = core::array::from_fn(|k| k);
        order[..n].sort_unstable_by_key(|&k| self.strides[k]);
        let mut reach: u128 = 0;
        for &k in &order[..n] {
            if self.shape[k] <= 1 {
                continue;
            }
            let st = self.strides[k] as u128;
            if st > reach + 1 {
                return false;
            }
            reach += (self.shape[k] as u128 - 1) * st;
        }
        true
    }
}

fn sat(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// How a new region relates to an old one (see the module documentation).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// No element byte in common.
    None,
    /// The new region touches every byte the old one can touch.
    Covered,
    /// Anything else, including "could not tell cheaply".
    Partial,
}

/// Classify `new` against `old`: [`Overlap::None`] only when they certainly share no element
/// byte, [`Overlap::Covered`] only when `new` certainly touches every byte `old` touches,
/// [`Overlap::Partial`] otherwise.
pub fn classify(new: &Region, old: &Region) -> Overlap {
    if new.buffer != old.buffer || new.is_void() || old.is_void() {
        return Overlap::None;
    }
    let (ns, ne) = new.bounds();
    let (os, oe) = old.bounds();
    if ne <= os || oe <= ns {
        return Overlap::None;
    }
    if let Some(o) = classify_exact(new, old) {
        return o;
    }
    if new.is_dense() && ns <= os && oe <= ne { Overlap::Covered } else { Overlap::Partial }
}

/// The per-dimension test; `None` when it does not apply.
///
/// With strides `s_0 ≥ … ≥ s_{n-1} = 1`, each dividing the one before, and every coordinate
/// of dimension `k ≥ 1` below the radix `s_{k-1} / s_k`, an element offset is a mixed-radix
/// number: its coordinates are unique, and the outermost one is unbounded. Both regions are
/// then coordinate boxes under one injective map, so their element (and, with one element
/// size, byte) sets meet exactly when the boxes meet, and contain each other exactly when
/// the boxes do. A view whose box would run past the radix in some inner dimension (it
/// wraps into the next row) breaks uniqueness, so the test declines it.
fn classify_exact(new: &Region, old: &Region) -> Option<Overlap> {
    let n = new.dims();
    if n == 0 || new.elem_bytes != old.elem_bytes || n != old.dims() {
        return None;
    }
    let st = &new.strides[..n];
    if st != &old.strides[..n] || st[n - 1] != 1 {
        return None;
    }
    for k in 1..n {
        if st[k] == 0 || !st[k - 1].is_multiple_of(st[k]) {
            return None;
        }
    }
    let a = boxes(new)?;
    let b = boxes(old)?;
    let mut covered = true;
    for k in 0..n {
        let (a0, a1) = a[k];
        let (b0, b1) = b[k];
        if a1 <= b0 || b1 <= a0 {
            return Some(Overlap::None);
        }
        covered &= a0 <= b0 && b1 <= a1;
    }
    Some(if covered { Overlap::Covered } else { Overlap::Partial })
}

/// Per-dimension coordinate intervals `[c_k, c_k + shape_k)` of a region whose strides were
/// checked to be nested; `None` when the offset does not decompose or the box leaves the
/// radix of an inner dimension.
fn boxes(r: &Region) -> Option<[(u128, u128); MAX_TENSOR_DIMS]> {
    let n = r.dims();
    let st = &r.strides[..n];
    let mut out = [(0u128, 0u128); MAX_TENSOR_DIMS];
    let mut rebuilt: u128 = 0;
    for k in 0..n {
        let s = st[k] as u64;
        let c = if k == 0 { r.offset / s } else { (r.offset % st[k - 1] as u64) / s };
        let end = c as u128 + r.shape[k] as u128;
        if k > 0 && end > (st[k - 1] / st[k]) as u128 {
            return None;
        }
        rebuilt += c as u128 * s as u128;
        out[k] = (c as u128, end);
    }
    (rebuilt == r.offset as u128).then_some(out)
}
