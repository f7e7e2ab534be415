//! A loom-backed device for the protocol models: the HAL implemented over loom atomics.
//!
//! * **GM** is a small array of loom `AtomicU64` words starting at [`GM_BASE`]. Plain accesses
//!   ([`GmMemory`]) are `Relaxed` word loads/stores, exactly as the simulator's coherent model
//!   performs them; device-direct accesses ([`GmAtomic`]) are `Acquire` loads, `Release`
//!   stores and `AcqRel` read-modify-writes, again as in the simulator.
//! * **Registers**: per core one DMB and one COND, loom `AtomicU32`. Two orderings
//!   ([`RegOrder`]): the simulator's (`Release` on write, `Acquire` on read), or the HAL's
//!   contract taken literally — plain accesses that "emit no barrier" (`Relaxed`), so only the
//!   runtime's own `wmb` / `rmb` order a hand-off, and a missing barrier shows up as a stale
//!   payload. Window open/close is a per-core flag with a read-back, like the simulator's.
//! * **Barriers** are loom fences: `rmb` = acquire, `wmb` / `store_store` = release, `full` /
//!   `store_barrier` = seq-cst.
//! * **Cache maintenance** is a no-op at each tier ([`AicpuCache`] for [`LoomAicpu`],
//!   [`AicoreCache`] for [`LoomCore`]) and the contract is [`HostCoherent`].
//! * **Clock**: one device counter, a loom atomic that advances on every `now_ticks` call, so
//!   every deadline expires after finitely many reads and every bounded wait terminates.
//! * **Events**: `wait_for_event` / `wait_for_word` are `loom::thread::yield_now()`, which is
//!   what lets loom bound spin loops.
//!
//! Besides the machine, the device carries witness flags the models assert on: which core
//! windows were closed (and how often), and which cores have left their teardown-gate wait.
//! Every AICPU register access asserts that the core has not left yet.

use super::prelude::*;
use crate::layout::{DESC_MAGIC, LAYOUT_VERSION, LaunchConfig, LaunchDesc};
use crate::lifecycle::RunMap;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering, fence};
use pto_hal::{
    AicoreAgent, AicoreCache, AicpuAgent, AicpuCache, Barriers, Clock, CoreRegisters, DelayNs, Events, GmAddr,
    GmAtomic, GmMemory, GmMemoryExt, HostCoherent, Kernel, KernelContext, KernelContextExt, KernelFault, KernelFn,
    Pause, Reg, Registers, Ticks,
};

/// Address of the first GM word. Non-zero, so [`GmAddr::NULL`] is never inside GM.
pub const GM_BASE: u64 = 0x1_0000;

/// Where a model's device structures live in GM: descriptor, then per-worker handshake lines,
/// gate lines and payload pairs, then `extra_bytes` of free space (for argument records).
#[derive(Copy, Clone, Debug)]
pub struct GmPlan {
    /// Launch descriptor.
    pub desc: u64,
    /// `Handshake[workers]`.
    pub handshakes: u64,
    /// `TeardownGate[workers]`.
    pub gates: u64,
    /// `DispatchPayload[workers][2]`.
    pub payloads: u64,
    /// Start of the free space.
    pub extra: u64,
    /// One past the last byte.
    pub end: u64,
}

impl GmPlan {
    /// Plan GM for `workers` workers and `extra_bytes` of free space.
    pub fn new(workers: u32, extra_bytes: u64) -> GmPlan {
        let desc = GM_BASE;
        let handshakes = desc + core::mem::size_of::<LaunchDesc>() as u64;
        let gates = handshakes + 64 * workers as u64;
        let payloads = gates + 64 * workers as u64;
        let extra = payloads + 128 * workers as u64;
        GmPlan { desc, handshakes, gates, payloads, extra, end: extra + extra_bytes.next_multiple_of(64) }
    }

    /// Number of GM words the plan covers.
    pub fn words(&self) -> usize {
        ((self.end - GM_BASE) / 8) as usize
    }

    /// A run map for this plan: epoch `epoch`, `workers` workers of one cluster on a device of
    /// `cores` physical cores, and the given budgets (in ticks of the device counter).
    pub fn run_map(&self, workers: u32, cores: u32, epoch: u64, budgets: Budgets) -> RunMap {
        let cfg = LaunchConfig {
            magic: DESC_MAGIC,
            version: LAYOUT_VERSION,
            epoch,
            clusters: 1,
            workers,
            aicpu_threads: 1,
            physical_cores: cores,
            handshakes: self.handshakes,
            gates: self.gates,
            payloads: self.payloads,
            watchdog_ticks: budgets.watchdog,
            exit_ticks: budgets.exit,
            core_wait_ticks: budgets.core_wait,
            executor: crate::layout::executor_mode::LEGACY_GRAPH,
            ..LaunchConfig::default()
        };
        RunMap { desc: GmAddr(self.desc), cfg }
    }
}

/// How register accesses are ordered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum RegOrder {
    /// As the simulator does it: `Release` writes, `Acquire` reads.
    Simulator,
    /// As `pto_hal::Registers` promises it: no barrier at all (`Relaxed`); every ordering
    /// must come from the caller's `wmb` / `rmb` (fences).
    HalContract,
}

/// Watchdog budgets of a model's run, in ticks of the device counter (which advances on every
/// read, so a budget of `n` expires after at most `n` clock reads by anyone).
#[derive(Copy, Clone, Debug)]
pub struct Budgets {
    /// AICPU no-progress / handshake watchdog.
    pub watchdog: u64,
    /// AICPU budget for a core group's EXIT acknowledgements.
    pub exit: u64,
    /// AICore budget for any single wait.
    pub core_wait: u64,
}

impl Budgets {
    /// Budgets that never expire in a model (every loop is bounded by loom's yields instead).
    pub const NEVER: Budgets = Budgets { watchdog: u64::MAX / 4, exit: u64::MAX / 4, core_wait: u64::MAX / 4 };
}

/// The loom device: GM words, per-core registers, the device clock and the witness flags.
pub struct Device {
    reg_order: RegOrder,
    words: Box<[AtomicU64]>,
    dmb: Box<[AtomicU32]>,
    cond: Box<[AtomicU32]>,
    window_open: Box<[AtomicBool]>,
    clock: AtomicU64,
    closes: Box<[AtomicU32]>,
    left: Box<[AtomicBool]>,
}

impl Device {
    /// A device with `gm` as the initial GM contents (word `i` at `GM_BASE + 8 i`) and `cores`
    /// cores whose DMB holds `dmb` and COND holds `cond`; registers ordered as `reg_order`.
    pub fn new(gm: &[u64], cores: usize, dmb: u32, cond: u32, reg_order: RegOrder) -> Arc<Device> {
        Arc::new(Device {
            reg_order,
            words: gm.iter().map(|&v| AtomicU64::new(v)).collect(),
            dmb: (0..cores).map(|_| AtomicU32::new(dmb)).collect(),
            cond: (0..cores).map(|_| AtomicU32::new(cond)).collect(),
            window_open: (0..cores).map(|_| AtomicBool::new(dmb != 0)).collect(),
            clock: AtomicU64::new(0),
            closes: (0..cores).map(|_| AtomicU32::new(0)).collect(),
            left: (0..cores).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    fn reg_load(&self) -> Ordering {
        match self.reg_order {
            RegOrder::Simulator => Ordering::Acquire,
            RegOrder::HalContract => Ordering::Relaxed,
        }
    }

    fn reg_store(&self) -> Ordering {
        match self.reg_order {
            RegOrder::Simulator => Ordering::Release,
            RegOrder::HalContract => Ordering::Relaxed,
        }
    }

    fn word(&self, addr: GmAddr) -> &AtomicU64 {
        assert!(addr.0 % 8 == 0, "misaligned GM word access at {:#x}", addr.0);
        assert!(addr.0 >= GM_BASE, "GM access below GM at {:#x}", addr.0);
        let i = ((addr.0 - GM_BASE) / 8) as usize;
        match self.words.get(i) {
            Some(w) => w,
            None => panic!("GM access past the model's GM at {:#x}", addr.0),
        }
    }

    /// Test-side direct read of a GM word (after the threads joined, or as a witness).
    pub fn peek(&self, addr: GmAddr) -> u64 {
        self.word(addr).load(Ordering::SeqCst)
    }

    /// Test-side read of a core's COND register.
    pub fn cond(&self, core: u32) -> u32 {
        self.cond[core as usize].load(Ordering::SeqCst)
    }

    /// How many times the AICPU closed `core`'s window.
    pub fn closes(&self, core: u32) -> u32 {
        self.closes[core as usize].load(Ordering::SeqCst)
    }

    /// Whether the AICPU's `close_window` of `core` has completed (read-back included).
    pub fn closed(&self, core: u32) -> bool {
        self.closes(core) != 0
    }

    /// Witness: `core` has left its teardown-gate wait. From here on the AICPU must never touch
    /// its registers (the next program on the core's stream may already own them).
    pub fn mark_left(&self, core: u32) {
        self.left[core as usize].store(true, Ordering::SeqCst);
    }

    fn assert_present(&self, core: u32, what: &str) {
        // A read-modify-write reads the newest value in modification order (a plain load may
        // legally return an older one), and `Relaxed` adds no synchronisation to the protocol.
        assert!(
            !self.left[core as usize].fetch_or(false, Ordering::Relaxed),
            "AICPU {what} core {core}'s registers after the core left its teardown gate"
        );
    }

    fn read_bytes(&self, addr: GmAddr, dst: &mut [u8]) {
        let mut off = addr.0;
        let mut i = 0;
        while i < dst.len() {
            let bo = (off % 8) as usize;
            let n = (8 - bo).min(dst.len() - i);
            let v = self.word(GmAddr(off - bo as u64)).load(Ordering::Relaxed).to_le_bytes();
            dst[i..i + n].copy_from_slice(&v[bo..bo + n]);
            i += n;
            off += n as u64;
        }
    }

    fn write_bytes(&self, addr: GmAddr, src: &[u8]) {
        let mut off = addr.0;
        let mut i = 0;
        while i < src.len() {
            let bo = (off % 8) as usize;
            let n = (8 - bo).min(src.len() - i);
            let w = self.word(GmAddr(off - bo as u64));
            if n == 8 {
                let mut b = [0u8; 8];
                b.copy_from_slice(&src[i..i + 8]);
                w.store(u64::from_le_bytes(b), Ordering::Relaxed);
            } else {
                let mut bytes = [0u8; 8];
                let mut mask = [0u8; 8];
                bytes[bo..bo + n].copy_from_slice(&src[i..i + n]);
                mask[bo..bo + n].fill(0xff);
                let (bytes, mask) = (u64::from_le_bytes(bytes), u64::from_le_bytes(mask));
                let mut cur = w.load(Ordering::Relaxed);
                while let Err(seen) =
                    w.compare_exchange(cur, (cur & !mask) | bytes, Ordering::Relaxed, Ordering::Relaxed)
                {
                    cur = seen;
                }
            }
            i += n;
            off += n as u64;
        }
    }
}

/// Initial GM contents for `plan`: zero everywhere, `cfg` at the descriptor.
pub fn initial_gm(plan: &GmPlan, cfg: &LaunchConfig) -> Vec<u64> {
    use zerocopy::IntoBytes;
    let mut gm = vec![0u64; plan.words()];
    let at = ((plan.desc - GM_BASE) / 8) as usize;
    for (k, chunk) in cfg.as_bytes().chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        gm[at + k] = u64::from_le_bytes(b);
    }
    gm
}

/// An AICPU thread of the loom device.
pub struct LoomAicpu {
    /// The device.
    pub dev: Arc<Device>,
}

/// An AICore of the loom device, with its physical id.
pub struct LoomCore {
    /// The device.
    pub dev: Arc<Device>,
    /// Physical core id: indexes the register arrays.
    pub phys: u32,
}

macro_rules! impl_common {
    ($ty:ident) => {
        impl GmAtomic for $ty {
            fn query(&self, addr: GmAddr) -> u64 {
                self.dev.word(addr).load(Ordering::Acquire)
            }
            fn store_direct(&self, addr: GmAddr, value: u64) {
                self.dev.word(addr).store(value, Ordering::Release);
            }
            fn store_direct_u32(&self, addr: GmAddr, value: u32) {
                assert!(addr.0 % 4 == 0, "misaligned 32-bit GM store at {:#x}", addr.0);
                let w = self.dev.word(GmAddr(addr.0 & !7));
                let shift = (addr.0 & 4) * 8;
                let mask = 0xffff_ffffu64 << shift;
                let mut cur = w.load(Ordering::Relaxed);
                while let Err(seen) = w.compare_exchange(
                    cur,
                    (cur & !mask) | ((value as u64) << shift),
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    cur = seen;
                }
            }
            fn swap(&self, addr: GmAddr, value: u64) -> u64 {
                self.dev.word(addr).swap(value, Ordering::AcqRel)
            }
            fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
                self.dev.word(addr).fetch_add(value, Ordering::AcqRel)
            }
            fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
                match self.dev.word(addr).compare_exchange(expected, desired, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(v) | Err(v) => v,
                }
            }
        }

        impl GmMemory for $ty {
            fn read(&self, addr: GmAddr, dst: &mut [u8]) {
                self.dev.read_bytes(addr, dst)
            }
            fn write(&self, addr: GmAddr, src: &[u8]) {
                self.dev.write_bytes(addr, src)
            }
        }

        impl Barriers for $ty {
            fn rmb(&self) {
                fence(Ordering::Acquire)
            }
            fn wmb(&self) {
                fence(Ordering::Release)
            }
            fn store_store(&self) {
                fence(Ordering::Release)
            }
            fn full(&self) {
                fence(Ordering::SeqCst)
            }
            fn store_barrier(&self) {
                fence(Ordering::SeqCst)
            }
        }

        impl Clock for $ty {
            fn now_ticks(&self) -> Ticks {
                self.dev.clock.fetch_add(1, Ordering::Relaxed)
            }
            fn freq_hz(&self) -> u64 {
                1_000_000
            }
        }

        impl Pause for $ty {
            type Delay = NoDelay;
            fn delay(&self) -> NoDelay {
                NoDelay
            }
        }

        impl Events for $ty {
            fn wait_for_event(&self, _deadline: Ticks) {
                loom::thread::yield_now();
            }
            fn send_event(&self) {}
            fn wait_for_word(&self, _addr: GmAddr, _seen: u64, _deadline: Ticks) {
                loom::thread::yield_now();
            }
        }
    };
}

/// The loom device's delay: none. Loom has no time, and the runtime backs off only after a
/// wait (`Events`), which on this device already yields to the other threads of the model.
pub struct NoDelay;

impl DelayNs for NoDelay {
    fn delay_ns(&mut self, _ns: u32) {}
}

impl_common!(LoomAicpu);
impl_common!(LoomCore);

/// An AICPU thread maintains by range: nothing to do on the coherent loom device.
impl AicpuCache for LoomAicpu {
    type Contract = HostCoherent;
    fn invalidate_range(&self, _addr: GmAddr, _len: u64) {}
    fn flush_range(&self, _addr: GmAddr, _len: u64) {}
}

/// An AICore maintains by line and as a whole: nothing to do on the coherent loom device.
impl AicoreCache for LoomCore {
    type Contract = HostCoherent;
    fn writeback_line(&self, _addr: GmAddr) {}
    fn invalidate_line(&self, _addr: GmAddr) {}
    fn invalidate_all(&self) {}
    fn cache_barrier(&self) {}
}

impl Registers for LoomAicpu {
    fn read_reg(&self, core: u32, reg: Reg) -> u32 {
        self.dev.assert_present(core, "read");
        match reg {
            Reg::Dmb => self.dev.dmb[core as usize].load(self.dev.reg_load()),
            Reg::Cond => self.dev.cond[core as usize].load(self.dev.reg_load()),
        }
    }
    fn write_reg(&self, core: u32, reg: Reg, value: u32) {
        self.dev.assert_present(core, "wrote");
        match reg {
            Reg::Dmb => self.dev.dmb[core as usize].store(value, self.dev.reg_store()),
            Reg::Cond => self.dev.cond[core as usize].store(value, self.dev.reg_store()),
        }
    }
    fn open_window(&self, core: u32, idle: u32) {
        self.dev.assert_present(core, "opened");
        self.dev.window_open[core as usize].store(true, Ordering::Release);
        self.write_reg(core, Reg::Dmb, idle);
    }
    fn close_window(&self, core: u32, idle: u32) {
        self.dev.assert_present(core, "closed");
        self.write_reg(core, Reg::Dmb, idle);
        let w = &self.dev.window_open[core as usize];
        w.store(false, Ordering::Release);
        // Read-back: the posted stores of the close are complete once this returns.
        let _ = w.load(Ordering::Acquire);
        self.dev.closes[core as usize].fetch_add(1, Ordering::SeqCst);
    }
}

impl AicpuAgent for LoomAicpu {
    /// The models' devices have at most two clusters.
    type MaxClusters = pto_hal::typenum::U2;
    fn resolve_program<F: Copy + 'static>(&self, _handle: u64) -> Option<F> {
        None
    }
    fn run_program(&self, body: &mut dyn FnMut()) -> Result<(), pto_hal::KernelFault> {
        body();
        Ok(())
    }
}

impl CoreRegisters for LoomCore {
    fn read_dmb(&self) -> u32 {
        self.dev.dmb[self.phys as usize].load(self.dev.reg_load())
    }
    fn write_cond(&self, value: u32) {
        self.dev.cond[self.phys as usize].store(value, self.dev.reg_store());
    }
}

/// The one kernel the loom device knows, at binary address [`KERNEL_BIN`]: with a scalar
/// argument, it stores its task id (as a `u64`) at the GM address the scalar names — the
/// kernel's "output", which must be visible to the AICPU once it sees the task's FIN.
fn record_kernel(ctx: &mut dyn KernelContext) {
    if ctx.scalar_count() > 0 {
        let at = GmAddr(ctx.scalar_arg(0));
        ctx.gm().write_u64(at, u64::from(ctx.task_id()));
    }
}

/// Binary address of the loom device's kernel.
pub const KERNEL_BIN: u64 = 0xB1B0;

impl AicoreAgent for LoomCore {
    fn resolve_kernel(&self, bin: u64) -> Option<Kernel> {
        (bin == KERNEL_BIN).then_some(Kernel::Rust(record_kernel as KernelFn))
    }
    fn run_kernel(&self, kernel: Kernel, ctx: &mut dyn KernelContext) -> Result<(), KernelFault> {
        match kernel {
            Kernel::Rust(f) => f(ctx),
            Kernel::Native { .. } => return Err(KernelFault::new("the loom device runs no native kernels")),
        }
        Ok(())
    }
    fn as_gm(&self) -> &dyn GmMemory {
        self
    }
}

/// Spin (bounded by loom) until `cond` holds.
pub fn spin_until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        loom::thread::yield_now();
    }
}
