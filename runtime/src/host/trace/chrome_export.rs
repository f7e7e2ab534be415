//! The Chrome trace-event export of a [`Trace`](super::Trace): the document's object form and its
//! JSON text, which Perfetto and `chrome://tracing` open.

use std::collections::HashMap;
use std::string::String;
use std::vec::Vec;

use super::{SubtaskTrace, Trace};
use crate::host::documents::chrome::{
    self, AICORE_PID, AICPU_PID, BindingPoint, ChromeTrace, Dep, Event, FlowEnd, FlowStart, Flows, HOST_PID, HostPhase,
    HostSlice, Metadata, NameArgs, Named, OtherData, PhaseSlice, Producer, Slice, SortArgs, Sorted, TaskArgs,
    TaskSlice, TimeUnit,
};
use crate::orch::RuntimeKind;

impl Trace {
    /// The Chrome trace-event document (the object form, [`ChromeTrace`]): one process for the
    /// AICores with a track per core, one for the AICPU with a track per thread, a complete
    /// (`X`) slice per subtask and per phase, one `host` process (when the host's phases are
    /// known) with a slice per host phase on the same axis, times in microseconds from the
    /// first tick of the trace ([`Trace::origin`]), and a flow arrow (`s` → `f`, `bp: "e"`) per producer → consumer edge when the
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
        if !self.host.is_empty() {
            ev.push(Event::Metadata(Metadata::ProcessName(named(HOST_PID, 0, "host".into()))));
            ev.push(Event::Metadata(Metadata::ProcessSortIndex(sorted(HOST_PID, 0, 0))));
            ev.push(Event::Metadata(Metadata::ThreadName(named(HOST_PID, 0, "run".into()))));
            if self.host.iter().any(|h| h.phase.track() == 1) {
                ev.push(Event::Metadata(Metadata::ThreadName(named(HOST_PID, 1, "args dump drains".into()))));
            }
        }
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
        for h in &self.host {
            ev.push(Event::Slice(Slice::Host(HostSlice {
                name: h.phase,
                pid: HOST_PID,
                tid: HostPhase::track(h.phase),
                ts: self.us(origin, h.start),
                dur: self.us(h.start, h.end),
            })));
        }
        self.push_flows(origin, &mut ev);
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

    /// When the edges are known: one flow arrow (`s` → `f`) per producer → consumer edge,
    /// from the producer's first subtask to the consumer's first subtask.
    fn push_flows(&self, origin: u64, ev: &mut Vec<Event>) {
        let Some(edges) = &self.edges else { return };
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

    /// [`Trace::to_chrome`] as JSON text: what `pto run --trace` writes and Perfetto opens.
    pub fn to_chrome_json(&self) -> String {
        self.to_chrome().to_json()
    }
}
