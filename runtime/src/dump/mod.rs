//! The args dump, device side: which arguments a run records ([`DumpLevel`] and the marks of
//! `Task::dump`), the lane each AICPU thread records into ([`GmLane`], the runtime's
//! implementation of [`pto_hal::DumpLane`]), and the capture at task boundaries
//! ([`Dumper`]): before a task's first dispatch (inputs and in-outs as it will read them) and
//! after its completion (outputs and in-outs as written), by the AICPU thread that dispatches
//! or reaps it. The host side (collector, files, reader) is `host::dump`.
//!
//! With the dump off a launch carries no dump region, [`Dumper::open`] answers `None`, and the
//! only cost left at the two capture sites is testing that `Option`.

mod lane;

pub use lane::{Capture, GmLane, Reservation, Suspended};

use num_enum::{IntoPrimitive, TryFromPrimitive};
use pto_hal::{AicpuAgent, AicpuCache, Begin, DumpLane, DumpReservation, GmAddr, GmMemory, GmMemoryExt};
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

/// The first argument of task `task` (argument record at `args`) with index `from` or later
/// that `level` records at `stage`, and its capture: tensors in order (inputs and in-outs
/// before dispatch, outputs and in-outs after completion), then — before dispatch only — the
/// scalars (argument index `tensors + j`). Every record carries the task's func ids. `None`
/// when no further argument is recorded. Both routes build their records here: the legacy
/// route's AICPU threads at dispatch and reap, the resident route's supervisor per request.
pub fn next_capture<G: GmMemory>(
    a: &G,
    level: DumpLevel,
    task: u32,
    args: u64,
    stage: u8,
    from: u32,
) -> Option<(u32, Capture)> {
    let mut head = ArgsHeader::new_zeroed();
    a.read(GmAddr(args), head.as_mut_bytes());
    let funcs = head.funcs;
    let func_count = funcs.iter().filter(|&&f| f != NO_FUNC).count() as u8;
    let base = DumpRecord { task, stage, func_ids: funcs, func_count, ..DumpRecord::new_zeroed() };
    let tensors = head.tensors.min(crate::layout::MAX_TENSOR_ARGS as u32);
    for i in from..tensors {
        let mut d = TensorDesc::new_zeroed();
        a.read(GmAddr(args + ARGS_HEAD + i as u64 * 64), d.as_mut_bytes());
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
    let scalars = head.scalars.min(crate::layout::MAX_SCALAR_ARGS as u32);
    let at = args + ARGS_HEAD + head.tensors as u64 * 64;
    for j in from.saturating_sub(head.tensors)..scalars {
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

/// Make task `args`'s argument record visible to this AICPU thread before [`next_capture`]
/// reads it, by the contract: the record was written by the host (a host-built graph's image)
/// or by the orchestrating thread (the device-side runtime), and the thread that reads it for
/// the dump need not be the one that made the image visible at boot. On a2a3 an invalidate
/// of the header's line, then of the whole record; nothing on a5.
pub fn observe_args<A: AicpuCache + GmMemory>(a: &A, args: u64) {
    crate::observe_host::<A>(a, GmAddr(args), ARGS_HEAD);
    let mut head = ArgsHeader::new_zeroed();
    a.read(GmAddr(args), head.as_mut_bytes());
    let tensors = head.tensors.min(crate::layout::MAX_TENSOR_ARGS as u32) as u64;
    let scalars = head.scalars.min(crate::layout::MAX_SCALAR_ARGS as u32) as u64;
    crate::observe_host::<A>(a, GmAddr(args), ARGS_HEAD + tensors * 64 + scalars * 8);
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
        observe_args(a, args);
        let mut from = 0;
        while let Some((i, c)) = next_capture(a, self.level, task, args, stage, from) {
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
