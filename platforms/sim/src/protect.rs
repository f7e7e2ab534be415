//! Memory protection: a kernel touches only its task's views, in their directions.
//!
//! When a device runs with protection on (the default, [`SimConfig::protect`](crate::SimConfig::protect)),
//! every kernel runs behind a [`Guard`]: a [`KernelContext`] that forwards everything to the
//! executor's context except [`KernelContext::gm`], which returns a checking [`GmMemory`]. A read
//! must lie on the elements of one tensor argument of the task (any direction); a write on the
//! elements of one argument the task may write through ([`KernelContext::writable`]). An access
//! that does not is not performed: nothing lands, the first violation is recorded, and the kernel
//! panics with a message naming the access and the nearest argument. The violation is reported as
//! the kernel's fault even when the kernel caught that panic itself.
//!
//! What "on the elements" means, per view (computed once per kernel run, see [`View::of`]):
//! - dense views (row-major, or dense in another dimension order): the byte range;
//! - strided views whose strides nest (each inner block fits inside one step of the next outer
//!   dimension): the start offset is decomposed greedily over the dimensions by descending stride;
//!   the access must start on an element boundary and stay inside one innermost contiguous run;
//! - views whose strides do not nest (overlapping or irregular): the bounding byte range.
//!
//! Every size and offset is computed with checked arithmetic; a view whose extent does not fit
//! the address space covers nothing (the runtime rejects such views before any kernel runs).

use std::cell::{OnceCell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::check::BlockLog;
use pto_hal::{CoreType, GmAddr, GmMemory, KernelContext, KernelFault, KernelFn, MAX_TENSOR_DIMS, TensorArg};
use smallvec::SmallVec;

/// Views kept on the stack; a task with more tensor arguments spills to the heap.
const INLINE_VIEWS: usize = 16;

/// How the bytes of a view's bounding range belong to its elements.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Layout {
    /// Every byte of the range is an element byte.
    Dense,
    /// The strides do not nest (overlapping or irregular view): the whole bounding range.
    Bounding,
    /// Runs of `run` bytes at `Σ i_k · stride_k`; `dims[..n]` are `(stride in bytes, extent)`,
    /// outermost (largest stride) first, each inner block no larger than the next outer stride.
    Strided { dims: [(u64, u64); MAX_TENSOR_DIMS], n: u8, run: u64, elem: u64 },
}

/// One tensor argument, precomputed for the checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// First byte of the view.
    lo: u64,
    /// Bytes of its bounding range, `[lo, lo + len)` (0: the view covers nothing).
    len: u64,
    /// Whether the task may write through it.
    writable: bool,
    layout: Layout,
}

impl View {
    const EMPTY: View = View { lo: 0, len: 0, writable: false, layout: Layout::Dense };

    /// The view `t`; `writable` when the task may write through it.
    pub(crate) fn of(t: &TensorArg, writable: bool) -> View {
        let empty = View { lo: t.addr.0, writable, ..View::EMPTY };
        let elem = t.elem_bytes as u64;
        if elem == 0 {
            return empty;
        }
        let nd = (t.ndims as usize).min(MAX_TENSOR_DIMS);
        if t.is_contiguous() {
            // The common case: one byte range of every element.
            let mut len = elem;
            for &ext in &t.shape[..nd] {
                match len.checked_mul(ext as u64) {
                    Some(l) => len = l,
                    None => return empty,
                }
            }
            if len == 0 || t.addr.0.checked_add(len - 1).is_none() {
                return empty;
            }
            return View { lo: t.addr.0, len, writable, layout: Layout::Dense };
        }
        // The dimensions that add addresses (extent > 1, stride > 0); the byte offset of the
        // last element.
        let mut dims = [(0u64, 0u64); MAX_TENSOR_DIMS];
        let mut n = 0usize;
        let mut last = 0u64;
        for k in 0..nd {
            let (ext, stride) = (t.shape[k] as u64, t.strides[k] as u64);
            if ext == 0 {
                return empty;
            }
            if ext == 1 || stride == 0 {
                continue;
            }
            let Some(sb) = stride.checked_mul(elem) else { return empty };
            let Some(step) = (ext - 1).checked_mul(sb) else { return empty };
            let Some(l) = last.checked_add(step) else { return empty };
            last = l;
            dims[n] = (sb, ext);
            n += 1;
        }
        let Some(len) = last.checked_add(elem) else { return empty };
        // The last byte must be addressable.
        if t.addr.0.checked_add(len - 1).is_none() {
            return empty;
        }
        let view = View { lo: t.addr.0, len, writable, layout: Layout::Dense };
        // Outermost first (at most five: no allocation).
        dims[..n].sort_unstable_by_key(|d| std::cmp::Reverse(d.0));
        // The innermost contiguous run: stride-1 dimension, then every dimension whose stride
        // continues it exactly (a transposed dense view becomes one run).
        let mut run = elem;
        while n > 0 && dims[n - 1].0 == run {
            match dims[n - 1].1.checked_mul(run) {
                Some(r) => run = r,
                None => return View { layout: Layout::Bounding, ..view },
            }
            n -= 1;
        }
        if n == 0 {
            return view;
        }
        // Nesting: each inner block fits inside one step of the next outer dimension.
        let mut block = run;
        for &(sb, ext) in dims[..n].iter().rev() {
            if block > sb {
                return View { layout: Layout::Bounding, ..view };
            }
            // ≤ len, which fits: checked all the same.
            match (ext - 1).checked_mul(sb).and_then(|s| s.checked_add(block)) {
                Some(b) => block = b,
                None => return View { layout: Layout::Bounding, ..view },
            }
        }
        View { layout: Layout::Strided { dims, n: n as u8, run, elem }, ..view }
    }

    /// Whether the `len` bytes at `addr` (`len > 0`) all lie on this view's elements.
    #[inline]
    fn covers(&self, addr: u64, len: u64) -> bool {
        let Some(off) = addr.checked_sub(self.lo) else { return false };
        if off >= self.len || len > self.len - off {
            return false;
        }
        match self.layout {
            Layout::Dense | Layout::Bounding => true,
            Layout::Strided { dims, n, run, elem } => {
                let mut rem = off;
                for &(sb, ext) in &dims[..n as usize] {
                    let i = rem / sb;
                    if i >= ext {
                        return false;
                    }
                    rem -= i * sb;
                }
                rem % elem == 0 && rem < run && len <= run - rem
            }
        }
    }

    /// Distance in bytes between `[addr, addr + len)` and the bounding range (0: they overlap).
    fn distance(&self, addr: u64, len: u64) -> u128 {
        let (a, e) = (addr as u128, addr as u128 + len as u128);
        let (lo, hi) = (self.lo as u128, self.lo as u128 + self.len as u128);
        if e <= lo {
            lo - e
        } else if a >= hi {
            a - hi + 1
        } else {
            0
        }
    }

    /// Whether `[addr, addr + len)` lies inside the bounding range.
    fn within(&self, addr: u64, len: u64) -> bool {
        addr.checked_sub(self.lo).is_some_and(|off| off < self.len && len <= self.len - off)
    }
}

/// `arg i [lo,hi) direction`.
fn describe(i: usize, v: &View) -> String {
    let dir = if v.writable { "writable" } else { "input-only" };
    format!("arg {i} [{:#x},{:#x}) {dir}", v.lo, v.lo as u128 + v.len as u128)
}

/// The message of an illegal access: the access first, then the argument nearest to it.
fn violation(views: &[View], write: bool, addr: u64, len: u64) -> String {
    let op = if write { "write" } else { "read" };
    let access = format!("{op} {addr:#x}+{len}");
    if let Some(i) = views.iter().position(|v| write && v.covers(addr, len)) {
        return format!("{access} outside writable views; {}", describe(i, &views[i]));
    }
    let live = || views.iter().enumerate().filter(|(_, v)| v.len != 0);
    if let Some((i, v)) = live().find(|(_, v)| v.within(addr, len)) {
        return format!("{access} between elements of {}", describe(i, v));
    }
    match live().min_by_key(|(_, v)| v.distance(addr, len)) {
        Some((i, v)) => format!("{access} outside views; nearest {}", describe(i, v)),
        None => format!("{access} outside views; no argument covers it"),
    }
}

/// GM as a protected kernel sees it.
pub(crate) struct CheckedGm<'a> {
    inner: &'a dyn GmMemory,
    views: &'a [View],
    first: OnceCell<String>,
    /// Where the checks (`crate::check`) record each access that lands, when they are on.
    log: Option<RefCell<&'a mut BlockLog>>,
}

impl CheckedGm<'_> {
    #[cold]
    #[inline(never)]
    fn refuse(&self, write: bool, addr: u64, len: u64) -> ! {
        let msg = violation(self.views, write, addr, len);
        let _ = self.first.set(msg.clone());
        panic!("{msg}");
    }
}

impl GmMemory for CheckedGm<'_> {
    #[inline]
    fn read(&self, addr: GmAddr, dst: &mut [u8]) {
        let len = dst.len() as u64;
        if len == 0 {
            return;
        }
        let Some(arg) = self.views.iter().position(|v| v.covers(addr.0, len)) else {
            self.refuse(false, addr.0, len);
        };
        if let Some(log) = &self.log {
            log.borrow_mut().push(arg as u32, false, addr.0, len);
        }
        self.inner.read(addr, dst)
    }
    #[inline]
    fn write(&self, addr: GmAddr, src: &[u8]) {
        let len = src.len() as u64;
        if len == 0 {
            return;
        }
        let Some(arg) = self.views.iter().position(|v| v.writable && v.covers(addr.0, len)) else {
            self.refuse(true, addr.0, len);
        };
        if let Some(log) = &self.log {
            log.borrow_mut().push(arg as u32, true, addr.0, len);
        }
        self.inner.write(addr, src)
    }
}

/// The context a protected kernel runs with: the executor's, with checked GM.
pub(crate) struct Guard<'a> {
    ctx: &'a dyn KernelContext,
    gm: CheckedGm<'a>,
}

impl KernelContext for Guard<'_> {
    fn tensor(&self, i: usize) -> Option<TensorArg> {
        self.ctx.tensor(i)
    }
    fn tensor_count(&self) -> usize {
        self.ctx.tensor_count()
    }
    fn scalar(&self, i: usize) -> Option<u64> {
        self.ctx.scalar(i)
    }
    fn scalar_count(&self) -> usize {
        self.ctx.scalar_count()
    }
    fn block_idx(&self) -> u32 {
        self.ctx.block_idx()
    }
    fn block_num(&self) -> u32 {
        self.ctx.block_num()
    }
    fn sub_block_id(&self) -> u32 {
        self.ctx.sub_block_id()
    }
    fn core_type(&self) -> CoreType {
        self.ctx.core_type()
    }
    fn task_id(&self) -> u32 {
        self.ctx.task_id()
    }
    fn writable(&self, i: usize) -> bool {
        self.ctx.writable(i)
    }
    fn gm(&self) -> &dyn GmMemory {
        &self.gm
    }
}

fn view_at(ctx: &dyn KernelContext, i: usize) -> View {
    ctx.tensor(i).map_or(View::EMPTY, |t| View::of(&t, ctx.writable(i)))
}

/// Run `kernel` behind a [`Guard`]: a panic, or any illegal access (even one whose panic the
/// kernel caught), is the kernel's fault; the first illegal access is the one reported. With
/// `log`, every access that lands is recorded there (with the argument it went through).
// The fault is the rare path; it is the HAL's inline type (see `AicoreAgent::run_kernel`).
#[allow(clippy::result_large_err)]
pub(crate) fn run_kernel(
    kernel: KernelFn,
    ctx: &mut dyn KernelContext,
    log: Option<&mut BlockLog>,
) -> Result<(), KernelFault> {
    let ctx: &dyn KernelContext = ctx;
    let n = ctx.tensor_count();
    // Built in place: a fixed array would write all its places (2 KiB) for every kernel call.
    let views: SmallVec<[View; INLINE_VIEWS]> = (0..n).map(|i| view_at(ctx, i)).collect();
    let views = &views[..];
    let log = log.map(RefCell::new);
    let mut guard = Guard { ctx, gm: CheckedGm { inner: ctx.gm(), views, first: OnceCell::new(), log } };
    let r = catch_unwind(AssertUnwindSafe(|| kernel(&mut guard)));
    if let Some(msg) = guard.gm.first.get() {
        // Drop the message the panic hook recorded for the refused access (the kernel may
        // have caught that panic itself).
        let _ = crate::panics::take_message(&());
        return Err(KernelFault::new(msg));
    }
    r.map_err(|p| KernelFault::new(&crate::panics::take_message(&*p)))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    fn arg(addr: u64, elem: u32, shape: &[u32], strides: &[u32]) -> TensorArg {
        let mut t = TensorArg {
            addr: GmAddr(addr),
            dtype: 0,
            elem_bytes: elem,
            ndims: shape.len() as u32,
            shape: [0; MAX_TENSOR_DIMS],
            strides: [0; MAX_TENSOR_DIMS],
        };
        t.shape[..shape.len()].copy_from_slice(shape);
        t.strides[..strides.len()].copy_from_slice(strides);
        t
    }

    fn view(addr: u64, elem: u32, shape: &[u32], strides: &[u32]) -> View {
        View::of(&arg(addr, elem, shape, strides), true)
    }

    #[test]
    fn contiguous_view_is_its_byte_range() {
        let v = view(0x1000, 4, &[4, 8], &[8, 1]);
        assert_eq!(v.layout, Layout::Dense);
        assert!(v.covers(0x1000, 128));
        assert!(v.covers(0x1000 + 124, 4));
        assert!(v.covers(0x1001, 2), "a contiguous view is checked by bytes");
        assert!(!v.covers(0x1000 + 128, 4), "one element past the end");
        assert!(!v.covers(0x1000 + 126, 4), "straddles the end");
        assert!(!v.covers(0xffc, 4), "before the start");
        assert!(!v.covers(0xffc, 8), "straddles the start");
        assert!(!v.covers(0x1000, 129));
    }

    #[test]
    fn strided_column_covers_its_elements_only() {
        // Column 2 of an 8x8 f32 matrix at 0x1000.
        let v = view(0x1000 + 8, 4, &[8, 1], &[8, 1]);
        assert!(matches!(v.layout, Layout::Strided { n: 1, run: 4, elem: 4, .. }), "{v:?}");
        for r in 0..8u64 {
            assert!(v.covers(0x1008 + r * 32, 4), "row {r}");
        }
        assert!(!v.covers(0x1008 + 4, 4), "the gap after an element");
        assert!(!v.covers(0x1008 + 2, 4), "straddles an element and the gap");
        assert!(!v.covers(0x1008 + 1, 1), "not on an element boundary");
        assert!(!v.covers(0x1008, 8), "longer than the run");
        assert!(!v.covers(0x1008 + 8 * 32, 4), "one row past the end");
        // A block of rows: runs of 3 elements.
        let v = view(0x2000, 4, &[4, 3], &[8, 1]);
        assert!(matches!(v.layout, Layout::Strided { n: 1, run: 12, .. }), "{v:?}");
        assert!(v.covers(0x2000, 12));
        assert!(v.covers(0x2000 + 32 + 4, 8));
        assert!(!v.covers(0x2000 + 8, 8), "runs into the gap");
        assert!(!v.covers(0x2000 + 12, 4));
        assert!(v.covers(0x2000 + 3 * 32 + 8, 4), "last element");
        assert!(!v.covers(0x2000 + 3 * 32 + 12, 4));
        // Three dimensions, innermost stride 2 (every other element).
        let v = view(0, 2, &[2, 3, 4], &[64, 16, 2]);
        assert!(matches!(v.layout, Layout::Strided { n: 3, run: 2, .. }), "{v:?}");
        assert!(v.covers(2 * (64 + 2 * 16 + 3 * 2), 2));
        assert!(!v.covers(2 * (64 + 2 * 16 + 3 * 2 + 1), 2));
        assert!(!v.covers(2 * (3 * 16), 2), "index 3 of a dimension of 3, inside the bounding range");
    }

    #[test]
    fn transposed_views() {
        // A dense matrix seen transposed is one run.
        let v = view(0x1000, 4, &[8, 4], &[1, 8]);
        assert_eq!(v.layout, Layout::Dense);
        assert!(v.covers(0x1000, 128));
        assert!(!v.covers(0x1000 + 128, 1));
        // Adjacent rows 0..2 of a [4, 8] matrix seen transposed are dense too.
        assert_eq!(view(0x1000, 4, &[8, 2], &[1, 8]).layout, Layout::Dense);
        // Rows 0 and 2 of a [4, 8] matrix seen as [8, 2] with strides [1, 16].
        let v = view(0x1000, 4, &[8, 2], &[1, 16]);
        assert!(matches!(v.layout, Layout::Strided { n: 1, run: 32, .. }), "{v:?}");
        assert!(v.covers(0x1000, 32));
        assert!(v.covers(0x1000 + 64, 32));
        assert!(!v.covers(0x1000 + 32, 4), "row 1 is not in the view");
        assert!(!v.covers(0x1000 + 16, 32), "runs past row 0");
        // Transposed column block with gaps: [3, 2] with strides [1, 16].
        let v = view(0, 4, &[3, 2], &[1, 16]);
        assert!(v.covers(64 + 8, 4));
        assert!(!v.covers(64 + 12, 4));
        assert!(!v.covers(12, 4));
    }

    #[test]
    fn overlapping_views_fall_back_to_their_bounding_range() {
        // Sliding windows: rows of 4 elements overlapping by 2.
        let v = view(0x1000, 4, &[5, 4], &[2, 1]);
        assert_eq!(v.layout, Layout::Bounding);
        assert!(v.covers(0x1000, (4 * 2 + 4) * 4));
        assert!(!v.covers(0x1000 + 48, 4));
        // Two dimensions with the same stride.
        let v = view(0, 4, &[3, 3], &[5, 5]);
        assert_eq!(v.layout, Layout::Bounding);
        assert!(v.covers(4, 4), "inside the bounding range, between elements");
        assert!(v.covers(0, 84));
        assert!(!v.covers(84, 4));
        // A broadcast dimension adds no addresses; the rest is dense.
        let v = view(0, 4, &[6, 4], &[0, 1]);
        assert_eq!(v.layout, Layout::Dense);
        assert!(v.covers(0, 16));
        assert!(!v.covers(16, 4));
    }

    #[test]
    fn empty_and_degenerate_views_cover_nothing_or_one_element() {
        assert!(!view(0x1000, 4, &[0, 4], &[4, 1]).covers(0x1000, 1));
        assert!(!view(0x1000, 0, &[4], &[1]).covers(0x1000, 1));
        let v = view(0x1000, 8, &[1, 1], &[7, 3]);
        assert!(v.covers(0x1000, 8));
        assert!(!v.covers(0x1008, 1));
    }

    #[test]
    fn huge_values_are_checked_not_wrapped() {
        let max = u64::MAX;
        // A view that ends exactly at the top of the address space.
        let v = view(max - 15, 4, &[4], &[1]);
        assert_eq!(v.len, 16);
        assert!(v.covers(max - 15, 16));
        assert!(v.covers(max - 3, 4));
        assert!(!v.covers(max - 3, 5));
        assert!(!v.covers(max, u64::MAX));
        // One byte more would wrap: the view covers nothing.
        let v = view(max - 14, 4, &[4], &[1]);
        assert_eq!(v.len, 0);
        assert!(!v.covers(max - 14, 4));
        // Extents whose byte size overflows u64.
        let v = view(0, u32::MAX, &[u32::MAX, u32::MAX, u32::MAX], &[u32::MAX, u32::MAX, 1]);
        assert_eq!(v.len, 0);
        assert!(!v.covers(0, 1));
        // Large but representable strides near the top.
        let v = view(max - (u32::MAX as u64) * 4 * 2 - 3, 4, &[3], &[u32::MAX]);
        assert!(matches!(v.layout, Layout::Strided { .. }), "{v:?}");
        assert!(v.covers(max - 3, 4), "last element, ending at 2^64");
        assert!(!v.covers(max - 2, 3), "not on an element boundary");
        assert!(!v.covers(max - 7, 4), "in a gap");
        // Accesses whose end wraps.
        let v = view(0x1000, 4, &[4], &[1]);
        assert!(!v.covers(0x1000, u64::MAX));
        assert!(!v.covers(u64::MAX, 2));
        assert!(v.distance(u64::MAX, u64::MAX) > 0);
    }

    #[test]
    fn messages_name_the_access_and_the_nearest_argument() {
        let out = View::of(&arg(0x1_0000_1000, 4, &[16], &[1]), true);
        let inp = View::of(&arg(0x1_0000_0000, 4, &[16], &[1]), false);
        let views = [inp, out];
        let m = violation(&views, true, 0x1_0000_1040, 4);
        assert_eq!(m, "write 0x100001040+4 outside views; nearest arg 1 [0x100001000,0x100001040) writable");
        let m = violation(&views, true, 0x1_0000_0010, 4);
        assert_eq!(m, "write 0x100000010+4 outside writable views; arg 0 [0x100000000,0x100000040) input-only");
        assert!(m.len() <= 96, "{} bytes", m.len());
        let col = View::of(&arg(0x2000, 4, &[8], &[4]), true);
        assert_eq!(
            violation(&[col], false, 0x2004, 4),
            "read 0x2004+4 between elements of arg 0 [0x2000,0x2074) writable"
        );
        assert_eq!(violation(&[], false, 0x2004, 4), "read 0x2004+4 outside views; no argument covers it");
    }

    /// GM of the unit tests: 256 bytes at 0x1000.
    struct Mem(RefCell<Vec<u8>>);

    impl GmMemory for Mem {
        fn read(&self, addr: GmAddr, dst: &mut [u8]) {
            let o = (addr.0 - 0x1000) as usize;
            dst.copy_from_slice(&self.0.borrow()[o..o + dst.len()]);
        }
        fn write(&self, addr: GmAddr, src: &[u8]) {
            let o = (addr.0 - 0x1000) as usize;
            self.0.borrow_mut()[o..o + src.len()].copy_from_slice(src);
        }
    }

    /// A task of 20 arguments (more than fit inline): argument 0 writable at 0x1000, 16 bytes;
    /// the others input-only, 4 bytes each from 0x1010.
    struct Ctx {
        mem: Mem,
        args: Vec<TensorArg>,
    }

    impl Ctx {
        fn new(count: usize) -> Ctx {
            let args =
                (0..count)
                    .map(|i| {
                        if i == 0 {
                            arg(0x1000, 4, &[4], &[1])
                        } else {
                            arg(0x1010 + 4 * (i as u64 - 1), 4, &[1], &[1])
                        }
                    })
                    .collect();
            Ctx { mem: Mem(RefCell::new(vec![0xee; 256])), args }
        }
    }

    impl KernelContext for Ctx {
        fn tensor(&self, i: usize) -> Option<TensorArg> {
            self.args.get(i).copied()
        }
        fn tensor_count(&self) -> usize {
            self.args.len()
        }
        fn scalar(&self, _: usize) -> Option<u64> {
            None
        }
        fn scalar_count(&self) -> usize {
            0
        }
        fn block_idx(&self) -> u32 {
            0
        }
        fn block_num(&self) -> u32 {
            1
        }
        fn sub_block_id(&self) -> u32 {
            0
        }
        fn core_type(&self) -> CoreType {
            CoreType::Aiv
        }
        fn task_id(&self) -> u32 {
            7
        }
        fn writable(&self, i: usize) -> bool {
            i == 0
        }
        fn gm(&self) -> &dyn GmMemory {
            &self.mem
        }
    }

    fn legal(k: &mut dyn KernelContext) {
        let mut b = [0u8; 4];
        k.gm().read(GmAddr(0x1010), &mut b);
        k.gm().read(GmAddr(0x1010 + 4 * 18), &mut b);
        k.gm().write(GmAddr(0x1004), &[1, 2, 3, 4]);
        k.gm().write(GmAddr(0x9999_0000), &[]);
        k.gm().read(GmAddr(u64::MAX), &mut []);
    }

    fn write_input(k: &mut dyn KernelContext) {
        k.gm().write(GmAddr(0x1014), &[9; 4]);
    }

    fn caught(k: &mut dyn KernelContext) {
        let r = catch_unwind(AssertUnwindSafe(|| k.gm().write(GmAddr(0x1000 + 16 * 4 + 200), &[9; 4])));
        assert!(r.is_err());
        // A second violation: the first is the one reported.
        let _ = catch_unwind(AssertUnwindSafe(|| k.gm().write(GmAddr(0x1014), &[9; 4])));
    }

    #[test]
    fn the_guard_forwards_legal_accesses_and_refuses_the_rest() {
        crate::panics::install_quiet_hook();
        let mut ctx = Ctx::new(20);
        // Unit tests run on threads the quiet hook does not claim: run on an agent-named one.
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("pto-aicore-test".into())
                .spawn_scoped(s, || {
                    assert_eq!(run_kernel(legal, &mut ctx, None), Ok(()));
                    assert_eq!(&ctx.mem.0.borrow()[..8], &[0xee, 0xee, 0xee, 0xee, 1, 2, 3, 4]);

                    let e = run_kernel(write_input, &mut ctx, None).unwrap_err();
                    assert_eq!(e.as_str(), "write 0x1014+4 outside writable views; arg 2 [0x1014,0x1018) input-only");
                    assert_eq!(&ctx.mem.0.borrow()[0x14..0x18], &[0xee; 4], "nothing landed");

                    let e = run_kernel(caught, &mut ctx, None).unwrap_err();
                    assert!(e.as_str().starts_with("write 0x1108+4 outside views; nearest arg 19"), "{}", e.as_str());
                    assert!(ctx.mem.0.borrow().iter().skip(8).all(|&b| b == 0xee), "nothing landed");

                    // Few arguments: the inline path.
                    let mut small = Ctx::new(3);
                    assert_eq!(
                        run_kernel(write_input, &mut small, None).unwrap_err().as_str().get(..14),
                        Some("write 0x1014+4")
                    );
                })
                .expect("spawn")
                .join()
                .expect("join")
        });
    }
}
