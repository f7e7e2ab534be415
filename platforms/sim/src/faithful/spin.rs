//! The faithful model's lock: a spinlock ([`spinning_top`], on `lock_api`) that gives up its
//! host thread's time slice after a short spin.
//!
//! The model takes about fifty locks per simulated task (an agent's state, a line's shard, a
//! cluster set, a register), each held for one access's bookkeeping and almost never contended:
//! on the coroutine engine one host thread runs every agent (by default), and only the host's
//! own thread and the orchestration's side thread can meet it at a lock. A `parking_lot` mutex
//! gives its lock back with a locked read-modify-write (it must look for parked waiters), a full
//! barrier that waits for the stores before it; this one with a plain release store. On the
//! 2-core machine that took the faithful run of the host-built independent shape at N = 1000
//! from 1.88–2.05 to 1.59–1.80 ms (`docs/benchmarks.md`, "Locks and contention").
//!
//! A waiter spins [`SPINS`] times, then yields its thread on every look ([`SpinThenYield`]): on
//! the thread-per-agent engine, where dozens of host threads share two processors, a holder
//! that was preempted gets the processor back instead of the waiters burning their slices.

/// Looks a waiter spins before it starts yielding.
pub const SPINS: u32 = 64;

/// The relax policy: [`SPINS`] spin-loop hints, then a yield of the host thread per look.
#[derive(Default, Debug)]
pub struct SpinThenYield {
    looks: u32,
}

impl spinning_top::relax::Relax for SpinThenYield {
    #[inline]
    fn relax(&mut self) {
        if self.looks < SPINS {
            self.looks += 1;
            core::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// The model's mutex.
pub type Mutex<T> = spinning_top::lock_api::Mutex<spinning_top::RawSpinlock<SpinThenYield>, T>;
/// A held [`Mutex`].
pub type MutexGuard<'a, T> = spinning_top::lock_api::MutexGuard<'a, spinning_top::RawSpinlock<SpinThenYield>, T>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Mutual exclusion under contention: eight host threads (more than this machine's
    /// processors, so holders are preempted while others wait) each add to a counter behind
    /// the lock with a non-atomic read, pause and write; no increment is lost.
    #[test]
    fn no_increment_is_lost_under_contention() {
        let m = Arc::new(Mutex::new(0u64));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = m.lock();
                        let v = *g;
                        core::hint::spin_loop();
                        *g = v + 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*m.lock(), 8 * 20_000);
    }
}
