//! The kernel call through the kernel ABI: what a kernel sees of its dispatch (the tensor
//! descriptors and scalars of its argument record, its block and lane), read once; shared by
//! both executors.

use pto_hal::{AicoreAgent, CoreType, GmAddr, GmMemory, KernelContext, MAX_TENSOR_DIMS, TensorArg};
use zerocopy::IntoBytes;

use crate::layout::{
    ArgsHeader, DispatchPayload, MAX_SCALAR_ARGS, MAX_TENSOR_ARGS, TENSOR_READ, TENSOR_WRITTEN, TensorDesc,
};

/// What a kernel sees: its payload's arguments, read once from the image.
pub(crate) struct CoreCtx<'a> {
    gm: &'a dyn GmMemory,
    tensors: [TensorDesc; MAX_TENSOR_ARGS],
    scalars: [u64; MAX_SCALAR_ARGS],
    nt: usize,
    ns: usize,
    p: DispatchPayload,
    core_type: CoreType,
}

impl<'a> CoreCtx<'a> {
    /// An empty context for a core of type `core_type`, made once per core and reloaded for
    /// each dispatch ([`CoreCtx::load`]): its 2 KiB of descriptors are not rebuilt per task.
    pub(crate) fn new<A: AicoreAgent>(a: &'a A, core_type: CoreType) -> CoreCtx<'a> {
        CoreCtx {
            gm: a.as_gm(),
            tensors: [TensorDesc::default(); MAX_TENSOR_ARGS],
            scalars: [0; MAX_SCALAR_ARGS],
            nt: 0,
            ns: 0,
            p: DispatchPayload::default(),
            core_type,
        }
    }

    /// Read dispatch `p`'s arguments from its record. Only the first `nt` descriptors and `ns`
    /// scalars are ever read back (every accessor bounds by them), so what an earlier dispatch
    /// left past them is never seen.
    pub(crate) fn load<A: AicoreAgent>(&mut self, a: &A, p: &DispatchPayload) {
        let args = GmAddr(p.args);
        let mut h = ArgsHeader::default();
        observe_record(a, args, crate::layout::ARGS_HEAD);
        a.read(args, h.as_mut_bytes());
        self.load_body(a, args, &h);
        self.set_payload(p);
    }

    /// Dispatch `p` is the one whose record [`CoreCtx::load_body`] read.
    pub(crate) fn set_payload(&mut self, p: &DispatchPayload) {
        self.p = *p;
    }

    /// Read the descriptors and scalars of the argument record at `args`, whose header `h`
    /// the caller observed and read (a core reads the header first for the task's predicate
    /// and, with the args dump on, loads the body before the task's input capture, whose
    /// boundaries it learns from the loaded descriptors: the record is read once).
    pub(crate) fn load_body<A: AicoreAgent>(&mut self, a: &A, args: GmAddr, h: &ArgsHeader) {
        self.nt = 0;
        self.ns = 0;
        let nt = (h.tensors as usize).min(MAX_TENSOR_ARGS);
        let ns = (h.scalars as usize).min(MAX_SCALAR_ARGS);
        let tb = (nt * 64) as u64;
        let body = args.offset(crate::layout::ARGS_HEAD);
        // The head's lines were observed and read just now, and the whole record was
        // published before the dispatch: only the lines past them are observed again.
        let head_end = (body.0 + pto_hal::LINE_BYTES - 1) & !(pto_hal::LINE_BYTES - 1);
        let end = body.0 + tb + ns as u64 * 8;
        if end > head_end {
            observe_record(a, GmAddr(head_end), end - head_end);
        }
        a.read(body, self.tensors[..nt].as_mut_bytes());
        if ns > 0 {
            a.read(body.offset(tb), self.scalars[..ns].as_mut_bytes());
        }
        self.nt = nt;
        self.ns = ns;
    }

    /// The tensor descriptors loaded (the first `nt` of the record).
    pub(crate) fn descriptors(&self) -> &[TensorDesc] {
        &self.tensors[..self.nt]
    }

    /// The first tensor descriptor no kernel could have been given, if any: a rank outside
    /// `1..=5`, an unknown element type or size, or a view whose span overflows or exceeds
    /// any device memory (2^40 bytes).
    pub(crate) fn malformed(&self) -> Option<usize> {
        self.tensors[..self.nt].iter().position(|t| {
            let size_ok =
                crate::graph::DType::try_from(t.dtype).is_ok_and(|d| d.size() == t.elem_bytes && d.size() != 0);
            if !(1..=MAX_TENSOR_DIMS as u32).contains(&t.ndims) || !size_ok {
                return true;
            }
            span(t).is_none_or(|(lo, hi)| hi - lo >= 1 << 40)
        })
    }

    /// Drop this core's copies of every argument's lines before the kernel runs: inputs were
    /// produced by other cores or the host, and outputs must be filled fresh so that their
    /// whole-line write-backs carry nobody's stale bytes.
    pub(crate) fn observe_arguments<A: AicoreAgent>(&self, a: &A) {
        // Spans were checked by `malformed` before the kernel was allowed to run.
        for (lo, hi) in self.tensors[..self.nt].iter().filter_map(span) {
            a.observe_lines(GmAddr(lo), hi - lo);
        }
    }

    /// Write back every line of every output, so it reaches memory before FIN.
    pub(crate) fn publish_outputs<A: AicoreAgent>(&self, a: &A) {
        let written = self.tensors[..self.nt].iter().filter(|t| t.flags & TENSOR_WRITTEN != 0);
        for (lo, hi) in written.filter_map(span) {
            a.publish_lines(GmAddr(lo), hi - lo);
        }
    }
}

/// `[first byte, one past the last byte)` a view can touch; `None` when it overflows.
fn span(t: &TensorDesc) -> Option<(u64, u64)> {
    let mut last = 0u64;
    for k in 0..(t.ndims as usize).min(MAX_TENSOR_DIMS) {
        let step = (t.shape[k].max(1) as u64 - 1).checked_mul(t.strides[k] as u64)?;
        last = last.checked_add(step)?;
    }
    let bytes = (last + 1).checked_mul(t.elem_bytes as u64)?;
    Some((t.addr, t.addr.checked_add(bytes)?))
}

impl KernelContext for CoreCtx<'_> {
    fn tensor(&self, i: usize) -> Option<TensorArg> {
        self.tensors[..self.nt].get(i).map(TensorDesc::to_arg)
    }
    fn tensor_count(&self) -> usize {
        self.nt
    }
    fn scalar(&self, i: usize) -> Option<u64> {
        self.scalars[..self.ns].get(i).copied()
    }
    fn scalar_count(&self) -> usize {
        self.ns
    }
    fn block_idx(&self) -> u32 {
        self.p.block_idx
    }
    fn block_num(&self) -> u32 {
        self.p.block_num
    }
    fn sub_block_id(&self) -> u32 {
        self.p.lane
    }
    fn core_type(&self) -> CoreType {
        self.core_type
    }
    fn task_id(&self) -> u32 {
        self.p.task_id
    }
    fn writable(&self, i: usize) -> bool {
        i < self.nt && self.tensors[i].flags & TENSOR_WRITTEN != 0
    }
    fn readable(&self, i: usize) -> bool {
        i < self.nt && self.tensors[i].flags & TENSOR_READ != 0
    }

    fn gm(&self) -> &dyn GmMemory {
        self.gm
    }
}

/// Drop this core's cached copies of `len` bytes of an argument record at `at` before reading
/// them: the record was published before the dispatch, and a copy cached from an earlier
/// record at the same bytes (the device-side runtime reuses its ring heap) would be stale.
fn observe_record<A: AicoreAgent>(a: &A, at: GmAddr, len: u64) {
    // Broken: the record is read as the cache has it.
    crate::seam!(SKIP_ARGS_OBSERVE);
    a.observe_lines(at, len);
}
