//! Buffers and tensor views: where a buffer lives, a view's offset, shape and strides, its
//! bytes, and the region of the buffer it names.

use pto_hal::{GmAddr, MAX_TENSOR_DIMS};

use super::dtype::DType;
use super::error::GraphError;
use super::ids::TaskId;

/// Where a buffer's bytes live.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// A device allocation the user made; its address is known.
    External(GmAddr),
    /// Runtime-allocated by a graph: an offset into that graph's heap, resolved at emission.
    Heap(u64),
    /// Runtime-allocated on the device by a scope: its address in a ring's heap and the
    /// allocation record (a task id) that owns it until the scope and its readers are done.
    Ring {
        /// Address of the buffer.
        addr: GmAddr,
        /// The owning allocation record.
        owner: TaskId,
    },
}

/// A buffer as graphs see it: identity, placement, size, element type.
///
/// A device allocation is named by `(device, id)`: `device` is the serial of the device that
/// made it (unique in the process), `id` the allocation's serial on that device, never reused
/// (so it doubles as a generation: a freed allocation's id never names a later one). Every
/// external tensor a run names is checked against its device's live allocations before
/// launch, so a stale, foreign or hand-made `BufferRef` is refused, never used.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferRef {
    /// Serial of the device that owns the allocation (0 for graph-heap and ring tensors,
    /// which belong to one graph or one run).
    pub device: u64,
    /// Unique id (per device for external buffers, per graph for heap buffers).
    pub id: u64,
    /// Where it lives.
    pub placement: Placement,
    /// Size in bytes.
    pub bytes: u64,
    /// Element type of the buffer.
    pub dtype: DType,
}

/// A strided view of a buffer: what a task argument names.
///
/// ```
/// # use pto_runtime::graph::*;
/// # use pto_hal::GmAddr;
/// let buf = BufferRef { device: 0, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes: 64 * 4, dtype: DType::F32 };
/// let t = Tensor::whole(buf, &[8, 8]).unwrap();
/// let row = t.view(&[2, 0], &[1, 8]).unwrap();
/// assert_eq!(row.byte_range(), (2 * 8 * 4, 3 * 8 * 4));
/// assert!(t.view(&[7, 0], &[2, 8]).is_err());
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Tensor {
    /// The underlying buffer.
    pub buffer: BufferRef,
    /// Element offset of the view's first element in the buffer.
    pub offset: u64,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; MAX_TENSOR_DIMS],
    /// Strides in elements.
    pub strides: [u32; MAX_TENSOR_DIMS],
}

impl Tensor {
    /// The whole buffer as a dense row-major tensor of `shape`.
    pub fn whole(buffer: BufferRef, shape: &[u32]) -> Result<Tensor, GraphError> {
        let (ndims, sh) = dims(shape)?;
        let mut strides = [0u32; MAX_TENSOR_DIMS];
        let mut acc: u64 = 1;
        for k in (0..ndims).rev() {
            strides[k] = u32::try_from(acc).map_err(|_| GraphError::ShapeTooLarge)?;
            acc = acc.checked_mul(sh[k] as u64).ok_or(GraphError::ShapeTooLarge)?;
        }
        let need = acc.checked_mul(buffer.dtype.size() as u64).ok_or(GraphError::ShapeTooLarge)?;
        if need != buffer.bytes {
            return Err(GraphError::ShapeMismatch { elements: acc, bytes: buffer.bytes });
        }
        Ok(Tensor { buffer, offset: 0, ndims: ndims as u32, shape: sh, strides })
    }

    /// A sub-view: `offsets` and `shape` per dimension of this tensor, keeping its strides.
    /// Fails with [`GraphError::ViewOutOfBounds`] when any dimension leaves this view.
    pub fn view(&self, offsets: &[u32], shape: &[u32]) -> Result<Tensor, GraphError> {
        if offsets.len() != self.ndims as usize || shape.len() != self.ndims as usize {
            return Err(GraphError::RankMismatch { expected: self.ndims, got: shape.len().max(offsets.len()) as u32 });
        }
        let mut out = *self;
        let mut off = self.offset;
        if let Some(k) = shape.iter().position(|&d| d == 0) {
            return Err(GraphError::ZeroExtent { dim: k as u32 });
        }
        for k in 0..self.ndims as usize {
            let end = offsets[k] as u64 + shape[k] as u64;
            if end > self.shape[k] as u64 {
                return Err(GraphError::ViewOutOfBounds {
                    dim: k as u32,
                    offset: offsets[k],
                    extent: shape[k],
                    limit: self.shape[k],
                });
            }
            off = (offsets[k] as u64)
                .checked_mul(self.strides[k] as u64)
                .and_then(|d| off.checked_add(d))
                .ok_or(GraphError::ShapeTooLarge)?;
            out.shape[k] = shape[k];
        }
        out.offset = off;
        Ok(out)
    }

    /// A view with explicit element offset, shape and strides, checked against the buffer,
    /// and with an element type that must equal the buffer's.
    pub fn strided(
        buffer: BufferRef,
        dtype: DType,
        offset: u64,
        shape: &[u32],
        strides: &[u32],
    ) -> Result<Tensor, GraphError> {
        if dtype != buffer.dtype {
            return Err(GraphError::DtypeMismatch { view: dtype, buffer: buffer.dtype });
        }
        let (ndims, sh) = dims(shape)?;
        if strides.len() != ndims {
            return Err(GraphError::RankMismatch { expected: ndims as u32, got: strides.len() as u32 });
        }
        let mut st = [0u32; MAX_TENSOR_DIMS];
        st[..ndims].copy_from_slice(strides);
        let t = Tensor { buffer, offset, ndims: ndims as u32, shape: sh, strides: st };
        match t.checked_byte_range() {
            Some((_, end)) if end <= buffer.bytes => Ok(t),
            Some((_, end)) => Err(GraphError::ViewOutsideBuffer { end, bytes: buffer.bytes }),
            None => Err(GraphError::ViewOverflows),
        }
    }

    /// Reinterpret as `dtype`; fails unless it is the buffer's element type.
    pub fn with_dtype(&self, dtype: DType) -> Result<Tensor, GraphError> {
        if dtype != self.buffer.dtype {
            return Err(GraphError::DtypeMismatch { view: dtype, buffer: self.buffer.dtype });
        }
        Ok(*self)
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.buffer.dtype
    }

    /// Number of elements (saturating at `u64::MAX`; a tensor that large was never
    /// accepted by a device).
    pub fn elem_count(&self) -> u64 {
        let n = self.ndims.min(MAX_TENSOR_DIMS as u32) as usize;
        self.shape[..n].iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64)).unwrap_or(u64::MAX)
    }

    /// `[first byte, one past the last byte)` the view can touch, relative to the buffer:
    /// the bounding range used for dependency discovery. Saturates at `u64::MAX` for a view
    /// whose range does not fit 64 bits ([`Tensor::checked_byte_range`] says so instead).
    pub fn byte_range(&self) -> (u64, u64) {
        self.checked_byte_range().unwrap_or_else(|| {
            let s = (self.offset as u128 * self.buffer.dtype.size() as u128).min(u64::MAX as u128) as u64;
            (s, u64::MAX)
        })
    }

    /// [`Tensor::byte_range`], or `None` when any part of it overflows 64 bits (such a view
    /// is refused wherever it is checked).
    pub fn checked_byte_range(&self) -> Option<(u64, u64)> {
        let es = self.buffer.dtype.size() as u64;
        let n = self.ndims.min(MAX_TENSOR_DIMS as u32) as usize;
        let mut last = self.offset;
        for k in 0..n {
            let step = (self.shape[k] as u64).checked_sub(1)?.checked_mul(self.strides[k] as u64)?;
            last = last.checked_add(step)?;
        }
        Some((self.offset.checked_mul(es)?, last.checked_add(1)?.checked_mul(es)?))
    }
}

/// Bytes of a dense tensor of `shape` and `dtype`, checked: a zero extent, a bad rank or a
/// size that overflows 64 bits is an error.
pub fn shape_bytes(dtype: DType, shape: &[u32]) -> Result<u64, GraphError> {
    dims(shape)?;
    shape.iter().try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64)).ok_or(GraphError::ShapeTooLarge)
}

fn dims(shape: &[u32]) -> Result<(usize, [u32; MAX_TENSOR_DIMS]), GraphError> {
    if shape.is_empty() || shape.len() > MAX_TENSOR_DIMS {
        return Err(GraphError::BadRank(shape.len() as u32));
    }
    if let Some(k) = shape.iter().position(|&d| d == 0) {
        return Err(GraphError::ZeroExtent { dim: k as u32 });
    }
    let mut sh = [1u32; MAX_TENSOR_DIMS];
    sh[..shape.len()].copy_from_slice(shape);
    Ok((shape.len(), sh))
}

/// A tensor argument: an external [`Tensor`] or a scope's
/// `Local` (the orchestration API's scope tensor). Sealed.
pub trait AsTensor: sealed::Sealed {}
impl AsTensor for Tensor {}

pub(crate) mod sealed {
    /// Hands the runtime the descriptor; not callable from outside the crate.
    pub trait Sealed {
        fn raw(&self) -> super::Tensor;
    }
    impl Sealed for super::Tensor {
        fn raw(&self) -> super::Tensor {
            *self
        }
    }
}

impl Tensor {
    /// The region of its buffer this view names (for dependency discovery and the aliasing
    /// check).
    pub fn region(&self) -> crate::region::Region {
        crate::region::Region {
            buffer: self.buffer.id,
            offset: self.offset,
            elem_bytes: self.buffer.dtype.size(),
            ndims: self.ndims,
            shape: self.shape,
            strides: self.strides,
        }
    }
}
