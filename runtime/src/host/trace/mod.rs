//! Swimlane traces of a run: what the device recorded (`crate::trace`), collected after the
//! run's fence into a [`Trace`], and exported as Chrome trace-event JSON (which Perfetto and
//! `chrome://tracing` open; the document's types, which also read it back, are
//! [`super::documents::chrome`]) or as an SVG swimlane (which a browser opens).
//!
//! Turn it on per run with [`RunConfig::with_trace`](super::RunConfig::with_trace); the trace
//! arrives in [`RunReport::trace`](super::RunReport::trace).
//!
//! The rooms: `readback` (reading the rings back and assembling the [`Trace`]), `host` (the
//! host's phases of the run and how their instants map onto the device's ticks),
//! `chrome_export` ([`Trace::to_chrome`]) and `svg` ([`Trace::to_svg`]); this file holds the
//! trace itself.

mod chrome_export;
mod host;
mod readback;
mod svg;

use std::collections::BTreeMap;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

pub use super::documents::chrome::{HostPhase, Phase};
use crate::orch::RuntimeKind;

pub(super) use host::HostTimeline;
pub(super) use readback::collect;
pub use svg::SvgOptions;

/// Records per AICore ring when [`RunConfig::trace_records`](super::RunConfig::trace_records)
/// is not set.
pub const DEFAULT_CORE_RECORDS: u32 = 2048;
/// Records per AICPU-thread ring by default.
pub const DEFAULT_THREAD_RECORDS: u32 = 16384;

/// One subtask (a block of one lane of one task) as it ran on a core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubtaskTrace {
    /// Task id (as kernels see it).
    pub task: u32,
    /// SPMD block.
    pub block: u32,
    /// Lane: 0 = AIC, 1 = AIV lane 0, 2 = AIV lane 1.
    pub lane: u8,
    /// Worker index of the core.
    pub core: u32,
    /// Func id of the kernel, when its binary is registered on this device.
    pub func: Option<u16>,
    /// Tick at which the AICPU wrote the dispatch register, or (resident executor) at which
    /// the core found the subtask in its lane's dispatch slot (`None` if a ring overflowed).
    pub dispatch: Option<u64>,
    /// Tick at which the core started the subtask (after its acknowledgement).
    pub start: u64,
    /// Tick at which the core finished it (outputs published, before FIN).
    pub end: u64,
    /// Tick at which the AICPU saw its FIN, or (resident executor) at which the core had
    /// released the task's consumers (`None` if a ring overflowed).
    pub completion: Option<u64>,
    /// AICPU thread that dispatched it (`None` on the resident executor, where none does).
    pub thread: Option<u32>,
}

/// One phase of one AICPU thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseTrace {
    /// AICPU thread index.
    pub thread: u32,
    /// What it did.
    pub phase: Phase,
    /// First tick.
    pub start: u64,
    /// Last tick.
    pub end: u64,
}

/// One phase of the host's work for the run, on the device's time axis: its instants mapped
/// to device ticks through the samples of the device counter the host took at launch and
/// after the fence (see `docs/profiling.md`, "Host and device on one axis").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPhaseTrace {
    /// What the host did.
    pub phase: HostPhase,
    /// First tick.
    pub start: u64,
    /// Last tick.
    pub end: u64,
}

/// Who owns a trace ring.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RingOwner {
    /// An AICore (worker index).
    Core(u32),
    /// An AICPU thread.
    Thread(u32),
}

/// How one ring fared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingStatus {
    /// Its owner.
    pub owner: RingOwner,
    /// Records stored.
    pub records: u64,
    /// Records that did not fit (the ring was full).
    pub dropped: u64,
    /// Whether the owner closed the ring in this run; an unclosed ring's records are unknown.
    pub closed: bool,
}

/// A run's swimlane trace.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trace {
    /// The board's counter frequency: ticks per second.
    pub freq_hz: u64,
    /// The runtime the run used.
    pub runtime: RuntimeKind,
    /// Clusters launched (worker `w < clusters` is an AIC, the others AIVs).
    pub clusters: u32,
    /// AICPU threads launched.
    pub threads: u32,
    /// Every subtask that ran on a core, by start tick.
    pub subtasks: Vec<SubtaskTrace>,
    /// Every recorded AICPU phase.
    pub phases: Vec<PhaseTrace>,
    /// Registered func names by id (those the subtasks name).
    pub funcs: BTreeMap<u16, String>,
    /// Producer → consumer task edges: from its image on the host-built graph; on the
    /// device-side runtime, those its orchestrator recorded in its trace ring as it found them
    /// (`None` if that ring did not close; fewer than all if it dropped records, see
    /// [`Trace::edges_complete`]).
    pub edges: Option<Vec<(u32, u32)>>,
    /// Every ring: records, drops, whether it was closed.
    pub rings: Vec<RingStatus>,
    /// The host's phases of the run (build, reserve, publish, launch, fence, collect, dump),
    /// by start tick, on the device's time axis.
    pub host: Vec<HostPhaseTrace>,
}

impl Trace {
    /// Records that did not fit in their rings, over all rings.
    pub fn dropped(&self) -> u64 {
        self.rings.iter().map(|r| r.dropped).sum()
    }

    /// Rings whose owner never closed them (their records are unknown).
    pub fn unclosed(&self) -> usize {
        self.rings.iter().filter(|r| !r.closed).count()
    }

    /// Whether nothing was lost: every ring closed, nothing dropped.
    pub fn is_complete(&self) -> bool {
        self.dropped() == 0 && self.unclosed() == 0
    }

    /// Whether [`Trace::edges`] holds every dependency of the run: always on the host-built
    /// graph; on the device-side runtime when its orchestrator's ring (the highest AICPU
    /// thread's) closed without dropping records.
    pub fn edges_complete(&self) -> bool {
        match self.runtime {
            RuntimeKind::HostBuiltGraph => self.edges.is_some(),
            RuntimeKind::TensormapRing => {
                let orch = RingOwner::Thread(self.threads.saturating_sub(1));
                self.edges.is_some() && self.rings.iter().any(|r| r.owner == orch && r.closed && r.dropped == 0)
            }
        }
    }

    /// Workers launched.
    pub fn workers(&self) -> u32 {
        self.clusters * 3
    }

    /// The earliest and latest device tick of the trace: subtasks (with their dispatch and
    /// completion ticks) and AICPU phases (`(0, 0)` when nothing was recorded). The SVG's time
    /// axis.
    pub fn device_window(&self) -> (u64, u64) {
        let s = self.subtasks.iter().map(|s| s.dispatch.unwrap_or(s.start).min(s.start));
        let first = s.chain(self.phases.iter().map(|p| p.start)).min().unwrap_or(0);
        let s = self.subtasks.iter().map(|s| s.completion.unwrap_or(s.end).max(s.end));
        let last = s.chain(self.phases.iter().map(|p| p.end)).max().unwrap_or(0);
        (first, last)
    }

    /// The earliest tick in the trace, device records and host phases alike (the time origin
    /// of the Chrome export).
    pub fn origin(&self) -> u64 {
        let host = self.host.iter().map(|h| h.start).min();
        let device = (!self.subtasks.is_empty() || !self.phases.is_empty()).then(|| self.device_window().0);
        host.into_iter().chain(device).min().unwrap_or(0)
    }

    /// The latest tick in the trace, device records and host phases alike.
    pub fn last(&self) -> u64 {
        self.host.iter().map(|h| h.end).chain([self.device_window().1]).max().unwrap_or(0)
    }

    /// The run's span: from the start of its first subtask to the end of its last (`None`
    /// without subtasks). What "span" means in the SVG's title line and in `pto trace
    /// --summary` ([`ChromeTrace::span`](super::documents::chrome::ChromeTrace::span)).
    pub fn span(&self) -> Option<(u64, u64)> {
        let start = self.subtasks.iter().map(|s| s.start).min()?;
        let end = self.subtasks.iter().map(|s| s.end).max()?;
        Some((start, end))
    }

    /// Microseconds from the origin to `tick`.
    pub fn micros(&self, tick: u64) -> f64 {
        tick.saturating_sub(self.origin()) as f64 * 1e6 / self.freq_hz.max(1) as f64
    }

    fn us(&self, origin: u64, tick: u64) -> f64 {
        tick.saturating_sub(origin) as f64 * 1e6 / self.freq_hz.max(1) as f64
    }

    /// Name of worker `w`'s track.
    pub fn core_name(&self, w: u32) -> String {
        if w < self.clusters {
            format!("AIC {w} (cluster {w})")
        } else {
            format!("AIV {w} (cluster {})", (w - self.clusters) / 2)
        }
    }

    /// Name of AICPU thread `t`'s track.
    pub fn thread_name(&self, t: u32) -> String {
        if self.runtime == RuntimeKind::TensormapRing && t + 1 == self.threads {
            format!("AICPU {t} (orchestrator)")
        } else {
            format!("AICPU {t} (scheduler)")
        }
    }

    /// The func name of a subtask (`func N`, or `bin?` when the binary is not registered).
    pub fn func_name(&self, s: &SubtaskTrace) -> String {
        match s.func {
            Some(f) => self.funcs.get(&f).cloned().unwrap_or_else(|| format!("func {f}")),
            None => "unknown kernel".to_string(),
        }
    }
}
