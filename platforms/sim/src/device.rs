//! The simulated device: GM, registers, kernel table and one OS thread per agent.

use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pto_hal::{
    AicoreEntry, AicoreLaunch, AicpuEntry, AicpuLaunch, Contract, CoreType, GmAddr, KernelFn, Ticks, Topology,
};
use pto_inproc::{HandleTable, Registry};

use crate::agent::{SimAicpu, SimCore};
use crate::config::{AicpuWritePolicy, CacheModel, SimConfig};
use crate::error::SimError;
use crate::faithful::Faithful;
use crate::gm::Gm;
use crate::launch::LaunchState;
use crate::park::{SpinPermits, Wake};
use crate::violation::Violation;

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

pub(crate) enum Job<C: Contract> {
    Aicpu { entry: AicpuEntry<SimAicpu<C>>, args: GmAddr, thread_idx: u32, thread_count: u32, launch: Arc<LaunchState> },
    Aicore { entry: AicoreEntry<SimCore<C>>, args: GmAddr, block_idx: u32, launch: Arc<LaunchState> },
}

/// The device programs installed in a simulated device, by name.
pub(crate) struct DevicePrograms<C: Contract> {
    pub aicpu: Registry<AicpuEntry<SimAicpu<C>>>,
    pub aicore: Registry<AicoreEntry<SimCore<C>>>,
}

impl<C: Contract> DevicePrograms<C> {
    fn new() -> Self {
        DevicePrograms {
            aicpu: Registry::new("AICPU program", DEVICE_PROGRAM_BASE, AICORE_PROGRAM_OFFSET),
            aicore: Registry::new("AICore program", DEVICE_PROGRAM_BASE + AICORE_PROGRAM_OFFSET, AICORE_PROGRAM_OFFSET),
        }
    }
}

/// Handles of installed AICPU programs start here, AICore ones [`AICORE_PROGRAM_OFFSET`]
/// above it.
const DEVICE_PROGRAM_BASE: u64 = 0x4400_0000;
const AICORE_PROGRAM_OFFSET: u64 = 0x10_0000;

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
    /// Loaded kernels and the core type each was loaded for; handles from [`KERNEL_BASE`].
    pub kernels: RwLock<HandleTable<(KernelFn, CoreType)>>,
    /// Installed device programs (the runtime's AICPU and AICore programs), by name; handles
    /// from [`DEVICE_PROGRAM_BASE`].
    pub device_programs: RwLock<DevicePrograms<C>>,
    /// Loaded orchestration programs; handles from [`PROGRAM_BASE`].
    pub programs: RwLock<HandleTable<Box<dyn std::any::Any + Send + Sync>>>,
    /// Per agent (AICPU threads, then cores): the GM word it waits on, 0 when none.
    pub monitors: Box<[std::sync::atomic::AtomicU64]>,
    /// Number of agents currently waiting on a GM word (skip the scan when 0).
    pub monitoring: AtomicU32,
    /// The faithful cache model (used while `faithful_on`).
    pub faithful: Faithful,
    /// Whether the faithful cache model is on.
    pub faithful_on: AtomicBool,
    /// Whether kernels run behind the memory-protection guard (`crate::protect`).
    pub protect: AtomicBool,
    /// AICPU cache maintenance issued so far: `[invalidate_range, flush_range]` calls.
    pub aicpu_cache_ops: [std::sync::atomic::AtomicU64; 2],
    /// Launches not yet finished (the cache model may change only when this is zero).
    pub active_launches: AtomicU32,
    /// Workers that stay silent for their next launch (fault injection).
    silent: Mutex<Vec<u32>>,
    pub shutdown: AtomicBool,
    _contract: PhantomData<fn() -> C>,
}

/// Base of kernel binary addresses on the simulator (index 0 is never a valid binary).
const KERNEL_BASE: u64 = 0x4b00_0000;
/// Handles of loaded orchestration programs start here (kernels end below it).
const PROGRAM_BASE: u64 = 0x5000_0000;
/// How many orchestration programs one device loads at most.
const PROGRAM_CAPACITY: u64 = 0x1000_0000;

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
        self.aicpu_jobs[t as usize].lock().push_back(job);
        self.aicpu_wake[t as usize].notify();
    }

    pub fn push_core(&self, w: u32, job: Job<C>) {
        self.core_jobs[w as usize].lock().push_back(job);
        self.core_wake[w as usize].notify();
    }

    /// Submit-side bookkeeping of a new launch: its submission clock (faithful model).
    pub fn launch_started(&self) -> Vec<u32> {
        self.active_launches.fetch_add(1, Ordering::AcqRel);
        match self.model() {
            Some(f) => f.host_release(),
            None => Vec::new(),
        }
    }

    /// Number of vector-clock entries (device agents + host).
    pub fn vc_len(&self) -> usize {
        1 + self.aicpu_wake.len() + self.core_wake.len()
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

    /// The faithful model, when it is on.
    #[inline]
    pub fn model(&self) -> Option<&Faithful> {
        if self.faithful_on.load(Ordering::Relaxed) { Some(&self.faithful) } else { None }
    }

    pub fn take_silent(&self, w: u32) -> bool {
        let mut s = self.silent.lock();
        match s.iter().position(|&x| x == w) {
            Some(i) => {
                s.swap_remove(i);
                true
            }
            None => false,
        }
    }

    pub fn add_silent(&self, w: u32) {
        self.silent.lock().push(w);
    }
}

fn aicpu_thread<C: Contract>(inner: Arc<Inner<C>>, t: u32) {
    inner.aicpu_wake[t as usize].bind_current();
    let agent = SimAicpu::new(inner.clone(), t);
    loop {
        let job = inner.aicpu_jobs[t as usize].lock().pop_front();
        match job {
            Some(Job::Aicpu { entry, args, thread_idx, thread_count, launch }) => {
                let id = inner.faithful.aicpu_id(t);
                if let Some(f) = inner.model() {
                    f.job_start(id, launch.start_vc.get().map_or(&[][..], |v| &v[..]), &launch);
                }
                let (s, m) = crate::panics::run_guarded(|| {
                    entry(&agent, AicpuLaunch { thread_idx, thread_count, args, scratch: &launch.scratch })
                });
                if let Some(f) = inner.model() {
                    launch.join_end(&f.job_end(id, &inner.gm));
                }
                launch.finish_one(s, m, &inner.active_launches);
            }
            Some(Job::Aicore { launch, .. }) => {
                launch.finish_one(-1, Some("AICore job on an AICPU thread".into()), &inner.active_launches)
            }
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
        let job = inner.core_jobs[w as usize].lock().pop_front();
        match job {
            Some(Job::Aicore { entry, args, block_idx, launch }) => {
                if inner.take_silent(w) {
                    // Injected fault: this core never runs its program (never reports).
                    launch.finish_one(0, None, &inner.active_launches);
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
                let id = inner.faithful.core_id(w);
                if let Some(f) = inner.model() {
                    f.job_start(id, launch.start_vc.get().map_or(&[][..], |v| &v[..]), &launch);
                }
                let (s, m) = crate::panics::run_guarded(|| entry(&agent, launch_info));
                if let Some(f) = inner.model() {
                    launch.join_end(&f.job_end(id, &inner.gm));
                }
                launch.finish_one(s, m, &inner.active_launches);
            }
            Some(Job::Aicpu { launch, .. }) => {
                launch.finish_one(-1, Some("AICPU job on an AICore thread".into()), &inner.active_launches)
            }
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
        if nthreads + workers + 1 > 128 {
            return Err(SimError::InvalidArgument("the simulator supports at most 127 device agents"));
        }
        // The environment is read once, strictly: a value outside its syntax is an error.
        let model = CacheModel::from_env()?.unwrap_or(config.cache);
        let writes = AicpuWritePolicy::from_env()?;
        let protect = crate::config::protection_from_env()?;
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
            kernels: RwLock::new(HandleTable::new("kernel", KERNEL_BASE, PROGRAM_BASE - KERNEL_BASE)),
            device_programs: RwLock::new(DevicePrograms::new()),
            programs: RwLock::new(HandleTable::new("orchestration", PROGRAM_BASE, PROGRAM_CAPACITY)),

            monitors: (0..nthreads + workers).map(|_| std::sync::atomic::AtomicU64::new(0)).collect(),
            monitoring: AtomicU32::new(0),
            faithful: {
                let (seed, evict) = match model {
                    CacheModel::Faithful { seed, evict_per_mille } => (seed, evict_per_mille),
                    CacheModel::Coherent => (0, 0),
                };
                let f = Faithful::new(seed, evict, C::HOST_COHERENT, topo.aicpu_threads, topo.workers());
                f.set_aicpu_writes(
                    writes.or(config.aicpu_writes).unwrap_or(AicpuWritePolicy::for_contract(C::HOST_COHERENT)),
                );
                f
            },
            faithful_on: AtomicBool::new(matches!(model, CacheModel::Faithful { .. })),
            protect: AtomicBool::new(protect.unwrap_or(config.protect)),
            active_launches: AtomicU32::new(0),
            aicpu_cache_ops: [std::sync::atomic::AtomicU64::new(0), std::sync::atomic::AtomicU64::new(0)],
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

    /// Switch the cache model (between runs: refused while a launch is active). Switching to
    /// the faithful model starts it from empty caches with `seed`.
    pub fn set_cache_model(&self, model: CacheModel) -> Result<(), SimError> {
        if self.inner.active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("the cache model cannot change while a launch is active"));
        }
        match model {
            CacheModel::Coherent => self.inner.faithful_on.store(false, Ordering::Release),
            CacheModel::Faithful { seed, evict_per_mille } => {
                self.inner.faithful.reset(seed, evict_per_mille);
                self.inner.faithful_on.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Switch the AICPU write policy of the faithful model (between runs: refused while a
    /// launch is active); the model restarts from empty caches, as with
    /// [`SimDevice::set_cache_model`]. Returns the policy in effect (under the host-coherent
    /// contract `WriteBack` acts as `WriteThrough`).
    pub fn set_aicpu_writes(&self, policy: AicpuWritePolicy) -> Result<AicpuWritePolicy, SimError> {
        if self.inner.active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("the AICPU write policy cannot change while a launch is active"));
        }
        let f = &self.inner.faithful;
        f.reset(f.seed(), f.evict_per_mille());
        Ok(f.set_aicpu_writes(policy))
    }

    /// The AICPU write policy in effect under the faithful model.
    pub fn aicpu_writes(&self) -> AicpuWritePolicy {
        self.inner.faithful.aicpu_writes()
    }

    /// Switch memory protection on or off (between runs: refused while a launch is active).
    pub fn set_protection(&self, on: bool) -> Result<(), SimError> {
        if self.inner.active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("memory protection cannot change while a launch is active"));
        }
        self.inner.protect.store(on, Ordering::Release);
        Ok(())
    }

    /// Whether memory protection is on.
    pub fn protection(&self) -> bool {
        self.inner.protect.load(Ordering::Acquire)
    }

    /// The cache model in force.
    pub fn cache_model(&self) -> CacheModel {
        match self.inner.model() {
            Some(f) => CacheModel::Faithful { seed: f.seed(), evict_per_mille: f.evict_per_mille() },
            None => CacheModel::Coherent,
        }
    }

    /// AICPU range maintenance issued so far, whatever the cache model: `(invalidate_range
    /// calls, flush_range calls)`. What a build issues is decided by its contract type.
    pub fn aicpu_cache_ops(&self) -> (u64, u64) {
        (self.inner.aicpu_cache_ops[0].load(Ordering::Relaxed), self.inner.aicpu_cache_ops[1].load(Ordering::Relaxed))
    }

    /// Violations the faithful model found so far (each also failed its launch).
    pub fn take_violations(&self) -> Vec<Violation> {
        self.inner.faithful.take_violations()
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
        // A thread still busy after the budget is stuck in a kernel that never returns: it is
        // detached (it keeps the device's memory alive until the process ends), and said so.
        let deadline = Instant::now() + DROP_JOIN_BUDGET;
        while Instant::now() < deadline && self.threads.iter().any(|t| !t.is_finished()) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut stuck = Vec::new();
        for t in self.threads.drain(..) {
            if t.is_finished() {
                let _ = t.join();
            } else {
                stuck.push(t.thread().name().unwrap_or("?").to_string());
            }
        }
        if !stuck.is_empty() {
            DETACHED.fetch_add(stuck.len() as u64, Ordering::Relaxed);
            eprintln!(
                "pto-sim: detached {} simulator thread(s) that did not stop within {:?} (a kernel that never returns?): {}",
                stuck.len(),
                DROP_JOIN_BUDGET,
                stuck.join(", ")
            );
        }
    }
}

/// How long dropping a device waits for its threads before it detaches the stuck ones.
pub const DROP_JOIN_BUDGET: Duration = Duration::from_secs(2);

static DETACHED: AtomicU64 = AtomicU64::new(0);

/// Simulator threads detached so far in this process because they never stopped (each was
/// stuck in a kernel that never returned when its device was dropped).
pub fn detached_threads() -> u64 {
    DETACHED.load(Ordering::Relaxed)
}

impl<C: Contract> core::fmt::Debug for SimDevice<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimDevice").field("topology", &self.inner.topo).finish_non_exhaustive()
    }
}
