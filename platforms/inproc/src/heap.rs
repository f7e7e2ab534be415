//! A first-fit allocator over a range of device addresses.
//!
//! The heap hands out whole lines ([`LINE_BYTES`]): a size is rounded up to a multiple of a
//! line and an alignment is raised to at least a line. Alignment is of the *address* (the
//! heap's base plus an offset), so a request is aligned whatever the base. Freeing merges the
//! range with its free neighbours, so freeing everything leaves one free range again.
//!
//! Every computation on a request — rounding the size, aligning a candidate address, adding
//! the size to it — is checked. A request no arithmetic can satisfy (`u64::MAX` bytes, an
//! alignment that pushes past the end of the address space) is [`HeapError::TooLarge`]; an
//! alignment of zero or one that is not a power of two is [`HeapError::BadAlignment`]; a free
//! of anything that is not a live allocation is [`HeapError::NotAllocated`] and changes
//! nothing.
//!
//! The heap only does bookkeeping: it never touches the memory it manages.

use std::collections::BTreeMap;

use pto_hal::LINE_BYTES;

/// Why the heap refused a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeapError {
    /// An allocation of zero bytes.
    #[error("zero-byte allocation")]
    ZeroSize,
    /// An alignment that is zero or not a power of two.
    #[error("alignment {0} is not a power of two")]
    BadAlignment(u64),
    /// A request whose size (rounded to whole lines) or aligned end does not fit in 64 bits.
    #[error("allocation of {size} bytes aligned to {align} overflows the address space")]
    TooLarge {
        /// Bytes asked for.
        size: u64,
        /// Alignment asked for.
        align: u64,
    },
    /// No free range holds the request.
    #[error("no free range of {requested} bytes")]
    OutOfMemory {
        /// Bytes asked for, rounded up to whole lines.
        requested: u64,
    },
    /// A free of an address that is not the start of a live allocation.
    #[error("{0:#x} is not a live allocation")]
    NotAllocated(u64),
    /// A heap whose range would end past the last address.
    #[error("a heap of {len} bytes at {base:#x} ends past the last address")]
    BadRange {
        /// First address of the range.
        base: u64,
        /// Its length.
        len: u64,
    },
}

/// A first-fit, coalescing allocator over `[base, base + len)`.
#[derive(Clone, Debug)]
pub struct Heap {
    base: u64,
    len: u64,
    /// Free ranges: start address → length. Disjoint, never adjacent (merged on free).
    free: BTreeMap<u64, u64>,
    /// Live allocations: start address → length (whole lines).
    live: BTreeMap<u64, u64>,
}

impl Heap {
    /// An empty heap over `[base, base + len)`. The range must end within the address space
    /// (`base + len` fits in 64 bits); a zero length is a heap where every allocation fails.
    pub fn new(base: u64, len: u64) -> Result<Heap, HeapError> {
        base.checked_add(len).ok_or(HeapError::BadRange { base, len })?;
        let mut free = BTreeMap::new();
        if len > 0 {
            free.insert(base, len);
        }
        Ok(Heap { base, len, free, live: BTreeMap::new() })
    }

    /// The first address of the heap's range.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The length of the heap's range in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the heap's range is empty (then every allocation fails).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Allocate `size` bytes at an address aligned to `align` (a power of two), in the first
    /// free range that holds them. The size is rounded up to whole lines and the alignment
    /// raised to a line; the address returned is the allocation's start.
    pub fn alloc(&mut self, size: u64, align: u64) -> Result<u64, HeapError> {
        if size == 0 {
            return Err(HeapError::ZeroSize);
        }
        if !align.is_power_of_two() {
            return Err(HeapError::BadAlignment(align));
        }
        let too_large = HeapError::TooLarge { size, align };
        let rounded = size.checked_next_multiple_of(LINE_BYTES).ok_or_else(|| too_large.clone())?;
        let align = align.max(LINE_BYTES);
        let found = self.free.iter().find_map(|(&start, &len)| {
            let end = start.checked_add(len)?;
            let at = start.checked_next_multiple_of(align)?;
            let at_end = at.checked_add(rounded)?;
            (at_end <= end).then_some((start, end, at, at_end))
        });
        let Some((start, end, at, at_end)) = found else {
            // Nothing holds it. Say whether any range could have: a request whose rounded
            // size alone passes the end of the address space is too large, not out of memory.
            return Err(if self.base.checked_add(rounded).is_none() {
                too_large
            } else {
                HeapError::OutOfMemory { requested: rounded }
            });
        };
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        if at_end < end {
            self.free.insert(at_end, end - at_end);
        }
        self.live.insert(at, rounded);
        Ok(at)
    }

    /// Free the allocation starting at `addr`, merging it with its free neighbours. Returns
    /// its length. Anything else (an address inside an allocation, a freed one, one outside
    /// the heap) is [`HeapError::NotAllocated`] and leaves the heap as it was.
    pub fn free(&mut self, addr: u64) -> Result<u64, HeapError> {
        let len = self.live.remove(&addr).ok_or(HeapError::NotAllocated(addr))?;
        // A live allocation lies inside the range, so its end is representable.
        let (mut start, mut end) = (addr, addr.saturating_add(len));
        if let Some((&p, &plen)) = self.free.range(..addr).next_back()
            && p.checked_add(plen) == Some(addr)
        {
            self.free.remove(&p);
            start = p;
        }
        if let Some(nlen) = self.free.remove(&end) {
            end = end.saturating_add(nlen);
        }
        self.free.insert(start, end - start);
        Ok(len)
    }

    /// The length of the live allocation starting at `addr`, if there is one.
    pub fn allocation(&self, addr: u64) -> Option<u64> {
        self.live.get(&addr).copied()
    }

    /// Bytes currently allocated (whole lines).
    pub fn allocated_bytes(&self) -> u64 {
        self.live.values().fold(0u64, |sum, &len| sum.saturating_add(len))
    }

    /// Bytes currently free.
    pub fn free_bytes(&self) -> u64 {
        self.free.values().fold(0u64, |sum, &len| sum.saturating_add(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heap's invariants: free ranges and allocations lie in the range, never overlap,
    /// free ranges are never adjacent, and together they cover the range exactly.
    fn check(h: &Heap) {
        let mut spans: Vec<(u64, u64, bool)> =
            h.free.iter().map(|(&s, &l)| (s, l, true)).chain(h.live.iter().map(|(&s, &l)| (s, l, false))).collect();
        spans.sort();
        let mut at = h.base;
        let mut prev_free = false;
        for (s, l, free) in spans {
            assert_eq!(s, at, "a gap or an overlap at {s:#x}");
            assert!(l > 0, "an empty span at {s:#x}");
            assert!(!(free && prev_free), "two adjacent free ranges at {s:#x}");
            at = s.checked_add(l).expect("a span past the address space");
            prev_free = free;
        }
        assert_eq!(at, h.base + h.len, "the spans do not end at the heap's end");
        assert_eq!(h.allocated_bytes() + h.free_bytes(), h.len);
    }

    #[test]
    fn first_fit_reuses_and_coalesces() {
        let mut h = Heap::new(0x1_0000_0000, 64 * 1024).unwrap();
        let a = h.alloc(1024, 64).unwrap();
        let b = h.alloc(1024, 64).unwrap();
        let c = h.alloc(1024, 64).unwrap();
        assert_eq!((a, b, c), (0x1_0000_0000, 0x1_0000_0400, 0x1_0000_0800));
        h.free(b).unwrap();
        check(&h);
        // First fit: the hole b left is the first range that holds a smaller request.
        assert_eq!(h.alloc(100, 64).unwrap(), b);
        h.free(b).unwrap();
        h.free(a).unwrap();
        h.free(c).unwrap();
        check(&h);
        // Coalesced: the whole range is one free range again.
        assert_eq!(h.free.len(), 1);
        assert_eq!(h.alloc(64 * 1024, 64).unwrap(), 0x1_0000_0000);
        assert_eq!(h.alloc(64, 64), Err(HeapError::OutOfMemory { requested: 64 }));
        check(&h);
    }

    #[test]
    fn sizes_round_to_lines_and_alignment_is_of_the_address() {
        // A base that is line-aligned but not page-aligned: alignment applies to addresses.
        let mut h = Heap::new(0x1040, 1 << 20).unwrap();
        let a = h.alloc(1, 1).unwrap();
        assert_eq!((a, h.allocation(a)), (0x1040, Some(LINE_BYTES)));
        let b = h.alloc(65, 4096).unwrap();
        assert_eq!(b % 4096, 0);
        assert_eq!(h.allocation(b), Some(128));
        check(&h);
        // The gap left below the aligned allocation is free and used by the next small one.
        assert_eq!(h.alloc(64, 64).unwrap(), 0x1080);
        check(&h);
    }

    #[test]
    fn hostile_sizes_are_errors() {
        let mut h = Heap::new(0x1_0000_0000, 1 << 20).unwrap();
        assert_eq!(h.alloc(0, 64), Err(HeapError::ZeroSize));
        assert_eq!(h.alloc(u64::MAX, 64), Err(HeapError::TooLarge { size: u64::MAX, align: 64 }));
        assert_eq!(h.alloc(u64::MAX - 62, 64), Err(HeapError::TooLarge { size: u64::MAX - 62, align: 64 }));
        // Rounds to a representable size, but no range this far up exists.
        assert_eq!(h.alloc(u64::MAX - 63, 64), Err(HeapError::TooLarge { size: u64::MAX - 63, align: 64 }));
        assert_eq!(h.alloc(1 << 40, 64), Err(HeapError::OutOfMemory { requested: 1 << 40 }));
        // An alignment past the range: the aligned start does not fit.
        assert_eq!(h.alloc(64, 1 << 63), Err(HeapError::OutOfMemory { requested: 64 }));
        check(&h);
        assert_eq!(h.allocated_bytes(), 0);
    }

    #[test]
    fn hostile_alignments_are_errors() {
        let mut h = Heap::new(0, 4096).unwrap();
        assert_eq!(h.alloc(64, 0), Err(HeapError::BadAlignment(0)));
        assert_eq!(h.alloc(64, 3), Err(HeapError::BadAlignment(3)));
        assert_eq!(h.alloc(64, 96), Err(HeapError::BadAlignment(96)));
        assert_eq!(h.alloc(64, u64::MAX), Err(HeapError::BadAlignment(u64::MAX)));
        check(&h);
    }

    #[test]
    fn the_top_of_the_address_space() {
        // A heap whose last byte is the last address: aligning and adding stay checked.
        let base = u64::MAX - 4095;
        assert_eq!(Heap::new(base, 4097).err(), Some(HeapError::BadRange { base, len: 4097 }));
        let mut h = Heap::new(base - 1, 4096).unwrap();
        // base - 1 is not line-aligned: the first line-aligned address is `base`, and only
        // 4095 bytes follow it.
        assert_eq!(h.alloc(4096, 64), Err(HeapError::OutOfMemory { requested: 4096 }));
        let a = h.alloc(64, 64).unwrap();
        assert_eq!(a, base);
        assert_eq!(h.alloc(64, 1 << 63), Err(HeapError::OutOfMemory { requested: 64 }));
        check(&h);
        h.free(a).unwrap();
        check(&h);
    }

    #[test]
    fn bad_frees_change_nothing() {
        let mut h = Heap::new(0x1000, 4096).unwrap();
        let a = h.alloc(128, 64).unwrap();
        let before = (h.free.clone(), h.live.clone());
        for bad in [a + 64, a + 1, 0, 0xfff, 0x2000, u64::MAX] {
            assert_eq!(h.free(bad), Err(HeapError::NotAllocated(bad)));
            assert_eq!((h.free.clone(), h.live.clone()), before);
        }
        assert_eq!(h.free(a), Ok(128));
        // Double free.
        assert_eq!(h.free(a), Err(HeapError::NotAllocated(a)));
        check(&h);
    }

    #[test]
    fn an_empty_heap_refuses_everything() {
        let mut h = Heap::new(0x1000, 0).unwrap();
        assert!(h.is_empty());
        assert_eq!(h.alloc(64, 64), Err(HeapError::OutOfMemory { requested: 64 }));
        assert_eq!(h.free(0x1000), Err(HeapError::NotAllocated(0x1000)));
        check(&h);
    }

    #[test]
    fn random_traffic_keeps_the_invariants() {
        // A small xorshift generator: deterministic, no dependency.
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut h = Heap::new(0x4000_0000, 256 * 1024).unwrap();
        let mut live = Vec::new();
        for _ in 0..4000 {
            if live.is_empty() || next() % 3 != 0 {
                let size = match next() % 8 {
                    0 => u64::MAX - next() % 128,
                    1 => 0,
                    _ => 1 + next() % 8192,
                };
                let align = 1u64 << (next() % 14);
                match h.alloc(size, align) {
                    Ok(a) => {
                        assert_eq!(a % align.max(LINE_BYTES), 0);
                        live.push(a);
                    }
                    Err(HeapError::ZeroSize) => assert_eq!(size, 0),
                    Err(HeapError::TooLarge { .. } | HeapError::OutOfMemory { .. }) => {}
                    Err(e) => panic!("unexpected {e}"),
                }
            } else {
                let i = (next() % live.len() as u64) as usize;
                let a = live.swap_remove(i);
                h.free(a).unwrap();
            }
            check(&h);
        }
        for a in live {
            h.free(a).unwrap();
        }
        check(&h);
        assert_eq!(h.free.len(), 1);
    }
}
