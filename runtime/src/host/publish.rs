//! Launch images: the descriptor and the graph (or orchestration) image of one run, written
//! into its pipeline slot synchronously and exactly once before the run's kernels are
//! submitted.

use std::format;
use std::string::ToString;
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr, HostPlatform};
use zerocopy::IntoBytes;

use super::config::{CheckedConfig, CheckedRings};
use super::error::platform;
use super::resident::{CaptureParams, Choice};
use super::{Device, Error, LegacyReason, Program, RunConfig};
use crate::graph::{GraphError, Placement};
use crate::layout::{
    DESC_MAGIC, DumpLayout, FuncEntry, LAYOUT_VERSION, LaunchConfig, LaunchDesc, ORCH_MAGIC, OrchImage, OrchTensor,
    RINGS, RingSpec, SlotArena, TraceLayout, orch_flags,
};
use crate::orch::OrchArgs;

/// Device memory of one run slot: the arena (descriptor, handshakes, gates, payloads), the
/// image buffer and the device-side runtime's ring heaps, each kept and reused across runs.
pub(crate) struct SlotMem {
    pub(crate) arena: GmAddr,
    pub(crate) image: Option<(GmAddr, u64)>,
    /// The device-side runtime's ring heaps (one allocation, cut per ring).
    pub(crate) heaps: Option<(GmAddr, u64)>,
    /// Trace rings (allocated by the first traced run of the slot, kept for later ones).
    pub(crate) trace: Option<(GmAddr, u64)>,
    /// Args-dump lanes (allocated by the first dumping run of the slot, kept for its later
    /// dumping runs, like the trace rings; a run without the dump neither allocates nor
    /// touches them).
    pub(crate) dump_mem: Option<(GmAddr, u64)>,
    /// The collector of the dumping run published in this slot (taken by its launch).
    pub(crate) dump: Option<DumpRegion>,
    /// The host memory the slot's last collector filled, for its next one.
    pub(crate) dump_buffers: super::dump::CollectorBuffers,
    /// The resident executor's scheduler state (allocated by the first resident run of the
    /// slot, kept for its later ones; rewritten whole before every resident run).
    pub(crate) resident: Option<(GmAddr, u64)>,
}

/// The collector that will drain a dumping run's lanes.
pub(crate) struct DumpRegion {
    pub(crate) collector: super::dump::Collector,
}

/// What a published run needs to know about itself (besides its checked configuration).
pub(crate) struct Publish<'a> {
    pub(crate) bytes: &'a [u8],
    /// What the host decided about a host-built graph at build (`None` on the device-side
    /// runtime).
    pub(crate) plan: Option<&'a super::resident::Plan>,
    pub(crate) task_count: u32,
    pub(crate) runtime: u32,
}

/// A slot's allocation `kept` if it holds `need` bytes; otherwise it is freed and replaced by a
/// fresh one of `cap` bytes (`what` names it in errors).
fn reuse_or_alloc<D: DeviceMemory>(
    dev: &D,
    kept: &mut Option<(GmAddr, u64)>,
    need: u64,
    cap: u64,
    what: &'static str,
) -> Result<GmAddr, Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    if let Some((a, have)) = *kept {
        if have >= need {
            return Ok(a);
        }
        dev.free(a).map_err(|e| Error::platform(what, e))?;
        *kept = None;
    }
    let a = dev.alloc(cap, 64).map_err(|e| Error::platform(what, e))?;
    *kept = Some((a, cap));
    Ok(a)
}

impl<P: HostPlatform> Device<P> {
    /// The orchestration image of a device-side run: its header (without ring addresses yet)
    /// and the whole image's bytes (the header's place at the front).
    pub(crate) fn orch_image(
        &self,
        program: &Program,
        args: &OrchArgs,
        cfg: &RunConfig,
        rings: &CheckedRings,
    ) -> Result<(OrchImage, Vec<u8>), Error> {
        let funcs = self.inner.funcs.lock().0.clone();
        let mut tensors = Vec::with_capacity(args.tensors().len());
        for (i, t) in args.tensors().iter().enumerate() {
            let Placement::External(addr) = t.buffer.placement else {
                return Err(
                    GraphError::UnusableProgramArg { arg: i as u32, why: crate::graph::TensorProblem::Forged }.into()
                );
            };
            tensors.push(OrchTensor {
                buffer_id: t.buffer.id,
                addr: addr.0,
                bytes: t.buffer.bytes,
                offset: t.offset,
                dtype: t.buffer.dtype.into(),
                ndims: t.ndims,
                shape: t.shape,
                strides: t.strides,
            });
        }
        let head = OrchImage {
            magic: ORCH_MAGIC,
            version: LAYOUT_VERSION,
            program: program.handle,
            total_len: 0,
            func_count: funcs.len() as u32,
            tensor_count: tensors.len() as u32,
            scalar_count: args.scalars().len() as u32,
            tensormap_entries: cfg.rings.tensormap_entries,
            wait_ticks: rings.wait_ticks,
            flags: if cfg.aiv_only { orch_flags::AIV_ONLY } else { 0 },
            reserved: 0,
            rings: [RingSpec::default(); RINGS],
        };
        let mut bytes = head.as_bytes().to_vec();
        for id in 0..funcs.len() {
            let e = match funcs.get(id as u16) {
                Some(f) => FuncEntry { aic: f.aic.unwrap_or(0), aiv: f.aiv.unwrap_or(0) },
                None => FuncEntry::default(),
            };
            bytes.extend_from_slice(e.as_bytes());
        }
        for t in &tensors {
            bytes.extend_from_slice(t.as_bytes());
        }
        for v in args.scalars() {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        Ok((head, bytes))
    }

    /// Place the ring heaps of a device-side run (reusing the slot's heap allocation when it
    /// is large enough), fill in the image's ring table and publish.
    pub(crate) fn publish_trb(
        &self,
        slot: usize,
        (mut head, mut image): (OrchImage, Vec<u8>),
        cfg: &RunConfig,
        checked: &CheckedConfig,
        rings: &CheckedRings,
    ) -> Result<u64, Error> {
        let need = rings.heap_bytes;
        let base = {
            let mut mem = self.inner.slot_mem[slot].lock();
            reuse_or_alloc(&self.inner.dev, &mut mem.heaps, need, need, "ring heap")?
        };
        head.total_len = image.len() as u64;
        let mut at = base.0;
        for r in 0..RINGS {
            head.rings[r] = RingSpec {
                window: cfg.rings.window[r],
                dep_pool: cfg.rings.dep_pool[r],
                heap: cfg.rings.heap[r],
                heap_base: at,
            };
            // Within the allocation of `need` bytes just made: cannot overflow.
            at += cfg.rings.heap[r];
        }
        image[..core::mem::size_of::<OrchImage>()].copy_from_slice(head.as_bytes());
        let what = Publish { bytes: &image, plan: None, task_count: 0, runtime: crate::layout::RUNTIME_TRB };
        self.publish(slot, what, cfg, checked)
    }

    /// When the run dumps: the slot's args-dump lanes (kept from an earlier dumping run or
    /// allocated), their header for run `epoch`, and the collector that drains them into the
    /// dump directory. The region's device address, or 0 with the dump off.
    fn dump_region(
        &self,
        mem: &mut SlotMem,
        checked: &CheckedConfig,
        cfg: &RunConfig,
        runtime: u32,
        epoch: u64,
    ) -> Result<u64, Error> {
        let inner = &*self.inner;
        let dev = &inner.dev;
        let (threads, watchdog_ticks) = (checked.threads(), checked.watchdog_ticks());
        Ok(match checked.dump() {
            None => 0,
            Some(checked_dump) => {
                let (level, arena, need) = (checked_dump.level, checked_dump.arena, checked_dump.region_bytes);
                let h = super::dump::header(level, threads, arena, watchdog_ticks / 2, epoch);
                let a = reuse_or_alloc(dev, &mut mem.dump_mem, need, need, "args-dump lanes")?;
                let l = DumpLayout { base: a.0, header: h };
                super::dump::initialize(dev, &l).map_err(platform("args-dump region initialization"))?;
                let dir = cfg.dump_dir.clone().unwrap_or_else(|| {
                    std::env::temp_dir().join("pto-dump").join(format!(
                        "run-{}-{}-{epoch}",
                        std::process::id(),
                        inner.allocs.device()
                    ))
                });
                // The manifest's records reach its file while the run is in flight, after the
                // head a successful run writes.
                let runtime = crate::orch::RuntimeKind::of_launch(runtime);
                let expected = super::dump::RunInfo { epoch, runtime, complete: true };
                match super::dump::Collector::create(l, level, expected, &dir, core::mem::take(&mut mem.dump_buffers)) {
                    Ok(collector) => mem.dump = Some(DumpRegion { collector }),
                    Err(source) => return Err(Error::DumpFiles { path: dir, why: source.to_string() }),
                }
                a.0
            }
        })
    }

    /// Write the run's image and descriptor into `slot`; returns the run's epoch. Every value
    /// derived from the configuration comes checked (`checked`); `cfg` gives the rest.
    pub(crate) fn publish(
        &self,
        slot: usize,
        what: Publish<'_>,
        cfg: &RunConfig,
        checked: &CheckedConfig,
    ) -> Result<u64, Error> {
        let inner = &*self.inner;
        let dev = &inner.dev;
        let (clusters, threads) = (checked.clusters(), checked.threads());
        let watchdog_ticks = checked.watchdog_ticks();
        let mut mem = inner.slot_mem[slot].lock();
        let need = what.bytes.len() as u64;
        let cap = need.checked_next_power_of_two().unwrap_or(need).max(4096);
        let image = reuse_or_alloc(dev, &mut mem.image, need, cap, "image")?;
        let arena = mem.arena;
        let trace = match checked.trace() {
            Some((core_records, thread_records)) => {
                let tl = TraceLayout { base: 0, workers: clusters * 3, threads, core_records, thread_records };
                let need = tl.bytes();
                reuse_or_alloc(dev, &mut mem.trace, need, need, "trace rings")?.0
            }
            None => 0,
        };
        let layout = SlotArena { workers: inner.topo.workers() };
        let epoch = inner.epoch.fetch_add(1, crate::sync::Ordering::Relaxed) + 1;
        // A prepared run that was never launched may have left its collector behind.
        mem.dump = None;
        let dump = self.dump_region(&mut mem, checked, cfg, what.runtime, epoch)?;
        // The executor: the device-side runtime dispatches from the AICPU; a host-built graph
        // runs where the checker decided (resident unless asked otherwise or it has a shape the
        // resident executor does not run).
        let choice = match what.plan {
            Some(plan) => {
                let capture = checked.dump().map(|d| CaptureParams {
                    level: d.level,
                    max_bytes: capture_step_bytes(d.arena),
                    budget: watchdog_ticks / 2,
                });
                Choice::of(checked.executor(), plan, what.bytes, capture, clusters)
            }
            None => Choice::legacy(LegacyReason::DeviceSideRuntime, crate::layout::executor_mode::LEGACY_GRAPH),
        };
        let (resident, resident_entries, capture) = upload_resident(dev, &mut mem, &choice)?;
        let (executor_reason, executor_detail) = choice.reason.map_or((0, u32::MAX), |r| r.code());
        let config = LaunchConfig {
            magic: DESC_MAGIC,
            version: LAYOUT_VERSION,
            epoch,
            clusters,
            workers: clusters * 3,
            aicpu_threads: threads,
            task_count: what.task_count,
            physical_cores: inner.topo.workers(),
            runtime: what.runtime,
            image: image.0,
            image_len: need,
            handshakes: arena.0 + layout.handshakes(),
            gates: arena.0 + layout.gates(),
            payloads: arena.0 + layout.payloads(),
            watchdog_ticks,
            exit_ticks: checked.exit_ticks(),
            core_wait_ticks: checked.core_wait_ticks(),
            trace,
            trace_core_records: checked.trace().map_or(0, |(c, _)| c),
            trace_thread_records: checked.trace().map_or(0, |(_, t)| t),
            dump,
            executor: choice.mode,
            executor_reason,
            executor_detail,
            resident_entries,
            resident,
            capture,
            reserved: [0; 4],
        };
        LaunchImage::prepare(config, what.bytes).publish(dev, arena, image)?;
        tracing::debug!(
            target: "pto::host",
            "publish: slot {slot} epoch {epoch} image {} bytes at {:#x}, trace {}, dump {:?}, executor {}",
            what.bytes.len(),
            image.0,
            if checked.trace().is_some() { "on" } else { "off" },
            cfg.dump,
            choice.reason.map_or_else(|| std::string::String::from("resident"), |r| format!("legacy ({r})"))
        );
        Ok(epoch)
    }
}

/// On the resident executor: the scheduler state `choice` built, uploaded into the slot's
/// resident allocation, then (when the dump is on) the capture region right after it. The
/// state's address, its inbox entries and the capture region's address; zeros on the legacy
/// executor.
fn upload_resident<D: DeviceMemory>(dev: &D, mem: &mut SlotMem, choice: &Choice) -> Result<(u64, u32, u64), Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    Ok(match &choice.state {
        None => (0, 0, 0),
        Some(state) => {
            let state_len = state.bytes.len() as u64;
            let need = state_len + choice.capture.as_ref().map_or(0, |c| c.len() as u64);
            let at = reuse_or_alloc(dev, &mut mem.resident, need, need, "resident scheduler state")?;
            dev.copy_h2d(at, &state.bytes).map_err(platform("resident scheduler state upload"))?;
            let capture = match &choice.capture {
                None => 0,
                Some(c) => {
                    let c_at = at.offset(state_len);
                    dev.copy_h2d(c_at, c).map_err(platform("capture region upload"))?;
                    c_at.0
                }
            };
            (at.0, state.entries, capture)
        }
    })
}

/// The bytes of one run's launch: descriptor head and graph image. Published exactly once
/// (the method consumes it), synchronously, before the run's kernels are submitted.
struct LaunchImage<'g> {
    desc: LaunchDesc,
    graph: &'g [u8],
}

impl<'g> LaunchImage<'g> {
    fn prepare(config: LaunchConfig, graph: &'g [u8]) -> Self {
        LaunchImage { desc: LaunchDesc { config, ..LaunchDesc::default() }, graph }
    }

    fn publish<D: DeviceMemory>(self, dev: &D, desc_at: GmAddr, image_at: GmAddr) -> Result<(), Error>
    where
        D::Error: std::error::Error + Send + Sync + 'static,
    {
        dev.copy_h2d(image_at, self.graph).map_err(platform("image upload"))?;
        // Descriptor last: the fatal latch, counters and fault text are cleared with it.
        dev.copy_h2d(desc_at, self.desc.as_bytes()).map_err(platform("descriptor upload"))
    }
}

/// Most payload bytes one service step of the resident route's boundary capture copies, for a
/// dump arena of `arena` bytes: 64 KiB, or a sixteenth of a smaller arena (at least 256), so a
/// record of a small arena also takes several steps.
pub(crate) fn capture_step_bytes(arena: u64) -> u64 {
    (arena / 16).clamp(256, 64 * 1024)
}
