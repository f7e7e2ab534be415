//! A run's swimlane trace as a Chrome trace-event JSON document (the object form, which
//! Perfetto and `chrome://tracing` open): [`ChromeTrace`].
//!
//! `Trace::to_chrome` builds it and
//! `Trace::to_chrome_json` writes it; [`ChromeTrace::read`]
//! reads a file back (`pto trace` does), refusing another [`FORMAT_VERSION`] and any field it
//! does not know or misses.
//!
//! Three processes: the AICores ([`AICORE_PID`]), the AICPU threads ([`AICPU_PID`]) and the
//! host's phases of the run ([`HOST_PID`]), all on one time axis (the device's counter).
//!
//! The events use the trace-event format's own keys: `ph` (the event type: `M` metadata, `X` a
//! complete slice, `s` / `f` the two ends of a flow arrow), `pid` / `tid` (the track), `ts` /
//! `dur` (microseconds from [`OtherData::origin_tick`]), `cat`, `name`, `args`.

use std::path::Path;
use std::string::String;
use std::vec::Vec;

use serde::{Deserialize, Serialize};

use super::DocumentError;

/// What an AICPU thread was doing. The trace document names it as [`Phase::name`] spells it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Running the orchestration function (device-side runtime).
    Orchestration,
    /// A dispatch pass that placed work.
    Dispatch,
    /// A completion poll that retired work.
    Completion,
    /// Waiting for an event.
    Idle,
    /// Handshaking its cores.
    Handshake,
    /// Retiring its cores.
    Retire,
    /// Watching a resident run (the cores schedule themselves) until it completes.
    Supervise,
}

impl Phase {
    /// Every phase, in the order the trace's legend lists them.
    pub const ALL: [Phase; 7] = [
        Phase::Orchestration,
        Phase::Dispatch,
        Phase::Completion,
        Phase::Idle,
        Phase::Handshake,
        Phase::Retire,
        Phase::Supervise,
    ];

    /// The phase's name, as exported.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Orchestration => "orchestration",
            Phase::Dispatch => "dispatch",
            Phase::Completion => "completion",
            Phase::Idle => "idle",
            Phase::Handshake => "handshake",
            Phase::Retire => "retire",
            Phase::Supervise => "supervise",
        }
    }
}

/// What the host was doing for a run: the host's own track in the trace. The trace document
/// names it as [`HostPhase::name`] spells it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostPhase {
    /// Building the run's launch image: the host-built graph (on the graph's first run), or
    /// the device-side runtime's orchestration image.
    Build,
    /// Taking a pipeline slot (waiting while other runs hold both).
    Reserve,
    /// Uploading the launch image and descriptor into the slot.
    Publish,
    /// Submitting the AICore and AICPU programs.
    Launch,
    /// Waiting for both programs to end (the completion fence).
    Fence,
    /// Reading the descriptor, the counters and the trace back.
    Collect,
    /// Closing the args dump: the final drain and the manifest.
    Dump,
    /// One drain of the args dump's lanes while the run was in flight (on its own track).
    DumpDrain,
}

impl HostPhase {
    /// The phase's name, as exported (and as its `tracing` span is named).
    pub fn name(self) -> &'static str {
        match self {
            HostPhase::Build => "build",
            HostPhase::Reserve => "reserve",
            HostPhase::Publish => "publish",
            HostPhase::Launch => "launch",
            HostPhase::Fence => "fence",
            HostPhase::Collect => "collect",
            HostPhase::Dump => "dump",
            HostPhase::DumpDrain => "dump_drain",
        }
    }

    /// The host track the phase is drawn on: 0 for the run's phases, 1 for the args dump's
    /// in-flight drains.
    pub fn track(self) -> u32 {
        u32::from(self == HostPhase::DumpDrain)
    }
}

use crate::orch::RuntimeKind;

/// The trace document's format version, in `otherData.format_version`: raised whenever a field
/// is renamed, removed, added or changes meaning (this reader refuses any field it does not
/// know, so an added field needs a new version too).
pub const FORMAT_VERSION: u32 = 2;

/// The `pid` of the AICore process (one track per worker, `tid` = the worker index).
pub const AICORE_PID: u32 = 1;
/// The `pid` of the AICPU process (one track per AICPU thread, `tid` = the thread index).
pub const AICPU_PID: u32 = 2;
/// The `pid` of the host process (track 0: the run's phases; track 1: the args dump's
/// in-flight drains).
pub const HOST_PID: u32 = 3;

/// A whole trace file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChromeTrace {
    /// Every event: the tracks' names and order, then the subtasks' slices, the AICPU phases'
    /// slices, the host phases' slices, and the flow arrows.
    #[serde(rename = "traceEvents")]
    pub trace_events: Vec<Event>,
    /// How viewers display times (`"ns"`); `ts` and `dur` are microseconds regardless.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: TimeUnit,
    /// What the run was, and how complete its trace is.
    #[serde(rename = "otherData")]
    pub other_data: OtherData,
}

/// `displayTimeUnit`: the unit viewers show times in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimeUnit {
    /// Nanoseconds (`"ns"`).
    #[serde(rename = "ns")]
    Nanoseconds,
}

/// `otherData`: the run and its trace's completeness (viewers show it as the trace's metadata).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtherData {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Who wrote the file (`"pto-rt"`).
    pub producer: Producer,
    /// The runtime the run used (`"hbg"` / `"trb"`).
    pub runtime: RuntimeKind,
    /// The board's counter frequency: ticks per second.
    pub counter_hz: u64,
    /// The tick that is `ts` 0: the earliest tick of the trace (device records and host
    /// phases).
    pub origin_tick: u64,
    /// Clusters launched (worker `w < clusters` is an AIC, the others AIVs).
    pub clusters: u32,
    /// AICPU threads launched.
    pub aicpu_threads: u32,
    /// Records that did not fit in their rings, over all rings.
    pub dropped_records: u64,
    /// Rings whose owner never closed them (their records are unknown).
    pub unclosed_rings: u64,
    /// Whether the flow arrows are every dependency of the run.
    pub flows: Flows,
}

/// `otherData.producer`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Producer {
    /// This runtime (`"pto-rt"`).
    #[serde(rename = "pto-rt")]
    PtoRt,
}

/// `otherData.flows`: how complete the flow arrows are, written as a sentence a person reading
/// the metadata in a viewer understands.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Flows {
    /// No arrows: the device-side runtime's orchestrator ring did not close (or the host-built
    /// graph's image could not be read back).
    #[serde(rename = "unknown: the orchestrator's trace ring did not close")]
    Unknown,
    /// Some arrows: the orchestrator's ring dropped records.
    #[serde(rename = "partial: the orchestrator's trace ring dropped records")]
    Partial,
    /// Every dependency, from the host-built graph's image.
    #[serde(rename = "complete: from the host-built graph image")]
    FromImage,
    /// Every dependency, as the device-side runtime's orchestrator recorded them.
    #[serde(rename = "complete: recorded by the device-side orchestrator")]
    Recorded,
}

impl Flows {
    /// The sentence the file holds.
    pub fn describe(self) -> &'static str {
        match self {
            Flows::Unknown => "unknown: the orchestrator's trace ring did not close",
            Flows::Partial => "partial: the orchestrator's trace ring dropped records",
            Flows::FromImage => "complete: from the host-built graph image",
            Flows::Recorded => "complete: recorded by the device-side orchestrator",
        }
    }

    /// Whether the arrows are every dependency of the run.
    pub fn complete(self) -> bool {
        matches!(self, Flows::FromImage | Flows::Recorded)
    }
}

/// One trace event, by its `ph`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ph")]
pub enum Event {
    /// `"M"`: a process's or a track's name or sort order.
    #[serde(rename = "M")]
    Metadata(Metadata),
    /// `"X"`: a complete slice (a subtask on a core, or a phase of an AICPU thread).
    #[serde(rename = "X")]
    Slice(Slice),
    /// `"s"`: where a flow arrow starts (the producer's slice).
    #[serde(rename = "s")]
    FlowStart(FlowStart),
    /// `"f"`: where a flow arrow ends (the consumer's slice).
    #[serde(rename = "f")]
    FlowEnd(FlowEnd),
}

/// A metadata event, by its `name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Metadata {
    /// `process_name`: the process `pid`'s name (`AICore`, `AICPU`, `host`).
    ProcessName(Named),
    /// `process_sort_index`: the process's place among processes.
    ProcessSortIndex(Sorted),
    /// `thread_name`: track `tid` of process `pid`'s name (`AIV 30 (cluster 3)`, `AICPU 3
    /// (orchestrator)`).
    ThreadName(Named),
    /// `thread_sort_index`: the track's place in its process.
    ThreadSortIndex(Sorted),
}

/// A naming metadata event's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Named {
    /// The process.
    pub pid: u32,
    /// The track (0 for a process's own name).
    pub tid: u32,
    /// The name.
    pub args: NameArgs,
}

/// `args` of a naming metadata event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NameArgs {
    /// The name.
    pub name: String,
}

/// An ordering metadata event's body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sorted {
    /// The process.
    pub pid: u32,
    /// The track (0 for a process's own order).
    pub tid: u32,
    /// The order.
    pub args: SortArgs,
}

/// `args` of an ordering metadata event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SortArgs {
    /// Lower sorts first.
    pub sort_index: u32,
}

/// A complete slice, by its `cat`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cat")]
pub enum Slice {
    /// `"task"`: one subtask on one core.
    #[serde(rename = "task")]
    Task(TaskSlice),
    /// `"aicpu"`: one phase of one AICPU thread.
    #[serde(rename = "aicpu")]
    Phase(PhaseSlice),
    /// `"host"`: one phase of the host's work for the run.
    #[serde(rename = "host")]
    Host(HostSlice),
}

/// One subtask (a block of one lane of one task) as it ran on a core.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSlice {
    /// The kernel's func name (`func N` when its name is not known, `unknown kernel` when its
    /// binary is not registered on the device).
    pub name: String,
    /// [`AICORE_PID`].
    pub pid: u32,
    /// The core's worker index.
    pub tid: u32,
    /// Start, in microseconds from the origin tick.
    pub ts: f64,
    /// Duration in microseconds (start to end).
    pub dur: f64,
    /// The subtask's identity and raw ticks.
    pub args: TaskArgs,
}

/// `args` of a subtask's slice. Every field is present; `null` means unknown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskArgs {
    /// Task id (as kernels see it).
    pub task: u32,
    /// SPMD block.
    pub block: u32,
    /// Lane: 0 = AIC, 1 = AIV lane 0, 2 = AIV lane 1.
    pub lane: u8,
    /// Func id of the kernel (`null` when its binary is not registered on the device).
    #[serde(deserialize_with = "Option::deserialize")]
    pub func: Option<u16>,
    /// Tick at which the core started the subtask.
    pub start_tick: u64,
    /// Tick at which the core finished it.
    pub end_tick: u64,
    /// Dispatch, in microseconds from the origin tick (`null` if a ring overflowed).
    #[serde(deserialize_with = "Option::deserialize")]
    pub dispatch_us: Option<f64>,
    /// Dispatch tick: when the AICPU wrote the dispatch register, or (resident executor) when
    /// the core found the subtask in its lane's dispatch slot.
    #[serde(deserialize_with = "Option::deserialize")]
    pub dispatch_tick: Option<u64>,
    /// Completion, in microseconds from the origin tick (`null` if a ring overflowed).
    #[serde(deserialize_with = "Option::deserialize")]
    pub completion_us: Option<f64>,
    /// Completion tick: when the AICPU saw the FIN, or (resident executor) when the core had
    /// released the task's consumers.
    #[serde(deserialize_with = "Option::deserialize")]
    pub completion_tick: Option<u64>,
    /// The AICPU thread that dispatched it (`null` on the resident executor, where none does,
    /// or if a ring overflowed).
    #[serde(deserialize_with = "Option::deserialize")]
    pub aicpu_thread: Option<u32>,
}

/// One phase of one AICPU thread.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSlice {
    /// What the thread was doing.
    pub name: Phase,
    /// [`AICPU_PID`].
    pub pid: u32,
    /// The AICPU thread.
    pub tid: u32,
    /// Start, in microseconds from the origin tick.
    pub ts: f64,
    /// Duration in microseconds.
    pub dur: f64,
}

/// One phase of the host's work for the run, on the device's time axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSlice {
    /// What the host was doing.
    pub name: HostPhase,
    /// [`HOST_PID`].
    pub pid: u32,
    /// The host track ([`HostPhase::track`]).
    pub tid: u32,
    /// Start, in microseconds from the origin tick.
    pub ts: f64,
    /// Duration in microseconds.
    pub dur: f64,
}

/// `cat` and `name` of a flow event: a dependency.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dep {
    /// `"dep"`.
    #[serde(rename = "dep")]
    Dep,
}

/// `bp` of a flow's end: which slice the arrow binds to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BindingPoint {
    /// `"e"`: the slice that encloses the event (the consumer's first subtask).
    #[serde(rename = "e")]
    Enclosing,
}

/// Where a flow arrow starts: at the start of the producer's first subtask.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowStart {
    /// `"dep"`.
    pub cat: Dep,
    /// `"dep"`.
    pub name: Dep,
    /// The arrow (its two ends share it).
    pub id: u64,
    /// [`AICORE_PID`].
    pub pid: u32,
    /// The producer's core.
    pub tid: u32,
    /// The producer's start, in microseconds from the origin tick.
    pub ts: f64,
}

/// Where a flow arrow ends: at the start of the consumer's first subtask.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowEnd {
    /// `"e"`.
    pub bp: BindingPoint,
    /// `"dep"`.
    pub cat: Dep,
    /// `"dep"`.
    pub name: Dep,
    /// The arrow (its two ends share it).
    pub id: u64,
    /// [`AICORE_PID`].
    pub pid: u32,
    /// The consumer's core.
    pub tid: u32,
    /// The consumer's start, in microseconds from the origin tick.
    pub ts: f64,
}

impl ChromeTrace {
    /// Read a trace file: its `otherData.format_version` must be [`FORMAT_VERSION`], and every
    /// field must be one this version has.
    pub fn read(path: impl AsRef<Path>) -> Result<ChromeTrace, DocumentError> {
        super::read_versioned(path.as_ref(), "otherData.format_version", FORMAT_VERSION)
    }

    /// Parse a trace document's text, as [`ChromeTrace::read`] does; `path` names where the
    /// text came from, in errors.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<ChromeTrace, DocumentError> {
        super::parse_versioned(path.as_ref(), text, "otherData.format_version", FORMAT_VERSION)
    }

    /// The document as JSON text.
    pub fn to_json(&self) -> String {
        // Cannot fail: every map of the document is a struct with string keys, and no
        // `Serialize` impl in it returns an error.
        serde_json::to_string(self).expect("a trace document always serializes")
    }

    /// The subtasks' slices, in file order.
    pub fn tasks(&self) -> impl Iterator<Item = &TaskSlice> {
        self.trace_events.iter().filter_map(|e| match e {
            Event::Slice(Slice::Task(t)) => Some(t),
            _ => None,
        })
    }

    /// The AICPU phases' slices, in file order.
    pub fn phases(&self) -> impl Iterator<Item = &PhaseSlice> {
        self.trace_events.iter().filter_map(|e| match e {
            Event::Slice(Slice::Phase(p)) => Some(p),
            _ => None,
        })
    }

    /// The host phases' slices, in file order.
    pub fn host_phases(&self) -> impl Iterator<Item = &HostSlice> {
        self.trace_events.iter().filter_map(|e| match e {
            Event::Slice(Slice::Host(h)) => Some(h),
            _ => None,
        })
    }

    /// The run's span, in microseconds from the origin tick: `(first subtask start, last
    /// subtask end)` over the subtasks' slices (`None` without subtasks). The same span as
    /// `Trace::span`, which the SVG's title line prints.
    pub fn span(&self) -> Option<(f64, f64)> {
        let start = self.tasks().map(|s| s.ts).reduce(f64::min)?;
        let end = self.tasks().map(|s| s.ts + s.dur).reduce(f64::max)?;
        Some((start, end))
    }

    /// The tracks' names: `(pid, tid, name)` of every `thread_name` event.
    pub fn track_names(&self) -> impl Iterator<Item = (u32, u32, &str)> {
        self.trace_events.iter().filter_map(|e| match e {
            Event::Metadata(Metadata::ThreadName(n)) => Some((n.pid, n.tid, n.args.name.as_str())),
            _ => None,
        })
    }
}
