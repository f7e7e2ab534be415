//! The thread engine: one OS thread per agent, parked on its [`Wake`] cell when it waits.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::AgentBody;
use super::clock::HostClock;
use crate::error::SimError;
use crate::park::{SpinPermits, Wake};

/// How long stopping waits for agent threads before it detaches the stuck ones.
pub const STOP_BUDGET: Duration = Duration::from_secs(2);

static DETACHED: AtomicU64 = AtomicU64::new(0);

/// Agents given up so far in this process because they never stopped (each was stuck in a
/// kernel that never returned when its device was dropped): threads detached, coroutines
/// left with their stacks.
pub fn detached() -> u64 {
    DETACHED.load(Ordering::Relaxed)
}

/// Count `n` more detached agents.
pub(crate) fn add_detached(n: u64) {
    DETACHED.fetch_add(n, Ordering::Relaxed);
}

pub(crate) struct Threads {
    clock: HostClock,
    wakes: Box<[Wake]>,
    /// How long each agent may spin before it parks.
    spins: Vec<Duration>,
    permits: SpinPermits,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Threads {
    pub fn new(spins: Vec<Duration>, max_spinners: u32) -> Threads {
        Threads {
            clock: HostClock::new(),
            wakes: spins.iter().map(|_| Wake::default()).collect(),
            spins,
            permits: SpinPermits::new(
                std::thread::available_parallelism().map_or(1, |n| n.get() as u64).min(max_spinners as u64),
            ),
            threads: Mutex::new(Vec::new()),
        }
    }

    pub fn start(&self, agents: Vec<AgentBody>) -> Result<(), SimError> {
        let mut threads = self.threads.lock();
        for (slot, a) in agents.into_iter().enumerate() {
            // The body runs on its thread; the wake cell learns the thread first.
            let wake: *const Wake = &self.wakes[slot];
            let wake = WakePtr(wake);
            let body = a.body;
            let h = std::thread::Builder::new()
                .name(a.name)
                .stack_size(256 * 1024)
                .spawn(move || {
                    let w = wake;
                    // SAFETY: the device keeps the engine (and so the wake cells) alive until
                    // every agent thread has stopped or been detached; a detached thread keeps
                    // the whole device state alive through the `Arc` its body holds, and the
                    // cell lives in that state.
                    unsafe { &*w.0 }.bind_current();
                    body()
                })
                .map_err(|_| SimError::InvalidArgument("could not start a simulator thread"))?;
            threads.push(h);
        }
        Ok(())
    }

    pub fn stop(&self) {
        for w in self.wakes.iter() {
            w.notify();
        }
        let mut threads = self.threads.lock();
        let deadline = Instant::now() + STOP_BUDGET;
        while Instant::now() < deadline && threads.iter().any(|t| !t.is_finished()) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut stuck = Vec::new();
        for t in threads.drain(..) {
            if t.is_finished() {
                let _ = t.join();
            } else {
                stuck.push(t.thread().name().unwrap_or("?").to_string());
            }
        }
        if !stuck.is_empty() {
            add_detached(stuck.len() as u64);
            eprintln!(
                "pto-sim: detached {} simulator thread(s) that did not stop within {:?} (a kernel that never returns?): {}",
                stuck.len(),
                STOP_BUDGET,
                stuck.join(", ")
            );
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    #[inline]
    pub fn wait(&self, slot: usize, deadline_ns: Option<u64>) {
        let deadline = deadline_ns.map(|ns| self.clock.instant_at(ns));
        let spin = if deadline.is_some() { self.spins[slot] } else { Duration::ZERO };
        self.wakes[slot].wait(deadline, spin, &self.permits);
    }

    #[inline]
    pub fn notify(&self, slot: usize) {
        self.wakes[slot].notify();
    }
}

/// A wake cell handed to the thread that binds it.
struct WakePtr(*const Wake);

// SAFETY: `Wake` is `Sync` (atomics and a `OnceLock<Thread>`); the pointer is only read as a
// shared reference on the agent's thread, while the engine that owns the cell lives.
unsafe impl Send for WakePtr {}

/// Delays below this yield the thread until the time has passed; longer ones sleep (the
/// host's sleep overshoots by tens of microseconds, which is small beside them).
const SLEEP_FROM: Duration = Duration::from_micros(100);

/// A delay on the thread engine: short ones yield the thread between looks at the clock (a
/// back-off of a few microseconds costs one or two yields, never a scheduler quantum), long
/// ones sleep.
pub(crate) fn delay(ns: u64) {
    let d = Duration::from_nanos(ns);
    if d >= SLEEP_FROM {
        std::thread::sleep(d);
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::thread::yield_now();
    }
}
