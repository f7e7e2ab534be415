//! The AICore program: one entry point for both executors. It reads the launch descriptor,
//! reports, waits for its window, serves with the executor the descriptor names, and leaves
//! through one exit path (trace close, store barrier, EXITED, the teardown gate).

use pto_hal::{AicoreAgent, AicoreLaunch};

use crate::codes::{ErrorCode, SchedError, Site};
use crate::layout::core_status;
use crate::layout::{DESC_MAGIC, LAYOUT_VERSION, executor_mode, offsets, regs};
use crate::lifecycle::{self, Fault, RunMap};

/// The AICore program entry point of both executors.
pub fn aicore_entry<A: AicoreAgent>(a: &A, launch: AicoreLaunch) -> i32 {
    let desc = launch.args;
    let cfg = lifecycle::read_config_core(a, desc);
    let known_mode = matches!(
        cfg.executor,
        executor_mode::RESIDENT_PENDING | executor_mode::LEGACY_GRAPH | executor_mode::LEGACY_UNSUPPORTED_SHAPE
    );
    if cfg.magic != DESC_MAGIC || cfg.version != LAYOUT_VERSION || launch.block_idx >= cfg.workers || !known_mode {
        return core_status::BAD_DESC;
    }
    let map = RunMap { desc, cfg };
    let mut trace = crate::trace::TraceRing::open(&cfg, true, launch.block_idx);
    lifecycle::report(a, &map, &launch);

    let budget = cfg.core_wait_ticks;
    // What the core served: `Ok` until EXIT, `Err` with its status once it gave up (the fault
    // latched). Every outcome after the report leaves through the one exit path below — the
    // teardown gate included — except a window the AICPU cancelled before it opened, whose
    // gate already holds the cancel value (nothing more will touch the core).
    let served = match lifecycle::wait_window(a, &map, launch.block_idx, a.now_ticks().saturating_add(budget)) {
        Err(lifecycle::NoWindow::Cancelled) => return 0,
        Err(lifecycle::NoWindow::Timeout) => {
            let f = Fault {
                code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                site: Site::Window,
                task: None,
                core: Some(launch.block_idx),
                detail: 0,
            };
            lifecycle::latch(a, desc, f, "");
            Err(core_status::WINDOW_TIMEOUT)
        }
        Ok(_) => {
            a.write_cond(regs::COND_IDLE);
            // The executor the descriptor names serves until EXIT or gives up.
            if cfg.executor == executor_mode::RESIDENT_PENDING {
                match resident_ready(a, &map, launch.block_idx) {
                    Go::Ready => match super::resident::core::serve(a, &map, &launch, &mut trace) {
                        super::resident::core::Served::Exit => Ok(()),
                        super::resident::core::Served::IdleTimeout => Err(core_status::IDLE_TIMEOUT),
                    },
                    Go::Exit => Ok(()),
                    Go::Timeout => Err(core_status::WINDOW_TIMEOUT),
                }
            } else {
                super::legacy::core::dispatch_loop(a, &map, &launch, &mut trace)
            }
        }
    };
    // Broken variants of the exit (RESIDENT_EXIT_DIRTY, ERROR_EXIT_SKIPS_GATE).
    #[cfg(feature = "breakage")]
    if let Some(status) = broken::exit(a, &map, &launch, &cfg, served) {
        return status;
    }
    // The one exit path: the trace closed, every store of this core ordered before EXITED,
    // then the teardown gate, whatever the core served. The gate wait ends only when the
    // AICPU released or abandoned the core: every AICPU thread resolves each of its cores'
    // gates before its program ends.
    if let Some(t) = &trace {
        t.close(a);
    }
    a.store_barrier();
    a.write_cond(regs::COND_EXITED);
    let released = lifecycle::wait_release(a, &map, launch.block_idx, budget);
    match (served, released) {
        (Err(status), _) => status,
        (Ok(()), lifecycle::Release::Released) => 0,
        (Ok(()), lifecycle::Release::Abandoned) => core_status::NOT_RELEASED,
    }
}

/// What a resident core found while waiting for the AICPU's go.
enum Go {
    /// The AICPU validated the image: schedule.
    Ready,
    /// EXIT came first (the image was refused, or the run stopped).
    Exit,
    /// Neither within the core's wait budget (the fault is latched).
    Timeout,
}

/// Wait until the AICPU says the image is valid (this run's
/// [`resident_ready_word`](crate::layout::resident_ready_word) in the run line, read
/// device-direct: never the configuration's cached copy, never an earlier run's word) or
/// sends EXIT.
fn resident_ready<A: AicoreAgent>(a: &A, map: &RunMap, w: u32) -> Go {
    let at = map.desc.offset(offsets::RUN_RESIDENT_READY);
    let deadline = a.now_ticks().saturating_add(map.cfg.core_wait_ticks);
    let mut backoff = crate::backoff::Backoff::new();
    loop {
        if a.read_dmb() == regs::DMB_EXIT {
            return Go::Exit;
        }
        let v = a.query(at);
        if v == crate::layout::resident_ready_word(map.cfg.epoch) {
            return Go::Ready;
        }
        let now = a.now_ticks();
        if now >= deadline {
            let f = Fault {
                code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                site: Site::Window,
                task: None,
                core: Some(w),
                detail: v,
            };
            lifecycle::latch(a, map.desc, f, "");
            return Go::Timeout;
        }
        backoff.wait_word(a, at, v, deadline.min(now.saturating_add(a.ticks_from_micros(1_000))));
    }
}

/// The broken variants of the AICore program's exit. Compiled with the `breakage` feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::{AicoreAgent, AicoreLaunch};

    use crate::layout::{LaunchConfig, executor_mode};
    use crate::lifecycle::RunMap;

    /// `RESIDENT_EXIT_DIRTY`: the reference's resident exit, which writes a word of the core's
    /// handshake line through its cache and ends with no final write-back. And
    /// `ERROR_EXIT_SKIPS_GATE`: the old error exits, which returned before the gate (`Some`:
    /// the status the core returns at once).
    pub(super) fn exit<A: AicoreAgent>(
        a: &A,
        map: &RunMap,
        launch: &AicoreLaunch,
        cfg: &LaunchConfig,
        served: Result<(), i32>,
    ) -> Option<i32> {
        if cfg.executor == executor_mode::RESIDENT_PENDING
            && crate::breakage::broken(crate::breakage::RESIDENT_EXIT_DIRTY)
        {
            a.write(map.handshake(launch.block_idx).offset(12), &1u32.to_le_bytes());
        }
        match served {
            Err(status) if crate::breakage::broken(crate::breakage::ERROR_EXIT_SKIPS_GATE) => Some(status),
            _ => None,
        }
    }
}
