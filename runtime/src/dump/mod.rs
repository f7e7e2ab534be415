//! The args dump, device side: which arguments a run records ([`DumpLevel`] and the marks of
//! `Task::dump`), the producer surface of a lane ([`DumpLane`], [`DumpReservation`] and what
//! [`DumpLane::try_begin`] answers: [`Begin`], [`Blocked`], [`Refusal`]), the lane each AICPU
//! thread records into (`GmLane`, its implementation over any AICPU agent), and the capture
//! at task boundaries ([`Dumper`]): before a task's first dispatch (inputs and in-outs as it
//! will read them) and after its completion (outputs and in-outs as written), by the AICPU
//! thread that dispatches or reaps it. The host side (collector, files, reader) is
//! `host::dump`.
//!
//! With the dump off a launch carries no dump region, [`Dumper::open`] answers `None`, and the
//! only cost left at the two capture sites is testing that `Option`.

pub(crate) mod lane;
mod producer;

/// Loom models of the args-dump lane (`GmLane`, `Dumper`) (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;

pub(crate) use lane::{Capture, GmLane, Suspended};
pub use producer::{Begin, Blocked, DumpLane, DumpReservation, Refusal};

use num_enum::{IntoPrimitive, TryFromPrimitive};
use pto_hal::{AicpuAgent, AicpuCache, GmAddr, GmMemory, GmMemoryExt};
use zerocopy::{FromZeros, IntoBytes};

use crate::layout::{
    ARGS_HEAD, ArgsHeader, DUMP_MAGIC, DumpHeader, DumpLayout, DumpRecord, LaunchConfig, NO_FUNC, TENSOR_DUMP,
    TENSOR_READ, TENSOR_WRITTEN, TensorDesc, dump_direction, dump_flags, dump_stage,
};

/// How much of a run the args dump records. The codes are the reference runtime's.
// Under `std` the args-dump manifest (`host::documents::manifest`) names the level as
// [`DumpLevel::name`] spells it; derived under the feature for the reasons given at
// `graph::DType` (the host's documents test that the two spellings agree).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
#[repr(u32)]
pub enum DumpLevel {
    /// Only arguments marked with `Task::dump`: their metadata and their data.
    Partial = 1,
    /// Every argument of every task, with its data.
    Full = 2,
    /// Metadata of every argument of every task; data only for marked arguments.
    Hybrid = 3,
}

impl DumpLevel {
    /// The level's name as the command line and the manifest spell it.
    pub const fn name(self) -> &'static str {
        match self {
            DumpLevel::Partial => "partial",
            DumpLevel::Full => "full",
            DumpLevel::Hybrid => "hybrid",
        }
    }

    /// Whether an argument (`marked` or not) is recorded, and whether with its data.
    pub const fn select(self, marked: bool) -> Option<bool> {
        match self {
            DumpLevel::Partial => {
                if marked {
                    Some(true)
                } else {
                    None
                }
            }
            DumpLevel::Hybrid => Some(marked),
            DumpLevel::Full => Some(true),
        }
    }
}

impl core::fmt::Display for DumpLevel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for DumpLevel {
    type Err = UnknownDumpLevel;
    fn from_str(s: &str) -> Result<DumpLevel, UnknownDumpLevel> {
        match s {
            "partial" => Ok(DumpLevel::Partial),
            "hybrid" => Ok(DumpLevel::Hybrid),
            "full" => Ok(DumpLevel::Full),
            _ => Err(UnknownDumpLevel),
        }
    }
}

/// A dump level name that is not `partial`, `hybrid` or `full`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct UnknownDumpLevel;

impl core::fmt::Display for UnknownDumpLevel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("unknown dump level (expected partial, hybrid or full)")
    }
}

/// The direction code of a tensor argument from its descriptor's flags.
pub const fn direction_of(flags: u32) -> u8 {
    match (flags & TENSOR_READ != 0, flags & TENSOR_WRITTEN != 0) {
        (true, true) => dump_direction::INOUT,
        (false, true) => dump_direction::OUTPUT,
        _ => dump_direction::INPUT,
    }
}

/// Whether an argument of direction `dir` is captured at `stage`: inputs before dispatch,
/// outputs after completion, in-outs at both.
pub const fn at_stage(dir: u8, stage: u8) -> bool {
    match dir {
        dump_direction::INOUT => true,
        dump_direction::OUTPUT => stage == dump_stage::AFTER_COMPLETION,
        _ => stage == dump_stage::BEFORE_DISPATCH,
    }
}

/// A task's argument record as the dump reads it: its address and its header, read once
/// (the header is what every question below starts from; the image does not change during a
/// run, so one read serves a task's whole boundary).
#[derive(Copy, Clone, Debug)]
pub struct TaskArgs {
    args: u64,
    head: ArgsHeader,
}

impl TaskArgs {
    /// Read the header of the argument record at `args`.
    pub fn read<G: GmMemory>(a: &G, args: u64) -> TaskArgs {
        let mut head = ArgsHeader::new_zeroed();
        a.read(GmAddr(args), head.as_mut_bytes());
        TaskArgs { args, head }
    }

    /// The argument record at `args` whose header the caller has already read.
    pub const fn with_header(args: u64, head: ArgsHeader) -> TaskArgs {
        TaskArgs { args, head }
    }

    /// Tensor arguments, bounded by the layout's maximum.
    fn tensors(&self) -> u32 {
        self.head.tensors.min(crate::layout::MAX_TENSOR_ARGS as u32)
    }

    /// Scalar arguments, bounded by the layout's maximum.
    fn scalars(&self) -> u32 {
        self.head.scalars.min(crate::layout::MAX_SCALAR_ARGS as u32)
    }

    /// The record's length in bytes as its header gives it (both counts bounded by the
    /// layout's maximums): the range an agent makes visible before it reads the arguments.
    pub fn bytes(&self) -> u64 {
        ARGS_HEAD + self.tensors() as u64 * 64 + self.scalars() as u64 * 8
    }

    /// Tensor descriptor `i`.
    fn desc<G: GmMemory>(&self, a: &G, i: u32) -> TensorDesc {
        let mut d = TensorDesc::new_zeroed();
        a.read(GmAddr(self.args + ARGS_HEAD + i as u64 * 64), d.as_mut_bytes());
        d
    }

    /// The first argument of task `task` with index `from` or later that `level` records at
    /// `stage`, and its capture: tensors in order (inputs and in-outs before dispatch, outputs
    /// and in-outs after completion), then — before dispatch only — the scalars (argument
    /// index `tensors + j`). Every record carries the task's func ids. `None` when no further
    /// argument is recorded. Both routes build their records here: the legacy route's AICPU
    /// threads at dispatch and reap, the resident route's supervisor per request.
    pub fn next<G: GmMemory>(
        &self,
        a: &G,
        level: DumpLevel,
        task: u32,
        stage: u8,
        from: u32,
    ) -> Option<(u32, Capture)> {
        let head = &self.head;
        let funcs = head.funcs;
        let func_count = funcs.iter().filter(|&&f| f != NO_FUNC).count() as u8;
        let base = DumpRecord { task, stage, func_ids: funcs, func_count, ..DumpRecord::new_zeroed() };
        for i in from..self.tensors() {
            let d = self.desc(a, i);
            let dir = direction_of(d.flags);
            if !at_stage(dir, stage) {
                continue;
            }
            let Some(payload) = level.select(d.flags & TENSOR_DUMP != 0) else { continue };
            let record = DumpRecord {
                arg: i as u16,
                direction: dir,
                dtype: d.dtype,
                elem_bytes: d.elem_bytes,
                addr: d.addr,
                ndims: d.ndims,
                shape: d.shape,
                strides: d.strides,
                ..base
            };
            return Some((i, Capture { record, payload }));
        }
        if stage != dump_stage::BEFORE_DISPATCH {
            return None;
        }
        let at = self.args + ARGS_HEAD + head.tensors as u64 * 64;
        for j in from.saturating_sub(head.tensors)..self.scalars() {
            if level.select(head.dump_scalars & (1 << j) != 0).is_none() {
                continue;
            }
            let record = DumpRecord {
                arg: (head.tensors + j) as u16,
                direction: dump_direction::INPUT,
                flags: dump_flags::SCALAR,
                dtype: u32::MAX,
                scalar: a.read_u64(GmAddr(at + j as u64 * 8)),
                ..base
            };
            return Some((head.tensors + j, Capture { record, payload: false }));
        }
        None
    }

    /// Whether `level` records anything of this task before dispatch and after completion:
    /// `[self.next(.., BEFORE_DISPATCH, 0).is_some(), self.next(.., AFTER_COMPLETION, 0).is_some()]`
    /// in one pass over the descriptors, stopping once both are known.
    pub fn stages<G: GmMemory>(&self, a: &G, level: DumpLevel) -> [bool; 2] {
        self.stages_with(level, |i| self.desc(a, i))
    }

    /// [`TaskArgs::stages`] over the record's tensor descriptors as the caller already read
    /// them (`descs[i]` is descriptor `i`; one missing counts as recording nothing): a core that
    /// loaded its kernel's arguments asks without reading them again.
    pub fn stages_in(&self, descs: &[TensorDesc], level: DumpLevel) -> [bool; 2] {
        self.stages_with(level, |i| descs.get(i as usize).copied().unwrap_or_default())
    }

    fn stages_with(&self, level: DumpLevel, desc: impl Fn(u32) -> TensorDesc) -> [bool; 2] {
        let mut has = [false; 2];
        let selected = |mask: u32| level.select(mask != 0).is_some();
        if (0..self.scalars()).any(|j| selected(self.head.dump_scalars & (1 << j))) {
            has[0] = true;
        }
        for i in 0..self.tensors() {
            if has == [true; 2] {
                break;
            }
            let d = desc(i);
            if !selected(d.flags & TENSOR_DUMP) {
                continue;
            }
            let dir = direction_of(d.flags);
            has[0] |= at_stage(dir, dump_stage::BEFORE_DISPATCH);
            has[1] |= at_stage(dir, dump_stage::AFTER_COMPLETION);
        }
        has
    }
}

/// Make task `args`'s argument record visible to this AICPU thread, by the contract, and read
/// its header: the record was written by the host (a host-built graph's image) or by the
/// orchestrating thread (the device-side runtime), and the thread that reads it for the dump
/// need not be the one that made the image visible at boot. On a2a3 an invalidate of the
/// header's line, then of the whole record; nothing on a5.
pub fn observe_args<A: AicpuCache + GmMemory>(a: &A, args: u64) -> TaskArgs {
    crate::observe_host::<A>(a, GmAddr(args), ARGS_HEAD);
    let t = TaskArgs::read(a, args);
    crate::observe_host::<A>(a, GmAddr(args), t.bytes());
    t
}

/// Largest chunk a blocking capture copies between checks of its stop condition.
const CHUNK: u64 = 64 * 1024;

/// One AICPU thread's capture of task boundaries into its lane.
pub struct Dumper<'a, A> {
    lane: GmLane<'a, A>,
    level: DumpLevel,
    wait_ticks: u64,
}

impl<'a, A: AicpuAgent> Dumper<'a, A> {
    /// Thread `t`'s dumper, when the launch dumps (`cfg.dump != 0`) and its header is sound.
    pub fn open(a: &'a A, cfg: &LaunchConfig, t: u32) -> Option<Dumper<'a, A>> {
        if cfg.dump == 0 {
            return None;
        }
        let at = GmAddr(cfg.dump);
        crate::observe_host::<A>(a, at, core::mem::size_of::<DumpHeader>() as u64);
        let mut h = DumpHeader::new_zeroed();
        a.read(at, h.as_mut_bytes());
        let level = DumpLevel::try_from(h.level).ok()?;
        if h.magic != DUMP_MAGIC || h.buffers == 0 || h.records == 0 || h.arena % 64 != 0 || h.epoch != cfg.epoch {
            return None;
        }
        DumpLayout::region_bytes(&h)?;
        let l = DumpLayout { base: cfg.dump, header: h };
        (t < h.lanes).then(|| Dumper { lane: GmLane::new(a, l, t), level, wait_ticks: h.wait_ticks })
    }

    /// Record task `args`'s arguments at `stage` (its func ids from its argument record).
    /// Blocks while the lane is full, up to the header's wait budget or until `stop` says the
    /// run is over; a record given up is counted as dropped.
    pub fn task(&mut self, task: u32, args: u64, stage: u8, stop: &dyn Fn() -> bool) {
        let a = self.lane.agent();
        let record = observe_args(a, args);
        let mut from = 0;
        while let Some((i, c)) = record.next(a, self.level, task, stage, from) {
            self.capture(&c, stop);
            from = i + 1;
        }
    }

    /// Capture one record, blocking while the lane would block (bounded).
    pub fn capture(&mut self, c: &Capture, stop: &dyn Fn() -> bool) -> bool {
        let a = self.lane.agent();
        let deadline = a.now_ticks().saturating_add(self.wait_ticks);
        let slice = a.ticks_from_micros(20).max(1);
        let mut backoff = crate::backoff::Backoff::new();
        loop {
            match self.lane.try_begin(c) {
                Begin::Accepted(mut r) => {
                    while r.copy_chunk(CHUNK) > 0 {}
                    r.commit();
                    return true;
                }
                Begin::Refused(_) => return false,
                Begin::WouldBlock(_) => {
                    let now = a.now_ticks();
                    if now >= deadline || stop() {
                        self.lane.drop_records(1);
                        return false;
                    }
                    backoff.idle(a, now.saturating_add(slice).min(deadline));
                }
            }
        }
    }

    /// The lane and the level, for a caller that drives the lane itself (the resident route's
    /// capture service).
    pub fn into_parts(self) -> (GmLane<'a, A>, DumpLevel) {
        (self.lane, self.level)
    }

    /// Publish what is left and close the lane (the host may then trust its counters).
    pub fn close(&mut self) {
        self.lane.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_words::WordsAicpu;

    /// Write an argument record at `at`: one descriptor per entry of `tensors` (its flags),
    /// `scalars` scalars, `marked` the scalars' dump mask.
    fn record(gm: &WordsAicpu, at: u64, tensors: &[u32], scalars: u32, marked: u32) {
        let head = ArgsHeader {
            tensors: tensors.len() as u32,
            scalars,
            dump_scalars: marked,
            funcs: [NO_FUNC, 3, NO_FUNC],
            ..ArgsHeader::default()
        };
        gm.write(GmAddr(at), head.as_bytes());
        for (i, &flags) in tensors.iter().enumerate() {
            let d = TensorDesc { flags, addr: 0x1000 * (i as u64 + 1), ..TensorDesc::default() };
            gm.write(GmAddr(at + ARGS_HEAD + i as u64 * 64), d.as_bytes());
        }
        for j in 0..scalars as u64 {
            gm.write(GmAddr(at + ARGS_HEAD + tensors.len() as u64 * 64 + 8 * j), &(j + 7).to_le_bytes());
        }
    }

    /// The core decides which boundaries a task enters from `TaskArgs::stages` (over the
    /// descriptors it loaded: `TaskArgs::stages_in`), the service records from
    /// `TaskArgs::next`: the two must agree, or a task would enter a phase that
    /// records nothing or skip one that records something. Every level, every direction and
    /// mark of up to three tensors, with and without a marked scalar.
    #[test]
    fn stages_answers_what_next_finds_at_each_boundary() {
        let flag_sets = [0, TENSOR_READ, TENSOR_WRITTEN, TENSOR_READ | TENSOR_WRITTEN]
            .into_iter()
            .flat_map(|f| [f, f | TENSOR_DUMP]);
        let flags: alloc::vec::Vec<u32> = flag_sets.collect();
        let mut checked = 0;
        for level in [DumpLevel::Partial, DumpLevel::Hybrid, DumpLevel::Full] {
            for n in 0..=3usize {
                for combo in 0..flags.len().pow(n as u32) {
                    let tensors: alloc::vec::Vec<u32> =
                        (0..n).map(|k| flags[combo / flags.len().pow(k as u32) % flags.len()]).collect();
                    for (scalars, marked) in [(0, 0), (2, 0), (2, 0b10)] {
                        let gm = WordsAicpu::default();
                        record(&gm, 0x4000, &tensors, scalars, marked);
                        let args = TaskArgs::read(&gm, 0x4000);
                        let want = [dump_stage::BEFORE_DISPATCH, dump_stage::AFTER_COMPLETION]
                            .map(|stage| args.next(&gm, level, 9, stage, 0).is_some());
                        assert_eq!(
                            args.stages(&gm, level),
                            want,
                            "{level} tensors {tensors:?} scalars {scalars} marked {marked:b}"
                        );
                        // The resident core asks over the descriptors it loaded for its kernel.
                        let descs: alloc::vec::Vec<TensorDesc> = (0..n as u32).map(|i| args.desc(&gm, i)).collect();
                        assert_eq!(
                            args.stages_in(&descs, level),
                            want,
                            "loaded: {level} tensors {tensors:?} scalars {scalars} marked {marked:b}"
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert_eq!(checked, 3 * (1 + 8 + 64 + 512) * 3);
    }

    /// `next` walks a record's arguments in order from `from`: tensors at their stage, then
    /// scalars before dispatch only, each carrying the task's func ids.
    #[test]
    fn next_walks_the_recorded_arguments_in_order() {
        let gm = WordsAicpu::default();
        record(&gm, 0x4000, &[TENSOR_READ, TENSOR_WRITTEN, TENSOR_READ | TENSOR_WRITTEN | TENSOR_DUMP], 2, 0b01);
        let args = TaskArgs::read(&gm, 0x4000);
        let walk = |level, stage| {
            let mut from = 0;
            let mut seen = alloc::vec::Vec::new();
            while let Some((i, c)) = args.next(&gm, level, 5, stage, from) {
                assert_eq!((c.record.task, c.record.func_count, c.record.func_ids[1]), (5, 1, 3));
                seen.push((i, c.payload));
                from = i + 1;
            }
            seen
        };
        assert_eq!(walk(DumpLevel::Full, dump_stage::BEFORE_DISPATCH), [(0, true), (2, true), (3, false), (4, false)]);
        assert_eq!(walk(DumpLevel::Full, dump_stage::AFTER_COMPLETION), [(1, true), (2, true)]);
        assert_eq!(walk(DumpLevel::Partial, dump_stage::BEFORE_DISPATCH), [(2, true), (3, false)]);
        assert_eq!(walk(DumpLevel::Hybrid, dump_stage::AFTER_COMPLETION), [(1, false), (2, true)]);
    }
}
