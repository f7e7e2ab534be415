//! Preparing and launching a run: publish its launch image into a reserved slot, then submit
//! the AICore and AICPU programs on their streams.

use parking_lot::Mutex;
use std::format;
use std::time::Instant;

use pto_hal::{AicoreStream, AicpuStream, HostPlatform, Stream};

use super::build::{Graph, GraphCore};
use super::config::CheckedConfig;
use super::error::platform;
use super::memory::Pins;
use super::publish::Publish;
use super::{Device, Error, Program, RunConfig};
use crate::graph::GraphError;
use crate::layout::RUNTIME_HBG;
use crate::orch::{OrchArgs, RuntimeKind};
use std::sync::Arc;

use super::fence::{Dumping, InFlight, RunHandle, timeout_or};
use super::report::RunReport;
use super::trace::{HostPhase, HostTimeline};
use super::turns::Reserved;

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
                let prepared = self.prepare(&graph, cfg)?;
                // The run keeps the graph's state; the graph itself is this run's only.
                drop(graph);
                Ok(prepared)
            }
            RuntimeKind::TensormapRing => {
                let (checked, rings) = self.check_program_run(cfg)?;
                self.check_program(program)?;
                self.check_program_args(args)?;
                let building = Instant::now();
                let image = tracing::debug_span!(target: "pto::host", "build", runtime = "trb")
                    .in_scope(|| self.orch_image(program, args, cfg, &rings))?;
                let mut host = HostTimeline::default();
                host.until_now(HostPhase::Build, building);
                // The program's tensors stay allocated until the run's fence.
                let pins = self
                    .inner
                    .allocs
                    .pin(args.tensors().iter().map(|t| &t.buffer))
                    .map_err(|(i, why)| GraphError::UnusableProgramArg { arg: i as u32, why })?;
                let mut prepared = self.prepare_in_slot(&checked, None, true, pins, host, |slot| {
                    self.publish_trb(slot, image, cfg, &checked, &rings)
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
        let graph = &graph.core;
        if !std::sync::Arc::ptr_eq(&graph.dev, &self.inner) {
            return Err(Error::ForeignHandle {
                what: "graph",
                name: format!("of {} tasks", graph.task_count),
                owner: graph.dev.allocs.device(),
                device: self.inner.allocs.device(),
            });
        }
        let checked = self.check_graph_run(cfg, &graph.plan)?;
        graph.check_placeable(cfg, checked.clusters(), checked.threads())?;
        let pins = self.inner.allocs.pin(graph.externals.iter().map(|(b, _, _)| b)).map_err(|(i, why)| {
            let (_, task, arg) = graph.externals[i];
            GraphError::UnusableTensor { task, arg, why }
        })?;
        let tasks = Some(graph.task_count);
        // The graph's build is a host phase of its first run.
        let mut host = HostTimeline::default();
        if let Some((start, end)) = graph.take_build() {
            host.record(HostPhase::Build, start, end);
        }
        let mut prepared = self.prepare_in_slot(&checked, tasks, wait, pins, host, |slot| {
            let what = Publish {
                bytes: &graph.image,
                plan: Some(&graph.plan),
                task_count: graph.task_count,
                runtime: RUNTIME_HBG,
            };
            self.publish(slot, what, cfg, &checked)
        })?;
        prepared.graph = Some(graph.clone());
        Ok(prepared)
    }

    /// Reserve a pipeline slot and `publish` the run's launch image into it (returning the
    /// epoch); the slot and the pins are given back when anything fails. Both are host phases
    /// of the run, added to `host`.
    fn prepare_in_slot<'d>(
        &'d self,
        checked: &CheckedConfig,
        tasks: Option<u32>,
        wait: bool,
        pins: Pins,
        mut host: HostTimeline,
        publish: impl FnOnce(usize) -> Result<u64, Error>,
    ) -> Result<PreparedRun<'d, P>, Error> {
        let (clusters, threads) = (checked.clusters(), checked.threads());
        let reserving = Instant::now();
        let reserved = match tracing::debug_span!(target: "pto::host", "reserve", wait)
            .in_scope(|| self.inner.reserve_slot(wait))
        {
            Ok(r) => r,
            Err(e) => {
                self.inner.release_pins(pins);
                return Err(e);
            }
        };
        host.until_now(HostPhase::Reserve, reserving);
        let publishing = Instant::now();
        let published = tracing::debug_span!(target: "pto::host", "publish", slot = reserved.slot)
            .in_scope(|| publish(reserved.slot));
        match published {
            Ok(epoch) => {
                host.until_now(HostPhase::Publish, publishing);
                self.inner.start_lease(&reserved);
                tracing::debug!(
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
                    aicore: checked.aicore(),
                    graph: None,
                    pins: Some(pins),
                    host,
                })
            }
            Err(e) => {
                tracing::debug!(target: "pto::host", "prepare: slot {} refused: {e}", reserved.slot);
                self.inner.free_slot(&reserved);
                self.inner.release_pins(pins);
                Err(e)
            }
        }
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
    /// The AICore program it launches (`RunConfig::aicore`).
    aicore: pto_hal::Handle,
    /// The host-built graph this run runs: its heap and plan stay alive until the run's
    /// fence, whoever drops the [`Graph`].
    graph: Option<Arc<GraphCore<P>>>,
    /// The device tensors this run names, held until its fence.
    pins: Option<Pins>,
    /// The run's host phases so far (build, reserve, publish).
    host: HostTimeline,
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
        let span = tracing::debug_span!(target: "pto::host", "launch", slot = reserved.slot, epoch = self.epoch);
        let _entered = span.enter();
        let mut host = core::mem::take(&mut self.host);
        // The launch anchor: the device counter as the host submits (see `trace::host`).
        host.anchor(&inner.dev);
        let started = Instant::now();
        let mut s = inner.lock_streams();
        // Whether anything reached the device: a launch that returns an error submitted nothing
        // (`pto_hal::AicoreStream`), so a failure of the first submission leaves no program
        // of this run on either stream.
        let mut submitted = false;
        let launched = (|| {
            s.aicore.launch_aicore(self.aicore, desc, self.clusters).map_err(platform("AICore launch"))?;
            submitted = true;
            // The graph for a checking platform, once the run exists on the device (a launch
            // refused before submission leaves no record behind); its AICore launch cannot end
            // before the AICPU launch below has run.
            if let Some(g) = &self.graph {
                g.note_run(desc);
            }
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
                host.until_now(HostPhase::Launch, started);
                tracing::debug!(
                    target: "pto::host",
                    "launch: slot {} epoch {} runtime {} clusters {} threads {}",
                    reserved.slot,
                    self.epoch,
                    self.runtime,
                    self.clusters,
                    self.threads
                );
                let slot = reserved.slot;
                let run = InFlight {
                    slot: reserved,
                    epoch: self.epoch,
                    desc,
                    cpu_ev,
                    core_ev,
                    started,
                    tasks: self.tasks,
                    runtime: self.runtime,
                    pins: Some(pins),
                    graph: self.graph.take(),
                    dump,
                    host: Mutex::new(host),
                };
                *inner.in_flight[slot].lock() = Some(run);
                Ok(RunHandle { dev: self.dev, slot, epoch: self.epoch, waited: false })
            }
            Err(e) if !submitted => {
                // Nothing of this run reached the device: it ends as a prepared run that was
                // never launched — its slot, pins and graph are given back, the device stays
                // usable.
                tracing::debug!(target: "pto::host", "launch: slot {} refused before submission: {e}", reserved.slot);
                inner.free_slot(&reserved);
                inner.release_pins(pins);
                Err(e)
            }
            Err(e) => {
                // A half-submitted launch cannot be proven complete: the device is unusable,
                // and the tensors it names stay allocated.
                inner.mark_unusable(format!("launch failed: {e}"));
                inner.free_slot(&reserved);
                core::mem::forget(pins);
                core::mem::forget(self.graph.take());
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
