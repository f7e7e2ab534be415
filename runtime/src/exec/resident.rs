//! The resident executor: the cores schedule the host-built graph themselves.
//!
//! The host writes the scheduler state ([`ResidentLayout`]) before the launch: every task's
//! fan-in count, and two ready lists (AIC tasks; AIV and dummy tasks) seeded with the tasks
//! that wait for nothing. Once its window is open and the AICPU has said the image is valid
//! ([`RunLine::resident_ready`](crate::layout::RunLine::resident_ready)), a core loops:
//!
//! 1. **take** the next entry of its type's list: read `head` and `tail`; an entry not yet
//!    published (0) is waited for; `head` is advanced by compare-and-swap, so each entry goes
//!    to exactly one core;
//! 2. **run** the task: skip it when it is a dummy or its predicate says so; otherwise mark
//!    itself running (`running[w] = task + 1`), load the arguments and run the kernel exactly as
//!    the legacy executor does (`CoreCtx`), write back the outputs, clear `running[w]`;
//! 3. **release** its consumers after a store barrier: each consumer's fan-in count is
//!    decremented by an atomic add, and the core whose decrement takes it to zero appends the
//!    consumer to its list (`tail` by atomic add, then the entry, device-direct);
//! 4. **count** it in `completed` (and `executed` when a kernel ran), and wake the AICPU.
//!
//! Every word of the state is touched only through `GmAtomic`, so no line of it is cached on
//! either tier; the image (task records, fan-out lists, funcs, argument records) is read
//! through the cache after invalidating it, as host-written data always is. A core leaves on
//! EXIT, as on the legacy executor. It stops taking tasks once a fault is latched.
//!
//! The AICPU threads do not dispatch: after the handshake, [`supervise`] waits for the run to
//! complete, watching `completed` with a no-progress watchdog that names a stuck core and its
//! task from `running`; then the threads retire their cores through the teardown gates as the
//! legacy executor's do.

use pto_hal::{AicoreAgent, AicoreLaunch, AicpuAgent, CoreType, GmAddr, GmAtomic};
use zerocopy::{FromZeros, IntoBytes};

use super::legacy::CoreCtx;
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::layout::{
    ARGS_HEAD, ArgsHeader, DispatchPayload, FuncEntry, ImageHeader, ResidentLayout, Shape, TaskRecord, TraceRecord,
    regs, trace_kind,
};
use crate::lifecycle::{self, Fault, RunMap};

/// List of AIC tasks.
pub const LIST_AIC: u32 = 0;
/// List of AIV and dummy tasks.
pub const LIST_AIV: u32 = 1;

/// The list a task of `shape` goes to.
pub fn list_of(shape: u8) -> u32 {
    if shape == Shape::Aic as u8 { LIST_AIC } else { LIST_AIV }
}

/// What [`take`] found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Take {
    /// This core owns the task.
    Task(u32),
    /// Nothing published past `head`: the list's tail was this.
    Empty(u64),
    /// An entry was reserved but not yet written: wait on its word.
    Unpublished(GmAddr),
}

/// Take the next task of list `q`, if one is published. Each entry goes to exactly one
/// caller: `head` only moves forward, by compare-and-swap, past an entry already published.
pub fn take<G: GmAtomic>(a: &G, l: &ResidentLayout, q: u32) -> Take {
    loop {
        let head = a.query(GmAddr(l.head(q)));
        let tail = a.query(GmAddr(l.tail(q)));
        if head >= tail || head >= l.capacity(q) as u64 {
            return Take::Empty(tail);
        }
        let at = GmAddr(l.entry(q, head as u32));
        let e = a.query(at);
        if e == 0 && !crate::breakage::broken(crate::breakage::RESIDENT_TAKE_UNPUBLISHED) {
            return Take::Unpublished(at);
        }
        if a.compare_exchange(GmAddr(l.head(q)), head, head + 1) == head {
            return Take::Task(e.wrapping_sub(1) as u32);
        }
        crate::sync::spin_hint();
    }
}

/// Append task `t` to list `q`: reserve a slot by advancing `tail`, then publish the entry.
/// `false` when the list is full (a consumer released twice: the image is corrupt).
pub fn push<G: GmAtomic>(a: &G, l: &ResidentLayout, q: u32, t: u32) -> bool {
    let i = a.fetch_add(GmAddr(l.tail(q)), 1);
    if i >= l.capacity(q) as u64 {
        return false;
    }
    a.store_direct(GmAddr(l.entry(q, i as u32)), t as u64 + 1);
    true
}

/// Why [`serve`] returned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// DMB said EXIT.
    Exit,
    /// Nothing to do and no progress anywhere for the core's wait budget, and no EXIT: the
    /// fault is latched.
    IdleTimeout,
}

/// The image's control part, as a core reads it (after invalidating it).
struct Image {
    base: u64,
    h: ImageHeader,
}

impl Image {
    fn load<A: AicoreAgent>(a: &A, base: u64) -> Image {
        let mut h = ImageHeader::new_zeroed();
        a.observe_lines(GmAddr(base), core::mem::size_of::<ImageHeader>() as u64);
        a.read(GmAddr(base), h.as_mut_bytes());
        Image { base, h }
    }
    fn record_at(&self, t: u32) -> GmAddr {
        GmAddr(self.base + self.h.tasks_off + t as u64 * 32)
    }
    fn record<A: AicoreAgent>(&self, a: &A, t: u32) -> TaskRecord {
        let at = self.record_at(t);
        let mut r = TaskRecord::new_zeroed();
        a.observe_lines(at, 32);
        a.read(at, r.as_mut_bytes());
        r
    }
    fn func<A: AicoreAgent>(&self, a: &A, f: u16) -> FuncEntry {
        let at = GmAddr(self.base + self.h.funcs_off + f as u64 * 16);
        let mut e = FuncEntry::new_zeroed();
        if (f as u32) < self.h.func_count {
            a.observe_lines(at, 16);
            a.read(at, e.as_mut_bytes());
        }
        e
    }
}

/// The resident loop of one core (see the module documentation), from the open window to
/// EXIT.
pub fn serve<A: AicoreAgent>(
    a: &A,
    map: &RunMap,
    launch: &AicoreLaunch,
    trace: &mut Option<crate::trace::TraceRing>,
) -> Served {
    let cfg = &map.cfg;
    let w = launch.block_idx;
    let budget = cfg.core_wait_ticks;
    let Some(l) = ResidentLayout::of(cfg) else { return Served::Exit };
    let img = Image::load(a, cfg.image);
    let q = if launch.core_type == CoreType::Aic { LIST_AIC } else { LIST_AIV };
    let mut deadline = a.now_ticks().saturating_add(budget);
    let mut seen = a.query(GmAddr(l.completed()));
    loop {
        if a.read_dmb() == regs::DMB_EXIT {
            return Served::Exit;
        }
        let wait_on = if lifecycle::latched(a, map.desc) {
            None
        } else {
            match take(a, &l, q) {
                Take::Task(t) => {
                    run_task(a, map, &l, &img, launch, t, trace);
                    deadline = a.now_ticks().saturating_add(budget);
                    continue;
                }
                Take::Empty(tail) => Some((GmAddr(l.tail(q)), tail)),
                Take::Unpublished(at) => Some((at, 0)),
            }
        };
        // Idle: the run is progressing elsewhere as long as `completed` moves.
        let c = a.query(GmAddr(l.completed()));
        let now = a.now_ticks();
        if c != seen {
            seen = c;
            deadline = now.saturating_add(budget);
        }
        if now >= deadline {
            lifecycle::latch(
                a,
                map.desc,
                Fault {
                    code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                    site: Site::CoreIdle,
                    task: None,
                    core: Some(w),
                    detail: c,
                },
                "",
            );
            return Served::IdleTimeout;
        }
        // Short slices: EXIT arrives through a register, not through the watched word.
        let until = deadline.min(now.saturating_add(a.ticks_from_micros(1_000)));
        match wait_on {
            Some((at, seen_word)) => a.wait_for_word(at, seen_word, until),
            None => a.wait_for_event(until),
        }
    }
}

/// Run task `t` on this core and release its consumers.
fn run_task<A: AicoreAgent>(
    a: &A,
    map: &RunMap,
    l: &ResidentLayout,
    img: &Image,
    launch: &AicoreLaunch,
    t: u32,
    trace: &mut Option<crate::trace::TraceRing>,
) {
    let w = launch.block_idx;
    let taken = if trace.is_some() { a.now_ticks() } else { 0 };
    let fault = |code: ErrorCode, detail: u64, text: &str| {
        lifecycle::latch(a, map.desc, Fault { code, site: Site::Kernel, task: Some(t), core: Some(w), detail }, text);
    };
    if t >= l.tasks {
        fault(ErrorCode::Device(DeviceFault::BadImage), t as u64, "a ready list named a task outside the graph");
        return;
    }
    // The entry was published (device-direct) after its producers' outputs were written
    // back: order this core's reads after it.
    a.rmb();
    let rec = img.record(a, t);
    let args = GmAddr((img.record_at(t).0 as i64 + rec.args_rel as i64) as u64);
    let mut h = ArgsHeader::new_zeroed();
    a.observe_lines(args, ARGS_HEAD);
    a.read(args, h.as_mut_bytes());
    let skip = rec.shape == Shape::Dummy as u8 || (h.predicate != 0 && !predicate_holds(a, h.predicate));
    let mut ran = false;
    // The subtask's record, pushed once the consumers are released (its completion tick).
    let mut traced: Option<TraceRecord> = None;
    if !skip {
        let lane = if launch.core_type == CoreType::Aic { 0 } else { 1 };
        let f = img.func(a, rec.funcs[lane]);
        let bin = if lane == 0 { f.aic } else { f.aiv };
        match a.resolve_kernel(bin) {
            None => {
                fault(
                    ErrorCode::Device(DeviceFault::UnknownKernel),
                    bin,
                    "kernel binary not loaded for this core type",
                );
                return;
            }
            Some(kernel) => {
                let p = DispatchPayload {
                    bin,
                    args: args.0,
                    task_id: t,
                    block_idx: 0,
                    block_num: 1,
                    lane: 0,
                    reg_task_id: 0,
                    ..DispatchPayload::default()
                };
                let ctx_start = a.now_ticks();
                a.store_direct(GmAddr(l.running(w)), t as u64 + 1);
                let mut ctx = CoreCtx::load(a, &p, launch.core_type);
                if let Some(i) = ctx.malformed() {
                    fault(
                        ErrorCode::Device(DeviceFault::BadImage),
                        i as u64,
                        "malformed argument record (a stale or corrupt read of its tensor descriptors)",
                    );
                    return;
                }
                ctx.observe_arguments(a);
                if let Err(e) = a.run_kernel(kernel, &mut ctx) {
                    fault(ErrorCode::Device(DeviceFault::KernelFault), bin, e.as_str());
                    return;
                }
                let early = crate::breakage::broken(crate::breakage::FIN_BEFORE_PUBLISH);
                if early {
                    // Broken on purpose: the consumers are released before the outputs are
                    // written back.
                    a.store_barrier();
                    release(a, map, l, img, &rec, t, w);
                }
                ctx.publish_outputs(a);
                a.store_direct(GmAddr(l.running(w)), 0);
                if early {
                    a.fetch_add(GmAddr(l.executed()), 1);
                    a.fetch_add(GmAddr(l.completed()), 1);
                    a.send_event();
                    return;
                }
                ran = true;
                if trace.is_some() {
                    traced = Some(TraceRecord {
                        kind: trace_kind::SUBTASK,
                        lane: lane as u8,
                        core: w,
                        task: t,
                        block: 0,
                        bin,
                        start: ctx_start,
                        end: a.now_ticks(),
                        dispatch: taken.max(1),
                        ..TraceRecord::default()
                    });
                }
            }
        }
    }
    // The outputs are in memory before any consumer can be taken.
    a.store_barrier();
    release(a, map, l, img, &rec, t, w);
    if ran {
        a.fetch_add(GmAddr(l.executed()), 1);
    }
    a.fetch_add(GmAddr(l.completed()), 1);
    a.send_event();
    if let (Some(tr), Some(mut r)) = (trace.as_mut(), traced) {
        r.completion = a.now_ticks().max(1);
        tr.push(a, &r);
    }
}

/// Decrement every consumer's fan-in; append those that reach zero to their lists.
fn release<A: AicoreAgent>(a: &A, map: &RunMap, l: &ResidentLayout, img: &Image, rec: &TaskRecord, t: u32, w: u32) {
    let fail = |detail: u64, text: &str| {
        lifecycle::latch(
            a,
            map.desc,
            Fault {
                code: ErrorCode::Device(DeviceFault::BadImage),
                site: Site::Completion,
                task: Some(t),
                core: Some(w),
                detail,
            },
            text,
        );
    };
    let mut chunk = [0u32; 16];
    let mut done = 0u32;
    while done < rec.fanout_count {
        let n = (rec.fanout_count - done).min(16) as usize;
        let at = GmAddr(img.base + img.h.fanout_off + (rec.fanout_start as u64 + done as u64) * 4);
        a.observe_lines(at, n as u64 * 4);
        a.read(at, chunk[..n].as_mut_bytes());
        for &c in &chunk[..n] {
            if c >= l.tasks {
                fail(c as u64, "a fan-out list named a task outside the graph");
                return;
            }
            let r = release_consumer(a, l, c, || list_of(img.record(a, c).shape));
            if let Err(why) = r {
                fail(c as u64, why);
                return;
            }
        }
        done += n as u32;
    }
}

/// One producer of task `c` is done: decrement `c`'s fan-in count; the caller whose decrement
/// takes it to zero appends `c` to its list (`list()`, asked only then). `Ok(true)` when this
/// call published `c`. The caller's outputs must be in memory before (a store barrier), so
/// whoever takes `c` sees them.
pub fn release_consumer<G: GmAtomic>(
    a: &G,
    l: &ResidentLayout,
    c: u32,
    list: impl FnOnce() -> u32,
) -> Result<bool, &'static str> {
    let at = GmAddr(l.fanin(c));
    let before = if crate::breakage::broken(crate::breakage::RESIDENT_RELEASE_SPLIT) {
        // Broken on purpose: a load and a store instead of one read-modify-write.
        let v = a.query(at);
        a.store_direct(at, v.wrapping_sub(1));
        v
    } else {
        a.fetch_add(at, u64::MAX)
    };
    match before {
        0 => Err("a consumer was released more often than it has producers"),
        1 => {
            if push(a, l, list(), c) {
                Ok(true)
            } else {
                Err("a ready list overflowed")
            }
        }
        _ => Ok(false),
    }
}

/// Read a producer-written 4-byte predicate device-direct (the producer wrote it back before
/// it released this task).
fn predicate_holds<G: GmAtomic>(a: &G, addr: u64) -> bool {
    let word = a.query(GmAddr(addr & !7));
    (word >> ((addr & 4) * 8)) as u32 != 0
}

/// The AICPU side of a resident run, on every scheduler thread: wait until every task of the
/// graph completed, a fault is latched or `stop` is raised, with a no-progress watchdog. A
/// watchdog expiry names the first core found running a kernel (`KernelHung`, with its task
/// and core) or, with none running, the stall itself. Returns the tasks completed.
pub fn supervise<A: AicpuAgent>(a: &A, map: &RunMap, stop: &crate::sync::AtomicBool) -> u64 {
    let Some(l) = ResidentLayout::of(&map.cfg) else { return 0 };
    let total = l.tasks as u64;
    let watchdog = map.cfg.watchdog_ticks;
    let completed = GmAddr(l.completed());
    let mut seen = a.query(completed);
    let mut last_progress = a.now_ticks();
    loop {
        let c = a.query(completed);
        if c >= total || lifecycle::latched(a, map.desc) || stop.load(crate::sync::Ordering::Acquire) {
            return c;
        }
        let now = a.now_ticks();
        if c != seen {
            seen = c;
            last_progress = now;
        } else if now.saturating_sub(last_progress) > watchdog {
            let running = (0..l.workers).find_map(|w| match a.query(GmAddr(l.running(w))) {
                0 => None,
                v => Some((w, (v - 1) as u32)),
            });
            let f = match running {
                Some((w, t)) => Fault {
                    code: ErrorCode::Device(DeviceFault::KernelHung),
                    site: Site::Completion,
                    task: Some(t),
                    core: Some(w),
                    detail: c,
                },
                None => Fault {
                    code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                    site: Site::Stall,
                    task: None,
                    core: None,
                    detail: c,
                },
            };
            lifecycle::latch(a, map.desc, f, "");
            return c;
        }
        let until = last_progress.saturating_add(watchdog + 1).min(now.saturating_add(a.ticks_from_micros(10_000)));
        a.wait_for_word(completed, c, until);
    }
}

/// Add the kernels the cores ran to the run line's `dispatched` count (one AICPU thread calls
/// this, after [`supervise`]): on the resident executor, "dispatched" is "taken and run by a
/// core".
pub fn count_executed<A: AicpuAgent>(a: &A, map: &RunMap) {
    if let Some(l) = ResidentLayout::of(&map.cfg) {
        // Each core counts a kernel before the task's completion, which `supervise` saw.
        a.rmb();
        let n = a.query(GmAddr(l.executed()));
        a.fetch_add(map.desc.offset(crate::layout::offsets::RUN_DISPATCHED), n);
    }
}
