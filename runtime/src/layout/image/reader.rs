//! The one reader of a graph image: where its bytes come from ([`ImageSource`]), the view
//! that checks the header and regions once and computes every offset ([`ImageView`]), and
//! the whole-image check a scheduler relies on ([`CheckedImage`]).

use core::mem::size_of;

use zerocopy::{FromZeros, IntoBytes};

use alloc::vec::Vec;

use super::{
    ARGS_HEAD, ArgsHeader, FuncEntry, IMAGE_MAGIC, ImageError, ImageHeader, Shape, TaskRecord, TensorDesc, args_flags,
    lanes_fit,
};

/// Where an image's bytes come from: the host's own copy (`[u8]`), or GM through an agent
/// (the AICPU after it made the host's write visible; a core, which observes each line it
/// reads). [`ImageView`] asks only for ranges it has checked against the image's length.
pub trait ImageSource {
    /// Copy the image bytes at offset `off` into `buf`.
    fn read_at(&self, off: u64, buf: &mut [u8]);
}

impl ImageSource for [u8] {
    fn read_at(&self, off: u64, buf: &mut [u8]) {
        // The view checked `off + buf.len()` against the image length, which is this slice's.
        let at = usize::try_from(off).unwrap_or(usize::MAX);
        match at.checked_add(buf.len()).and_then(|end| self.get(at..end)) {
            Some(src) => buf.copy_from_slice(src),
            None => buf.fill(0),
        }
    }
}

/// The one reader of a host-built graph image, used by the host (over the bytes it built),
/// the AICPU program (over GM) and the resident cores (over GM, observing each line): the
/// header and the regions are checked once, at [`ImageView::open`]; every offset is
/// computed here.
pub struct ImageView<'s, S: ImageSource + ?Sized> {
    src: &'s S,
    header: ImageHeader,
}

/// Bytes of one [`TaskRecord`].
const TASK_BYTES: u64 = size_of::<TaskRecord>() as u64;
/// Bytes of one [`FuncEntry`].
const FUNC_BYTES: u64 = size_of::<FuncEntry>() as u64;

impl<'s, S: ImageSource + ?Sized> ImageView<'s, S> {
    /// Open an image of `len` bytes (the length the host published): its header names this
    /// layout and length, and its task, fan-out and func regions fit in it.
    pub fn open(src: &'s S, len: u64) -> Result<Self, ImageError> {
        let mut header = ImageHeader::new_zeroed();
        if len < size_of::<ImageHeader>() as u64 {
            return Err(ImageError::Short);
        }
        src.read_at(0, header.as_mut_bytes());
        if header.magic != IMAGE_MAGIC || header.version != crate::layout::LAYOUT_VERSION || header.total_len != len {
            return Err(ImageError::Header);
        }
        let within = |off: u64, count: u64, each: u64| {
            count.checked_mul(each).and_then(|b| off.checked_add(b)).is_some_and(|end| end <= len)
        };
        if !within(header.tasks_off, header.task_count as u64, TASK_BYTES)
            || !within(header.fanout_off, header.fanout_len, 4)
            || !within(header.funcs_off, header.func_count as u64, FUNC_BYTES)
        {
            return Err(ImageError::Regions);
        }
        Ok(ImageView { src, header })
    }

    /// The header.
    pub fn header(&self) -> &ImageHeader {
        &self.header
    }

    /// Tasks in the image.
    pub fn task_count(&self) -> u32 {
        self.header.task_count
    }

    /// Offset of task `t`'s record (`t` below [`task_count`](Self::task_count)).
    pub fn task_offset(&self, t: u32) -> u64 {
        self.header.tasks_off + t as u64 * TASK_BYTES
    }

    /// Task `t`'s record; a zeroed record (no lanes, no consumers) past the last task.
    pub fn task(&self, t: u32) -> TaskRecord {
        let mut r = TaskRecord::new_zeroed();
        if t < self.header.task_count {
            self.src.read_at(self.task_offset(t), r.as_mut_bytes());
        }
        r
    }

    /// Every task record, in one read.
    pub fn tasks(&self) -> Vec<TaskRecord> {
        let mut v = alloc::vec![TaskRecord::new_zeroed(); self.header.task_count as usize];
        self.src.read_at(self.header.tasks_off, v.as_mut_bytes());
        v
    }

    /// Offset of fan-out entry `i` (`i` below the header's `fanout_len`).
    pub fn fanout_offset(&self, i: u64) -> u64 {
        self.header.fanout_off + i * 4
    }

    /// Fan-out entry `i` (a consumer's task id); `u32::MAX` past the array.
    pub fn fanout(&self, i: u64) -> u32 {
        let mut b = [0u8; 4];
        if i >= self.header.fanout_len {
            return u32::MAX;
        }
        self.src.read_at(self.fanout_offset(i), &mut b);
        u32::from_le_bytes(b)
    }

    /// Fan-out entries `first..first + out.len()` into `out`, in one read; entries past the
    /// array read as `u32::MAX` (no task has that id).
    pub fn read_fanout(&self, first: u64, out: &mut [u32]) {
        let n = self.header.fanout_len.saturating_sub(first).min(out.len() as u64) as usize;
        out[n..].fill(u32::MAX);
        if n > 0 {
            self.src.read_at(self.fanout_offset(first), out[..n].as_mut_bytes());
        }
    }

    /// The whole fan-out array, in one read.
    pub fn fanouts(&self) -> Vec<u32> {
        let mut v = alloc::vec![0u32; self.header.fanout_len as usize];
        self.src.read_at(self.header.fanout_off, v.as_mut_bytes());
        v
    }

    /// Func `f`'s binaries; `None` past the func table.
    pub fn func(&self, f: u16) -> Option<FuncEntry> {
        if f as u32 >= self.header.func_count {
            return None;
        }
        let mut e = FuncEntry::new_zeroed();
        self.src.read_at(self.header.funcs_off + f as u64 * FUNC_BYTES, e.as_mut_bytes());
        Some(e)
    }

    /// The whole func table, in one read.
    pub fn funcs(&self) -> Vec<FuncEntry> {
        let mut v = alloc::vec![FuncEntry::new_zeroed(); self.header.func_count as usize];
        self.src.read_at(self.header.funcs_off, v.as_mut_bytes());
        v
    }

    /// Offset of task `t`'s argument record (`rec` is its record), unchecked: for a reader
    /// of an image that [`validate`](Self::validate) accepted.
    pub fn args_offset(&self, t: u32, rec: &TaskRecord) -> u64 {
        (self.task_offset(t) as i64).wrapping_add(rec.args_rel as i64) as u64
    }

    /// Task `t`'s argument-record header, after checking that the record lies in the image.
    pub fn args_header(&self, t: u32, rec: &TaskRecord) -> Result<ArgsHeader, ImageError> {
        let off = (self.task_offset(t) as i64).checked_add(rec.args_rel as i64);
        let inside = off.and_then(|o| u64::try_from(o).ok()).filter(|&o| {
            o.checked_add(rec.args_len as u64).is_some_and(|end| end <= self.header.total_len)
                && rec.args_len as u64 >= ARGS_HEAD
        });
        let Some(off) = inside else { return Err(ImageError::ArgsOutside { task: t }) };
        let mut h = ArgsHeader::new_zeroed();
        self.src.read_at(off, h.as_mut_bytes());
        Ok(h)
    }

    /// Check every task and edge of the image and return what a scheduler holds: records,
    /// fan-out, funcs and each task's argument-record offset and header.
    pub fn validate(&self) -> Result<CheckedImage, ImageError> {
        let tasks = self.tasks();
        let fanout = self.fanouts();
        let funcs = self.funcs();
        let n = tasks.len();
        let mut args = Vec::with_capacity(n);
        let mut fanin_total = 0u64;
        for (i, t) in tasks.iter().enumerate() {
            let task = i as u32;
            let ah = self.args_header(task, t)?;
            if !lanes_fit(t) || t.block_num == 0 || (t.shape == Shape::Dummy as u8 && t.block_num != 1) {
                return Err(ImageError::Shape { task });
            }
            if t.fanout_start as u64 + t.fanout_count as u64 > self.header.fanout_len {
                return Err(ImageError::Fanout { task });
            }
            for lane in 0..3u8 {
                if t.lanes & (1 << lane) == 0 {
                    continue;
                }
                let f = funcs.get(t.funcs[lane as usize] as usize).copied().unwrap_or_default();
                if (if lane == 0 { f.aic } else { f.aiv }) == 0 {
                    return Err(ImageError::NoBinary { task, lane });
                }
            }
            if ARGS_HEAD + ah.tensors as u64 * size_of::<TensorDesc>() as u64 + ah.scalars as u64 * 8
                != t.args_len as u64
            {
                return Err(ImageError::ArgsLength { task });
            }
            if ah.predicate % 4 != 0 || ah.flags & !args_flags::ALL != 0 {
                return Err(ImageError::ArgsFlags { task });
            }
            fanin_total += t.fanin as u64;
            args.push((self.args_offset(task, t), ah));
        }
        if fanin_total != self.header.fanout_len || fanout.iter().any(|&c| c as usize >= n) {
            return Err(ImageError::Edges);
        }
        Ok(CheckedImage { tasks, fanout, funcs, args })
    }
}

/// An image [`ImageView::validate`] accepted, copied out of its source.
#[derive(Clone, Debug)]
pub struct CheckedImage {
    /// Task records.
    pub tasks: Vec<TaskRecord>,
    /// Fan-out ids (consumers), each task's from its `fanout_start`.
    pub fanout: Vec<u32>,
    /// Func table.
    pub funcs: Vec<FuncEntry>,
    /// Each task's argument-record offset in the image and its header.
    pub args: Vec<(u64, ArgsHeader)>,
}

impl CheckedImage {
    /// Producer → consumer edges, in task order.
    pub fn edges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.tasks.iter().enumerate().flat_map(move |(i, t)| {
            let s = t.fanout_start as usize;
            self.fanout[s..s + t.fanout_count as usize].iter().map(move |&c| (i as u32, c))
        })
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{NO_FUNC, lanes};
    use alloc::vec;
    use zerocopy::FromBytes;

    /// A valid two-task image: task 0 (AIV) feeds task 1 (AIV), one func, no arguments.
    fn image() -> Vec<u8> {
        let tasks_off = 64u64;
        let fanout_off = tasks_off + 2 * TASK_BYTES;
        let funcs_off = fanout_off + 8;
        let args_off = funcs_off + FUNC_BYTES;
        let total = args_off + 2 * ARGS_HEAD;
        let h = ImageHeader {
            magic: IMAGE_MAGIC,
            version: crate::layout::LAYOUT_VERSION,
            task_count: 2,
            func_count: 1,
            total_len: total,
            tasks_off,
            fanout_off,
            fanout_len: 1,
            funcs_off,
            args_off,
        };
        let mut b = vec![0u8; total as usize];
        b[..64].copy_from_slice(h.as_bytes());
        for t in 0..2u32 {
            let at = tasks_off + t as u64 * TASK_BYTES;
            let args = args_off + t as u64 * ARGS_HEAD;
            let r = TaskRecord {
                funcs: [NO_FUNC, 0, NO_FUNC],
                shape: Shape::Aiv as u8,
                lanes: lanes::AIV0,
                block_num: 1,
                fanin: t,
                fanout_start: 0,
                fanout_count: 1 - t,
                args_rel: (args as i64 - at as i64) as i32,
                args_len: ARGS_HEAD as u32,
            };
            b[at as usize..(at + TASK_BYTES) as usize].copy_from_slice(r.as_bytes());
        }
        b[fanout_off as usize..fanout_off as usize + 4].copy_from_slice(&1u32.to_le_bytes());
        let f = FuncEntry { aic: 0, aiv: 0x1000 };
        b[funcs_off as usize..(funcs_off + FUNC_BYTES) as usize].copy_from_slice(f.as_bytes());
        b
    }

    fn check(b: &[u8]) -> Result<CheckedImage, ImageError> {
        ImageView::open(b, b.len() as u64)?.validate()
    }

    fn with_task(b: &mut [u8], t: u32, edit: impl FnOnce(&mut TaskRecord)) {
        let at = (64 + t as u64 * TASK_BYTES) as usize;
        let mut r = TaskRecord::read_from_bytes(&b[at..at + TASK_BYTES as usize]).unwrap();
        edit(&mut r);
        b[at..at + TASK_BYTES as usize].copy_from_slice(r.as_bytes());
    }

    #[test]
    fn a_valid_image_reads_back_its_tasks_edges_and_args() {
        let b = image();
        let c = check(&b).unwrap();
        assert_eq!(c.tasks.len(), 2);
        assert_eq!(c.edges().collect::<Vec<_>>(), [(0, 1)]);
        let v = ImageView::open(&b[..], b.len() as u64).unwrap();
        assert_eq!(v.fanout(0), 1);
        assert_eq!(v.fanout(1), u32::MAX, "past the array");
        let mut out = [0u32; 3];
        v.read_fanout(0, &mut out);
        assert_eq!(out, [1, u32::MAX, u32::MAX]);
        assert_eq!(v.func(0).unwrap().aiv, 0x1000);
        assert!(v.func(1).is_none());
        assert_eq!(v.task(2).block_num, 0, "past the last task: a zeroed record");
        assert_eq!(c.args[1].0, v.args_offset(1, &c.tasks[1]));
    }

    #[test]
    fn every_check_names_what_failed() {
        let b = image();
        assert_eq!(ImageView::open(&b[..10], 10).err(), Some(ImageError::Short));
        assert_eq!(ImageView::open(&b[..], b.len() as u64 - 1).err(), Some(ImageError::Header));
        let mut m = b.clone();
        m[0] ^= 1;
        assert_eq!(check(&m).err(), Some(ImageError::Header));
        // A task region that runs past the end, with an offset near the integer limit.
        let mut m = b.clone();
        m[24..32].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        assert_eq!(check(&m).err(), Some(ImageError::Regions));
        type Edit = fn(&mut TaskRecord);
        let cases: [(u32, Edit, ImageError); 6] = [
            (1, |r| r.args_rel = i32::MIN, ImageError::ArgsOutside { task: 1 }),
            (1, |r| r.args_len = 1, ImageError::ArgsOutside { task: 1 }),
            (0, |r| r.lanes = lanes::AIC, ImageError::Shape { task: 0 }),
            (0, |r| r.block_num = 0, ImageError::Shape { task: 0 }),
            (0, |r| r.fanout_count = 2, ImageError::Fanout { task: 0 }),
            (1, |r| r.fanin = 0, ImageError::Edges),
        ];
        for (t, edit, want) in cases {
            let mut m = b.clone();
            with_task(&mut m, t, edit);
            assert_eq!(check(&m).err(), Some(want));
        }
        let mut m = b.clone();
        with_task(&mut m, 1, |r| r.funcs[1] = 5);
        assert_eq!(check(&m).err(), Some(ImageError::NoBinary { task: 1, lane: 1 }));
        assert_eq!(ImageError::NoBinary { task: 1, lane: 1 }.detail(), 0x1_0601);
    }
}
