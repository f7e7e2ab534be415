//! The agents device code runs as: AICPU threads and AICores, each implementing the HAL.
//!
//! With the coherent cache model plain accesses go straight to GM and every maintenance
//! operation does nothing; with the faithful model (`crate::faithful`) they act on the agent's
//! own cache. Barriers are real fences, so the Rust memory model — not just x86's — orders the
//! runtime's publications.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use pto_hal::{
    AicoreAgent, AicoreCache, AicpuAgent, AicpuCache, Barriers, Clock, Contract, CoreRegisters, CoreType, DelayNs,
    Events, GmAddr, GmAtomic, GmMemory, Kernel, KernelContext, KernelFault, Pause, Reg, Registers, Ticks,
};

use crate::gm::GM_BASE;
use crate::shared::Shared;

/// Word-level atomics shared by both agent kinds.
#[inline]
fn word(shared: &Shared, addr: GmAddr) -> &std::sync::atomic::AtomicU64 {
    if !addr.0.is_multiple_of(8) {
        panic!("misaligned GM atomic at {:#x}", addr.0);
    }
    shared.gm.word(shared.gm.checked(addr, 8))
}

macro_rules! impl_common {
    ($ty:ident) => {
        impl<C: Contract> $ty<C> {
            /// How many GM words this agent has stored through `GmAtomic` (device-direct stores
            /// and read-modify-writes that wrote): lets a test prove an operation did **not**
            /// write.
            pub fn gm_atomic_stores(&self) -> u64 {
                self.stores.load(Ordering::Relaxed)
            }

            /// A switch point: the engine may run another agent before this operation. The
            /// agent counts its own operations down ([`Engine::quantum`](crate::engine::Engine::quantum)
            /// of them: one on a seeded schedule, where every operation is a choice) and asks
            /// the engine only when the count runs out, so most operations touch no state but
            /// the agent's own.
            #[inline(always)]
            fn sp(&self, op: &'static str) {
                // Only this agent's operations count it down: no read-modify-write.
                let left = self.countdown.load(Ordering::Relaxed);
                if left > 1 {
                    self.countdown.store(left - 1, Ordering::Relaxed);
                    return;
                }
                self.countdown.store(self.shared.engine.quantum(), Ordering::Relaxed);
                self.shared.engine.switch_point(self.slot(), op);
            }

            #[inline]
            fn direct_written(&self, addr: GmAddr, rmw: bool) {
                // Only this agent writes its count: no read-modify-write (a locked instruction).
                self.stores.store(self.stores.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                if let Some(f) = self.shared.model() {
                    f.word_store(self.fid(), addr.0 - GM_BASE, addr.0, rmw);
                }
                self.shared.word_written(addr.0);
            }
        }

        impl<C: Contract> GmAtomic for $ty<C> {
            #[inline]
            fn query(&self, addr: GmAddr) -> u64 {
                self.sp("query");
                let v = word(&self.shared, addr).load(Ordering::Acquire);
                if let Some(f) = self.shared.model() {
                    f.word_load(self.fid(), addr.0 - GM_BASE, addr.0);
                }
                v
            }
            #[inline]
            fn store_direct(&self, addr: GmAddr, value: u64) {
                self.sp("store_direct");
                // Sequentially consistent, as every word write below: a waiter's monitor is
                // then seen without a fence ([`crate::monitor`]).
                word(&self.shared, addr).store(value, Ordering::SeqCst);
                self.direct_written(addr, false);
            }
            #[inline]
            fn store_direct_u32(&self, addr: GmAddr, value: u32) {
                self.sp("store_direct_u32");
                if addr.0 % 4 != 0 {
                    panic!("misaligned 32-bit GM store at {:#x}", addr.0);
                }
                let w = word(&self.shared, GmAddr(addr.0 & !7));
                let shift = (addr.0 & 4) * 8;
                let mask = 0xffff_ffffu64 << shift;
                let _ = w.fetch_update(Ordering::SeqCst, Ordering::Relaxed, |old| {
                    Some((old & !mask) | ((value as u64) << shift))
                });
                self.direct_written(GmAddr(addr.0 & !7), false);
            }
            #[inline]
            fn swap(&self, addr: GmAddr, value: u64) -> u64 {
                self.sp("swap");
                let old = word(&self.shared, addr).swap(value, Ordering::SeqCst);
                self.direct_written(addr, true);
                old
            }
            #[inline]
            fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
                self.sp("fetch_add");
                let old = word(&self.shared, addr).fetch_add(value, Ordering::SeqCst);
                self.direct_written(addr, true);
                old
            }
            #[inline]
            fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
                self.sp("compare_exchange");
                match word(&self.shared, addr).compare_exchange(expected, desired, Ordering::SeqCst, Ordering::Acquire)
                {
                    Ok(v) => {
                        self.direct_written(addr, true);
                        v
                    }
                    Err(v) => {
                        if let Some(f) = self.shared.model() {
                            f.word_load(self.fid(), addr.0 - GM_BASE, addr.0);
                        }
                        v
                    }
                }
            }
        }

        impl<C: Contract> GmMemory for $ty<C> {
            #[inline]
            fn read(&self, addr: GmAddr, dst: &mut [u8]) {
                self.sp("gm_read");
                let off = self.shared.gm.checked(addr, dst.len() as u64);
                match self.shared.model() {
                    Some(f) => f.load(self.fid(), addr.0, off, dst, &self.shared.gm),
                    None => self.shared.gm.read_bytes(off, dst),
                }
            }
            #[inline]
            fn write(&self, addr: GmAddr, src: &[u8]) {
                self.sp("gm_write");
                let off = self.shared.gm.checked(addr, src.len() as u64);
                match self.shared.model() {
                    Some(f) => f.store(self.fid(), addr.0, off, src, &self.shared.gm),
                    None => self.shared.gm.write_bytes(off, src),
                }
            }
        }

        impl<C: Contract> Barriers for $ty<C> {
            #[inline(always)]
            fn rmb(&self) {
                self.sp("rmb");
                fence(Ordering::Acquire)
            }
            #[inline(always)]
            fn wmb(&self) {
                self.sp("wmb");
                fence(Ordering::Release)
            }
            #[inline(always)]
            fn store_store(&self) {
                self.sp("store_store");
                fence(Ordering::Release)
            }
            #[inline(always)]
            fn full(&self) {
                self.sp("full_barrier");
                fence(Ordering::SeqCst);
                if let Some(f) = self.shared.model() {
                    f.fence(self.fid());
                }
            }
            #[inline(always)]
            fn store_barrier(&self) {
                self.sp("store_barrier");
                fence(Ordering::SeqCst);
                if let Some(f) = self.shared.model() {
                    f.fence(self.fid());
                }
            }
        }

        /// [`SimDelay`]: the agent waits until the device time has passed.
        impl<C: Contract> Pause for $ty<C> {
            type Delay = SimDelay;
            #[inline(always)]
            fn delay(&self) -> SimDelay {
                SimDelay { agent: Some((self.shared.clone(), self.slot())) }
            }
        }

        impl<C: Contract> Clock for $ty<C> {
            #[inline]
            fn now_ticks(&self) -> Ticks {
                self.sp("clock");
                self.shared.now_ticks()
            }
            #[inline]
            fn freq_hz(&self) -> u64 {
                self.shared.config.freq_hz
            }
        }
    };
}

/// The most clusters of a simulated device, and so of any launch on one: a device of this many
/// clusters and one AICPU thread is the largest the simulator opens (127 agents, see
/// [`SimDevice::open`](crate::SimDevice::open)). It sizes the runtime's per-core tables on the
/// simulator ([`AicpuAgent::MaxClusters`]), whatever board the device simulates: the boards
/// share one platform type per contract.
pub const MAX_CLUSTERS: u32 = 42;

/// Agents (AICPU threads and AICores) a simulated device has at most.
pub(crate) const MAX_AGENTS: u32 = 127;

/// AICPU threads of the largest device: one.
const MIN_THREADS: u32 = 1;

// The largest device of `MAX_CLUSTERS` clusters fits the agents, one more cluster does not.
const _: () =
    assert!(3 * MAX_CLUSTERS + MIN_THREADS <= MAX_AGENTS && 3 * (MAX_CLUSTERS + 1) + MIN_THREADS > MAX_AGENTS);

/// The simulated agents' `DelayNs` ([`Pause`]): waits at least the time asked for in device
/// time. On the thread engine short delays yield the thread between looks at the clock (a
/// back-off of a few microseconds costs one or two yields, never a sleep of a scheduler
/// quantum) and long ones sleep; on the coroutine engine the agent gives up its host thread
/// until the time has passed (virtual time on a seeded schedule).
#[derive(Clone, Default)]
pub struct SimDelay {
    /// The device and the agent's engine slot (`None`: a plain host delay).
    agent: Option<(Arc<Shared>, usize)>,
}

impl core::fmt::Debug for SimDelay {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SimDelay").field("slot", &self.agent.as_ref().map(|a| a.1)).finish()
    }
}

impl DelayNs for SimDelay {
    fn delay_ns(&mut self, ns: u32) {
        match &self.agent {
            Some((shared, slot)) => shared.engine.delay(*slot, u64::from(ns)),
            None => crate::engine::host_delay(u64::from(ns)),
        }
    }
}

fn reg_index(reg: Reg) -> u32 {
    match reg {
        Reg::Dmb => 0,
        Reg::Cond => 1,
    }
}

/// Arm agent `slot`'s monitor on `addr`, wait (unless the word already changed), disarm.
fn monitor_wait(shared: &Shared, slot: usize, addr: GmAddr, seen: u64, wait: impl FnOnce()) {
    shared.monitors.arm(slot, addr.0);
    // Re-check after arming: a write that landed before the monitor was visible is not lost.
    if word(shared, addr).load(Ordering::SeqCst) == seen {
        wait();
    }
    shared.monitors.disarm(slot, addr.0);
}

/// An AICPU thread of the simulated device.
pub struct SimAicpu<C: Contract> {
    shared: Arc<Shared>,
    idx: u32,
    stores: std::sync::atomic::AtomicU64,
    /// Operations left before the next switch point the engine sees.
    countdown: std::sync::atomic::AtomicU32,
    /// The launch descriptor of the job this thread runs (the checks' run key).
    launch: std::sync::atomic::AtomicU64,
    _c: PhantomData<fn() -> C>,
}

impl<C: Contract> SimAicpu<C> {
    pub(crate) fn new(shared: Arc<Shared>, idx: u32) -> Self {
        SimAicpu {
            shared,
            idx,
            stores: std::sync::atomic::AtomicU64::new(0),
            countdown: std::sync::atomic::AtomicU32::new(1),
            launch: Default::default(),
            _c: PhantomData,
        }
    }

    /// This thread now runs a job of the launch whose descriptor is at `args`.
    pub(crate) fn set_launch(&self, args: GmAddr) {
        self.launch.store(args.0, Ordering::Relaxed);
    }

    #[inline]
    fn fid(&self) -> u16 {
        self.shared.faithful.aicpu_id(self.idx)
    }

    /// This thread's engine slot.
    #[inline(always)]
    fn slot(&self) -> usize {
        self.shared.aicpu_slot(self.idx)
    }

    #[inline]
    fn count_range_op(&self, i: usize) {
        self.shared.aicpu_cache_ops[i].fetch_add(1, Ordering::Relaxed);
    }
}

impl_common!(SimAicpu);

impl<C: Contract> Registers for SimAicpu<C> {
    #[inline]
    fn read_reg(&self, core: u32, reg: Reg) -> u32 {
        self.sp("read_reg");
        let r = &self.shared.regs[core as usize];
        let v = match reg {
            Reg::Dmb => r.dmb.load(Ordering::Acquire),
            Reg::Cond => r.cond.load(Ordering::Acquire),
        };
        if let Some(f) = self.shared.model() {
            f.reg_read(self.fid(), core, reg_index(reg));
        }
        v
    }
    #[inline]
    fn write_reg(&self, core: u32, reg: Reg, value: u32) {
        self.sp("write_reg");
        if let Some(f) = self.shared.model() {
            f.reg_write(self.fid(), core, reg_index(reg));
        }
        let r = &self.shared.regs[core as usize];
        match reg {
            Reg::Dmb => {
                r.watcher.store(self.idx, Ordering::Relaxed);
                r.dmb.store(value, Ordering::Release);
                let w = self.shared.topo.workers() - 1 - core;
                self.shared.engine.notify(self.shared.core_slot(w));
            }
            Reg::Cond => r.cond.store(value, Ordering::Release),
        }
    }
    fn open_window(&self, core: u32, idle: u32) {
        self.shared.regs[core as usize].window_open.store(true, Ordering::Release);
        self.write_reg(core, Reg::Dmb, idle);
    }
    fn close_window(&self, core: u32, idle: u32) {
        self.sp("close_window");
        // A close is not a dispatch: nothing on the core waits for it (an exiting core waits
        // for its gate), so unlike `write_reg` it wakes nobody — one wake-up fewer per core.
        if let Some(f) = self.shared.model() {
            f.reg_write(self.fid(), core, reg_index(Reg::Dmb));
        }
        let r = &self.shared.regs[core as usize];
        r.dmb.store(idle, Ordering::Release);
        r.window_open.store(false, Ordering::Release);
        // Read-back: the posted stores of the close are complete once this returns.
        let _ = r.window_open.load(Ordering::Acquire);
    }
}

impl<C: Contract> Events for SimAicpu<C> {
    #[inline]
    fn wait_for_event(&self, deadline: Ticks) {
        self.shared.engine.wait(self.slot(), Some(self.shared.ns_of(deadline)));
    }
    #[inline]
    fn send_event(&self) {
        self.shared.wake_all_aicpu(Some(self.idx));
    }
    fn wait_for_word(&self, addr: GmAddr, seen: u64, deadline: Ticks) {
        let slot = self.slot();
        monitor_wait(&self.shared, slot, addr, seen, || self.wait_for_event(deadline));
    }
}

impl<C: Contract> AicpuAgent for SimAicpu<C> {
    type MaxClusters = pto_hal::typenum::U<{ MAX_CLUSTERS as usize }>;

    fn resolve_program<F: Copy + 'static>(&self, handle: u64) -> Option<F> {
        let table = self.shared.programs.read();
        table.get(pto_hal::Handle(handle)).ok()?.downcast_ref::<F>().copied()
    }

    fn run_program(&self, body: &mut dyn FnMut()) -> Result<(), KernelFault> {
        crate::panics::install_quiet_hook();
        // On a host thread of its own while the program runs, when the engine has one to give
        // (a thread that cannot be started leaves it where it is).
        let pinned = self.shared.engine.pin(self.slot(), true).is_ok();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
            .map_err(|p| KernelFault::new(&crate::panics::take_message(&*p)));
        if pinned {
            let _ = self.shared.engine.pin(self.slot(), false);
        }
        ran
    }

    fn note_task(&self, task: u32, producers: &mut dyn Iterator<Item = u32>) {
        let c = &self.shared.checker;
        if c.on() {
            c.note_task(self.launch.load(Ordering::Relaxed), task, producers);
        }
    }

    fn note_retired(&self, task: u32) {
        let c = &self.shared.checker;
        if c.on() {
            c.note_retired(self.launch.load(Ordering::Relaxed), task);
        }
    }

    fn note_allocation(&self, owner: u32, addr: GmAddr, len: u64) {
        let c = &self.shared.checker;
        if c.on() {
            let _ = owner;
            c.note_fresh(self.launch.load(Ordering::Relaxed), addr.0, addr.0.saturating_add(len));
        }
    }

    fn note_orchestration_access(&self, addr: GmAddr, len: u64, write: bool) {
        let c = &self.shared.checker;
        if c.on() {
            c.note_orchestration(self.launch.load(Ordering::Relaxed), addr.0, addr.0.saturating_add(len), write);
        }
    }
}

/// An AICore of the simulated device.
pub struct SimCore<C: Contract> {
    shared: Arc<Shared>,
    worker: u32,
    stores: std::sync::atomic::AtomicU64,
    /// Operations left before the next switch point the engine sees.
    countdown: std::sync::atomic::AtomicU32,
    /// The launch descriptor of the job this core runs (the checks' run key).
    launch: std::sync::atomic::AtomicU64,
    phys: u32,
    core_type: CoreType,
    _c: PhantomData<fn() -> C>,
}

impl<C: Contract> SimCore<C> {
    pub(crate) fn new(shared: Arc<Shared>, worker: u32) -> Self {
        let phys = shared.physical_id(worker);
        let core_type = shared.topo.core_type(worker);
        SimCore {
            shared,
            worker,
            phys,
            core_type,
            stores: std::sync::atomic::AtomicU64::new(0),
            countdown: std::sync::atomic::AtomicU32::new(1),
            launch: Default::default(),
            _c: PhantomData,
        }
    }

    /// This core now runs a job of the launch whose descriptor is at `args`.
    pub(crate) fn set_launch(&self, args: GmAddr) {
        self.launch.store(args.0, Ordering::Relaxed);
    }

    #[inline]
    fn fid(&self) -> u16 {
        self.shared.faithful.core_id(self.worker)
    }

    /// This core's engine slot.
    #[inline(always)]
    fn slot(&self) -> usize {
        self.shared.core_slot(self.worker)
    }
}

impl_common!(SimCore);

impl<C: Contract> CoreRegisters for SimCore<C> {
    #[inline]
    fn read_dmb(&self) -> u32 {
        self.sp("read_dmb");
        let v = self.shared.regs[self.phys as usize].dmb.load(Ordering::Acquire);
        if let Some(f) = self.shared.model() {
            f.reg_read(self.fid(), self.phys, 0);
        }
        v
    }
    #[inline]
    fn write_cond(&self, value: u32) {
        self.sp("write_cond");
        if let Some(f) = self.shared.model() {
            f.reg_write(self.fid(), self.phys, 1);
        }
        let r = &self.shared.regs[self.phys as usize];
        r.cond.store(value, Ordering::Release);
        let t = r.watcher.load(Ordering::Relaxed);
        if t < self.shared.topo.aicpu_threads {
            self.shared.engine.notify(self.shared.aicpu_slot(t));
        }
    }
}

// Coherent model: every operation is a no-op. Faithful model: the operation acts on this
// agent's cache (ranges round out to whole lines). Each agent implements its own tier only.
impl<C: Contract> AicpuCache for SimAicpu<C> {
    type Contract = C;
    #[inline(always)]
    fn invalidate_range(&self, addr: GmAddr, len: u64) {
        self.sp("invalidate_range");
        self.count_range_op(0);
        if let Some(f) = self.shared.model() {
            f.invalidate(self.fid(), addr.0, len, &self.shared.gm);
            f.fence(self.fid());
        }
    }
    #[inline(always)]
    fn flush_range(&self, addr: GmAddr, len: u64) {
        self.sp("flush_range");
        self.count_range_op(1);
        if let Some(f) = self.shared.model() {
            f.clean(self.fid(), addr.0, len, &self.shared.gm);
            f.fence(self.fid());
        }
    }
}

impl<C: Contract> AicoreCache for SimCore<C> {
    type Contract = C;
    #[inline(always)]
    fn writeback_line(&self, addr: GmAddr) {
        self.sp("writeback_line");
        if let Some(f) = self.shared.model() {
            f.clean(self.fid(), addr.line().0, 64, &self.shared.gm);
        }
    }
    #[inline(always)]
    fn invalidate_line(&self, addr: GmAddr) {
        self.sp("invalidate_line");
        if let Some(f) = self.shared.model() {
            f.invalidate(self.fid(), addr.line().0, 64, &self.shared.gm);
        }
    }
    #[inline(always)]
    fn invalidate_all(&self) {
        self.sp("invalidate_all");
        if let Some(f) = self.shared.model() {
            f.invalidate_all(self.fid(), &self.shared.gm);
        }
    }
    #[inline(always)]
    fn cache_barrier(&self) {
        self.sp("cache_barrier");
        if let Some(f) = self.shared.model() {
            f.fence(self.fid());
        }
    }
}

impl<C: Contract> Events for SimCore<C> {
    #[inline]
    fn wait_for_event(&self, deadline: Ticks) {
        self.shared.engine.wait(self.slot(), Some(self.shared.ns_of(deadline)));
    }
    #[inline]
    fn send_event(&self) {
        self.shared.wake_all_aicpu(None);
    }
    fn wait_for_word(&self, addr: GmAddr, seen: u64, deadline: Ticks) {
        let slot = self.slot();
        monitor_wait(&self.shared, slot, addr, seen, || self.wait_for_event(deadline));
    }
}

impl<C: Contract> AicoreAgent for SimCore<C> {
    fn resolve_kernel(&self, bin: u64) -> Option<Kernel> {
        let table = self.shared.kernels.read();
        let &(f, ty) = table.get(pto_hal::Handle(bin)).ok()?;
        (ty == self.core_type).then_some(f)
    }

    fn run_kernel(&self, kernel: Kernel, ctx: &mut dyn KernelContext) -> Result<(), KernelFault> {
        let kernel = match kernel {
            Kernel::Rust(f) => f,
            Kernel::Native { entry, id } => {
                let who = self.shared.natives.describe(id);
                let raw = |addr: GmAddr, dst: &mut [u8]| {
                    let off = self.shared.gm.checked(addr, dst.len() as u64);
                    self.shared.gm.read_bytes(off, dst);
                };
                let r = crate::native::call(entry, &who, ctx, &raw);
                let checker = &self.shared.checker;
                if checker.on() {
                    // Native code is seen at its boundary: the elements of its views, inputs
                    // read and outputs written whole.
                    let mut log = crate::check::BlockLog::of(ctx);
                    for a in crate::native::native_accesses(ctx) {
                        let Some(t) = ctx.tensor(a.arg) else { continue };
                        if a.read {
                            log.push_view(a.arg as u32, false, &t);
                        }
                        if a.write {
                            log.push_view(a.arg as u32, true, &t);
                        }
                    }
                    let key = crate::check::kernel_key(&Kernel::Native { entry, id });
                    checker.kernel_ran(self.launch.load(Ordering::Relaxed), ctx.task_id(), key, log);
                }
                return r;
            }
        };
        crate::panics::install_quiet_hook();
        let checker = &self.shared.checker;
        if checker.on() {
            let mut log = crate::check::BlockLog::of(ctx);
            let task = ctx.task_id();
            let r = crate::protect::run_kernel(kernel, ctx, Some(&mut log));
            checker.kernel_ran(self.launch.load(Ordering::Relaxed), task, kernel as usize, log);
            return r;
        }
        if self.shared.protect.load(Ordering::Relaxed) {
            return crate::protect::run_kernel(kernel, ctx, None);
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| kernel(ctx)))
            .map_err(|p| KernelFault::new(&crate::panics::take_message(&*p)))
    }

    fn as_gm(&self) -> &dyn GmMemory {
        self
    }
}
