//! The state one simulated device shares between its agents and its host side: GM, the
//! registers and wake cells, the kernel and orchestration tables, the GM word monitors, the
//! cache model and the protection switch, and the device's counters.
//!
//! Every agent holds it, and so does the device; nothing in it names an agent type (the job
//! queues and the installed device programs, which do, belong to the device).

use parking_lot::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use pto_hal::{CoreType, Kernel, Ticks, Topology};
use pto_inproc::HandleTable;

use crate::config::{AicpuWritePolicy, CacheModel, SimConfig};
use crate::engine::Engine;
use crate::faithful::Faithful;
use crate::gm::Gm;
use crate::monitor::WordMonitors;

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

/// The settings of a device as resolved at open (configuration, environment, scope).
pub(crate) struct Resolved {
    pub model: CacheModel,
    pub writes: AicpuWritePolicy,
    pub protect: bool,
    pub checks: pto_hal::check::Checks,
    pub engine: (crate::engine::SimEngine, crate::engine::Schedule),
}

/// Shared state of one simulated device.
pub(crate) struct Shared {
    pub topo: Topology,
    pub config: SimConfig,
    pub gm: Gm,
    /// Registers, indexed by physical core id.
    pub regs: Box<[CoreRegs]>,
    /// The engine that runs the agents. Its slots: AICPU threads first (`t`), then AICore
    /// workers (`aicpu_threads + w`).
    pub engine: Engine,
    /// The schedule the engine follows.
    pub schedule: crate::engine::Schedule,
    /// Loaded kernels and the core type each was loaded for; handles from [`KERNEL_BASE`].
    pub kernels: RwLock<HandleTable<(Kernel, CoreType)>>,
    /// The native kernels' shared objects, kept loaded while the device lives.
    pub natives: crate::native::Natives,
    /// Loaded orchestration programs; handles from [`PROGRAM_BASE`].
    pub programs: RwLock<HandleTable<Box<dyn std::any::Any + Send + Sync>>>,
    /// Which agent (AICPU threads, then cores: the engine's slots) waits on which GM word.
    pub monitors: WordMonitors,
    /// The faithful cache model (used while `faithful_on`).
    pub faithful: Faithful,
    /// Whether the faithful cache model is on.
    pub faithful_on: AtomicBool,
    /// Whether kernels run behind the memory-protection guard (`crate::protect`).
    pub protect: AtomicBool,
    /// The schedule-independent checks and what they record.
    pub checker: crate::check::Checker,
    /// AICPU cache maintenance issued so far: `[invalidate_range, flush_range]` calls.
    pub aicpu_cache_ops: [AtomicU64; 2],
    /// Launches not yet finished (the cache model may change only when this is zero).
    pub active_launches: AtomicU32,
    pub shutdown: AtomicBool,
}

/// Base of kernel binary addresses on the simulator (index 0 is never a valid binary).
const KERNEL_BASE: u64 = 0x4b00_0000;
/// Handles of loaded orchestration programs start here (kernels end below it).
const PROGRAM_BASE: u64 = 0x5000_0000;
/// How many orchestration programs one device loads at most.
const PROGRAM_CAPACITY: u64 = 0x1000_0000;

impl Shared {
    /// The state of a device of `topo` opened with `config`, once the environment has been
    /// read: cache `model`, AICPU `writes` policy, `protect`, `checks` and the `engine` with
    /// its schedule as resolved at open, under a host-coherent contract when `host_coherent`.
    pub fn new(topo: Topology, config: SimConfig, o: Resolved, host_coherent: bool) -> Shared {
        let Resolved { model, writes, protect, checks, engine } = o;
        let workers = topo.workers() as usize;
        let nthreads = topo.aicpu_threads as usize;
        Shared {
            topo,
            config,
            gm: Gm::new(config.gm_bytes),
            regs: (0..workers).map(|_| CoreRegs::default()).collect(),
            schedule: engine.1,
            engine: Engine::new(
                engine.0,
                engine.1,
                (0..nthreads)
                    .map(|_| Duration::from_micros(config.aicpu_spin_us))
                    .chain((0..workers).map(|_| Duration::from_micros(config.aicore_spin_us)))
                    .collect(),
                config.max_spinners,
            ),
            kernels: RwLock::new(HandleTable::new("kernel", KERNEL_BASE, PROGRAM_BASE - KERNEL_BASE)),
            natives: crate::native::Natives::default(),
            programs: RwLock::new(HandleTable::new("orchestration", PROGRAM_BASE, PROGRAM_CAPACITY)),
            monitors: WordMonitors::new(nthreads + workers),
            faithful: {
                let (seed, evict) = match model {
                    CacheModel::Faithful { seed, evict_per_mille } => (seed, evict_per_mille),
                    CacheModel::Coherent => (0, 0),
                };
                let f = Faithful::new(seed, evict, host_coherent, topo.aicpu_threads, topo.workers());
                f.set_aicpu_writes(writes);
                f
            },
            faithful_on: AtomicBool::new(matches!(model, CacheModel::Faithful { .. })),
            protect: AtomicBool::new(protect),
            // Two writers of one line are a hazard where caches are not coherent with each
            // other's write-backs (the host-non-coherent contract, a2a3).
            checker: crate::check::Checker::new(checks, !host_coherent),
            active_launches: AtomicU32::new(0),
            aicpu_cache_ops: [AtomicU64::new(0), AtomicU64::new(0)],
            shutdown: AtomicBool::new(false),
        }
    }

    /// Physical core id of worker `w`: the sim numbers them in reverse so the runtime must use
    /// the ids the cores report, never assume worker index == physical id.
    pub fn physical_id(&self, w: u32) -> u32 {
        self.topo.workers() - 1 - w
    }

    /// The device counter (virtual on a seeded schedule).
    #[inline]
    pub fn now_ticks(&self) -> Ticks {
        let ns = self.engine.now_ns();
        // A frequency that divides a second (50 MHz: 20 ns a tick) needs no 128-bit division
        // on this hot path (every clock read of every agent).
        match self.config.freq_hz {
            f if f > 0 && 1_000_000_000 % f == 0 => ns / (1_000_000_000 / f),
            f => (ns as u128 * f as u128 / 1_000_000_000) as u64,
        }
    }

    /// Device nanoseconds of counter value `ticks`.
    pub fn ns_of(&self, ticks: Ticks) -> u64 {
        let ns = ticks as u128 * 1_000_000_000 / self.config.freq_hz as u128;
        ns.min(u64::MAX as u128) as u64
    }

    /// The engine slot of AICPU thread `t`.
    #[inline]
    pub fn aicpu_slot(&self, t: u32) -> usize {
        t as usize
    }

    /// The engine slot of worker `w`.
    #[inline]
    pub fn core_slot(&self, w: u32) -> usize {
        self.topo.aicpu_threads as usize + w as usize
    }

    /// Agents (AICPU threads and workers).
    pub fn agents(&self) -> usize {
        self.topo.aicpu_threads as usize + self.topo.workers() as usize
    }

    pub fn wake_all_aicpu(&self, except: Option<u32>) {
        for t in 0..self.topo.aicpu_threads {
            if Some(t) != except {
                self.engine.notify(self.aicpu_slot(t));
            }
        }
    }

    /// Submit-side bookkeeping of a new launch: its submission clock (faithful model).
    pub fn launch_started(&self) -> Vec<u32> {
        self.active_launches.fetch_add(1, Ordering::AcqRel);
        match self.model() {
            Some(f) => f.host_release(),
            None => Vec::new(),
        }
    }

    /// The run key the checks record a launch with descriptor `args` under, when a check is
    /// on (the launch is counted in its run until it finishes).
    pub fn check_launch(&self, args: pto_hal::GmAddr) -> Option<u64> {
        if !self.checker.on() {
            return None;
        }
        self.checker.launch_submitted(args.0);
        Some(args.0)
    }

    /// Number of vector-clock entries (device agents + host).
    pub fn vc_len(&self) -> usize {
        1 + self.agents()
    }

    /// A GM word was written (sequentially consistent: [`crate::monitor`]): wake whoever waits on it.
    #[inline]
    pub fn word_written(&self, addr: u64) {
        self.monitors.waiters(addr, |slot| self.engine.notify(slot));
    }

    /// The faithful model, when it is on.
    #[inline]
    pub fn model(&self) -> Option<&Faithful> {
        if self.faithful_on.load(Ordering::Relaxed) { Some(&self.faithful) } else { None }
    }
}
