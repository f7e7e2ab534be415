//! The task model: tensors and views, argument directions, scalars, func ids, task shapes,
//! SPMD block counts — and the validation of all of it.

use alloc::vec::Vec;

use pto_hal::{CoreType, GmAddr, MAX_TENSOR_DIMS};

use crate::layout::{MAX_SCALAR_ARGS, MAX_TENSOR_ARGS, Shape, lanes};
use sealed::Sealed;

/// Element data types.
// Under `std` the host's documents (`host::documents`: the args-dump manifest) name a dtype in
// lowercase (`"f32"`, `"bf16"`, …). A derive under the feature rather than a host-side mirror:
// the names sit beside the variants they name, a new variant is named by the same attribute
// (a mirror would need its own variant and two conversions), and a `no_std` build compiles no
// serde at all. `host::documents` tests that each name equals `DType`'s Rust element name.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, num_enum::IntoPrimitive, num_enum::TryFromPrimitive)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
#[repr(u32)]
pub enum DType {
    /// 32-bit float.
    F32 = 0,
    /// 16-bit float (stored as raw `u16`).
    F16 = 1,
    /// bfloat16 (stored as raw `u16`).
    BF16 = 2,
    /// 32-bit signed integer.
    I32 = 3,
    /// 64-bit signed integer.
    I64 = 4,
    /// 32-bit unsigned integer.
    U32 = 5,
    /// 8-bit unsigned integer.
    U8 = 6,
    /// 8-bit signed integer.
    I8 = 7,
    /// 64-bit float.
    F64 = 8,
    /// 64-bit unsigned integer.
    U64 = 9,
    /// 16-bit signed integer.
    I16 = 10,
    /// 16-bit unsigned integer.
    U16 = 11,
}

impl DType {
    /// Bytes per element.
    pub const fn size(self) -> u32 {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }
}

/// Rust element types that map onto a [`DType`].
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The matching data type.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t { const DTYPE: DType = DType::$d; })* };
}
element!(f32 => F32, f64 => F64, i32 => I32, u32 => U32, i64 => I64, u64 => U64, i8 => I8, u8 => U8, i16 => I16, u16 => U16);

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

/// How a task uses a tensor argument; this decides the dependencies it gets.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Read: waits for earlier writers of overlapping bytes (read-after-write).
    In,
    /// Written whole: waits for earlier writers of overlapping bytes (write-after-write).
    Out,
    /// Read and written.
    InOut,
    /// Written into an existing buffer without an overlap lookup; later readers still wait
    /// for it.
    OutputExisting,
    /// Passed to the kernel; no dependency tracking at all.
    NoDep,
}

impl Direction {
    /// Whether the task reads through the argument (for dependency discovery).
    pub const fn reads(self) -> bool {
        matches!(self, Direction::In | Direction::InOut)
    }
    /// Whether the task writes through the argument.
    pub const fn writes(self) -> bool {
        matches!(self, Direction::Out | Direction::InOut | Direction::OutputExisting)
    }
}

/// A registered kernel id (`0..1024`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub u16);

/// A task id inside one graph: its submission index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub u32);

/// What a task runs and where: the shape plus the kernel of each lane.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One AIC core.
    Aic(FuncId),
    /// One AIV core.
    Aiv(FuncId),
    /// A whole cluster (1C2V): the AIC kernel and one kernel per AIV lane.
    Mix {
        /// AIC kernel.
        aic: FuncId,
        /// AIV lane 0 kernel.
        aiv0: FuncId,
        /// AIV lane 1 kernel.
        aiv1: FuncId,
    },
    /// No kernel: completed by the scheduler as soon as its producers are done.
    Dummy,
}

impl Kind {
    /// The task's shape.
    pub fn shape(&self) -> Shape {
        match self {
            Kind::Aic(_) => Shape::Aic,
            Kind::Aiv(_) => Shape::Aiv,
            Kind::Mix { .. } => Shape::Mix,
            Kind::Dummy => Shape::Dummy,
        }
    }
    /// Active lanes.
    pub fn lanes(&self) -> u8 {
        match self {
            Kind::Aic(_) => lanes::AIC,
            Kind::Aiv(_) => lanes::AIV0,
            Kind::Mix { .. } => lanes::MIX,
            Kind::Dummy => 0,
        }
    }
    /// `(func, core type)` of every active lane.
    pub fn lane_funcs(&self) -> [Option<(FuncId, CoreType)>; 3] {
        match *self {
            Kind::Aic(f) => [Some((f, CoreType::Aic)), None, None],
            Kind::Aiv(f) => [None, Some((f, CoreType::Aiv)), None],
            Kind::Mix { aic, aiv0, aiv1 } => {
                [Some((aic, CoreType::Aic)), Some((aiv0, CoreType::Aiv)), Some((aiv1, CoreType::Aiv))]
            }
            Kind::Dummy => [None, None, None],
        }
    }
}

/// One argument of a task.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The view passed.
    pub tensor: Tensor,
    /// How the task uses it.
    pub dir: Direction,
}

/// A task as the user describes it: built with chained calls, then submitted to a graph.
///
/// ```
/// # use pto_runtime::graph::*;
/// # use pto_hal::GmAddr;
/// # let buf = BufferRef { device: 0, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes: 64, dtype: DType::F32 };
/// # let (a, out) = (Tensor::whole(buf, &[16]).unwrap(), Tensor::whole(buf, &[16]).unwrap());
/// let t = Task::aiv(FuncId(3)).input(&a).output(&out).scalar_f32(1.0).blocks(4);
/// assert_eq!(t.args().len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    kind: Kind,
    args: Vec<Arg>,
    scalars: Vec<u64>,
    block_num: u32,
    after: Vec<TaskId>,
    predicate: Option<Tensor>,
    sync_start: bool,
    allow_alias: bool,
    dump: u64,
}

impl Task {
    /// A task of `kind`.
    pub fn new(kind: Kind) -> Task {
        Task {
            kind,
            args: Vec::new(),
            scalars: Vec::new(),
            block_num: 1,
            after: Vec::new(),
            predicate: None,
            sync_start: false,
            allow_alias: false,
            dump: 0,
        }
    }
    /// An AIC task.
    pub fn aic(f: FuncId) -> Task {
        Task::new(Kind::Aic(f))
    }
    /// An AIV task.
    pub fn aiv(f: FuncId) -> Task {
        Task::new(Kind::Aiv(f))
    }
    /// A MIX (1C2V) task: one cluster, AIC kernel `aic`, the same AIV kernel on both lanes.
    pub fn mix(aic: FuncId, aiv: FuncId) -> Task {
        Task::new(Kind::Mix { aic, aiv0: aiv, aiv1: aiv })
    }
    /// A dummy task (dependencies only, no kernel).
    pub fn dummy() -> Task {
        Task::new(Kind::Dummy)
    }
    /// Add an argument with an explicit direction.
    pub fn arg(mut self, tensor: &impl AsTensor, dir: Direction) -> Task {
        self.args.push(Arg { tensor: Sealed::raw(tensor), dir });
        self
    }
    /// Add an input.
    pub fn input(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::In)
    }
    /// Add an output.
    pub fn output(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::Out)
    }
    /// Add an input-output.
    pub fn inout(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::InOut)
    }
    /// Add an output into an existing buffer, without an overlap lookup.
    pub fn output_existing(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::OutputExisting)
    }
    /// Add an untracked argument.
    pub fn no_dep(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::NoDep)
    }
    /// Predicate: run only if the first element of `t` (a 4-byte integer, written by an
    /// earlier task) is non-zero; otherwise the task is skipped — it still completes and
    /// releases its consumers. `t` is read like an input (the task waits for its writers).
    pub fn when(mut self, t: &impl AsTensor) -> Task {
        self.predicate = Some(Sealed::raw(t));
        self
    }
    /// Sync-start: all SPMD blocks must start together, as one cohort (the cohort must fit
    /// the run's cores of the task's shape).
    pub fn sync_start(mut self) -> Task {
        self.sync_start = true;
        self
    }
    /// Let this task name overlapping views of one buffer where at least one of them is
    /// written (for example an in-place kernel given the same bytes as input and output).
    ///
    /// Without it such a task is refused with [`GraphError::AliasedArgs`]. With it the
    /// runtime orders the task against others by each argument as usual; inside the task the
    /// kernel alone decides the order of its reads and writes of the shared bytes (it must
    /// read an element before it overwrites it), and every core of an SPMD task sees the
    /// same bytes.
    pub fn allow_alias(mut self) -> Task {
        self.allow_alias = true;
        self
    }
    /// Whether the task opted in to aliased arguments ([`Task::allow_alias`]).
    pub fn allows_alias(&self) -> bool {
        self.allow_alias
    }
    /// Mark arguments for the args dump: bit `i` of `mask` marks argument `i`, counting the
    /// tensor arguments first (in the order they were added), then the scalars. Marks add up
    /// over calls; `u64::MAX` marks everything the task has. What a mark means depends on the
    /// run's dump level (`RunConfig::dump`): at `Partial` only marked arguments are recorded,
    /// at `Hybrid` every argument is recorded and marked ones carry their data, at `Full`
    /// marks do not matter. A mark beyond the task's arguments is refused by validation
    /// ([`GraphError::BadDumpMask`]), except for `u64::MAX`.
    ///
    /// ```
    /// # use pto_runtime::graph::*;
    /// # use pto_hal::GmAddr;
    /// # let buf = BufferRef { device: 0, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes: 64, dtype: DType::F32 };
    /// # let (a, out) = (Tensor::whole(buf, &[16]).unwrap(), Tensor::whole(buf, &[16]).unwrap());
    /// // Capture the output (argument 1) and the scalar (argument 2).
    /// let t = Task::aiv(FuncId(3)).input(&a).output(&out).scalar(7).dump(0b110).allow_alias();
    /// assert_eq!(t.dump_mask(), 0b110);
    /// assert!(t.validate(0).is_ok());
    /// ```
    pub fn dump(mut self, mask: u64) -> Task {
        self.dump |= mask;
        self
    }
    /// The arguments marked for the args dump ([`Task::dump`]), as marked.
    pub fn dump_mask(&self) -> u64 {
        self.dump
    }
    /// The scalars marked for the args dump: bit `i` = scalar `i`.
    pub fn dump_scalars(&self) -> u32 {
        let n = self.args.len() as u32;
        let shifted = if n >= 64 { 0 } else { self.dump >> n };
        (shifted & ((1u64 << self.scalars.len().min(32)) - 1)) as u32
    }
    /// Add a raw 64-bit scalar.
    pub fn scalar(mut self, v: u64) -> Task {
        self.scalars.push(v);
        self
    }
    /// Add an `f32` scalar (its bits, zero-extended).
    pub fn scalar_f32(self, v: f32) -> Task {
        self.scalar(v.to_bits() as u64)
    }
    /// SPMD: run the kernel as `n` blocks.
    pub fn blocks(mut self, n: u32) -> Task {
        self.block_num = n;
        self
    }
    /// Explicit dependency: run after `t` (the write-after-read case discovery cannot see).
    pub fn after(mut self, t: TaskId) -> Task {
        self.after.push(t);
        self
    }
    /// The task's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }
    /// Tensor arguments.
    pub fn args(&self) -> &[Arg] {
        &self.args
    }
    /// Scalar arguments.
    pub fn scalars(&self) -> &[u64] {
        &self.scalars
    }
    /// SPMD block count.
    pub fn block_num(&self) -> u32 {
        self.block_num
    }
    /// Explicit dependencies.
    pub fn explicit_deps(&self) -> &[TaskId] {
        &self.after
    }
    /// The predicate tensor, if any.
    pub fn predicate(&self) -> Option<&Tensor> {
        self.predicate.as_ref()
    }
    /// Whether the blocks must start together.
    pub fn is_sync_start(&self) -> bool {
        self.sync_start
    }

    /// Check the task on its own (argument counts, block count, views).
    pub fn validate(&self, task: u32) -> Result<(), GraphError> {
        if self.args.len() > MAX_TENSOR_ARGS {
            return Err(GraphError::TooManyTensorArgs { task, count: self.args.len() });
        }
        if self.scalars.len() > MAX_SCALAR_ARGS {
            return Err(GraphError::TooManyScalarArgs { task, count: self.scalars.len() });
        }
        if self.block_num == 0 || self.block_num > MAX_BLOCKS {
            return Err(GraphError::BadBlockNum { task, block_num: self.block_num });
        }
        if self.kind == Kind::Dummy && self.block_num != 1 {
            return Err(GraphError::BadBlockNum { task, block_num: self.block_num });
        }
        for (i, a) in self.args.iter().enumerate() {
            let t = &a.tensor;
            let arg = i as u32;
            if t.ndims == 0 || t.ndims as usize > MAX_TENSOR_DIMS {
                return Err(GraphError::BadArgRank { task, arg, ndims: t.ndims });
            }
            if let Some(dim) = t.shape[..t.ndims as usize].iter().position(|&d| d == 0) {
                return Err(GraphError::ZeroExtentArg { task, arg, dim: dim as u32 });
            }
            match t.checked_byte_range() {
                Some((_, end)) if end <= t.buffer.bytes => {}
                Some((_, end)) => return Err(GraphError::ArgOutsideBuffer { task, arg, end, bytes: t.buffer.bytes }),
                None => return Err(GraphError::ArgOverflows { task, arg }),
            }
        }
        if let Some(p) = &self.predicate {
            let in_buffer = p.checked_byte_range().is_some_and(|(_, e)| e <= p.buffer.bytes);
            let (s, _) = p.byte_range();
            if !in_buffer || p.ndims == 0 || p.ndims as usize > MAX_TENSOR_DIMS || p.dtype().size() != 4 || s % 4 != 0 {
                return Err(GraphError::BadPredicate { task });
            }
        }
        if !self.allow_alias {
            self.check_aliasing(task)?;
        }
        if self.sync_start && self.kind == Kind::Dummy {
            return Err(GraphError::BadBlockNum { task, block_num: self.block_num });
        }
        let args = self.args.len() + self.scalars.len();
        if self.dump != u64::MAX && args < 64 && self.dump >> args != 0 {
            return Err(GraphError::BadDumpMask { task, mask: self.dump, args: args as u32 });
        }
        Ok(())
    }
}

impl GraphError {
    /// The argument index the error names, if it names one (`u32::MAX`: a predicate).
    pub fn arg(&self) -> Option<u32> {
        match *self {
            GraphError::ArgOutsideBuffer { arg, .. }
            | GraphError::ArgOverflows { arg, .. }
            | GraphError::BadArgRank { arg, .. }
            | GraphError::ZeroExtentArg { arg, .. }
            | GraphError::UnusableTensor { arg, .. }
            | GraphError::UnusableProgramArg { arg, .. }
            | GraphError::EndedScopeTensor { arg, .. }
            | GraphError::ForeignHeapTensor { arg, .. } => Some(arg),
            GraphError::AliasedArgs { second, .. } => Some(second),
            _ => None,
        }
    }
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

impl Task {
    /// Refuse two arguments of one buffer that share a byte when at least one of them is
    /// written (untracked arguments are the user's business and are not compared).
    fn check_aliasing(&self, task: u32) -> Result<(), GraphError> {
        use crate::region::{Overlap, classify};
        let tracked = |d: Direction| d != Direction::NoDep;
        for (i, a) in self.args.iter().enumerate() {
            if !tracked(a.dir) {
                continue;
            }
            for (j, b) in self.args.iter().enumerate().skip(i + 1) {
                if !tracked(b.dir) || !(a.dir.writes() || b.dir.writes()) {
                    continue;
                }
                if a.tensor.buffer.id != b.tensor.buffer.id || a.tensor.buffer.placement != b.tensor.buffer.placement {
                    continue;
                }
                if classify(&a.tensor.region(), &b.tensor.region()) != Overlap::None {
                    return Err(GraphError::AliasedArgs { task, first: i as u32, second: j as u32 });
                }
            }
        }
        Ok(())
    }
}

/// Why an external tensor cannot be used by a device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TensorProblem {
    /// It belongs to another device.
    Foreign {
        /// Serial of the device that made it.
        owner: u64,
        /// Serial of the device it was given to.
        device: u64,
    },
    /// Its allocation was freed (its `DeviceTensor` was dropped) or never existed on this
    /// device.
    Stale,
    /// Its address, size or element type is not the allocation's (a hand-made or altered
    /// `BufferRef`).
    Forged,
}

impl core::fmt::Display for TensorProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TensorProblem::Foreign { owner, device } => {
                write!(f, "it was allocated on device #{owner}, not on this device (#{device})")
            }
            TensorProblem::Stale => f.write_str("its allocation was freed (the DeviceTensor was dropped)"),
            TensorProblem::Forged => {
                f.write_str("its address, size or element type does not match the allocation it names")
            }
        }
    }
}

/// Most SPMD blocks of one task.
pub const MAX_BLOCKS: u32 = 1 << 16;

/// Bad input to a graph, naming what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A dump mask marking arguments the task does not have.
    #[error("task {task}: dump mask {mask:#x} marks arguments beyond its {args} arguments (tensors, then scalars)")]
    BadDumpMask {
        /// The task.
        task: u32,
        /// The mask given.
        mask: u64,
        /// The task's arguments (tensors + scalars).
        args: u32,
    },
    /// A shape with no dimensions or more than five.
    #[error("a tensor needs 1..=5 dimensions, got {0}")]
    BadRank(u32),
    /// A zero extent.
    #[error("dimension {dim} has extent 0")]
    ZeroExtent {
        /// The dimension.
        dim: u32,
    },
    /// Offsets/shape/strides of a different rank than the tensor.
    #[error("expected {expected} dimensions, got {got}")]
    RankMismatch {
        /// The tensor's rank.
        expected: u32,
        /// What was given.
        got: u32,
    },
    /// A shape whose elements do not fill the buffer exactly.
    #[error("shape has {elements} elements but the buffer has {bytes} bytes")]
    ShapeMismatch {
        /// Elements of the shape.
        elements: u64,
        /// Bytes of the buffer.
        bytes: u64,
    },
    /// A shape whose element count, byte size or strides do not fit (64-bit sizes, 32-bit
    /// strides).
    #[error("tensor too large: its element count, byte size or 32-bit strides overflow")]
    ShapeTooLarge,
    /// A strided view whose byte range overflows 64 bits.
    #[error("view's byte range overflows 64 bits")]
    ViewOverflows,
    /// A view leaving its parent in one dimension.
    #[error("view outside its tensor in dimension {dim}: offset {offset} + extent {extent} > {limit}")]
    ViewOutOfBounds {
        /// The dimension.
        dim: u32,
        /// Offset asked for.
        offset: u32,
        /// Extent asked for.
        extent: u32,
        /// The parent's extent.
        limit: u32,
    },
    /// A strided view reaching past its buffer.
    #[error("view reaches byte {end} of a {bytes}-byte buffer")]
    ViewOutsideBuffer {
        /// One past the last byte touched.
        end: u64,
        /// Buffer size.
        bytes: u64,
    },
    /// A view whose element type differs from its buffer's.
    #[error("view dtype {view:?} does not match its buffer's dtype {buffer:?}")]
    DtypeMismatch {
        /// Asked-for type.
        view: DType,
        /// Buffer type.
        buffer: DType,
    },
    /// More than 32 tensor arguments.
    #[error("task {task} has {count} tensor arguments; at most 32 are allowed")]
    TooManyTensorArgs {
        /// The task.
        task: u32,
        /// Its argument count.
        count: usize,
    },
    /// More than 16 scalar arguments.
    #[error("task {task} has {count} scalar arguments; at most 16 are allowed")]
    TooManyScalarArgs {
        /// The task.
        task: u32,
        /// Its scalar count.
        count: usize,
    },
    /// A bad SPMD block count.
    #[error("task {task} has block_num {block_num}; allowed is 1..=65536 (dummy tasks: 1)")]
    BadBlockNum {
        /// The task.
        task: u32,
        /// The block count.
        block_num: u32,
    },
    /// An argument view reaching past its buffer.
    #[error("task {task} argument {arg} reaches byte {end} of a {bytes}-byte buffer")]
    ArgOutsideBuffer {
        /// The task.
        task: u32,
        /// The argument index.
        arg: u32,
        /// One past the last byte touched.
        end: u64,
        /// Buffer size.
        bytes: u64,
    },
    /// An argument view whose byte range overflows 64 bits.
    #[error("task {task} argument {arg}: its byte range overflows 64 bits")]
    ArgOverflows {
        /// The task.
        task: u32,
        /// The argument index.
        arg: u32,
    },
    /// An argument view with no dimensions or more than five.
    #[error("task {task} argument {arg} has {ndims} dimensions; 1..=5 are allowed")]
    BadArgRank {
        /// The task.
        task: u32,
        /// The argument index.
        arg: u32,
        /// Its rank.
        ndims: u32,
    },
    /// An argument view with a zero extent.
    #[error("task {task} argument {arg} has extent 0 in dimension {dim}")]
    ZeroExtentArg {
        /// The task.
        task: u32,
        /// The argument index.
        arg: u32,
        /// The dimension.
        dim: u32,
    },
    /// Two arguments of one task share bytes of one buffer and at least one is written.
    #[error(
        "task {task} arguments {first} and {second} overlap in one buffer and at least one is written; \
         pass disjoint views, or opt in with Task::allow_alias"
    )]
    AliasedArgs {
        /// The task.
        task: u32,
        /// The first argument index.
        first: u32,
        /// The second argument index.
        second: u32,
    },
    /// An external tensor the device cannot use.
    #[error("task {task} argument {arg} cannot be used: {why}")]
    UnusableTensor {
        /// The task.
        task: u32,
        /// The argument index (the predicate is argument `u32::MAX`).
        arg: u32,
        /// What is wrong with it.
        why: TensorProblem,
    },
    /// An orchestration argument tensor the device cannot use.
    #[error("orchestration argument {arg} cannot be used: {why}")]
    UnusableProgramArg {
        /// The index among the program's tensor arguments.
        arg: u32,
        /// What is wrong with it.
        why: TensorProblem,
    },
    /// A scope-allocated tensor used after its scope ended.
    #[error("task {task} argument {arg} names a tensor of a scope that has ended")]
    EndedScopeTensor {
        /// The task.
        task: u32,
        /// The argument index (the predicate is argument `u32::MAX`).
        arg: u32,
    },
    /// A func id nobody registered.
    #[error("task {task} lane {lane} uses func id {func}, which is not registered")]
    UnknownFunc {
        /// The task.
        task: u32,
        /// The lane (0 = AIC, 1/2 = AIV lanes).
        lane: u32,
        /// The func id.
        func: u16,
    },
    /// A func id registered for the other core type.
    #[error(
        "task {task} lane {lane} runs func id {func} on {core:?} cores, but it is registered only for the other core type"
    )]
    WrongCoreType {
        /// The task.
        task: u32,
        /// The lane.
        lane: u32,
        /// The func id.
        func: u16,
        /// Core type of the lane.
        core: CoreType,
    },
    /// An explicit dependency on a task id that does not exist.
    #[error("task {task} depends on task {dep}, which does not exist")]
    UnknownDependency {
        /// The task.
        task: u32,
        /// The missing id.
        dep: u32,
    },
    /// A task depending on itself.
    #[error("task {task} depends on itself")]
    SelfDependency {
        /// The task.
        task: u32,
    },
    /// A dependency cycle among explicit dependencies.
    #[error("dependency cycle through tasks {tasks:?}")]
    Cycle {
        /// Tasks on the cycle (at most 16 listed).
        tasks: Vec<u32>,
    },
    /// A task the run's cores cannot host.
    #[error("task {task} needs a {shape:?} core set, but the run offers none ({why})")]
    Unplaceable {
        /// The task.
        task: u32,
        /// Its shape.
        shape: Shape,
        /// What is missing.
        why: &'static str,
    },
    /// More tasks than a graph may hold.
    #[error("graph has more than {max} tasks")]
    TooManyTasks {
        /// The capacity.
        max: u32,
    },
    /// A predicate tensor that is not a 4-byte integer element.
    #[error("task {task} has a predicate that is not an aligned 4-byte element")]
    BadPredicate {
        /// The task.
        task: u32,
    },
    /// A tensor of another graph's heap.
    #[error("task {task} argument {arg} is a runtime-allocated tensor of another graph")]
    ForeignHeapTensor {
        /// The task.
        task: u32,
        /// The argument.
        arg: u32,
    },
}
