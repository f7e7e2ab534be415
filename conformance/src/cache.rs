//! Cache maintenance: line rounding, data preservation, publication to device-direct accesses.

use core::cell::Cell;

use pto_hal::{AicoreCache, AicpuCache, GmAddr, GmAtomic, GmMemory, LINE_BYTES, line_span};

use crate::atomic::expect;
use crate::{Check, Failure, Outcome};

/// Ranges the cache checks maintain, as `(offset from a line-aligned base, length)`: empty,
/// inside one line, crossing one boundary, exactly one line, one byte either side of whole
/// lines, and a long unaligned run.
const RANGES: [(u64, u64); 9] = [(0, 0), (5, 0), (3, 1), (60, 8), (64, 64), (63, 66), (1, 190), (0, 256), (17, 300)];

/// The region the data-preservation checks use: bytes `512..1024` of the scratch.
const REGION: u64 = 512;
const REGION_BYTES: usize = 512;

fn fill<M: GmMemory + ?Sized>(m: &M, base: GmAddr, seed: u8) -> [u8; REGION_BYTES] {
    let mut p = [0u8; REGION_BYTES];
    for (i, b) in p.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(13).wrapping_add(seed);
    }
    m.write(base, &p);
    p
}

fn same<M: GmMemory + ?Sized>(c: Check, what: &'static str, m: &M, base: GmAddr, want: &[u8; REGION_BYTES]) -> Outcome {
    let mut got = [0u8; REGION_BYTES];
    m.read(base, &mut got);
    match (0..REGION_BYTES).find(|&i| got[i] != want[i]) {
        None => Ok(()),
        Some(i) => Err(Failure::new(c, what, i as u64, got[i] as u64)),
    }
}

/// AICPU range maintenance preserves the agent's own data on every range shape (empty,
/// unaligned, line-crossing, whole lines): `flush_range` and `invalidate_range` write back
/// before they drop, so nothing this agent stored is lost. Uses bytes `512..1024` of `scratch`.
///
/// On a failure, `expected` is the byte index and `observed` the byte read.
pub fn cache_ranges<A: GmMemory + AicpuCache + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    const C: Check = Check::CacheRanges;
    let base = scratch.offset(REGION);
    for (k, &(off, len)) in RANGES.iter().enumerate() {
        let want = fill(a, base, k as u8);
        a.flush_range(base.offset(off), len);
        same(C, "flush_range keeps the agent's data", a, base, &want)?;
        a.invalidate_range(base.offset(off), len);
        same(C, "invalidate_range (clean + invalidate) keeps the agent's data", a, base, &want)?;
    }
    Ok(())
}

/// What a [`CountingCache`] saw.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheCounts {
    /// `writeback_line` calls.
    pub writebacks: u64,
    /// `invalidate_line` calls.
    pub invalidates: u64,
    /// `cache_barrier` calls.
    pub barriers: u64,
    /// Range operations (`flush_range`, `invalidate_range`).
    pub ranges: u64,
    /// `invalidate_all` calls.
    pub all: u64,
}

/// A cache-maintenance wrapper that forwards every operation to the platform and records
/// the line ops issued: how many, and whether they were the consecutive lines of one span.
///
/// It implements each tier's trait its inner agent implements: [`AicpuCache`] (counting the
/// range operations) when `A: AicpuCache`, [`AicoreCache`] (counting line ops, barriers and
/// `invalidate_all`) when `A: AicoreCache`.
///
/// The HAL's [`AicoreCache`] composites (`publish_lines`, `observe_lines`, `publish_line`, `observe_line`) run
/// as the HAL's default algorithms over the wrapper, so [`cache_lines`] checks that they touch
/// exactly the lines of [`line_span`] — and, because each line op is forwarded, that the
/// platform's line ops execute on every one of those lines.
#[derive(Debug)]
pub struct CountingCache<'a, A: ?Sized> {
    inner: &'a A,
    counts: Cell<CacheCounts>,
    /// Next line expected in the current run of line ops, and whether the run stayed contiguous.
    next_line: Cell<Option<GmAddr>>,
    first_line: Cell<Option<GmAddr>>,
    contiguous: Cell<bool>,
}

impl<'a, A: ?Sized> CountingCache<'a, A> {
    /// Wrap `inner`.
    pub fn new(inner: &'a A) -> Self {
        CountingCache {
            inner,
            counts: Cell::new(CacheCounts::default()),
            next_line: Cell::new(None),
            first_line: Cell::new(None),
            contiguous: Cell::new(true),
        }
    }
    /// Counts so far.
    pub fn counts(&self) -> CacheCounts {
        self.counts.get()
    }
    /// First line of the run of line ops since the last [`CountingCache::reset`].
    pub fn first_line(&self) -> Option<GmAddr> {
        self.first_line.get()
    }
    /// Whether the line ops since the last reset were consecutive, ascending, line-aligned lines.
    pub fn contiguous(&self) -> bool {
        self.contiguous.get()
    }
    /// Forget everything seen.
    pub fn reset(&self) {
        self.counts.set(CacheCounts::default());
        self.next_line.set(None);
        self.first_line.set(None);
        self.contiguous.set(true);
    }
    fn line_op(&self, addr: GmAddr) {
        let line = addr.line();
        if self.first_line.get().is_none() {
            self.first_line.set(Some(line));
        } else if self.next_line.get() != Some(line) {
            self.contiguous.set(false);
        }
        self.next_line.set(Some(line.offset(LINE_BYTES)));
    }
    fn bump(&self, f: impl FnOnce(&mut CacheCounts)) {
        let mut c = self.counts.get();
        f(&mut c);
        self.counts.set(c);
    }
}

impl<A: AicpuCache + ?Sized> AicpuCache for CountingCache<'_, A> {
    type Contract = <A as AicpuCache>::Contract;
    fn invalidate_range(&self, addr: GmAddr, len: u64) {
        self.bump(|c| c.ranges += 1);
        self.inner.invalidate_range(addr, len)
    }
    fn flush_range(&self, addr: GmAddr, len: u64) {
        self.bump(|c| c.ranges += 1);
        self.inner.flush_range(addr, len)
    }
}

impl<A: AicoreCache + ?Sized> AicoreCache for CountingCache<'_, A> {
    type Contract = <A as AicoreCache>::Contract;
    fn writeback_line(&self, addr: GmAddr) {
        self.bump(|c| c.writebacks += 1);
        self.line_op(addr);
        self.inner.writeback_line(addr)
    }
    fn invalidate_line(&self, addr: GmAddr) {
        self.bump(|c| c.invalidates += 1);
        self.line_op(addr);
        self.inner.invalidate_line(addr)
    }
    fn invalidate_all(&self) {
        self.bump(|c| c.all += 1);
        self.inner.invalidate_all()
    }
    fn cache_barrier(&self) {
        self.bump(|c| c.barriers += 1);
        self.inner.cache_barrier()
    }
}

/// Line ops preserve the agent's data, and the composites touch exactly the lines of
/// [`line_span`] (each once, ascending) followed by exactly one barrier. Uses bytes `512..1024`
/// of `scratch`.
///
/// AICore tier: line maintenance is [`AicoreCache`]; an AICPU agent has none (it maintains by
/// range, see [`cache_ranges`]). `invalidate_all` is not called here (see
/// [`cache_invalidate_all`]).
pub fn cache_lines<A: GmMemory + AicoreCache + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    const C: Check = Check::CacheLines;
    let base = scratch.offset(REGION);
    let want = fill(a, base, 0x40);
    for off in [0u64, 1, 63, 64, 130] {
        a.writeback_line(base.offset(off));
        a.invalidate_line(base.offset(off));
        a.publish_line(base.offset(off));
        a.observe_line(base.offset(off));
        a.cache_barrier();
    }
    same(C, "single-line ops keep the agent's data", a, base, &want)?;

    let cc = CountingCache::new(a);
    for &(off, len) in RANGES.iter() {
        let addr = base.offset(off);
        let (first, n) = line_span(addr, len);
        for publish in [true, false] {
            cc.reset();
            if publish {
                cc.publish_lines(addr, len);
            } else {
                cc.observe_lines(addr, len);
            }
            let k = cc.counts();
            let ops = if publish { k.writebacks } else { k.invalidates };
            let other = if publish { k.invalidates } else { k.writebacks };
            expect(C, "composite issues one line op per line of line_span", n, ops)?;
            expect(C, "composite issues no line op of the other kind", 0, other)?;
            expect(C, "composite ends with exactly one barrier", 1, k.barriers)?;
            if n > 0 {
                expect(C, "composite starts at line_span's first line", first.0, cc.first_line().map_or(0, |l| l.0))?;
                expect(C, "composite lines are consecutive and ascending", 1, cc.contiguous() as u64)?;
            }
        }
    }
    same(C, "publish_lines / observe_lines keep the agent's data", a, base, &want)
}

/// Whole-cache maintenance (`invalidate_all`, an AICore operation) keeps the agent's data.
/// Uses bytes `512..1024` of `scratch`.
pub fn cache_invalidate_all<A: GmMemory + AicoreCache + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    let base = scratch.offset(REGION);
    let want = fill(a, base, 0x77);
    a.invalidate_all();
    a.cache_barrier();
    same(Check::CacheInvalidateAll, "invalidate_all writes back before it drops", a, base, &want)
}

/// A platform's report of the lines its range maintenance touches: `lines_of(addr, len, f)`
/// calls `f` with each line maintained for `[addr, addr + len)`, in order.
pub type LinesOf<'a> = dyn Fn(GmAddr, u64, &mut dyn FnMut(GmAddr)) + 'a;

/// The lines a range operation touches are exactly [`line_span`]'s.
///
/// `lines_of(addr, len, f)` must call `f` with every line the platform's range operations
/// (`invalidate_range` / `flush_range`) maintain for `[addr, addr + len)`, in the order it
/// maintains them — ideally the very iterator its maintenance loop runs. Addresses are formed
/// from `scratch` but not accessed. On a failure, `expected` / `observed` are line addresses or
/// counts as the message says.
pub fn range_lines(scratch: GmAddr, lines_of: &LinesOf<'_>) -> Outcome {
    const C: Check = Check::RangeLines;
    let base = scratch.offset(REGION);
    for &(off, len) in RANGES.iter() {
        let addr = base.offset(off);
        let (first, n) = line_span(addr, len);
        let mut i = 0u64;
        let mut bad: Option<Failure> = None;
        lines_of(addr, len, &mut |line| {
            if bad.is_some() {
                return;
            }
            let want = first.offset(i * LINE_BYTES);
            if i >= n {
                bad = Some(Failure::new(C, "a line beyond line_span was maintained (line index)", n, i + 1));
            } else if line != want {
                bad = Some(Failure::new(C, "maintained line differs from line_span's", want.0, line.0));
            }
            i += 1;
        });
        if let Some(f) = bad {
            return Err(f);
        }
        expect(C, "number of lines maintained equals line_span's count", n, i)?;
    }
    Ok(())
}

/// AICPU publication through range maintenance: plain stores published with `flush_range` are
/// seen by device-direct loads, and device-direct stores are seen by plain loads after
/// `invalidate_range`. Uses bytes `1024..1152` of `scratch`.
pub fn gm_coherence_aicpu<A: GmMemory + GmAtomic + AicpuCache + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    coherence(
        Check::GmCoherenceAicpu,
        a,
        scratch,
        |addr, len| a.flush_range(addr, len),
        |addr, len| a.invalidate_range(addr, len),
    )
}

/// AICore publication through the line composites: plain stores published with
/// `publish_lines` are seen by device-direct loads, and device-direct stores are seen by plain
/// loads after `observe_lines`. Uses bytes `1024..1152` of `scratch`.
pub fn gm_coherence_aicore<A: GmMemory + GmAtomic + AicoreCache + ?Sized>(a: &A, scratch: GmAddr) -> Outcome {
    coherence(
        Check::GmCoherenceAicore,
        a,
        scratch,
        |addr, len| a.publish_lines(addr, len),
        |addr, len| a.observe_lines(addr, len),
    )
}

fn coherence<A: GmMemory + GmAtomic + ?Sized>(
    c: Check,
    a: &A,
    scratch: GmAddr,
    publish: impl Fn(GmAddr, u64),
    observe: impl Fn(GmAddr, u64),
) -> Outcome {
    let base = scratch.offset(1024);
    for round in 1..=3u64 {
        let mut words = [0u8; 128];
        for (i, ch) in words.chunks_exact_mut(8).enumerate() {
            ch.copy_from_slice(&(round << 40 | 0xC0DE_0000 | i as u64).to_le_bytes());
        }
        a.write(base, &words);
        publish(base, 128);
        for i in 0..16u64 {
            expect(
                c,
                "device-direct load sees a published plain store",
                round << 40 | 0xC0DE_0000 | i,
                a.query(base.offset(8 * i)),
            )?;
        }
        for i in 0..16u64 {
            a.store_direct(base.offset(8 * i), round << 40 | 0xD1EC_0000 | i);
        }
        observe(base, 128);
        let mut back = [0u8; 128];
        a.read(base, &mut back);
        for (i, ch) in back.chunks_exact(8).enumerate() {
            let mut w = [0u8; 8];
            w.copy_from_slice(ch);
            expect(
                c,
                "plain load sees a device-direct store after observe",
                round << 40 | 0xD1EC_0000 | i as u64,
                u64::from_le_bytes(w),
            )?;
        }
    }
    Ok(())
}
