//! The resident executor's AICore half: a core's loop — take work from its lane's dispatch
//! slot (holding the cluster's token to run a dispatch pass when needed), run it, release its
//! consumers — until EXIT.

use pto_hal::{AicoreAgent, AicoreLaunch, GmAddr};

use super::capture::boundary::Boundary;
use super::state::*;
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::dump::DumpLevel;
use crate::exec::kernel_call::CoreCtx;
use crate::layout::{CaptureLayout, ImageSource, ImageView, ResidentLayout, TaskRecord, entry_task_block, regs};
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
pub(super) struct CoreImage<'a, A> {
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

/// What one core's resident loop works with.
pub(super) struct Core<'a, A: AicoreAgent> {
    pub(super) a: &'a A,
    pub(super) map: &'a RunMap,
    pub(super) l: &'a ResidentLayout,
    pub(super) img: &'a ImageView<'a, CoreImage<'a, A>>,
    pub(super) launch: &'a AicoreLaunch,
    pub(super) w: u32,
    /// Tasks published whose rings are owed ([`Core::settle`]).
    pub(super) owed: [core::cell::Cell<Pushed>; 8],
    pub(super) owed_len: core::cell::Cell<usize>,
    /// The inbox classes the graph has ([`ResidentLayout::classes`], host-written, read once).
    pub(super) classes: u8,
    /// The args dump's boundary capture, when the run dumps.
    pub(super) capture: Option<(Boundary, DumpLevel)>,
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
    pub(super) fn fault(&self, code: ErrorCode, site: Site, t: u32, detail: u64, text: &str) {
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
    pub(super) fn settle(&self) {
        let n = self.owed_len.replace(0);
        for p in &self.owed[..n] {
            ring_pushed(self.a, self.l, p.get(), false, self.classes);
        }
    }

    /// Publish task `t`, owing its rings until [`settle`](Self::settle); with no room left to
    /// remember it, ring at once.
    pub(super) fn publish(&self, t: u32) -> Result<(), &'static str> {
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
    pub(super) fn finish_subtask(&self, t: u32, rec: Option<&TaskRecord>) {
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

/// The doorbell word `watch` as it is before a core looks for work (`None`: read it after).
fn bell_before_looking<A: AicoreAgent>(a: &A, watch: GmAddr) -> Option<u64> {
    // Broken (WAKE_SEEN_LATE): read after the look for work, so a ring between the two is lost.
    crate::seam!(WAKE_SEEN_LATE => None);
    Some(a.query(watch))
}
