//! GM atomics and plain GM copies.

use core::sync::atomic::{AtomicU64, Ordering};

use pto_hal::{GmAddr, GmAtomic, GmMemory, GmMemoryExt};

use crate::{Check, Failure, Outcome};

/// `Ok` when `observed == expected`, else a failure of `check` at `what`.
#[inline]
pub(crate) fn expect(check: Check, what: &'static str, expected: u64, observed: u64) -> Outcome {
    if expected == observed { Ok(()) } else { Err(Failure::new(check, what, expected, observed)) }
}

/// Values returned and left by every [`GmAtomic`] operation.
///
/// Uses the first line of `scratch` (64 bytes, 8-aligned; the suite's scratch is 64-aligned).
/// Single agent, no concurrency: each operation's result is fully determined.
pub fn gm_atomic<A: GmAtomic + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    const C: Check = Check::GmAtomic;
    let w = scratch;
    let next = scratch.offset(8);
    let sentinel = 0x5E57_1A7E_0DD5_0B0Eu64;
    a.store_direct(next, sentinel);

    a.store_direct(w, 0x1111_2222_3333_4444);
    expect(C, "query after store_direct", 0x1111_2222_3333_4444, a.query(w))?;

    expect(C, "swap returns the previous value", 0x1111_2222_3333_4444, a.swap(w, 0xAAAA_0000_BBBB_0001))?;
    expect(C, "value after swap", 0xAAAA_0000_BBBB_0001, a.query(w))?;

    expect(C, "fetch_add returns the previous value", 0xAAAA_0000_BBBB_0001, a.fetch_add(w, 5))?;
    expect(C, "value after fetch_add", 0xAAAA_0000_BBBB_0006, a.query(w))?;
    a.store_direct(w, u64::MAX);
    expect(C, "fetch_add returns the previous value (wrapping)", u64::MAX, a.fetch_add(w, 2))?;
    expect(C, "fetch_add wraps", 1, a.query(w))?;

    a.store_direct(w, 7);
    expect(C, "successful compare_exchange returns the observed (= expected) value", 7, a.compare_exchange(w, 7, 9))?;
    expect(C, "successful compare_exchange stores desired", 9, a.query(w))?;
    expect(C, "failed compare_exchange returns the observed value", 9, a.compare_exchange(w, 7, 11))?;
    expect(C, "failed compare_exchange leaves the word", 9, a.query(w))?;
    a.store_direct(w, 1 << 63);
    expect(C, "compare_exchange on the top bit", 1 << 63, a.compare_exchange(w, 1 << 63, 0))?;
    expect(C, "compare_exchange stores zero", 0, a.query(w))?;

    a.store_direct(w, 0b1010);
    expect(C, "fetch_or returns the previous value", 0b1010, a.fetch_or(w, 0b0101))?;
    expect(C, "value after fetch_or", 0b1111, a.query(w))?;
    expect(C, "fetch_or of bits already set returns the value", 0b1111, a.fetch_or(w, 0b0011))?;
    expect(C, "fetch_or of bits already set leaves the value", 0b1111, a.query(w))?;
    expect(C, "fetch_and returns the previous value", 0b1111, a.fetch_and(w, 0b0110))?;
    expect(C, "value after fetch_and", 0b0110, a.query(w))?;
    expect(C, "fetch_and that clears nothing returns the value", 0b0110, a.fetch_and(w, !0))?;
    expect(C, "fetch_and that clears nothing leaves the value", 0b0110, a.query(w))?;

    a.store_direct(w, 0xAAAA_BBBB_CCCC_DDDD);
    let (lo, hi) = a.query_u32_pair(w);
    expect(C, "query_u32_pair low half is the word at addr", 0xCCCC_DDDD, lo as u64)?;
    expect(C, "query_u32_pair high half is the word at addr + 4", 0xAAAA_BBBB, hi as u64)?;

    a.store_direct_u32(w, 0x1234_5678);
    expect(C, "store_direct_u32 (low) leaves the high half", 0xAAAA_BBBB_1234_5678, a.query(w))?;
    a.store_direct_u32(w.offset(4), 0x9ABC_DEF0);
    expect(C, "store_direct_u32 (high) leaves the low half", 0x9ABC_DEF0_1234_5678, a.query(w))?;
    let (lo, hi) = a.query_u32_pair(w);
    expect(C, "query_u32_pair after 32-bit stores (low)", 0x1234_5678, lo as u64)?;
    expect(C, "query_u32_pair after 32-bit stores (high)", 0x9ABC_DEF0, hi as u64)?;

    expect(C, "the neighbouring word is untouched by every operation", sentinel, a.query(next))?;
    Ok(())
}

/// The platform's fetch_or / fetch_and / failing compare-exchange do not store.
///
/// `writes` returns a running count of the stores the platform under test performed to GM
/// words through [`GmAtomic`] (every store, swap, add and successful compare-exchange). Positive
/// controls — operations that must store exactly once when uncontended — come first, so a dead
/// counter fails the check instead of passing it vacuously. Uses the first line of `scratch`.
pub fn gm_atomic_writes<A: GmAtomic + ?Sized>(a: &A, scratch: GmAddr, writes: &dyn Fn() -> u64) -> Outcome {
    writes_check(Check::RmwNoIdleWrites, a, scratch, writes)
}

fn writes_check<A: GmAtomic + ?Sized>(c: Check, a: &A, scratch: GmAddr, writes: &dyn Fn() -> u64) -> Outcome {
    let w = scratch;
    let stores = |what: &'static str, n: u64, op: &dyn Fn()| -> Outcome {
        let before = writes();
        op();
        expect(c, what, n, writes().wrapping_sub(before))
    };
    // Positive controls: the counter sees the platform's stores.
    stores("store_direct stores once", 1, &|| a.store_direct(w, 0b1100))?;
    stores("swap stores once", 1, &|| {
        a.swap(w, 0b1100);
    })?;
    stores("fetch_add stores once", 1, &|| {
        a.fetch_add(w, 0);
    })?;
    stores("successful compare_exchange stores once", 1, &|| {
        a.compare_exchange(w, 0b1100, 0b1100);
    })?;
    stores("fetch_or that sets a bit stores once (uncontended)", 1, &|| {
        a.fetch_or(w, 0b0001);
    })?;
    stores("fetch_and that clears a bit stores once (uncontended)", 1, &|| {
        a.fetch_and(w, !0b0001);
    })?;
    expect(c, "value after the controls", 0b1100, a.query(w))?;
    // The property: no store when nothing changes.
    stores("fetch_or of bits already set does not store", 0, &|| {
        a.fetch_or(w, 0b0100);
    })?;
    stores("fetch_or of no bits does not store", 0, &|| {
        a.fetch_or(w, 0);
    })?;
    stores("fetch_and with an all-ones mask does not store", 0, &|| {
        a.fetch_and(w, !0);
    })?;
    stores("fetch_and that clears no set bit does not store", 0, &|| {
        a.fetch_and(w, 0b1100 | 0xF0);
    })?;
    stores("failed compare_exchange does not store", 0, &|| {
        a.compare_exchange(w, 0b0011, 0);
    })?;
    stores("query and query_u32_pair do not store", 0, &|| {
        a.query(w);
        a.query_u32_pair(w);
    })?;
    expect(c, "value after the idle operations", 0b1100, a.query(w))
}

/// A [`GmAtomic`] wrapper that forwards the primitive operations to `A` and counts the stores
/// it issues, while fetch_or / fetch_and (and the `u32` pair load) are the HAL's **default**
/// algorithms running over `A`'s primitives.
///
/// It checks the HAL's CAS-loop algorithm, not an override the platform may have: a platform
/// that overrides fetch_or / fetch_and must be checked with [`gm_atomic_writes`] and its own
/// store counter.
#[derive(Debug)]
pub struct CountingAtomic<'a, A: ?Sized> {
    inner: &'a A,
    stores: AtomicU64,
}

impl<'a, A: GmAtomic + ?Sized> CountingAtomic<'a, A> {
    /// Wrap `inner`.
    pub fn new(inner: &'a A) -> Self {
        CountingAtomic { inner, stores: AtomicU64::new(0) }
    }
    /// Stores issued so far.
    pub fn stores(&self) -> u64 {
        self.stores.load(Ordering::Relaxed)
    }
    fn count(&self) {
        self.stores.fetch_add(1, Ordering::Relaxed);
    }
}

impl<A: GmAtomic + ?Sized> GmAtomic for CountingAtomic<'_, A> {
    fn query(&self, addr: GmAddr) -> u64 {
        self.inner.query(addr)
    }
    fn store_direct(&self, addr: GmAddr, value: u64) {
        self.count();
        self.inner.store_direct(addr, value)
    }
    fn store_direct_u32(&self, addr: GmAddr, value: u32) {
        self.count();
        self.inner.store_direct_u32(addr, value)
    }
    fn swap(&self, addr: GmAddr, value: u64) -> u64 {
        self.count();
        self.inner.swap(addr, value)
    }
    fn fetch_add(&self, addr: GmAddr, value: u64) -> u64 {
        self.count();
        self.inner.fetch_add(addr, value)
    }
    fn compare_exchange(&self, addr: GmAddr, expected: u64, desired: u64) -> u64 {
        let seen = self.inner.compare_exchange(addr, expected, desired);
        if seen == expected {
            self.count();
        }
        seen
    }
}

/// The HAL's default fetch_or / fetch_and do not store when nothing changes, checked over the
/// platform's primitives through [`CountingAtomic`]. Uses the first line of `scratch`.
pub fn hal_default_rmw_writes<A: GmAtomic + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    let c = CountingAtomic::new(a);
    writes_check(Check::HalDefaultRmwWrites, &c, scratch, &|| c.stores())
}

/// Plain copies round-trip, unaligned copies keep the neighbouring bytes, empty copies are
/// allowed. Uses bytes `64..448` of `scratch`. Single agent: no maintenance is needed for an
/// agent to read its own plain stores.
pub fn gm_memory<M: GmMemory + ?Sized>(m: &M, scratch: GmAddr) -> Outcome {
    const C: Check = Check::GmMemory;
    let base = scratch.offset(64);
    let mut pattern = [0u8; 384];
    for (i, b) in pattern.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7).wrapping_add(3);
    }
    m.write(base, &pattern);
    let mut back = [0u8; 384];
    m.read(base, &mut back);
    if let Some(i) = (0..back.len()).find(|&i| back[i] != pattern[i]) {
        return Err(Failure::new(
            C,
            "aligned 384-byte copy round-trips (byte index in expected)",
            i as u64,
            back[i] as u64,
        ));
    }
    // Unaligned write of 13 bytes at +3: bytes 0..3 and 16.. keep the pattern.
    let patch = [0xE1u8; 13];
    m.write(base.offset(3), &patch);
    let mut b = [0u8; 24];
    m.read(base, &mut b);
    for (i, &got) in b.iter().enumerate() {
        let want = if (3..16).contains(&i) { 0xE1 } else { pattern[i] };
        expect(C, "unaligned write keeps neighbouring bytes (byte value)", want as u64, got as u64)?;
    }
    // Unaligned read across a line boundary.
    let mut cross = [0u8; 10];
    m.read(base.offset(59), &mut cross);
    for (i, &got) in cross.iter().enumerate() {
        expect(C, "unaligned read across a line boundary", pattern[59 + i] as u64, got as u64)?;
    }
    // Typed helpers and empty copies.
    m.write_u64(base.offset(128), 0x0102_0304_0506_0708);
    expect(C, "write_u64 / read_u64 round-trip", 0x0102_0304_0506_0708, m.read_u64(base.offset(128)))?;
    expect(C, "read_u32 of the low half (little-endian)", 0x0506_0708, m.read_u32(base.offset(128)) as u64)?;
    m.write(base, &[]);
    m.read(base, &mut []);
    expect(C, "empty copies change nothing", pattern[0] as u64, {
        let mut one = [0u8; 1];
        m.read(base, &mut one);
        one[0] as u64
    })
}
