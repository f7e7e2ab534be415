//! The completion fence of a launched run: wait for both programs within their budgets, then
//! collect the report (or learn that the run never ended and mark the device unusable).
//! Dropping a [`RunHandle`] runs the same fence.

use parking_lot::Mutex;
use std::format;
use std::time::{Duration, Instant};
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr, HostPlatform, Stream};
use zerocopy::IntoBytes;

use super::error::platform;
use super::memory::Pins;
use super::{Device, DeviceError, Error};
use crate::codes::{DeviceFault, ErrorCode, Site};
use crate::layout::{LaunchDesc, RUNTIME_TRB};
use crate::lifecycle;
use crate::orch::RuntimeKind;

use super::report::{RunReport, capture_report, collect_error};
use super::trace::{HostPhase, HostTimeline};
use super::turns::Reserved;

/// A launched run. [`RunHandle::wait`] is its completion fence; dropping the handle waits too.
///
/// The run's own state (`InFlight`) belongs to the device, not to the handle: a handle that
/// is forgotten (`mem::forget`) cannot keep its pipeline slot for good. A run waiting for a
/// slot fences a launched run whose handle has not done so within
/// [`Timeouts::lease_us`](super::Timeouts::lease_us) of its launch, and keeps its outcome for
/// the handle's [`wait`](RunHandle::wait) should it come.
pub struct RunHandle<'d, P: HostPlatform> {
    pub(super) dev: &'d Device<P>,
    pub(super) slot: usize,
    pub(super) epoch: u64,
    /// Set once `wait` has taken the outcome (the drop then has nothing to do).
    pub(super) waited: bool,
}

/// A launched run's state, held by its device until the run's fence.
pub(crate) struct InFlight<P: HostPlatform> {
    pub(super) slot: Reserved,
    pub(super) epoch: u64,
    pub(super) desc: GmAddr,
    pub(super) cpu_ev: <P::AicpuStream as Stream>::Event,
    pub(super) core_ev: <P::AicoreStream as Stream>::Event,
    pub(super) started: Instant,
    pub(super) tasks: Option<u32>,
    pub(super) runtime: RuntimeKind,
    pub(super) pins: Option<Pins>,
    /// The host-built graph's state, kept until the fence ([`PreparedRun`](super::PreparedRun)).
    pub(super) graph: Option<std::sync::Arc<super::build::GraphCore<P>>>,
    /// The args-dump region and its collector, when the run dumps.
    pub(super) dump: Option<Dumping>,
    /// The run's host phases so far, and the device-counter anchors (the launch's taken).
    pub(super) host: Mutex<HostTimeline>,
}

/// A dumping run's collector and what it has met so far (the lanes belong to the slot).
pub(super) struct Dumping {
    pub(super) collector: Mutex<Option<super::dump::Collector>>,
    /// The first collection failure (draining stops there).
    pub(super) failed: Mutex<Option<Error>>,
}

impl Dumping {
    /// Drain what the lanes published (a no-op after a failure); how many buffers it took.
    fn drain<D: DeviceMemory>(&self, dev: &D, locate: super::dump::Locate<'_>) -> usize
    where
        D::Error: std::error::Error + Send + Sync + 'static,
    {
        let mut failed = self.failed.lock();
        if failed.is_some() {
            return 0;
        }
        let mut c = self.collector.lock();
        match c.as_mut().map(|c| c.drain(dev, locate)) {
            Some(Ok(n)) => n,
            Some(Err(e)) => {
                *failed = Some(collect_error(e));
                0
            }
            None => 0,
        }
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
    /// `true` too once the run has been fenced (by its device, for a handle past its lease).
    pub fn is_done(&self) -> Result<bool, Error> {
        let inner = &*self.dev.inner;
        let rec = inner.in_flight[self.slot].lock();
        match rec.as_ref().filter(|r| r.epoch == self.epoch) {
            Some(r) => r.is_done(inner),
            None => Ok(true),
        }
    }

    /// The run's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Wait for the run and report it. Bounded: by the stream budget while no fault is
    /// latched, and by the exit budget once the AICPU program has ended with a latched fault
    /// (a core stuck in a kernel that never returns does not hold the host).
    pub fn wait(mut self) -> Result<RunReport, Error> {
        self.waited = true;
        self.dev.inner.fence_run(self.slot, self.epoch)
    }
}

impl<P: HostPlatform> super::Inner<P> {
    /// Fence run `epoch` in `slot`: take its state and wait for it, or — when the device
    /// already fenced it for a handle past its lease — the outcome kept for it.
    pub(super) fn fence_run(&self, slot: usize, epoch: u64) -> Result<RunReport, Error> {
        let rec = {
            let mut r = self.in_flight[slot].lock();
            if r.as_ref().is_some_and(|r| r.epoch == epoch) { r.take() } else { None }
        };
        if let Some(rec) = rec {
            return rec.finish(self);
        }
        let mut kept = self.fenced.lock();
        match kept.iter().position(|(e, _)| *e == epoch) {
            Some(i) => kept.remove(i).map_or(Err(Error::Closed), |(_, r)| r),
            None => Err(Error::ReportDropped { epoch }),
        }
    }

    /// Fence the launched run in `slot` if its handle has let it be for `lease` since its
    /// launch (and, with `only_done`, only if both its programs have ended, so the fence does
    /// not wait), keeping the outcome for the handle; `true` if it did. Called by a run that
    /// needs a slot, without the turn lock held.
    pub(super) fn fence_stale(&self, slot: usize, lease: Duration, only_done: bool) -> bool {
        let rec = {
            let mut r = self.in_flight[slot].lock();
            let stale = r
                .as_ref()
                .is_some_and(|r| r.started.elapsed() >= lease && (!only_done || r.is_done(self).unwrap_or(false)));
            if stale { r.take() } else { None }
        };
        let Some(rec) = rec else { return false };
        let epoch = rec.epoch;
        tracing::debug!(target: "pto::host", "fence: run {epoch} in slot {slot} fenced by the device (its handle let it be)");
        let outcome = rec.finish(self);
        let mut kept = self.fenced.lock();
        if kept.len() >= KEPT_OUTCOMES {
            kept.pop_front();
        }
        kept.push_back((epoch, outcome));
        true
    }
}

impl<P: HostPlatform> super::Inner<P> {
    /// Recover from runs that had not ended (a core stuck in a kernel past the watchdog): once
    /// both of such a run's programs have ended — the stuck kernel returned, the core left
    /// through its (abandoned) gate — its slot, pins and graph are released, the statuses its
    /// programs left on the streams are cleared, and when no such run is left and nothing else
    /// made the device unusable, it is usable again. Called before every usability check.
    pub(super) fn recover(&self) {
        // Broken: a run stuck in a kernel is never recovered from.
        crate::seam!(WAIT_FOR_HUNG_CORE);
        let mut stuck = self.stuck.lock();
        if stuck.is_empty() {
            return;
        }
        let mut recovered = Vec::new();
        let mut i = 0;
        while i < stuck.len() {
            if stuck[i].0.is_done(self).unwrap_or(false) {
                recovered.push(stuck.remove(i));
            } else {
                i += 1;
            }
        }
        for (mut run, why) in recovered {
            // The stuck core's program status (it was abandoned at its gate) is this run's,
            // not the next one's.
            let _ = run.sync_streams(self);
            self.free_slot(&run.slot);
            if let Some(p) = run.pins.take() {
                self.release_pins(p);
            }
            let mut u = self.unusable.lock();
            if u.as_deref() == Some(why.as_str()) && stuck.is_empty() {
                *u = None;
            }
            tracing::debug!(target: "pto::host", "recovered: run {} ended at last; {why}", run.epoch);
        }
    }
}

/// Outcomes of runs fenced for their handles that a device keeps (the oldest goes first; a
/// handle that comes for a dropped one gets [`Error::ReportDropped`]).
const KEPT_OUTCOMES: usize = 16;

impl<P: HostPlatform> InFlight<P> {
    /// Have both boundaries completed? (Drains a dumping run's lanes first.)
    fn is_done(&self, inner: &super::Inner<P>) -> Result<bool, Error> {
        self.drain_dump(inner);
        let s = inner.lock_streams();
        Ok(s.aicpu.query_event(self.cpu_ev).map_err(platform("AICPU event query"))?
            && s.aicore.query_event(self.core_ev).map_err(platform("AICore event query"))?)
    }

    /// Drain a dumping run's lanes while it is in flight; a drain that took something is a
    /// host phase of the run (`dump_drain`).
    fn drain_dump(&self, inner: &super::Inner<P>) {
        let Some(d) = &self.dump else { return };
        let started = Instant::now();
        let span = tracing::trace_span!(target: "pto::host", "dump_drain", epoch = self.epoch);
        let locate = |addr: u64| inner.allocs.locate(addr);
        if span.in_scope(|| d.drain(&inner.dev, &locate)) > 0 {
            self.host.lock().until_now(HostPhase::DumpDrain, started);
        }
    }

    /// Wait for one boundary, at most `budget_us`, in short chunks (the stream lock is not
    /// held across the whole wait).
    fn wait_boundary(&self, inner: &super::Inner<P>, aicpu: bool, budget_us: u64) -> Result<Option<Error>, Error> {
        let deadline = Instant::now() + Duration::from_micros(budget_us);
        let what = if aicpu { "AICPU program" } else { "AICore program" };
        // A dumping run is drained between short waits, so the producer's back-pressure
        // lifts while the run is in flight.
        let chunk = if self.dump.is_some() { 200u64 } else { 2_000u64 };
        loop {
            self.drain_dump(inner);
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
    pub(super) fn read_desc(&self, inner: &super::Inner<P>) -> Result<LaunchDesc, Error> {
        let mut d = LaunchDesc::default();
        inner.dev.copy_d2h(d.as_mut_bytes(), self.desc).map_err(platform("status read-back"))?;
        Ok(d)
    }

    /// The completion fence: the AICPU boundary within the stream budget, then the AICore
    /// boundary within what is left of it — or, when a fault is latched, within the cores' own
    /// wait budget (every core that is not stuck in a kernel gives up within it).
    fn fence(&self, inner: &super::Inner<P>) -> Fenced {
        let budget = inner.timeouts.stream_us;
        let started = Instant::now();
        let cpu = match self.wait_boundary(inner, true, budget) {
            Ok(f) => f,
            Err(e) => return Fenced::Never(e),
        };
        let left = budget.saturating_sub(started.elapsed().as_micros() as u64);
        let core_budget = match self.read_desc(inner) {
            Ok(d) if d.fatal.claimed != 0 => left.min(core_grace_us(&inner.dev, &d)),
            _ => left,
        };
        match self.wait_boundary(inner, false, core_budget.max(1)) {
            Ok(core) => Fenced::Done(cpu.or(core)),
            Err(e) => Fenced::Never(e),
        }
    }

    /// The fence, then the report: frees the slot and the run's pins and graph when both
    /// programs ended; marks the device unusable (and keeps them) when they did not.
    fn finish(mut self, inner: &super::Inner<P>) -> Result<RunReport, Error> {
        let slot = self.slot.slot;
        let fencing = Instant::now();
        let span = tracing::debug_span!(target: "pto::host", "fence", slot, epoch = self.epoch);
        let fenced = span.in_scope(|| self.fence(inner));
        let wall = self.started.elapsed();
        let host = self.host.get_mut();
        host.anchor(&inner.dev);
        host.until_now(HostPhase::Fence, fencing);
        span.in_scope(|| {
            tracing::debug!(
                target: "pto::host",
                "fence: slot {} epoch {} {} after {} us",
                slot,
                self.epoch,
                match &fenced {
                    Fenced::Done(None) => "ended",
                    Fenced::Done(Some(_)) => "ended with a platform failure",
                    Fenced::Never(_) => "never ended",
                },
                wall.as_micros()
            )
        });
        match fenced {
            Fenced::Done(failure) => {
                let collecting = Instant::now();
                let span = tracing::debug_span!(target: "pto::host", "collect", slot, epoch = self.epoch);
                let collected = span.in_scope(|| self.collect(inner, slot, wall));
                self.host.get_mut().until_now(HostPhase::Collect, collecting);
                let result = match (collected, failure) {
                    (Err(Error::Device(mut d)), Some(f)) => {
                        d.also = Some(std::boxed::Box::new(f));
                        Err(Error::Device(d))
                    }
                    // The platform's failure is the report when nothing was latched.
                    (Ok(_), Some(f)) => Err(f),
                    (Err(Error::Unusable(_)), Some(f)) => Err(f),
                    (r, _) => r,
                };
                let dumping = Instant::now();
                let dumped = self.dump.is_some();
                let mut result = if dumped {
                    let span = tracing::debug_span!(target: "pto::host", "dump", slot, epoch = self.epoch);
                    let r = span.in_scope(|| self.finish_dump(inner, result, true));
                    self.host.get_mut().until_now(HostPhase::Dump, dumping);
                    r
                } else {
                    result
                };
                // The trace (of a run that passed, or the diagnostic one of a latched fault)
                // gets the host's phases, on the device's axis.
                let trace = match &mut result {
                    Ok(r) => r.trace.as_mut(),
                    Err(Error::Device(d)) => d.trace.as_deref_mut(),
                    Err(_) => None,
                };
                if let Some(t) = trace {
                    self.host.get_mut().attach(t);
                }
                span.in_scope(|| match &result {
                    Ok(r) => tracing::debug!(
                        target: "pto::host",
                        "collect: slot {} epoch {} ok, {} tasks",
                        slot,
                        self.epoch,
                        r.tasks
                    ),
                    Err(e) => {
                        tracing::debug!(target: "pto::host", "collect: slot {} epoch {} failed: {e}", slot, self.epoch)
                    }
                });
                inner.free_slot(&self.slot);
                if let Some(p) = self.pins.take() {
                    inner.release_pins(p);
                }
                result
            }
            Fenced::Never(e) => {
                // Some program of this run never ended: the device is unusable, and every
                // tensor the run names stays allocated (a stuck core may still write it), and
                // so do its slot and its graph's heap: the run is kept as stuck until its
                // programs end (`Inner::recover`).
                // The manifest says what was collected, with its accounting unknown.
                let _ = self.finish_dump(inner, Err(Error::Closed), false);
                let latched = self.read_desc(inner).ok().and_then(|d| lifecycle::decode_latch(&d));
                let (err, why) = match latched {
                    Some(lifecycle::Latched { fault: Ok(f), message }) => {
                        let mut d = DeviceError::new(f.code, f.site, f.task, f.core, f.detail, message);
                        d.also = Some(std::boxed::Box::new(e));
                        let why = format!(
                            "run {} has not ended after {d}; the device is usable again once its programs end (a stuck kernel returns)",
                            self.epoch
                        );
                        (Error::Device(d), why)
                    }
                    _ => {
                        let why = format!("run {} never completed: {e}", self.epoch);
                        (e, why)
                    }
                };
                inner.mark_unusable(why.clone());
                let recoverable =
                    matches!(&err, Error::Device(d) if d.code == ErrorCode::Device(DeviceFault::KernelHung));
                if recoverable {
                    inner.stuck.lock().push((self, why));
                } else {
                    core::mem::forget(self.pins.take());
                    core::mem::forget(self.graph.take());
                }
                // The slot is not reused: the device is unusable.
                Err(err)
            }
        }
    }

    /// Close the args dump of a run whose fence ended (`fenced`: both programs ended, so the
    /// region may be read and freed): final drain, counters, manifest. A run that failed
    /// reports its accounting as unknown; a collection failure fails a run that succeeded.
    fn finish_dump(
        &mut self,
        inner: &super::Inner<P>,
        result: Result<RunReport, Error>,
        fenced: bool,
    ) -> Result<RunReport, Error> {
        let Some(d) = self.dump.take() else { return result };
        let collector = d.collector.lock().take();
        let failed = d.failed.lock().take();
        let complete = fenced && result.is_ok() && failed.is_none();
        let run = super::dump::RunInfo { epoch: self.epoch, runtime: self.runtime, complete };
        let locate = |addr: u64| inner.allocs.locate(addr);
        let report = collector.map(|mut c| {
            let r = c.finish(&inner.dev, complete, run, &locate);
            inner.slot_mem[self.slot.slot].lock().dump_buffers = c.into_buffers();
            r
        });
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

    pub(super) fn sync_streams(&self, inner: &super::Inner<P>) -> Result<(), Error> {
        let budget = inner.timeouts.stream_us;
        let mut s = inner.lock_streams();
        let a = s.aicpu.synchronize(budget).map_err(platform("AICPU stream"));
        let c = s.aicore.synchronize(budget).map_err(platform("AICore stream"));
        a.and(c)
    }
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
///
/// A `KERNEL_HUNG` names the core that is stuck: the AICPU abandoned it without waiting for
/// its EXIT and released every other core before its program ended, so the AICore program can
/// only end once that kernel returns. The fence then gives the others [`HUNG_GRACE_US`] and
/// reports the run (the device stays unusable until the stuck core comes back: see
/// `Inner::recover`).
fn core_grace_us(clock: &impl pto_hal::Clock, d: &LaunchDesc) -> u64 {
    // Broken: the fence waits the cores' whole budget after a KERNEL_HUNG too.
    crate::seam!(WAIT_FOR_HUNG_CORE => core_budget_us(clock, d));
    let hung = crate::codes::ErrorCode::Device(DeviceFault::KernelHung).value() as u32 as u64;
    if d.fatal.complete != 0 && d.fatal.code == hung {
        return HUNG_GRACE_US;
    }
    core_budget_us(clock, d)
}

/// The cores' wait budget of the run of `d`, plus 0.2 s: how long the fence waits for the
/// AICore program once the AICPU program ended.
fn core_budget_us(clock: &impl pto_hal::Clock, d: &LaunchDesc) -> u64 {
    clock.micros_from_ticks(d.config.core_wait_ticks).saturating_add(200_000)
}

/// How long the fence waits for the AICore program after a `KERNEL_HUNG` ended the AICPU
/// program: the released cores' exit, not the stuck kernel.
pub const HUNG_GRACE_US: u64 = 200_000;

pub(super) fn timeout_or<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(
    what: &'static str,
    micros: u64,
    e: E,
) -> Error {
    if e.kind() == pto_hal::ErrorKind::Timeout { Error::Timeout { what, micros } } else { Error::platform(what, e) }
}

impl<P: HostPlatform> Drop for RunHandle<'_, P> {
    fn drop(&mut self) {
        // The same bounded fence as `wait`, whatever the outcome; the report is dropped.
        if !self.waited {
            let _ = self.dev.inner.fence_run(self.slot, self.epoch);
        }
    }
}

/// The report of a run whose programs both ended: the descriptor's counters and latch, the
/// trace when it was on.
impl<P: HostPlatform> InFlight<P> {
    pub(super) fn collect(&self, inner: &super::Inner<P>, slot: usize, wall: Duration) -> Result<RunReport, Error> {
        let d = self.read_desc(inner)?;
        let workers = d.config.workers as u64;
        let trace = || -> Result<Option<super::Trace>, Error> {
            let Some(l) = crate::layout::TraceLayout::of(&d.config) else { return Ok(None) };
            let funcs = inner.funcs.lock().0.clone();
            let hz = pto_hal::Clock::freq_hz(&inner.dev);
            let edges = self.graph.as_deref().map(|g| super::resident::Plan::edges(&g.image));
            super::trace::collect(&inner.dev, hz, &funcs, &d, l, edges.as_deref()).map(Some)
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
            // A kernel's fault names its binary in the detail word: name the kernel.
            if err.site == Site::Kernel && err.code == ErrorCode::Device(DeviceFault::KernelFault) {
                err.kernel = inner.funcs.lock().0.name_of_binary(err.detail).map(std::string::String::from);
            }
            // The trace of a failed run is a diagnostic: one that cannot be read is left out.
            err.trace = trace().ok().flatten().map(std::boxed::Box::new);
            // So are the capture counters (what the boundary capture did before the fault).
            err.capture = capture_report(&inner.dev, &d.config).ok().flatten().map(std::boxed::Box::new);
            // Surface (and clear) any program status too, so it cannot leak into the next run;
            // the latched fault is the better report, so the stream's own error is dropped.
            let _ = self.sync_streams(inner);
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
            self.sync_streams(inner)?;
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
        // In nanoseconds: one flow-control wait is often shorter than a microsecond.
        let flow_ns = pto_hal::Clock::nanos_from_ticks(&inner.dev, d.run.orch_flow_ticks);
        let trb = d.config.runtime == RUNTIME_TRB && self.runtime == RuntimeKind::TensormapRing;
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
            checks: P::checks(&inner.dev),
            orchestration: trb.then(|| Duration::from_micros(micros)),
            orchestration_flow_wait: trb.then(|| Duration::from_nanos(flow_ns)),
        })
    }
}
