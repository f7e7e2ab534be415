//! Parking for simulated agents: spin briefly, then sleep until woken or a deadline.
//!
//! Each agent thread owns one [`Wake`]. Anything that may change what the agent waits for — a
//! register written towards it, a job queued for it, an event sent by a peer — calls
//! [`Wake::notify`]. An agent with nothing to do calls [`Wake::wait`]: it spins for a short,
//! configured time (so a hand-off between two busy agents costs no system call) and then parks
//! its thread, so idle agents cost nothing even with 100+ threads on two host cores.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// The wake-up cell of one agent thread.
#[derive(Default)]
pub struct Wake {
    flag: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Wake {
    /// Bind this cell to the calling thread (once, at thread start).
    pub fn bind_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Wake the agent (or make its next wait return at once).
    #[inline]
    pub fn notify(&self) {
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

    /// Wait until notified or until `deadline`; spin for `spin` first. May return spuriously.
    pub fn wait(&self, deadline: Option<Instant>, spin: Duration) {
        if self.take() {
            return;
        }
        if !spin.is_zero() {
            let start = Instant::now();
            let mut n = 0u32;
            loop {
                for _ in 0..64 {
                    std::hint::spin_loop();
                    if self.flag.load(Ordering::Relaxed) {
                        self.flag.store(false, Ordering::Relaxed);
                        std::sync::atomic::fence(Ordering::Acquire);
                        return;
                    }
                }
                n += 1;
                if n % 8 == 0 {
                    let now = Instant::now();
                    if now.duration_since(start) >= spin || deadline.is_some_and(|d| now >= d) {
                        break;
                    }
                }
            }
        }
        loop {
            if self.take() {
                return;
            }
            match deadline {
                None => std::thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return;
                    }
                    std::thread::park_timeout(d - now);
                }
            }
            if self.take() {
                return;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
        }
    }
}
