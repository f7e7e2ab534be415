//! The simulated device: opening it, one OS thread per agent running the jobs queued for it,
//! and the public [`SimDevice`] API. What the agents themselves use — GM, registers, wake
//! cells, tables, the cache model — is the shared state (`shared.rs`), which names no agent; the
//! job queues and the installed device programs, typed by the agents, live here.

use parking_lot::{Mutex, RwLock};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pto_hal::{AicoreEntry, AicoreLaunch, AicpuEntry, AicpuLaunch, Contract, GmAddr, Topology};
use pto_inproc::Registry;

use crate::agent::{SimAicpu, SimCore};
use crate::config::{AicpuWritePolicy, CacheModel, SimConfig};
use crate::engine::AgentBody;
use crate::error::SimError;
use crate::launch::LaunchState;
use crate::shared::{Resolved, Shared};
use crate::violation::Violation;

/// One agent's part of a launch: the program it runs and the launch it reports to.
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

/// One simulated device as its host side and its agent threads see it: the state shared with
/// the agents, plus what is typed by the agents — each agent thread's job queue and the
/// installed device programs — and the fault injection.
pub(crate) struct Inner<C: Contract> {
    pub shared: Arc<Shared>,
    aicpu_jobs: Box<[Mutex<VecDeque<Job<C>>>]>,
    core_jobs: Box<[Mutex<VecDeque<Job<C>>>]>,
    /// Installed device programs (the runtime's AICPU and AICore programs), by name; handles
    /// from [`DEVICE_PROGRAM_BASE`].
    pub device_programs: RwLock<DevicePrograms<C>>,
    /// Workers that stay silent for their next launch (fault injection).
    silent: Mutex<Vec<u32>>,
}

impl<C: Contract> Inner<C> {
    pub fn push_aicpu(&self, t: u32, job: Job<C>) {
        self.aicpu_jobs[t as usize].lock().push_back(job);
        self.shared.engine.notify(self.shared.aicpu_slot(t));
    }

    pub fn push_core(&self, w: u32, job: Job<C>) {
        self.core_jobs[w as usize].lock().push_back(job);
        self.shared.engine.notify(self.shared.core_slot(w));
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
    let shared = &*inner.shared;
    let agent = SimAicpu::new(inner.shared.clone(), t);
    loop {
        let job = inner.aicpu_jobs[t as usize].lock().pop_front();
        match job {
            Some(Job::Aicpu { entry, args, thread_idx, thread_count, launch }) => {
                let id = shared.faithful.aicpu_id(t);
                if let Some(f) = shared.model() {
                    f.job_start(id, launch.start_vc.get().map_or(&[][..], |v| &v[..]), &launch);
                }
                agent.set_launch(args);
                let (s, m) = crate::panics::run_guarded(|| {
                    entry(&agent, AicpuLaunch { thread_idx, thread_count, args, scratch: &launch.scratch })
                });
                if let Some(f) = shared.model() {
                    launch.join_end(&f.job_end(id, &shared.gm));
                }
                launch.finish_one(s, m, shared);
            }
            Some(Job::Aicore { launch, .. }) => {
                launch.finish_one(-1, Some("AICore job on an AICPU thread".into()), shared)
            }
            None => {
                if shared.shutdown.load(Ordering::Acquire) {
                    return;
                }
                shared.engine.wait(shared.aicpu_slot(t), None);
            }
        }
    }
}

fn core_thread<C: Contract>(inner: Arc<Inner<C>>, w: u32) {
    let shared = &*inner.shared;
    let agent = SimCore::new(inner.shared.clone(), w);
    loop {
        let job = inner.core_jobs[w as usize].lock().pop_front();
        match job {
            Some(Job::Aicore { entry, args, block_idx, launch }) => {
                if inner.take_silent(w) {
                    // Injected fault: this core never runs its program (never reports).
                    launch.finish_one(0, None, shared);
                    continue;
                }
                // Like the hardware, every kernel launch resets the core's registers: DMB = 0
                // ("window not open") and COND = 0. A value left by the previous run (IDLE,
                // EXIT, EXITED) must never be taken for this run's.
                let regs = &shared.regs[shared.physical_id(w) as usize];
                regs.dmb.store(0, Ordering::Release);
                regs.cond.store(0, Ordering::Release);
                let launch_info = AicoreLaunch {
                    block_idx,
                    core_type: shared.topo.core_type(w),
                    physical_core_id: shared.physical_id(w),
                    args,
                };
                let id = shared.faithful.core_id(w);
                if let Some(f) = shared.model() {
                    f.job_start(id, launch.start_vc.get().map_or(&[][..], |v| &v[..]), &launch);
                }
                agent.set_launch(args);
                let (s, m) = crate::panics::run_guarded(|| entry(&agent, launch_info));
                if let Some(f) = shared.model() {
                    launch.join_end(&f.job_end(id, &shared.gm));
                }
                launch.finish_one(s, m, shared);
            }
            Some(Job::Aicpu { launch, .. }) => {
                launch.finish_one(-1, Some("AICPU job on an AICore thread".into()), shared)
            }
            None => {
                if shared.shutdown.load(Ordering::Acquire) {
                    return;
                }
                shared.engine.wait(shared.core_slot(w), None);
            }
        }
    }
}

/// The host's handle on a simulated device. Opening it starts one agent per AICPU thread
/// and per AICore on the device's engine (`crate::engine`); they live, blocked when idle,
/// until the device is dropped.
pub struct SimDevice<C: Contract> {
    pub(crate) inner: Arc<Inner<C>>,
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
        if topo.clusters > crate::agent::MAX_CLUSTERS {
            return Err(SimError::InvalidArgument(
                "the simulator supports at most 42 clusters (pto_sim::MAX_CLUSTERS: its AICPU programs' tables hold no more)",
            ));
        }
        let workers = topo.workers() as usize;
        let nthreads = topo.aicpu_threads as usize;
        if nthreads + workers > crate::agent::MAX_AGENTS as usize {
            return Err(SimError::InvalidArgument("the simulator supports at most 127 device agents"));
        }
        // The environment is read once, strictly: a value outside its syntax is an error.
        let model = CacheModel::from_env()?.unwrap_or(config.cache);
        let writes = AicpuWritePolicy::from_env()?
            .or(config.aicpu_writes)
            .unwrap_or(AicpuWritePolicy::for_contract(C::HOST_COHERENT));
        let protect = crate::config::protection_from_env()?.unwrap_or(config.protect);
        let checks = crate::config::checks_from_env()?.unwrap_or(config.check);
        let (engine, schedule) = crate::config::engine_for(&config)?;
        let inner = Arc::new(Inner {
            shared: Arc::new(Shared::new(
                topo,
                config,
                Resolved { model, writes, protect, checks, engine: (engine, schedule) },
                C::HOST_COHERENT,
            )),
            aicpu_jobs: (0..nthreads).map(|_| Mutex::new(VecDeque::new())).collect(),
            core_jobs: (0..workers).map(|_| Mutex::new(VecDeque::new())).collect(),
            device_programs: RwLock::new(DevicePrograms::new()),
            silent: Mutex::new(Vec::new()),
        });
        let mut agents = Vec::with_capacity(workers + nthreads);
        for t in 0..nthreads as u32 {
            let i = inner.clone();
            agents.push(AgentBody { name: format!("pto-aicpu-{t}"), body: Box::new(move || aicpu_thread(i, t)) });
        }
        for w in 0..workers as u32 {
            let i = inner.clone();
            agents.push(AgentBody { name: format!("pto-aicore-{w}"), body: Box::new(move || core_thread(i, w)) });
        }
        let dev = SimDevice { inner };
        dev.shared().engine.start(agents)?;
        Ok(dev)
    }

    /// The state the device shares with its agents.
    pub(crate) fn shared(&self) -> &Shared {
        &self.inner.shared
    }

    /// The device's topology.
    pub fn topology(&self) -> Topology {
        self.shared().topo
    }

    /// The configuration the device was opened with.
    pub fn config(&self) -> &SimConfig {
        &self.shared().config
    }

    /// Fault injection: worker `w` stays silent (never runs, never reports) for its next
    /// AICore launch.
    pub fn inject_silent_core(&self, w: u32) -> Result<(), SimError> {
        if w >= self.shared().topo.workers() {
            return Err(SimError::InvalidArgument("no such worker"));
        }
        self.inner.add_silent(w);
        Ok(())
    }

    /// Switch the cache model (between runs: refused while a launch is active). Switching to
    /// the faithful model starts it from empty caches with `seed`.
    pub fn set_cache_model(&self, model: CacheModel) -> Result<(), SimError> {
        if self.shared().active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("the cache model cannot change while a launch is active"));
        }
        match model {
            CacheModel::Coherent => self.shared().faithful_on.store(false, Ordering::Release),
            CacheModel::Faithful { seed, evict_per_mille } => {
                self.shared().faithful.reset(seed, evict_per_mille);
                self.shared().faithful_on.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Switch the AICPU write policy of the faithful model (between runs: refused while a
    /// launch is active); the model restarts from empty caches, as with
    /// [`SimDevice::set_cache_model`]. Returns the policy in effect (under the host-coherent
    /// contract `WriteBack` acts as `WriteThrough`).
    pub fn set_aicpu_writes(&self, policy: AicpuWritePolicy) -> Result<AicpuWritePolicy, SimError> {
        if self.shared().active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("the AICPU write policy cannot change while a launch is active"));
        }
        let f = &self.shared().faithful;
        f.reset(f.seed(), f.evict_per_mille());
        Ok(f.set_aicpu_writes(policy))
    }

    /// The AICPU write policy in effect under the faithful model.
    pub fn aicpu_writes(&self) -> AicpuWritePolicy {
        self.shared().faithful.aicpu_writes()
    }

    /// Switch memory protection on or off (between runs: refused while a launch is active).
    pub fn set_protection(&self, on: bool) -> Result<(), SimError> {
        if self.shared().active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("memory protection cannot change while a launch is active"));
        }
        self.shared().protect.store(on, Ordering::Release);
        Ok(())
    }

    /// Switch the schedule-independent checks (`crate::check`) between runs: refused while a
    /// launch is active.
    pub fn set_checks(&self, checks: pto_hal::check::Checks) -> Result<(), SimError> {
        if self.shared().active_launches.load(Ordering::Acquire) != 0 {
            return Err(SimError::InvalidArgument("the checks cannot change while a launch is active"));
        }
        self.shared().checker.set(checks);
        Ok(())
    }

    /// The checks on now.
    pub fn checks(&self) -> pto_hal::check::Checks {
        self.shared().checker.checks()
    }

    /// Whether memory protection is on.
    pub fn protection(&self) -> bool {
        self.shared().protect.load(Ordering::Acquire)
    }

    /// The cache model in force.
    pub fn cache_model(&self) -> CacheModel {
        match self.shared().model() {
            Some(f) => CacheModel::Faithful { seed: f.seed(), evict_per_mille: f.evict_per_mille() },
            None => CacheModel::Coherent,
        }
    }

    /// AICPU range maintenance issued so far, whatever the cache model: `(invalidate_range
    /// calls, flush_range calls)`. What a build issues is decided by its contract type.
    pub fn aicpu_cache_ops(&self) -> (u64, u64) {
        (
            self.shared().aicpu_cache_ops[0].load(Ordering::Relaxed),
            self.shared().aicpu_cache_ops[1].load(Ordering::Relaxed),
        )
    }

    /// Violations the faithful model found so far (each also failed its launch).
    pub fn take_violations(&self) -> Vec<Violation> {
        self.shared().faithful.take_violations()
    }

    /// The engine running the agents, as the run line prints it (`threads`, `coroutines:N`).
    pub fn engine(&self) -> String {
        self.shared().engine.describe()
    }

    /// Who orders the agents: the host's OS, or a seed.
    pub fn schedule(&self) -> crate::Schedule {
        self.shared().schedule
    }

    /// The seeded schedule's report so far: switch points taken, the last ones, and whether
    /// the run left the seed's control (`None` when the host's OS schedules the agents).
    pub fn schedule_report(&self) -> Option<crate::ScheduleReport> {
        self.shared().engine.schedule_report()
    }

    /// Bytes of GM currently allocated (for leak checks).
    pub fn allocated_bytes(&self) -> u64 {
        self.shared().gm.allocated_bytes()
    }
}

impl<C: Contract> Drop for SimDevice<C> {
    fn drop(&mut self) {
        let shared = &self.inner.shared;
        shared.shutdown.store(true, Ordering::Release);
        for slot in 0..shared.agents() {
            shared.engine.notify(slot);
        }
        // An agent still busy after the budget is stuck in a kernel that never returns: it is
        // given up (it keeps the device's memory alive until the process ends), and said so.
        shared.engine.stop();
    }
}

/// How long dropping a device waits for its agents before it gives up the stuck ones.
pub const DROP_JOIN_BUDGET: Duration = crate::engine::STOP_BUDGET;

/// Simulator agents given up so far in this process because they never stopped (each was
/// stuck in a kernel that never returned when its device was dropped).
pub fn detached_threads() -> u64 {
    crate::engine::detached()
}

impl<C: Contract> core::fmt::Debug for SimDevice<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimDevice").field("topology", &self.shared().topo).finish_non_exhaustive()
    }
}
