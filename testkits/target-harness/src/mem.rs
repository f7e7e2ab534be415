//! Memory standing in for the device, and instrumentation, for the a2a3 and a5 agent tests.
//!
//! GM is a heap buffer, 64-byte aligned; register windows are heap buffers too, one per core.
//! Under qemu there is no device memory: the buffers stand in for it. Two test threads that
//! hand a value over through a "register" buffer use volatile 32-bit accesses on ordinary
//! memory — outside Rust's memory model exactly as MMIO is, and single-copy atomic on aarch64.

use parking_lot::Mutex;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::sync::atomic::{AtomicU64, Ordering};

use pto_hal::GmAddr;

use pto_aarch64::{MmioOp, Observer};

/// A zeroed heap buffer standing in for device memory.
pub struct Arena {
    ptr: *mut u8,
    layout: Layout,
}

impl Arena {
    /// `len` zeroed bytes aligned to `align`.
    pub fn new(len: usize, align: usize) -> Arena {
        let layout = Layout::from_size_align(len, align).expect("arena layout");
        assert!(len > 0);
        // SAFETY: the layout is non-zero-sized (asserted above).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "arena allocation failed");
        Arena { ptr, layout }
    }
    /// Its first byte as a device address.
    pub fn addr(&self) -> GmAddr {
        GmAddr(self.ptr as u64)
    }
    /// Its length.
    pub fn len(&self) -> u64 {
        self.layout.size() as u64
    }
    /// Always `false`: an arena is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
    /// The 32-bit word at byte `off`, read directly (volatile).
    pub fn word32(&self, off: usize) -> u32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.layout.size());
        // SAFETY: in bounds and aligned (checked); the arena outlives the read.
        unsafe { std::ptr::read_volatile(self.ptr.add(off) as *const u32) }
    }
}

// SAFETY: an arena is an owned heap buffer; it is reached through raw pointers and atomics /
// volatile accesses only (never through references), so sharing or sending the owner across
// threads adds no aliasing beyond what those accesses already handle.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Register windows: one zeroed buffer per core, and the table of their bases.
pub struct Windows {
    /// The windows, by physical core id.
    pub arenas: Vec<Arena>,
    /// Their bases (0 for a core without a window), the table an AICPU agent is built over.
    pub bases: Vec<u64>,
}

impl Windows {
    /// `cores` windows of `bytes` each, page aligned; core `hole` (if any) has no window.
    pub fn new(cores: usize, bytes: u32, hole: Option<usize>) -> Windows {
        let arenas: Vec<Arena> = (0..cores).map(|_| Arena::new(bytes as usize, 4096)).collect();
        let bases = arenas.iter().enumerate().map(|(i, a)| if Some(i) == hole { 0 } else { a.addr().0 }).collect();
        Windows { arenas, bases }
    }
}

/// An observer that counts `GmAtomic` stores and records every MMIO access.
#[derive(Default)]
pub struct Recorder {
    /// `GmAtomic` stores so far.
    pub stores: AtomicU64,
    /// MMIO accesses so far, in order.
    pub mmio: Mutex<Vec<MmioOp>>,
}

impl Recorder {
    /// `GmAtomic` stores so far.
    pub fn stores(&self) -> u64 {
        self.stores.load(Ordering::SeqCst)
    }
    /// The MMIO accesses so far (and forget them).
    pub fn take_mmio(&self) -> Vec<MmioOp> {
        std::mem::take(&mut *self.mmio.lock())
    }
}

impl Observer for Recorder {
    fn gm_store(&self, _addr: GmAddr) {
        self.stores.fetch_add(1, Ordering::SeqCst);
    }
    fn mmio(&self, op: MmioOp) {
        self.mmio.lock().push(op);
    }
}

/// Compiles only when `$ty` does **not** implement the trait `$tr`: with two blanket impls of
/// one helper trait (one for every type, one for the implementors of `$tr`) the type argument
/// of the call is inferred only when the second does not apply. Used to prove that an AICPU
/// agent has no AICore cache operation.
#[macro_export]
macro_rules! assert_not_impl {
    ($ty:ty, $tr:path) => {{
        trait AmbiguousIfImpl<A> {
            fn some_item() {}
        }
        impl<T: ?Sized> AmbiguousIfImpl<()> for T {}
        #[allow(dead_code)]
        struct Invalid;
        impl<T: ?Sized + $tr> AmbiguousIfImpl<Invalid> for T {}
        let _ = <$ty as AmbiguousIfImpl<_>>::some_item;
    }};
}

/// Write.
pub fn w(core: u32, offset: u32, value: u32) -> MmioOp {
    MmioOp::Write { core, offset, value }
}

/// Read.
pub fn r(core: u32, offset: u32, value: u32) -> MmioOp {
    MmioOp::Read { core, offset, value }
}

/// Rounds for the two-thread hand-off tests (each round is a full publish / acknowledge trip).
pub const HANDOFF_ROUNDS: u32 = 20_000;

/// The two-thread hand-off through core `core`'s DMB (register) or, with `flag`, through a GM
/// flag word; `base` is 1 KiB of GM for the payload and the acknowledgement. Shared by both
/// platform crates' tests; panics with the check's failure.
#[cfg(target_arch = "aarch64")]
pub fn handoff_pair<A>(p: &A, c: &A, base: GmAddr, core: u32, flag: bool, what: &str)
where
    A: pto_hal::GmMemory
        + pto_hal::GmAtomic
        + pto_hal::Barriers
        + pto_hal::Registers
        + pto_hal::Clock
        + pto_hal::AicpuCache
        + Sync,
{
    let h = pto_conformance::handoff::Handoff {
        data: base,
        ack: base.offset(512),
        rounds: HANDOFF_ROUNDS,
        timeout_us: 10_000_000,
    };
    let start = std::time::Instant::now();
    pto_conformance::handoff::run_pair(p, c, &h, core, flag.then(|| base.offset(1024)))
        .unwrap_or_else(|f| panic!("{f}"));
    println!("{what} hand-off: {} rounds in {:?}", h.rounds, start.elapsed());
}
