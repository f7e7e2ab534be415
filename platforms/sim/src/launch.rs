//! The completion state of one launch: the agents still running its program, its failure
//! (first failure wins; a coherence violation kept whole), and the vector clocks the faithful
//! model joins across it.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use pto_inproc::{Completion, Launch};

use crate::error::SimError;
use crate::violation::{COHERENCE_STATUS, Violation};

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
    pub scratch: AtomicPtr<()>,
}

impl LaunchState {
    pub fn new(agents: u32, vc_len: usize) -> Arc<LaunchState> {
        Arc::new(LaunchState {
            end_vc: Mutex::new(vec![0; vc_len]),
            start_vc: std::sync::OnceLock::new(),
            completion: Completion::new(agents),
            status: AtomicI32::new(0),
            message: Mutex::new(None),
            violation: Mutex::new(None),
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
    pub fn finish_one(&self, status: i32, message: Option<String>, active: &AtomicU32) {
        if status != 0 && self.status.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            *self.message.lock() = message;
        }
        self.completion.arrive(|| {
            active.fetch_sub(1, Ordering::AcqRel);
        });
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
        if status == COHERENCE_STATUS {
            if let Some(v) = self.violation.lock().clone() {
                return Some(SimError::Coherence(v));
            }
        }
        (status != 0).then(|| SimError::DeviceFault { status, message: self.message.lock().clone() })
    }
}
