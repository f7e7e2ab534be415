//! The kernel ABI: what an AICore kernel sees when it runs.

use crate::{GmAddr, GmMemory};

/// Most dimensions a tensor argument can have.
pub const MAX_TENSOR_DIMS: usize = 5;

/// Core types of a cluster (1 AIC + 2 AIV).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CoreType {
    /// Cube core: matrix units.
    Aic = 0,
    /// Vector core.
    Aiv = 1,
}

impl CoreType {
    /// Decode the on-wire value.
    pub const fn from_u32(v: u32) -> Option<CoreType> {
        match v {
            0 => Some(CoreType::Aic),
            1 => Some(CoreType::Aiv),
            _ => None,
        }
    }
}

/// One tensor argument of a dispatched kernel: a strided view of GM.
///
/// Element `(i0, …, in)` lives at `addr + elem_bytes * Σ ik * strides[k]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TensorArg {
    /// Address of the view's first element.
    pub addr: GmAddr,
    /// Runtime data-type code of the elements.
    pub dtype: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Number of dimensions in use (`1..=MAX_TENSOR_DIMS`).
    pub ndims: u32,
    /// Extent of each dimension, in elements.
    pub shape: [u32; MAX_TENSOR_DIMS],
    /// Stride of each dimension, in elements.
    pub strides: [u32; MAX_TENSOR_DIMS],
}

impl TensorArg {
    /// Number of elements in the view.
    pub fn elem_count(&self) -> u64 {
        self.shape[..self.ndims as usize].iter().map(|&d| d as u64).product()
    }
    /// Whether the view is dense row-major (so it is one contiguous byte range).
    pub fn is_contiguous(&self) -> bool {
        let mut expect = 1u64;
        for k in (0..self.ndims as usize).rev() {
            if self.shape[k] != 1 && self.strides[k] as u64 != expect {
                return false;
            }
            expect *= self.shape[k] as u64;
        }
        true
    }
}

/// A kernel fault: the kernel panicked or trapped on its core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFault {
    /// What the core reported (the panic message on the simulator, with its location),
    /// truncated to fit.
    pub message: [u8; KernelFault::CAPACITY],
    /// Valid bytes of `message`.
    pub len: usize,
}

impl KernelFault {
    /// Bytes a fault message can hold (what the runtime's fault text carries).
    pub const CAPACITY: usize = 320;

    /// A fault carrying `msg` (truncated to [`KernelFault::CAPACITY`] bytes on a character
    /// boundary).
    pub fn new(msg: &str) -> KernelFault {
        let mut message = [0u8; Self::CAPACITY];
        let mut len = msg.len().min(Self::CAPACITY);
        while !msg.is_char_boundary(len) {
            len -= 1;
        }
        message[..len].copy_from_slice(&msg.as_bytes()[..len]);
        KernelFault { message, len }
    }
    /// The message as text.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.message[..self.len]).unwrap_or("<non-utf8 fault message>")
    }
}

/// What a running kernel can ask of its core: its arguments, its place in the launch, and GM.
///
/// Object safe; kernels receive `&mut dyn KernelContext`. The runtime's prelude adds typed
/// element access (`load` / `store` of `bytemuck::Pod` elements) on top.
pub trait KernelContext {
    /// Tensor argument `i` (in submission order), if present.
    fn tensor(&self, i: usize) -> Option<TensorArg>;
    /// Number of tensor arguments.
    fn tensor_count(&self) -> usize;
    /// Scalar argument `i`, if present.
    fn scalar(&self, i: usize) -> Option<u64>;
    /// Number of scalar arguments.
    fn scalar_count(&self) -> usize;
    /// This block's index within the task's SPMD launch (`0..block_num`).
    fn block_idx(&self) -> u32;
    /// Number of SPMD blocks of the task.
    fn block_num(&self) -> u32;
    /// Lane of an AIV subtask inside a MIX (1C2V) task: 0 or 1. 0 for every other task.
    fn sub_block_id(&self) -> u32;
    /// The core type this kernel runs on.
    fn core_type(&self) -> CoreType;
    /// The task id the runtime assigned.
    fn task_id(&self) -> u32;
    /// Whether the task may write through tensor argument `i` (it was passed as an output,
    /// input-output or untracked argument). Contexts that do not know say `true`.
    fn writable(&self, i: usize) -> bool {
        let _ = i;
        true
    }
    /// Whether the task may read through tensor argument `i` (it was passed as an input,
    /// input-output or untracked argument). Contexts that do not know say `true`.
    fn readable(&self, i: usize) -> bool {
        let _ = i;
        true
    }
    /// GM as this core's load/store unit sees it.
    fn gm(&self) -> &dyn GmMemory;
}

/// Convenience accessors for every [`KernelContext`].
pub trait KernelContextExt: KernelContext {
    /// Tensor argument `i`; panics with a message naming the index when it is missing (the
    /// simulator turns the panic into a latched kernel fault).
    fn arg(&self, i: usize) -> TensorArg {
        match self.tensor(i) {
            Some(t) => t,
            None => panic!("kernel asked for tensor argument {i} but the task has {}", self.tensor_count()),
        }
    }
    /// Scalar argument `i`; panics naming the index when it is missing.
    fn scalar_arg(&self, i: usize) -> u64 {
        match self.scalar(i) {
            Some(s) => s,
            None => panic!("kernel asked for scalar argument {i} but the task has {}", self.scalar_count()),
        }
    }
}

impl<T: KernelContext + ?Sized> KernelContextExt for T {}

/// A kernel as the AICore runs it.
pub type KernelFn = fn(&mut dyn KernelContext);

/// A loaded kernel as an AICore resolves it: a Rust function, or a native entry point (see
/// [`crate::native`]) with the loader's index of it (for the platform to name it in faults).
#[derive(Copy, Clone, Debug)]
pub enum Kernel {
    /// A Rust body, called with the kernel context.
    Rust(KernelFn),
    /// A C/C++ entry point, called with an argument block in the native kernel ABI.
    Native {
        /// The entry point.
        entry: crate::native::NativeEntry,
        /// The platform's index of the loaded kernel (its name and binary).
        id: u32,
    },
}
