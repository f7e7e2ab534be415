//! Loom models of the teardown gate: the real [`retire_group`] and [`wait_release`] over the
//! loom device of `crate::loom_support::hal`: a core leaves only on the AICPU's release or
//! abandonment, never on its own budget; a reused gate never takes the release a previous run
//! left there (reproducer `GATE_ANY_EPOCH`, with `--features breakage`).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std --lib lifecycle::loom_tests
//! ```
//!
//! Every model is one `#[test]` whose doc comment states the invariant it checks; each prints
//! its execution count and wall time. What loom does not cover: see `crate::loom_support`.

use loom::sync::Arc;
use pto_hal::{Barriers, CoreRegisters};

use crate::layout::{offsets, regs};
use crate::lifecycle::{self, Release, Retired, RunMap, retire_group, wait_release};
use crate::loom_support::hal::{self as loom_hal, Budgets, Device, GmPlan, LoomAicpu, LoomCore, RegOrder, initial_gm};
use crate::loom_support::harness::{Tally, check};
use crate::loom_support::jobs::{job, run_jobs};
use crate::loom_support::prelude::*;

/// Physical cores of the loom device.
const CORES: u32 = 2;
/// The run's epoch (non-zero: gate words start at 0).
const EPOCH: u64 = 7;

// ---------------------------------------------------------------------------------------------
// 4. Teardown gate
// ---------------------------------------------------------------------------------------------

/// The AICore's exit path, transcribed from `exec.rs`: wait for DMB == EXIT, store barrier,
/// COND := EXITED, then the real [`wait_release`] on its gate, with budget `core_wait_ticks`
/// (past it the core latches RELEASE_TIMEOUT and keeps waiting). On a released return, checks
/// that the AICPU's close of this core's window completed first; on an abandoned one, that the
/// window was never closed. Either way the core then leaves: from then on any AICPU access to
/// its registers fails the model. Returns what `wait_release` returned.
fn core_exit(c: &LoomCore, map: &RunMap, worker: u32) -> Release {
    loom_hal::spin_until(|| c.read_dmb() == regs::DMB_EXIT);
    c.store_barrier();
    c.write_cond(regs::COND_EXITED);
    let r = wait_release(c, map, worker, map.cfg.core_wait_ticks);
    match r {
        Release::Released => {
            assert!(c.dev.closed(c.phys), "core {} released before the AICPU closed its window", c.phys)
        }
        Release::Abandoned => assert!(!c.dev.closed(c.phys), "core {} abandoned after its window was closed", c.phys),
    }
    c.dev.mark_left(c.phys);
    r
}

/// Whether the run latched RELEASE_TIMEOUT for `worker` (checked: any latched fault must be
/// that one).
fn escalated(dev: &Device, map: &RunMap, worker: u32) -> bool {
    if dev.peek(map.desc.offset(offsets::FATAL_CLAIMED)) == 0 {
        return false;
    }
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CODE)), 206, "only RELEASE_TIMEOUT may be latched here");
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_SITE)), 11, "site Gate");
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CORE)), u64::from(worker), "the waiting core is named");
    true
}

/// What [`retire_model`] observed.
struct RetireRun {
    retired: Retired,
    exited: Vec<bool>,
    released: Vec<Release>,
    dev: Arc<Device>,
    map: RunMap,
}

/// One AICPU retires the cores `group` (`(worker, physical id)` pairs, all windows open and
/// idle) with the real `retire_group`; a core thread runs [`core_exit`] for each physical id
/// in `alive` (the others never acknowledge EXIT). The AICPU is spawned first or last; the
/// registers are ordered as `reg_order`.
fn retire_model(
    group: &'static [(u32, u32)],
    alive: &'static [u32],
    budgets: Budgets,
    aicpu_first: bool,
    reg_order: RegOrder,
) -> RetireRun {
    retire_model_from(group, alive, budgets, aicpu_first, reg_order, 0)
}

/// [`retire_model`] with every gate of the group starting at `gate` (0: a fresh slot; an
/// earlier epoch: what the previous run's release left).
fn retire_model_from(
    group: &'static [(u32, u32)],
    alive: &'static [u32],
    budgets: Budgets,
    aicpu_first: bool,
    reg_order: RegOrder,
    gate: u64,
) -> RetireRun {
    let plan = GmPlan::new(2, 0);
    let map = plan.run_map(2, CORES, EPOCH, budgets);
    let mut gm = initial_gm(&plan, &map.cfg);
    for &(w, _) in group {
        gm[((map.gate(w).0 - loom_hal::GM_BASE) / 8) as usize] = gate;
    }
    let dev = Device::new(&gm, CORES as usize, regs::DMB_IDLE, regs::COND_IDLE, reg_order);
    let mut jobs = vec![{
        let dev = dev.clone();
        job(move || {
            let mut exited = vec![false; group.len()];
            let r = retire_group(&LoomAicpu { dev }, &map, group, &mut exited);
            (r, exited)
        })
    }];
    for &phys in alive {
        let worker = group.iter().find(|&&(_, p)| p == phys).expect("alive core not in the group").0;
        let dev = dev.clone();
        jobs.push(job(move || core_exit(&LoomCore { dev, phys }, &map, worker)));
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    if !aicpu_first {
        order.rotate_left(1);
    }
    let mut r = run_jobs(&order, jobs);
    let (retired, exited) = r.take::<(Retired, Vec<bool>)>(0);
    let released = (1..=alive.len()).map(|i| r.take::<Release>(i)).collect();
    RetireRun { retired, exited, released, dev, map }
}

/// Budgets of the teardown models: the AICPU's EXIT budget and the core's gate budget expire
/// after a few clock reads, so both the acknowledged and the silent path are explored.
const SHORT: Budgets = Budgets { watchdog: u64::MAX / 4, exit: 3, core_wait: 4 };

/// Teardown gate, one core: the real `retire_group` (EXIT, quiesce with a deadline, close +
/// read-back, `rmb`, RELEASE) against a core running `exec.rs`'s exit path and the real
/// `wait_release`; both spawn orders, and registers ordered both as the HAL promises and as
/// the simulator implements them. The device clock advances on every read, so either
/// deadline can expire. Invariant: the core returns released only after the AICPU's
/// `close_window` for it completed; after it returned (released or abandoned) the AICPU never
/// touches its registers; an acknowledged core is closed exactly once and its gate holds the
/// epoch; a core reported silent is neither closed nor released — its gate holds the cancel
/// value (abandoned) — and returns abandoned, never released. A fault, if any, is the core's
/// RELEASE_TIMEOUT. Reached: "released" and "silent".
#[test]
fn retire_releases_only_after_close() {
    let outcomes = Tally::new(2);
    for (aicpu_first, reg_order) in [
        (true, RegOrder::HalContract),
        (false, RegOrder::HalContract),
        (true, RegOrder::Simulator),
        (false, RegOrder::Simulator),
    ] {
        let tally = outcomes.clone();
        check("retire_releases_only_after_close", None, move || {
            let run = retire_model(&[(0, 1)], &[1], SHORT, aicpu_first, reg_order);
            let RetireRun { retired, exited, released, dev, map } = run;
            let _ = escalated(&dev, &map, 0);
            if exited[0] {
                assert_eq!(retired, Retired { released: 1, silent: None });
                assert_eq!(dev.closes(1), 1, "an acknowledged core is closed exactly once");
                assert_eq!(dev.peek(map.gate(0)), EPOCH);
                assert_eq!(released[0], Release::Released);
                tally.hit(0);
            } else {
                assert_eq!(retired, Retired { released: 0, silent: Some(0) });
                assert_eq!(dev.closes(1), 0, "a silent core's window was closed");
                assert_eq!(dev.peek(map.gate(0)), lifecycle::cancel_value(EPOCH), "a silent core was released");
                assert_eq!(released[0], Release::Abandoned, "a core the AICPU did not release left its gate released");
                tally.hit(1);
            }
        });
    }
    outcomes.assert_all_reached(&["released", "silent"]);
}

/// The gate of a reused slot: it starts with the RELEASE the previous run left (`EPOCH - 1`),
/// the resident and the legacy executor alike (both exit through this gate). Both spawn orders,
/// budgets that never expire. Invariant: this run's core never takes the old release — it
/// returns released only after this run's AICPU closed its window (`core_exit` checks), its
/// gate ends with this run's epoch, and it is closed once.
fn stale_release_model(aicpu_first: bool) {
    let run = retire_model_from(&[(0, 1)], &[1], Budgets::NEVER, aicpu_first, RegOrder::HalContract, EPOCH - 1);
    let RetireRun { retired, released, dev, map, .. } = run;
    assert_eq!(retired, Retired { released: 1, silent: None });
    assert_eq!(released[0], Release::Released);
    assert_eq!(dev.peek(map.gate(0)), EPOCH);
    assert_eq!(dev.closes(1), 1);
}

/// See [`stale_release_model`].
#[test]
fn retire_ignores_the_release_a_previous_run_left() {
    for aicpu_first in [true, false] {
        check("retire_ignores_the_release_a_previous_run_left", None, move || stale_release_model(aicpu_first));
    }
}

/// Reproducer: a gate that takes any release (`breakage::GATE_ANY_EPOCH`), in
/// [`stale_release_model`]. Loom must find the core leaving on the previous run's release,
/// before this run's AICPU closed its window. The switch is process-wide and no other model of
/// this file takes a lock against it: run this one alone (`.ci/run` does, `--test-threads=1`).
#[cfg(feature = "breakage")]
#[test]
fn reproducer_gate_takes_a_previous_runs_release() {
    crate::loom_support::harness::expect_found(
        "reproducer_gate_takes_a_previous_runs_release",
        None,
        crate::breakage::GATE_ANY_EPOCH,
        &["released before the AICPU closed its window"],
        || stale_release_model(false),
    );
}

/// Teardown gate, two cores retired as a group with one shared deadline: worker 1 (phys 0)
/// never acknowledges EXIT; worker 0 (phys 1) runs the exit path; both spawn orders.
/// Invariant: `retire_group` always reports worker 1 as silent (it is first in the group),
/// never closes or releases it (its gate holds the cancel value: abandoned); the other core is
/// closed and released iff it acknowledged in time, and only after its close, else abandoned;
/// no AICPU register access after a core left its gate. Reached: the other core released, and
/// not.
#[test]
fn retire_never_releases_a_silent_core() {
    let outcomes = Tally::new(2);
    for aicpu_first in [true, false] {
        let tally = outcomes.clone();
        check("retire_never_releases_a_silent_core", None, move || {
            let run = retire_model(&[(1, 0), (0, 1)], &[1], SHORT, aicpu_first, RegOrder::HalContract);
            let RetireRun { retired, exited, released, dev, map } = run;
            let _ = escalated(&dev, &map, 0);
            assert_eq!(retired.silent, Some(1), "the silent core must be reported");
            assert!(!exited[0]);
            assert_eq!(dev.closes(0), 0, "the silent core's window was closed");
            assert_eq!(dev.peek(map.gate(1)), lifecycle::cancel_value(EPOCH), "the silent core was released");
            assert_eq!(retired.released, u32::from(exited[1]));
            assert_eq!(dev.peek(map.gate(0)), if exited[1] { EPOCH } else { lifecycle::cancel_value(EPOCH) });
            assert_eq!(dev.closes(1), u32::from(exited[1]));
            assert_eq!(released[0] == Release::Released, exited[1]);
            tally.hit(usize::from(exited[1]));
        });
    }
    outcomes.assert_all_reached(&["other core not acknowledged in time", "other core released"]);
}

/// Teardown gate with a core budget (2 ticks) far shorter than the AICPU's EXIT budget (8): the
/// core's gate wait runs out while the AICPU still owns it. (Before the gate wait had an
/// escalation instead of an exit, this model was an ignored reproducer,
/// `retire_gate_wait_timeout_lets_the_core_leave_early`: the core returned on its budget and
/// the AICPU then read its COND, closed its window and stored its gate — after it left.)
/// Invariant: the core never leaves while the AICPU may still own it — the loom device fails
/// the model on any AICPU register access after the core left; a core whose budget ran out
/// latched RELEASE_TIMEOUT at site `Gate` naming itself and went on waiting; it leaves only on
/// the AICPU's release (after the close) or abandonment (never closed); the gate and the
/// retirement report agree. Both spawn orders. Reached: released within the core's budget, and
/// released after the core escalated (the abandoned path is reached by
/// `retire_releases_only_after_close`).
#[test]
fn retire_gate_wait_never_leaves_while_the_aicpu_owns_the_core() {
    let outcomes = Tally::new(2);
    for aicpu_first in [true, false] {
        let tally = outcomes.clone();
        check("retire_gate_wait_never_leaves_while_the_aicpu_owns_the_core", None, move || {
            let budgets = Budgets { watchdog: u64::MAX / 4, exit: 8, core_wait: 2 };
            let run = retire_model(&[(0, 1)], &[1], budgets, aicpu_first, RegOrder::HalContract);
            let RetireRun { retired, exited, released, dev, map } = run;
            let escalated = escalated(&dev, &map, 0);
            if exited[0] {
                assert_eq!(retired, Retired { released: 1, silent: None });
                assert_eq!(released[0], Release::Released);
                assert_eq!(dev.peek(map.gate(0)), EPOCH);
                tally.hit(usize::from(escalated));
            } else {
                // Not reached with these budgets (loom serves a yielding AICPU's core first);
                // `retire_releases_only_after_close` reaches it.
                assert_eq!(retired, Retired { released: 0, silent: Some(0) });
                assert_eq!(released[0], Release::Abandoned);
                assert_eq!(dev.peek(map.gate(0)), lifecycle::cancel_value(EPOCH));
            }
        });
    }
    outcomes.assert_all_reached(&["released within the core's budget", "escalated (RELEASE_TIMEOUT), then released"]);
}
