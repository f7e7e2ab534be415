//! The resident executor's AICore half: a core's loop — take work from its lane's dispatch
//! slot (holding the cluster's token to run a dispatch pass when needed), run it, release its
//! consumers — until EXIT.

use pto_hal::{AicoreAgent, AicoreLaunch, CoreType, GmAddr, GmAtomic};
use zerocopy::{FromZeros, IntoBytes};

use super::capture::rendezvous::{Boundary, Failure};
use super::state::*;
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::dump::{DumpLevel, TaskArgs};
use crate::exec::kernel_call::CoreCtx;
use crate::layout::{
    ARGS_HEAD, ArgsHeader, CaptureLayout, DispatchPayload, ENTRY_GANG, ImageSource, ImageView, NO_FUNC, ResidentLayout,
    TaskRecord, TraceRecord, entry_task_block, home_fields, regs, trace_kind,
};
use crate::lifecycle::{self, Fault, RunMap};

/// Why [`serve`] returned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// DMB said EXIT.
    Exit,
    /// Nothing to do and no progress anywhere for the core's wait budget, and no EXIT: the
    /// fault is latched.
    IdleTimeout,
}

/// The graph image as a core reads it: each range observed (invalidated) before it is read,
/// since the host wrote it and this core's cache may hold a previous run's lines.
struct CoreImage<'a, A> {
    a: &'a A,
    base: GmAddr,
}

impl<A: AicoreAgent> ImageSource for CoreImage<'_, A> {
    fn read_at(&self, off: u64, buf: &mut [u8]) {
        let at = self.base.offset(off);
        self.a.observe_lines(at, buf.len() as u64);
        self.a.read(at, buf);
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
    let src = CoreImage { a, base: GmAddr(cfg.image) };
    let img = match ImageView::open(&src, cfg.image_len) {
        Ok(img) => img,
        Err(e) => {
            // The AICPU validated the image before it started the cores: this one reads
            // something else (a stale or clobbered line).
            let f = Fault {
                code: ErrorCode::Device(DeviceFault::BadImage),
                site: Site::Kernel,
                task: None,
                core: Some(w),
                detail: e.detail(),
            };
            lifecycle::latch(a, map.desc, f, "a core read a graph image the AICPU had not validated");
            a.send_event();
            return Served::IdleTimeout;
        }
    };
    let (c, lane) = seat(w, l.clusters);
    let none = Pushed { home: 0, class: 0, blocks: 0 };
    let core = Core {
        a,
        map,
        l: &l,
        img: &img,
        launch,
        w,
        owed: core::array::from_fn(|_| core::cell::Cell::new(none)),
        owed_len: core::cell::Cell::new(0),
        classes: (a.query(GmAddr(l.classes())) & u64::from(ALL_CLASSES)) as u8,
        capture: CaptureLayout::of(cfg).and_then(|cap| {
            let level = DumpLevel::try_from(a.query(GmAddr(cap.header(crate::layout::capture_header::LEVEL))) as u32);
            Some((Boundary::new(a, cap, w, c, cfg.epoch, cfg.aicpu_threads), level.ok()?))
        }),
    };
    // A lane the graph gives no work sits the run out ([`lane_has_work`]): it never takes the
    // token, and it sleeps on its own slot's publication word (which nothing writes) instead of
    // the doorbell, so the rings for the other lanes' work do not wake it. It still leaves at
    // EXIT, and wakes once per slice for the watchdog.
    let sits_out = !lane_has_work(core.classes, lane);
    let watch = GmAddr(if sits_out { l.slot_publication(c, lane) } else { l.doorbell(c) });
    let served = core.capture.as_ref().map(|(b, _)| GmAddr(b.layout().header(crate::layout::capture_header::SERVED)));
    // The generation this lane completed last (the host starts every slot at 0).
    let mut done = 0u64;
    let mut deadline = a.now_ticks().saturating_add(budget);
    let mut seen = a.query(GmAddr(l.completed()));
    let late = crate::breakage::broken(crate::breakage::WAKE_SEEN_LATE);
    // Spaces the doorbell polls of an idle core (on the chip, whose word wait is a spin hint).
    let mut backoff = crate::backoff::Backoff::new();
    // One argument context for every subtask this core runs, reloaded per subtask.
    let mut ctx = CoreCtx::new(a, launch.core_type);
    loop {
        if a.read_dmb() == regs::DMB_EXIT {
            return Served::Exit;
        }
        // Read before looking for work: a ring after this read ends the wait below at once.
        let mut bell = if late { 0 } else { a.query(watch) };
        // The tick a trace records as this subtask's dispatch is read before the latch is
        // looked at: a subtask taken after the latch is never run, one traced was taken before.
        let taken = if trace.is_some() { a.now_ticks() } else { 0 };
        if !latch_seen(a, map) {
            if let Some((g, e)) = poll_slot(a, &l, c, lane, done) {
                core.run(lane, e, taken, trace, &mut ctx);
                done = g;
                post_completion(a, &l, c, lane, g);
                // This core's own pass sees its lane free (and may take the consumers it just
                // published); when another core holds the token, ring so it looks again.
                if sits_out || core.try_dispatch(c, lane).is_none() {
                    ring(a, &l, c);
                }
                core.settle();
                deadline = a.now_ticks().saturating_add(budget);
                backoff.reset();
                continue;
            }
            let again = if sits_out { None } else { core.try_dispatch(c, lane) };
            core.settle();
            if again == Some(true) {
                backoff.reset();
                continue;
            }
        }
        if late {
            // Broken on purpose: a ring between the look for work and this read is lost.
            bell = a.query(watch);
        }
        // Idle: the run is progressing elsewhere as long as `completed` (or a capture) moves.
        let n = a.query(GmAddr(l.completed())) + served.map_or(0, |at| a.query(at));
        let now = a.now_ticks();
        if n != seen {
            seen = n;
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
                    detail: n,
                },
                "",
            );
            a.send_event();
            return Served::IdleTimeout;
        }
        // In slices: EXIT arrives through a register, not through the watched word.
        let until = deadline.min(now.saturating_add(a.ticks_from_micros(IDLE_SLICE_US)));
        backoff.wait_word(a, watch, bell, until);
    }
}

/// What one core's resident loop works with.
struct Core<'a, A: AicoreAgent> {
    a: &'a A,
    map: &'a RunMap,
    l: &'a ResidentLayout,
    img: &'a ImageView<'a, CoreImage<'a, A>>,
    launch: &'a AicoreLaunch,
    w: u32,
    /// Tasks published whose rings are owed ([`Core::settle`]).
    owed: [core::cell::Cell<Pushed>; 8],
    owed_len: core::cell::Cell<usize>,
    /// The inbox classes the graph has ([`ResidentLayout::classes`], host-written, read once).
    classes: u8,
    /// The args dump's boundary capture, when the run dumps.
    capture: Option<(Boundary, DumpLevel)>,
}

/// A core leaving the run (every return of [`serve`]) adds the capture requests it made to
/// the region's count, before its exit is signalled.
impl<A: AicoreAgent> Drop for Core<'_, A> {
    fn drop(&mut self) {
        if let Some((b, _)) = &self.capture {
            b.count_requests(self.a);
        }
    }
}

impl<A: AicoreAgent> Core<'_, A> {
    /// Latch a fault of task `t` at `site` on this core.
    fn fault(&self, code: ErrorCode, site: Site, t: u32, detail: u64, text: &str) {
        let f = Fault { code, site, task: Some(t), core: Some(self.w), detail };
        lifecycle::latch(self.a, self.map.desc, f, text);
        // The supervisors sleep until an event: one that names the end of the run.
        self.a.send_event();
    }

    /// Take cluster `c`'s token and run a dispatch pass, if no other core holds it (`None`
    /// when one does). `Some(true)` when this core should look again at once: its own lane
    /// got work, or something happened during the pass that it may not have seen.
    fn try_dispatch(&self, c: u32, lane: u32) -> Option<bool> {
        let (a, l) = (self.a, self.l);
        if a.compare_exchange(GmAddr(l.token(c)), 0, self.w as u64 + 1) != 0 {
            return None;
        }
        let at_lock = a.query(GmAddr(l.doorbell(c)));
        let published = dispatch_with(a, l, (self.capture.as_ref().map(|(b, _)| b.layout()), self.classes), c, |e| {
            let (t, _) = entry_task_block(e);
            if t >= l.tasks {
                self.fault(
                    ErrorCode::Device(DeviceFault::BadImage),
                    Site::Dispatch,
                    t,
                    e,
                    "an inbox named a task outside the graph",
                );
                return;
            }
            self.finish_subtask(t, None);
        });
        let now = a.query(GmAddr(l.doorbell(c)));
        a.store_direct(GmAddr(l.token(c)), 0);
        let changed = now != at_lock;
        if published & !(1 << lane) != 0 || changed {
            // Another lane got work, or a ring came while this core held the token (its
            // ringer may be asleep, having found the token taken): wake the cluster.
            ring(a, l, c);
        }
        Some(published & (1 << lane) != 0 || changed)
    }

    /// Ring for every task this core published since the last call ([`ring_pushed`]: only
    /// the clusters whose inboxes still hold its blocks, after this core's own pass had the
    /// chance to take them).
    fn settle(&self) {
        let n = self.owed_len.replace(0);
        for p in &self.owed[..n] {
            ring_pushed(self.a, self.l, p.get(), false, self.classes);
        }
    }

    /// Publish task `t`, owing its rings until [`settle`](Self::settle); with no room left to
    /// remember it, ring at once.
    fn publish(&self, t: u32) -> Result<(), &'static str> {
        let p = push_ready(self.a, self.l, t)?;
        let n = self.owed_len.get();
        if n < self.owed.len() {
            self.owed[n].set(p);
            self.owed_len.set(n + 1);
        } else {
            ring_pushed(self.a, self.l, p, true, self.classes);
        }
        Ok(())
    }

    /// One subtask of task `t` is done (`rec`: its record, when the caller has it): count it
    /// off; after the task's last, release its consumers and count the task completed.
    fn finish_subtask(&self, t: u32, rec: Option<&TaskRecord>) {
        let (a, l) = (self.a, self.l);
        match finish(a, l, t) {
            Err(why) => self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Completion, t, t as u64, why),
            Ok(false) => {}
            Ok(true) => {
                let rec = rec.copied().unwrap_or_else(|| self.img.task(t));
                self.release(&rec, t);
                // The supervisors sleep until the last task completes (or a fault): only that
                // completion wakes them.
                if a.fetch_add(GmAddr(l.completed()), 1) + 1 >= l.tasks as u64 {
                    a.send_event();
                }
            }
        }
    }

    /// Run slot entry `e` in this core's lane `lane`: one block of a task, or one lane of
    /// a gang's block (`taken`: the tick it was taken at, when tracing). A subtask whose
    /// kernel faults ends there: it is not counted off, so its task never completes and
    /// releases no consumer, and its output capture is never requested.
    fn run(&self, lane: u32, e: u64, taken: u64, trace: &mut Option<crate::trace::TraceRing>, ctx: &mut CoreCtx<'_>) {
        let (a, l, img) = (self.a, self.l, self.img);
        let (t, block) = entry_task_block(e);
        let bad = |detail: u64, text: &str| {
            self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Kernel, t, detail, text);
        };
        if t >= l.tasks {
            bad(e, "a dispatch slot named a task outside the graph");
            return;
        }
        // The slot was published after the task was released, which came after its
        // producers' outputs were written back: order this core's reads after it.
        a.rmb();
        let rec = img.task(t);
        // The kernel of this core's lane: a gang runs each lane's own; a single task its
        // core type's.
        let gang = e & ENTRY_GANG != 0;
        let func_lane = if gang {
            lane
        } else if self.launch.core_type == CoreType::Aic {
            0
        } else {
            1
        };
        let sub_block = if gang && lane > 0 { lane - 1 } else { 0 };
        if block >= rec.block_num || rec.funcs[func_lane as usize] == NO_FUNC {
            bad(e, "a dispatch slot named a block or lane the task does not have");
            return;
        }
        let args = GmAddr(self.map.cfg.image + img.args_offset(t, &rec));
        let mut h = ArgsHeader::new_zeroed();
        a.observe_lines(args, ARGS_HEAD);
        a.read(args, h.as_mut_bytes());
        let skip = h.predicate != 0 && !predicate_holds(a, h.predicate);
        // The boundaries this task has: a phase that records nothing is not entered. They are
        // learnt from the kernel's arguments, loaded here (before the input capture, which
        // does not change them) instead of read a second time for the kernel.
        let loaded = self.capture.is_some();
        if loaded {
            ctx.load_body(a, args, &h);
        }
        let boundary = self.capture.as_ref().map(|(b, level)| {
            let record = TaskArgs::with_header(args.0, h);
            let mask = if gang {
                match home_fields(a.query(GmAddr(l.home(t)))).2 {
                    0 => 0b111,
                    m => m as u64,
                }
            } else {
                1 << lane
            };
            // A lone participant claims no slot: its occupancy is never handed out.
            let n = if mask.count_ones() > 1 { b.occupancy(a, lane) } else { 0 };
            (b, mask, n, record.stages_in(ctx.descriptors(), *level))
        });
        // A task that records at either boundary crosses AFTER (possibly empty: the AICPU
        // seals it at once), so a gang's occupancy always settles; a gang claims its slot at
        // the first phase it enters (a single-lane task claims none).
        let cross = |phase: u64| -> bool {
            let Some((b, mask, n, has)) = boundary else { return true };
            let enter = if phase == crate::layout::capture_phase::BEFORE { has[0] } else { has[0] || has[1] };
            if !enter {
                return true;
            }
            let key = mask.trailing_zeros();
            let claim = phase == crate::layout::capture_phase::BEFORE || !has[0];
            match b.cross(a, key, n, mask, 1 << lane, phase, t, claim) {
                Ok(()) => true,
                Err(Failure::Exit) | Err(Failure::Aborted(None)) => false,
                Err(Failure::Aborted(Some(code))) => {
                    let site = if phase == crate::layout::capture_phase::BEFORE {
                        Site::CaptureBefore
                    } else {
                        Site::CaptureAfter
                    };
                    self.fault(ErrorCode::Device(code), site, t, n, "the args dump did not seal this task boundary");
                    false
                }
            }
        };
        // No subtask executes before the task's input capture is sealed.
        if !cross(crate::layout::capture_phase::BEFORE) {
            return;
        }
        let mut traced: Option<TraceRecord> = None;
        if !skip {
            let f = img.func(rec.funcs[func_lane as usize]).unwrap_or_default();
            let bin = if func_lane == 0 { f.aic } else { f.aiv };
            let Some(kernel) = a.resolve_kernel(bin) else {
                self.fault(
                    ErrorCode::Device(DeviceFault::UnknownKernel),
                    Site::Kernel,
                    t,
                    bin,
                    "kernel binary not loaded for this core type",
                );
                return;
            };
            let p = DispatchPayload {
                bin,
                args: args.0,
                task_id: t,
                block_idx: block,
                block_num: rec.block_num,
                lane: sub_block,
                reg_task_id: 0,
                ..DispatchPayload::default()
            };
            let start = a.now_ticks();
            a.store_direct(GmAddr(l.running(self.w)), t as u64 + 1);
            if !loaded {
                ctx.load_body(a, args, &h);
            }
            ctx.set_payload(&p);
            if let Some(i) = ctx.malformed() {
                bad(i as u64, "malformed argument record (a stale or corrupt read of its tensor descriptors)");
                return;
            }
            ctx.observe_arguments(a);
            let ran = a.run_kernel(kernel, ctx);
            let record = |end: u64| TraceRecord {
                kind: trace_kind::SUBTASK,
                lane: func_lane as u8,
                core: self.w,
                task: t,
                block,
                bin,
                start,
                end,
                dispatch: taken.max(1),
                ..TraceRecord::default()
            };
            if let Err(err) = ran {
                // What the kernel wrote before it faulted is written back before the fault is
                // reported: the host may read the tensor after the run (the legacy core does
                // the same before its faulted FIN).
                if !crate::breakage::broken(crate::breakage::FAULT_EXIT_SKIPS_PUBLISH) {
                    ctx.publish_outputs(a);
                    a.store_barrier();
                }
                self.fault(ErrorCode::Device(DeviceFault::KernelFault), Site::Kernel, t, bin, err.as_str());
                if !crate::breakage::broken(crate::breakage::RELEASE_ON_FAULT) {
                    // The faulted subtask is traced (it ends after the latch), never completed.
                    if let Some(tr) = trace.as_mut() {
                        tr.push(a, &record(a.now_ticks()));
                    }
                    return;
                }
            }
            if crate::breakage::broken(crate::breakage::FIN_BEFORE_PUBLISH) {
                // Broken on purpose: the subtask is counted and the consumers released (and
                // rung for) before the outputs are written back.
                a.store_barrier();
                a.fetch_add(GmAddr(l.executed()), 1);
                let mine = a.query(GmAddr(l.completed()));
                self.finish_subtask(t, Some(&rec));
                self.settle();
                // The interleaving forced: the write-back waits until a consumer released
                // here has completed (it read the row without it), or a second passes.
                if rec.fanout_count > 0 && crate::breakage::forcing() {
                    let until = a.now_ticks().saturating_add(a.ticks_from_micros(1_000_000));
                    loop {
                        let now = a.query(GmAddr(l.completed()));
                        if now > mine + 1 || a.now_ticks() >= until || latch_seen(a, self.map) {
                            break;
                        }
                        let slice = a.now_ticks().saturating_add(a.ticks_from_micros(IDLE_SLICE_US));
                        a.wait_for_word(GmAddr(l.completed()), now, slice.min(until));
                    }
                }
                ctx.publish_outputs(a);
                a.store_direct(GmAddr(l.running(self.w)), 0);
                return;
            }
            ctx.publish_outputs(a);
            a.store_direct(GmAddr(l.running(self.w)), 0);
            a.fetch_add(GmAddr(l.executed()), 1);
            if trace.is_some() {
                traced = Some(record(a.now_ticks()));
            }
        }
        // The outputs are in memory before any consumer can be taken (and before the output
        // capture is requested).
        a.store_barrier();
        // No completion before the task's output capture is sealed.
        if !cross(crate::layout::capture_phase::AFTER) {
            return;
        }
        self.finish_subtask(t, Some(&rec));
        if let (Some(tr), Some(mut r)) = (trace.as_mut(), traced) {
            r.completion = a.now_ticks().max(1);
            tr.push(a, &r);
        }
    }

    /// Decrement every consumer's fan-in; publish those that reach zero.
    fn release(&self, rec: &TaskRecord, t: u32) {
        let (a, l, img) = (self.a, self.l, self.img);
        let mut chunk = [0u32; 16];
        let mut done = 0u32;
        while done < rec.fanout_count {
            let n = (rec.fanout_count - done).min(16) as usize;
            img.read_fanout(rec.fanout_start as u64 + done as u64, &mut chunk[..n]);
            for &c in &chunk[..n] {
                let why = if c >= l.tasks {
                    Err("a fan-out list named a task outside the graph")
                } else {
                    take_fanin(a, l, c).and_then(|last| if last { self.publish(c) } else { Ok(()) })
                };
                if let Err(why) = why {
                    self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Completion, t, c as u64, why);
                    return;
                }
            }
            done += n as u32;
        }
    }
}

/// Read a producer-written 4-byte predicate device-direct (the producer wrote it back before
/// it released this task).
fn predicate_holds<G: GmAtomic>(a: &G, addr: u64) -> bool {
    let word = a.query(GmAddr(addr & !7));
    (word >> ((addr & 4) * 8)) as u32 != 0
}
