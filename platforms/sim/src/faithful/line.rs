//! The line model: what the faithful model records about one 64-byte line — an agent's copy of
//! it (`CLine`), the provenance of its bytes in memory (`LineMeta`), the AICPU cluster's dirty
//! lines (`Cluster`) — the maps keyed by line, and line arithmetic.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::gm::GM_BASE;

/// Agent id of nobody: the writer of a line's initial contents.
pub(super) const NONE: u16 = u16::MAX;
/// Bytes in a cache line.
pub(super) const LINE: u64 = 64;

/// Hashes a line address (a multiple of 64) with one multiply: the maps below are keyed by
/// nothing else, and SipHash dominated the model's cost.
#[derive(Default)]
pub(super) struct LineHasher(u64);

impl Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64 * 64);
    }
}

/// A map keyed by line address.
pub(super) type LineMap<V> = HashMap<u64, V, BuildHasherDefault<LineHasher>>;

/// A store: the agent that made it and that agent's clock at the time, in one word (agent in
/// bits 32..48, clock in bits 0..32), so that comparing two is one comparison.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Stamp(u64);

impl Stamp {
    /// Nobody's store: a line's initial contents.
    pub(super) const NOBODY: Stamp = Stamp::new(NONE, 0);

    pub(super) const fn new(agent: u16, clock: u32) -> Stamp {
        Stamp((agent as u64) << 32 | clock as u64)
    }
    /// The agent that made the store.
    pub(super) fn agent(self) -> u16 {
        (self.0 >> 32) as u16
    }
    /// The agent's clock when it made the store.
    pub(super) fn clock(self) -> u32 {
        self.0 as u32
    }
    /// `(agent, clock)`, as a violation reports it.
    pub(super) fn pair(self) -> (u16, u32) {
        (self.agent(), self.clock())
    }
}

/// One value per byte of a line, kept as a single value while every byte has the same one
/// (the common case: a line written whole by one store), as two values split at one byte while
/// the line is a prefix of one value and a suffix of another (a record or payload that fills
/// the start of its line, the rest left as it was), and as 64 values otherwise. Most lines
/// never need 64, so most records stay a few words long instead of hundreds of bytes, and
/// copying or comparing them is a step or two and allocates nothing.
#[derive(Clone, Debug)]
pub(super) enum PerByte<T: Copy + Eq> {
    /// Every byte has this value.
    Same(T),
    /// Bytes below `cut` have `lo`, the others `hi` (`0 < cut < 64`, `lo != hi`).
    Split { cut: u8, lo: T, hi: T },
    /// Byte `b` has value `b`.
    Each(Box<[T; 64]>),
}

impl<T: Copy + Eq> PerByte<T> {
    /// Byte `b`'s value.
    #[inline]
    pub(super) fn get(&self, b: usize) -> T {
        match self {
            PerByte::Same(v) => *v,
            PerByte::Split { cut, lo, hi } => {
                if b < *cut as usize {
                    *lo
                } else {
                    *hi
                }
            }
            PerByte::Each(a) => a[b],
        }
    }

    /// Two values split at `cut` (`0 < cut < 64`), or one when they are equal.
    #[inline]
    fn split(cut: usize, lo: T, hi: T) -> PerByte<T> {
        debug_assert!(0 < cut && cut < 64);
        if lo == hi { PerByte::Same(lo) } else { PerByte::Split { cut: cut as u8, lo, hi } }
    }

    /// The byte where a `Split` changes value.
    #[inline]
    fn cut(&self) -> Option<usize> {
        match self {
            PerByte::Split { cut, .. } => Some(*cut as usize),
            _ => None,
        }
    }

    /// Bytes `lo..hi` take value `v`.
    #[inline]
    pub(super) fn fill(&mut self, lo: usize, hi: usize, v: T) {
        if lo >= hi {
            return;
        }
        match self {
            PerByte::Same(x) if *x == v => {}
            _ if lo == 0 && hi == 64 => *self = PerByte::Same(v),
            // A prefix or a suffix over one value, or over the half of a split it covers
            // whole, leaves a split (or one value).
            PerByte::Same(x) if lo == 0 => *self = PerByte::split(hi, v, *x),
            PerByte::Same(x) if hi == 64 => *self = PerByte::split(lo, *x, v),
            &mut PerByte::Split { cut, hi: after, .. } if lo == 0 && hi >= cut as usize => {
                *self = PerByte::split(hi, v, after)
            }
            &mut PerByte::Split { cut, lo: before, .. } if hi == 64 && lo <= cut as usize => {
                *self = PerByte::split(lo, before, v)
            }
            // Within one half, with that half's value: nothing changes.
            PerByte::Split { cut, lo: before, hi: after }
                if (hi <= *cut as usize && *before == v) || (lo >= *cut as usize && *after == v) => {}
            PerByte::Same(_) | PerByte::Split { .. } => {
                let mut a = Box::new(std::array::from_fn(|b| self.get(b)));
                a[lo..hi].fill(v);
                *self = PerByte::Each(a);
            }
            PerByte::Each(a) => {
                a[lo..hi].fill(v);
                // A line written piece by piece by one store's clock ends as one value again:
                // kept as one, its copies and comparisons are one step and allocate nothing.
                if a.iter().all(|x| *x == v) {
                    *self = PerByte::Same(v);
                }
            }
        }
    }

    /// Whether bytes `lo..hi` have the same values here and in `other`.
    #[inline]
    pub(super) fn same_in(&self, other: &PerByte<T>, lo: usize, hi: usize) -> bool {
        match (self, other) {
            _ if lo >= hi => true,
            (PerByte::Same(x), PerByte::Same(y)) => x == y,
            (PerByte::Each(a), PerByte::Each(b)) => a[lo..hi] == b[lo..hi],
            (PerByte::Each(a), o) | (o, PerByte::Each(a)) => a[lo..hi].iter().zip(lo..hi).all(|(v, b)| *v == o.get(b)),
            // One value or two on each side: both are constant between the range's ends and
            // the cuts inside it, so one byte of each such stretch stands for all of it.
            _ => {
                let inside = |c: Option<usize>| c.filter(|&c| lo < c && c < hi);
                [Some(lo), inside(self.cut()), inside(other.cut())]
                    .into_iter()
                    .flatten()
                    .all(|b| self.get(b) == other.get(b))
            }
        }
    }

    /// Every byte takes `other`'s value (reusing this record's storage when both hold 64).
    #[inline]
    pub(super) fn set(&mut self, other: &PerByte<T>) {
        match (&mut *self, other) {
            (PerByte::Each(a), PerByte::Each(b)) => **a = **b,
            (_, o) => *self = o.clone(),
        }
    }
}

/// One cached copy of a line (an agent's, or the AICPU cluster's): its bytes, which of them are
/// dirty, and the store each byte holds.
pub(super) struct CLine {
    pub(super) data: [u8; 64],
    pub(super) dirty: u64,
    pub(super) origin: PerByte<Stamp>,
    /// The line's write-back count when the copy was filled.
    pub(super) fill_gen: u32,
    /// Whether the fill was ordered after the line's last write-back and no other agent held
    /// the line dirty (else a store to this copy breaks the whole-line rule).
    pub(super) fill_ok: bool,
    /// Whether this copy has been stored to (the whole-line check is made at the first store).
    pub(super) owned: bool,
}

impl CLine {
    /// A new record for a fill to write in place (when no dropped one is at hand to reuse).
    pub(super) fn blank() -> Box<CLine> {
        Box::new(CLine {
            data: [0; 64],
            dirty: 0,
            origin: PerByte::Same(Stamp::NOBODY),
            fill_gen: 0,
            fill_ok: true,
            owned: false,
        })
    }
}

/// A cached copy as its holder's map keeps it: the copy, and its place in the holder's key
/// list (so dropping it does not search the list). The place lives in the map's own entry, not
/// in the boxed copy: dropping a line and moving another's key touch no copy, whose memory is
/// seldom in the host's cache by then (a core's copies were filled tasks ago).
pub(super) struct Held {
    pub(super) key: u32,
    pub(super) copy: Box<CLine>,
}

impl std::ops::Deref for Held {
    type Target = CLine;
    fn deref(&self) -> &CLine {
        &self.copy
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut CLine {
        &mut self.copy
    }
}

/// Take `line`'s copy out of `map` and its key out of `keys` (the entry knows its place: the
/// last key moves there, and its entry learns it).
pub(super) fn take_line(map: &mut LineMap<Held>, keys: &mut Vec<u64>, line: u64) -> Option<Box<CLine>> {
    let Held { key, copy } = map.remove(&line)?;
    let i = key as usize;
    debug_assert_eq!(keys.get(i), Some(&line), "a cached line knows its place in the key list");
    keys.swap_remove(i);
    if let Some(&moved) = keys.get(i)
        && let Some(m) = map.get_mut(&moved)
    {
        m.key = i as u32;
    }
    Some(copy)
}

/// What memory and the program know about one line: per byte, the last store and the store
/// whose bytes memory now holds.
pub(super) struct LineMeta {
    /// Last logical store of each byte.
    pub(super) last: PerByte<Stamp>,
    /// Origin of the bytes now in memory.
    pub(super) mem: PerByte<Stamp>,
    /// Who put each byte in memory (a write-back, a direct store, DMA).
    pub(super) mby: PerByte<u16>,
    /// Write-backs of this line so far.
    pub(super) r#gen: u32,
    pub(super) last_writer: u16,
    pub(super) last_wb_t: u32,
    /// Agents holding this line dirty.
    pub(super) dirty_by: u128,
    /// AICPU threads that may hold a copy of this line in their own caches (bit `t`: thread
    /// `t`). Set by a thread's fill; cleared, with the copy's removal, by whoever drops the
    /// other threads' copies (a store, a core's write-back, host DMA under the host-coherent
    /// contract), holding the thread's state and this record. A copy removed another way
    /// leaves its bit set, which costs a look and nothing else; a copy never lacks its bit.
    pub(super) aicpu_copies: u64,
}

impl Default for LineMeta {
    fn default() -> Self {
        LineMeta {
            last: PerByte::Same(Stamp::NOBODY),
            mem: PerByte::Same(Stamp::NOBODY),
            mby: PerByte::Same(NONE),
            r#gen: 0,
            last_writer: NONE,
            last_wb_t: 0,
            dirty_by: 0,
            aicpu_copies: 0,
        }
    }
}

/// Lines per page of [`Records`].
pub(super) const PAGE_LINES: u64 = 16;

/// The records of the lines of one shard, kept a page of neighbouring lines together: the
/// lines of a range share one map entry per page and lie side by side in memory, so after the
/// first line the lookups hit memory the cache already holds. A line of a page that was never
/// written reads as the default record, which says what no record says (initial contents,
/// never written back).
#[derive(Default)]
pub(super) struct Records {
    pages: LineMap<Box<[LineMeta; PAGE_LINES as usize]>>,
}

impl Records {
    /// The page of `line` (its key) and the line's place in it.
    #[inline]
    fn place(line: u64) -> (u64, usize) {
        let page = line & !(PAGE_LINES * LINE - 1);
        (page, ((line - page) / LINE) as usize)
    }

    /// `line`'s record, if its page has any.
    #[inline]
    pub(super) fn get(&self, line: &u64) -> Option<&LineMeta> {
        let (page, i) = Self::place(*line);
        self.pages.get(&page).map(|p| &p[i])
    }

    /// `line`'s record to change, if its page has any.
    #[inline]
    pub(super) fn get_mut(&mut self, line: &u64) -> Option<&mut LineMeta> {
        let (page, i) = Self::place(*line);
        self.pages.get_mut(&page).map(|p| &mut p[i])
    }

    /// `line`'s record, made (default) if its page has none yet.
    #[inline]
    pub(super) fn record(&mut self, line: u64) -> &mut LineMeta {
        let (page, i) = Self::place(line);
        &mut self.pages.entry(page).or_insert_with(|| Box::new(std::array::from_fn(|_| LineMeta::default())))[i]
    }

    /// Forget every record.
    pub(super) fn clear(&mut self) {
        self.pages.clear();
    }
}

/// The lines the AICPU cluster holds dirty under the write-back policy, and their keys (for
/// random eviction).
#[derive(Default)]
pub(super) struct Cluster {
    pub(super) lines: LineMap<Held>,
    pub(super) keys: Vec<u64>,
}

impl Cluster {
    pub(super) fn remove(&mut self, line: u64) -> Option<Box<CLine>> {
        take_line(&mut self.lines, &mut self.keys, line)
    }
}

/// The lines covering `[addr, addr+len)`.
pub(super) fn lines(addr: u64, len: u64) -> impl Iterator<Item = u64> {
    let first = addr & !(LINE - 1);
    let end = if len == 0 { first } else { (addr + len + LINE - 1) & !(LINE - 1) };
    (first..end).step_by(LINE as usize)
}

/// The byte range of `line` that `[addr, addr+len)` covers.
pub(super) fn span_in(line: u64, addr: u64, len: u64) -> (usize, usize) {
    let lo = addr.max(line) - line;
    let hi = (addr + len).min(line + LINE) - line;
    (lo as usize, hi as usize)
}

/// The arena offset of `line`, when it lies at or above the arena's base.
pub(super) fn gm_offset(line: u64) -> Option<u64> {
    line.checked_sub(GM_BASE)
}

#[cfg(test)]
mod per_byte_tests {
    use super::{PerByte, Stamp};

    /// What a `PerByte` holds, as 64 values.
    fn each<T: Copy + Eq>(p: &PerByte<T>) -> Vec<T> {
        (0..64).map(|b| p.get(b)).collect()
    }

    #[test]
    fn a_part_filled_line_holds_each_byte_and_a_whole_fill_makes_it_one_value_again() {
        let (a, b) = (Stamp::new(3, 7), Stamp::new(4, 1));
        let mut p = PerByte::Same(a);
        p.fill(8, 16, b);
        assert!(matches!(p, PerByte::Each(_)));
        let want: Vec<Stamp> = (0..64).map(|i| if (8..16).contains(&i) { b } else { a }).collect();
        assert_eq!(each(&p), want);
        // Filling with the value a `Same` already has changes nothing.
        let mut q = PerByte::Same(a);
        q.fill(0, 5, a);
        assert!(matches!(q, PerByte::Same(s) if s == a));
        p.fill(0, 64, b);
        assert!(matches!(p, PerByte::Same(s) if s == b));
    }

    #[test]
    fn comparison_of_a_range_agrees_with_byte_by_byte_in_every_representation() {
        let (a, b) = (Stamp::new(1, 1), Stamp::new(2, 2));
        let mut mixed = PerByte::Same(a);
        mixed.fill(32, 40, b);
        let mut prefix = PerByte::Same(a);
        prefix.fill(0, 36, b);
        let mut suffix = PerByte::Same(b);
        suffix.fill(36, 64, a);
        assert!(matches!(prefix, PerByte::Split { cut: 36, .. }) && matches!(suffix, PerByte::Split { cut: 36, .. }));
        let cases = [PerByte::Same(a), PerByte::Same(b), mixed, prefix, suffix, PerByte::split(40, a, b)];
        for x in &cases {
            for y in &cases {
                for (lo, hi) in [(0, 64), (0, 32), (32, 40), (36, 50), (40, 64), (5, 6)] {
                    let bytewise = (lo..hi).all(|i| x.get(i) == y.get(i));
                    assert_eq!(x.same_in(y, lo, hi), bytewise, "{x:?} {y:?} {lo}..{hi}");
                }
            }
        }
    }

    #[test]
    fn set_copies_every_byte_whatever_either_side_holds() {
        let (a, b) = (Stamp::new(1, 1), Stamp::new(2, 2));
        let mut mixed = PerByte::Same(a);
        mixed.fill(0, 1, b);
        for from in [PerByte::Same(a), mixed.clone()] {
            for mut to in [PerByte::Same(b), mixed.clone()] {
                to.set(&from);
                assert_eq!(each(&to), each(&from));
            }
        }
    }

    /// xorshift64: a seeded stream for the random fills below.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// A random range of a line: a prefix, a suffix, the whole line or any range (empty ones
    /// included), so every representation and every change between them is reached.
    fn range(x: &mut u64) -> (usize, usize) {
        let (p, q) = ((next(x) % 65) as usize, (next(x) % 65) as usize);
        match next(x) % 4 {
            0 => (0, p),
            1 => (p, 64),
            2 => (0, 64),
            _ => (p.min(q), p.max(q)),
        }
    }

    #[test]
    fn every_representation_holds_what_a_plain_array_holds_through_random_fills() {
        let values = [Stamp::new(1, 1), Stamp::new(2, 2), Stamp::new(3, 3)];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut reached = [false; 3];
        for _ in 0..200 {
            let (mut p, mut q) = (PerByte::Same(values[0]), PerByte::Same(values[0]));
            let (mut pa, mut qa) = ([values[0]; 64], [values[0]; 64]);
            for _ in 0..12 {
                for (r, ra) in [(&mut p, &mut pa), (&mut q, &mut qa)] {
                    let (lo, hi) = range(&mut x);
                    let v = values[(next(&mut x) % 3) as usize];
                    r.fill(lo, hi, v);
                    ra[lo..hi].fill(v);
                    assert_eq!(each(r), ra.to_vec(), "after filling {lo}..{hi}");
                    reached[match r {
                        PerByte::Same(_) => 0,
                        PerByte::Split { cut, lo, hi } => {
                            assert!(0 < *cut && *cut < 64 && lo != hi, "a split is a true split");
                            1
                        }
                        PerByte::Each(_) => 2,
                    }] = true;
                }
                let (lo, hi) = range(&mut x);
                assert_eq!(p.same_in(&q, lo, hi), pa[lo..hi] == qa[lo..hi], "{p:?} {q:?} {lo}..{hi}");
                let mut c = q.clone();
                c.set(&p);
                assert_eq!(each(&c), pa.to_vec());
            }
        }
        assert_eq!(reached, [true; 3], "the fills reach every representation");
    }

    #[test]
    fn a_stamp_keeps_its_agent_and_clock() {
        let s = Stamp::new(0xfffe, u32::MAX);
        assert_eq!(s.pair(), (0xfffe, u32::MAX));
        assert_eq!(Stamp::NOBODY.pair(), (super::NONE, 0));
        assert_ne!(Stamp::new(1, 2), Stamp::new(2, 1));
    }
}
