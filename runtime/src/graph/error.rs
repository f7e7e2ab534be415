//! Bad input to a graph, naming what was wrong.

use alloc::vec::Vec;

use pto_hal::CoreType;

use crate::layout::Shape;

use super::dtype::DType;

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
    /// A runtime-allocated tensor (graph heap or scope ring) whose `what` (`"address"`,
    /// `"size"`, `"element type"`, `"allocation"`) is not that of the allocation it names: a
    /// widened or moved view that would reach memory the allocation does not own.
    NotItsAllocation {
        /// The field that disagrees.
        what: &'static str,
        /// Its value in the tensor (an element type as its code; 0 when the tensor names no
        /// allocation at all).
        given: u64,
        /// The allocation's value.
        allocated: u64,
    },
}

impl TensorProblem {
    /// A runtime-allocated tensor's placement against the allocation it names: its address,
    /// size in bytes and element type (`given`) against the allocation's (`allocated`). `Err`
    /// names the first that disagrees ([`TensorProblem::NotItsAllocation`]).
    pub(crate) fn same_allocation(given: (u64, u64, DType), allocated: (u64, u64, DType)) -> Result<(), TensorProblem> {
        let disagree = |what, given, allocated| Err(TensorProblem::NotItsAllocation { what, given, allocated });
        if given.0 != allocated.0 {
            disagree("address", given.0, allocated.0)
        } else if given.1 != allocated.1 {
            disagree("size", given.1, allocated.1)
        } else if given.2 != allocated.2 {
            disagree("element type", given.2 as u64, allocated.2 as u64)
        } else {
            Ok(())
        }
    }
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
            TensorProblem::NotItsAllocation { what, given, allocated } => write!(
                f,
                "it is a runtime-allocated tensor whose {what} ({given:#x}) is not its allocation's ({allocated:#x})"
            ),
        }
    }
}

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
