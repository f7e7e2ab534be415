//! The resident executor's AICPU half: supervise a run the cores schedule themselves (a
//! no-progress watchdog naming a hung kernel, the boundary-capture service's steps), and count
//! what the cores ran.

use pto_hal::{AicpuAgent, GmAddr};

use super::state::latch_seen;
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::layout::ResidentLayout;
use crate::lifecycle::{self, Fault, RunMap};

/// How long a supervising AICPU thread with no capture to serve sleeps between two looks at
/// the run when no event comes (the watchdog's resolution).
pub const SUPERVISE_SLICE_US: u64 = 10_000;

/// The AICPU side of a resident run, on every scheduler thread: wait until every task of the
/// graph completed, a fault is latched or `stop` is raised, with a no-progress watchdog. A
/// watchdog expiry names the first core found running a kernel (`KernelHung`, with its task
/// and core) or, with none running, the stall itself. With the args dump on, the thread's
/// boundary-capture `service` takes a bounded step between every two looks (a step that
/// copied or committed counts as progress). Returns the tasks completed.
pub fn supervise<A: AicpuAgent>(
    a: &A,
    map: &RunMap,
    stop: &crate::sync::AtomicBool,
    mut service: Option<&mut crate::exec::resident::capture::service::Service<'_, A>>,
) -> u64 {
    let Some(l) = ResidentLayout::of(&map.cfg) else { return 0 };
    let total = l.tasks as u64;
    let watchdog = map.cfg.watchdog_ticks;
    let completed = GmAddr(l.completed());
    let mut seen = a.query(completed);
    let mut last_progress = a.now_ticks();
    loop {
        let c = a.query(completed);
        if c >= total || latch_seen(a, map) || stop.load(crate::sync::Ordering::Acquire) {
            if let Some(s) = service.as_deref_mut() {
                // A participant that gave up marked its slot aborted: acknowledge it before
                // the producer stops, so it leaves on the acknowledgement.
                s.answer_aborts();
            }
            return c;
        }
        let stepped = match service.as_deref_mut() {
            Some(s) => {
                let before = s.stats.steps;
                let answered = s.step();
                (answered, s.stats.steps != before)
            }
            None => (false, false),
        };
        let now = a.now_ticks();
        if c != seen || stepped.1 {
            seen = c;
            last_progress = now;
        } else if now.saturating_sub(last_progress) > watchdog {
            let running = (0..l.workers()).find_map(|w| match a.query(GmAddr(l.running(w))) {
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
        if stepped.0 && service.as_deref().is_some_and(|s| s.pending()) {
            // Answered a request while another one waits its turn: serve it without sleeping.
            // A request written since the last scan (a core asking again after its answer)
            // ends the wait below at once: it moved the counter the wait is based on.
            continue;
        }
        let until = last_progress.saturating_add(watchdog + 1);
        if let Some(s) = service.as_deref() {
            // Cores ask through this thread's counter; aborts and the run's end send events.
            // No back-off here: a serving thread that spins in a delay instead of sleeping
            // answers a request sooner, and a capture publisher that reads its acknowledgement
            // after the answer to a WOULD_BLOCK re-requests without looking at its budget
            // (`capture::boundary`), so the answer's timing is left as it was.
            let (at, seen) = s.asked();
            a.wait_for_word(at, seen, until.min(now.saturating_add(a.ticks_from_micros(1_000))));
        } else {
            // Not a wait on `completed`: that would wake this thread at every task. The core
            // whose completion ends the run, and every core that latches a fault, send an
            // event; the watchdog looks at least every slice.
            a.wait_for_event(until.min(now.saturating_add(a.ticks_from_micros(SUPERVISE_SLICE_US))));
        }
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
