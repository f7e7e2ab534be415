//! The resident executor: the cores schedule the host-built graph themselves.
//!
//! The host writes the scheduler state ([`ResidentLayout`](crate::layout::ResidentLayout)) before the launch: per task a
//! fan-in count, a count of subtasks left and a home cluster; per cluster three ready inboxes
//! (AIC, AIV and dummy, gang), a dispatch slot per lane and a doorbell; the inboxes hold the
//! blocks of the tasks that wait for nothing. Once its window is open and the AICPU has said
//! the image is valid (this run's [`resident_ready_word`](crate::layout::resident_ready_word)),
//! a core loops:
//!
//! 1. **its slot**: when its lane's publication generation moved past the one it completed,
//!    it reads the entry, runs that subtask (as the legacy executor runs one: `CoreCtx`),
//!    writes back the outputs, counts the subtask off its task ([`finish`](state::finish)), and — when it
//!    was the task's last — releases the consumers and counts the task `completed`; then it
//!    posts the generation as its lane's completion and goes straight to step 2 (ringing its
//!    doorbell instead when another core holds the token);
//! 2. **dispatch**: otherwise it tries to take its cluster's token and, holding it, fills the
//!    cluster's free lanes ([`dispatch`](state::dispatch)): a gang (MIX task) waits in `held` until every lane
//!    it needs is free and is then published to all of them at once; a free lane takes the
//!    next entry of its class from its own cluster's inbox, else from another cluster's (in
//!    cluster order from its own; only the inboxes the class's stocked mask marks are looked
//!    at, [`take_any`](state::take_any)); dummies are completed on the spot;
//! 3. **sleep**: with nothing to do it waits on its cluster's doorbell, whose value it read
//!    *before* looking for work, so a ring in between is never lost.
//!
//! A lane the graph gives no work ([`lane_has_work`](state::lane_has_work): no task of its
//! class, no gang) sits the run out: its core never takes the token and sleeps on its own
//! slot's publication word instead of the doorbell, so the rings for the other lanes' work do
//! not wake it.
//!
//! Releasing a task pushes each of its blocks to the inbox of its home cluster (block `b` one
//! cluster after block `b - 1`, [`push_ready`](state::push_ready)); after the releasing core's own dispatch pass
//! (which may take them itself, keeping a chain on one cluster) it rings each of those
//! clusters whose inbox still holds them, and one idle cluster (the idle mask: clusters whose
//! last pass left a lane that may be given work with nothing to do), which steals
//! ([`ring_pushed`](state::ring_pushed)); none when the home cluster is marked idle itself and
//! its mark says a lane of it can run the task ([`idle_serves`](state::idle_serves)).
//! Progress rests on the home ring alone: the idle bit is set at the end of a pass, so a
//! release between that pass's look and the bit misses the steal (found by loom), and the
//! block then waits for its home cluster or any later pass.
//!
//! Every word of the state is touched only through `GmAtomic`, so no line of it is cached on
//! either tier; the image (task records, fan-out lists, funcs, argument records) is read
//! through the cache after invalidating it, as host-written data always is. Each word has one
//! writer or is only changed by atomic read-modify-writes: a slot's entry and publication are
//! written by the token holder, its completion only by the lane's core. A core leaves on
//! EXIT, as on the legacy executor, and stops taking work once a fault is latched.
//!
//! The AICPU threads do not dispatch: after the handshake, [`supervise`](supervisor::supervise) waits for the run to
//! complete, asleep until an event (sent by the core whose completion is the graph's last, and
//! by every core that latches a fault) or the end of a slice, with a no-progress watchdog on
//! `completed` that names a stuck core and its task from `running`; then the threads retire their cores through the teardown gates as the
//! legacy executor's do.

pub mod capture;
pub mod core;
pub mod state;
mod subtask;
pub mod supervisor;

/// Loom models of the resident scheduler state (`state`) (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;

use pto_hal::AicpuAgent;

use crate::exec::aicpu::cores::ThreadCores;
use crate::exec::aicpu::source::Base;

/// The resident executor's AICPU half for one thread whose cores are handshaken: serve the
/// args dump's boundary captures of its clusters (with the dump on) and supervise the run to
/// its end ([`supervisor::supervise`]), recording the completed count in `base`. `args` is
/// each task's argument record address; thread `thread` of `threads`.
pub fn run<'s, A: AicpuAgent>(
    a: &'s A,
    base: &'s Base,
    args: &'s [u64],
    cores: &mut ThreadCores<'s, A>,
    thread: u32,
    threads: u32,
) {
    let started = a.now_ticks();
    let map = &base.map;
    // With the dump on, this thread's lane serves its clusters' boundary captures.
    let mut service = crate::layout::CaptureLayout::of(&map.cfg).and_then(|l| {
        let (lane, level) = cores.take_dump()?.into_parts();
        Some(capture::service::Service::new(a, l, lane, level, map.cfg.epoch, args, thread, threads))
    });
    let done = supervisor::supervise(a, map, &base.stop, service.as_mut());
    if let Some(s) = service {
        // The producer stops here, before any core is retired: nothing a capture still
        // references is released before.
        s.finish(done >= map.cfg.task_count as u64);
    }
    if let Some(t) = &mut cores.trace {
        t.phase(a, crate::layout::trace_kind::SUPERVISE, started, a.now_ticks());
    }
    base.record_completed(done);
    if thread == 0 {
        supervisor::count_executed(a, map);
    }
}
