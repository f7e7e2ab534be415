//! Running: taking a turn on the device, reserving a pipeline slot, launching, and the
//! completion fence.
//!
//! Several host threads may share one device. A run waits its turn for a pipeline slot in
//! arrival order (bounded by [`Timeouts::turn_us`](super::Timeouts::turn_us));
//! [`Device::try_prepare`] is the variant that answers [`Error::Busy`] instead of waiting.
//! A prepared run that is never launched (forgotten, or leaked with `mem::forget`) holds its
//! slot for at most [`Timeouts::lease_us`](super::Timeouts::lease_us) while others wait; then
//! a waiting run reclaims the slot and the stale run's `launch` fails with [`Error::Expired`].
//! A prepared run has submitted nothing to the device, so reclaiming its slot is safe.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::format;
use std::string::{String, ToString};
use std::time::{Duration, Instant};

use pto_hal::{AicoreStream, AicpuStream, DeviceMemory, GmAddr, HostPlatform, Stream};
use zerocopy::IntoBytes;

use super::build::Graph;
use super::error::platform;
use super::memory::Pins;
use super::publish::Publish;
use super::slots::{PIPELINE_DEPTH, Refused};
use super::{Device, DeviceError, Error, Inner, Program, RunConfig};
use crate::codes::{DeviceFault, ErrorCode, Site};
use crate::graph::GraphError;
use crate::layout::{LaunchDesc, RUNTIME_HBG, RUNTIME_TRB};
use crate::lifecycle;
use crate::orch::{OrchArgs, RuntimeKind};

/// What a completed run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunReport {
    /// The run's epoch.
    pub epoch: u64,
    /// Tasks completed.
    pub tasks: u64,
    /// Subtasks dispatched to cores (on the resident executor: kernels the cores found in
    /// their dispatch slots and ran; dummy and skipped tasks are not counted).
    pub dispatched: u64,
    /// Cores that handshook.
    pub cores: u64,
    /// Cores released through their gates.
    pub released: u64,
    /// Host wall time from launch to the completion fence.
    pub wall: Duration,
    /// Device-side runtime: how long the orchestration function ran on the device (its
    /// submission time, overlapped with execution). `None` on the host-built graph, whose
    /// submission is the graph build ([`Graph::build_time`]).
    pub orchestration: Option<Duration>,
    /// Pipeline slot used.
    pub slot: usize,
    /// The run's swimlane trace, when [`RunConfig::trace`] was on.
    pub trace: Option<super::Trace>,
    /// What the args dump wrote, when [`RunConfig::dump`] was on.
    pub dump: Option<super::dump::DumpReport>,
    /// The executor that ran the graph: [`Executor::Legacy`](super::Executor::Legacy) or
    /// [`Executor::Resident`](super::Executor::Resident) (never `Auto`).
    pub executor: super::Executor,
    /// Why the run was on the legacy executor (`None` on the resident one).
    pub legacy_reason: Option<super::LegacyReason>,
    /// The resident route's boundary capture, when the run was resident with the dump on.
    pub capture: Option<CaptureReport>,
}

/// What the resident route's boundary capture did in one run (the counters of its control
/// region, read back after the run; `docs/args-dump.md`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureReport {
    /// Bytes of control storage the run reserved (slots, occupancies, request and
    /// acknowledgement lines).
    pub region_bytes: u64,
    /// Phases the cores requested (one per task boundary that records something).
    pub requests: u64,
    /// Rendezvous slots claimed (one per task that entered a boundary).
    pub claims: u64,
    /// Service steps that copied or committed something.
    pub steps: u64,
    /// WOULD_BLOCK answers (a full arena, no free buffer, or the lane's reservation open for
    /// another core); none of them is a dropped record.
    pub would_block: u64,
    /// Most payload bytes one service step copied.
    pub largest_step: u64,
    /// The bound on one step's payload bytes.
    pub max_step: u64,
    /// Rendezvous slots left neither FREE nor SETTLED at the end (0 after a completed run).
    pub unsettled_slots: u64,
}

#[derive(Default)]
struct Lease {
    /// Bumped whenever the slot changes hands; a prepared run remembers the one it got.
    generation: u64,
    /// Set while the slot holds a prepared, not yet launched run.
    prepared_at: Option<Instant>,
}

#[derive(Default)]
struct TurnState {
    queue: VecDeque<u64>,
    next_ticket: u64,
    leases: [Lease; PIPELINE_DEPTH],
}

/// Arrival-ordered turns on the pipeline slots, and each slot's lease.
#[derive(Default)]
pub(crate) struct Turns {
    state: Mutex<TurnState>,
    changed: Condvar,
}

impl Turns {
    fn lock(&self) -> MutexGuard<'_, TurnState> {
        self.state.lock()
    }
}

/// A reserved slot and the lease generation that proves it is still this run's.
struct Reserved {
    slot: usize,
    generation: u64,
}

impl<P: HostPlatform> Inner<P> {
    /// Reserve a slot: wait in arrival order (bounded by `turn_us`) when `wait`, else answer
    /// [`Error::Busy`].
    fn reserve_slot(&self, wait: bool) -> Result<Reserved, Error> {
        let mut st = self.turns.lock();
        let granted = |st: &mut TurnState, slot: usize| {
            let l = &mut st.leases[slot];
            l.generation += 1;
            l.prepared_at = Some(Instant::now());
            Reserved { slot, generation: l.generation }
        };
        if !wait {
            return match self.slot_table.reserve() {
                Ok(slot) => Ok(granted(&mut st, slot)),
                Err(Refused::Full) => Err(Error::Busy("both pipeline slots hold live runs")),
                Err(Refused::PredecessorNotLaunched) => {
                    Err(Error::Busy("the other prepared run must be launched first"))
                }
            };
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back(ticket);
        let budget = Duration::from_micros(self.timeouts.turn_us);
        let deadline = Instant::now() + budget;
        loop {
            self.check_usable().inspect_err(|_| {
                st.queue.retain(|&t| t != ticket);
                self.turns.changed.notify_all();
            })?;
            if st.queue.front() == Some(&ticket) {
                match self.slot_table.reserve() {
                    Ok(slot) => {
                        st.queue.pop_front();
                        let r = granted(&mut st, slot);
                        self.turns.changed.notify_all();
                        return Ok(r);
                    }
                    Err(_) => {
                        // A prepared run that outlived its lease gives its slot up.
                        let expired = (0..PIPELINE_DEPTH).find(|&s| {
                            st.leases[s]
                                .prepared_at
                                .is_some_and(|t| t.elapsed() >= Duration::from_micros(self.timeouts.lease_us))
                        });
                        if let Some(s) = expired {
                            st.leases[s].generation += 1;
                            st.leases[s].prepared_at = None;
                            self.slot_table.release(s);
                            continue;
                        }
                    }
                }
            }
            let now = Instant::now();
            if now >= deadline {
                st.queue.retain(|&t| t != ticket);
                self.turns.changed.notify_all();
                return Err(Error::NoTurn { micros: self.timeouts.turn_us });
            }
            // Slots are freed under this lock (`free_slot`), which notifies; the timeout
            // re-checks leases.
            let step = (deadline - now).min(Duration::from_millis(50));
            self.turns.changed.wait_for(&mut st, step);
        }
    }

    /// The slot `r` names is this run's still: it stops being reclaimable (it is launching).
    fn begin_launch(&self, r: &Reserved) -> bool {
        let mut st = self.turns.lock();
        let l = &mut st.leases[r.slot];
        if l.generation != r.generation {
            return false;
        }
        l.prepared_at = None;
        true
    }

    /// Give slot `r` back, unless it was already reclaimed from under a stale prepared run.
    fn free_slot(&self, r: &Reserved) {
        let mut st = self.turns.lock();
        let l = &mut st.leases[r.slot];
        if l.generation == r.generation {
            l.generation += 1;
            l.prepared_at = None;
            self.slot_table.release(r.slot);
        }
        drop(st);
        self.turns.changed.notify_all();
    }

    fn launched(&self, r: &Reserved) {
        self.slot_table.launched(r.slot);
        self.turns.changed.notify_all();
    }
}

impl<P: HostPlatform> Device<P> {
    /// Drain: wait (bounded by the stream budget) until every program submitted to the device
    /// has finished, and surface any device program failure. Run handles still report their
    /// own runs.
    pub fn drain(&self) -> Result<(), Error> {
        let budget = self.inner.timeouts.stream_us;
        let mut s = self.inner.lock_streams();
        let a = s.aicpu.synchronize(budget).map_err(|e| timeout_or("AICPU stream drain", budget, e));
        let c = s.aicore.synchronize(budget).map_err(|e| timeout_or("AICore stream drain", budget, e));
        a.and(c)
    }

    /// Prepare, launch and wait for one run of `graph` with the default configuration.
    pub fn run(&self, graph: &Graph<P>) -> Result<RunReport, Error> {
        self.run_with(graph, &RunConfig::default())
    }

    /// Prepare, launch and wait for one run of `graph`.
    pub fn run_with(&self, graph: &Graph<P>, cfg: &RunConfig) -> Result<RunReport, Error> {
        self.prepare(graph, cfg)?.launch()?.wait()
    }

    /// Run `program` on the runtime `cfg.runtime` names: build on the host and run the graph,
    /// or orchestrate on the device.
    pub fn run_program(&self, program: &Program, args: &OrchArgs, cfg: &RunConfig) -> Result<RunReport, Error> {
        self.prepare_program(program, args, cfg)?.launch()?.wait()
    }

    /// Prepare one run of `program` on the runtime `cfg.runtime` names (see
    /// [`Device::prepare`] for the pipeline rules).
    pub fn prepare_program<'d>(
        &'d self,
        program: &Program,
        args: &OrchArgs,
        cfg: &RunConfig,
    ) -> Result<PreparedRun<'d, P>, Error> {
        match cfg.runtime {
            RuntimeKind::HostBuiltGraph => {
                let graph = self.build_program(program, args)?;
                let mut prepared = self.prepare(&graph, cfg)?;
                prepared.keep = Some(graph);
                Ok(prepared)
            }
            RuntimeKind::TensormapRing => {
                let (clusters, threads) = self.check_config(cfg)?;
                if threads < 2 {
                    return Err(Error::Config(format!(
                        "the device-side runtime needs at least 2 AICPU threads (one orchestrates, the others schedule), got {threads}"
                    )));
                }
                cfg.rings.validate()?;
                let watchdog = cfg.watchdog_us.unwrap_or(self.inner.timeouts.watchdog_us);
                let wait_us = cfg.rings.wait_us.unwrap_or(watchdog);
                if wait_us == 0 || wait_us > watchdog.saturating_mul(2) {
                    return Err(Error::Config(format!(
                        "rings.wait_us = {wait_us} must be in 1..=2 x watchdog ({} us): idle cores give up after that",
                        watchdog.saturating_mul(2)
                    )));
                }
                self.check_program_args(args)?;
                let image = self.orch_image(program, args, cfg, wait_us)?;
                // The program's tensors stay allocated until the run's fence.
                let pins = self
                    .inner
                    .allocs
                    .pin(args.tensors().iter().map(|t| &t.buffer))
                    .map_err(|(i, why)| GraphError::UnusableProgramArg { arg: i as u32, why })?;
                let mut prepared = self.prepare_in_slot(clusters, threads, None, true, pins, |slot| {
                    self.publish_trb(slot, image, clusters, threads, cfg)
                })?;
                prepared.runtime = RuntimeKind::TensormapRing;
                Ok(prepared)
            }
        }
    }

    /// Prepare a run: take a pipeline slot (waiting in arrival order while other runs hold
    /// both, bounded by [`Timeouts::turn_us`](super::Timeouts::turn_us)) and publish the launch
    /// image (descriptor and graph image, synchronously, exactly once). A second run can be
    /// prepared while the first is launched: it takes the other slot.
    ///
    /// Every device tensor the graph names must still be allocated on this device; it stays
    /// allocated (even if its `DeviceTensor` is dropped) until this run's fence.
    pub fn prepare<'d>(&'d self, graph: &Graph<P>, cfg: &RunConfig) -> Result<PreparedRun<'d, P>, Error> {
        self.prepare_graph(graph, cfg, true)
    }

    /// [`Device::prepare`] without waiting: [`Error::Busy`] when no slot is free now.
    pub fn try_prepare<'d>(&'d self, graph: &Graph<P>, cfg: &RunConfig) -> Result<PreparedRun<'d, P>, Error> {
        self.prepare_graph(graph, cfg, false)
    }

    fn prepare_graph<'d>(&'d self, graph: &Graph<P>, cfg: &RunConfig, wait: bool) -> Result<PreparedRun<'d, P>, Error> {
        if !std::sync::Arc::ptr_eq(&graph.dev, &self.inner) {
            return Err(Error::Config(String::from("the graph was built for another device")));
        }
        let (clusters, threads) = self.check_config(cfg)?;
        graph.check_placeable(cfg, clusters, threads)?;
        let pins = self.inner.allocs.pin(graph.externals.iter().map(|(b, _, _)| b)).map_err(|(i, why)| {
            let (_, task, arg) = graph.externals[i];
            GraphError::UnusableTensor { task, arg, why }
        })?;
        let tasks = Some(graph.task_count);
        self.prepare_in_slot(clusters, threads, tasks, wait, pins, |slot| {
            let what =
                Publish { bytes: &graph.image, task_count: graph.task_count, runtime: RUNTIME_HBG, clusters, threads };
            self.publish(slot, what, cfg)
        })
    }

    /// Reserve a pipeline slot and `publish` the run's launch image into it (returning the
    /// epoch); the slot and the pins are given back when anything fails.
    fn prepare_in_slot<'d>(
        &'d self,
        clusters: u32,
        threads: u32,
        tasks: Option<u32>,
        wait: bool,
        pins: Pins,
        publish: impl FnOnce(usize) -> Result<u64, Error>,
    ) -> Result<PreparedRun<'d, P>, Error> {
        let reserved = match self.inner.reserve_slot(wait) {
            Ok(r) => r,
            Err(e) => {
                self.inner.release_pins(pins);
                return Err(e);
            }
        };
        match publish(reserved.slot) {
            Ok(epoch) => {
                log::debug!(
                    target: "pto::host",
                    "prepare: slot {} epoch {epoch} clusters {clusters} threads {threads} tasks {tasks:?}",
                    reserved.slot
                );
                Ok(PreparedRun {
                    dev: self,
                    slot: Some(reserved),
                    epoch,
                    clusters,
                    threads,
                    tasks,
                    runtime: RuntimeKind::HostBuiltGraph,
                    keep: None,
                    pins: Some(pins),
                })
            }
            Err(e) => {
                log::debug!(target: "pto::host", "prepare: slot {} refused: {e}", reserved.slot);
                self.inner.free_slot(&reserved);
                self.inner.release_pins(pins);
                Err(e)
            }
        }
    }

    /// Clusters and threads of a run, after checking the configuration.
    fn check_config(&self, cfg: &RunConfig) -> Result<(u32, u32), Error> {
        let inner = &*self.inner;
        inner.check_usable()?;
        let clusters = cfg.clusters.unwrap_or(inner.topo.clusters);
        if clusters == 0 || clusters > inner.topo.clusters {
            return Err(Error::Config(format!("clusters must be 1..={}, got {clusters}", inner.topo.clusters)));
        }
        let threads = cfg.aicpu_threads.unwrap_or(inner.topo.aicpu_threads);
        if threads == 0 || threads > inner.topo.aicpu_threads {
            return Err(Error::Config(format!(
                "aicpu_threads must be 1..={}, got {threads}",
                inner.topo.aicpu_threads
            )));
        }
        if let Some(w) = cfg.watchdog_us {
            super::config::core_wait_us(w, inner.timeouts.exit_us, inner.timeouts.stream_us)?;
        }
        Ok((clusters, threads))
    }
}

/// A run whose launch image is on the device, ready to launch. Dropping it frees its slot.
pub struct PreparedRun<'d, P: HostPlatform> {
    dev: &'d Device<P>,
    slot: Option<Reserved>,
    epoch: u64,
    clusters: u32,
    threads: u32,
    tasks: Option<u32>,
    runtime: RuntimeKind,
    /// A graph built for this run only (a program on the host-built-graph runtime).
    keep: Option<Graph<P>>,
    /// The device tensors this run names, held until its fence.
    pins: Option<Pins>,
}

impl<'d, P: HostPlatform> PreparedRun<'d, P> {
    /// The pipeline slot this run holds.
    pub fn slot(&self) -> usize {
        self.slot.as_ref().map_or(usize::MAX, |r| r.slot)
    }

    /// The run's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Submit the run: the AICore program first, then the AICPU program, each on its own
    /// stream, each followed by a completion event. Never waits for the device.
    pub fn launch(mut self) -> Result<RunHandle<'d, P>, Error> {
        let inner = &*self.dev.inner;
        let reserved = self.slot.take().ok_or(Error::Closed)?;
        let pins = self.pins.take().unwrap_or_default();
        if !inner.begin_launch(&reserved) {
            inner.release_pins(pins);
            return Err(Error::Expired { micros: inner.timeouts.lease_us });
        }
        if let Err(e) = inner.check_usable() {
            inner.free_slot(&reserved);
            inner.release_pins(pins);
            return Err(e);
        }
        let (desc, dump) = {
            let mut mem = inner.slot_mem[reserved.slot].lock();
            let dump =
                mem.dump.take().map(|d| Dumping { collector: Mutex::new(Some(d.collector)), failed: Mutex::new(None) });
            (mem.arena, dump)
        };
        let started = Instant::now();
        let mut s = inner.lock_streams();
        let launched = (|| {
            s.aicore.launch_aicore(inner.programs.aicore, desc, self.clusters).map_err(platform("AICore launch"))?;
            let core_ev = s.aicore.record_event().map_err(platform("AICore event"))?;
            let entry = match self.runtime {
                RuntimeKind::HostBuiltGraph => inner.programs.hbg,
                RuntimeKind::TensormapRing => inner.programs.trb,
            };
            s.aicpu.launch_aicpu(entry, desc, self.threads).map_err(platform("AICPU launch"))?;
            let cpu_ev = s.aicpu.record_event().map_err(platform("AICPU event"))?;
            Ok::<_, Error>((cpu_ev, core_ev))
        })();
        drop(s);
        match launched {
            Ok((cpu_ev, core_ev)) => {
                inner.launched(&reserved);
                log::debug!(
                    target: "pto::host",
                    "launch: slot {} epoch {} runtime {} clusters {} threads {}",
                    reserved.slot,
                    self.epoch,
                    self.runtime,
                    self.clusters,
                    self.threads
                );
                Ok(RunHandle {
                    dev: self.dev,
                    slot: Some(reserved),
                    epoch: self.epoch,
                    desc,
                    cpu_ev,
                    core_ev,
                    started,
                    tasks: self.tasks,
                    runtime: self.runtime,
                    pins: Some(pins),
                    _keep: self.keep.take(),
                    dump,
                })
            }
            Err(e) => {
                // A half-submitted launch cannot be proven complete: the device is unusable,
                // and the tensors it names stay allocated.
                inner.mark_unusable(format!("launch failed: {e}"));
                inner.free_slot(&reserved);
                core::mem::forget(pins);
                Err(e)
            }
        }
    }
}

impl<P: HostPlatform> Drop for PreparedRun<'_, P> {
    fn drop(&mut self) {
        if let Some(r) = self.slot.take() {
            self.dev.inner.free_slot(&r);
        }
        if let Some(p) = self.pins.take() {
            self.dev.inner.release_pins(p);
        }
    }
}

/// A launched run. [`RunHandle::wait`] is its completion fence; dropping the handle waits too.
pub struct RunHandle<'d, P: HostPlatform> {
    dev: &'d Device<P>,
    slot: Option<Reserved>,
    epoch: u64,
    desc: GmAddr,
    cpu_ev: <P::AicpuStream as Stream>::Event,
    core_ev: <P::AicoreStream as Stream>::Event,
    started: Instant,
    tasks: Option<u32>,
    runtime: RuntimeKind,
    pins: Option<Pins>,
    _keep: Option<Graph<P>>,
    /// The args-dump region and its collector, when the run dumps.
    dump: Option<Dumping>,
}

/// A dumping run's collector and what it has met so far (the lanes belong to the slot).
struct Dumping {
    collector: Mutex<Option<super::dump::Collector>>,
    /// The first collection failure (draining stops there).
    failed: Mutex<Option<Error>>,
}

impl Dumping {
    /// Drain what the lanes published (a no-op after a failure).
    fn drain<D: DeviceMemory>(&self, dev: &D)
    where
        D::Error: std::error::Error + Send + Sync + 'static,
    {
        let mut failed = self.failed.lock();
        if failed.is_some() {
            return;
        }
        let mut c = self.collector.lock();
        if let Some(c) = c.as_mut() {
            if let Err(e) = c.drain(dev) {
                *failed = Some(collect_error(e));
            }
        }
    }
}

fn collect_error<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(
    e: super::dump::CollectError<E>,
) -> Error {
    match e {
        super::dump::CollectError::Io(e) => Error::DumpFiles { path: "args dump directory".into(), why: e.to_string() },
        super::dump::CollectError::Device(e) => Error::platform("args-dump collection", e),
    }
}

/// How a run's fence ended.
enum Fenced {
    /// Both programs completed; the platform may have reported a failure of either.
    Done(Option<Error>),
    /// A boundary never completed within its budget.
    Never(Error),
}

impl<'d, P: HostPlatform> RunHandle<'d, P> {
    /// Non-blocking: have both of this run's boundaries completed? A dumping run's collector
    /// also drains its lanes here, so a host that polls keeps the producer's back-pressure low.
    pub fn is_done(&self) -> Result<bool, Error> {
        if let Some(d) = &self.dump {
            d.drain(&self.dev.inner.dev);
        }
        let s = self.dev.inner.lock_streams();
        Ok(s.aicpu.query_event(self.cpu_ev).map_err(platform("AICPU event query"))?
            && s.aicore.query_event(self.core_ev).map_err(platform("AICore event query"))?)
    }

    /// The run's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Wait for the run and report it. Bounded: by the stream budget while no fault is
    /// latched, and by the exit budget once the AICPU program has ended with a latched fault
    /// (a core stuck in a kernel that never returns does not hold the host).
    pub fn wait(mut self) -> Result<RunReport, Error> {
        self.finish()
    }

    /// Wait for one boundary, at most `budget_us`, in short chunks (the stream lock is not
    /// held across the whole wait).
    fn wait_boundary(&self, aicpu: bool, budget_us: u64) -> Result<Option<Error>, Error> {
        let inner = &*self.dev.inner;
        let deadline = Instant::now() + Duration::from_micros(budget_us);
        let what = if aicpu { "AICPU program" } else { "AICore program" };
        // A dumping run is drained between short waits, so the producer's back-pressure
        // lifts while the run is in flight.
        let chunk = if self.dump.is_some() { 200u64 } else { 2_000u64 };
        loop {
            if let Some(d) = &self.dump {
                d.drain(&inner.dev);
            }
            let left = deadline.saturating_duration_since(Instant::now()).as_micros() as u64;
            let s = inner.lock_streams();
            let r = if aicpu {
                s.aicpu.wait_event(self.cpu_ev, chunk.min(left))
            } else {
                s.aicore.wait_event(self.core_ev, chunk.min(left))
            };
            drop(s);
            match r {
                Ok(()) => return Ok(None),
                Err(e) if pto_hal::Error::kind(&e) == pto_hal::ErrorKind::Timeout => {
                    if left <= chunk {
                        return Err(Error::Timeout { what, micros: budget_us });
                    }
                }
                Err(e) => return Ok(Some(Error::platform(what, e))),
            }
        }
    }

    /// The descriptor as the device left it.
    fn read_desc(&self) -> Result<LaunchDesc, Error> {
        let mut d = LaunchDesc::default();
        self.dev.inner.dev.copy_d2h(d.as_mut_bytes(), self.desc).map_err(platform("status read-back"))?;
        Ok(d)
    }

    /// The completion fence: the AICPU boundary within the stream budget, then the AICore
    /// boundary within what is left of it — or, when a fault is latched, within the cores' own
    /// wait budget (every core that is not stuck in a kernel gives up within it).
    fn fence(&self) -> Fenced {
        let inner = &*self.dev.inner;
        let budget = inner.timeouts.stream_us;
        let started = Instant::now();
        let cpu = match self.wait_boundary(true, budget) {
            Ok(f) => f,
            Err(e) => return Fenced::Never(e),
        };
        let left = budget.saturating_sub(started.elapsed().as_micros() as u64);
        let core_budget = match self.read_desc() {
            Ok(d) if d.fatal.claimed != 0 => left.min(core_grace_us(&inner.dev, &d)),
            _ => left,
        };
        match self.wait_boundary(false, core_budget.max(1)) {
            Ok(core) => Fenced::Done(cpu.or(core)),
            Err(e) => Fenced::Never(e),
        }
    }

    fn finish(&mut self) -> Result<RunReport, Error> {
        let Some(reserved) = self.slot.take() else {
            return Err(Error::Closed);
        };
        let inner = &*self.dev.inner;
        let fenced = self.fence();
        let wall = self.started.elapsed();
        log::debug!(
            target: "pto::host",
            "fence: slot {} epoch {} {} after {} us",
            reserved.slot,
            self.epoch,
            match &fenced {
                Fenced::Done(None) => "ended",
                Fenced::Done(Some(_)) => "ended with a platform failure",
                Fenced::Never(_) => "never ended",
            },
            wall.as_micros()
        );
        match fenced {
            Fenced::Done(failure) => {
                let result = match (self.collect(reserved.slot, wall), failure) {
                    (Err(Error::Device(mut d)), Some(f)) => {
                        d.also = Some(std::boxed::Box::new(f));
                        Err(Error::Device(d))
                    }
                    // The platform's failure is the report when nothing was latched.
                    (Ok(_), Some(f)) => Err(f),
                    (Err(Error::Unusable(_)), Some(f)) => Err(f),
                    (r, _) => r,
                };
                let result = self.finish_dump(result, true);
                match &result {
                    Ok(r) => log::debug!(
                        target: "pto::host",
                        "collect: slot {} epoch {} ok, {} tasks",
                        reserved.slot,
                        self.epoch,
                        r.tasks
                    ),
                    Err(e) => {
                        log::debug!(target: "pto::host", "collect: slot {} epoch {} failed: {e}", reserved.slot, self.epoch)
                    }
                }
                inner.free_slot(&reserved);
                if let Some(p) = self.pins.take() {
                    inner.release_pins(p);
                }
                result
            }
            Fenced::Never(e) => {
                // Some program of this run never ended: the device is unusable, and every
                // tensor the run names stays allocated (a stuck core may still write it).
                core::mem::forget(self.pins.take());
                // The manifest says what was collected, with its accounting unknown.
                let _ = self.finish_dump(Err(Error::Closed), false);
                let latched = self.read_desc().ok().and_then(|d| lifecycle::decode_latch(&d));
                let err = match latched {
                    Some(lifecycle::Latched { fault: Ok(f), message }) => {
                        let mut d = DeviceError::new(f.code, f.site, f.task, f.core, f.detail, message);
                        d.also = Some(std::boxed::Box::new(e));
                        inner.mark_unusable(format!("run {} never completed after {d}", self.epoch));
                        Error::Device(d)
                    }
                    _ => {
                        inner.mark_unusable(format!("run {} never completed: {e}", self.epoch));
                        e
                    }
                };
                // The slot is not reused: the device is unusable.
                Err(err)
            }
        }
    }

    /// Close the args dump of a run whose fence ended (`fenced`: both programs ended, so the
    /// region may be read and freed): final drain, counters, manifest. A run that failed
    /// reports its accounting as unknown; a collection failure fails a run that succeeded.
    fn finish_dump(&mut self, result: Result<RunReport, Error>, fenced: bool) -> Result<RunReport, Error> {
        let Some(d) = self.dump.take() else { return result };
        let inner = &*self.dev.inner;
        let collector = d.collector.lock().take();
        let failed = d.failed.lock().take();
        let complete = fenced && result.is_ok() && failed.is_none();
        let run = serde_json::json!({
            "epoch": self.epoch,
            "runtime": self.runtime.to_string(),
            "complete": complete,
        });
        let locate = |addr: u64| inner.allocs.locate(addr);
        let report = collector.map(|c| c.finish(&inner.dev, complete, run, &locate));
        match (result, failed, report) {
            (Ok(_), Some(e), _) => Err(e),
            // The collection failed mid-run, so the host stopped draining and the resident
            // route's capture ran out of budget waiting: the collection is the cause.
            (Err(Error::Device(de)), Some(e), _) if de.code == ErrorCode::Device(DeviceFault::ArgsCaptureTimeout) => {
                Err(e)
            }
            (Ok(_), None, Some(Err(e))) => Err(collect_error(e)),
            (Ok(mut r), None, Some(Ok(rep))) => {
                r.dump = Some(rep);
                Ok(r)
            }
            (r, _, _) => r,
        }
    }

    fn collect(&self, slot: usize, wall: Duration) -> Result<RunReport, Error> {
        let inner = &*self.dev.inner;
        let d = self.read_desc()?;
        let workers = d.config.workers as u64;
        let trace = || -> Result<Option<super::Trace>, Error> {
            let Some(l) = crate::layout::TraceLayout::of(&d.config) else { return Ok(None) };
            let funcs = inner.funcs.lock().0.clone();
            let hz = pto_hal::Clock::freq_hz(&inner.dev);
            super::trace::collect(&inner.dev, hz, &funcs, &d, l).map(Some)
        };
        if let Some(lifecycle::Latched { fault, message }) = lifecycle::decode_latch(&d) {
            let mut err = match fault {
                Ok(f) => DeviceError::new(f.code, f.site, f.task, f.core, f.detail, message),
                Err((code, site)) => DeviceError::new(
                    ErrorCode::Device(DeviceFault::BadImage),
                    Site::Boot,
                    None,
                    None,
                    (code << 32) | (site & 0xFFFF_FFFF),
                    format!("the device latched code {code} at site {site}, which this build does not know: {message}"),
                ),
            };
            // The trace of a failed run is a diagnostic: one that cannot be read is left out.
            err.trace = trace().ok().flatten().map(std::boxed::Box::new);
            // Surface (and clear) any program status too, so it cannot leak into the next run;
            // the latched fault is the better report, so the stream's own error is dropped.
            let _ = self.sync_streams();
            if d.run.cores_released < d.run.cores_ready || d.run.threads_done < d.config.aicpu_threads as u64 {
                inner.mark_unusable(format!("run {} left cores unreleased after: {err}", self.epoch));
            }
            return Err(Error::Device(err));
        }
        if d.run.threads_done != d.config.aicpu_threads as u64
            || d.run.cores_released != workers
            || self.tasks.is_some_and(|n| d.run.completed != n as u64)
        {
            // No latched fault but the run's own record is incomplete: ask the streams.
            self.sync_streams()?;
            inner.mark_unusable(format!("run {} ended without a complete record", self.epoch));
            return Err(Error::Unusable(format!(
                "run {} ended with {}/{:?} tasks, {}/{} threads, {}/{} cores released",
                self.epoch,
                d.run.completed,
                self.tasks,
                d.run.threads_done,
                d.config.aicpu_threads,
                d.run.cores_released,
                workers
            )));
        }
        let micros = pto_hal::Clock::micros_from_ticks(&inner.dev, d.run.orch_ticks);
        let trace = trace()?;
        Ok(RunReport {
            epoch: self.epoch,
            tasks: d.run.completed,
            dispatched: d.run.dispatched,
            cores: d.run.cores_ready,
            released: d.run.cores_released,
            wall,
            slot,
            trace,
            dump: None,
            executor: if crate::layout::ResidentLayout::of(&d.config).is_some() {
                super::Executor::Resident
            } else {
                super::Executor::Legacy
            },
            legacy_reason: super::LegacyReason::from_code(d.config.executor_reason, d.config.executor_detail),
            capture: capture_report(&inner.dev, &d.config)?,
            orchestration: (d.config.runtime == RUNTIME_TRB && self.runtime == RuntimeKind::TensormapRing)
                .then(|| Duration::from_micros(micros)),
        })
    }

    fn sync_streams(&self) -> Result<(), Error> {
        let inner = &*self.dev.inner;
        let budget = inner.timeouts.stream_us;
        let mut s = inner.lock_streams();
        let a = s.aicpu.synchronize(budget).map_err(platform("AICPU stream"));
        let c = s.aicore.synchronize(budget).map_err(platform("AICore stream"));
        a.and(c)
    }
}

/// Read back the counters and slot states of a resident run's capture region.
fn capture_report<D: DeviceMemory>(dev: &D, cfg: &crate::layout::LaunchConfig) -> Result<Option<CaptureReport>, Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    use crate::layout::{CaptureLayout, capture_header as h, capture_slot};
    let Some(l) = CaptureLayout::of(cfg) else { return Ok(None) };
    let mut b = std::vec![0u8; l.bytes() as usize];
    dev.copy_d2h(&mut b, GmAddr(l.base)).map_err(platform("capture region read-back"))?;
    let word = |at: u64| {
        let o = (at - l.base) as usize;
        u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
    };
    let unsettled = (0..l.clusters)
        .flat_map(|c| (0..3).map(move |lane| (c, lane)))
        .filter(|&(c, lane)| {
            let (state, _) = capture_slot::fields(word(l.slot(c, lane)));
            state != capture_slot::FREE && state != capture_slot::SETTLED
        })
        .count() as u64;
    Ok(Some(CaptureReport {
        region_bytes: l.bytes(),
        requests: word(l.header(h::REQUESTS)),
        claims: word(l.header(h::CLAIMS)),
        steps: word(l.header(h::SERVED)),
        would_block: word(l.header(h::WOULD_BLOCK)),
        largest_step: word(l.header(h::LARGEST_STEP)),
        max_step: word(l.header(h::MAX_BYTES)),
        unsettled_slots: unsettled,
    }))
}

/// How long the AICore program may still run once the AICPU program ended with a latched
/// fault: the cores' own wait budget for this run, plus a margin. A core still running after
/// it is stuck in a kernel.
///
/// The teardown-gate wait has no early exit (`lifecycle::wait_release`: past its budget a core
/// latches `RELEASE_TIMEOUT` and keeps waiting), but it needs no longer grace: every AICPU
/// thread stores each of its cores' gates — release, or the cancel value for a core it
/// abandons — before its program ends, so once the AICPU program has ended no core waits at
/// its gate for more than a wake-up. A core whose AICPU thread is stuck keeps the AICPU
/// program from ending; the fence then gives up on the AICPU boundary after `stream_us` and
/// reports the core's latched `RELEASE_TIMEOUT` (which `core_wait < stream_us` makes sure is
/// latched by then), with the device marked unusable.
fn core_grace_us(clock: &impl pto_hal::Clock, d: &LaunchDesc) -> u64 {
    clock.micros_from_ticks(d.config.core_wait_ticks).saturating_add(200_000)
}

fn timeout_or<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(
    what: &'static str,
    micros: u64,
    e: E,
) -> Error {
    if e.kind() == pto_hal::ErrorKind::Timeout { Error::Timeout { what, micros } } else { Error::platform(what, e) }
}

impl<P: HostPlatform> Drop for RunHandle<'_, P> {
    fn drop(&mut self) {
        // The same bounded fence as `wait`, whatever the outcome; the report is dropped.
        drop_finish(self);
    }
}

/// The fence of a dropped handle, without a report (`Drop` cannot name the platform-error
/// bound `finish` needs).
fn drop_finish<P: HostPlatform>(h: &mut RunHandle<'_, P>) {
    let Some(reserved) = h.slot.take() else { return };
    let inner = &*h.dev.inner;
    let budget = Duration::from_micros(inner.timeouts.stream_us);
    let deadline = Instant::now() + budget;
    let mut cpu_done_at = None;
    let done = loop {
        let s = inner.lock_streams();
        let a = s.aicpu.query_event(h.cpu_ev).unwrap_or(true);
        let c = s.aicore.query_event(h.core_ev).unwrap_or(true);
        drop(s);
        if a && c {
            break true;
        }
        let now = Instant::now();
        if a {
            // Once the AICPU program ended with a fault, cores get their own budget (as in `wait`).
            let at = *cpu_done_at.get_or_insert(now);
            let mut d = LaunchDesc::default();
            let latched = inner.dev.copy_d2h(d.as_mut_bytes(), h.desc).is_ok() && d.fatal.claimed != 0;
            if latched && now - at > Duration::from_micros(core_grace_us(&inner.dev, &d)) {
                break false;
            }
        }
        if now >= deadline {
            break false;
        }
        if let Some(d) = &h.dump {
            d.drain(&inner.dev);
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    if let Some(d) = h.dump.take() {
        // Without a report nobody learns whether the run succeeded: its accounting is unknown.
        let collector = d.collector.lock().take();
        if let Some(c) = collector {
            let run = serde_json::json!({ "epoch": h.epoch, "runtime": h.runtime.to_string(), "complete": false });
            let _ = c.finish(&inner.dev, false, run, &|addr| inner.allocs.locate(addr));
        }
    }
    if done {
        inner.free_slot(&reserved);
        if let Some(p) = h.pins.take() {
            inner.release_pins(p);
        }
    } else {
        core::mem::forget(h.pins.take());
        inner.mark_unusable(format!("run {} never completed", h.epoch));
    }
}
