//! One subtask on a resident core: read its slot entry and the task's record, cross the args
//! dump's BEFORE boundary, run the kernel, write its outputs back, cross AFTER, count it off.
//! The rest of the core's loop (its slot, the dispatch pass, releases and rings) is
//! [`super::core`]'s.

use pto_hal::{AicoreAgent, CoreType, GmAddr, GmAtomic};
use zerocopy::{FromZeros, IntoBytes};

use super::capture::boundary::{Boundary, Failure};
use super::core::Core;
#[cfg(feature = "breakage")]
use super::state::{IDLE_SLICE_US, latch_seen};
use crate::codes::{DeviceFault, ErrorCode, Site};
use crate::dump::TaskArgs;
use crate::exec::kernel_call::CoreCtx;
use crate::layout::{
    ARGS_HEAD, ArgsHeader, DispatchPayload, ENTRY_GANG, NO_FUNC, TaskRecord, TraceRecord, entry_task_block,
    home_fields, trace_kind,
};

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

impl<A: AicoreAgent> Core<'_, A> {
    /// Run slot entry `e` in this core's lane `lane`: one block of a task, or one lane of
    /// a gang's block (`taken`: the tick it was taken at, when tracing). A subtask whose
    /// kernel faults ends there: it is not counted off, so its task never completes and
    /// releases no consumer, and its output capture is never requested.
    pub(super) fn run(
        &self,
        lane: u32,
        e: u64,
        taken: u64,
        trace: &mut Option<crate::trace::TraceRing>,
        ctx: &mut CoreCtx<'_>,
    ) {
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
}

/// Read a producer-written 4-byte predicate device-direct (the producer wrote it back before
/// it released this task).
fn predicate_holds<G: GmAtomic>(a: &G, addr: u64) -> bool {
    let word = a.query(GmAddr(addr & !7));
    (word >> ((addr & 4) * 8)) as u32 != 0
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
