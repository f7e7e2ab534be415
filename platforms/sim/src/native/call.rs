//! Calling a native kernel: its views staged into host buffers at the kernel boundary, the
//! argument block built in the native kernel ABI, and what it changed written back.
//!
//! When the kernel starts, the elements of every readable view are loaded through the core's
//! load unit (`ctx.gm()`: under the faithful cache model, its cache, with the model's checks),
//! and those of a write-only view are taken from memory as they stand (a baseline, not a read
//! the model sees). Everything else in the staged buffer — the gaps of a strided view and a
//! guard zone on each side — holds [`FILL`]. When the kernel returns, every element of a
//! writable view that differs from its baseline is stored through the core's store unit, so
//! under the faithful model it is dirty in the core's cache until the runtime's write-back;
//! a changed element of a read-only view, or a changed byte outside any view, is a fault.

use pto_hal::native::{
    GLOBAL_CONTEXT_SLOT, LOCAL_CONTEXT_SLOT, NATIVE_ARG_SLOTS, NATIVE_MAX_SCALARS, NATIVE_MAX_TENSORS, NativeBuffer,
    NativeEntry, NativeGlobalContext, NativeLocalContext, NativeTensor, native_dtype,
};
use pto_hal::{GmAddr, KernelContext, KernelFault, TensorArg};

use super::views::{runs, span};

/// The byte every staged byte outside the views holds; a kernel that stores exactly this
/// byte outside its views goes unseen.
pub const FILL: u8 = 0xCD;
/// Guard bytes on each side of a staged view (a multiple of the line size, so the view keeps
/// its GM address's alignment within a line).
const GUARD: usize = 256;

/// One staged tensor argument.
struct Staged {
    arg: TensorArg,
    read: bool,
    write: bool,
    /// The element runs, `(offset from the first element, bytes)`.
    runs: Vec<(u64, u64)>,
    /// Guard, view span, guard; over-allocated so the span can be aligned like its address.
    store: Vec<u8>,
    /// Index in `store` of the view's first byte.
    at: usize,
    len: usize,
    /// The span as staged (the baseline of every element).
    before: Vec<u8>,
}

impl Staged {
    fn new(ctx: &dyn KernelContext, i: usize, raw: &dyn Fn(GmAddr, &mut [u8])) -> Staged {
        let arg = ctx.tensor(i).expect("index below tensor_count");
        let s = span(&arg);
        let len = (s.end - s.start) as usize;
        let mut store = vec![FILL; len + 2 * GUARD + 64];
        let base = store.as_ptr() as usize;
        let at = (64 - base % 64) % 64 + GUARD + (arg.addr.0 % 64) as usize;
        let (read, write) = (ctx.readable(i), ctx.writable(i));
        let runs = runs(&arg);
        for &(off, n) in &runs {
            let dst = &mut store[at + off as usize..at + (off + n) as usize];
            let src = arg.addr.offset(off);
            if read {
                ctx.gm().read(src, dst);
            } else {
                raw(src, dst);
            }
        }
        let before = store[at..at + len].to_vec();
        Staged { arg, read, write, runs, store, at, len, before }
    }

    fn descriptor(&mut self) -> NativeTensor {
        let a = &self.arg;
        let nd = a.ndims as usize;
        let mut shapes = [0u32; 5];
        let mut strides = [0u32; 5];
        shapes[..nd].copy_from_slice(&a.shape[..nd]);
        strides[..nd].copy_from_slice(&a.strides[..nd]);
        NativeTensor {
            buffer: NativeBuffer { addr: self.store[self.at..].as_mut_ptr() as u64, size: self.len as u64 },
            owner_task_id: u64::MAX,
            start_offset: 0,
            ndims: a.ndims,
            dtype: native_dtype(a.dtype),
            is_contiguous: a.is_contiguous() as u8,
            shapes,
            extent_elem: self.len as u64 / a.elem_bytes.max(1) as u64,
            strides,
            ..NativeTensor::default()
        }
    }

    /// The first byte outside the view that the kernel changed, as its offset from the view's
    /// first byte (negative: before it).
    fn stray_write(&self) -> Option<i64> {
        let mut inside = vec![false; self.len];
        for &(off, n) in &self.runs {
            inside[off as usize..(off + n) as usize].fill(true);
        }
        let start = self.at - GUARD;
        let end = self.at + self.len + GUARD;
        (start..end).find_map(|k| {
            let in_view = k >= self.at && k < self.at + self.len && inside[k - self.at];
            (!in_view && self.store[k] != FILL).then_some(k as i64 - self.at as i64)
        })
    }

    /// The element runs the kernel changed, merged: `(offset, bytes)`.
    fn changed(&self) -> Vec<(u64, u64)> {
        let e = self.arg.elem_bytes.max(1) as u64;
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &(off, n) in &self.runs {
            let mut k = off;
            while k < off + n {
                let (lo, hi) = (k as usize, (k + e) as usize);
                if self.store[self.at + lo..self.at + hi] != self.before[lo..hi] {
                    match out.last_mut() {
                        Some((o, len)) if *o + *len == k => *len += e,
                        _ => out.push((k, e)),
                    }
                }
                k += e;
            }
        }
        out
    }
}

/// Call `entry` (the native kernel `who`) with the arguments of `ctx`; `raw` reads GM as
/// memory holds it, without the cache model (the baseline of write-only views).
// The fault is the rare path; it is the HAL's inline type (see `AicoreAgent::run_kernel`).
#[allow(clippy::result_large_err)]
pub(crate) fn call(
    entry: NativeEntry,
    who: &str,
    ctx: &mut dyn KernelContext,
    raw: &dyn Fn(GmAddr, &mut [u8]),
) -> Result<(), KernelFault> {
    let fault = |what: String| KernelFault::new(&format!("native kernel {who}: {what}"));
    let (nt, ns) = (ctx.tensor_count(), ctx.scalar_count());
    if nt > NATIVE_MAX_TENSORS || ns > NATIVE_MAX_SCALARS {
        return Err(fault(format!(
            "{nt} tensor and {ns} scalar arguments; the native ABI passes at most \
             {NATIVE_MAX_TENSORS} and {NATIVE_MAX_SCALARS}"
        )));
    }
    let mut staged: Vec<Staged> = (0..nt).map(|i| Staged::new(ctx, i, raw)).collect();
    let mut descs: Vec<NativeTensor> = staged.iter_mut().map(Staged::descriptor).collect();
    let mut local = NativeLocalContext {
        block_idx: ctx.block_idx() as i32,
        block_num: ctx.block_num() as i32,
        ..NativeLocalContext::default()
    };
    let mut global = NativeGlobalContext { sub_block_id: ctx.sub_block_id() as i32, ..NativeGlobalContext::default() };
    let mut args = [0i64; NATIVE_ARG_SLOTS];
    for (slot, d) in args.iter_mut().zip(descs.iter_mut()) {
        *slot = d as *mut NativeTensor as i64;
    }
    for (k, slot) in args[nt..nt + ns].iter_mut().enumerate() {
        *slot = ctx.scalar(k).unwrap_or(0) as i64;
    }
    args[LOCAL_CONTEXT_SLOT] = &mut local as *mut NativeLocalContext as i64;
    args[GLOBAL_CONTEXT_SLOT] = &mut global as *mut NativeGlobalContext as i64;
    // SAFETY: `entry` was resolved from the kernel's shared object as an entry of the native
    // kernel ABI (`extern "C" void (int64_t *)`), which is what the user declared by loading
    // it as a kernel. Every address in `args` points at a live value of this frame (the
    // descriptors, the contexts) or into a staged buffer of `staged`, all of which outlive the
    // call and are not otherwise accessed during it. What the kernel does with them is its
    // own: native code is not checked access by access (see docs/kernels-in-c.md).
    unsafe { entry(args.as_mut_ptr()) };
    let status = global.status;

    // What the kernel changed in its writable views reaches the core's cache whatever else
    // went wrong (a Rust kernel's stores before a fault are kept too).
    for s in staged.iter().filter(|s| s.write) {
        for (off, n) in s.changed() {
            let src = &s.store[s.at + off as usize..s.at + (off + n) as usize];
            ctx.gm().write(s.arg.addr.offset(off), src);
        }
    }
    if status != 0 {
        return Err(fault(format!("returned error code {status}")));
    }
    for (i, s) in staged.iter().enumerate() {
        if let Some(at) = s.stray_write() {
            return Err(fault(format!(
                "wrote outside the view of tensor argument {i} (byte {at} from its first element, \
                 {:#x})",
                s.arg.addr.0 as i64 + at
            )));
        }
        if s.read
            && !s.write
            && let Some(&(off, _)) = s.changed().first()
        {
            return Err(fault(format!(
                "wrote tensor argument {i}, which the task passed read-only (byte {off} of its view, {:#x})",
                s.arg.addr.0 + off
            )));
        }
    }
    Ok(())
}
