//! The host-built graph's image: one position-independent blob the host writes once per
//! graph (header, task records, fan-out ids, func table, argument records) and the device
//! reads on every run. Argument records ([`ArgsHeader`], [`TensorDesc`]) are also what the
//! device-side runtime writes for the tasks it submits.
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | [`ImageHeader`], [`TaskRecord`]s, fan-out ids, [`FuncEntry`]s | host (H2D at build) | AICPU (after `observe_host`) |
//! | argument records ([`ArgsHeader`] + [`TensorDesc`]s + scalars) | host (hbg) or the orchestrating AICPU thread (trb, published before dispatch) | AICore (observed before the kernel runs), the args dump |
//!
//! The rooms: `reader` ([`ImageView`], the one reader, and what it accepts) and `error`
//! ([`ImageError`], why an image is refused); this file holds the format itself.

mod error;
mod reader;

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use num_enum::{IntoPrimitive, TryFromPrimitive};

pub use error::ImageError;
pub use reader::{CheckedImage, ImageSource, ImageView};

/// Magic of a graph image ("PTOG").
pub const IMAGE_MAGIC: u32 = 0x474f_5450;

/// Head of a graph image.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(8))]
pub struct ImageHeader {
    /// [`IMAGE_MAGIC`].
    pub magic: u32,
    /// [`LAYOUT_VERSION`](super::LAYOUT_VERSION).
    pub version: u32,
    /// Number of tasks.
    pub task_count: u32,
    /// Entries of the func table.
    pub func_count: u32,
    /// Total image length in bytes.
    pub total_len: u64,
    /// Offset of `TaskRecord[task_count]` from the image start.
    pub tasks_off: u64,
    /// Offset of the fan-out id array (`u32`s).
    pub fanout_off: u64,
    /// Entries of the fan-out array.
    pub fanout_len: u64,
    /// Offset of `FuncEntry[func_count]`.
    pub funcs_off: u64,
    /// Offset of the args region.
    pub args_off: u64,
}

/// Task shapes: which cores a task occupies.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[repr(u8)]
pub enum Shape {
    /// One AIC.
    Aic = 0,
    /// One AIV.
    Aiv = 1,
    /// A whole cluster: AIC + both AIVs (1C2V), placed together.
    Mix = 2,
    /// No core: completed by the scheduler.
    Dummy = 3,
}

impl Shape {
    /// Number of shapes with a ready queue (all but dummy).
    pub const QUEUED: usize = 3;
}

/// Lane bits of a task's active mask.
pub mod lanes {
    /// The AIC lane.
    pub const AIC: u8 = 0b001;
    /// AIV lane 0.
    pub const AIV0: u8 = 0b010;
    /// AIV lane 1.
    pub const AIV1: u8 = 0b100;
    /// Every lane of a MIX task.
    pub const MIX: u8 = AIC | AIV0 | AIV1;
}

/// One task of the image.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TaskRecord {
    /// Func id per lane (AIC, AIV0, AIV1); `NO_FUNC` where the lane is unused.
    pub funcs: [u16; 3],
    /// [`Shape`] value.
    pub shape: u8,
    /// Active lanes ([`lanes`]).
    pub lanes: u8,
    /// SPMD block count (≥ 1).
    pub block_num: u32,
    /// Producers this task waits for.
    pub fanin: u32,
    /// First consumer in the fan-out array.
    pub fanout_start: u32,
    /// Number of consumers.
    pub fanout_count: u32,
    /// Offset of this task's [`ArgsHeader`] relative to this record (self-relative).
    pub args_rel: i32,
    /// Length of the args record in bytes.
    pub args_len: u32,
}

/// "No kernel on this lane."
pub const NO_FUNC: u16 = u16::MAX;

/// Kernel binaries of one func id, per core type (0 = not loaded for that type).
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FuncEntry {
    /// Binary address for AIC cores.
    pub aic: u64,
    /// Binary address for AIV cores.
    pub aiv: u64,
}

/// Head of one task's argument record; followed by `TensorDesc[tensors]` then `u64[scalars]`.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct ArgsHeader {
    /// Tensor arguments.
    pub tensors: u32,
    /// Scalar arguments.
    pub scalars: u32,
    /// GM address of the task's 4-byte predicate, 0 when it has none.
    pub predicate: u64,
    /// [`args_flags`].
    pub flags: u32,
    /// Scalars marked for the args dump: bit `i` = scalar `i`.
    pub dump_scalars: u32,
    /// Func id per lane (AIC, AIV0, AIV1), [`NO_FUNC`] where unused: what the args dump
    /// stamps on the task's records.
    pub funcs: [u16; 3],
    /// Reserved, zero.
    pub reserved: u16,
}

/// Bytes of an [`ArgsHeader`]: where the tensor descriptors of an argument record start.
pub const ARGS_HEAD: u64 = size_of::<ArgsHeader>() as u64;

/// Bits of [`ArgsHeader::flags`].
pub mod args_flags {
    /// All SPMD blocks start together.
    pub const SYNC_START: u32 = 1;
    /// Every defined bit.
    pub const ALL: u32 = SYNC_START;
}

/// A tensor argument as stored in the image.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TensorDesc {
    /// Address of the view's first element.
    pub addr: u64,
    /// `DType` code.
    pub dtype: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; 5],
    /// Strides in elements.
    pub strides: [u32; 5],
    /// [`TENSOR_WRITTEN`] when the task writes through this argument.
    pub flags: u32,
}

/// [`TensorDesc::flags`]: the task writes through this argument, so the executor publishes
/// its lines before FIN.
pub const TENSOR_WRITTEN: u32 = 1;
/// [`TensorDesc::flags`]: the task reads through this argument (the args dump captures it
/// before dispatch).
pub const TENSOR_READ: u32 = 2;
/// [`TensorDesc::flags`]: the argument is marked for the args dump (`Task::dump`).
pub const TENSOR_DUMP: u32 = 4;

impl TensorDesc {
    /// As the HAL's kernel-facing value.
    pub fn to_arg(&self) -> pto_hal::TensorArg {
        pto_hal::TensorArg {
            addr: pto_hal::GmAddr(self.addr),
            dtype: self.dtype,
            elem_bytes: self.elem_bytes,
            ndims: self.ndims,
            shape: self.shape,
            strides: self.strides,
        }
    }
}

/// Most tensor arguments of one task.
pub const MAX_TENSOR_ARGS: usize = 32;
/// Most scalar arguments of one task.
pub const MAX_SCALAR_ARGS: usize = 16;
/// Most func ids.
pub const MAX_FUNC_ID: u32 = 1024;

const _: () = {
    assert!(size_of::<ImageHeader>() == 64);
    assert!(size_of::<TaskRecord>() == 32);
    assert!(size_of::<FuncEntry>() == 16);
    assert!(size_of::<ArgsHeader>() == 32);
    assert!(size_of::<TensorDesc>() == 64);
    assert!(offset_of!(TensorDesc, shape) == 20);
};

/// Do a task's active lanes fit its shape?
pub const fn lanes_fit(t: &TaskRecord) -> bool {
    match t.shape {
        s if s == Shape::Aic as u8 => t.lanes == lanes::AIC,
        s if s == Shape::Aiv as u8 => t.lanes == lanes::AIV0,
        s if s == Shape::Mix as u8 => t.lanes != 0 && t.lanes & !lanes::MIX == 0,
        s if s == Shape::Dummy as u8 => t.lanes == 0,
        _ => false,
    }
}
