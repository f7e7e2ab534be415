//! The host's phase log as a `log` logger sees it (no `tracing` subscriber installed: the
//! runtime's `tracing` events and spans reach `log` through tracing's `log` feature): one
//! `debug` line per phase of a run (prepare, publish, launch, fence, collect) under the target
//! `pto::host`, each naming the run's slot and epoch, and a line per phase span as it opens
//! (`fence; slot=0 epoch=7`).

use parking_lot::Mutex;

use pto::prelude::*;

/// Every line logged under `pto::host`, in order.
static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target() == "pto::host" && m.level() <= log::Level::Debug
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            LINES.lock().push(format!("{} {}", r.level(), r.args()));
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

/// Invariant: a successful run logs prepare, publish, launch, fence and collect exactly once
/// each, in an order that follows the run (publish and prepare before launch, launch before
/// fence, fence before collect), and every line names the run's slot and epoch.
#[test]
fn a_run_logs_each_phase_once_with_its_slot_and_epoch() {
    log::set_logger(&CAPTURE).expect("the only logger of this test binary");
    log::set_max_level(log::LevelFilter::Debug);
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    let report = pto_testkit::vector(&dev, &k, RuntimeKind::HostBuiltGraph).unwrap().report;
    let lines = std::mem::take(&mut *LINES.lock());
    let phases = ["prepare", "publish", "launch", "fence", "collect"];
    let at = |p: &str| -> usize {
        let found: Vec<usize> =
            lines.iter().enumerate().filter(|(_, l)| l.starts_with(&format!("DEBUG {p}: "))).map(|(i, _)| i).collect();
        assert_eq!(found.len(), 1, "phase {p} logged {} times: {lines:#?}", found.len());
        found[0]
    };
    let i: Vec<usize> = phases.iter().map(|p| at(p)).collect();
    assert!(i[0].max(i[1]) < i[2] && i[2] < i[3] && i[3] < i[4], "phases out of order: {lines:#?}");
    for l in lines.iter().filter(|l| phases.iter().any(|p| l.starts_with(&format!("DEBUG {p}: ")))) {
        assert!(l.contains(&format!("epoch {}", report.epoch)), "line without the epoch: {l}");
        assert!(l.contains("slot "), "line without the slot: {l}");
    }
    // The spans, as they open: the run's carry its epoch.
    for span in ["launch", "fence", "collect"] {
        let opened = format!("DEBUG {span}; slot=");
        let l = lines.iter().find(|l| l.starts_with(&opened)).unwrap_or_else(|| panic!("no {span} span: {lines:#?}"));
        assert!(l.ends_with(&format!(" epoch={}", report.epoch)), "{l}");
    }
    assert!(lines.iter().any(|l| l.starts_with("DEBUG build; graph=")), "no build span: {lines:#?}");
}
