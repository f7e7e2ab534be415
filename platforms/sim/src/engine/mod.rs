//! The engine that runs a simulated device's agents (AICPU threads and AICores).
//!
//! Two engines, chosen per device ([`SimEngine`], `PTO_SIM_ENGINE`):
//!
//! * **threads**: one OS thread per agent, parked and woken through the host's futexes
//!   (`threads.rs`). The OS decides who runs.
//! * **coroutines**: every agent is a stackful coroutine run by a small pool of host threads
//!   (`coop.rs`). An agent gives up its host thread where it would wait (an event wait, a
//!   word wait, a delay, an idle agent waiting for a job) and may be switched at every HAL
//!   operation (a *switch point*). A hand-off between two agents is a coroutine switch, not a
//!   host wake-up.
//!
//! On the coroutine engine the simulator can also decide *which* agent runs
//! ([`Schedule::Seeded`], `PTO_SIM_SCHEDULE=seed:N`): one host thread, a seeded choice at every
//! switch point ([`Strategy`]: uniform random or PCT) and a virtual device clock, so the same
//! seed and the same host calls give the same run, byte for byte.

mod clock;
mod coop;
mod strategy;
mod threads;
mod timers;

use std::time::Duration;

pub use strategy::{EXPLORE_SEEDS, Strategy};

use crate::error::SimError;

/// Which engine runs a device's agents.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SimEngine {
    /// One OS thread per agent (the original engine).
    Threads,
    /// Every agent a coroutine on a pool of `threads` host threads (at least 1).
    Coroutines {
        /// Host threads in the pool.
        threads: u32,
    },
}

impl SimEngine {
    /// What `PTO_SIM_ENGINE` accepts.
    pub const SYNTAX: &'static str = "threads, coroutines or coroutines:THREADS";

    /// Parse `threads`, `coroutines` (one host thread) or `coroutines:N`.
    pub fn parse(v: &str) -> Option<SimEngine> {
        match v.split_once(':') {
            None if v == "threads" => Some(SimEngine::Threads),
            None if v == "coroutines" => Some(SimEngine::Coroutines { threads: 1 }),
            Some(("coroutines", n)) => {
                n.parse().ok().filter(|n| (1..=64).contains(n)).map(|threads| SimEngine::Coroutines { threads })
            }
            _ => None,
        }
    }
}

impl core::fmt::Display for SimEngine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SimEngine::Threads => f.write_str("threads"),
            SimEngine::Coroutines { threads } => write!(f, "coroutines:{threads}"),
        }
    }
}

/// Who decides the order in which agents run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// The host: whatever the engine's threads and the OS make of it (not reproducible).
    Os,
    /// The simulator, from `seed` by `strategy`, on one host thread with a virtual clock
    /// (reproducible). Runs on the coroutine engine whatever [`SimEngine`] says.
    Seeded {
        /// The seed of every choice.
        seed: u64,
        /// How the choices are made.
        strategy: Strategy,
    },
}

impl Schedule {
    /// What `PTO_SIM_SCHEDULE` accepts.
    pub const SYNTAX: &'static str = "os, seed:N, seed:N:random, seed:N:pct or seed:N:pct:DEPTH";

    /// Parse `os`, `seed:N` (random), `seed:N:random`, `seed:N:pct` or `seed:N:pct:D`.
    pub fn parse(v: &str) -> Option<Schedule> {
        if v == "os" {
            return Some(Schedule::Os);
        }
        let rest = v.strip_prefix("seed:")?;
        let (seed, strategy) = match rest.split_once(':') {
            None => (rest, Strategy::Random),
            Some((seed, s)) => (seed, Strategy::parse(s)?),
        };
        Some(Schedule::Seeded { seed: seed.parse().ok()?, strategy })
    }

    /// The seed, when the simulator decides the schedule.
    pub fn seed(self) -> Option<u64> {
        match self {
            Schedule::Os => None,
            Schedule::Seeded { seed, .. } => Some(seed),
        }
    }
}

impl core::fmt::Display for Schedule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Schedule::Os => f.write_str("os"),
            Schedule::Seeded { seed, strategy: Strategy::Random } => write!(f, "seed:{seed}"),
            Schedule::Seeded { seed, strategy: Strategy::Pct { depth } } => write!(f, "seed:{seed}:pct:{depth}"),
        }
    }
}

/// One switch point of a deterministic schedule, as the trail of the last ones keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchPoint {
    /// The switch point's number in the run of the device.
    pub step: u64,
    /// The agent that reached it: `aicpu T` or `core W` (worker index).
    pub agent: String,
    /// The HAL operation it was about to do.
    pub op: &'static str,
    /// The virtual time then, in nanoseconds since the device opened.
    pub at_ns: u64,
}

impl core::fmt::Display for SwitchPoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "#{} {} {} at {} ns", self.step, self.agent, self.op, self.at_ns)
    }
}

/// What a deterministic device can say about its schedule so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleReport {
    /// Switch points taken since the device opened.
    pub steps: u64,
    /// The last switch points, oldest first.
    pub trail: Vec<SwitchPoint>,
    /// Why the schedule stopped being a function of its seed, if it did (an agent that did
    /// not reach a switch point within the escape budget kept a host thread of its own).
    pub broken: Option<String>,
}

/// One agent to start: its name (its thread's, or its coroutine's in the schedule report) and
/// its body; its slot is its place in the list handed to [`Engine::start`].
pub(crate) struct AgentBody {
    pub name: String,
    pub body: Box<dyn FnOnce() + Send>,
}

/// The engine of one device.
pub(crate) enum Engine {
    Threads(threads::Threads),
    Coop(coop::Coop),
}

/// Why a drive of a deterministic engine ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum DriveEnd {
    /// A launch finished: the host should look at what it waits for.
    LaunchFinished,
    /// The virtual time given ran out.
    Limit,
    /// No agent can run and none waits for a time: only the host can change that.
    Stalled,
}

impl Engine {
    /// The engine for `agents` agents (AICPU threads first, then workers), from the
    /// configuration, with `spins[slot]` the spin limit of each agent on the thread engine.
    pub fn new(kind: SimEngine, schedule: Schedule, spins: Vec<Duration>, max_spinners: u32) -> Engine {
        match (kind, schedule) {
            (SimEngine::Threads, Schedule::Os) => Engine::Threads(threads::Threads::new(spins, max_spinners)),
            (SimEngine::Coroutines { threads }, Schedule::Os) => {
                Engine::Coop(coop::Coop::new(spins.len(), threads as usize, None))
            }
            (_, Schedule::Seeded { seed, strategy }) => {
                Engine::Coop(coop::Coop::new(spins.len(), 1, Some((seed, strategy))))
            }
        }
    }

    /// Start the agents (once, at open).
    pub fn start(&self, agents: Vec<AgentBody>) -> Result<(), SimError> {
        match self {
            Engine::Threads(t) => t.start(agents),
            Engine::Coop(c) => c.start(agents),
        }
    }

    /// Stop: every agent has been told to leave (shutdown flag and a notification); wait for
    /// them within a budget, and detach the ones stuck in a kernel.
    pub fn stop(&self) {
        match self {
            Engine::Threads(t) => t.stop(),
            Engine::Coop(c) => c.stop(),
        }
    }

    /// Nanoseconds of device time since the device opened (virtual on a seeded schedule).
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self {
            Engine::Threads(t) => t.now_ns(),
            Engine::Coop(c) => c.now_ns(),
        }
    }

    /// How many HAL operations an agent makes per [`Engine::switch_point`] call: every one
    /// on a seeded schedule, one in [`coop::QUANTUM`] in free mode; the thread engine needs
    /// none (the operating system switches its threads), so its agents never call.
    #[inline]
    pub fn quantum(&self) -> u32 {
        match self {
            Engine::Threads(_) => u32::MAX,
            Engine::Coop(c) => c.quantum(),
        }
    }

    /// Agent `slot` reached a HAL operation `op` (one in [`Engine::quantum`] of its operations):
    /// another agent may run first.
    #[inline(always)]
    pub fn switch_point(&self, slot: usize, op: &'static str) {
        if let Engine::Coop(c) = self {
            c.switch_point(slot, op);
        }
    }

    /// Agent `slot` waits until notified or until `deadline_ns` (device time); may return
    /// early.
    #[inline]
    pub fn wait(&self, slot: usize, deadline_ns: Option<u64>) {
        match self {
            Engine::Threads(t) => t.wait(slot, deadline_ns),
            Engine::Coop(c) => c.wait(slot, deadline_ns),
        }
    }

    /// Agent `slot` waits `ns` of device time (notifications do not cut it short).
    pub fn delay(&self, slot: usize, ns: u64) {
        match self {
            Engine::Threads(_) => threads::delay(ns),
            Engine::Coop(c) => c.delay(slot, ns),
        }
    }

    /// Wake agent `slot` (or make its next wait return at once).
    #[inline]
    pub fn notify(&self, slot: usize) {
        match self {
            Engine::Threads(t) => t.notify(slot),
            Engine::Coop(c) => c.notify(slot),
        }
    }

    /// Agent `slot` starts (`on`) or ends an orchestration program. The coroutine engine in
    /// free mode runs it on a host thread of its own meanwhile (as a chip gives the
    /// orchestration an AICPU core); the thread engine and seeded schedules change nothing.
    pub fn pin(&self, slot: usize, on: bool) -> Result<(), SimError> {
        match self {
            Engine::Coop(c) => c.pin(slot, on),
            Engine::Threads(_) => Ok(()),
        }
    }

    /// A launch finished (every agent of it reported): a drive ends so the host can look.
    pub fn launch_finished(&self) {
        if let Engine::Coop(c) = self {
            c.launch_finished();
        }
    }

    /// Whether the simulator decides the schedule (the host must drive the device).
    pub fn deterministic(&self) -> bool {
        matches!(self, Engine::Coop(c) if c.deterministic())
    }

    /// Deterministic engine only: run the agents on the engine's thread until a launch
    /// finishes, no agent can run, or `budget_ns` of virtual time has passed. Elsewhere the
    /// agents run by themselves and this returns [`DriveEnd::LaunchFinished`] at once.
    pub fn drive(&self, budget_ns: u64) -> DriveEnd {
        match self {
            Engine::Coop(c) if c.deterministic() => c.drive(budget_ns),
            _ => DriveEnd::LaunchFinished,
        }
    }

    /// What the deterministic schedule did so far (`None` when the OS schedules).
    pub fn schedule_report(&self) -> Option<ScheduleReport> {
        match self {
            Engine::Coop(c) => c.schedule_report(),
            Engine::Threads(_) => None,
        }
    }

    /// The engine's name as the run line prints it.
    pub fn describe(&self) -> String {
        match self {
            Engine::Threads(_) => "threads".into(),
            Engine::Coop(c) => c.describe(),
        }
    }
}

/// A delay outside any agent (a plain host wait).
pub(crate) fn host_delay(ns: u64) {
    threads::delay(ns)
}

pub use threads::{STOP_BUDGET, detached};

/// Nanoseconds in `d`, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_and_schedule_syntax() {
        assert_eq!(SimEngine::parse("threads"), Some(SimEngine::Threads));
        assert_eq!(SimEngine::parse("coroutines"), Some(SimEngine::Coroutines { threads: 1 }));
        assert_eq!(SimEngine::parse("coroutines:2"), Some(SimEngine::Coroutines { threads: 2 }));
        for bad in ["coroutines:0", "coroutine", "threads:2", ""] {
            assert_eq!(SimEngine::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Schedule::parse("os"), Some(Schedule::Os));
        assert_eq!(Schedule::parse("seed:7"), Some(Schedule::Seeded { seed: 7, strategy: Strategy::Random }));
        assert_eq!(
            Schedule::parse("seed:7:pct:4"),
            Some(Schedule::Seeded { seed: 7, strategy: Strategy::Pct { depth: 4 } })
        );
        for bad in ["seed:", "seed:x", "seed:1:fair", "7", "OS"] {
            assert_eq!(Schedule::parse(bad), None, "{bad:?}");
        }
        for s in ["os", "seed:7", "seed:7:pct:3"] {
            assert_eq!(Schedule::parse(s).unwrap().to_string(), s);
        }
    }
}
