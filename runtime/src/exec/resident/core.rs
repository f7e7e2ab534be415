//! The resident executor's AICore half: a core's loop — take work from its lane's dispatch
//! slot (holding the cluster's token to run a dispatch pass when needed), run it, release its
//! consumers — until EXIT.

use pto_hal::{AicoreAgent, AicoreLaunch, CoreType, GmAddr, GmAtomic};
use zerocopy::{FromZeros, IntoBytes};

use super::capture::boundary::{Boundary, Failure};
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
            let f = core_fault(ErrorCode::Device(DeviceFault::BadImage), Site::Kernel, w, e.detail());
            return leave_latched(a, map, f, "a core read a graph image the AICPU had not validated");
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
    // Spaces the doorbell polls of an idle core (on the chip, whose word wait is a spin hint).
    let mut backoff = crate::backoff::Backoff::new();
    // One argument context for every subtask this core runs, reloaded per subtask.
    let mut ctx = CoreCtx::new(a, launch.core_type);
    loop {
        if a.read_dmb() == regs::DMB_EXIT {
            return Served::Exit;
        }
        // Read before looking for work: a ring after this read ends the wait below at once.
        let bell_before = bell_before_looking(a, watch);
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
        let bell = bell_before.unwrap_or_else(|| a.query(watch));
        // Idle: the run is progressing elsewhere as long as `completed` (or a capture) moves.
        let n = a.query(GmAddr(l.completed())) + served.map_or(0, |at| a.query(at));
        let now = a.now_ticks();
        if n != seen {
            seen = n;
            deadline = now.saturating_add(budget);
        }
        if now >= deadline {
            return leave_latched(
                a,
                map,
                core_fault(ErrorCode::Sched(SchedError::SchedulerTimeout), Site::CoreIdle, w, n),
                "",
            );
        }
        // In slices: EXIT arrives through a register, not through the watched word.
        let until = deadline.min(now.saturating_add(a.ticks_from_micros(IDLE_SLICE_US)));
        backoff.wait_word(a, watch, bell, until);
    }
}

/// A fault of core `w` that names no task.
fn core_fault(code: ErrorCode, site: Site, w: u32, detail: u64) -> Fault {
    Fault { code, site, task: None, core: Some(w), detail }
}

/// Latch `f` (first wins), wake the supervisors and leave the run as [`Served::IdleTimeout`]:
/// the core goes on to its teardown gate.
fn leave_latched<A: AicoreAgent>(a: &A, map: &RunMap, f: Fault, text: &str) -> Served {
    lifecycle::latch(a, map.desc, f, text);
    a.send_event();
    Served::IdleTimeout
}

/// One subtask as a core runs it: what [`Core::read_entry`] read of its slot entry, the
/// task's record and its argument record's header.
struct Subtask {
    t: u32,
    block: u32,
    rec: TaskRecord,
    /// This core's lane of its cluster.
    lane: u32,
    /// The kernel lane it runs (0 AIC, 1 or 2 AIV).
    func_lane: u32,
    /// A lane of a gang's block.
    gang: bool,
    args: GmAddr,
    h: ArgsHeader,
}

/// The boundaries a subtask crosses when the run dumps: this core's capture seat, the
/// participants' mask, the slot's occupancy (0 for a lone participant) and which of the two
/// phases records anything.
type Phases<'b> = (&'b Boundary, u64, u64, [bool; 2]);

/// How [`Core::execute`] ended.
enum Executed {
    /// The kernel ran and its outputs are written back: its trace record, when tracing.
    Ran(Option<TraceRecord>),
    /// The subtask ends here (a fault latched, or a broken variant did its own ending).
    Stopped,
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
        let a = self.a;
        let Some(s) = self.read_entry(lane, e) else { return };
        let skip = s.h.predicate != 0 && !predicate_holds(a, s.h.predicate);
        // The boundaries this task has: a phase that records nothing is not entered. They are
        // learnt from the kernel's arguments, loaded here (before the input capture, which
        // does not change them) instead of read a second time for the kernel.
        let loaded = self.capture.is_some();
        if loaded {
            ctx.load_body(a, s.args, &s.h);
        }
        let phases = self.phases(&s, ctx);
        // No subtask executes before the task's input capture is sealed.
        if !self.cross(phases, &s, crate::layout::capture_phase::BEFORE) {
            return;
        }
        let traced = if skip {
            None
        } else {
            match self.execute(&s, taken, trace, ctx, loaded) {
                Executed::Ran(traced) => traced,
                Executed::Stopped => return,
            }
        };
        // The outputs are in memory before any consumer can be taken (and before the output
        // capture is requested).
        a.store_barrier();
        // No completion before the task's output capture is sealed.
        if !self.cross(phases, &s, crate::layout::capture_phase::AFTER) {
            return;
        }
        self.finish_subtask(s.t, Some(&s.rec));
        if let (Some(tr), Some(mut r)) = (trace.as_mut(), traced) {
            r.completion = a.now_ticks().max(1);
            tr.push(a, &r);
        }
    }

    /// Latch BAD_IMAGE for task `t` at the kernel site: what a core read of its slot entry
    /// or the task's record does not agree with the validated graph.
    fn bad_entry(&self, t: u32, detail: u64, text: &str) {
        self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Kernel, t, detail, text);
    }

    /// Read slot entry `e` of lane `lane`: the task's record, the kernel lane it runs and its
    /// argument record's header. `None` (BAD_IMAGE latched) when the entry names a task,
    /// block or lane the graph does not have.
    fn read_entry(&self, lane: u32, e: u64) -> Option<Subtask> {
        let (a, l, img) = (self.a, self.l, self.img);
        let (t, block) = entry_task_block(e);
        if t >= l.tasks {
            self.bad_entry(t, e, "a dispatch slot named a task outside the graph");
            return None;
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
        if block >= rec.block_num || rec.funcs[func_lane as usize] == NO_FUNC {
            self.bad_entry(t, e, "a dispatch slot named a block or lane the task does not have");
            return None;
        }
        let args = GmAddr(self.map.cfg.image + img.args_offset(t, &rec));
        let mut h = ArgsHeader::new_zeroed();
        a.observe_lines(args, ARGS_HEAD);
        a.read(args, h.as_mut_bytes());
        Some(Subtask { t, block, rec, lane, func_lane, gang, args, h })
    }

    /// The boundaries subtask `s` crosses when the run dumps ([`Phases`]); `None` when it
    /// does not.
    fn phases(&self, s: &Subtask, ctx: &CoreCtx<'_>) -> Option<Phases<'_>> {
        let a = self.a;
        self.capture.as_ref().map(|(b, level)| {
            let record = TaskArgs::with_header(s.args.0, s.h);
            let mask = if s.gang {
                match home_fields(a.query(GmAddr(self.l.home(s.t)))).2 {
                    0 => 0b111,
                    m => m as u64,
                }
            } else {
                1 << s.lane
            };
            // A lone participant claims no slot: its occupancy is never handed out.
            let n = if mask.count_ones() > 1 { b.occupancy(a, s.lane) } else { 0 };
            (b, mask, n, record.stages_in(ctx.descriptors(), *level))
        })
    }

    /// Cross boundary `phase` of subtask `s`; `false` when the core must not go on (EXIT, an
    /// abort, or a fault this core latched). A task that records at either boundary crosses
    /// AFTER (possibly empty: the AICPU seals it at once), so a gang's occupancy always
    /// settles; a gang claims its slot at the first phase it enters (a single-lane task
    /// claims none).
    fn cross(&self, phases: Option<Phases<'_>>, s: &Subtask, phase: u64) -> bool {
        let Some((b, mask, n, has)) = phases else { return true };
        let before = phase == crate::layout::capture_phase::BEFORE;
        if !(if before { has[0] } else { has[0] || has[1] }) {
            return true;
        }
        let key = mask.trailing_zeros();
        let claim = before || !has[0];
        match b.cross(self.a, key, n, mask, 1 << s.lane, phase, s.t, claim) {
            Ok(()) => true,
            Err(Failure::Exit) | Err(Failure::Aborted(None)) => false,
            Err(Failure::Aborted(Some(code))) => {
                let site = if before { Site::CaptureBefore } else { Site::CaptureAfter };
                self.fault(ErrorCode::Device(code), site, s.t, n, "the args dump did not seal this task boundary");
                false
            }
        }
    }

    /// Run subtask `s`'s kernel and write its outputs back (the arguments are in `ctx`
    /// already when `loaded`): its trace record when the run traces, or
    /// [`Executed::Stopped`] when the subtask ends here (an unknown kernel, a malformed
    /// record, a kernel fault).
    fn execute(
        &self,
        s: &Subtask,
        taken: u64,
        trace: &mut Option<crate::trace::TraceRing>,
        ctx: &mut CoreCtx<'_>,
        loaded: bool,
    ) -> Executed {
        let (a, l, t) = (self.a, self.l, s.t);
        let f = self.img.func(s.rec.funcs[s.func_lane as usize]).unwrap_or_default();
        let bin = if s.func_lane == 0 { f.aic } else { f.aiv };
        let Some(kernel) = a.resolve_kernel(bin) else {
            let why = "kernel binary not loaded for this core type";
            self.fault(ErrorCode::Device(DeviceFault::UnknownKernel), Site::Kernel, t, bin, why);
            return Executed::Stopped;
        };
        let p = DispatchPayload {
            bin,
            args: s.args.0,
            task_id: t,
            block_idx: s.block,
            block_num: s.rec.block_num,
            lane: if s.gang && s.lane > 0 { s.lane - 1 } else { 0 },
            reg_task_id: 0,
            ..DispatchPayload::default()
        };
        let start = a.now_ticks();
        a.store_direct(GmAddr(l.running(self.w)), t as u64 + 1);
        if !loaded {
            ctx.load_body(a, s.args, &s.h);
        }
        ctx.set_payload(&p);
        if let Some(i) = ctx.malformed() {
            self.bad_entry(
                t,
                i as u64,
                "malformed argument record (a stale or corrupt read of its tensor descriptors)",
            );
            return Executed::Stopped;
        }
        ctx.observe_arguments(a);
        let ran = a.run_kernel(kernel, ctx);
        let record = |end: u64| TraceRecord {
            kind: trace_kind::SUBTASK,
            lane: s.func_lane as u8,
            core: self.w,
            task: t,
            block: s.block,
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
            write_back_faulted(a, ctx);
            self.fault(ErrorCode::Device(DeviceFault::KernelFault), Site::Kernel, t, bin, err.as_str());
            if stops_at_a_fault() {
                // The faulted subtask is traced (it ends after the latch), never completed.
                if let Some(tr) = trace.as_mut() {
                    tr.push(a, &record(a.now_ticks()));
                }
                return Executed::Stopped;
            }
        }
        if !self.write_back(s, ctx) {
            return Executed::Stopped;
        }
        Executed::Ran(trace.is_some().then(|| record(a.now_ticks())))
    }

    /// After subtask `s`'s kernel returned: write its outputs back, clear this core's running
    /// word and count the subtask executed. `false` when the subtask ends here (a broken
    /// variant did its own ending; `s` is its input).
    #[cfg_attr(not(feature = "breakage"), allow(unused_variables))]
    fn write_back(&self, s: &Subtask, ctx: &mut CoreCtx<'_>) -> bool {
        crate::seam!(FIN_BEFORE_PUBLISH => {
            self.fin_before_publish(s, ctx);
            false
        });
        let (a, l) = (self.a, self.l);
        ctx.publish_outputs(a);
        a.store_direct(GmAddr(l.running(self.w)), 0);
        a.fetch_add(GmAddr(l.executed()), 1);
        true
    }

    /// `FIN_BEFORE_PUBLISH`, [`Core::write_back`]'s broken twin: the subtask is counted and
    /// the consumers released (and rung for) before the outputs are written back.
    #[cfg(feature = "breakage")]
    fn fin_before_publish(&self, s: &Subtask, ctx: &mut CoreCtx<'_>) {
        let (a, l) = (self.a, self.l);
        a.store_barrier();
        a.fetch_add(GmAddr(l.executed()), 1);
        let mine = a.query(GmAddr(l.completed()));
        self.finish_subtask(s.t, Some(&s.rec));
        self.settle();
        // The interleaving forced: the write-back waits until a consumer released here has
        // completed (it read the row without it), or a second passes.
        if s.rec.fanout_count > 0 && crate::breakage::forcing() {
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

/// The doorbell word `watch` as it is before a core looks for work (`None`: read it after).
fn bell_before_looking<A: AicoreAgent>(a: &A, watch: GmAddr) -> Option<u64> {
    // Broken (WAKE_SEEN_LATE): read after the look for work, so a ring between the two is lost.
    crate::seam!(WAKE_SEEN_LATE => None);
    Some(a.query(watch))
}

/// What a faulted kernel wrote is written back before the fault is reported: the host may read
/// the tensor after the run (the legacy core does the same before its faulted FIN).
fn write_back_faulted<A: AicoreAgent>(a: &A, ctx: &mut CoreCtx<'_>) {
    // Broken (FAULT_EXIT_SKIPS_PUBLISH): its dirty lines stay in the core's cache.
    crate::seam!(FAULT_EXIT_SKIPS_PUBLISH);
    ctx.publish_outputs(a);
    a.store_barrier();
}

/// Whether a faulted subtask ends at its fault (always: never completed, never releasing).
fn stops_at_a_fault() -> bool {
    // Broken (RELEASE_ON_FAULT): it completes like any other and releases its consumers.
    crate::seam!(RELEASE_ON_FAULT => false);
    true
}
