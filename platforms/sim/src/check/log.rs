//! What the checks record while a run goes on: each kernel run's accesses (coalesced), and
//! the run's submission order, edges and fresh memory. Analysed once the run has ended.

use std::collections::HashMap;

/// One coalesced kernel access: consecutive accesses through one argument in one direction
/// that continue each other are one range.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub arg: u32,
    pub write: bool,
    pub lo: u64,
    pub hi: u64,
}

/// The accesses of one kernel run (one block of a task), in program order.
#[derive(Default, Debug)]
pub(crate) struct BlockLog {
    /// The run's block index and lane: a task's blocks are analysed in this order, whatever
    /// order they ran in.
    pub block: (u32, u32),
    /// Per tensor argument: the view's first byte, its element size, and whether it is dense
    /// (so an element index is a byte offset over the element size).
    pub views: Vec<(u64, u32, bool)>,
    pub accesses: Vec<Access>,
}

impl BlockLog {
    /// An empty log of the kernel run `ctx` describes: its block and lane, and its views.
    pub fn of(ctx: &dyn pto_hal::KernelContext) -> BlockLog {
        let views = (0..ctx.tensor_count())
            .map(|i| ctx.tensor(i).map_or((0, 0, false), |t| (t.addr.0, t.elem_bytes, t.is_contiguous())))
            .collect();
        BlockLog { block: (ctx.block_idx(), ctx.sub_block_id()), views, accesses: Vec::new() }
    }

    /// Record an access of `len > 0` bytes at `addr` through argument `arg`.
    #[inline]
    pub fn push(&mut self, arg: u32, write: bool, addr: u64, len: u64) {
        let hi = addr.saturating_add(len);
        if let Some(last) = self.accesses.last_mut()
            && last.arg == arg
            && last.write == write
            && last.hi == addr
        {
            last.hi = hi;
            return;
        }
        self.accesses.push(Access { arg, write, lo: addr, hi });
    }
}

impl BlockLog {
    /// Elements of a view beyond which [`BlockLog::push_view`] records the view's bounding range
    /// instead of its elements.
    pub const VIEW_ELEMENTS: u64 = 1 << 22;

    /// Record every element of view `t` as accessed through argument `arg` (a kernel seen only
    /// at its boundary: what it was given, not what it touched), as the view's contiguous runs
    /// in address order, so a dense or transposed view is one range and a tile of a matrix one
    /// range per row. A view of more than [`BlockLog::VIEW_ELEMENTS`] elements is recorded as
    /// its bounding range.
    pub fn push_view(&mut self, arg: u32, write: bool, t: &pto_hal::TensorArg) {
        if t.elem_count() > Self::VIEW_ELEMENTS {
            let s = crate::native::span(t);
            if s.start < s.end {
                self.push(arg, write, s.start, s.end - s.start);
            }
            return;
        }
        let mut runs = crate::native::runs(t);
        runs.sort_unstable();
        for (off, len) in runs {
            self.push(arg, write, t.addr.0 + off, len);
        }
    }
}

/// Something the run did, in submission order.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A task was submitted (its producers are in [`RunLog::preds`]).
    Task(u32),
    /// A task retired: every task submitted after this point is ordered after it.
    Retired(u32),
    /// Fresh memory was handed out.
    Fresh { lo: u64, hi: u64 },
    /// The orchestration read or wrote an element.
    Orchestration { lo: u64, hi: u64, write: bool },
}

/// A task's kernel runs: the kernel and each block's log.
#[derive(Default, Debug)]
pub(crate) struct TaskRuns {
    pub kernel: usize,
    pub blocks: Vec<BlockLog>,
}

/// One run's record (a run is identified by its launch descriptor's address).
#[derive(Default, Debug)]
pub(crate) struct RunLog {
    /// Launches of the run submitted and not yet finished.
    pub pending: u32,
    pub order: Vec<Event>,
    pub preds: HashMap<u32, Vec<u32>>,
    pub runs: HashMap<u32, TaskRuns>,
}

impl RunLog {
    pub fn note_task(&mut self, task: u32, producers: &mut dyn Iterator<Item = u32>) {
        self.order.push(Event::Task(task));
        let p = self.preds.entry(task).or_default();
        p.extend(producers.filter(|&x| x != task));
    }

    pub fn kernel_ran(&mut self, task: u32, kernel: usize, block: BlockLog) {
        let t = self.runs.entry(task).or_default();
        t.kernel = kernel;
        let at = t.blocks.partition_point(|b| b.block <= block.block);
        t.blocks.insert(at, block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pto_hal::{GmAddr, TensorArg};

    fn view(shape: &[u32], strides: &[u32]) -> TensorArg {
        let mut t = TensorArg {
            addr: GmAddr(0x1000),
            dtype: 0,
            elem_bytes: 4,
            ndims: shape.len() as u32,
            shape: [0; 5],
            strides: [0; 5],
        };
        t.shape[..shape.len()].copy_from_slice(shape);
        t.strides[..strides.len()].copy_from_slice(strides);
        t
    }

    fn ranges(t: &TensorArg) -> Vec<(u64, u64)> {
        let mut b = BlockLog::default();
        b.push_view(0, true, t);
        b.accesses.iter().map(|a| (a.lo, a.hi)).collect()
    }

    #[test]
    fn a_view_is_its_elements_in_as_few_ranges_as_they_make() {
        // Dense, and the same matrix seen transposed: one range.
        assert_eq!(ranges(&view(&[4, 8], &[8, 1])), vec![(0x1000, 0x1080)]);
        assert_eq!(ranges(&view(&[8, 4], &[1, 8])), vec![(0x1000, 0x1080)]);
        // A 2x3 tile of a 4x8 matrix: one range per row, the gaps left out.
        assert_eq!(ranges(&view(&[2, 3], &[8, 1])), vec![(0x1000, 0x100c), (0x1020, 0x102c)]);
        // A column: one element per row.
        assert_eq!(ranges(&view(&[3, 1], &[8, 1])), vec![(0x1000, 0x1004), (0x1020, 0x1024), (0x1040, 0x1044)]);
        // An empty view touches nothing.
        assert!(ranges(&view(&[0, 4], &[4, 1])).is_empty());
    }
}
