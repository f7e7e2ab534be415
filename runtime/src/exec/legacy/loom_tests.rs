//! Loom models of the scheduler ↔ core register hand-off of the legacy executor, over the loom
//! device of `crate::loom_support::hal`, whose registers are ordered exactly as
//! `pto_hal::Registers` promises (no barrier at all), so the runtime's own `wmb` / `rmb` are what
//! the models check. The AICPU side is `exec/legacy/sched/`'s per-core logic with the real
//! [`decide`] and [`regs::next_id`]; the core side is either a transcription of
//! `exec/legacy/core.rs`'s loop or the real [`aicore_entry`] (end to end, with the real
//! handshake, window, dispatch, kernel output, FIN, retirement and gate).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std --lib exec::legacy::loom_tests
//! ```
//!
//! Every model is one `#[test]` whose doc comment states the invariant it checks; each prints
//! its execution count and wall time. What loom does not cover: see `crate::loom_support`.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, Ordering};
use pto_hal::{
    AicoreAgent, AicoreCache, AicoreLaunch, Barriers, Clock, CoreRegisters, CoreType, Events, GmAddr, GmMemory,
    GmMemoryExt, Reg, Registers,
};
use zerocopy::IntoBytes;

use crate::exec::entry::aicore_entry;
use crate::exec::legacy::cond::decide;
use crate::layout::{ARGS_HEAD, ArgsHeader, DispatchPayload, Handshake, offsets, regs};
use crate::lifecycle::{self, Retired, RunMap, retire_group};
use crate::loom_support::hal::{self as loom_hal, Budgets, Device, GmPlan, LoomAicpu, LoomCore, RegOrder, initial_gm};
use crate::loom_support::harness::{Tally, check};
use crate::loom_support::jobs::{Job, ORDERS_2, job, run_jobs};
use crate::loom_support::prelude::*;

// ---------------------------------------------------------------------------------------------
// 3. Scheduler ↔ core register hand-off
// ---------------------------------------------------------------------------------------------

/// The physical id of the modelled core (not 0, so a physical/worker mix-up would show).
const PHYS: u32 = 1;
/// The worker index of the modelled core.
const WORKER: u32 = 0;
/// Physical cores of the loom device.
const CORES: u32 = 2;
/// The run's epoch (non-zero: gate words start at 0).
const EPOCH: u64 = 7;
/// Graph task ids dispatched, in order (arbitrary, distinct from the dispatch ids).
const TASKS: [u32; 3] = [40, 41, 42];

/// One subtask in a core slot: graph task id and per-core dispatch id.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Sub {
    task: u32,
    reg: u32,
}

/// One task to dispatch: graph task id and the GM address of its argument record (0: none).
#[derive(Copy, Clone, Debug)]
struct Work {
    task: u32,
    args: u64,
}

/// The AICPU side for one core, transcribed from `sched.rs`: `Scheduler::poll_completions`
/// (COND read, skip if unchanged, `rmb`, the real [`decide`], slot transitions) and
/// `Scheduler::dispatch` / `assign` (the real [`regs::next_id`], payload into buffer `id & 1`,
/// then `wmb` and DMB := id; a new dispatch only into an idle core, or into the pending slot of
/// a running one the core has acknowledged). Dispatches `work` in order and returns once every
/// task completed, with the tasks in completion order. `on_complete` runs for each completion,
/// right where the scheduler would release the task's consumers.
fn aicpu_dispatch(a: &LoomAicpu, map: &RunMap, work: &[Work], mut on_complete: impl FnMut(Sub)) -> Vec<u32> {
    let mut running: Option<Sub> = None;
    let mut pending: Option<Sub> = None;
    let mut acked = false;
    let mut seq = 0u32;
    let mut last_cond = 0u32;
    let mut next = 0;
    let mut completed = Vec::new();
    while completed.len() < work.len() {
        // Scheduler::poll_completions, for this one core.
        if running.is_some() {
            let v = a.read_reg(PHYS, Reg::Cond);
            if v != last_cond {
                a.rmb();
                last_cond = v;
                let d = decide(v, running.map(|r| r.reg), pending.map(|p| p.reg));
                let mut finished: [Option<Sub>; 2] = [None, None];
                if d.running_done {
                    finished[0] = running.take();
                }
                if d.pending_done {
                    finished[1] = pending.take();
                }
                if d.promote {
                    running = pending.take();
                    acked = d.running_acked;
                } else if d.running_acked {
                    acked = true;
                }
                if running.is_none() {
                    acked = false;
                }
                for sub in finished.into_iter().flatten() {
                    assert!(!completed.contains(&sub.task), "task {} completed twice", sub.task);
                    on_complete(sub);
                    completed.push(sub.task);
                }
            }
        }
        // Scheduler::dispatch / assign, for this one core.
        let idle = running.is_none();
        let can_pend = running.is_some() && acked && pending.is_none();
        if next < work.len() && (idle || can_pend) {
            seq = regs::next_id(seq);
            let reg = seq;
            let w = work[next];
            let p = DispatchPayload {
                bin: loom_hal::KERNEL_BIN,
                args: w.args,
                task_id: w.task,
                block_idx: 0,
                block_num: 1,
                lane: 0,
                reg_task_id: reg,
                reserved0: 0,
                reserved: [0; 3],
            };
            a.write(map.payload(WORKER, reg & 1), p.as_bytes());
            let sub = Sub { task: w.task, reg };
            if idle {
                running = Some(sub);
                acked = false;
            } else {
                pending = Some(sub);
            }
            a.wmb();
            a.write_reg(PHYS, Reg::Dmb, reg);
            next += 1;
        } else if completed.len() < work.len() {
            a.wait_for_event(u64::MAX);
        }
    }
    completed
}

/// The AICore side, transcribed from `exec.rs` (`aicore_entry`'s loop and `run_one`): read
/// DMB; EXIT → store barrier, COND := EXITED, leave; unchanged / IDLE / 0 → wait; otherwise
/// `rmb`, read the payload of buffer `id & 1`, COND := ACK(id), "run" (record the payload's
/// task id as what dispatch `id` ran), store barrier, COND := FIN(id). Returns `(dispatch id,
/// payload task id, payload dispatch id)` for every dispatch it ran.
fn core_loop(c: &LoomCore, map: &RunMap, ran: &[AtomicU32]) -> Vec<(u32, u32, u32)> {
    let mut runs = Vec::new();
    let mut last = regs::DMB_IDLE;
    loop {
        let v = c.read_dmb();
        if v == regs::DMB_EXIT {
            c.store_barrier();
            c.write_cond(regs::COND_EXITED);
            break;
        }
        if v == last || v == regs::DMB_IDLE || v == 0 {
            c.wait_for_event(u64::MAX);
            continue;
        }
        c.rmb();
        last = v;
        let at = map.payload(WORKER, v & 1);
        c.observe_line(at);
        let mut p = DispatchPayload::default();
        c.read(at, p.as_mut_bytes());
        c.write_cond(regs::ack(v));
        assert!(c.resolve_kernel(p.bin).is_some(), "payload of dispatch {v} names no kernel (stale buffer)");
        ran[v as usize].store(p.task_id, Ordering::Relaxed);
        runs.push((v, p.task_id, p.reg_task_id));
        c.store_barrier();
        c.write_cond(regs::fin(v));
    }
    runs
}

/// One AICPU thread dispatches `tasks` back to back to one core running [`core_loop`], then
/// sends EXIT and waits for EXITED; checks the whole run.
fn dispatch_model(tasks: &'static [u32], order: &'static [usize]) {
    let plan = GmPlan::new(1, 0);
    let map = plan.run_map(1, CORES, EPOCH, Budgets::NEVER);
    let dev = Device::new(
        &initial_gm(&plan, &map.cfg),
        CORES as usize,
        regs::DMB_IDLE,
        regs::COND_IDLE,
        RegOrder::HalContract,
    );
    // ran[id] = task id the core found in dispatch `id`'s payload (0 = not run yet).
    let ran: Arc<Vec<AtomicU32>> = Arc::new((0..=tasks.len()).map(|_| AtomicU32::new(0)).collect());
    let core = {
        let (dev, ran) = (dev.clone(), ran.clone());
        job(move || core_loop(&LoomCore { dev, phys: PHYS }, &map, &ran))
    };
    let aicpu = {
        let (dev, ran) = (dev.clone(), ran.clone());
        job(move || {
            let a = LoomAicpu { dev };
            let work: Vec<Work> = tasks.iter().map(|&task| Work { task, args: 0 }).collect();
            let completed = aicpu_dispatch(&a, &map, &work, |sub| {
                // The core's FIN for this dispatch (or a later COND value implying it) was
                // observed: the core must have run it, with this task's payload.
                let saw = ran[sub.reg as usize].load(Ordering::Relaxed);
                assert_eq!(saw, sub.task, "task {} completed before the core ran dispatch {}", sub.task, sub.reg);
            });
            a.wmb();
            a.write_reg(PHYS, Reg::Dmb, regs::DMB_EXIT);
            loom_hal::spin_until(|| a.read_reg(PHYS, Reg::Cond) == regs::COND_EXITED);
            completed
        })
    };
    let mut r = run_jobs(order, vec![core, aicpu]);
    let runs = r.take::<Vec<(u32, u32, u32)>>(0);
    // Dispatch ids are 1, 2, 3, …: the core ran each exactly once, in order, none skipped,
    // each with the payload written for that id.
    let want: Vec<(u32, u32, u32)> = tasks.iter().enumerate().map(|(i, &t)| (i as u32 + 1, t, i as u32 + 1)).collect();
    assert_eq!(runs, want, "core ran a dispatch twice, skipped one, or read a stale/other-buffer payload");
    assert_eq!(r.take::<Vec<u32>>(1), tasks, "each task completes exactly once, in dispatch order");
}

/// Register hand-off, two dispatches to one core (dispatch ids 1 and 2, payload buffers 1 and
/// 0), both spawn orders. The second goes into the pending slot once COND shows ACK(1), or into
/// the idle core once FIN(1) was seen — whichever the interleaving makes `sched.rs` choose.
/// Invariant: the core runs dispatch 1 then 2, each exactly once, each with the payload written
/// for that id (never a stale or other-buffer payload), none skipped; the AICPU marks each task
/// complete exactly once and only after the core ran it (its FIN, or a later COND value
/// implying it, was observed); EXIT is acknowledged. Preemption bound 4 (unbounded, the spin
/// loops make it run for many minutes).
#[test]
fn dispatch_two_back_to_back() {
    for order in ORDERS_2 {
        check("dispatch_two_back_to_back", Some(4), move || dispatch_model(&TASKS[..2], order));
    }
}

/// Register hand-off, three dispatches to one core: dispatch 3 reuses payload buffer 1, which
/// dispatch 1 used. Same invariant as [`dispatch_two_back_to_back`]; additionally buffer 1 is
/// rewritten only after the core has read it (else the core would run task 42 as dispatch 1,
/// or a torn payload). Preemption bound 3, one spawn order, to stay under half a minute.
#[test]
fn dispatch_three_reuses_a_payload_buffer() {
    check("dispatch_three_reuses_a_payload_buffer", Some(3), || dispatch_model(&TASKS, &[0, 1]));
}

/// GM address of task `k`'s argument record in `plan`'s free space, and of its output word.
fn args_of(plan: &GmPlan, k: usize) -> (u64, u64) {
    let args = plan.extra + 64 * k as u64;
    // The header, one scalar, then the output word (all inside the task's 64 bytes).
    const _: () = assert!(ARGS_HEAD + 16 <= 64);
    (args, args + ARGS_HEAD + 8)
}

/// Initial GM for the end-to-end models: the descriptor, and per task an argument record with
/// no tensor and one scalar naming the task's output word (zero until its kernel ran). With
/// `previous_run`, the core's handshake line still holds its report of the previous run (epoch
/// `EPOCH - 1`, same worker, type and physical id), as it does in steady state on a device
/// whose worker → core mapping does not change; otherwise the line is zero, as on a fresh slot.
fn e2e_gm(plan: &GmPlan, map: &RunMap, tasks: usize, previous_run: bool) -> Vec<u64> {
    let mut gm = initial_gm(plan, &map.cfg);
    if previous_run {
        let old = Handshake {
            aicore_done: WORKER + 1,
            core_type: CoreType::Aic as u32,
            physical_core_id: PHYS,
            report_epoch: EPOCH - 1,
            ..Handshake::default()
        };
        let i = ((map.handshake(WORKER).0 - loom_hal::GM_BASE) / 8) as usize;
        for (k, chunk) in old.as_bytes().chunks_exact(8).enumerate() {
            gm[i + k] = u64::from_le_bytes(chunk.try_into().unwrap());
        }
    }
    for k in 0..tasks {
        let (args, out) = args_of(plan, k);
        let i = ((args - loom_hal::GM_BASE) / 8) as usize;
        let h = ArgsHeader { tensors: 0, scalars: 1, ..ArgsHeader::default() };
        for (w, chunk) in h.as_bytes().chunks_exact(8).enumerate() {
            gm[i + w] = u64::from_le_bytes(chunk.try_into().unwrap());
        }
        gm[i + (ARGS_HEAD / 8) as usize] = out;
    }
    gm
}

/// The real AICore program, as the stream would launch it on the modelled core.
fn real_core(dev: Arc<Device>, plan: &GmPlan) -> Job {
    let launch =
        AicoreLaunch { block_idx: WORKER, core_type: CoreType::Aic, physical_core_id: PHYS, args: GmAddr(plan.desc) };
    job(move || aicore_entry(&LoomCore { dev, phys: PHYS }, launch))
}

/// AICPU: `Scheduler::handshake` for one core — poll the real report, validate it, open the
/// window — until `deadline`; past it, cancel the window through the gate (as `handshake`
/// does for cores it never opened). Returns the physical id, or `None` when cancelled.
fn aicpu_handshake(a: &LoomAicpu, map: &RunMap, deadline: u64) -> Option<u32> {
    loop {
        if let Some(hs) = lifecycle::poll_report(a, map, WORKER) {
            lifecycle::check_report(&hs, WORKER, &map.cfg).expect("a valid report was rejected");
            lifecycle::open_window(a, hs.physical_core_id);
            return Some(hs.physical_core_id);
        }
        if a.now_ticks() >= deadline {
            lifecycle::cancel_window(a, map, WORKER);
            return None;
        }
        a.wait_for_event(deadline);
    }
}

/// End-to-end legacy route on one core, `n` tasks, spawn order `order`: the real
/// `aicore_entry` on the core; on the AICPU the real handshake pieces, the `sched.rs` dispatch
/// transcription and the real `retire_group`. No budget expires.
fn end_to_end_model(n: usize, order: &'static [usize], previous_run: bool) {
    let plan = GmPlan::new(1, 64 * n as u64);
    let map = plan.run_map(1, CORES, EPOCH, Budgets::NEVER);
    let dev = Device::new(&e2e_gm(&plan, &map, n, previous_run), CORES as usize, 0, 0, RegOrder::HalContract);
    let aicpu = {
        let dev = dev.clone();
        job(move || {
            let a = LoomAicpu { dev };
            assert_eq!(aicpu_handshake(&a, &map, u64::MAX), Some(PHYS));
            let work: Vec<Work> = (0..n).map(|k| Work { task: TASKS[k], args: args_of(&plan, k).0 }).collect();
            let completed = aicpu_dispatch(&a, &map, &work, |sub| {
                // The kernel's output must be visible once its FIN (or a later COND) was seen.
                let k = TASKS.iter().position(|&t| t == sub.task).unwrap();
                let out = a.read_u64(GmAddr(args_of(&plan, k).1));
                assert_eq!(out, u64::from(sub.task), "task {} completed before its output was visible", sub.task);
            });
            let mut exited = [false];
            let r = retire_group(&a, &map, &[(WORKER, PHYS)], &mut exited);
            (completed, r)
        })
    };
    let mut r = run_jobs(order, vec![real_core(dev.clone(), &plan), aicpu]);
    assert_eq!(r.take::<i32>(0), 0, "the core program failed");
    let (completed, retired) = r.take::<(Vec<u32>, Retired)>(1);
    assert_eq!(completed, &TASKS[..n], "each task completes exactly once, in dispatch order");
    assert_eq!(retired, Retired { released: 1, silent: None });
    assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CLAIMED)), 0, "the core latched a fault (stale payload?)");
    assert_eq!(dev.peek(map.gate(WORKER)), EPOCH);
    assert_eq!(dev.closes(PHYS), 1);
}

/// End to end on one core with the real AICore program (`exec.rs` `aicore_entry`): report,
/// window, two dispatches, each running the kernel (which stores its task id to an output word
/// named by its argument record), FIN, EXIT, EXITED, gate — against the AICPU's real
/// `poll_report` / `check_report` / `open_window`, the `sched.rs` dispatch transcription and
/// the real `retire_group`. Invariant: the report is accepted and the
/// window opened; the core runs each dispatch with its own payload (the executor's own
/// `reg_task_id` check never latches a fault); the AICPU completes each task exactly once and
/// only when the kernel's output is visible; the core is closed once, released with the
/// epoch, and its program returns 0. The handshake line starts with the previous run's report
/// (see [`handshake_first_run_can_accept_a_stale_physical_id`] for why a zero line fails).
/// Preemption bound 1 and one spawn order: every relaxed load of the report line may return
/// either of two stores, which multiplies the executions (bound 2 takes minutes).
#[test]
fn legacy_executor_end_to_end() {
    check("legacy_executor_end_to_end", Some(1), || end_to_end_model(2, &[0, 1], true));
}

/// A slot's first run: the handshake line starts zero. Invariant: the AICPU never accepts the
/// new epoch next to a stale physical id or core type — the core publishes its fields, then
/// the marker (`report_epoch`) alone (`lifecycle::report`), and the AICPU reads the marker,
/// issues `rmb`, then reads the fields (`lifecycle::poll_report`), as house rule 2 requires
/// (`docs/architecture.md` section 9).
/// (Before that order was kept, this model failed with no preemption at all: the AICPU opened
/// and drove physical core 0 instead of core 1.)
#[test]
fn handshake_first_run_can_accept_a_stale_physical_id() {
    check("handshake_first_run_can_accept_a_stale_physical_id", Some(0), || end_to_end_model(1, &[0, 1], false));
}

/// Handshake against the pre-window cancel: the real `aicore_entry` (with a budget that never
/// expires) against an AICPU whose handshake watchdog does (3 ticks of the device counter),
/// both spawn orders. The AICPU either accepts the report, opens the window and retires the
/// core (no task), or gives up and cancels the window through the gate. Invariant: the core
/// always leaves — loom would report a core spinning forever — and its program returns 0 in
/// both cases; a cancelled core never writes COND and is never closed or released; an opened
/// one is closed once and released with the epoch. Reached: both outcomes. Preemption bound 1
/// (bound 2: half a minute per spawn order).
#[test]
fn handshake_window_or_cancel() {
    let outcomes = Tally::new(2);
    for order in ORDERS_2 {
        let tally = outcomes.clone();
        check("handshake_window_or_cancel", Some(1), move || {
            let plan = GmPlan::new(1, 0);
            let map = plan.run_map(1, CORES, EPOCH, Budgets { watchdog: 3, ..Budgets::NEVER });
            let dev = Device::new(&e2e_gm(&plan, &map, 0, true), CORES as usize, 0, 0, RegOrder::HalContract);
            let aicpu = {
                let dev = dev.clone();
                job(move || {
                    let a = LoomAicpu { dev };
                    let deadline = a.now_ticks() + map.cfg.watchdog_ticks;
                    let phys = aicpu_handshake(&a, &map, deadline)?;
                    let mut exited = [false];
                    Some(retire_group(&a, &map, &[(WORKER, phys)], &mut exited))
                })
            };
            let mut r = run_jobs(order, vec![real_core(dev.clone(), &plan), aicpu]);
            assert_eq!(r.take::<i32>(0), 0, "the core program failed");
            match r.take::<Option<Retired>>(1) {
                Some(retired) => {
                    assert_eq!(retired, Retired { released: 1, silent: None });
                    assert_eq!(dev.peek(map.gate(WORKER)), EPOCH);
                    assert_eq!(dev.closes(PHYS), 1);
                    tally.hit(0);
                }
                None => {
                    assert_eq!(dev.peek(map.gate(WORKER)), lifecycle::cancel_value(EPOCH));
                    assert_eq!(dev.cond(PHYS), 0, "a cancelled core wrote COND");
                    assert_eq!(dev.closes(PHYS), 0);
                    tally.hit(1);
                }
            }
            assert_eq!(dev.peek(map.desc.offset(offsets::FATAL_CLAIMED)), 0, "a fault was latched");
        });
    }
    outcomes.assert_all_reached(&["window opened", "window cancelled"]);
}
