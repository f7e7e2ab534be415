//! Parking for simulated agents: spin briefly, then sleep until woken or a deadline.
//!
//! Each agent thread owns one [`Wake`]. Anything that may change what the agent waits for — a
//! register written towards it, a job queued for it, an event sent by a peer — calls
//! [`Wake::notify`]. An agent with nothing to do calls [`Wake::wait`]: it spins for a short,
//! configured time (so a hand-off between two busy agents costs no system call) and then parks
//! its thread, so idle agents cost nothing even with 100+ threads on two host cores.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// Limits how many agents spin at once: spinning only pays while a host CPU is free for the
/// agent that will answer. With more spinners than host CPUs, spinners only steal time from
/// the agents doing the work, so extra waiters park at once.
pub struct SpinPermits {
    spinning: AtomicU64,
    max: u64,
}

impl SpinPermits {
    /// At most `max` concurrent spinners (0 disables spinning).
    pub fn new(max: u64) -> SpinPermits {
        SpinPermits { spinning: AtomicU64::new(0), max }
    }

    fn acquire(&self) -> bool {
        if self.spinning.fetch_add(1, Ordering::AcqRel) < self.max {
            true
        } else {
            self.spinning.fetch_sub(1, Ordering::AcqRel);
            false
        }
    }

    fn release(&self) {
        self.spinning.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The wake-up cell of one agent thread.
///
/// Spinning is adaptive (as in adaptive mutexes): an agent whose recent waits ended within a
/// few microseconds spins about twice as long as those waits took; an agent whose waits were
/// long stops spinning. So a core in a tight dispatch hand-off never pays a futex wake-up,
/// and 70 idle cores waiting for a window burn no CPU.
#[derive(Default)]
pub struct Wake {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
    /// Current spin budget in nanoseconds (touched only by the owning thread).
    spin_ns: AtomicU64,
    /// When the last notification was sent ([`now_ns`]): how long the answer really took,
    /// whatever the wake-up latency of the host scheduler added afterwards.
    notified_at: AtomicU64,
}

/// Nanoseconds since the first call in this process.
fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

impl Wake {
    /// Bind this cell to the calling thread (once, at thread start).
    pub fn bind_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Wake the agent (or make its next wait return at once).
    #[inline]
    pub fn notify(&self) {
        self.notified_at.store(now_ns(), Ordering::Relaxed);
        self.flag.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Consume a pending notification without waiting.
    #[inline]
    pub fn take(&self) -> bool {
        self.flag.swap(false, Ordering::Acquire)
    }

    /// Wait until notified or until `deadline`; spin first, for at most `max_spin` (adaptive
    /// below that). May return spuriously.
    pub fn wait(&self, deadline: Option<Instant>, max_spin: Duration, permits: &SpinPermits) {
        if self.take() {
            return;
        }
        let start = Instant::now();
        let start_ns = now_ns();
        let spin = Duration::from_nanos(self.spin_ns.load(Ordering::Relaxed)).min(max_spin);
        if !spin.is_zero() && permits.acquire() {
            let woken = self.spin(start, spin, deadline);
            permits.release();
            if woken {
                return;
            }
        }
        let woken = self.park(deadline);
        if !max_spin.is_zero() {
            // Adapt on how soon the answer came (the notification's own time, not when this
            // thread got the CPU back): an answer within the spin limit says spinning pays.
            let answered = if woken {
                Duration::from_nanos(self.notified_at.load(Ordering::Relaxed).saturating_sub(start_ns))
            } else {
                start.elapsed()
            };
            let next =
                if answered < max_spin { (answered * 2).max(Duration::from_micros(2)).min(max_spin) } else { spin / 2 };
            self.spin_ns.store(next.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    fn spin(&self, start: Instant, spin: Duration, deadline: Option<Instant>) -> bool {
        let mut n = 0u32;
        loop {
            for _ in 0..64 {
                std::hint::spin_loop();
                if self.flag.load(Ordering::Relaxed) {
                    self.flag.store(false, Ordering::Relaxed);
                    std::sync::atomic::fence(Ordering::Acquire);
                    return true;
                }
            }
            n += 1;
            if n.is_multiple_of(8) {
                let now = Instant::now();
                if now.duration_since(start) >= spin || deadline.is_some_and(|d| now >= d) {
                    return false;
                }
                // Let a runnable agent that is not waiting (an orchestrator, a core just
                // woken to run its kernel) have this CPU: spinners must not starve workers.
                std::thread::yield_now();
            }
        }
    }

    /// Park until notified (`true`) or until the deadline (`false`).
    fn park(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.take() {
                return true;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    std::thread::park_timeout(d - now);
                }
            }
            if self.take() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
        }
    }
}
