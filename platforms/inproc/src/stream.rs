//! The ordered launch queue behind a HAL stream.
//!
//! A stream runs its launches in submission order: a launch starts when the previous one on
//! the same stream is done. An event is a sequence number — the number of launches submitted
//! before it was recorded — and it is complete when every one of those launches is done.
//!
//! The parts:
//!
//! * [`Completion`]: a launch's countdown of the parts still running (agents, threads), the
//!   waiters, and the stream's next launch, started when the count reaches zero.
//! * [`Launch`]: what the queue needs of a launch — its completion and its failure.
//! * [`StreamQueue`]: the queue. [`StreamQueue::record`], [`StreamQueue::query`],
//!   [`StreamQueue::wait`] (bounded) and [`StreamQueue::synchronize`], which reports the first
//!   failure not yet reported by a `synchronize`, once.
//! * [`WorkerStream`]: a queue plus a worker thread, for a platform whose launches are blocking
//!   jobs; dropping it waits for every launch submitted.
//!
//! What the queue reports:
//!
//! * `wait(event)` waits for the launches before `event` that were not yet retired (observed
//!   done by the host) when it started, then retires them, and reports the first failure among
//!   them. A launch already retired by an earlier `query` or `wait` is not reported again by
//!   `wait`.
//! * Retiring a launch keeps its failure for `synchronize` (the first one only, until a
//!   `synchronize` takes it), so a failure reported by `wait` is reported once more by the next
//!   `synchronize`, which then clears it.
//! * A wait that runs out of time is [`Waited::Timeout`] with the budget it was given.

use parking_lot::{Condvar, Mutex};
use std::any::Any;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What starts the next launch of a stream.
type Successor = Box<dyn FnOnce() + Send>;

/// A launch's completion: how many of its parts still run, who waits for it, and what starts
/// when it is done (the stream's next launch).
pub struct Completion {
    remaining: AtomicU32,
    state: Mutex<Done>,
    cv: Condvar,
}

struct Done {
    done: bool,
    next: Option<Successor>,
}

impl core::fmt::Debug for Completion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Completion").field("remaining", &self.remaining.load(Ordering::Relaxed)).finish()
    }
}

impl Completion {
    /// A completion waiting for `parts` parts; with zero parts it is done at once.
    pub fn new(parts: u32) -> Completion {
        Completion {
            remaining: AtomicU32::new(parts),
            state: Mutex::new(Done { done: parts == 0, next: None }),
            cv: Condvar::new(),
        }
    }

    /// One part finished. The last one runs `last` first (before a waiter or the next launch
    /// can see the launch done), then wakes the waiters and starts the next launch, on this
    /// thread. Returns whether this was the last part. An arrival past the last part is
    /// ignored (returns `false`): the count never wraps.
    pub fn arrive(&self, last: impl FnOnce()) -> bool {
        let was = self.remaining.fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| r.checked_sub(1));
        if was != Ok(1) {
            return false;
        }
        last();
        let next = {
            let mut s = self.state.lock();
            s.done = true;
            s.next.take()
        };
        self.cv.notify_all();
        if let Some(start) = next {
            start();
        }
        true
    }

    /// Whether every part has finished (the count is zero). It may be true a moment before
    /// the waiters are woken.
    pub fn is_done(&self) -> bool {
        self.remaining.load(Ordering::Acquire) == 0
    }

    /// Wait until done or until `deadline` (`None`: no deadline); true when done.
    pub fn wait_until(&self, deadline: Option<Instant>) -> bool {
        let mut s = self.state.lock();
        while !s.done {
            match deadline {
                None => self.cv.wait(&mut s),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    self.cv.wait_for(&mut s, d - now);
                }
            }
        }
        true
    }

    /// Run `start` once this launch is done: now, on this thread, if it already is; otherwise
    /// on the thread of the last part to arrive. A second call adds its `start` after the
    /// first one's.
    pub fn then(&self, start: Box<dyn FnOnce() + Send>) {
        let mut s = self.state.lock();
        if s.done {
            drop(s);
            start();
            return;
        }
        s.next = Some(match s.next.take() {
            None => start,
            Some(first) => Box::new(move || {
                first();
                start();
            }),
        });
    }
}

/// What the queue needs of a launch.
pub trait Launch: Send + Sync + 'static {
    /// The platform's error, which a failed launch reports.
    type Error: Clone + Send;
    /// The launch's completion.
    fn completion(&self) -> &Completion;
    /// The launch's failure, once it is done (`None`: it succeeded, or is not done).
    fn failure(&self) -> Option<Self::Error>;
}

/// Why a wait did not end well.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waited<E> {
    /// The budget (microseconds) ran out first.
    Timeout(u64),
    /// A launch the wait covered failed.
    Failed(E),
}

impl<E> Waited<E> {
    /// The platform's error: the failure itself, or `timeout(budget)`.
    pub fn into_error(self, timeout: impl FnOnce(u64) -> E) -> E {
        match self {
            Waited::Timeout(us) => timeout(us),
            Waited::Failed(e) => e,
        }
    }
}

struct Queue<L: Launch> {
    /// Launches not yet retired, oldest first, with their sequence numbers.
    live: VecDeque<(u64, Arc<L>)>,
    next_seq: u64,
    /// The first failure of a retired launch not yet reported by `synchronize`.
    failure: Option<L::Error>,
}

/// Called on each launch as the host retires it (observes it done).
type Retire<L> = Box<dyn Fn(&L) + Send + Sync>;

/// An ordered queue of launches with completion events (see the module's documentation for
/// what it reports).
pub struct StreamQueue<L: Launch> {
    q: Mutex<Queue<L>>,
    /// The most recent launch: the next one starts when it is done.
    last: Mutex<Option<Arc<L>>>,
    retire: Option<Retire<L>>,
}

impl<L: Launch> Default for StreamQueue<L> {
    fn default() -> Self {
        StreamQueue::new()
    }
}

impl<L: Launch> core::fmt::Debug for StreamQueue<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let q = self.q.lock();
        f.debug_struct("StreamQueue").field("next_seq", &q.next_seq).field("live", &q.live.len()).finish()
    }
}

impl<L: Launch> StreamQueue<L> {
    /// An empty queue.
    pub fn new() -> StreamQueue<L> {
        StreamQueue {
            q: Mutex::new(Queue { live: VecDeque::new(), next_seq: 0, failure: None }),
            last: Mutex::new(None),
            retire: None,
        }
    }

    /// An empty queue that calls `retire` on each launch as the host retires it — when a
    /// `query`, `wait` or `synchronize` first finds it done — in stream order, before its
    /// failure is kept.
    pub fn with_retire(retire: impl Fn(&L) + Send + Sync + 'static) -> StreamQueue<L> {
        StreamQueue { retire: Some(Box::new(retire)), ..StreamQueue::new() }
    }

    /// Queue `launch`. `start` hands it to whatever runs it, with the previous launch of the
    /// stream (if any); it runs once that one is done — now, on this thread, if it already is
    /// (or there is none), else on the thread that finishes it. Returns the launch's sequence
    /// number: an event recorded after this call covers it.
    pub fn submit(&self, launch: Arc<L>, start: impl FnOnce(Option<&L>) + Send + 'static) -> u64 {
        let seq = {
            let mut q = self.q.lock();
            let seq = q.next_seq;
            q.next_seq += 1;
            q.live.push_back((seq, launch.clone()));
            seq
        };
        let pred = self.last.lock().replace(launch);
        match pred {
            Some(p) => {
                let p2 = p.clone();
                p.completion().then(Box::new(move || start(Some(&*p2))));
            }
            None => start(None),
        }
        seq
    }

    /// An event covering every launch submitted so far.
    pub fn record(&self) -> u64 {
        self.q.lock().next_seq
    }

    /// Retire done launches from the front, in order.
    fn prune(&self, q: &mut Queue<L>) {
        while let Some((_, l)) = q.live.front() {
            if !l.completion().is_done() {
                break;
            }
            if let Some(r) = &self.retire {
                r(l);
            }
            if let Some(e) = l.failure() {
                q.failure.get_or_insert(e);
            }
            q.live.pop_front();
        }
    }

    /// Non-blocking and without retiring anything: is every launch before `event` done? (A
    /// platform that runs its launches only while the host waits looks at this between
    /// slices of running them.)
    pub fn is_complete(&self, event: u64) -> bool {
        self.q.lock().live.iter().take_while(|(s, _)| *s < event).all(|(_, l)| l.completion().is_done())
    }

    /// Non-blocking: is every launch before `event` done? Retires the done ones.
    pub fn query(&self, event: u64) -> bool {
        let mut q = self.q.lock();
        self.prune(&mut q);
        q.live.front().is_none_or(|(s, _)| *s >= event)
    }

    /// Wait at most `timeout_us` for every launch before `event`, then report the first
    /// failure among those still unretired when the wait began.
    pub fn wait(&self, event: u64, timeout_us: u64) -> Result<(), Waited<L::Error>> {
        // A budget past what `Instant` can hold is no deadline at all.
        let deadline = Instant::now().checked_add(Duration::from_micros(timeout_us));
        let pending: Vec<Arc<L>> =
            self.q.lock().live.iter().filter(|(s, _)| *s < event).map(|(_, l)| l.clone()).collect();
        for l in &pending {
            if !l.completion().wait_until(deadline) {
                return Err(Waited::Timeout(timeout_us));
            }
        }
        self.prune(&mut self.q.lock());
        match pending.iter().find_map(|l| l.failure()) {
            Some(e) => Err(Waited::Failed(e)),
            None => Ok(()),
        }
    }

    /// Wait at most `timeout_us` for everything submitted, then report — once — the first
    /// failure not yet reported by a `synchronize`, and clear it.
    pub fn synchronize(&self, timeout_us: u64) -> Result<(), Waited<L::Error>> {
        let event = self.record();
        if let Err(Waited::Timeout(us)) = self.wait(event, timeout_us) {
            return Err(Waited::Timeout(us));
        }
        let mut q = self.q.lock();
        self.prune(&mut q);
        match q.failure.take() {
            Some(e) => Err(Waited::Failed(e)),
            None => Ok(()),
        }
    }
}

// ---------------------------------------------------------------- a worker thread per stream

/// What a [`WorkerStream`] itself can fail with, apart from its jobs' own failures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerFault {
    /// The worker thread is gone: the launch was never run.
    Closed,
    /// The job panicked; the message is the panic's.
    Panicked(String),
}

/// A launch run as one blocking job on a [`WorkerStream`]'s thread.
struct JobLaunch<E> {
    completion: Completion,
    failure: Mutex<Option<E>>,
}

impl<E> JobLaunch<E> {
    fn finish(&self, result: Result<(), E>) {
        if let Err(e) = result {
            *self.failure.lock() = Some(e);
        }
        self.completion.arrive(|| {});
    }
}

impl<E: Clone + Send + 'static> Launch for JobLaunch<E> {
    type Error = E;
    fn completion(&self) -> &Completion {
        &self.completion
    }
    fn failure(&self) -> Option<E> {
        self.failure.lock().clone()
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// A [`StreamQueue`] whose launches are blocking jobs, run one after the other on a thread of
/// the stream's own. A job's `Err` is its launch's failure; a job that panics fails its launch
/// with [`WorkerFault::Panicked`] and the stream goes on. Dropping the stream waits for every
/// job submitted to it.
pub struct WorkerStream<E: Clone + Send + 'static> {
    queue: StreamQueue<JobLaunch<E>>,
    tx: Option<mpsc::Sender<Job>>,
    worker: Option<JoinHandle<()>>,
    fault: fn(WorkerFault) -> E,
}

impl<E: Clone + Send + 'static> core::fmt::Debug for WorkerStream<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WorkerStream").field("queue", &self.queue).finish_non_exhaustive()
    }
}

impl<E: Clone + Send + 'static> WorkerStream<E> {
    /// A stream whose worker thread is named `name`; `fault` turns the stream's own faults
    /// into the platform's error.
    pub fn spawn(name: &str, fault: fn(WorkerFault) -> E) -> std::io::Result<WorkerStream<E>> {
        let (tx, rx) = mpsc::channel::<Job>();
        let worker = std::thread::Builder::new().name(name.into()).spawn(move || {
            for job in rx {
                job();
            }
        })?;
        Ok(WorkerStream { queue: StreamQueue::new(), tx: Some(tx), worker: Some(worker), fault })
    }

    /// Queue `job`; it runs when every job before it on this stream has finished.
    pub fn submit(&self, job: impl FnOnce() -> Result<(), E> + Send + 'static) -> Result<(), E> {
        let fault = self.fault;
        let tx = match (&self.tx, &self.worker) {
            (Some(tx), Some(w)) if !w.is_finished() => tx.clone(),
            _ => return Err(fault(WorkerFault::Closed)),
        };
        let launch = Arc::new(JobLaunch { completion: Completion::new(1), failure: Mutex::new(None) });
        let (l, l2) = (launch.clone(), launch.clone());
        let run: Job = Box::new(move || {
            let r = catch_unwind(AssertUnwindSafe(job))
                .unwrap_or_else(|p| Err(fault(WorkerFault::Panicked(panic_message(&*p)))));
            l.finish(r);
        });
        self.queue.submit(launch, move |_| {
            if tx.send(run).is_err() {
                l2.finish(Err(fault(WorkerFault::Closed)));
            }
        });
        Ok(())
    }

    /// An event covering every job submitted so far.
    pub fn record(&self) -> u64 {
        self.queue.record()
    }

    /// Non-blocking: has every job before `event` finished?
    pub fn query(&self, event: u64) -> bool {
        self.queue.query(event)
    }

    /// [`StreamQueue::wait`].
    pub fn wait(&self, event: u64, timeout_us: u64) -> Result<(), Waited<E>> {
        self.queue.wait(event, timeout_us)
    }

    /// [`StreamQueue::synchronize`].
    pub fn synchronize(&self, timeout_us: u64) -> Result<(), Waited<E>> {
        self.queue.synchronize(timeout_us)
    }
}

impl<E: Clone + Send + 'static> Drop for WorkerStream<E> {
    fn drop(&mut self) {
        // The channel closes when the last sender is gone: this one, and those held by the
        // launches still waiting for their predecessor (each sends its job as it starts). The
        // worker runs every job, then ends.
        drop(self.tx.take());
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// The text of a panic's payload (`&str` or `String`), or a placeholder.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => (*s).to_string(),
        (_, Some(s)) => s.clone(),
        _ => "<non-text panic>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A launch of `parts` parts whose failure is set by the test.
    struct Probe {
        completion: Completion,
        failure: Mutex<Option<&'static str>>,
    }

    impl Probe {
        fn new(parts: u32) -> Arc<Probe> {
            Arc::new(Probe { completion: Completion::new(parts), failure: Mutex::new(None) })
        }
        fn finish(&self, failure: Option<&'static str>) {
            if failure.is_some() {
                *self.failure.lock() = failure;
            }
            self.completion.arrive(|| {});
        }
    }

    impl Launch for Probe {
        type Error = &'static str;
        fn completion(&self) -> &Completion {
            &self.completion
        }
        fn failure(&self) -> Option<&'static str> {
            *self.failure.lock()
        }
    }

    /// Submit `l`, recording into `started` when it starts and with which predecessor.
    fn submit(q: &StreamQueue<Probe>, l: &Arc<Probe>, id: u64, started: &Arc<Mutex<Vec<(u64, bool)>>>) {
        let s = started.clone();
        q.submit(l.clone(), move |pred| s.lock().push((id, pred.is_some())));
    }

    #[test]
    fn completion_counts_down_once() {
        let c = Completion::new(2);
        let lasts = AtomicU64::new(0);
        assert!(!c.arrive(|| _ = lasts.fetch_add(1, Ordering::Relaxed)));
        assert!(!c.is_done());
        assert!(c.arrive(|| _ = lasts.fetch_add(1, Ordering::Relaxed)));
        assert!(c.is_done() && c.wait_until(Some(Instant::now())));
        // Past the last part: ignored, never wraps.
        assert!(!c.arrive(|| _ = lasts.fetch_add(1, Ordering::Relaxed)));
        assert!(c.is_done());
        assert_eq!(lasts.load(Ordering::Relaxed), 1);
        assert!(Completion::new(0).is_done());
    }

    #[test]
    fn completion_then_runs_after_done_in_order() {
        let c = Completion::new(1);
        let log = Arc::new(Mutex::new(Vec::new()));
        let (a, b) = (log.clone(), log.clone());
        c.then(Box::new(move || a.lock().push(1)));
        c.then(Box::new(move || b.lock().push(2)));
        assert!(log.lock().is_empty());
        c.arrive(|| {});
        assert_eq!(*log.lock(), [1, 2]);
        let d = log.clone();
        c.then(Box::new(move || d.lock().push(3)));
        assert_eq!(*log.lock(), [1, 2, 3]);
    }

    #[test]
    fn launches_start_in_order() {
        let q = StreamQueue::new();
        let started = Arc::new(Mutex::new(Vec::new()));
        let (a, b, c) = (Probe::new(1), Probe::new(2), Probe::new(1));
        submit(&q, &a, 0, &started);
        submit(&q, &b, 1, &started);
        submit(&q, &c, 2, &started);
        assert_eq!(*started.lock(), [(0, false)]);
        a.finish(None);
        assert_eq!(*started.lock(), [(0, false), (1, true)]);
        b.finish(None);
        assert_eq!(started.lock().len(), 2, "b has a part still running");
        b.finish(None);
        assert_eq!(*started.lock(), [(0, false), (1, true), (2, true)]);
    }

    #[test]
    fn events_cover_what_was_submitted_before_them() {
        let q = StreamQueue::new();
        let started = Arc::new(Mutex::new(Vec::new()));
        let e0 = q.record();
        assert!(q.query(e0));
        let (a, b) = (Probe::new(1), Probe::new(1));
        submit(&q, &a, 0, &started);
        let e1 = q.record();
        submit(&q, &b, 1, &started);
        let e2 = q.record();
        assert!(q.query(e0) && !q.query(e1) && !q.query(e2));
        assert_eq!(q.wait(e1, 0), Err(Waited::Timeout(0)));
        a.finish(None);
        assert!(q.query(e1) && !q.query(e2));
        assert_eq!(q.wait(e1, 0), Ok(()));
        b.finish(None);
        assert_eq!(q.wait(e2, 1_000_000), Ok(()));
        assert_eq!(q.synchronize(0), Ok(()));
    }

    #[test]
    fn wait_blocks_until_done() {
        let q = Arc::new(StreamQueue::new());
        let a = Probe::new(1);
        q.submit(a.clone(), |_| {});
        let e = q.record();
        let a2 = a.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            a2.finish(Some("late failure"));
        });
        assert_eq!(q.wait(e, u64::MAX), Err(Waited::Failed("late failure")));
        t.join().unwrap();
    }

    #[test]
    fn a_failure_is_reported_by_wait_then_once_by_synchronize() {
        let q = StreamQueue::new();
        let a = Probe::new(1);
        q.submit(a.clone(), |_| {});
        let e = q.record();
        a.finish(Some("boom"));
        assert_eq!(q.wait(e, 0), Err(Waited::Failed("boom")));
        // Retired by that wait: a second wait does not report it again.
        assert_eq!(q.wait(e, 0), Ok(()));
        assert_eq!(q.synchronize(0), Err(Waited::Failed("boom")));
        assert_eq!(q.synchronize(0), Ok(()));
    }

    #[test]
    fn synchronize_reports_a_failure_once_even_when_it_is_the_first_to_see_it() {
        let q = StreamQueue::new();
        let a = Probe::new(1);
        q.submit(a.clone(), |_| {});
        a.finish(Some("boom"));
        assert_eq!(q.synchronize(0), Err(Waited::Failed("boom")));
        assert_eq!(q.synchronize(0), Ok(()));
    }

    #[test]
    fn synchronize_reports_the_first_unreported_failure() {
        let q = StreamQueue::new();
        let (a, b, c) = (Probe::new(1), Probe::new(1), Probe::new(1));
        q.submit(a.clone(), |_| {});
        q.submit(b.clone(), |_| {});
        a.finish(Some("first"));
        b.finish(Some("second"));
        assert_eq!(q.synchronize(0), Err(Waited::Failed("first")));
        q.submit(c.clone(), |_| {});
        c.finish(Some("third"));
        assert_eq!(q.synchronize(0), Err(Waited::Failed("third")));
        assert_eq!(q.synchronize(0), Ok(()));
    }

    #[test]
    fn a_timed_out_synchronize_keeps_the_failure() {
        let q = StreamQueue::new();
        let (a, b) = (Probe::new(1), Probe::new(1));
        q.submit(a.clone(), |_| {});
        q.submit(b.clone(), |_| {});
        a.finish(Some("boom"));
        assert_eq!(q.synchronize(0), Err(Waited::Timeout(0)));
        b.finish(None);
        assert_eq!(q.synchronize(0), Err(Waited::Failed("boom")));
    }

    #[test]
    fn retire_sees_each_launch_once_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let q = StreamQueue::with_retire(move |l: &Probe| s.lock().push(l.failure()));
        let (a, b) = (Probe::new(1), Probe::new(1));
        q.submit(a.clone(), |_| {});
        q.submit(b.clone(), |_| {});
        b.finish(Some("b"));
        // b is done but a is not: nothing retires out of order.
        assert!(!q.query(q.record()));
        assert!(seen.lock().is_empty());
        a.finish(Some("a"));
        assert!(q.query(q.record()));
        assert!(q.query(q.record()));
        assert_eq!(*seen.lock(), [Some("a"), Some("b")]);
    }

    #[test]
    fn waited_maps_to_the_platform_error() {
        let t: Waited<String> = Waited::Timeout(7);
        assert_eq!(t.into_error(|us| format!("timeout {us}")), "timeout 7");
        assert_eq!(Waited::Failed("x".to_string()).into_error(|_| unreachable!()), "x");
    }

    fn fault(f: WorkerFault) -> String {
        format!("{f:?}")
    }

    #[test]
    fn a_worker_stream_runs_jobs_in_order_and_reports_failures() {
        let s = WorkerStream::spawn("test-stream", fault).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..5 {
            let l = log.clone();
            s.submit(move || {
                std::thread::sleep(Duration::from_millis(((5 - i) * 2) as u64));
                l.lock().push(i);
                if i == 2 { Err(format!("job {i} failed")) } else { Ok(()) }
            })
            .unwrap();
        }
        let e = s.record();
        assert_eq!(s.wait(e, 10_000_000), Err(Waited::Failed("job 2 failed".into())));
        assert!(s.query(e));
        assert_eq!(*log.lock(), [0, 1, 2, 3, 4]);
        assert_eq!(s.synchronize(10_000_000), Err(Waited::Failed("job 2 failed".into())));
        assert_eq!(s.synchronize(10_000_000), Ok(()));
    }

    #[test]
    fn a_panicking_job_fails_its_launch_and_the_stream_goes_on() {
        let s = WorkerStream::spawn("test-stream", fault).unwrap();
        s.submit(|| panic!("job exploded")).unwrap();
        let ran = Arc::new(AtomicU64::new(0));
        let r = ran.clone();
        s.submit(move || {
            r.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
        assert_eq!(s.synchronize(10_000_000), Err(Waited::Failed(fault(WorkerFault::Panicked("job exploded".into())))));
        assert_eq!(ran.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn dropping_a_worker_stream_waits_for_its_jobs() {
        let ran = Arc::new(AtomicU64::new(0));
        {
            let s = WorkerStream::spawn("test-stream", fault).unwrap();
            for _ in 0..3 {
                let r = ran.clone();
                s.submit(move || {
                    std::thread::sleep(Duration::from_millis(5));
                    r.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap();
            }
        }
        assert_eq!(ran.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn panic_messages() {
        assert_eq!(panic_message(&"text"), "text");
        assert_eq!(panic_message(&String::from("owned")), "owned");
        assert_eq!(panic_message(&17u32), "<non-text panic>");
    }
}
