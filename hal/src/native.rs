//! The native kernel ABI: how a kernel compiled from C or C++ (a host shared object on the
//! simulator) is called, laid out as the reference runtime's AICore kernels expect it.
//!
//! A native kernel is `extern "C" void entry(int64_t *args)`. `args` has [`NATIVE_ARG_SLOTS`]
//! 64-bit slots: slots `0..T` hold the addresses of the task's `T` tensor descriptors
//! ([`NativeTensor`], 128 bytes each), slots `T..T+S` its `S` scalars, slot
//! [`LOCAL_CONTEXT_SLOT`] the address of a [`NativeLocalContext`] (block index and count of
//! this dispatch) and slot [`GLOBAL_CONTEXT_SLOT`] the address of a [`NativeGlobalContext`]
//! (the AIV lane in a MIX task). Unused slots are 0. Every structure here is `#[repr(C)]` with
//! its size and field offsets asserted below, and `include/pto_abi.h` is generated from them.

use crate::MAX_TENSOR_DIMS;

/// Most tensor arguments a native kernel can be given (slots `0..32`).
pub const NATIVE_MAX_TENSORS: usize = 32;
/// Most scalar arguments a native kernel can be given (tensors and scalars share slots
/// `0..48`).
pub const NATIVE_MAX_SCALARS: usize = 16;
/// The slot holding the address of the [`NativeLocalContext`].
pub const LOCAL_CONTEXT_SLOT: usize = NATIVE_MAX_TENSORS + NATIVE_MAX_SCALARS;
/// The slot holding the address of the [`NativeGlobalContext`].
pub const GLOBAL_CONTEXT_SLOT: usize = LOCAL_CONTEXT_SLOT + 1;
/// Slots of the argument block.
pub const NATIVE_ARG_SLOTS: usize = GLOBAL_CONTEXT_SLOT + 1;

/// Version of the native kernel ABI: the value of the marker symbol [`ABI_MARKER`] that
/// `include/pto_kernel.h` defines in every object built with it.
pub const NATIVE_ABI_VERSION: u32 = 1;

/// The ABI marker symbol (a `const uint32_t` holding [`NATIVE_ABI_VERSION`]): a loader refuses
/// an object that does not define it, or defines another version, before calling anything.
pub const ABI_MARKER: &str = "pto_abi_version";

/// A native kernel's entry point.
pub type NativeEntry = unsafe extern "C" fn(args: *mut i64);

/// The base and size of the buffer a tensor descriptor views.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NativeBuffer {
    /// Address of the buffer's first byte, as the kernel dereferences it.
    pub addr: u64,
    /// Size of the buffer in bytes.
    pub size: u64,
}

/// A tensor descriptor as a native kernel reads it: 128 bytes, two cache lines.
///
/// Element `(i0, …, in)` of the view is at byte
/// `buffer.addr + (start_offset + Σ ik · strides[k]) · element size`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct NativeTensor {
    /// The buffer the view lies in.
    pub buffer: NativeBuffer,
    /// The task that created the tensor; `u64::MAX` when unknown (always, on the simulator).
    pub owner_task_id: u64,
    /// Offset of the view's first element from `buffer.addr`, in elements.
    pub start_offset: u64,
    /// Version for overlap tracking (0: kernels do not use it).
    pub version: i32,
    /// Dimensions in use (`1..=5`).
    pub ndims: u32,
    /// Element type, in the reference's numbering ([`native_dtype`]).
    pub dtype: u8,
    /// Nonzero when dependency tracking is manual (0 here: kernels do not use it).
    pub manual_dep: u8,
    /// Nonzero when the view is dense row-major.
    pub is_contiguous: u8,
    /// Address space of the buffer (0: the one the kernel runs in).
    pub address_space: u8,
    /// Extent of each dimension, in elements.
    pub shapes: [u32; MAX_TENSOR_DIMS],
    /// Elements from the first to one past the last element the view reaches.
    pub extent_elem: u64,
    /// Stride of each dimension, in elements.
    pub strides: [u32; MAX_TENSOR_DIMS],
    /// Reserved, zero.
    pub reserved: [u32; 9],
}

/// What changes with each dispatch: the block of an SPMD task this core runs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NativeLocalContext {
    /// This block's index, `0..block_num`.
    pub block_idx: i32,
    /// Blocks of the task.
    pub block_num: i32,
    /// The reference's deferred-completion context; zero here (deferred completion is not
    /// provided to native kernels).
    pub async_ctx: [u64; 5],
}

/// What is fixed per core: its lane in a cluster, and pto-rt's status word.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct NativeGlobalContext {
    /// The AIV lane (0 or 1) in a MIX task; 0 otherwise.
    pub sub_block_id: i32,
    /// Padding, zero.
    pub pad: u32,
    /// Distance from a GM address to an uncached alias of it; 0 (no alias).
    pub l2_cache_offset: u64,
    /// pto-rt's extension: 0 when the kernel is called; a kernel that stores a nonzero value
    /// here has failed with that code, and the task faults naming it.
    pub status: i32,
    /// Reserved, zero.
    pub reserved: u32,
}

/// The reference's element-type number for the pto-rt element type whose runtime code is
/// `dtype` (the codes of `pto_runtime::graph::DType`): float32 0, float16 1, int32 2, int16 3,
/// int8 4, uint8 5, bfloat16 6, int64 7, uint64 8. A type the reference does not number (u32,
/// f64, u16) is 255.
pub const fn native_dtype(dtype: u32) -> u8 {
    match dtype {
        0 => 0,  // f32
        1 => 1,  // f16
        3 => 2,  // i32
        10 => 3, // i16
        7 => 4,  // i8
        6 => 5,  // u8
        2 => 6,  // bf16
        4 => 7,  // i64
        9 => 8,  // u64
        _ => 255,
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<NativeBuffer>() == 16);
    assert!(size_of::<NativeTensor>() == 128);
    assert!(offset_of!(NativeTensor, owner_task_id) == 16);
    assert!(offset_of!(NativeTensor, start_offset) == 24);
    assert!(offset_of!(NativeTensor, version) == 32);
    assert!(offset_of!(NativeTensor, ndims) == 36);
    assert!(offset_of!(NativeTensor, dtype) == 40);
    assert!(offset_of!(NativeTensor, manual_dep) == 41);
    assert!(offset_of!(NativeTensor, is_contiguous) == 42);
    assert!(offset_of!(NativeTensor, address_space) == 43);
    assert!(offset_of!(NativeTensor, shapes) == 44);
    assert!(offset_of!(NativeTensor, extent_elem) == 64);
    assert!(offset_of!(NativeTensor, strides) == 72);
    assert!(offset_of!(NativeTensor, reserved) == 92);
    assert!(size_of::<NativeLocalContext>() == 48);
    assert!(offset_of!(NativeLocalContext, block_num) == 4);
    assert!(offset_of!(NativeLocalContext, async_ctx) == 8);
    assert!(size_of::<NativeGlobalContext>() == 24);
    assert!(offset_of!(NativeGlobalContext, l2_cache_offset) == 8);
    assert!(offset_of!(NativeGlobalContext, status) == 16);
    assert!(LOCAL_CONTEXT_SLOT == 48 && GLOBAL_CONTEXT_SLOT == 49 && NATIVE_ARG_SLOTS == 50);
};
