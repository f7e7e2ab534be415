//! What every loom model file shares: running a model with an optional preemption bound, and
//! tallying which outcomes a model reached (so a model that silently lost coverage fails).

use super::prelude::*;
use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::sync::atomic::Ordering as StdOrdering;
use std::time::Instant;

/// Check `f` under loom, optionally with a preemption bound (`LOOM_MAX_PREEMPTIONS`, when set,
/// overrides it for every model); print executions and wall time.
pub fn check(name: &str, preemption_bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(StdAtomicUsize::new(0));
    let counter = runs.clone();
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = preemption_bound;
    }
    let preemption_bound = b.preemption_bound;
    let start = Instant::now();
    b.check(move || {
        counter.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    eprintln!(
        "loom model {name}: {} executions in {:.2?}{}",
        runs.load(StdOrdering::Relaxed),
        start.elapsed(),
        preemption_bound.map_or(String::new(), |p| format!(" (preemption bound {p})"))
    );
}

/// Outcome tallies across the executions of one model (plain std atomics: invisible to loom).
pub struct Tally(Vec<StdAtomicUsize>);

#[allow(dead_code)]
impl Tally {
    /// `n` outcomes, none reached yet.
    pub fn new(n: usize) -> std::sync::Arc<Tally> {
        std::sync::Arc::new(Tally((0..n).map(|_| StdAtomicUsize::new(0)).collect()))
    }
    /// Outcome `i` happened once more.
    pub fn hit(&self, i: usize) {
        self.0[i].fetch_add(1, StdOrdering::Relaxed);
    }
    /// How often outcome `i` happened.
    pub fn get(&self, i: usize) -> usize {
        self.0[i].load(StdOrdering::Relaxed)
    }
    /// Every outcome (named by `what`, one name per outcome) happened at least once.
    pub fn assert_all_reached(&self, what: &[&str]) {
        assert_eq!(what.len(), self.0.len());
        for (i, w) in what.iter().enumerate() {
            assert!(self.get(i) > 0, "outcome \"{w}\" was never reached: the model lost coverage");
        }
    }
}

/// Run `f` under loom (preemption bound `bound`) with breakage `bits` active, and require loom
/// to find a failure whose message contains one of `what`: a reproducer of a broken variant.
#[cfg(feature = "breakage")]
#[allow(dead_code)]
pub fn expect_found(name: &str, bound: Option<usize>, bits: u64, what: &[&str], f: impl Fn() + Sync + Send + 'static) {
    let _broken = crate::breakage::activate(bits);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(name, bound, f)));
    let Err(e) = r else { panic!("{name}: loom did not find the bug") };
    let msg =
        e.downcast_ref::<String>().map(String::as_str).or_else(|| e.downcast_ref::<&str>().copied()).unwrap_or("");
    assert!(what.iter().any(|w| msg.contains(w)), "{name}: the model failed, but not as expected: {msg}");
    eprintln!("loom model {name}: found, as expected: {msg}");
}
