//! The simulated device: GM, registers, kernel table and one OS thread per agent.

use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pto_hal::{
    AicoreEntry, AicoreLaunch, AicpuEntry, AicpuLaunch, Contract, CoreType, GmAddr, KernelFn, Ticks, Topology,
};

use crate::agent::{SimAicpu, SimCore};
use crate::gm::Gm;
use crate::park::{SpinPermits, Wake};
use crate::{SimConfig, SimError};

/// The registers of one simulated core.
#[derive(Default)]
pub(crate) struct CoreRegs {
    pub dmb: AtomicU32,
    pub cond: AtomicU32,
    /// Window open (a2a3's fast-path control; a5 has none, the sim keeps the bit for both).
    pub window_open: AtomicBool,
    /// The AICPU thread that last wrote DMB: the one a COND write wakes.
    pub watcher: AtomicU32,
}

/// Completion state of one launch on a stream.
pub(crate) struct LaunchState {
    remaining: AtomicU32,
    status: AtomicI32,
    message: Mutex<Option<String>>,
    pub scratch: AtomicPtr<()>,
    done: Mutex<bool>,
    cv: Condvar,
}

impl LaunchState {
    pub fn new(agents: u32) -> Arc<LaunchState> {
        Arc::new(LaunchState {
            remaining: AtomicU32::new(agents),
            status: AtomicI32::new(0),
            message: Mutex::new(None),
            scratch: AtomicPtr::new(std::ptr::null_mut()),
            done: Mutex::new(agents == 0),
            cv: Condvar::new(),
        })
    }

    fn finish_one(&self, status: i32, message: Option<String>) {
        if status != 0 && self.status.compare_exchange(0, status, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            *self.message.lock().unwrap_or_else(|e| e.into_inner()) = message;
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
            self.cv.notify_all();
        }
    }

    pub fn is_done(&self) -> bool {
        self.remaining.load(Ordering::Acquire) == 0
    }

    /// Wait until done or until `deadline`; true when done.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            done = self.cv.wait_timeout(done, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }

    /// The launch's failure, if any.
    pub fn failure(&self) -> Option<SimError> {
        let status = self.status.load(Ordering::Acquire);
        (status != 0).then(|| SimError::DeviceFault {
            status,
            message: self.message.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        })
    }
}

pub(crate) enum Job<C: Contract> {
    Aicpu { entry: AicpuEntry<SimAicpu<C>>, args: GmAddr, thread_idx: u32, thread_count: u32, launch: Arc<LaunchState> },
    Aicore { entry: AicoreEntry<SimCore<C>>, args: GmAddr, block_idx: u32, launch: Arc<LaunchState> },
}

/// Shared state of one simulated device.
pub(crate) struct Inner<C: Contract> {
    pub topo: Topology,
    pub config: SimConfig,
    pub epoch: Instant,
    pub gm: Gm,
    /// Registers, indexed by physical core id.
    pub regs: Box<[CoreRegs]>,
    /// Wake cells: AICPU threads first, then AICore workers.
    pub aicpu_wake: Box<[Wake]>,
    pub core_wake: Box<[Wake]>,
    /// How many agents may spin at once (the host's CPU count).
    pub spin_permits: SpinPermits,
    aicpu_jobs: Box<[Mutex<VecDeque<Job<C>>>]>,
    core_jobs: Box<[Mutex<VecDeque<Job<C>>>]>,
    pub kernels: RwLock<Vec<(KernelFn, CoreType)>>,
    /// Per agent (AICPU threads, then cores): the GM word it waits on, 0 when none.
    pub monitors: Box<[std::sync::atomic::AtomicU64]>,
    /// Number of agents currently waiting on a GM word (skip the scan when 0).
    pub monitoring: AtomicU32,
    /// Workers that stay silent for their next launch (fault injection).
    silent: Mutex<Vec<u32>>,
    pub shutdown: AtomicBool,
    _contract: PhantomData<fn() -> C>,
}

/// Base of kernel binary addresses on the simulator (index 0 is never a valid binary).
pub(crate) const KERNEL_BASE: u64 = 0x4b00_0000;

impl<C: Contract> Inner<C> {
    /// Physical core id of worker `w`: the sim numbers them in reverse so the runtime must use
    /// the ids the cores report, never assume worker index == physical id.
    pub fn physical_id(&self, w: u32) -> u32 {
        self.topo.workers() - 1 - w
    }

    #[inline]
    pub fn now_ticks(&self) -> Ticks {
        let ns = self.epoch.elapsed().as_nanos();
        (ns * self.config.freq_hz as u128 / 1_000_000_000) as u64
    }

    pub fn instant_of(&self, ticks: Ticks) -> Instant {
        let ns = ticks as u128 * 1_000_000_000 / self.config.freq_hz as u128;
        self.epoch + Duration::from_nanos(ns.min(u64::MAX as u128) as u64)
    }

    pub fn wake_all_aicpu(&self, except: Option<u32>) {
        for (i, w) in self.aicpu_wake.iter().enumerate() {
            if Some(i as u32) != except {
                w.notify();
            }
        }
    }

    pub fn push_aicpu(&self, t: u32, job: Job<C>) {
        self.aicpu_jobs[t as usize].lock().unwrap_or_else(|e| e.into_inner()).push_back(job);
        self.aicpu_wake[t as usize].notify();
    }

    pub fn push_core(&self, w: u32, job: Job<C>) {
        self.core_jobs[w as usize].lock().unwrap_or_else(|e| e.into_inner()).push_back(job);
        self.core_wake[w as usize].notify();
    }

    /// A GM word was written by a device agent: wake whoever waits on it.
    #[inline]
    pub fn word_written(&self, addr: u64) {
        if self.monitoring.load(Ordering::Acquire) == 0 {
            return;
        }
        let nthreads = self.aicpu_wake.len();
        for (i, m) in self.monitors.iter().enumerate() {
            if m.load(Ordering::Acquire) == addr {
                if i < nthreads {
                    self.aicpu_wake[i].notify();
                } else {
                    self.core_wake[i - nthreads].notify();
                }
            }
        }
    }

    pub fn take_silent(&self, w: u32) -> bool {
        let mut s = self.silent.lock().unwrap_or_else(|e| e.into_inner());
        match s.iter().position(|&x| x == w) {
            Some(i) => {
                s.swap_remove(i);
                true
            }
            None => false,
        }
    }

    pub fn add_silent(&self, w: u32) {
        self.silent.lock().unwrap_or_else(|e| e.into_inner()).push(w);
    }
}

/// Runs `f`, turning a panic into a status and its message.
fn run_guarded(f: impl FnOnce() -> i32) -> (i32, Option<String>) {
    crate::panics::install_quiet_hook();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(s) => (s, None),
        Err(p) => (crate::AGENT_PANIC_STATUS, Some(crate::panics::take_message(&*p))),
    }
}

fn aicpu_thread<C: Contract>(inner: Arc<Inner<C>>, t: u32) {
    inner.aicpu_wake[t as usize].bind_current();
    let agent = SimAicpu::new(inner.clone(), t);
    loop {
        let job = inner.aicpu_jobs[t as usize].lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        match job {
            Some(Job::Aicpu { entry, args, thread_idx, thread_count, launch }) => {
                let (s, m) = run_guarded(|| {
                    entry(&agent, AicpuLaunch { thread_idx, thread_count, args, scratch: &launch.scratch })
                });
                launch.finish_one(s, m);
            }
            Some(Job::Aicore { launch, .. }) => launch.finish_one(-1, Some("AICore job on an AICPU thread".into())),
            None => {
                if inner.shutdown.load(Ordering::Acquire) {
                    return;
                }
                inner.aicpu_wake[t as usize].wait(None, Duration::ZERO, &inner.spin_permits);
            }
        }
    }
}

fn core_thread<C: Contract>(inner: Arc<Inner<C>>, w: u32) {
    inner.core_wake[w as usize].bind_current();
    let agent = SimCore::new(inner.clone(), w);
    loop {
        let job = inner.core_jobs[w as usize].lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        match job {
            Some(Job::Aicore { entry, args, block_idx, launch }) => {
                if inner.take_silent(w) {
                    // Injected fault: this core never runs its program (never reports).
                    launch.finish_one(0, None);
                    continue;
                }
                // Like the hardware, every kernel launch resets the core's registers: DMB = 0
                // ("window not open") and COND = 0. A value left by the previous run (IDLE,
                // EXIT, EXITED) must never be taken for this run's.
                let regs = &inner.regs[inner.physical_id(w) as usize];
                regs.dmb.store(0, Ordering::Release);
                regs.cond.store(0, Ordering::Release);
                let launch_info = AicoreLaunch {
                    block_idx,
                    core_type: inner.topo.core_type(w),
                    physical_core_id: inner.physical_id(w),
                    args,
                };
                let (s, m) = run_guarded(|| entry(&agent, launch_info));
                launch.finish_one(s, m);
            }
            Some(Job::Aicpu { launch, .. }) => launch.finish_one(-1, Some("AICPU job on an AICore thread".into())),
            None => {
                if inner.shutdown.load(Ordering::Acquire) {
                    return;
                }
                inner.core_wake[w as usize].wait(None, Duration::ZERO, &inner.spin_permits);
            }
        }
    }
}

/// The host's handle on a simulated device. Opening it starts one thread per AICPU thread
/// and per AICore; they live, parked when idle, until the device is dropped.
pub struct SimDevice<C: Contract> {
    pub(crate) inner: Arc<Inner<C>>,
    threads: Vec<JoinHandle<()>>,
}

impl<C: Contract> SimDevice<C> {
    /// Open a simulated device of `topo` with `config`.
    pub fn open(topo: Topology, config: SimConfig) -> Result<SimDevice<C>, SimError> {
        if topo.clusters == 0 || topo.aicpu_threads == 0 {
            return Err(SimError::InvalidArgument("a device needs at least one cluster and one AICPU thread"));
        }
        if config.freq_hz == 0 {
            return Err(SimError::InvalidArgument("counter frequency must be non-zero"));
        }
        let workers = topo.workers() as usize;
        let nthreads = topo.aicpu_threads as usize;
        let inner = Arc::new(Inner {
            topo,
            config,
            epoch: Instant::now(),
            gm: Gm::new(config.gm_bytes),
            regs: (0..workers).map(|_| CoreRegs::default()).collect(),
            aicpu_wake: (0..nthreads).map(|_| Wake::default()).collect(),
            core_wake: (0..workers).map(|_| Wake::default()).collect(),
            spin_permits: SpinPermits::new(
                std::thread::available_parallelism().map_or(1, |n| n.get() as u64).min(config.max_spinners as u64),
            ),
            aicpu_jobs: (0..nthreads).map(|_| Mutex::new(VecDeque::new())).collect(),
            core_jobs: (0..workers).map(|_| Mutex::new(VecDeque::new())).collect(),
            kernels: RwLock::new(Vec::new()),
            monitors: (0..nthreads + workers).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            monitoring: AtomicU32::new(0),
            silent: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
            _contract: PhantomData,
        });
        let mut threads = Vec::with_capacity(workers + nthreads);
        for t in 0..nthreads as u32 {
            let i = inner.clone();
            threads.push(spawn(format!("pto-aicpu-{t}"), move || aicpu_thread(i, t))?);
        }
        for w in 0..workers as u32 {
            let i = inner.clone();
            threads.push(spawn(format!("pto-aicore-{w}"), move || core_thread(i, w))?);
        }
        Ok(SimDevice { inner, threads })
    }

    /// The device's topology.
    pub fn topology(&self) -> Topology {
        self.inner.topo
    }

    /// The configuration the device was opened with.
    pub fn config(&self) -> &SimConfig {
        &self.inner.config
    }

    /// Fault injection: worker `w` stays silent (never runs, never reports) for its next
    /// AICore launch.
    pub fn inject_silent_core(&self, w: u32) -> Result<(), SimError> {
        if w >= self.inner.topo.workers() {
            return Err(SimError::InvalidArgument("no such worker"));
        }
        self.inner.add_silent(w);
        Ok(())
    }

    /// Bytes of GM currently allocated (for leak checks).
    pub fn allocated_bytes(&self) -> u64 {
        self.inner.gm.allocated_bytes()
    }
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, SimError> {
    std::thread::Builder::new()
        .name(name)
        .stack_size(256 * 1024)
        .spawn(f)
        .map_err(|_| SimError::InvalidArgument("could not start a simulator thread"))
}

impl<C: Contract> Drop for SimDevice<C> {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::Release);
        for w in self.inner.aicpu_wake.iter().chain(self.inner.core_wake.iter()) {
            w.notify();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<C: Contract> core::fmt::Debug for SimDevice<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimDevice").field("topology", &self.inner.topo).finish_non_exhaustive()
    }
}
