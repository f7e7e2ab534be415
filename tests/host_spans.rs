//! The host's phases as `tracing` spans: a run enters build, reserve, publish, launch, fence
//! and collect in that order, each under the target `pto::host`, the run's spans carry its
//! epoch, and each phase's line is logged inside its span. Its own test binary: a `tracing`
//! subscriber turns off the events' `log` records for the whole process (`tests/host_log.rs`
//! captures those).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use pto::prelude::*;

/// What the subscriber saw, in order: `enter NAME`, `exit NAME`, `event MESSAGE`.
#[derive(Default)]
struct Capture {
    next: AtomicU64,
    seen: Mutex<Vec<String>>,
    /// Span id -> (name, its `epoch` field).
    spans: Mutex<HashMap<u64, (&'static str, Option<u64>)>>,
}

#[derive(Default)]
struct Fields {
    epoch: Option<u64>,
    message: String,
}

impl Visit for Fields {
    fn record_u64(&mut self, f: &Field, v: u64) {
        if f.name() == "epoch" {
            self.epoch = Some(v);
        }
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        if f.name() == "message" {
            self.message = format!("{v:?}");
        }
    }
}

impl Subscriber for &'static Capture {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target() == "pto::host"
    }
    fn new_span(&self, a: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut f = Fields::default();
        a.record(&mut f);
        self.spans.lock().insert(id, (a.metadata().name(), f.epoch));
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &Event<'_>) {
        let mut f = Fields::default();
        e.record(&mut f);
        self.seen.lock().push(format!("event {}", f.message));
    }
    fn enter(&self, id: &Id) {
        let name = self.spans.lock()[&id.into_u64()].0;
        self.seen.lock().push(format!("enter {name}"));
    }
    fn exit(&self, id: &Id) {
        let name = self.spans.lock()[&id.into_u64()].0;
        self.seen.lock().push(format!("exit {name}"));
    }
}

/// Invariant: on both runtimes a run enters each host phase's span once, in the run's order,
/// logs each phase's line inside its span, and its launch, fence and collect spans carry the
/// run's epoch.
#[test]
fn a_run_enters_each_host_phase_span_in_order() {
    let capture: &'static Capture = Box::leak(Box::default());
    let (dev, k) = pto_testkit::setup(pto::open).unwrap();
    for rt in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
        capture.seen.lock().clear();
        capture.spans.lock().clear();
        let report = tracing::subscriber::with_default(capture, || pto_testkit::vector(&dev, &k, rt)).unwrap().report;
        let seen = std::mem::take(&mut *capture.seen.lock());
        let first =
            |what: &str| seen.iter().position(|l| l == what).unwrap_or_else(|| panic!("{rt}: no `{what}`: {seen:#?}"));
        let phases = ["build", "reserve", "publish", "launch", "fence", "collect"];
        let enters: Vec<usize> = phases.iter().map(|p| first(&format!("enter {p}"))).collect();
        assert!(enters.windows(2).all(|w| w[0] < w[1]), "{rt}: phases out of order: {seen:#?}");
        // Each phase's line once, inside its span: the last span entered or left before it is
        // that span, entered.
        for (p, line) in [
            ("publish", "publish: slot"),
            ("launch", "launch: slot"),
            ("fence", "fence: slot"),
            ("collect", "collect: slot"),
        ] {
            let lines: Vec<usize> = seen
                .iter()
                .enumerate()
                .filter(|(_, l)| l.starts_with(&format!("event {line}")))
                .map(|(i, _)| i)
                .collect();
            assert_eq!(lines.len(), 1, "{rt}: {line}: {seen:#?}");
            let before = seen[..lines[0]].iter().rev().find(|l| l.starts_with("enter ") || l.starts_with("exit "));
            assert_eq!(
                before.map(String::as_str),
                Some(format!("enter {p}").as_str()),
                "{rt}: {line} outside {p}: {seen:#?}"
            );
        }
        for (name, epoch) in capture.spans.lock().values() {
            if ["launch", "fence", "collect"].contains(name) {
                assert_eq!(*epoch, Some(report.epoch), "{rt}: span {name}");
            }
        }
    }
}
