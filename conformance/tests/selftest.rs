//! The suite checked against itself: a correct in-memory agent passes every check, and
//! deliberately broken agents ("mutants") are caught by the check meant to catch them — so a
//! pass on a real platform means something.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::ThreadId;
use std::time::Instant;

use pto_conformance::handoff::{self, Handoff};
use pto_conformance::{Check, Failure, FailureRecord, Report, Status, StdHostClock, Target, Tier};
use pto_hal::{
    AicoreCache, AicpuCache, Barriers, Clock, CoreRegisters, Events, GmAddr, GmAtomic, GmMemory, HostCoherent, Reg,
    Registers, Ticks,
};

const BASE: u64 = 0x10_0000;
const WORDS: usize = 4096;

/// What a mutant gets wrong.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Bugs {
    /// fetch_or / fetch_and as native RMWs that always store.
    rmw_always_stores: bool,
    /// compare_exchange returns `expected` even when it fails.
    cas_returns_expected: bool,
    /// store_direct_u32 stores a whole 64-bit word (zeroing the other half).
    u32_store_clobbers: bool,
    /// query_u32_pair returns (high, low).
    pair_swapped: bool,
    /// `wmb` does not drain the store buffer.
    wmb_noop: bool,
    /// The clock runs at twice the frequency it reports.
    clock_double: bool,
    /// Cache maintenance (both tiers) does not write buffered stores back.
    maintenance_noop: bool,
}

/// An agent over an in-memory GM with a per-thread store buffer: a thread's plain stores wait
/// in it until that thread's `wmb` or `full` drains them (a weakly ordered machine in
/// miniature); atomics and register writes go straight to memory.
struct Mock {
    gm: Box<[AtomicU64]>,
    pending: Mutex<Vec<(ThreadId, u64, Vec<u8>)>>,
    dmb: [AtomicU32; 4],
    stores: AtomicU64,
    bugs: Bugs,
    origin: Instant,
}

impl Mock {
    fn new(bugs: Bugs) -> Mock {
        Mock {
            gm: (0..WORDS).map(|_| AtomicU64::new(0)).collect(),
            pending: Mutex::new(Vec::new()),
            dmb: Default::default(),
            stores: AtomicU64::new(0),
            bugs,
            origin: Instant::now(),
        }
    }
    fn w(&self, addr: GmAddr) -> &AtomicU64 {
        assert!(addr.0.is_multiple_of(8));
        &self.gm[((addr.0 - BASE) / 8) as usize]
    }
    /// Cache maintenance: writes this thread's buffered stores back, unless the mutant skips it.
    fn maintain(&self) {
        if !self.bugs.maintenance_noop {
            self.drain()
        }
    }
    fn drain(&self) {
        let me = std::thread::current().id();
        let mut p = self.pending.lock().unwrap();
        for (_, addr, bytes) in p.iter().filter(|e| e.0 == me) {
            self.store_bytes(*addr, bytes);
        }
        p.retain(|e| e.0 != me);
    }
    fn store_bytes(&self, addr: u64, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            let a = addr + i as u64;
            let word = self.w(GmAddr(a & !7));
            let shift = (a & 7) * 8;
            let _ = word
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| Some(v & !(0xFF << shift) | (b as u64) << shift));
        }
    }
    fn scratch(&self) -> GmAddr {
        GmAddr(BASE)
    }
}

impl GmAtomic for Mock {
    fn query(&self, addr: GmAddr) -> u64 {
        self.w(addr).load(Ordering::SeqCst)
    }
    fn store_direct(&self, addr: GmAddr, value: u64) {
        self.stores.fetch_add(1, Ordering::SeqCst);
        self.w(addr).store(value, Ordering::SeqCst)
    }
    fn store_direct_u32(&self, addr: GmAddr, value: u32) {
        self.stores.fetch_add(1, Ordering::SeqCst);
        let word = self.w(GmAddr(addr.0 & !7));
        if self.bugs.u32_store_clobbers {
            word.store((value as u64) << ((addr.0 & 4) * 8), Ordering::SeqCst);
            return;
        }
        let shift = (addr.0 & 4) * 8;
        let _ = word.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
            Some(v & !(0xFFFF_FFFF << shift) | (value as u64) << shift)
        });
    }
    fn swap(&self, addr: GmAddr, value: u64) -> u64 {
        self.stores.fetch_add(1, Ordering::SeqCst);
        self.w(addr).swap(value, Ordering::SeqCst)
    }
    fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
        self.stores.fetch_add(1, Ordering::SeqCst);
        self.w(addr).fetch_add(value, Ordering::SeqCst)
    }
    fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
        match self.w(addr).compare_exchange(expected, desired, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) => {
                self.stores.fetch_add(1, Ordering::SeqCst);
                v
            }
            Err(v) if self.bugs.cas_returns_expected => {
                let _ = v;
                expected
            }
            Err(v) => v,
        }
    }
    fn query_u32_pair(&self, addr: GmAddr) -> (u32, u32) {
        let v = self.query(addr);
        if self.bugs.pair_swapped { ((v >> 32) as u32, v as u32) } else { (v as u32, (v >> 32) as u32) }
    }
    fn fetch_or(&self, addr: GmAddr, bits: u64) -> u64 {
        if self.bugs.rmw_always_stores {
            self.stores.fetch_add(1, Ordering::SeqCst);
            return self.w(addr).fetch_or(bits, Ordering::SeqCst);
        }
        let mut cur = self.query(addr);
        loop {
            if cur & bits == bits {
                return cur;
            }
            let seen = self.compare_exchange(addr, cur, cur | bits);
            if seen == cur {
                return cur;
            }
            cur = seen;
        }
    }
    fn fetch_and(&self, addr: GmAddr, mask: u64) -> u64 {
        if self.bugs.rmw_always_stores {
            self.stores.fetch_add(1, Ordering::SeqCst);
            return self.w(addr).fetch_and(mask, Ordering::SeqCst);
        }
        let mut cur = self.query(addr);
        loop {
            if cur & mask == cur {
                return cur;
            }
            let seen = self.compare_exchange(addr, cur, cur & mask);
            if seen == cur {
                return cur;
            }
            cur = seen;
        }
    }
}

impl GmMemory for Mock {
    fn read(&self, addr: GmAddr, dst: &mut [u8]) {
        // An agent sees its own buffered stores (store-to-load forwarding).
        for (i, d) in dst.iter_mut().enumerate() {
            let a = addr.0 + i as u64;
            *d = (self.w(GmAddr(a & !7)).load(Ordering::SeqCst) >> ((a & 7) * 8)) as u8;
        }
        let me = std::thread::current().id();
        for (_, pa, bytes) in self.pending.lock().unwrap().iter().filter(|e| e.0 == me) {
            for (i, &b) in bytes.iter().enumerate() {
                let a = pa + i as u64;
                if a >= addr.0 && a < addr.0 + dst.len() as u64 {
                    dst[(a - addr.0) as usize] = b;
                }
            }
        }
    }
    fn write(&self, addr: GmAddr, src: &[u8]) {
        self.pending.lock().unwrap().push((std::thread::current().id(), addr.0, src.to_vec()));
    }
}

// The mock plays both tiers, so it has both tiers' maintenance.
impl AicpuCache for Mock {
    type Contract = HostCoherent;
    fn invalidate_range(&self, _addr: GmAddr, _len: u64) {
        self.maintain()
    }
    fn flush_range(&self, _addr: GmAddr, _len: u64) {
        self.maintain()
    }
}

impl AicoreCache for Mock {
    type Contract = HostCoherent;
    fn writeback_line(&self, _addr: GmAddr) {
        self.maintain()
    }
    fn invalidate_line(&self, _addr: GmAddr) {
        self.maintain()
    }
    fn invalidate_all(&self) {
        self.maintain()
    }
    fn cache_barrier(&self) {}
}

impl Barriers for Mock {
    fn rmb(&self) {}
    fn wmb(&self) {
        if !self.bugs.wmb_noop {
            self.drain()
        }
    }
    fn store_store(&self) {}
    fn full(&self) {
        self.drain()
    }
    fn store_barrier(&self) {
        self.drain()
    }
}

impl Clock for Mock {
    fn now_ticks(&self) -> Ticks {
        let ns = self.origin.elapsed().as_nanos() as u64;
        if self.bugs.clock_double { ns / 500 } else { ns / 1000 }
    }
    fn freq_hz(&self) -> u64 {
        1_000_000
    }
}

impl Events for Mock {
    fn wait_for_event(&self, _deadline: Ticks) {
        std::hint::spin_loop()
    }
    fn send_event(&self) {}
    fn wait_for_word(&self, _addr: GmAddr, _seen: u64, _deadline: Ticks) {
        std::hint::spin_loop()
    }
}

impl Registers for Mock {
    fn read_reg(&self, core: u32, reg: Reg) -> u32 {
        assert_eq!(reg, Reg::Dmb);
        self.dmb[core as usize].load(Ordering::SeqCst)
    }
    fn write_reg(&self, core: u32, reg: Reg, value: u32) {
        assert_eq!(reg, Reg::Dmb);
        self.dmb[core as usize].store(value, Ordering::SeqCst)
    }
    fn open_window(&self, core: u32, idle: u32) {
        self.write_reg(core, Reg::Dmb, idle)
    }
    fn close_window(&self, core: u32, idle: u32) {
        self.write_reg(core, Reg::Dmb, idle)
    }
}

impl CoreRegisters for Mock {
    fn read_dmb(&self) -> u32 {
        self.dmb[0].load(Ordering::SeqCst)
    }
    fn write_cond(&self, _value: u32) {}
}

fn target<'a>(m: &'a Mock, host: &'a StdHostClock, writes: &'a dyn Fn() -> u64) -> Target<'a> {
    let mut t = Target::new(m.scratch());
    t.registers = Some((m as &dyn Registers, 1));
    t.core_registers = Some(m as &dyn CoreRegisters);
    t.writes = Some(writes);
    t.host_clock = Some(host);
    t.expected_hz = Some(1_000_000);
    t
}

fn run(bugs: Bugs, tier: Tier) -> Result<Report, Failure> {
    let m = Mock::new(bugs);
    let host = StdHostClock::new();
    let writes = || m.stores.load(Ordering::SeqCst);
    let t = target(&m, &host, &writes);
    match tier {
        Tier::Aicpu => pto_conformance::run_aicpu(&m, &t),
        Tier::Aicore => pto_conformance::run_aicore(&m, &t),
    }
}

#[test]
fn a_correct_agent_passes_everything_on_both_tiers() {
    for tier in [Tier::Aicpu, Tier::Aicore] {
        let r = run(Bugs::default(), tier).unwrap_or_else(|f| panic!("{f}"));
        println!("{tier:?}:\n{r}");
        assert_eq!(r.status(Check::GmAtomic), Status::Passed);
        assert_eq!(r.status(Check::RmwNoIdleWrites), Status::Passed);
        assert_eq!(r.status(Check::ClockRate), Status::Passed);
        assert_eq!(r.status(Check::Registers), Status::Passed);
        // RangeLines (the mock cannot report lines) and the other tier's cache checks.
        let want: &[Check] = match tier {
            Tier::Aicpu => &[Check::GmCoherenceAicore, Check::CacheLines, Check::CacheInvalidateAll, Check::RangeLines],
            Tier::Aicore => &[Check::GmCoherenceAicpu, Check::CacheRanges, Check::RangeLines],
        };
        assert_eq!(r.skipped().map(|(c, _)| c).collect::<Vec<_>>(), want, "{tier:?}");
        let ran: &[Check] = match tier {
            Tier::Aicpu => &[Check::GmCoherenceAicpu, Check::CacheRanges],
            Tier::Aicore => &[Check::GmCoherenceAicore, Check::CacheLines, Check::CacheInvalidateAll],
        };
        for &c in ran {
            assert_eq!(r.status(c), Status::Passed, "{tier:?}: {c}");
        }
    }
}

/// Every mutant is caught by its check on both tiers (the checks they break are tier-free).
fn caught(bugs: Bugs, check: Check, what: &str) {
    for tier in [Tier::Aicpu, Tier::Aicore] {
        let f = run(bugs, tier).expect_err("the mutant must fail");
        assert_eq!(f.check, check, "{tier:?}: {f}");
        assert!(f.what.contains(what), "{tier:?}: {f}");
    }
}

#[test]
fn mutants_are_caught_by_their_check() {
    caught(Bugs { rmw_always_stores: true, ..Bugs::default() }, Check::RmwNoIdleWrites, "already set does not store");
    caught(Bugs { cas_returns_expected: true, ..Bugs::default() }, Check::GmAtomic, "failed compare_exchange returns");
    caught(Bugs { u32_store_clobbers: true, ..Bugs::default() }, Check::GmAtomic, "leaves the high half");
    caught(Bugs { pair_swapped: true, ..Bugs::default() }, Check::GmAtomic, "low half");
    caught(Bugs { clock_double: true, ..Bugs::default() }, Check::ClockRate, "runs fast");
}

#[test]
fn a_maintenance_mutant_is_caught_by_its_tiers_coherence_check() {
    let bugs = Bugs { maintenance_noop: true, ..Bugs::default() };
    for (tier, check) in [(Tier::Aicpu, Check::GmCoherenceAicpu), (Tier::Aicore, Check::GmCoherenceAicore)] {
        let f = run(bugs, tier).expect_err("the mutant must fail");
        assert_eq!(f.check, check, "{tier:?}: {f}");
        assert!(f.what.contains("device-direct load sees a published plain store"), "{tier:?}: {f}");
    }
}

#[test]
fn hal_default_rmw_check_does_not_see_an_override() {
    // The counting wrapper checks the HAL's algorithm, not the platform's override: a mutant
    // whose fetch_or always stores passes it — which is why `gm_atomic_writes` needs the
    // platform's own counter.
    let m = Mock::new(Bugs { rmw_always_stores: true, ..Bugs::default() });
    pto_conformance::hal_default_rmw_writes(&m, m.scratch()).unwrap();
    assert!(pto_conformance::gm_atomic_writes(&m, m.scratch(), &|| m.stores.load(Ordering::SeqCst)).is_err());
}

fn handoff(bugs: Bugs, via_register: bool) -> Result<(), Failure> {
    let m = Mock::new(bugs);
    let h = Handoff { data: GmAddr(BASE + 8192), ack: GmAddr(BASE + 8192 + 512), rounds: 200, timeout_us: 5_000_000 };
    let flag = (!via_register).then_some(GmAddr(BASE + 8192 + 1024));
    handoff::run_pair(&m, &m, &h, 2, flag)
}

#[test]
fn handoffs_pass_with_barriers_and_catch_a_missing_wmb() {
    handoff(Bugs::default(), true).unwrap();
    handoff(Bugs::default(), false).unwrap();
    for via_register in [true, false] {
        let f = handoff(Bugs { wmb_noop: true, ..Bugs::default() }, via_register).expect_err("stale payload");
        assert!(f.what.contains("payload word read after signal"), "{f}");
    }
}

#[test]
fn failures_survive_encoding() {
    let f = Failure::new(Check::HandoffRegister, "core 0 published its physical id", 1, 0);
    let rec = FailureRecord::decode(&f.encode()).unwrap();
    assert_eq!(rec.check, Check::HandoffRegister);
    assert_eq!(rec.what(), "core 0 published its physical id");
    assert_eq!((rec.expected, rec.observed), (1, 0));
    assert_eq!(rec.to_string(), f.to_string());
    let long = Failure::new(Check::Clock, "é".repeat(80).leak(), u64::MAX, 7);
    let rec = FailureRecord::decode(&long.encode()).unwrap();
    assert_eq!(rec.what().chars().count(), 52, "truncated on a character boundary");
    assert!(FailureRecord::decode(&[0xFF; Failure::ENCODED_BYTES]).is_none());
}

#[test]
fn counting_cache_sees_exactly_line_span() {
    let m = Mock::new(Bugs::default());
    let c = pto_conformance::CountingCache::new(&m);
    c.publish_lines(GmAddr(BASE + 3), 130);
    let k = c.counts();
    assert_eq!((k.writebacks, k.barriers), (3, 1));
    assert_eq!(c.first_line(), Some(GmAddr(BASE)));
    assert!(c.contiguous());
    c.reset();
    c.writeback_line(GmAddr(BASE));
    c.writeback_line(GmAddr(BASE + 128));
    assert!(!c.contiguous(), "a skipped line is noticed");
    // The AICPU tier's range operations are counted as ranges, never as line ops.
    c.reset();
    c.flush_range(GmAddr(BASE), 100);
    c.invalidate_range(GmAddr(BASE + 64), 100);
    assert_eq!(c.counts(), pto_conformance::CacheCounts { ranges: 2, ..Default::default() });
    assert_eq!(c.first_line(), None);
}
