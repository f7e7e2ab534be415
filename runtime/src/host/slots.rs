//! Pipeline slots and run reservation.
//!
//! Two slots (`PIPELINE_DEPTH`); each holds the per-run device resources (descriptor, image,
//! handshake, gate and payload arrays) of at most one run. Rules, enforced by one CAS on one
//! word so they hold under any interleaving (model-checked under `--cfg loom`):
//!
//! * **same-slot exclusion**: a slot is reserved only when it is free;
//! * **prepared successor**: a second run may be reserved only while exactly one other run is
//!   live and that run has been launched (so a successor overlaps its predecessor's execution,
//!   never its preparation);
//! * a slot is freed only by the run that holds it, after its completion fence.

use crate::sync::{AtomicU32, Ordering};

/// Number of pipeline slots.
pub const PIPELINE_DEPTH: usize = 2;

const FREE: u32 = 0;
const PREPARED: u32 = 1;
const LAUNCHED: u32 = 2;

/// Why a reservation was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Both slots are live.
    Full,
    /// The other live run has not been launched yet.
    PredecessorNotLaunched,
}

/// The state of both slots in one atomic word (2 bits per slot).
#[derive(Debug)]
pub struct SlotTable {
    word: AtomicU32,
}

impl Default for SlotTable {
    fn default() -> Self {
        Self::new()
    }
}

impl SlotTable {
    /// Both slots free.
    pub fn new() -> SlotTable {
        SlotTable { word: AtomicU32::new(0) }
    }

    fn state(word: u32, slot: usize) -> u32 {
        (word >> (2 * slot)) & 3
    }

    fn with(word: u32, slot: usize, st: u32) -> u32 {
        (word & !(3 << (2 * slot))) | (st << (2 * slot))
    }

    /// Reserve a slot for a new run.
    pub fn reserve(&self) -> Result<usize, Refused> {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            let live: usize = (0..PIPELINE_DEPTH).filter(|&s| Self::state(cur, s) != FREE).count();
            let slot = match live {
                0 => 0,
                1 => {
                    let other = (0..PIPELINE_DEPTH).find(|&s| Self::state(cur, s) != FREE).unwrap_or(0);
                    if Self::state(cur, other) != LAUNCHED {
                        return Err(Refused::PredecessorNotLaunched);
                    }
                    1 - other
                }
                _ => return Err(Refused::Full),
            };
            let new = Self::with(cur, slot, PREPARED);
            match self.word.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(slot),
                Err(seen) => cur = seen,
            }
        }
    }

    /// Mark `slot` launched (its run's kernels are submitted).
    pub fn launched(&self, slot: usize) {
        self.transition(slot, PREPARED, LAUNCHED);
    }

    /// Free `slot`: its run completed (or was never launched).
    pub fn release(&self, slot: usize) {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            assert_ne!(Self::state(cur, slot), FREE, "slot {slot} released while free: a runtime bug");
            let new = Self::with(cur, slot, FREE);
            match self.word.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    fn transition(&self, slot: usize, from: u32, to: u32) {
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            assert_eq!(Self::state(cur, slot), from, "slot {slot} in an unexpected state: a runtime bug");
            let new = Self::with(cur, slot, to);
            match self.word.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Number of live slots (for diagnostics).
    #[cfg_attr(not(test), allow(dead_code))] // its unit tests and the loom models use it
    pub fn live(&self) -> usize {
        let w = self.word.load(Ordering::Acquire);
        (0..PIPELINE_DEPTH).filter(|&s| Self::state(w, s) != FREE).count()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn successor_only_behind_a_launched_run() {
        let t = SlotTable::new();
        let a = t.reserve().unwrap();
        assert_eq!(t.reserve(), Err(Refused::PredecessorNotLaunched));
        t.launched(a);
        let b = t.reserve().unwrap();
        assert_ne!(a, b, "same-slot exclusion");
        assert_eq!(t.reserve(), Err(Refused::Full));
        t.release(a);
        assert_eq!(t.reserve(), Err(Refused::PredecessorNotLaunched), "b not launched yet");
        t.launched(b);
        let c = t.reserve().unwrap();
        assert_eq!(c, a);
        t.release(b);
        t.release(c);
        assert_eq!(t.live(), 0);
    }
}
/// Loom models of the slot reservation (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;
