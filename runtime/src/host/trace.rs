//! Swimlane traces of a run: what the device recorded ([`crate::trace`]), collected after the
//! run's fence into a [`Trace`], and exported as Chrome trace-event JSON (which Perfetto and
//! `chrome://tracing` open; the document's types, which also read it back, are
//! [`super::documents::chrome`]) or as an SVG swimlane (which a browser opens).
//!
//! Turn it on per run with [`RunConfig::with_trace`](super::RunConfig::with_trace); the trace
//! arrives in [`RunReport::trace`](super::RunReport::trace).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr};
use zerocopy::FromBytes;

use super::Error;
pub use super::documents::chrome::Phase;
use super::documents::chrome::{
    self, AICORE_PID, AICPU_PID, BindingPoint, ChromeTrace, Dep, Event, FlowEnd, FlowStart, Flows, Metadata, NameArgs,
    Named, OtherData, PhaseSlice, Producer, Slice, SortArgs, Sorted, TaskArgs, TaskSlice, TimeUnit,
};
use super::error::platform;
use crate::hbg::FuncTable;
use crate::layout::{LaunchDesc, RUNTIME_HBG, TraceHeader, TraceLayout, TraceRecord, trace_kind};
use crate::orch::RuntimeKind;

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

    /// The earliest tick in the trace (the time origin of the exports).
    pub fn origin(&self) -> u64 {
        let s = self.subtasks.iter().map(|s| s.dispatch.unwrap_or(s.start).min(s.start));
        s.chain(self.phases.iter().map(|p| p.start)).min().unwrap_or(0)
    }

    /// The latest tick in the trace.
    pub fn last(&self) -> u64 {
        let s = self.subtasks.iter().map(|s| s.completion.unwrap_or(s.end).max(s.end));
        s.chain(self.phases.iter().map(|p| p.end)).max().unwrap_or(0)
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

    /// The Chrome trace-event document (the object form, [`ChromeTrace`]): one process for the
    /// AICores with a track per core, one for the AICPU with a track per thread, a complete
    /// (`X`) slice per subtask and per phase, times in microseconds from the first recorded
    /// tick, and a flow arrow (`s` → `f`, `bp: "e"`) per producer → consumer edge when the
    /// edges are known. `otherData` carries the format version, the counter frequency, drops and whether
    /// flows are known.
    pub fn to_chrome(&self) -> ChromeTrace {
        let origin = self.origin();
        let mut ev: Vec<Event> = Vec::new();
        let named = |pid, tid, name: String| Named { pid, tid, args: NameArgs { name } };
        let sorted = |pid, tid, sort_index| Sorted { pid, tid, args: SortArgs { sort_index } };
        ev.push(Event::Metadata(Metadata::ProcessName(named(AICORE_PID, 0, "AICore".into()))));
        ev.push(Event::Metadata(Metadata::ProcessSortIndex(sorted(AICORE_PID, 0, 1))));
        ev.push(Event::Metadata(Metadata::ProcessName(named(AICPU_PID, 0, "AICPU".into()))));
        ev.push(Event::Metadata(Metadata::ProcessSortIndex(sorted(AICPU_PID, 0, 2))));
        for w in 0..self.workers() {
            ev.push(Event::Metadata(Metadata::ThreadName(named(AICORE_PID, w, self.core_name(w)))));
            ev.push(Event::Metadata(Metadata::ThreadSortIndex(sorted(AICORE_PID, w, w))));
        }
        for t in 0..self.threads {
            ev.push(Event::Metadata(Metadata::ThreadName(named(AICPU_PID, t, self.thread_name(t)))));
        }
        for s in &self.subtasks {
            ev.push(Event::Slice(Slice::Task(TaskSlice {
                name: self.func_name(s),
                pid: AICORE_PID,
                tid: s.core,
                ts: self.us(origin, s.start),
                dur: self.us(s.start, s.end),
                args: TaskArgs {
                    task: s.task,
                    block: s.block,
                    lane: s.lane,
                    func: s.func,
                    start_tick: s.start,
                    end_tick: s.end,
                    dispatch_us: s.dispatch.map(|d| self.us(origin, d)),
                    dispatch_tick: s.dispatch,
                    completion_us: s.completion.map(|c| self.us(origin, c)),
                    completion_tick: s.completion,
                    aicpu_thread: s.thread,
                },
            })));
        }
        for p in &self.phases {
            ev.push(Event::Slice(Slice::Phase(PhaseSlice {
                name: p.phase,
                pid: AICPU_PID,
                tid: p.thread,
                ts: self.us(origin, p.start),
                dur: self.us(p.start, p.end),
            })));
        }
        if let Some(edges) = &self.edges {
            // One arrow from the producer's first subtask to each consumer's first subtask.
            let mut first: HashMap<u32, &SubtaskTrace> = HashMap::new();
            for s in &self.subtasks {
                first
                    .entry(s.task)
                    .and_modify(|f| {
                        if s.start < f.start {
                            *f = s
                        }
                    })
                    .or_insert(s);
            }
            for (id, &(p, c)) in edges.iter().enumerate() {
                let (Some(ps), Some(cs)) = (first.get(&p), first.get(&c)) else { continue };
                let id = id as u64;
                ev.push(Event::FlowStart(FlowStart {
                    cat: Dep::Dep,
                    name: Dep::Dep,
                    id,
                    pid: AICORE_PID,
                    tid: ps.core,
                    ts: self.us(origin, ps.start),
                }));
                ev.push(Event::FlowEnd(FlowEnd {
                    bp: BindingPoint::Enclosing,
                    cat: Dep::Dep,
                    name: Dep::Dep,
                    id,
                    pid: AICORE_PID,
                    tid: cs.core,
                    ts: self.us(origin, cs.start),
                }));
            }
        }
        ChromeTrace {
            trace_events: ev,
            display_time_unit: TimeUnit::Nanoseconds,
            other_data: OtherData {
                format_version: chrome::FORMAT_VERSION,
                producer: Producer::PtoRt,
                runtime: self.runtime,
                counter_hz: self.freq_hz,
                origin_tick: origin,
                clusters: self.clusters,
                aicpu_threads: self.threads,
                dropped_records: self.dropped(),
                unclosed_rings: self.unclosed() as u64,
                flows: match (self.runtime, self.edges_complete()) {
                    (_, false) if self.edges.is_none() => Flows::Unknown,
                    (_, false) => Flows::Partial,
                    (RuntimeKind::HostBuiltGraph, true) => Flows::FromImage,
                    (RuntimeKind::TensormapRing, true) => Flows::Recorded,
                },
            },
        }
    }

    /// [`Trace::to_chrome`] as JSON text: what `pto run --trace` writes and Perfetto opens.
    pub fn to_chrome_json(&self) -> String {
        self.to_chrome().to_json()
    }

    /// An SVG swimlane: one lane per core (then one per AICPU thread, its phases in grey),
    /// subtasks coloured by func, a time axis in microseconds, a legend, and a tooltip
    /// (`<title>`) per box.
    pub fn to_svg(&self) -> String {
        const W: f64 = 1200.0;
        const LEFT: f64 = 150.0;
        const LANE: f64 = 14.0;
        const TOP: f64 = 30.0;
        let origin = self.origin();
        let span = self.us(origin, self.last()).max(1e-3);
        let x = |t: u64| LEFT + self.us(origin, t) / span * (W - LEFT - 10.0);
        let lanes = self.workers() + self.threads;
        let legend: Vec<(u16, &String)> = self.funcs.iter().map(|(k, v)| (*k, v)).collect();
        let h = TOP + lanes as f64 * LANE + 40.0 + 16.0 * legend.len().div_ceil(4) as f64;
        let mut s = String::new();
        let _ = write!(
            s,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h:.0}\" viewBox=\"0 0 {W} {h:.0}\" font-family=\"monospace\" font-size=\"10\">\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"14\" font-size=\"12\">{} run, {} subtasks, {:.1} us, counter {} Hz, {} records dropped</text>",
            self.runtime.name(),
            self.subtasks.len(),
            span,
            self.freq_hz,
            self.dropped()
        );
        for lane in 0..lanes {
            let y = TOP + lane as f64 * LANE;
            let name =
                if lane < self.workers() { self.core_name(lane) } else { self.thread_name(lane - self.workers()) };
            let fill = if lane % 2 == 0 { "#f4f4f4" } else { "#ffffff" };
            let _ = writeln!(s, "<rect x=\"0\" y=\"{y}\" width=\"{W}\" height=\"{LANE}\" fill=\"{fill}\"/>");
            let _ = writeln!(s, "<text x=\"4\" y=\"{:.1}\">{}</text>", y + LANE - 3.0, xml_escape(&name));
        }
        for p in &self.phases {
            let y = TOP + (self.workers() + p.thread) as f64 * LANE + 2.0;
            let (x0, x1) = (x(p.start), x(p.end));
            let fill = match p.phase {
                Phase::Idle => "#dddddd",
                Phase::Orchestration => "#888888",
                _ => "#aaaaaa",
            };
            let _ = writeln!(
                s,
                "<rect x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{fill}\"><title>{} {:.2}..{:.2} us</title></rect>",
                (x1 - x0).max(0.5),
                LANE - 4.0,
                p.phase.name(),
                self.us(origin, p.start),
                self.us(origin, p.end)
            );
        }
        for t in &self.subtasks {
            let y = TOP + t.core as f64 * LANE + 1.0;
            let (x0, x1) = (x(t.start), x(t.end));
            let _ = writeln!(
                s,
                "<rect x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\" stroke=\"#333\" stroke-width=\"0.3\"><title>task {} block {} {} on {}: {:.2}..{:.2} us</title></rect>",
                (x1 - x0).max(0.5),
                LANE - 2.0,
                color(t.func),
                t.task,
                t.block,
                xml_escape(&self.func_name(t)),
                xml_escape(&self.core_name(t.core)),
                self.us(origin, t.start),
                self.us(origin, t.end)
            );
        }
        // Time axis.
        let ay = TOP + lanes as f64 * LANE + 4.0;
        let _ = writeln!(s, "<line x1=\"{LEFT}\" y1=\"{ay}\" x2=\"{:.1}\" y2=\"{ay}\" stroke=\"black\"/>", W - 10.0);
        let step = nice_step(span / 8.0);
        let mut t = 0.0;
        while t <= span + 1e-9 {
            let xx = LEFT + t / span * (W - LEFT - 10.0);
            let _ = writeln!(
                s,
                "<line x1=\"{xx:.2}\" y1=\"{ay}\" x2=\"{xx:.2}\" y2=\"{:.1}\" stroke=\"black\"/><text x=\"{xx:.2}\" y=\"{:.1}\" text-anchor=\"middle\">{} us</text>",
                ay + 4.0,
                ay + 14.0,
                trim_float(t)
            );
            t += step;
        }
        for (i, (id, name)) in legend.iter().enumerate() {
            let lx = 4.0 + (i % 4) as f64 * 300.0;
            let ly = ay + 22.0 + (i / 4) as f64 * 16.0;
            let _ = writeln!(
                s,
                "<rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0}\" y=\"{:.0}\">{} (func {id})</text>",
                color(Some(*id)),
                lx + 14.0,
                ly + 9.0,
                xml_escape(name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn color(func: Option<u16>) -> &'static str {
    const PALETTE: [&str; 12] = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
        "#1f77b4", "#17becf",
    ];
    func.map_or("#000000", |f| PALETTE[f as usize % PALETTE.len()])
}

fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-6);
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

fn read<D: DeviceMemory>(dev: &D, at: u64, len: usize) -> Result<Vec<u8>, Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    let mut v = std::vec![0u8; len];
    dev.copy_d2h(&mut v, GmAddr(at)).map_err(platform("trace read-back"))?;
    Ok(v)
}

use core::mem::size_of;

/// Read a traced run's rings back (after its fence) and assemble its [`Trace`].
pub(crate) fn collect<D: DeviceMemory>(
    dev: &D,
    freq_hz: u64,
    funcs: &FuncTable,
    d: &LaunchDesc,
    layout: TraceLayout,
    graph_edges: Option<&[(u32, u32)]>,
) -> Result<Trace, Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    let mut by_bin: HashMap<u64, u16> = HashMap::new();
    let mut names = BTreeMap::new();
    for id in 0..funcs.len() as u16 {
        if let Some(f) = funcs.get(id) {
            for b in [f.aic, f.aiv].into_iter().flatten() {
                by_bin.insert(b, id);
            }
            names.insert(id, f.name.clone());
        }
    }
    let mut rings = Vec::new();
    let mut core_recs: Vec<TraceRecord> = Vec::new();
    let mut thread_recs: Vec<(u32, TraceRecord)> = Vec::new();
    let owners = (0..layout.workers)
        .map(|w| (RingOwner::Core(w), layout.core_ring(w), layout.core_records))
        .chain((0..layout.threads).map(|t| (RingOwner::Thread(t), layout.thread_ring(t), layout.thread_records)));
    for (owner, at, cap) in owners {
        let hb = read(dev, at, size_of::<TraceHeader>())?;
        let h = TraceHeader::read_from_bytes(&hb).unwrap_or_default();
        let closed = h.epoch == d.config.epoch && h.count <= cap as u64;
        let mut st = RingStatus { owner, records: 0, dropped: 0, closed };
        if closed {
            st.records = h.count;
            st.dropped = h.dropped;
            let body = read(dev, at + size_of::<TraceHeader>() as u64, h.count as usize * size_of::<TraceRecord>())?;
            for c in body.chunks_exact(size_of::<TraceRecord>()) {
                let r = TraceRecord::read_from_bytes(c).unwrap_or_default();
                match owner {
                    RingOwner::Core(_) => core_recs.push(r),
                    RingOwner::Thread(t) => thread_recs.push((t, r)),
                }
            }
        }
        rings.push(st);
    }
    // Scheduler events by (core, task, block, lane), in order.
    type Key = (u32, u32, u32, u8);
    let mut dispatched: HashMap<Key, VecDeque<(u64, u32)>> = HashMap::new();
    let mut completed: HashMap<Key, VecDeque<u64>> = HashMap::new();
    let mut phases = Vec::new();
    let mut recorded_edges = Vec::new();
    for (t, r) in &thread_recs {
        let key = (r.core, r.task, r.block, r.lane);
        let phase = match r.kind {
            trace_kind::EDGE => {
                recorded_edges.push((r.block, r.task));
                continue;
            }
            trace_kind::DISPATCH => {
                dispatched.entry(key).or_default().push_back((r.start, *t));
                continue;
            }
            trace_kind::COMPLETE => {
                completed.entry(key).or_default().push_back(r.start);
                continue;
            }
            trace_kind::ORCHESTRATION => Phase::Orchestration,
            trace_kind::DISPATCHING => Phase::Dispatch,
            trace_kind::COMPLETING => Phase::Completion,
            trace_kind::IDLE => Phase::Idle,
            trace_kind::HANDSHAKE => Phase::Handshake,
            trace_kind::RETIRE => Phase::Retire,
            trace_kind::SUPERVISE => Phase::Supervise,
            _ => continue,
        };
        phases.push(PhaseTrace { thread: *t, phase, start: r.start, end: r.end.max(r.start) });
    }
    let mut subtasks = Vec::new();
    for r in core_recs.iter().filter(|r| r.kind == trace_kind::SUBTASK) {
        let key = (r.core, r.task, r.block, r.lane);
        // On the resident executor the core records when it took the task and when it had
        // released its consumers (no AICPU thread sees either).
        let disp = if r.dispatch != 0 {
            Some((r.dispatch, u32::MAX))
        } else {
            dispatched.get_mut(&key).and_then(VecDeque::pop_front)
        };
        subtasks.push(SubtaskTrace {
            task: r.task,
            block: r.block,
            lane: r.lane,
            core: r.core,
            func: by_bin.get(&r.bin).copied(),
            dispatch: disp.map(|d| d.0),
            start: r.start,
            end: r.end.max(r.start),
            completion: if r.completion != 0 {
                Some(r.completion)
            } else {
                completed.get_mut(&key).and_then(VecDeque::pop_front)
            },
            thread: disp.map(|d| d.1).filter(|&t| t != u32::MAX),
        });
    }
    subtasks.sort_by_key(|s| (s.start, s.core));
    phases.sort_by_key(|p| (p.thread, p.start));
    let used: std::collections::BTreeSet<u16> = subtasks.iter().filter_map(|s| s.func).collect();
    names.retain(|k, _| used.contains(k));
    let runtime =
        if d.config.runtime == RUNTIME_HBG { RuntimeKind::HostBuiltGraph } else { RuntimeKind::TensormapRing };
    // The host-built graph's edges were decided when the host built it; the device-side
    // runtime's orchestrator records each dependency it finds in its own ring.
    let edges = if runtime == RuntimeKind::HostBuiltGraph {
        graph_edges.map(<[(u32, u32)]>::to_vec)
    } else {
        let orch = RingOwner::Thread(d.config.aicpu_threads.saturating_sub(1));
        rings.iter().any(|r| r.owner == orch && r.closed).then_some(recorded_edges)
    };
    Ok(Trace {
        freq_hz,
        runtime,
        clusters: d.config.clusters,
        threads: d.config.aicpu_threads,
        subtasks,
        phases,
        funcs: names,
        edges,
        rings,
    })
}
