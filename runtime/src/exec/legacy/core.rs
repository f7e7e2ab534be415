//! The legacy executor's AICore half: for every dispatch id in DMB, read the payload, ACK, run
//! the kernel, publish its outputs, store barrier, FIN (or [`regs::COND_FAULTED`] after a
//! fault); leave on EXIT.

use pto_hal::{AicoreAgent, AicoreLaunch, CoreType, GmAddr};
use zerocopy::IntoBytes;

use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::exec::kernel_call::CoreCtx;
use crate::layout::core_status;
use crate::layout::{DispatchPayload, TraceRecord, regs, trace_kind};
use crate::lifecycle::{self, Fault, RunMap};

/// The legacy executor's loop: run every dispatch id DMB names until EXIT (`Ok`), or until
/// the core's wait budget passes without a dispatch (`Err`, the fault latched).
pub(crate) fn dispatch_loop<A: AicoreAgent>(
    a: &A,
    map: &RunMap,
    launch: &AicoreLaunch,
    trace: &mut Option<crate::trace::TraceRing>,
) -> Result<(), i32> {
    let budget = map.cfg.core_wait_ticks;
    let mut last = regs::DMB_IDLE;
    // The idle budget runs from the first idle look after a dispatch (0: not yet read), so a
    // busy core reads the clock once per dispatch, not twice.
    let mut deadline = 0;
    // After a faulted dispatch the core takes no other (the one pending behind it was
    // dispatched before the latch, but the run is over): only EXIT ends the wait.
    let mut faulted = false;
    // One argument context for every dispatch of this launch, reloaded per dispatch.
    let mut ctx = CoreCtx::new(a, launch.core_type);
    loop {
        let v = a.read_dmb();
        if v == regs::DMB_EXIT {
            return Ok(());
        }
        if v == last || v == regs::DMB_IDLE || v == 0 || faulted {
            let now = a.now_ticks();
            if deadline == 0 {
                deadline = now.saturating_add(budget).max(1);
            }
            if now >= deadline {
                lifecycle::latch(
                    a,
                    map.desc,
                    Fault {
                        code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                        site: Site::CoreIdle,
                        task: None,
                        core: Some(launch.block_idx),
                        detail: v as u64,
                    },
                    "",
                );
                return Err(core_status::IDLE_TIMEOUT);
            }
            a.wait_for_event(deadline);
            continue;
        }
        a.rmb();
        last = v;
        faulted = run_one(a, map, launch, v, trace, &mut ctx);
        deadline = 0;
    }
}

/// Run dispatch `id`; `true` when it faulted (the fault latched, [`regs::COND_FAULTED`] written
/// instead of FIN).
fn run_one<A: AicoreAgent>(
    a: &A,
    map: &RunMap,
    launch: &AicoreLaunch,
    id: u32,
    trace: &mut Option<crate::trace::TraceRing>,
    ctx: &mut CoreCtx<'_>,
) -> bool {
    let at = map.payload(launch.block_idx, id & 1);
    observe_payload(a, at);
    let mut p = DispatchPayload::default();
    a.read(at, p.as_mut_bytes());
    a.write_cond(regs::ack(id));
    let start = if trace.is_some() { a.now_ticks() } else { 0 };
    let w = launch.block_idx;
    let faulted = core::cell::Cell::new(false);
    let fault = |code: ErrorCode, detail: u64, text: &str| {
        faulted.set(true);
        lifecycle::latch(
            a,
            map.desc,
            Fault { code, site: Site::Kernel, task: Some(p.task_id), core: Some(w), detail },
            text,
        );
    };
    if p.reg_task_id != id {
        fault(
            ErrorCode::Device(DeviceFault::BadImage),
            ((p.reg_task_id as u64) << 32) | id as u64,
            "payload does not carry the dispatched id",
        );
    } else {
        match a.resolve_kernel(p.bin) {
            None => fault(
                ErrorCode::Device(DeviceFault::UnknownKernel),
                p.bin,
                "kernel binary not loaded for this core type",
            ),
            Some(kernel) => {
                ctx.load(a, &p);
                if let Some(i) = ctx.malformed() {
                    // Nothing of a malformed record is touched: no invalidate over a
                    // garbage range, no kernel on garbage views.
                    fault(
                        ErrorCode::Device(DeviceFault::BadImage),
                        i as u64,
                        "malformed argument record (a stale or corrupt read of its tensor descriptors)",
                    );
                    return finished(a, id, true);
                }
                ctx.observe_arguments(a);
                if let Err(e) = a.run_kernel(kernel, ctx) {
                    fault(ErrorCode::Device(DeviceFault::KernelFault), p.bin, e.as_str());
                }
                write_back(a, ctx, id, faulted.get());
            }
        }
    }
    if let Some(t) = trace {
        let r = TraceRecord {
            kind: trace_kind::SUBTASK,
            lane: if launch.core_type == CoreType::Aic { 0 } else { 1 + p.lane.min(1) as u8 },
            core: w,
            task: p.task_id,
            block: p.block_idx,
            bin: p.bin,
            start,
            end: a.now_ticks(),
            ..TraceRecord::default()
        };
        t.push(a, &r);
    }
    finished(a, id, faulted.get())
}

/// Report the end of dispatch `id` (its outputs written back): `fin(id)`, or
/// [`regs::COND_FAULTED`] when it faulted. Returns whether it reported a fault.
fn finished<A: AicoreAgent>(a: &A, id: u32, faulted: bool) -> bool {
    // Broken (RELEASE_ON_FAULT): a faulted dispatch reports a plain FIN (its consumers released).
    crate::seam!(RELEASE_ON_FAULT => broken::finished_as_fin(a, id));
    a.store_barrier();
    a.write_cond(if faulted { regs::COND_FAULTED } else { regs::fin(id) });
    faulted
}

/// Drop this core's cached copy of the dispatch payload line at `at` before reading it: the
/// AICPU wrote it after the core's previous dispatch through that buffer.
fn observe_payload<A: AicoreAgent>(a: &A, at: GmAddr) {
    // Broken (SKIP_PAYLOAD_OBSERVE): the payload is read as the cache has it.
    crate::seam!(SKIP_PAYLOAD_OBSERVE);
    a.observe_line(at);
}

/// After dispatch `id`'s kernel: write back what it wrote (also when it `faulted`: the host
/// may read the tensor after the run), before FIN or the fault is reported. `id` and
/// `faulted` are the broken twins' inputs.
#[cfg_attr(not(feature = "breakage"), allow(unused_variables))]
fn write_back<A: AicoreAgent>(a: &A, ctx: &mut CoreCtx<'_>, id: u32, faulted: bool) {
    crate::seam!(FIN_BEFORE_PUBLISH => broken::fin_then_write_back(a, ctx, id, faulted));
    crate::seam!(FAULT_EXIT_SKIPS_PUBLISH => broken::write_back_unless_faulted(a, ctx, faulted));
    ctx.publish_outputs(a);
}

/// The broken twins of the legacy core's steps (the breakage suites' variants): each is a whole
/// step with one bug, entered from the first line of the correct step when its switch is
/// active ([`seam!`](crate::seam)). Compiled with the `breakage` feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::AicoreAgent;

    use crate::exec::kernel_call::CoreCtx;
    use crate::layout::regs;

    /// `FIN_BEFORE_PUBLISH`: [`write_back`](super::write_back) that writes FIN before the
    /// kernel's outputs are written back (a consumer may read them stale).
    pub(super) fn fin_then_write_back<A: AicoreAgent>(a: &A, ctx: &mut CoreCtx<'_>, id: u32, faulted: bool) {
        if !faulted {
            a.write_cond(regs::fin(id));
        }
        ctx.publish_outputs(a);
    }

    /// `RELEASE_ON_FAULT`: [`finished`](super::finished) that reports a plain FIN whatever
    /// happened (a faulted dispatch's consumers are released); never a fault.
    pub(super) fn finished_as_fin<A: AicoreAgent>(a: &A, id: u32) -> bool {
        a.store_barrier();
        a.write_cond(regs::fin(id));
        false
    }

    /// `FAULT_EXIT_SKIPS_PUBLISH`: [`write_back`](super::write_back) that leaves what a
    /// faulted kernel wrote in the core's cache (the host's read-back of the tensor is then a
    /// coherence violation under the faithful model).
    pub(super) fn write_back_unless_faulted<A: AicoreAgent>(a: &A, ctx: &mut CoreCtx<'_>, faulted: bool) {
        if !faulted {
            ctx.publish_outputs(a);
        }
    }
}
