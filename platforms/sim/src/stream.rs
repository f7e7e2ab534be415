//! Simulated streams: ordered queues of launches with completion events
//! (`pto_inproc::StreamQueue`, whose launches here are the device's `LaunchState`s).

use std::sync::Arc;

use pto_hal::{AicoreStream, AicpuStream, Contract, ErrorType, GmAddr, Handle, Stream};
use pto_inproc::StreamQueue;

use crate::SimError;
use crate::device::{Inner, Job};
use crate::engine::DriveEnd;
use crate::launch::LaunchState;

/// Seeded schedule: the device time one `query_event` lets the device run.
const QUERY_SLICE_US: u64 = 100;

/// A completion event: everything launched on its stream before it was recorded.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SimEvent {
    seq: u64,
}

struct StreamCore<C: Contract> {
    inner: Arc<Inner<C>>,
    queue: StreamQueue<LaunchState>,
}

impl<C: Contract> StreamCore<C> {
    fn new(inner: Arc<Inner<C>>) -> Self {
        // The host retires a launch when it first observes it done: from then on the end
        // clocks of its agents happen before whatever the host does next (faithful model).
        let observer = inner.shared.clone();
        let queue = StreamQueue::with_retire(move |l: &LaunchState| {
            if let Some(f) = observer.model() {
                f.host_acquire(&l.end_vc.lock());
            }
        });
        StreamCore { inner, queue }
    }
    /// Queue `launch`; `start` hands its jobs to the agents. Programs on one stream run in
    /// order: a launch starts when the previous one has finished on every agent, and (for the
    /// faithful model) everything the previous one did happens before it.
    fn submit(&self, launch: Arc<LaunchState>, start: impl FnOnce() + Send + 'static) {
        let host_vc = self.inner.shared.launch_started();
        let l = launch.clone();
        self.queue.submit(launch, move |pred| {
            let mut vc = host_vc;
            if let Some(p) = pred {
                let end = p.end_vc.lock();
                for (a, b) in vc.iter_mut().zip(end.iter()) {
                    *a = (*a).max(*b);
                }
            }
            let _ = l.start_vc.set(vc);
            start();
        });
    }
    fn record(&self) -> SimEvent {
        SimEvent { seq: self.queue.record() }
    }
    /// On a seeded schedule the device runs only while the host waits for it: run it (in
    /// device time) until every launch before `seq` is done or `budget_us` has passed. True
    /// when they are done, or when the agents run by themselves (the caller then waits).
    fn drive_until(&self, seq: u64, budget_us: u64) -> bool {
        let engine = &self.inner.shared.engine;
        if !engine.deterministic() {
            return true;
        }
        let budget = budget_us.saturating_mul(1000);
        let start = engine.now_ns();
        loop {
            if self.queue.is_complete(seq) {
                return true;
            }
            let used = engine.now_ns().saturating_sub(start);
            if used >= budget {
                return false;
            }
            match engine.drive(budget - used) {
                DriveEnd::LaunchFinished => {}
                DriveEnd::Limit | DriveEnd::Stalled => return self.queue.is_complete(seq),
            }
        }
    }
    fn query(&self, ev: SimEvent) -> bool {
        // A host that polls moves a seeded device on by a short slice per look.
        self.drive_until(ev.seq, QUERY_SLICE_US);
        self.queue.query(ev.seq)
    }
    /// A program before the event failed: say so (synchronize reports it again, then clears).
    fn wait(&self, ev: SimEvent, timeout_us: u64) -> Result<(), SimError> {
        if !self.drive_until(ev.seq, timeout_us) {
            return Err(SimError::Timeout(timeout_us));
        }
        self.queue.wait(ev.seq, timeout_us).map_err(|w| w.into_error(SimError::Timeout))
    }
    fn synchronize(&self, timeout_us: u64) -> Result<(), SimError> {
        if !self.drive_until(self.queue.record(), timeout_us) {
            return Err(SimError::Timeout(timeout_us));
        }
        self.queue.synchronize(timeout_us).map_err(|w| w.into_error(SimError::Timeout))
    }
    fn check_open(&self) -> Result<(), SimError> {
        if self.inner.shared.shutdown.load(std::sync::atomic::Ordering::Acquire) {
            Err(SimError::Closed)
        } else {
            Ok(())
        }
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
        let entry = inner.device_programs.read().aicpu.entry(program).map(|p| p.1);
        let entry = entry.map_err(|_| SimError::InvalidArgument("no AICPU program is installed under this handle"))?;
        if threads == 0 || threads > inner.shared.topo.aicpu_threads {
            return Err(SimError::InvalidArgument("AICPU launch thread count outside 1..=board threads"));
        }
        let launch = LaunchState::new(threads, inner.shared.vc_len(), inner.shared.check_launch(args));
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
        let entry = inner.device_programs.read().aicore.entry(program).map(|p| p.1);
        let entry = entry.map_err(|_| SimError::InvalidArgument("no AICore program is installed under this handle"))?;
        if clusters == 0 || clusters > inner.shared.topo.clusters {
            return Err(SimError::InvalidArgument("AICore launch cluster count outside 1..=board clusters"));
        }
        let topo = inner.shared.topo;
        let launch = LaunchState::new(clusters * 3, inner.shared.vc_len(), inner.shared.check_launch(args));
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

#[cfg(test)]
mod tests {
    use pto_hal::{
        AicoreStream, AicpuLaunch, AicpuStream, ErrorKind, GmAddr, Handle, HostCoherent, HostPlatform, Loader,
        Platform, ProgramKind, Stream, Topology,
    };

    use crate::{Sim, SimAicpu, SimConfig, SimDevice, SimError};

    type P = Sim<HostCoherent>;

    fn fails(_: &SimAicpu<HostCoherent>, l: AicpuLaunch<'_>) -> i32 {
        if l.thread_idx == 0 { 7 } else { 0 }
    }

    fn succeeds(_: &SimAicpu<HostCoherent>, _: AicpuLaunch<'_>) -> i32 {
        0
    }

    fn open() -> (SimDevice<HostCoherent>, Handle, Handle) {
        let dev = SimDevice::open(Topology { clusters: 1, aicpu_threads: 2 }, SimConfig::default()).unwrap();
        P::install_aicpu_program(&dev, "fails", fails).unwrap();
        P::install_aicpu_program(&dev, "succeeds", succeeds).unwrap();
        let f = dev.load_program(ProgramKind::Aicpu, "fails").unwrap();
        let s = dev.load_program(ProgramKind::Aicpu, "succeeds").unwrap();
        (dev, f, s)
    }

    #[test]
    fn synchronize_reports_a_failure_once() {
        let (dev, fails, ok) = open();
        let (mut cpu, _core) = P::create_streams(&dev).unwrap();
        cpu.launch_aicpu(fails, GmAddr(0), 2).unwrap();
        cpu.launch_aicpu(ok, GmAddr(0), 2).unwrap();
        let e = cpu.synchronize(10_000_000).unwrap_err();
        assert_eq!(e, SimError::DeviceFault { status: 7, message: None });
        assert_eq!(cpu.synchronize(10_000_000), Ok(()));
    }

    #[test]
    fn wait_event_reports_then_synchronize_reports_and_clears() {
        let (dev, fails, ok) = open();
        let (mut cpu, _core) = P::create_streams(&dev).unwrap();
        cpu.launch_aicpu(ok, GmAddr(0), 1).unwrap();
        cpu.launch_aicpu(fails, GmAddr(0), 2).unwrap();
        let e = cpu.record_event().unwrap();
        assert_eq!(pto_hal::Error::kind(&cpu.wait_event(e, 10_000_000).unwrap_err()), ErrorKind::DeviceFault);
        // The wait retired the failed launch: waiting again does not report it, the next
        // synchronize does, once.
        assert_eq!(cpu.wait_event(e, 10_000_000), Ok(()));
        assert!(cpu.query_event(e).unwrap());
        assert!(cpu.synchronize(10_000_000).is_err());
        assert_eq!(cpu.synchronize(10_000_000), Ok(()));
    }

    #[test]
    fn unknown_and_foreign_handles_are_refused() {
        let (dev, fails, _) = open();
        let (mut cpu, mut core) = P::create_streams(&dev).unwrap();
        // An AICPU program's handle is not an AICore program's, and a made-up one is neither.
        assert!(matches!(core.launch_aicore(fails, GmAddr(0), 1), Err(SimError::InvalidArgument(_))));
        assert!(matches!(cpu.launch_aicpu(Handle(fails.0 + 100), GmAddr(0), 1), Err(SimError::InvalidArgument(_))));
        assert!(matches!(cpu.launch_aicpu(Handle(0), GmAddr(0), 1), Err(SimError::InvalidArgument(_))));
        assert_eq!(cpu.synchronize(1_000_000), Ok(()));
    }

    #[test]
    fn reinstalling_a_program_keeps_its_handle() {
        let (dev, fails, ok) = open();
        P::install_aicpu_program(&dev, "fails", succeeds).unwrap();
        assert_eq!(dev.load_program(ProgramKind::Aicpu, "fails").unwrap(), fails);
        assert_eq!(dev.load_program(ProgramKind::Aicpu, "succeeds").unwrap(), ok);
        let (mut cpu, _core) = P::create_streams(&dev).unwrap();
        cpu.launch_aicpu(fails, GmAddr(0), 2).unwrap();
        assert_eq!(cpu.synchronize(10_000_000), Ok(()));
    }
}
