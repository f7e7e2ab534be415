//! The coroutine engine: every agent is a stackful coroutine ([`corosensei`]) and a small pool
//! of host threads runs them.
//!
//! # States
//!
//! An agent is `Runnable` (in the run queue), `Running` (on one pool thread), `Blocked` (in a
//! wait, maybe with a deadline in the timer set) or `Done`. Every change of state happens
//! under the scheduler lock, and an agent is resumed only by the pool thread that took it off
//! the run queue, so two host threads never run one stack.
//!
//! A notification sets the agent's flag and, if the agent is `Blocked` and wakeable, makes it
//! `Runnable`. A waiting agent first consumes its flag (returning at once when it was set);
//! otherwise it suspends, and the pool thread — under the lock — looks at the flag once more
//! before it parks the agent. So a notification that lands between the agent's look and its
//! suspension is never lost.
//!
//! # Switch points
//!
//! Every HAL operation of an agent is a switch point. With the OS deciding (free mode) an
//! agent gives up its host thread at one switch point in [`QUANTUM`] when another agent is
//! runnable, so an agent that spins on HAL reads lets the one it waits for run. On a seeded
//! schedule every switch point is a choice of the [`Chooser`], and the virtual clock advances
//! [`STEP_NS`] per switch point; when no agent can run, it jumps to the earliest deadline.
//!
//! # The orchestrator's own thread
//!
//! On a chip the device-side orchestration has an AICPU core to itself. In free mode an agent
//! that runs an orchestration program (the HAL's `run_program`) is *pinned* for the call: it
//! moves to a host thread of its own (the side thread, started on the first pin) and back to
//! the pool when the call returns. The side thread runs pinned agents only and the pool never
//! runs them; a pinned agent is in the side queue, never in the pool's. Seeded schedules pin
//! nothing (one host thread decides everything).
//!
//! # Agents that never yield
//!
//! A kernel that loops without touching the HAL, sleeps, or blocks in its own code keeps its
//! host thread. A supervisor thread watches the pool: a thread that has been running one agent
//! for longer than the escape budget is given up to that agent and a new pool thread takes
//! its place, so every other agent (the scheduler that reports `KERNEL_HUNG`, the other
//! cores) goes on. When the stuck agent reaches a switch point again its thread leaves the
//! pool. On a seeded schedule the escape is recorded: from then on the run is not a function
//! of the seed, and the schedule report says so.

use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::clock::HostClock;
use super::strategy::Chooser;
use super::timers::Timers;
use super::{AgentBody, DriveEnd, ScheduleReport, Strategy, SwitchPoint};
use crate::error::SimError;

/// Free mode: an agent looks at one switch point in this many whether to give up its host
/// thread: when another agent is runnable and it has run [`SLICE_NS`] since it was resumed.
pub const QUANTUM: u32 = 64;

/// Free mode: the host time an agent may keep its thread while others are runnable.
pub const SLICE_NS: u64 = 20_000;

/// Free mode: while agents are runnable, the timers are looked at once in this many picks.
const TIMER_LOOK: u32 = 16;

/// Seeded mode: virtual nanoseconds one switch point takes.
pub const STEP_NS: u64 = 10;

/// Stack of each agent's coroutine (as the thread engine's threads had).
const STACK_BYTES: usize = 256 * 1024;

/// How long a pool thread may run one agent without a switch point before the supervisor
/// gives the thread up to it: free mode (a stuck kernel must not hold up the scheduler that
/// reports it) and seeded mode (long enough that a slow kernel on a loaded host does not
/// break determinism).
const ESCAPE_FREE: Duration = Duration::from_millis(20);
const ESCAPE_SEEDED: Duration = Duration::from_secs(4);

/// Seeded mode, while an agent has escaped: device time advances this much per this much
/// real time waited.
const ESCAPED_TICK_NS: u64 = 1_000_000;

/// How many switch points the trail of a seeded schedule keeps.
const TRAIL: usize = 32;

/// What a suspended agent asks of its pool thread.
#[derive(Copy, Clone, Debug)]
enum Yield {
    /// Block until notified (when `wakeable`) or until the deadline (device ns).
    Block { deadline: Option<u64>, wakeable: bool },
    /// Stay runnable: another agent runs first.
    Switch,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum St {
    Runnable,
    Running,
    Blocked { deadline: Option<u64>, wakeable: bool },
    Done,
}

type Co = Coroutine<(), Yield, (), DefaultStack>;

/// A coroutine handed between pool threads.
struct SendCo(Co);

// SAFETY: an agent's body is a `Send` closure, and what its stack holds when it is suspended
// is what the thread engine's agent threads held: `Send` data of the device. No borrow of a
// thread-local crosses a suspension (agents suspend only at switch points and waits, which
// hold none), and the scheduler guarantees one host thread at a time resumes it.
unsafe impl Send for SendCo {}

/// One agent's cell.
struct Slot {
    name: String,
    notified: AtomicBool,
    /// The coroutine's yielder, set when it first runs (null before).
    yielder: AtomicPtr<Yielder<(), Yield>>,
    /// The coroutine's stack: `[limit, base)`.
    stack: (usize, usize),
    /// Free mode: when its current slice began (ns since the epoch; 0: not yet looked).
    slice_start: AtomicU64,
    /// Runs on the side thread (an orchestration program in free mode). Changed only by the
    /// agent itself while it runs, read under the lock wherever it is queued.
    pinned: AtomicBool,
    co: Mutex<Option<SendCo>>,
}

/// The seeded schedule's state.
struct Det {
    chooser: Chooser,
    /// The agent the chooser picked at the last switch point, when it was not the agent that
    /// reached it.
    next: Option<usize>,
    /// The current drive: the virtual time it ends at, and how it ended.
    drive: Option<u64>,
    ended: Option<DriveEnd>,
    finishes: u64,
    seen_finishes: u64,
    trail: VecDeque<(u64, usize, &'static str, u64)>,
    broken: Option<String>,
    runnable: Vec<usize>,
}

struct Sched {
    st: Vec<St>,
    queue: VecDeque<usize>,
    /// Runnable pinned agents (the side thread's queue).
    side: VecDeque<usize>,
    /// The side thread waits for work.
    side_idle: bool,
    timers: Timers,
    det: Option<Det>,
    shutdown: bool,
    /// Stopping gave up on the agents still running (stuck in a kernel).
    abandoned: bool,
    idle_threads: usize,
    /// Free mode: picks made (the timers are looked at every [`TIMER_LOOK`]).
    picks: u32,
    /// Agents running on a pool thread given up to them (they did not yield in time).
    escaped: usize,
}

/// A pool thread as the supervisor sees it.
#[derive(Default)]
struct PoolThread {
    /// Resumptions begun and ended, counted together: odd while it runs an agent. (No clock
    /// on the hot path: the supervisor times how long an odd value stays.) Written by its pool
    /// thread alone, so by a load and a store ([`PoolThread::count_resume`]), not a locked
    /// read-modify-write: two per resume.
    resumes: AtomicU64,
    /// The supervisor's last look: the count it saw and since when (touched by it alone).
    seen: Mutex<(u64, Option<Instant>)>,
    slot: AtomicUsize,
    /// Given up to the agent it runs: it leaves the pool when that agent suspends.
    captured: AtomicBool,
}

impl PoolThread {
    /// A resumption begins or ends (called by this pool thread only: the count's one writer).
    #[inline]
    fn count_resume(&self) {
        self.resumes.store(self.resumes.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
}

/// A pool thread and its handle (taken when it is joined).
type PoolEntry = (Arc<PoolThread>, Option<JoinHandle<()>>);

struct State {
    clock: HostClock,
    /// The agents' cells, fixed when the engine starts.
    slots: std::sync::OnceLock<Box<[Slot]>>,
    sched: Mutex<Sched>,
    /// Pool threads wait here for work; a drive's host waits here for its end.
    cv: Condvar,
    /// Seeded mode: held by the host thread whose drive is in progress.
    drive_turn: Mutex<()>,
    /// Free mode: agents in the run queue (read without the lock by switch points).
    queued: AtomicUsize,
    /// Free mode: agents in the side queue (read by a pinned agent's switch points).
    side_queued: AtomicUsize,
    /// The side thread waits here for a pinned agent to run.
    side_cv: Condvar,
    /// The side thread, once started.
    side_thread: Mutex<Option<(Arc<PoolThread>, JoinHandle<()>)>>,
    /// Seeded mode: the virtual clock (ns).
    vnow: AtomicU64,
    seeded: Option<(u64, Strategy)>,
    pool: Mutex<Vec<PoolEntry>>,
    escape: Duration,
}

pub(crate) struct Coop {
    state: Arc<State>,
    threads: usize,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

impl Coop {
    pub fn new(agents: usize, threads: usize, seeded: Option<(u64, Strategy)>) -> Coop {
        let det = seeded.map(|(seed, strategy)| Det {
            chooser: Chooser::new(seed, strategy, agents),
            next: None,
            drive: None,
            ended: None,
            finishes: 0,
            seen_finishes: 0,
            trail: VecDeque::with_capacity(TRAIL),
            broken: None,
            runnable: Vec::with_capacity(agents),
        });
        let state = State {
            clock: HostClock::new(),
            slots: std::sync::OnceLock::new(),
            sched: Mutex::new(Sched {
                st: vec![St::Done; agents],
                queue: VecDeque::with_capacity(agents),
                side: VecDeque::new(),
                side_idle: false,
                timers: Timers::default(),
                det,
                shutdown: false,
                abandoned: false,
                idle_threads: 0,
                picks: 0,
                escaped: 0,
            }),
            cv: Condvar::new(),
            drive_turn: Mutex::new(()),
            queued: AtomicUsize::new(0),
            side_queued: AtomicUsize::new(0),
            side_cv: Condvar::new(),
            side_thread: Mutex::new(None),
            vnow: AtomicU64::new(0),
            seeded,
            pool: Mutex::new(Vec::new()),
            escape: if seeded.is_some() { ESCAPE_SEEDED } else { ESCAPE_FREE },
        };
        Coop { state: Arc::new(state), threads: threads.max(1), supervisor: Mutex::new(None) }
    }

    pub fn deterministic(&self) -> bool {
        self.state.seeded.is_some()
    }

    pub fn describe(&self) -> String {
        match self.state.seeded {
            Some(_) => "coroutines:1".into(),
            None => format!("coroutines:{}", self.threads),
        }
    }

    pub fn start(&self, agents: Vec<AgentBody>) -> Result<(), SimError> {
        let s = &self.state;
        let mut slots = Vec::with_capacity(agents.len());
        for (i, a) in agents.into_iter().enumerate() {
            let stack = DefaultStack::new(STACK_BYTES)
                .map_err(|_| SimError::InvalidArgument("could not map a simulator agent's stack"))?;
            let range = (stack.limit().get(), stack.base().get());
            let body = a.body;
            // Weak: the coroutine lives in the state, and must not keep it alive.
            let state = Arc::downgrade(s);
            let co = Coroutine::with_stack(stack, move |y: &Yielder<(), Yield>, ()| {
                if let Some(s) = state.upgrade() {
                    s.slots()[i].yielder.store(y as *const _ as *mut _, Ordering::Release);
                }
                drop(state);
                body();
            });
            slots.push(Slot {
                name: a.name,
                notified: AtomicBool::new(false),
                yielder: AtomicPtr::new(std::ptr::null_mut()),
                stack: range,
                slice_start: AtomicU64::new(0),
                pinned: AtomicBool::new(false),
                co: Mutex::new(Some(SendCo(co))),
            });
        }
        if s.slots.set(slots.into_boxed_slice()).is_err() {
            return Err(SimError::InvalidArgument("the simulator's engine was started twice"));
        }
        {
            let mut g = s.sched.lock();
            for i in 0..s.slots().len() {
                g.st[i] = St::Runnable;
                g.queue.push_back(i);
            }
            s.queued.store(g.queue.len(), Ordering::Release);
        }
        for _ in 0..self.threads {
            spawn_pool_thread(s)?;
        }
        let w = Arc::downgrade(s);
        let sup = std::thread::Builder::new()
            .name("pto-sim-supervisor".into())
            .spawn(move || supervise(w))
            .map_err(|_| SimError::InvalidArgument("could not start the simulator's supervisor thread"))?;
        *self.supervisor.lock() = Some(sup);
        Ok(())
    }

    pub fn stop(&self) {
        let s = &self.state;
        {
            let mut g = s.sched.lock();
            g.shutdown = true;
            for i in 0..s.slots().len() {
                s.slots()[i].notified.store(true, Ordering::Release);
                wake_locked(s, &mut g, i);
            }
        }
        s.cv.notify_all();
        s.side_cv.notify_all();
        let deadline = Instant::now() + super::threads::STOP_BUDGET;
        loop {
            let live = s.sched.lock().st.iter().filter(|&&st| st != St::Done).count();
            if live == 0 || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let stuck: Vec<String> = {
            let mut g = s.sched.lock();
            g.abandoned = true;
            (0..s.slots().len()).filter(|&i| g.st[i] != St::Done).map(|i| s.slots()[i].name.clone()).collect()
        };
        // Pool threads (and the side thread) leave once shut down and out of work; one still
        // running a stuck agent is left to it (detached).
        s.cv.notify_all();
        s.side_cv.notify_all();
        let mut pool: Vec<_> = s.pool.lock().iter_mut().filter_map(|(p, h)| h.take().map(|h| (p.clone(), h))).collect();
        pool.extend(s.side_thread.lock().take());
        for (p, h) in pool {
            let deadline = Instant::now() + Duration::from_millis(200);
            while p.resumes.load(Ordering::Acquire) % 2 == 0 && !h.is_finished() && Instant::now() < deadline {
                s.cv.notify_all();
                s.side_cv.notify_all();
                std::thread::sleep(Duration::from_micros(200));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        if let Some(h) = self.supervisor.lock().take() {
            h.thread().unpark();
            let _ = h.join();
        }
        if !stuck.is_empty() {
            super::threads::add_detached(stuck.len() as u64);
            // Their coroutines keep their stacks: unwinding a stack stuck in a kernel is not safe.
            for i in 0..s.slots().len() {
                if let Some(co) = s.slots()[i].co.try_lock().and_then(|mut c| c.take()) {
                    std::mem::forget(co);
                }
            }
            eprintln!(
                "pto-sim: gave up {} simulator agent(s) that did not stop within {:?} (a kernel that never returns?): {}",
                stuck.len(),
                super::threads::STOP_BUDGET,
                stuck.join(", ")
            );
        }
    }

    #[inline]
    pub fn now_ns(&self) -> u64 {
        match self.state.seeded {
            Some(_) => self.state.vnow.load(Ordering::Acquire),
            None => self.state.clock.now_ns(),
        }
    }

    /// Whether the caller runs on agent `slot`'s own stack (a kernel's own thread does not).
    #[inline]
    fn on_own_stack(&self, slot: usize) -> bool {
        let marker = 0u8;
        let here = &marker as *const u8 as usize;
        let (lo, hi) = self.state.slots()[slot].stack;
        (lo..hi).contains(&here)
    }

    #[inline]
    fn suspend(&self, slot: usize, y: Yield) {
        let p = self.state.slots()[slot].yielder.load(Ordering::Acquire);
        // SAFETY: the yielder was stored by this agent's coroutine when it started and lives
        // as long as the coroutine; the caller checked it runs on that coroutine's stack, so
        // this is the coroutine suspending itself.
        unsafe { &*p }.suspend(y);
    }

    /// Operations an agent counts down between calls of [`Coop::switch_point`]: one on a
    /// seeded schedule (every operation is a choice), [`QUANTUM`] in free mode.
    #[inline]
    pub fn quantum(&self) -> u32 {
        if self.state.seeded.is_some() { 1 } else { QUANTUM }
    }

    /// Agent `slot` reached a switch point (the HAL operation `op`, one in [`Coop::quantum`]
    /// of its operations): in free mode it gives way when others wait and its slice is used
    /// up; on a seeded schedule the chooser picks who runs next.
    pub fn switch_point(&self, slot: usize, op: &'static str) {
        let s = &self.state;
        if s.seeded.is_none() {
            // The agent counted [`QUANTUM`] operations down before calling.
            let others = if s.slots()[slot].pinned.load(Ordering::Relaxed) { &s.side_queued } else { &s.queued };
            if others.load(Ordering::Relaxed) == 0 || !self.on_own_stack(slot) {
                return;
            }
            // Others wait: give way once this agent has had its slice of host time since it was
            // resumed (the first look starts the slice; no clock read per resume).
            let sl = &s.slots()[slot];
            let now = s.clock.now_ns().max(1);
            let start = sl.slice_start.load(Ordering::Relaxed);
            if start == 0 {
                sl.slice_start.store(now, Ordering::Relaxed);
            } else if now - start >= SLICE_NS {
                self.suspend(slot, Yield::Switch);
            }
            return;
        }
        if !self.on_own_stack(slot) {
            return;
        }
        let switch = {
            let mut g = s.sched.lock();
            let now = s.vnow.load(Ordering::Relaxed) + STEP_NS;
            s.vnow.store(now, Ordering::Release);
            fire_timers(s, &mut g, now);
            let Sched { st, det, .. } = &mut *g;
            let d = det.as_mut().expect("seeded");
            let step = d.chooser.steps();
            if d.trail.len() == TRAIL {
                d.trail.pop_front();
            }
            d.trail.push_back((step, slot, op, now));
            if d.drive.is_some_and(|limit| now >= limit) {
                d.ended.get_or_insert(DriveEnd::Limit);
                true
            } else {
                d.runnable.clear();
                d.runnable.extend((0..st.len()).filter(|&i| st[i] == St::Runnable || i == slot));
                let pick = d.chooser.pick(&d.runnable, Some(slot));
                if pick != slot {
                    d.next = Some(pick);
                    true
                } else {
                    false
                }
            }
        };
        if switch {
            self.suspend(slot, Yield::Switch);
        }
    }

    pub fn wait(&self, slot: usize, deadline_ns: Option<u64>) {
        let sl = &self.state.slots()[slot];
        if sl.notified.swap(false, Ordering::AcqRel) {
            return;
        }
        if !self.on_own_stack(slot) {
            // Not the agent's own coroutine (a kernel's thread): a short host sleep.
            std::thread::sleep(Duration::from_micros(50));
            return;
        }
        // Seeded: a deadline already past returns at once (the virtual clock is one load).
        // Free: no clock read here; a past deadline's timer fires at the pool's next look.
        if self.state.seeded.is_some() && deadline_ns.is_some_and(|d| d <= self.now_ns()) {
            return;
        }
        self.suspend(slot, Yield::Block { deadline: deadline_ns, wakeable: true });
        // Resumed: the notification that woke it is consumed here, as a chip's wait for an
        // event clears the event it woke on. Left set, it would end the agent's next wait at
        // once, a wake for nothing (one per real wake: a core waiting for its answers woke
        // twice per answer). A notification that came after the resume is consumed too, but
        // the caller re-reads the state it waits on after this returns, and the swap acquires
        // the notifier's release, so the write behind it is seen.
        sl.notified.swap(false, Ordering::AcqRel);
    }

    pub fn delay(&self, slot: usize, ns: u64) {
        if !self.on_own_stack(slot) {
            super::threads::delay(ns);
            return;
        }
        let until = self.now_ns().saturating_add(ns);
        while self.now_ns() < until {
            self.suspend(slot, Yield::Block { deadline: Some(until), wakeable: false });
        }
    }

    pub fn notify(&self, slot: usize) {
        let s = &self.state;
        s.slots()[slot].notified.store(true, Ordering::Release);
        let wake_thread = {
            let mut g = s.sched.lock();
            match wake_locked(s, &mut g, slot) {
                Some(Queue::Side) => {
                    wake_queue(s, &g, Queue::Side);
                    false
                }
                Some(Queue::Pool) => g.idle_threads > 0,
                None => false,
            }
        };
        if wake_thread {
            // Seeded: the driving host waits on the same condition variable.
            if s.seeded.is_some() {
                s.cv.notify_all();
            } else {
                s.cv.notify_one();
            }
        }
    }

    /// Agent `slot` starts (`on`) or ends an orchestration program: in free mode it moves to
    /// the side thread for the call, and back to the pool after (see the module
    /// documentation). Called by the agent itself, on its own stack.
    pub fn pin(&self, slot: usize, on: bool) -> Result<(), SimError> {
        let s = &self.state;
        if s.seeded.is_some() || !self.on_own_stack(slot) {
            return Ok(());
        }
        if on {
            self.start_side()?;
        }
        let sl = &s.slots()[slot];
        if sl.pinned.swap(on, Ordering::AcqRel) == on {
            return Ok(());
        }
        // Suspend as runnable: the thread that resumed it queues it where it now belongs.
        self.suspend(slot, Yield::Switch);
        Ok(())
    }

    /// Start the side thread, once.
    fn start_side(&self) -> Result<(), SimError> {
        let s = &self.state;
        let mut side = s.side_thread.lock();
        if side.is_some() {
            return Ok(());
        }
        let p = Arc::new(PoolThread::default());
        let (st, p2) = (self.state.clone(), p.clone());
        let h = std::thread::Builder::new()
            .name("pto-sim-engine-side".into())
            .spawn(move || run_pool(&st, &p2, Queue::Side))
            .map_err(|_| SimError::InvalidArgument("could not start the simulator's orchestration thread"))?;
        *side = Some((p, h));
        Ok(())
    }

    pub fn launch_finished(&self) {
        if let Some(d) = self.state.sched.lock().det.as_mut() {
            d.finishes += 1;
        }
    }

    pub fn drive(&self, budget_ns: u64) -> DriveEnd {
        let s = &self.state;
        // One drive at a time: two host threads waiting on one device take turns (each drive
        // ends at a launch's end, so neither waits long for the other's).
        let _turn = s.drive_turn.lock();
        let mut g = s.sched.lock();
        {
            let now = s.vnow.load(Ordering::Acquire);
            let d = g.det.as_mut().expect("seeded");
            d.drive = Some(now.saturating_add(budget_ns));
            d.ended = None;
            d.seen_finishes = d.finishes;
        }
        s.cv.notify_all();
        loop {
            if let Some(end) = g.det.as_mut().and_then(|d| d.ended) {
                let d = g.det.as_mut().expect("seeded");
                d.drive = None;
                d.ended = None;
                return end;
            }
            s.cv.wait_for(&mut g, Duration::from_millis(50));
        }
    }

    pub fn schedule_report(&self) -> Option<ScheduleReport> {
        let s = &self.state;
        let g = s.sched.lock();
        let d = g.det.as_ref()?;
        Some(ScheduleReport {
            steps: d.chooser.steps(),
            trail: d
                .trail
                .iter()
                .map(|&(step, slot, op, at_ns)| SwitchPoint { step, agent: s.slots()[slot].name.clone(), op, at_ns })
                .collect(),
            broken: d.broken.clone(),
        })
    }
}

impl State {
    /// The agents' cells (the engine has started: nothing runs before).
    #[inline]
    fn slots(&self) -> &[Slot] {
        self.slots.get().map_or(&[], |s| &s[..])
    }
}

/// The run queues: the pool's, and the side thread's for pinned agents.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Queue {
    Pool,
    Side,
}

/// Queue runnable agent `i` where it belongs (the side queue when it is pinned); which queue.
fn enqueue(s: &State, g: &mut Sched, i: usize) -> Queue {
    g.st[i] = St::Runnable;
    if s.slots()[i].pinned.load(Ordering::Acquire) {
        g.side.push_back(i);
        s.side_queued.store(g.side.len(), Ordering::Release);
        Queue::Side
    } else {
        g.queue.push_back(i);
        s.queued.store(g.queue.len(), Ordering::Release);
        Queue::Pool
    }
}

/// Whether agent `i` is blocked until `deadline` (else a timer for it is stale).
fn waits(st: &[St], deadline: u64, i: usize) -> bool {
    matches!(st[i], St::Blocked { deadline: Some(d), .. } if d == deadline)
}

/// Make agent `i` runnable if it is blocked and wakeable; the queue it went to, if it did.
fn wake_locked(s: &State, g: &mut Sched, i: usize) -> Option<Queue> {
    match g.st[i] {
        // Its timer, if any, goes stale: dropped when it comes to the front.
        St::Blocked { wakeable, .. } if wakeable || g.shutdown => Some(enqueue(s, g, i)),
        _ => None,
    }
}

/// Make every agent whose deadline is at or before `now` runnable; wakes the side thread when
/// a pinned agent's deadline passed.
fn fire_timers(s: &State, g: &mut Sched, now: u64) {
    let mut side = false;
    while let Some(i) = g.timers.pop_due(now, |d, i| waits(&g.st, d, i)) {
        side |= enqueue(s, g, i) == Queue::Side;
    }
    if side {
        wake_queue(s, g, Queue::Side);
    }
}

fn spawn_pool_thread(state: &Arc<State>) -> Result<(), SimError> {
    let p = Arc::new(PoolThread::default());
    let mut pool = state.pool.lock();
    let n = pool.len();
    let (s, p2) = (state.clone(), p.clone());
    let h = std::thread::Builder::new()
        .name(format!("pto-sim-engine-{n}"))
        .spawn(move || run_pool(&s, &p2, Queue::Pool))
        .map_err(|_| SimError::InvalidArgument("could not start a simulator engine thread"))?;
    pool.push((p, Some(h)));
    Ok(())
}

/// What a pool thread does next.
enum Next {
    Run(usize),
    Wait(Option<Instant>),
    Leave,
}

/// A host thread of the engine: a pool thread (`Queue::Pool`), or the side thread that runs
/// pinned agents (`Queue::Side`).
fn run_pool(s: &State, me: &PoolThread, role: Queue) {
    crate::panics::install_quiet_hook();
    // One lock per resume: the lock taken to file the agent that just suspended also picks the
    // next one.
    let mut g = s.sched.lock();
    loop {
        let next = {
            let n = match role {
                Queue::Side => pick_side(s, &mut g),
                Queue::Pool => pick_next(s, &mut g),
            };
            if let Next::Wait(until) = n {
                let cv = match role {
                    Queue::Side => {
                        g.side_idle = true;
                        &s.side_cv
                    }
                    Queue::Pool => {
                        g.idle_threads += 1;
                        &s.cv
                    }
                };
                match until {
                    Some(t) => {
                        cv.wait_until(&mut g, t);
                    }
                    None => cv.wait(&mut g),
                }
                match role {
                    Queue::Side => g.side_idle = false,
                    Queue::Pool => g.idle_threads -= 1,
                }
                continue;
            }
            n
        };
        let slot = match next {
            Next::Run(i) => i,
            Next::Leave => return,
            Next::Wait(_) => unreachable!(),
        };
        drop(g);
        me.slot.store(slot, Ordering::Relaxed);
        me.count_resume();
        s.slots()[slot].slice_start.store(0, Ordering::Relaxed);
        let result = {
            let mut co = s.slots()[slot].co.lock();
            let c = co.as_mut().expect("a runnable agent has its coroutine");
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.0.resume(())))
        };
        me.count_resume();
        g = s.sched.lock();
        {
            match result {
                Ok(CoroutineResult::Yield(Yield::Switch)) => {
                    // Free mode: to the back of its queue (the other one when it was just
                    // pinned or unpinned). Seeded mode: the chooser decides.
                    requeue(s, &mut g, slot, role);
                }
                Ok(CoroutineResult::Yield(Yield::Block { deadline, wakeable })) => {
                    // A notification that came while it was suspending (or the shutdown) wakes
                    // it at once.
                    if wakeable && (s.slots()[slot].notified.swap(false, Ordering::AcqRel) || g.shutdown) {
                        requeue(s, &mut g, slot, role);
                    } else {
                        g.st[slot] = St::Blocked { deadline, wakeable };
                        if let Some(d) = deadline {
                            let Sched { st, timers, .. } = &mut *g;
                            timers.add(d, slot, st.len(), |d, i| waits(st, d, i));
                        }
                    }
                }
                Ok(CoroutineResult::Return(())) => g.st[slot] = St::Done,
                Err(p) => {
                    g.st[slot] = St::Done;
                    eprintln!(
                        "pto-sim: agent {} failed outside its program: {}",
                        s.slots()[slot].name,
                        crate::panics::take_message(&*p)
                    );
                }
            }
            s.queued.store(g.queue.len(), Ordering::Release);
            if let Some(d) = g.det.as_mut()
                && d.finishes != d.seen_finishes
                && d.drive.is_some()
            {
                d.seen_finishes = d.finishes;
                d.ended.get_or_insert(DriveEnd::LaunchFinished);
            }
            if me.captured.load(Ordering::Acquire) {
                g.escaped -= 1;
                drop(g);
                s.cv.notify_all();
                return;
            }
            if g.det.as_ref().is_some_and(|d| d.ended.is_some()) {
                s.cv.notify_all();
            }
        }
    }
}

/// Queue agent `i`, just suspended on a thread of queue `on`, where it belongs; when that is
/// the other queue (it was just pinned or unpinned), wake a thread of it.
fn requeue(s: &State, g: &mut Sched, i: usize, on: Queue) {
    let q = enqueue(s, g, i);
    if q != on {
        wake_queue(s, g, q);
    }
}

/// Wake an idle thread of queue `q` (it just got work).
fn wake_queue(s: &State, g: &Sched, q: Queue) {
    match q {
        Queue::Side if g.side_idle => {
            s.side_cv.notify_one();
        }
        Queue::Pool if g.idle_threads > 0 => {
            s.cv.notify_one();
        }
        _ => {}
    }
}

/// The side thread's next step, under the lock: a pinned agent, or a wait (the pool's threads
/// fire the timers, and queue a pinned agent here when its deadline passes).
fn pick_side(s: &State, g: &mut Sched) -> Next {
    // An empty queue looks at the timers itself: a pool thread parked until a far deadline
    // does not fire a pinned agent's earlier one.
    let now = g.side.is_empty().then(|| s.clock.now_ns());
    if let Some(now) = now {
        fire_timers(s, g, now);
    }
    if let Some(i) = g.side.pop_front() {
        s.side_queued.store(g.side.len(), Ordering::Release);
        g.st[i] = St::Running;
        return Next::Run(i);
    }
    if all_done(g) {
        return Next::Leave;
    }
    // A bounded wait (at most 1 ms), until the earliest deadline.
    let now = now.unwrap_or_default();
    let until = g
        .timers
        .first(|d, i| waits(&g.st, d, i))
        .map_or(Duration::from_millis(1), |(d, _)| Duration::from_nanos(d.saturating_sub(now)));
    Next::Wait(Some(Instant::now() + until.min(Duration::from_millis(1))))
}

/// Shut down, and every agent done (or given up on): a thread of the engine leaves.
fn all_done(g: &Sched) -> bool {
    g.shutdown && (g.abandoned || g.st.iter().all(|&st| st == St::Done))
}

/// The pool thread's next step, under the lock.
fn pick_next(s: &State, g: &mut Sched) -> Next {
    let Some(det) = g.det.as_ref() else {
        // The clock is read when the queue is empty, and every few picks otherwise (a timer
        // fires a little late while agents are runnable: device time is not the host's).
        g.picks = g.picks.wrapping_add(1);
        if g.queue.is_empty() || g.picks.is_multiple_of(TIMER_LOOK) {
            fire_timers(s, g, s.clock.now_ns());
        }
        if let Some(i) = g.queue.pop_front() {
            s.queued.store(g.queue.len(), Ordering::Release);
            g.st[i] = St::Running;
            return Next::Run(i);
        }
        if all_done(g) {
            return Next::Leave;
        }
        let until = g.timers.first(|d, i| waits(&g.st, d, i)).map(|(d, _)| s.clock.instant_at(d));
        return Next::Wait(until);
    };
    // Seeded: run only while the host drives (or the device shuts down), one choice at a time.
    let free = g.shutdown;
    if all_done(g) {
        return Next::Leave;
    }
    if !free && (det.drive.is_none() || det.ended.is_some()) {
        return Next::Wait(None);
    }
    let now = s.vnow.load(Ordering::Acquire);
    fire_timers(s, g, now);
    g.queue.clear();
    let Sched { st, det, timers, escaped, .. } = g;
    let d = det.as_mut().expect("seeded");
    if let Some(n) = d.next.take()
        && st[n] == St::Runnable
    {
        st[n] = St::Running;
        return Next::Run(n);
    }
    d.runnable.clear();
    d.runnable.extend((0..st.len()).filter(|&i| st[i] == St::Runnable));
    if d.runnable.is_empty() {
        let limit = d.drive.unwrap_or(u64::MAX);
        if *escaped > 0 {
            // An agent runs on a thread of its own: device time follows real time (a
            // millisecond per millisecond waited) until it yields, so the budgets that watch
            // it (the hung-kernel watchdog) run out as they would on a chip.
            let target = timers
                .first(|d, i| waits(st, d, i))
                .map_or(now + ESCAPED_TICK_NS, |(t, _)| t.min(now + ESCAPED_TICK_NS));
            s.vnow.store(target.min(limit).max(now), Ordering::Release);
            if target >= limit && !free {
                d.ended = Some(DriveEnd::Limit);
                s.cv.notify_all();
                return Next::Wait(None);
            }
            return Next::Wait(Some(Instant::now() + Duration::from_nanos(ESCAPED_TICK_NS)));
        }
        match timers.first(|d, i| waits(st, d, i)) {
            Some((t, _)) if t <= limit || free => {
                s.vnow.store(t.max(now), Ordering::Release);
                // Loop again: the timer fires on the next look.
                return pick_next(s, g);
            }
            Some(_) => {
                s.vnow.store(limit.max(now), Ordering::Release);
                d.ended = Some(DriveEnd::Limit);
            }
            None => d.ended = Some(DriveEnd::Stalled),
        }
        if free {
            return Next::Wait(Some(Instant::now() + Duration::from_millis(1)));
        }
        s.cv.notify_all();
        return Next::Wait(None);
    }
    let pick = d.chooser.pick(&d.runnable, None);
    st[pick] = St::Running;
    Next::Run(pick)
}

/// The supervisor: gives a pool thread up to an agent that has not yielded within the escape
/// budget, and starts another in its place.
fn supervise(state: std::sync::Weak<State>) {
    loop {
        let Some(s) = state.upgrade() else { return };
        let escape = s.escape;
        if s.sched.lock().shutdown && s.pool.lock().iter().all(|(_, h)| h.as_ref().is_none_or(|h| h.is_finished())) {
            return;
        }
        let stuck: Vec<Arc<PoolThread>> = s
            .pool
            .lock()
            .iter()
            .filter(|(p, h)| {
                if h.is_none() || p.captured.load(Ordering::Acquire) {
                    return false;
                }
                // Running one agent (odd count) since the first look that saw this count.
                let n = p.resumes.load(Ordering::Acquire);
                let mut seen = p.seen.lock();
                if n % 2 == 0 || seen.0 != n {
                    *seen = (n, (n % 2 == 1).then(Instant::now));
                    return false;
                }
                seen.1.is_some_and(|t| t.elapsed() > escape)
            })
            .map(|(p, _)| p.clone())
            .collect();
        for p in stuck {
            p.captured.store(true, Ordering::Release);
            let slot = p.slot.load(Ordering::Relaxed);
            {
                let mut g = s.sched.lock();
                g.escaped += 1;
                if let Some(d) = g.det.as_mut() {
                    d.broken.get_or_insert_with(|| {
                        format!(
                            "{} ran {:?} without a switch point and was given a host thread of its own",
                            s.slots()[slot].name,
                            escape
                        )
                    });
                }
            }
            let _ = spawn_pool_thread(&s);
        }
        drop(s);
        // Stopping the engine unparks this thread.
        std::thread::park_timeout(escape / 4);
    }
}
