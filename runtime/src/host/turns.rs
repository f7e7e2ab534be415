//! Turns and leases: which run may use which pipeline slot.
//!
//! Several host threads may share one device. A run waits its turn for a pipeline slot in
//! arrival order (bounded by [`Timeouts::turn_us`](super::Timeouts::turn_us));
//! [`Device::try_prepare`](super::Device::try_prepare) is the variant that answers
//! [`Error::Busy`] instead of waiting. A prepared run that is never launched (forgotten, or
//! leaked with `mem::forget`) holds its slot for at most
//! [`Timeouts::lease_us`](super::Timeouts::lease_us) after it was handed out (the lease starts
//! when `prepare` returns, not while it publishes) while others wait; then a waiting run
//! reclaims the slot and the stale run's `launch` fails with [`Error::Expired`]. A prepared
//! run has submitted nothing to the device, so reclaiming its slot is safe.

use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use pto_hal::HostPlatform;

use super::slots::{PIPELINE_DEPTH, Refused};
use super::{Error, Inner};

#[derive(Default)]
struct Lease {
    /// Bumped whenever the slot changes hands; a prepared run remembers the one it got.
    generation: u64,
    /// Set while the slot holds a prepared, not yet launched run.
    prepared_at: Option<Instant>,
}

#[derive(Default)]
struct TurnState {
    queue: VecDeque<u64>,
    next_ticket: u64,
    leases: [Lease; PIPELINE_DEPTH],
}

/// Arrival-ordered turns on the pipeline slots, and each slot's lease.
#[derive(Default)]
pub(crate) struct Turns {
    state: Mutex<TurnState>,
    changed: Condvar,
}

impl Turns {
    fn lock(&self) -> MutexGuard<'_, TurnState> {
        self.state.lock()
    }
}

/// A reserved slot and the lease generation that proves it is still this run's.
pub(super) struct Reserved {
    pub(super) slot: usize,
    generation: u64,
}

impl<P: HostPlatform> Inner<P> {
    /// Reserve a slot: wait in arrival order (bounded by `turn_us`) when `wait`, else answer
    /// [`Error::Busy`].
    pub(super) fn reserve_slot(&self, wait: bool) -> Result<Reserved, Error> {
        let mut st = self.turns.lock();
        let granted = |st: &mut TurnState, slot: usize| {
            let l = &mut st.leases[slot];
            l.generation += 1;
            // Not reclaimable while its launch image is being published (the caller is busy
            // with it, not gone): the lease starts when the prepared run is handed out.
            l.prepared_at = None;
            Reserved { slot, generation: l.generation }
        };
        if !wait {
            let got = match self.slot_table.reserve() {
                Err(Refused::Full) => {
                    // Both slots hold launched runs: one that ended and whose handle let it
                    // be past its lease is fenced now (without waiting), its outcome kept.
                    let lease = Duration::from_micros(self.timeouts.lease_us);
                    drop(st);
                    (0..PIPELINE_DEPTH).any(|s| self.fence_stale(s, lease, true));
                    st = self.turns.lock();
                    self.slot_table.reserve()
                }
                other => other,
            };
            return match got {
                Ok(slot) => Ok(granted(&mut st, slot)),
                Err(Refused::Full) => Err(Error::Busy("both pipeline slots hold live runs")),
                Err(Refused::PredecessorNotLaunched) => {
                    Err(Error::Busy("the other prepared run must be launched first"))
                }
            };
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back(ticket);
        let budget = Duration::from_micros(self.timeouts.turn_us);
        let deadline = Instant::now() + budget;
        loop {
            self.check_usable_now().inspect_err(|_| {
                st.queue.retain(|&t| t != ticket);
                self.turns.changed.notify_all();
            })?;
            if st.queue.front() == Some(&ticket) {
                match self.slot_table.reserve() {
                    Ok(slot) => {
                        st.queue.pop_front();
                        let r = granted(&mut st, slot);
                        self.turns.changed.notify_all();
                        return Ok(r);
                    }
                    Err(_) => {
                        // A prepared run that outlived its lease gives its slot up.
                        let expired = (0..PIPELINE_DEPTH).find(|&s| {
                            st.leases[s]
                                .prepared_at
                                .is_some_and(|t| t.elapsed() >= Duration::from_micros(self.timeouts.lease_us))
                        });
                        if let Some(s) = expired {
                            st.leases[s].generation += 1;
                            st.leases[s].prepared_at = None;
                            self.slot_table.release(s);
                            continue;
                        }
                        // A launched run whose handle let it be past its lease (forgotten,
                        // or just not waited yet) is fenced here, its outcome kept for the
                        // handle; the fence frees its slot. Not under the turn lock: the
                        // fence takes it to free the slot.
                        let lease = Duration::from_micros(self.timeouts.lease_us);
                        drop(st);
                        let fenced = (0..PIPELINE_DEPTH).any(|s| self.fence_stale(s, lease, false));
                        st = self.turns.lock();
                        if fenced {
                            continue;
                        }
                    }
                }
            }
            let now = Instant::now();
            if now >= deadline {
                st.queue.retain(|&t| t != ticket);
                self.turns.changed.notify_all();
                return Err(Error::NoTurn { micros: self.timeouts.turn_us });
            }
            // Slots are freed under this lock (`free_slot`), which notifies; the timeout
            // re-checks leases.
            let step = (deadline - now).min(Duration::from_millis(50));
            self.turns.changed.wait_for(&mut st, step);
        }
    }

    /// The run holding slot `r` is prepared and handed to its caller: its lease starts now
    /// (a prepared run never launched is reclaimable after `lease_us`).
    pub(super) fn start_lease(&self, r: &Reserved) {
        let mut st = self.turns.lock();
        let l = &mut st.leases[r.slot];
        if l.generation == r.generation {
            l.prepared_at = Some(Instant::now());
        }
    }

    /// The slot `r` names is this run's still: it stops being reclaimable (it is launching).
    pub(super) fn begin_launch(&self, r: &Reserved) -> bool {
        let mut st = self.turns.lock();
        let l = &mut st.leases[r.slot];
        if l.generation != r.generation {
            return false;
        }
        l.prepared_at = None;
        true
    }

    /// Give slot `r` back, unless it was already reclaimed from under a stale prepared run.
    pub(super) fn free_slot(&self, r: &Reserved) {
        let mut st = self.turns.lock();
        let l = &mut st.leases[r.slot];
        if l.generation == r.generation {
            l.generation += 1;
            l.prepared_at = None;
            self.slot_table.release(r.slot);
        }
        drop(st);
        self.turns.changed.notify_all();
    }

    pub(super) fn launched(&self, r: &Reserved) {
        self.slot_table.launched(r.slot);
        self.turns.changed.notify_all();
    }
}
