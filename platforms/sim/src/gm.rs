//! Simulated global memory: an arena of 64-bit atomic words plus a first-fit allocator
//! (`pto_inproc::Heap`).
//!
//! Every access — plain loads and stores of device code, host DMA, atomics — is a relaxed (or
//! stronger) atomic operation on the words it touches, so the simulator has no data races even
//! when a user's graph does (it then computes garbage, as the hardware would). A store that
//! covers part of a word merges into it with a compare-and-swap, so bytes it does not write are
//! never clobbered.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use pto_hal::GmAddr;
use pto_inproc::{Heap, HeapError};

use crate::SimError;

/// Where the arena sits in the simulated device address space (never 0, so null stays invalid).
pub const GM_BASE: u64 = 0x1_0000_0000;

/// The GM arena of one simulated device.
pub struct Gm {
    words: Box<[AtomicU64]>,
    /// The allocator, over the arena's addresses (`GM_BASE ..`).
    heap: Mutex<Heap>,
}

impl Gm {
    /// An arena of `bytes` bytes (rounded up to 4 KiB), zero-filled.
    pub fn new(bytes: u64) -> Gm {
        let bytes = bytes.div_ceil(4096) * 4096;
        let n = (bytes / 8) as usize;
        let words = zeroed_words(n);
        // The words exist, so `bytes` is far below what would pass the last address.
        let heap = Heap::new(GM_BASE, bytes).unwrap_or_else(|e| panic!("GM arena: {e}"));
        Gm { words, heap: Mutex::new(heap) }
    }

    /// Arena size in bytes.
    pub fn size(&self) -> u64 {
        self.words.len() as u64 * 8
    }

    /// Allocate `size` bytes aligned to `align` (a power of two): whole 64-byte lines, first
    /// fit, zero-filled. A size no arena could hold (up to `u64::MAX`) is out of memory.
    pub fn alloc(&self, size: u64, align: u64) -> Result<GmAddr, SimError> {
        let (at, len) = {
            let mut h = self.heap.lock();
            let at = h.alloc(size, align).map_err(|e| match e {
                HeapError::ZeroSize => SimError::InvalidArgument("zero-byte device allocation"),
                HeapError::BadAlignment(_) => SimError::InvalidArgument("alignment is not a power of two"),
                HeapError::OutOfMemory { requested } => SimError::OutOfMemory { requested },
                HeapError::TooLarge { .. } | HeapError::NotAllocated(_) | HeapError::BadRange { .. } => {
                    SimError::OutOfMemory { requested: size }
                }
            })?;
            (at, h.allocation(at).unwrap_or(0))
        };
        // Fresh allocations read as zero, like the reference's simulator (calloc).
        self.clear(at - GM_BASE, len);
        Ok(GmAddr(at))
    }

    /// Zero `len` bytes at arena offset `off` (both multiples of 8, as every allocation is),
    /// storing only to the words that are not zero already: arena pages nothing ever wrote are
    /// only read (the host maps them to its shared zero page), not faulted in one by one — a
    /// large allocation (the device-side runtime's ring heaps: megabytes, mostly unused) costs
    /// a read of its bytes, not a write of every page.
    fn clear(&self, off: u64, len: u64) {
        debug_assert!(off.is_multiple_of(8) && len.is_multiple_of(8), "allocations are whole words");
        let at = (off / 8) as usize;
        for w in &self.words[at..at + (len / 8) as usize] {
            if w.load(Ordering::Relaxed) != 0 {
                w.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Free an allocation; returns its length.
    pub fn free(&self, addr: GmAddr) -> Result<u64, SimError> {
        self.heap.lock().free(addr.0).map_err(|_| SimError::BadFree(addr))
    }

    /// Bytes currently allocated.
    pub fn allocated_bytes(&self) -> u64 {
        self.heap.lock().allocated_bytes()
    }

    /// The arena offset of `[addr, addr+len)`, if the range lies inside the arena.
    #[inline]
    pub fn offset_of(&self, addr: GmAddr, len: u64) -> Option<u64> {
        let off = addr.0.checked_sub(GM_BASE)?;
        (off.checked_add(len)? <= self.size()).then_some(off)
    }

    /// Like [`Gm::offset_of`] for device code: an access outside the arena is a device fault,
    /// which the simulator raises as a panic of the agent (caught and reported per agent).
    #[inline]
    pub fn checked(&self, addr: GmAddr, len: u64) -> u64 {
        match self.offset_of(addr, len) {
            Some(o) => o,
            None => panic!("device access outside GM: {:#x}+{len}", addr.0),
        }
    }

    /// The word holding arena offset `off` (which must be 8-aligned).
    #[inline]
    pub fn word(&self, off: u64) -> &AtomicU64 {
        debug_assert!(off.is_multiple_of(8), "unaligned word access at offset {off:#x}");
        &self.words[(off / 8) as usize]
    }

    /// Copy bytes at arena offset `off` into `dst`: a partial first and last word byte by
    /// byte, the whole words between one load each.
    pub fn read_bytes(&self, off: u64, dst: &mut [u8]) {
        let head = (((8 - off % 8) % 8) as usize).min(dst.len());
        let (first, rest) = dst.split_at_mut(head);
        if !first.is_empty() {
            let bo = (off % 8) as usize;
            first.copy_from_slice(&self.words[(off / 8) as usize].load(Ordering::Relaxed).to_le_bytes()[bo..bo + head]);
        }
        let (at, whole) = (((off + head as u64) / 8) as usize, rest.len() / 8);
        let mut chunks = rest.chunks_exact_mut(8);
        for (w, c) in self.words[at..at + whole].iter().zip(&mut chunks) {
            c.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            let n = tail.len();
            let w = self.words[at + whole].load(Ordering::Relaxed).to_le_bytes();
            tail.copy_from_slice(&w[..n]);
        }
    }

    /// Copy the 64 bytes at arena offset `off` into `dst`: a cache line's fill. At an offset
    /// that is a multiple of 8 (every line's is) it is eight word loads and nothing else;
    /// otherwise it is [`Gm::read_bytes`].
    #[inline]
    pub fn read_line(&self, off: u64, dst: &mut [u8; 64]) {
        if !off.is_multiple_of(8) {
            return self.read_bytes(off, dst);
        }
        let at = (off / 8) as usize;
        for (w, c) in self.words[at..at + 8].iter().zip(dst.chunks_exact_mut(8)) {
            c.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
    }

    /// Copy the 64 bytes of `src` to arena offset `off`: a cache line's write-back. At an
    /// offset that is a multiple of 8 it is eight word stores; otherwise [`Gm::write_bytes`].
    #[inline]
    pub fn write_line(&self, off: u64, src: &[u8; 64]) {
        if !off.is_multiple_of(8) {
            return self.write_bytes(off, src);
        }
        let at = (off / 8) as usize;
        for (w, c) in self.words[at..at + 8].iter().zip(src.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            w.store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
    }

    /// Copy `src` to arena offset `off`: the whole words between a partial first and last one
    /// are stored (one store each); the partial ones are merged into what memory holds.
    pub fn write_bytes(&self, off: u64, src: &[u8]) {
        let head = (((8 - off % 8) % 8) as usize).min(src.len());
        let (first, rest) = src.split_at(head);
        if !first.is_empty() {
            self.merge(off, first);
        }
        let (at, whole) = (((off + head as u64) / 8) as usize, rest.len() / 8);
        let mut chunks = rest.chunks_exact(8);
        for (w, c) in self.words[at..at + whole].iter().zip(&mut chunks) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            w.store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
        let tail = chunks.remainder();
        if !tail.is_empty() {
            self.merge((at + whole) as u64 * 8, tail);
        }
    }

    /// Merge `src` (at most to the end of its word) into the word holding arena offset `off`.
    fn merge(&self, off: u64, src: &[u8]) {
        let (bo, n) = ((off % 8) as usize, src.len());
        debug_assert!(bo + n <= 8, "a merge stays inside one word");
        let mut bytes = [0u8; 8];
        let mut mask = [0u8; 8];
        bytes[bo..bo + n].copy_from_slice(src);
        mask[bo..bo + n].fill(0xff);
        let (bytes, mask) = (u64::from_le_bytes(bytes), u64::from_le_bytes(mask));
        let _ = self.words[(off / 8) as usize]
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| Some((old & !mask) | bytes));
    }

    /// Fill `len` bytes at arena offset `off` with `byte` (whole words one store each).
    pub fn fill(&self, off: u64, byte: u8, len: u64) {
        let head = ((8 - off % 8) % 8).min(len);
        if head > 0 {
            self.merge(off, &[byte; 8][..head as usize]);
        }
        let (at, words) = (((off + head) / 8) as usize, ((len - head) / 8) as usize);
        let pattern = u64::from_ne_bytes([byte; 8]);
        for w in &self.words[at..at + words] {
            w.store(pattern, Ordering::Relaxed);
        }
        let tail = ((len - head) % 8) as usize;
        if tail > 0 {
            self.merge((at + words) as u64 * 8, &[byte; 8][..tail]);
        }
    }
}

fn zeroed_words(n: usize) -> Box<[AtomicU64]> {
    use std::alloc::{Layout, alloc_zeroed, handle_alloc_error};
    if n == 0 {
        return Box::new([]);
    }
    let layout = match Layout::array::<AtomicU64>(n) {
        Ok(l) => l,
        Err(_) => panic!("GM arena of {n} words is too large"),
    };
    // SAFETY: `layout` has non-zero size (n > 0).
    let ptr = unsafe { alloc_zeroed(layout) } as *mut AtomicU64;
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `[AtomicU64; n]`,
    // is non-null and zero-filled; an all-zero `AtomicU64` is a valid value. Ownership passes
    // to the box, which frees it with the same layout.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_word_writes_keep_neighbours() {
        let gm = Gm::new(4096);
        let a = gm.alloc(64, 64).unwrap();
        let off = gm.offset_of(a, 64).unwrap();
        gm.write_bytes(off, &[0xAA; 16]);
        gm.write_bytes(off + 3, &[1, 2, 3]);
        let mut out = [0u8; 16];
        gm.read_bytes(off, &mut out);
        assert_eq!(&out[..8], &[0xAA, 0xAA, 0xAA, 1, 2, 3, 0xAA, 0xAA]);
        assert_eq!(&out[8..], &[0xAA; 8]);
    }

    #[test]
    fn allocator_reuses_and_coalesces() {
        let gm = Gm::new(64 * 1024);
        let a = gm.alloc(1024, 64).unwrap();
        let b = gm.alloc(1024, 64).unwrap();
        gm.free(a).unwrap();
        gm.free(b).unwrap();
        // Coalesced: the whole arena is one free range again.
        let big = gm.alloc(64 * 1024, 64).unwrap();
        assert_eq!(big.0, GM_BASE);
        assert!(matches!(gm.alloc(64, 64), Err(SimError::OutOfMemory { .. })));
        assert!(matches!(gm.free(GmAddr(GM_BASE + 8)), Err(SimError::BadFree(_))));
    }

    #[test]
    fn hostile_requests_are_errors_not_panics() {
        let gm = Gm::new(4096);
        for size in [u64::MAX, u64::MAX - 62, u64::MAX - 63, 1 << 63] {
            assert!(matches!(gm.alloc(size, 64), Err(SimError::OutOfMemory { .. })), "size {size}");
        }
        for align in [0, 3, 96, u64::MAX] {
            assert!(matches!(gm.alloc(64, align), Err(SimError::InvalidArgument(_))), "align {align}");
        }
        assert!(matches!(gm.alloc(0, 64), Err(SimError::InvalidArgument(_))));
        let a = gm.alloc(64, 64).unwrap();
        for bad in [GmAddr(0), GmAddr(a.0 + 64), GmAddr(u64::MAX)] {
            assert_eq!(gm.free(bad), Err(SimError::BadFree(bad)));
        }
        gm.free(a).unwrap();
        assert_eq!(gm.free(a), Err(SimError::BadFree(a)));
        assert_eq!(gm.allocated_bytes(), 0);
    }

    /// A line read or written whole is the same 64 bytes as the byte-range access gives, at a
    /// word-aligned offset (eight word accesses) and at every unaligned one (the fallback).
    #[test]
    fn whole_lines_agree_with_byte_ranges_at_aligned_and_unaligned_offsets() {
        let gm = Gm::new(4096);
        let a = gm.alloc(256, 64).unwrap();
        let base = gm.offset_of(a, 256).unwrap();
        for off in [0u64, 8, 64, 1, 3, 7, 13, 63] {
            let line: [u8; 64] = std::array::from_fn(|i| (i as u8).wrapping_mul(7).wrapping_add(off as u8));
            gm.write_bytes(base, &[0x5A; 256]);
            gm.write_line(base + off, &line);
            let mut whole = [0u8; 256];
            gm.read_bytes(base, &mut whole);
            assert_eq!(&whole[off as usize..off as usize + 64], &line, "written at {off}");
            assert!(whole[..off as usize].iter().all(|&b| b == 0x5A), "bytes before {off} kept");
            assert!(whole[off as usize + 64..].iter().all(|&b| b == 0x5A), "bytes after {off} kept");
            let mut back = [0u8; 64];
            gm.read_line(base + off, &mut back);
            assert_eq!(back, line, "read at {off}");
        }
    }

    /// Reads, writes and fills at every offset and length over a few words agree with a plain
    /// byte array (head, whole words and tail, and the ranges that stay inside one word).
    #[test]
    fn byte_ranges_match_a_byte_array_at_every_offset_and_length() {
        let gm = Gm::new(4096);
        let a = gm.alloc(64, 64).unwrap();
        let base = gm.offset_of(a, 64).unwrap();
        let mut model = [0u8; 64];
        let mut k = 1u8;
        for off in 0..24usize {
            for len in 0..=40usize {
                let src: Vec<u8> = (0..len).map(|i| k.wrapping_add(i as u8)).collect();
                k = k.wrapping_add(37);
                gm.write_bytes(base + off as u64, &src);
                model[off..off + len].copy_from_slice(&src);
                let mut all = [0u8; 64];
                gm.read_bytes(base, &mut all);
                assert_eq!(all, model, "write of {len} at {off}");
                gm.fill(base + off as u64, k, len as u64);
                model[off..off + len].fill(k);
                let mut part = vec![0u8; len];
                gm.read_bytes(base + off as u64, &mut part);
                assert_eq!(part, &model[off..off + len], "fill of {len} at {off}");
                gm.read_bytes(base, &mut all);
                assert_eq!(all, model, "fill of {len} at {off}, the neighbours");
            }
        }
    }

    #[test]
    fn fresh_allocations_are_zero() {
        let gm = Gm::new(4096);
        let a = gm.alloc(128, 64).unwrap();
        let off = gm.offset_of(a, 128).unwrap();
        gm.fill(off, 7, 128);
        gm.free(a).unwrap();
        let b = gm.alloc(128, 64).unwrap();
        let mut out = [1u8; 128];
        gm.read_bytes(gm.offset_of(b, 128).unwrap(), &mut out);
        assert!(out.iter().all(|&x| x == 0));
    }

    /// The zeroing stores only to words that are not zero: a byte written anywhere, even where
    /// nothing was ever allocated (a stray write), still reads as zero in a later allocation.
    #[test]
    fn a_stray_byte_anywhere_reads_as_zero_in_a_fresh_allocation() {
        for at in [0u64, 1, 7, 8, 4095, 4096, 64 * 1024 + 3, (1 << 20) - 1] {
            let gm = Gm::new(1 << 20);
            gm.fill(at, 0x5a, 1);
            let a = gm.alloc(1 << 20, 64).unwrap();
            let mut out = vec![1u8; 1 << 20];
            gm.read_bytes(gm.offset_of(a, 1 << 20).unwrap(), &mut out);
            assert_eq!(out.iter().position(|&x| x != 0), None, "stray byte at {at}");
        }
    }
}
