//! Argument records: the bytes a task's cores read to learn their arguments.
//!
//! One record per task: an [`ArgsHeader`], then one [`TensorDesc`] per tensor argument, then
//! the 64-bit scalars. Both runtimes write them the same way — the host-built graph into its
//! image, the device-side orchestrator into its ring heap — and the AICore executor reads
//! them the same way.

use pto_hal::GmAddr;
use zerocopy::IntoBytes;

use crate::graph::{Arg, Direction, Placement, Task, Tensor};
use crate::layout::{ARGS_HEAD, ArgsHeader, NO_FUNC, TENSOR_DUMP, TENSOR_READ, TENSOR_WRITTEN, TensorDesc, args_flags};

/// Bytes of `task`'s record.
pub fn record_len(task: &Task) -> u64 {
    ARGS_HEAD + task.args().len() as u64 * 64 + task.scalars().len() as u64 * 8
}

/// GM address of `t`'s first element; graph-heap tensors resolve against `heap_base`.
pub fn tensor_addr(t: &Tensor, heap_base: GmAddr) -> u64 {
    let base = match t.buffer.placement {
        Placement::External(addr) => addr.0,
        Placement::Heap(off) => heap_base.0 + off,
        Placement::Ring { addr, .. } => addr.0,
    };
    base + t.offset * t.buffer.dtype.size() as u64
}

/// Write `task`'s record into `out` (exactly [`record_len`] bytes).
pub fn encode(task: &Task, heap_base: GmAddr, out: &mut [u8]) {
    debug_assert_eq!(out.len() as u64, record_len(task));
    let ah = ArgsHeader {
        tensors: task.args().len() as u32,
        scalars: task.scalars().len() as u32,
        predicate: task.predicate().map_or(0, |p| tensor_addr(p, heap_base)),
        flags: if task.is_sync_start() { args_flags::SYNC_START } else { 0 },
        dump_scalars: task.dump_scalars(),
        funcs: task.kind().lane_funcs().map(|f| f.map_or(NO_FUNC, |(id, _)| id.0)),
        reserved: 0,
    };
    let head = ARGS_HEAD as usize;
    out[..head].copy_from_slice(ah.as_bytes());
    let mut p = head;
    for i in 0..task.args().len() {
        out[p..p + 64].copy_from_slice(tensor_desc_of(task, i, heap_base).as_bytes());
        p += 64;
    }
    for s in task.scalars() {
        out[p..p + 8].copy_from_slice(&s.to_le_bytes());
        p += 8;
    }
}

/// The descriptor of argument `i` of `task`.
pub fn tensor_desc_of(task: &Task, i: usize, heap_base: GmAddr) -> TensorDesc {
    let mut d = tensor_desc(&task.args()[i], heap_base);
    if task.dump_mask() & (1u64 << i) != 0 {
        d.flags |= TENSOR_DUMP;
    }
    d
}

/// The descriptor of one argument.
pub fn tensor_desc(a: &Arg, heap_base: GmAddr) -> TensorDesc {
    let t = &a.tensor;
    TensorDesc {
        addr: tensor_addr(t, heap_base),
        dtype: t.buffer.dtype.into(),
        elem_bytes: t.buffer.dtype.size(),
        ndims: t.ndims,
        shape: t.shape,
        strides: t.strides,
        // NoDep arguments may be read and written: the executor publishes them, and the
        // args dump treats them as in-outs.
        flags: if a.dir.writes() || a.dir == Direction::NoDep { TENSOR_WRITTEN } else { 0 }
            | if a.dir.reads() || a.dir == Direction::NoDep { TENSOR_READ } else { 0 },
    }
}
