//! The completion state of one launch: the agents still running its program, its failure
//! (first failure wins; a coherence violation kept whole), and the vector clocks the faithful
//! model joins across it.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use pto_inproc::{Completion, Launch};

use crate::check::CheckReport;
use crate::error::SimError;
use crate::shared::Shared;
use crate::violation::{COHERENCE_STATUS, Violation};

/// Status a launch reports when a check (`PTO_SIM_CHECK`) found something in its run.
pub const CHECK_STATUS: i32 = -78;
/// Status a launch reports when the faithful cache model cannot follow it: an agent's vector
/// clock entry is near the limit of its 32 bits ([`CLOCK_LIMIT`](crate::CLOCK_LIMIT)).
pub const MODEL_LIMIT_STATUS: i32 = -79;

/// Completion state of one launch on a stream.
pub(crate) struct LaunchState {
    /// What happened before the launch started: the submitter's clock at submission joined
    /// with the end of the previous launch on the same stream (faithful model only).
    pub start_vc: std::sync::OnceLock<Vec<u32>>,
    /// The agents still running the launch's program, the host's waiters, and the stream's
    /// next launch (started when this one is done).
    completion: Completion,
    /// The join of every agent's clock at the end of its program (faithful model only).
    pub end_vc: Mutex<Vec<u32>>,
    status: AtomicI32,
    message: Mutex<Option<String>>,
    /// The faithful model's violation, when that is what failed the launch.
    violation: Mutex<Option<Violation>>,
    /// What the checks found, when that is what failed the launch.
    check: Mutex<Option<Box<CheckReport>>>,
    /// The run this launch belongs to, when the checks record it (its launch descriptor).
    check_key: Option<u64>,
    pub scratch: AtomicPtr<()>,
}

impl LaunchState {
    /// A launch of `agents` agents; `check_key`: the run the checks record it under.
    pub fn new(agents: u32, vc_len: usize, check_key: Option<u64>) -> Arc<LaunchState> {
        Arc::new(LaunchState {
            end_vc: Mutex::new(vec![0; vc_len]),
            start_vc: std::sync::OnceLock::new(),
            completion: Completion::new(agents),
            status: AtomicI32::new(0),
            message: Mutex::new(None),
            violation: Mutex::new(None),
            check: Mutex::new(None),
            check_key,
            scratch: AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    /// Mark the launch failed by a coherence violation (first failure wins), kept whole so
    /// the host's error carries it as data ([`SimError::Coherence`]).
    pub fn fail_with_violation(&self, v: Violation) {
        if self.status.compare_exchange(0, COHERENCE_STATUS, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            *self.message.lock() = Some(v.to_string());
            *self.violation.lock() = Some(v);
        }
    }

    /// One agent finished its program. The last one retires the launch from the device's
    /// `active` count (before a waiter can see the launch done), wakes waiters, and starts
    /// the stream's next launch.
    ///
    /// When the checks record the launch's run and this was the run's last launch, the run is
    /// analysed first, and a finding fails the launch (when nothing else did).
    pub fn finish_one(&self, status: i32, message: Option<String>, shared: &Shared) {
        if status != 0 && self.status.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            *self.message.lock() = message;
        }
        self.completion.arrive(|| {
            if let Some(report) = self.check_key.and_then(|k| shared.checker.launch_finished(k)) {
                self.fail_with_check(report);
            }
            shared.active_launches.fetch_sub(1, Ordering::AcqRel);
            shared.engine.launch_finished();
        });
    }

    /// Mark the launch failed with `status` and `message` before its agents finish (first
    /// failure wins): a failure of the simulator's own, not of the program.
    pub fn fail_with_message(&self, status: i32, message: String) {
        if self.status.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            *self.message.lock() = Some(message);
        }
    }

    /// Mark the launch failed by a check's finding (first failure wins).
    fn fail_with_check(&self, report: CheckReport) {
        if self.status.compare_exchange(0, CHECK_STATUS, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            *self.message.lock() = Some(report.to_string());
            *self.check.lock() = Some(Box::new(report));
        }
    }

    /// Join an agent's end-of-program clock.
    pub fn join_end(&self, vc: &[u32]) {
        let mut e = self.end_vc.lock();
        for (a, b) in e.iter_mut().zip(vc) {
            *a = (*a).max(*b);
        }
    }
}

impl Launch for LaunchState {
    type Error = SimError;

    fn completion(&self) -> &Completion {
        &self.completion
    }

    /// The launch's failure, if any: a coherence violation as itself, anything else as a
    /// device fault with its status and message.
    fn failure(&self) -> Option<SimError> {
        let status = self.status.load(Ordering::Acquire);
        if status == CHECK_STATUS
            && let Some(r) = self.check.lock().clone()
        {
            return Some(SimError::Check(r));
        }
        if status == COHERENCE_STATUS
            && let Some(v) = self.violation.lock().clone()
        {
            return Some(SimError::Coherence(v));
        }
        (status != 0).then(|| SimError::DeviceFault { status, message: self.message.lock().clone() })
    }
}
