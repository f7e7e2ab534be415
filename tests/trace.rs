//! Swimlane traces: with `RunConfig::with_trace(true)` every subtask of a run is recorded on
//! its core, the AICPU threads record their phases, the host collects both into
//! `RunReport::trace`, and the exports are what their readers expect (Chrome trace-event JSON
//! for Perfetto, a well-formed SVG). Run it under `PTO_SIM_CACHE=faithful:1` too: tracing keeps
//! the one-writer-per-line rule.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use pto::prelude::*;
use pto::runtime::host::Trace;
use pto::runtime::host::documents::DocumentError;
use pto::runtime::host::documents::chrome::{self, ChromeTrace, Event, Flows, Metadata};
use pto::runtime::host::trace::{Phase, SvgOptions};
use pto_testkit::RUNTIMES;

fn device() -> (pto::Device, pto_testkit::Kernels) {
    pto_testkit::setup(pto::open).expect("open the selected board")
}

fn traced_vector(rt: RuntimeKind, e: Executor) -> (pto_testkit::Outcome, Trace, u64) {
    let (dev, k) = device();
    let o = pto_testkit::executed(e, || pto_testkit::traced(true, || pto_testkit::vector(&dev, &k, rt)))
        .unwrap_or_else(|e| panic!("{rt}: {e}"));
    let t = o.report.trace.clone().unwrap_or_else(|| panic!("{rt}: no trace in the report"));
    (o, t, pto::hal::Clock::freq_hz(dev.platform()))
}

/// Read the JSON back through its types and check it: every slice on a known track, start ≤
/// end, every subtask of the run exactly once. Returns the flow events.
fn check_json(t: &Trace, tasks: u64) -> Vec<Event> {
    let doc = ChromeTrace::parse("to_chrome_json", &t.to_chrome_json()).expect("a trace document");
    let tracks: HashSet<(u32, u32)> = doc.track_names().map(|(pid, tid, _)| (pid, tid)).collect();
    let procs: HashSet<u32> = doc
        .trace_events
        .iter()
        .filter_map(|e| match e {
            Event::Metadata(Metadata::ProcessName(n)) => Some(n.pid),
            _ => None,
        })
        .collect();
    assert_eq!(procs, HashSet::from([chrome::AICORE_PID, chrome::AICPU_PID, chrome::HOST_PID]), "AICore, AICPU, host");
    let mut seen: HashMap<(u32, u32, u8), u32> = HashMap::new();
    let mut task_ids: HashSet<u32> = HashSet::new();
    for h in doc.host_phases() {
        assert!(tracks.contains(&(h.pid, h.tid)), "slice on an unnamed track: {h:?}");
        assert!(h.ts >= 0.0 && h.dur >= 0.0, "start <= end: {h:?}");
    }
    for p in doc.phases() {
        assert!(tracks.contains(&(p.pid, p.tid)), "slice on an unnamed track: {p:?}");
        assert!(p.ts >= 0.0 && p.dur >= 0.0, "start <= end: {p:?}");
    }
    for e in doc.tasks() {
        assert!(tracks.contains(&(e.pid, e.tid)), "slice on an unnamed track: {e:?}");
        assert!(e.ts >= 0.0 && e.dur >= 0.0, "start <= end: {e:?}");
        let a = &e.args;
        task_ids.insert(a.task);
        *seen.entry((a.task, a.block, a.lane)).or_default() += 1;
        assert!(a.dispatch_us.unwrap() <= e.ts + 1e-9, "dispatched before it started: {e:?}");
        assert!(a.completion_us.unwrap() + 1e-9 >= e.ts + e.dur, "completion after its end: {e:?}");
    }
    assert!(seen.values().all(|&n| n == 1), "every subtask exactly once: {seen:?}");
    assert_eq!(task_ids.len() as u64, tasks, "every task of the run");
    assert_eq!(doc.other_data.dropped_records, 0);
    doc.trace_events.into_iter().filter(|e| matches!(e, Event::FlowStart(_) | Event::FlowEnd(_))).collect()
}

fn check_svg(t: &Trace) {
    let svg = t.to_svg();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
    let boxes = root.children().filter(|n| n.has_tag_name("rect") && n.children().any(|c| c.has_tag_name("title")));
    assert!(boxes.count() >= t.subtasks.len());
}

#[test]
fn traced_runs_record_every_subtask_on_both_runtimes() {
    let runs = [
        (RuntimeKind::HostBuiltGraph, Executor::Legacy),
        (RuntimeKind::HostBuiltGraph, Executor::Resident),
        (RuntimeKind::TensormapRing, Executor::Auto),
    ];
    for (rt, e) in runs {
        let (o, t, hz) = traced_vector(rt, e);
        let resident = o.report.executor == Executor::Resident;
        assert_eq!(resident, e == Executor::Resident, "{rt} {e}");
        assert!(t.is_complete(), "{rt}: {:?}", t.rings);
        assert_eq!(t.subtasks.len(), 5, "{rt}: five AIV tasks");
        assert_eq!(t.freq_hz, hz, "the board's counter frequency");
        let clusters = t.clusters;
        for s in &t.subtasks {
            assert!(s.core >= clusters, "{rt}: vector runs on AIV cores only");
            assert!(s.start <= s.end);
            let (d, c) = (s.dispatch.expect("dispatch tick"), s.completion.expect("completion tick"));
            assert!(
                d <= s.start && s.end <= c,
                "{rt}: dispatch {d} <= start {} <= end {} <= completion {c}",
                s.start,
                s.end
            );
            // On the resident executor the core takes the task itself: no AICPU thread.
            assert!(s.func.is_some() && s.thread.is_some() != resident);
        }
        assert!(t.funcs.values().any(|n| n == "add") && t.funcs.values().any(|n| n == "mul"));
        let busy = if resident { Phase::Supervise } else { Phase::Dispatch };
        assert!(t.phases.iter().any(|p| p.phase == busy), "{rt} {e}");
        if rt == RuntimeKind::TensormapRing {
            assert!(t.phases.iter().any(|p| p.phase == pto::runtime::host::trace::Phase::Orchestration));
        }
        let flows = check_json(&t, o.report.tasks);
        check_svg(&t);
        {
            // c -> d, c -> e, d -> h, e -> h, h -> f, c -> f: from the image on the host-built
            // graph, recorded by the orchestrator on the device-side runtime.
            assert!(t.edges_complete(), "{rt}");
            // The orchestrator also records producers that never reach a core (the allocation
            // records of the tensors `Orch::alloc` made, which the users of each tensor keep
            // alive); the flows join the tasks that ran.
            let tasks: HashSet<u32> = t.subtasks.iter().map(|s| s.task).collect();
            let all = t.edges.as_ref().expect("edges");
            let edges: Vec<_> = all.iter().filter(|(p, c)| tasks.contains(p) && tasks.contains(c)).collect();
            assert_eq!(edges.len(), 6, "{rt}: {all:?}");
            if rt == RuntimeKind::HostBuiltGraph {
                assert_eq!(edges.len(), all.len(), "every image edge joins two kernel tasks");
            }
            // Each arrow's start, then its end (`bp: "e"`, the only binding point the type has).
            let mut ids: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
            for f in &flows {
                match f {
                    Event::FlowStart(s) => ids.entry(s.id).or_default().push("s"),
                    Event::FlowEnd(f) => ids.entry(f.id).or_default().push("f"),
                    other => panic!("not a flow event: {other:?}"),
                }
            }
            assert_eq!(ids.len(), 6);
            assert!(ids.values().all(|v| v == &["s", "f"]), "{ids:?}");
        }
    }
}

#[test]
fn tracing_off_records_nothing() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let o = pto_testkit::vector(&dev, &k, rt).unwrap_or_else(|e| panic!("{rt}: {e}"));
        assert!(o.report.trace.is_none());
    }
    // Off again after a traced run of the same slots: nothing leaks into the next report.
    let o = pto_testkit::traced(true, || pto_testkit::vector(&dev, &k, RuntimeKind::HostBuiltGraph)).unwrap();
    assert!(o.report.trace.is_some());
    let o = pto_testkit::vector(&dev, &k, RuntimeKind::HostBuiltGraph).unwrap();
    assert!(o.report.trace.is_none());
}

#[test]
fn a_full_ring_counts_what_it_dropped() {
    let (dev, k) = device();
    for rt in RUNTIMES {
        let p = pto_testkit::build_shape(&dev, &k, pto_testkit::ShapeKind::Chain, 64).unwrap_or_else(|e| panic!("{e}"));
        p.reset().unwrap();
        let cfg = RunConfig::default().with_runtime(rt).with_trace(true).with_trace_records(2, 4);
        let r = match rt {
            RuntimeKind::HostBuiltGraph => dev.run_with(&p.graph, &cfg),
            RuntimeKind::TensormapRing => dev.run_program(&p.program, &p.args, &cfg),
        }
        .unwrap_or_else(|e| panic!("{rt}: {e}"));
        p.check(&r).unwrap();
        let t = r.trace.expect("trace");
        assert_eq!(t.unclosed(), 0);
        assert!(t.subtasks.len() < 64);
        let core_records: u64 = t
            .rings
            .iter()
            .filter(|r| matches!(r.owner, pto::runtime::host::trace::RingOwner::Core(_)))
            .map(|r| r.records + r.dropped)
            .sum();
        assert_eq!(core_records, 64, "{rt}: every subtask stored or counted: {:?}", t.rings);
        assert!(t.dropped() > 0);
        let doc = ChromeTrace::parse("to_chrome_json", &t.to_chrome_json()).unwrap();
        assert_eq!(doc.other_data.dropped_records, t.dropped());
        // The host-built graph's arrows come from its image; the orchestrator's ring dropped.
        let flows = if rt == RuntimeKind::HostBuiltGraph { Flows::FromImage } else { Flows::Partial };
        assert_eq!(doc.other_data.flows, flows, "{rt}");
    }
}

#[test]
fn bad_trace_sizes_are_refused() {
    let (dev, k) = device();
    let p = pto_testkit::build_shape(&dev, &k, pto_testkit::ShapeKind::Independent, 4).unwrap();
    let e = dev.run_with(&p.graph, &RunConfig::default().with_trace(true).with_trace_records(0, 4)).unwrap_err();
    assert!(e.to_string().contains("trace_records"), "{e}");
    assert!(matches!(e, Error::Config(ConfigError::TraceRecords { core_records: 0, thread_records: 4, .. })), "{e:?}");
}

/// The faithful cache model (seed 1, as `PTO_SIM_CACHE=faithful:1`) on traced runs of both sim
/// boards and both contracts: the rings break no coherence rule, and the runs still pass.
#[test]
fn traced_runs_pass_the_faithful_cache_model() {
    fn on<B: Board>()
    where
        B::Platform: pto::hal::Platform,
        <B::Platform as pto::hal::HostPlatform>::Device: Faithful,
    {
        let dev = pto::open_board::<B>().unwrap_or_else(|e| panic!("open {}: {e}", B::NAME));
        dev.platform().faithful(1);
        let k = pto_testkit::Kernels::register(&dev).unwrap();
        for rt in RUNTIMES {
            for w in [pto_testkit::vector, pto_testkit::chain513, pto_testkit::mix] {
                let o =
                    pto_testkit::traced(true, || w(&dev, &k, rt)).unwrap_or_else(|e| panic!("{}: {rt}: {e}", B::NAME));
                let t = o.report.trace.expect("trace");
                assert!(t.is_complete(), "{}: {rt}: {:?}", B::NAME, t.rings);
                let subtasks: HashSet<(u32, u32, u8)> = t.subtasks.iter().map(|s| (s.task, s.block, s.lane)).collect();
                assert_eq!(subtasks.len(), t.subtasks.len());
            }
        }
    }
    trait Faithful {
        fn faithful(&self, seed: u64);
    }
    impl<C: pto::hal::Contract> Faithful for pto_sim::SimDevice<C> {
        fn faithful(&self, seed: u64) {
            self.set_cache_model(pto_sim::CacheModel::Faithful { seed, evict_per_mille: 20 }).unwrap();
        }
    }
    on::<pto::board::SimA2a3>();
    on::<pto::board::SimA5>();
}

/// A test's own scratch directory (made; removed when the test ends).
fn scratch(name: &str) -> pto_testkit::ScratchDir {
    let d = pto_testkit::ScratchDir::new("pto-trace-test", name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A traced run written to a file as `pto run --trace` writes it, read back with the typed
/// reader: the document says what the `Trace` says, field for field.
#[test]
fn a_written_trace_reads_back_through_its_types() {
    let runs = [(RuntimeKind::HostBuiltGraph, Executor::Legacy), (RuntimeKind::TensormapRing, Executor::Auto)];
    let dir = scratch("reads-back");
    for (rt, e) in runs {
        let (o, t, _) = traced_vector(rt, e);
        let path = dir.join(format!("{rt}.json"));
        pto_testkit::write_trace(&o.report, Some(&path), None).unwrap();
        let doc = ChromeTrace::read(&path).unwrap_or_else(|e| panic!("{rt}: {e}"));
        let other = &doc.other_data;
        assert_eq!(other.format_version, chrome::FORMAT_VERSION);
        assert_eq!(other.runtime, rt);
        assert_eq!(other.counter_hz, t.freq_hz);
        assert_eq!(other.origin_tick, t.origin());
        assert_eq!((other.clusters, other.aicpu_threads), (t.clusters, t.threads));
        assert_eq!((other.dropped_records, other.unclosed_rings), (t.dropped(), t.unclosed() as u64));
        let flows = if rt == RuntimeKind::HostBuiltGraph { Flows::FromImage } else { Flows::Recorded };
        assert_eq!(other.flows, flows);
        // One slice per subtask, in the trace's order, with its identity and raw ticks.
        let tasks: Vec<&chrome::TaskSlice> = doc.tasks().collect();
        assert_eq!(tasks.len(), t.subtasks.len(), "{rt}");
        for (s, d) in t.subtasks.iter().zip(&tasks) {
            assert_eq!((d.tid, d.pid, &d.name), (s.core, chrome::AICORE_PID, &t.func_name(s)), "{rt}");
            let a = &d.args;
            assert_eq!((a.task, a.block, a.lane, a.func), (s.task, s.block, s.lane, s.func), "{rt}");
            assert_eq!((a.start_tick, a.end_tick), (s.start, s.end), "{rt}");
            assert_eq!((a.dispatch_tick, a.completion_tick, a.aicpu_thread), (s.dispatch, s.completion, s.thread));
            assert_eq!(d.ts, t.micros(s.start), "{rt}");
        }
        let phases: Vec<&chrome::PhaseSlice> = doc.phases().collect();
        assert_eq!(phases.len(), t.phases.len(), "{rt}");
        for (p, d) in t.phases.iter().zip(&phases) {
            assert_eq!((d.name, d.tid, d.pid, d.ts), (p.phase, p.thread, chrome::AICPU_PID, t.micros(p.start)));
        }
        // Every track named, and the arrows: one pair per edge between tasks that ran.
        let names: Vec<(u32, u32, &str)> = doc.track_names().collect();
        assert_eq!(names.len() as u32, t.workers() + t.threads + 1, "the cores, the threads, the host's run");
        assert!(names.contains(&(chrome::AICORE_PID, 0, t.core_name(0).as_str())));
        let ran: HashSet<u32> = t.subtasks.iter().map(|s| s.task).collect();
        let edges = t.edges.as_ref().unwrap().iter().filter(|(p, c)| ran.contains(p) && ran.contains(c)).count();
        let starts = doc.trace_events.iter().filter(|e| matches!(e, Event::FlowStart(_))).count();
        let ends = doc.trace_events.iter().filter(|e| matches!(e, Event::FlowEnd(_))).count();
        assert_eq!((starts, ends), (edges, edges), "{rt}");
        // Written again, the document is the same text.
        assert_eq!(doc.to_json(), std::fs::read_to_string(&path).unwrap());
    }
}

/// A trace file of another version, or missing a field, is refused with the file, the version
/// or the field named.
#[test]
fn a_trace_of_another_version_or_missing_a_field_is_refused_by_name() {
    let (o, t, _) = traced_vector(RuntimeKind::HostBuiltGraph, Executor::Auto);
    let dir = scratch("versions");
    let good = dir.join("good.json");
    pto_testkit::write_trace(&o.report, Some(&good), None).unwrap();
    let text = std::fs::read_to_string(&good).unwrap();
    let edited = |name: &str, from: &str, to: &str| {
        assert_eq!(text.matches(from).count(), 1, "{from}");
        let p = dir.join(name);
        std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
        (ChromeTrace::read(&p).unwrap_err(), p)
    };
    let (e, p) = edited("v1.json", r#""format_version":2"#, r#""format_version":1"#);
    assert!(matches!(&e, DocumentError::Version { found: Some(v), expected: 2, .. } if v == "1"), "{e:?}");
    let m = e.to_string();
    assert!(m.contains(&p.display().to_string()) && m.contains("otherData.format_version is 1"), "{m}");
    assert!(m.contains("reads version 2"), "{m}");
    let (e, _) = edited("v0.json", r#""format_version":2,"#, "");
    assert!(matches!(&e, DocumentError::Version { found: None, .. }), "{e:?}");
    assert!(e.to_string().contains("no otherData.format_version"), "{e}");
    let hz = format!(r#""counter_hz":{},"#, t.freq_hz);
    let (e, p) = edited("nohz.json", &hz, "");
    let m = e.to_string();
    assert!(matches!(e, DocumentError::Format { .. }), "{m}");
    assert!(m.contains(&p.display().to_string()) && m.contains("missing field `counter_hz`"), "{m}");
    let (e, _) = edited("extra.json", r#""producer":"pto-rt""#, r#""producer":"pto-rt","colour":"red""#);
    assert!(e.to_string().contains("unknown field `colour`"), "{e}");
}

/// The elements of `svg` whose `class` attribute is `class`.
fn classed<'a>(doc: &'a roxmltree::Document<'a>, class: &str) -> Vec<roxmltree::Node<'a, 'a>> {
    doc.descendants().filter(|n| n.attribute("class") == Some(class)).collect()
}

/// The text of a node and its children, without its `<title>`.
fn text_of(n: roxmltree::Node<'_, '_>) -> String {
    n.children().filter(|c| c.is_text()).filter_map(|c| c.text()).collect()
}

/// HSL saturation of a `#rrggbb` colour.
fn saturation(c: &str) -> f64 {
    assert!(c.len() == 7 && c.starts_with('#'), "a solid colour: {c}");
    let v: Vec<f64> =
        (0..3).map(|i| u8::from_str_radix(&c[1 + 2 * i..3 + 2 * i], 16).unwrap() as f64 / 255.0).collect();
    let (max, min) = (v.iter().cloned().fold(0.0, f64::max), v.iter().cloned().fold(1.0, f64::min));
    if max == min { 0.0 } else { (max - min) / (1.0 - (max + min - 1.0).abs()) }
}

/// The SVG swimlane: the idle lanes folded into one summary line (every lane with the option),
/// an arrow per dependency between traced subtasks (producer end before consumer start), every
/// AICPU phase drawn named in the legend, phases hatched and task colours saturated, and the
/// title line's span the same as `pto trace --summary`'s (`ChromeTrace::span`).
#[test]
fn the_svg_folds_idle_lanes_draws_dependencies_and_names_the_phases() {
    let runs = [(RuntimeKind::HostBuiltGraph, Executor::Legacy), (RuntimeKind::TensormapRing, Executor::Auto)];
    for (rt, e) in runs {
        let (_, t, _) = traced_vector(rt, e);
        let svg = t.to_svg();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
        // Lanes: the busy ones, then one line for the idle rest.
        let busy: BTreeSet<u32> = t.subtasks.iter().map(|s| s.core).collect();
        let threads: BTreeSet<u32> = t.phases.iter().map(|p| p.thread).collect();
        let lanes: Vec<String> = classed(&doc, "lane").into_iter().map(text_of).collect();
        let mut want: Vec<String> = busy.iter().map(|&w| t.core_name(w)).collect();
        want.extend(threads.iter().map(|&th| t.thread_name(th)));
        assert_eq!(lanes, want, "{rt}: one lane per busy core and thread");
        let idle = classed(&doc, "lane idle");
        assert_eq!(idle.len(), 1, "{rt}: one summary line");
        let idle_cores = t.workers() as usize - busy.len();
        assert!(idle_cores > 60, "{rt}: five tasks leave most of the board idle");
        assert!(text_of(idle[0]).starts_with(&format!("{idle_cores} idle cores")), "{rt}: {}", text_of(idle[0]));
        let all = t.to_svg_with(&SvgOptions::default().with_all_lanes(true));
        let all = roxmltree::Document::parse(&all).expect("well-formed SVG");
        assert_eq!(classed(&all, "lane").len() as u32, t.workers() + t.threads, "{rt}: every lane");
        assert!(classed(&all, "lane idle").is_empty(), "{rt}");
        // Arrows: one per edge between traced tasks, from the producer's end to the consumer's start.
        let ran: HashSet<u32> = t.subtasks.iter().map(|s| s.task).collect();
        let edges = t.edges.as_ref().unwrap().iter().filter(|(p, c)| ran.contains(p) && ran.contains(c)).count();
        let deps = classed(&doc, "dep");
        assert_eq!((deps.len(), edges), (6, 6), "{rt}: one arrow per edge");
        for d in &deps {
            let x = |a: &str| d.attribute(a).unwrap().parse::<f64>().unwrap();
            assert!(x("x1") <= x("x2") + 0.01, "{rt}: the producer ends before the consumer starts: {d:?}");
        }
        // The legend names every phase drawn; phases are hatched, tasks saturated.
        let drawn: BTreeSet<String> = t.phases.iter().map(|p| format!("AICPU {}", p.phase.name())).collect();
        let legend: BTreeSet<String> = classed(&doc, "legend-phase")
            .into_iter()
            .map(|g| g.descendants().filter(|n| n.is_text()).filter_map(|n| n.text()).collect())
            .collect();
        assert_eq!(legend, drawn, "{rt}");
        assert!(drawn.len() >= 2, "{rt}: {drawn:?}");
        for p in classed(&doc, "phase") {
            let fill = p.attribute("fill").unwrap();
            assert!(fill.starts_with("url(#phase-"), "{rt}: a phase is hatched: {fill}");
        }
        let tasks = classed(&doc, "task");
        assert_eq!(tasks.len(), t.subtasks.len());
        for r in tasks {
            let fill = r.attribute("fill").unwrap();
            assert!(saturation(fill) >= 0.5, "{rt}: a task colour is saturated: {fill}");
        }
        // One span: the title line's is the summary's.
        let chrome = ChromeTrace::parse("to_chrome_json", &t.to_chrome_json()).unwrap();
        let (a, b) = chrome.span().unwrap();
        let title = doc.descendants().find(|n| n.has_tag_name("text")).unwrap().text().unwrap().to_string();
        assert!(title.contains(&format!("span {:.3} us", b - a)), "{rt}: {title} vs {}", b - a);
        let (s0, s1) = t.span().unwrap();
        assert_eq!(s0, t.subtasks.iter().map(|s| s.start).min().unwrap());
        assert_eq!(s1, t.subtasks.iter().map(|s| s.end).max().unwrap());
    }
}

/// The Chrome trace's host process: the run's phases in order, on the device's axis — the
/// launch starts before the device's first record and the fence ends after its last — and
/// within the trace's time range; a dumping run adds its dump phase.
#[test]
fn the_chrome_trace_puts_the_host_phases_on_the_devices_axis() {
    use pto::runtime::dump::DumpLevel;
    use pto::runtime::host::trace::HostPhase::*;
    let (dev, k) = device();
    let runs = [
        (RuntimeKind::HostBuiltGraph, Executor::Legacy, None),
        (RuntimeKind::HostBuiltGraph, Executor::Resident, None),
        (RuntimeKind::TensormapRing, Executor::Auto, None),
        (RuntimeKind::HostBuiltGraph, Executor::Legacy, Some(DumpLevel::Full)),
    ];
    for (rt, e, dump) in runs {
        let dir = pto_testkit::ScratchDir::new("pto-trace-test", &format!("host-{rt}-{e}-dump"));
        let o = pto_testkit::dumped(dump, Some(dir.clone()), || {
            pto_testkit::executed(e, || pto_testkit::traced(true, || pto_testkit::vector(&dev, &k, rt)))
        })
        .unwrap_or_else(|err| panic!("{rt} {e}: {err}"));
        let t = o.report.trace.expect("trace");
        let doc = ChromeTrace::parse("to_chrome_json", &t.to_chrome_json()).unwrap();
        let host_name = doc.trace_events.iter().find_map(|ev| match ev {
            Event::Metadata(Metadata::ProcessName(n)) if n.pid == chrome::HOST_PID => Some(n.args.name.as_str()),
            _ => None,
        });
        assert_eq!(host_name, Some("host"), "{rt} {e}");
        let run: Vec<&chrome::HostSlice> = doc.host_phases().filter(|h| h.tid == 0).collect();
        let names: Vec<_> = run.iter().map(|h| h.name).collect();
        let mut want = vec![Build, Reserve, Publish, Launch, Fence, Collect];
        if dump.is_some() {
            want.push(Dump);
        }
        assert_eq!(names, want, "{rt} {e}");
        for w in run.windows(2) {
            assert!(w[0].ts + w[0].dur <= w[1].ts + 0.05, "{rt} {e}: {:?} ends before {:?} starts", w[0], w[1]);
        }
        // The run's time range: every slice between time 0 and the trace's last tick.
        let end = t.micros(t.last());
        for h in doc.host_phases() {
            assert!(h.ts >= 0.0 && h.ts + h.dur <= end + 1e-6, "{rt} {e}: {h:?} outside 0..{end}");
        }
        // Host and device on one axis: the device's records lie between the launch and the
        // fence's end.
        let (first, last) = t.device_window();
        let (first, last) = (t.micros(first), t.micros(last));
        let launch = run.iter().find(|h| h.name == Launch).unwrap();
        let fence = run.iter().find(|h| h.name == Fence).unwrap();
        assert!(launch.ts <= first, "{rt} {e}: launch at {} us, the device's first record at {first} us", launch.ts);
        assert!(
            fence.ts + fence.dur >= last,
            "{rt} {e}: fence ends {} us, the device's last record {last} us",
            fence.ts + fence.dur
        );
        assert!(fence.ts <= last, "{rt} {e}: the fence waits while the device runs");
        if dump.is_some() {
            // In-flight drains (when any took something) are on the host's second track, inside the fence.
            for d in doc.host_phases().filter(|h| h.tid == 1) {
                assert_eq!(d.name, DumpDrain);
                assert!(d.ts >= launch.ts && d.ts + d.dur <= fence.ts + fence.dur + 0.05, "{rt} {e}: {d:?}");
            }
        }
    }
}
