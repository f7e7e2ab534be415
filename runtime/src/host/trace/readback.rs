//! Reading a traced run's rings back after its fence: each ring's header and records, the
//! scheduler's dispatch and completion events matched to the cores' subtasks, the phases and
//! the recorded edges, assembled into a [`Trace`](super::Trace).

use core::mem::size_of;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr};
use zerocopy::FromBytes;

use super::{Phase, PhaseTrace, RingOwner, RingStatus, SubtaskTrace, Trace};
use crate::hbg::FuncTable;
use crate::host::Error;
use crate::host::error::platform;
use crate::layout::{LaunchDesc, TraceHeader, TraceLayout, TraceRecord, trace_kind};
use crate::orch::RuntimeKind;

fn read<D: DeviceMemory>(dev: &D, at: u64, len: usize) -> Result<Vec<u8>, Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    let mut v = std::vec![0u8; len];
    dev.copy_d2h(&mut v, GmAddr(at)).map_err(platform("trace read-back"))?;
    Ok(v)
}

/// Read a traced run's rings back (after its fence) and assemble its [`Trace`].
pub(in crate::host) fn collect<D: DeviceMemory>(
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
    let runtime = RuntimeKind::of_launch(d.config.runtime);
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
        host: Vec::new(),
    })
}
