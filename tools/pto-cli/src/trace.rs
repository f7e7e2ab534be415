//! `pto trace FILE.json`: read a Chrome trace-event JSON written by `pto run --trace` back, and
//! with `--summary` print per-core utilisation, time per AICPU phase, the host's phases and the
//! critical path.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use clap::Parser;
use pto::runtime::host::documents::chrome::{self, ChromeTrace};

use crate::Fail;

#[derive(Parser, Debug)]
pub(crate) struct TraceArgs {
    /// A Chrome trace-event JSON written by `pto run --trace`.
    file: PathBuf,
    /// Print per-core utilisation and the critical path.
    #[arg(long)]
    summary: bool,
    /// Print the trace's overview and per-core utilisation as one JSON object on standard
    /// output (see [`TraceDoc`]) instead of the text.
    #[arg(long)]
    json: bool,
}

/// Version of the `pto trace --json` object; bumped on any change of its fields.
const TRACE_FORMAT_VERSION: u32 = 1;

/// What `pto trace --json` prints.
#[derive(serde::Serialize)]
struct TraceDoc {
    /// [`TRACE_FORMAT_VERSION`].
    format_version: u32,
    /// The file read.
    file: String,
    /// `hbg` or `trb`.
    runtime: String,
    subtasks: usize,
    /// Cores that ran at least one subtask.
    cores_used: usize,
    /// Cores the trace names.
    cores: usize,
    /// First subtask start to last subtask end, microseconds.
    span_us: f64,
    counter_hz: u64,
    dropped_records: u64,
    /// Per core that ran something: its name, subtasks, busy microseconds and busy share of
    /// the span (per cent).
    per_core: Vec<CoreRow>,
}

#[derive(serde::Serialize)]
struct CoreRow {
    core: String,
    subtasks: usize,
    busy_us: f64,
    utilisation_pct: f64,
}

/// Where a flow starts and ends: (track, timestamp) of its `s` and `f` events.
type FlowEnds = (Option<(u32, f64)>, Option<(u32, f64)>);

pub(crate) fn trace(a: &TraceArgs) -> Result<(), Fail> {
    let doc = ChromeTrace::read(&a.file).map_err(|e| Fail(format!("cannot read the trace: {e}"), 1))?;
    if a.json {
        outln!("{}", serde_json::to_string(&json_doc(&a.file, &doc))?);
        return Ok(());
    }
    summarize(&a.file, &doc, a.summary)
}

/// The trace's [`TraceDoc`].
fn json_doc(path: &Path, doc: &ChromeTrace) -> TraceDoc {
    let names: BTreeMap<(u32, u32), &str> = doc.track_names().map(|(pid, tid, name)| ((pid, tid), name)).collect();
    let tasks: Vec<&chrome::TaskSlice> = doc.tasks().collect();
    let span = doc.span().map_or(0.0, |(start, end)| end - start);
    let mut busy: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
    for s in &tasks {
        let b = busy.entry(s.tid).or_default();
        b.0 += s.dur;
        b.1 += 1;
    }
    let other = &doc.other_data;
    TraceDoc {
        format_version: TRACE_FORMAT_VERSION,
        file: path.display().to_string(),
        runtime: other.runtime.to_string(),
        subtasks: tasks.len(),
        cores_used: busy.len(),
        cores: names.keys().filter(|(p, _)| *p == chrome::AICORE_PID).count(),
        span_us: span,
        counter_hz: other.counter_hz,
        dropped_records: other.dropped_records,
        per_core: busy
            .iter()
            .map(|(tid, (t, n))| CoreRow {
                core: names.get(&(chrome::AICORE_PID, *tid)).map_or_else(|| format!("core {tid}"), |n| n.to_string()),
                subtasks: *n,
                busy_us: *t,
                utilisation_pct: 100.0 * t / span.max(1e-9),
            })
            .collect(),
    }
}

fn summarize(path: &Path, doc: &ChromeTrace, full: bool) -> Result<(), Fail> {
    let names: BTreeMap<(u32, u32), &str> = doc.track_names().map(|(pid, tid, name)| ((pid, tid), name)).collect();
    let mut flows: HashMap<u64, FlowEnds> = HashMap::new();
    for e in &doc.trace_events {
        match e {
            chrome::Event::FlowStart(s) => flows.entry(s.id).or_default().0 = Some((s.tid, s.ts)),
            chrome::Event::FlowEnd(f) => flows.entry(f.id).or_default().1 = Some((f.tid, f.ts)),
            _ => {}
        }
    }
    let tasks: Vec<&chrome::TaskSlice> = doc.tasks().collect();
    // The span, as the SVG's title line has it: first subtask start to last subtask end.
    let span = doc.span().map_or(0.0, |(start, end)| end - start);
    let other = &doc.other_data;
    outln!(
        "{}: runtime={} {} subtasks on {} cores, span {:.3} us, counter {} Hz, {} records dropped",
        path.display(),
        other.runtime,
        tasks.len(),
        tasks.iter().map(|s| s.tid).collect::<std::collections::BTreeSet<_>>().len(),
        span,
        other.counter_hz,
        other.dropped_records
    );
    if !full {
        return Ok(());
    }
    outln!("\nper-core utilisation (busy time / span: first subtask start to last subtask end):");
    let mut busy: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
    for s in &tasks {
        let b = busy.entry(s.tid).or_default();
        b.0 += s.dur;
        b.1 += 1;
    }
    for (tid, (t, n)) in &busy {
        let name = names.get(&(chrome::AICORE_PID, *tid)).map_or_else(|| format!("core {tid}"), |n| n.to_string());
        outln!("  {name:<24} {n:>6} subtasks {t:>12.3} us busy {:>6.1} %", 100.0 * t / span.max(1e-9));
    }
    let cores = names.keys().filter(|(p, _)| *p == chrome::AICORE_PID).count();
    outln!("  ({} of {} cores ran nothing)", cores.saturating_sub(busy.len()), cores);
    let host: Vec<&chrome::HostSlice> = doc.host_phases().collect();
    if !host.is_empty() {
        // In order of start (drains are summed).
        outln!("\nhost (time per phase, on the device's time axis):");
        let mut per: Vec<(chrome::HostPhase, f64, f64, usize)> = Vec::new();
        for h in &host {
            match per.iter_mut().find(|p| p.0 == h.name) {
                Some(p) => {
                    p.2 += h.dur;
                    p.3 += 1;
                }
                None => per.push((h.name, h.ts, h.dur, 1)),
            }
        }
        per.sort_by(|a, b| a.1.total_cmp(&b.1));
        for (phase, at, t, n) in per {
            let times = if n > 1 { format!(" ({n} times)") } else { String::new() };
            outln!("  {:<12} from {at:>12.3} us {t:>12.3} us{times}", phase.name());
        }
    }
    outln!("\nAICPU threads (time per phase):");
    let mut phases: BTreeMap<(u32, &'static str), f64> = BTreeMap::new();
    for p in doc.phases() {
        *phases.entry((p.tid, p.name.name())).or_default() += p.dur;
    }
    for ((tid, phase), t) in &phases {
        let name = names.get(&(chrome::AICPU_PID, *tid)).map_or_else(|| format!("thread {tid}"), |n| n.to_string());
        outln!("  {name:<26} {phase:<14} {t:>12.3} us");
    }
    // Critical path: walk back from the subtask that ended last through the producer whose
    // end gated each start (the latest-ending producer).
    outln!("\ncritical path:");
    let by_task: HashMap<u32, &chrome::TaskSlice> = tasks.iter().map(|s| (s.args.task, *s)).collect();
    if flows.is_empty() {
        outln!("  unknown: {}", other.flows.describe());
        return Ok(());
    }
    // Producers of each task, from the flow pairs (matched on the slices' start times).
    let at: HashMap<(u32, u64), u32> = tasks.iter().map(|s| ((s.tid, s.ts.to_bits()), s.args.task)).collect();
    let mut producers: HashMap<u32, Vec<u32>> = HashMap::new();
    for (s, f) in flows.values() {
        if let (Some((pt, pts)), Some((ct, cts))) = (s, f)
            && let (Some(&p), Some(&c)) = (at.get(&(*pt, pts.to_bits())), at.get(&(*ct, cts.to_bits())))
        {
            producers.entry(c).or_default().push(p);
        }
    }
    let Some(last) = tasks.iter().max_by(|a, b| (a.ts + a.dur).total_cmp(&(b.ts + b.dur))) else {
        outln!("  (no subtasks)");
        return Ok(());
    };
    let mut path = vec![last.args.task];
    let mut cur = path[0];
    while let Some(ps) = producers.get(&cur) {
        let Some(&p) = ps.iter().max_by(|a, b| {
            let end = |t: &u32| by_task.get(t).map_or(0.0, |s| s.ts + s.dur);
            end(a).total_cmp(&end(b))
        }) else {
            break;
        };
        if path.contains(&p) {
            break;
        }
        path.push(p);
        cur = p;
    }
    path.reverse();
    let work: f64 = path.iter().filter_map(|t| by_task.get(t)).map(|s| s.dur).sum();
    outln!(
        "  {} tasks, {:.3} us of kernel time over a {:.3} us span ({:.1} % of it; the rest is dispatch and completion latency)",
        path.len(),
        work,
        span,
        100.0 * work / span.max(1e-9)
    );
    let shown: Vec<String> = path.iter().take(24).map(|t| t.to_string()).collect();
    outln!("  tasks: {}{}", shown.join(" -> "), if path.len() > 24 { " -> ..." } else { "" });
    Ok(())
}
