//! Simulated streams: ordered queues of launches with completion events.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pto_hal::{AicoreStream, AicpuStream, Contract, ErrorType, GmAddr, Handle, Stream};

use crate::SimError;
use crate::device::{Inner, Job, LaunchState};

/// A completion event: everything launched on its stream before it was recorded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SimEvent {
    seq: u64,
}

struct Queue {
    /// Launches not yet known complete, oldest first, with their sequence numbers.
    live: VecDeque<(u64, Arc<LaunchState>)>,
    next_seq: u64,
    /// First failure of a completed launch not yet reported by `synchronize`.
    failure: Option<SimError>,
}

impl Queue {
    /// Retire completed launches from the front: the host has now observed them (their end
    /// clocks happen before whatever the host does next), and their failures are kept for
    /// `synchronize`.
    fn prune<C: Contract>(&mut self, inner: &Inner<C>) {
        while let Some((_, l)) = self.live.front() {
            if !l.is_done() {
                break;
            }
            if let Some(f) = inner.model() {
                f.host_acquire(&l.end_vc.lock());
            }
            if let Some(e) = l.failure() {
                self.failure.get_or_insert(e);
            }
            self.live.pop_front();
        }
    }
    fn pending_upto(&self, seq: u64) -> Vec<Arc<LaunchState>> {
        self.live.iter().filter(|(s, _)| *s < seq).map(|(_, l)| l.clone()).collect()
    }
}

struct StreamCore<C: Contract> {
    inner: Arc<Inner<C>>,
    q: Mutex<Queue>,
    /// The most recent launch: the next one starts only when it is done (stream order).
    last: Mutex<Option<Arc<LaunchState>>>,
}

impl<C: Contract> StreamCore<C> {
    fn new(inner: Arc<Inner<C>>) -> Self {
        StreamCore {
            inner,
            q: Mutex::new(Queue { live: VecDeque::new(), next_seq: 0, failure: None }),
            last: Mutex::new(None),
        }
    }
    fn lock(&self) -> parking_lot::MutexGuard<'_, Queue> {
        self.q.lock()
    }
    /// Queue `launch`; `start` hands its jobs to the agents. Programs on one stream run in
    /// order: a launch starts when the previous one has finished on every agent, and (for the
    /// faithful model) everything the previous one did happens before it.
    fn submit(&self, launch: Arc<LaunchState>, start: impl FnOnce() + Send + 'static) {
        let host_vc = self.inner.launch_started();
        {
            let mut q = self.lock();
            let seq = q.next_seq;
            q.next_seq += 1;
            q.live.push_back((seq, launch.clone()));
        }
        let pred = self.last.lock().replace(launch.clone());
        let go = {
            let pred = pred.clone();
            move || {
                let mut vc = host_vc;
                if let Some(p) = &pred {
                    let end = p.end_vc.lock();
                    for (a, b) in vc.iter_mut().zip(end.iter()) {
                        *a = (*a).max(*b);
                    }
                }
                let _ = launch.start_vc.set(vc);
                start();
            }
        };
        match pred {
            Some(p) => p.then(Box::new(go)),
            None => go(),
        }
    }
    fn record(&self) -> SimEvent {
        SimEvent { seq: self.lock().next_seq }
    }
    fn query(&self, ev: SimEvent) -> bool {
        let mut q = self.lock();
        q.prune(&self.inner);
        q.live.front().is_none_or(|(s, _)| *s >= ev.seq)
    }
    fn wait(&self, ev: SimEvent, timeout_us: u64) -> Result<(), SimError> {
        let deadline = Instant::now() + Duration::from_micros(timeout_us);
        let pending = self.lock().pending_upto(ev.seq);
        for l in &pending {
            if !l.wait_until(deadline) {
                return Err(SimError::Timeout(timeout_us));
            }
        }
        self.lock().prune(&self.inner);
        // A program before the event failed: say so (synchronize reports it again, then clears).
        match pending.iter().find_map(|l| l.failure()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    fn synchronize(&self, timeout_us: u64) -> Result<(), SimError> {
        let ev = self.record();
        self.wait(ev, timeout_us)?;
        let mut q = self.lock();
        q.prune(&self.inner);
        match q.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
    fn check_open(&self) -> Result<(), SimError> {
        if self.inner.shutdown.load(std::sync::atomic::Ordering::Acquire) { Err(SimError::Closed) } else { Ok(()) }
    }
}

macro_rules! impl_stream {
    ($ty:ident) => {
        impl<C: Contract> ErrorType for $ty<C> {
            type Error = SimError;
        }
        impl<C: Contract> Stream for $ty<C> {
            type Event = SimEvent;
            fn record_event(&mut self) -> Result<SimEvent, SimError> {
                Ok(self.core.record())
            }
            fn query_event(&self, ev: SimEvent) -> Result<bool, SimError> {
                Ok(self.core.query(ev))
            }
            fn wait_event(&self, ev: SimEvent, timeout_us: u64) -> Result<(), SimError> {
                self.core.wait(ev, timeout_us)
            }
            fn synchronize(&mut self, timeout_us: u64) -> Result<(), SimError> {
                self.core.synchronize(timeout_us)
            }
        }
    };
}

/// The simulated AICPU stream.
pub struct SimAicpuStream<C: Contract> {
    core: StreamCore<C>,
}

/// The simulated AICore stream.
pub struct SimAicoreStream<C: Contract> {
    core: StreamCore<C>,
}

impl<C: Contract> SimAicpuStream<C> {
    pub(crate) fn new(inner: Arc<Inner<C>>) -> Self {
        SimAicpuStream { core: StreamCore::new(inner) }
    }
}

impl<C: Contract> SimAicoreStream<C> {
    pub(crate) fn new(inner: Arc<Inner<C>>) -> Self {
        SimAicoreStream { core: StreamCore::new(inner) }
    }
}

impl_stream!(SimAicpuStream);
impl_stream!(SimAicoreStream);

impl<C: Contract> AicpuStream for SimAicpuStream<C> {
    fn launch_aicpu(&mut self, program: Handle, args: GmAddr, threads: u32) -> Result<(), SimError> {
        self.core.check_open()?;
        let inner = &self.core.inner;
        let entry = inner.device_programs.read().aicpu(program.0);
        let entry = entry.ok_or(SimError::InvalidArgument("no AICPU program is installed under this handle"))?;
        if threads == 0 || threads > inner.topo.aicpu_threads {
            return Err(SimError::InvalidArgument("AICPU launch thread count outside 1..=board threads"));
        }
        let launch = LaunchState::new(threads, inner.vc_len());
        let (inner2, l2) = (inner.clone(), launch.clone());
        self.core.submit(launch, move || {
            for t in 0..threads {
                inner2.push_aicpu(
                    t,
                    Job::Aicpu { entry, args, thread_idx: t, thread_count: threads, launch: l2.clone() },
                );
            }
        });
        Ok(())
    }
}

impl<C: Contract> AicoreStream for SimAicoreStream<C> {
    fn launch_aicore(&mut self, program: Handle, args: GmAddr, clusters: u32) -> Result<(), SimError> {
        self.core.check_open()?;
        let inner = &self.core.inner;
        let entry = inner.device_programs.read().aicore(program.0);
        let entry = entry.ok_or(SimError::InvalidArgument("no AICore program is installed under this handle"))?;
        if clusters == 0 || clusters > inner.topo.clusters {
            return Err(SimError::InvalidArgument("AICore launch cluster count outside 1..=board clusters"));
        }
        let topo = inner.topo;
        let launch = LaunchState::new(clusters * 3, inner.vc_len());
        let (inner2, l2) = (inner.clone(), launch.clone());
        self.core.submit(launch, move || {
            // The launch numbers its workers by the launched clusters (AIC `0..k`, AIV
            // `k..3k`), whatever board cores host them.
            let launched = pto_hal::Topology { clusters, aicpu_threads: topo.aicpu_threads };
            for c in 0..clusters {
                for (w, block_idx) in [
                    (topo.aic(c), launched.aic(c)),
                    (topo.aiv(c, 0), launched.aiv(c, 0)),
                    (topo.aiv(c, 1), launched.aiv(c, 1)),
                ] {
                    inner2.push_core(w, Job::Aicore { entry, args, block_idx, launch: l2.clone() });
                }
            }
        });
        Ok(())
    }
}
