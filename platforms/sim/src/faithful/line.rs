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

/// One cached copy of a line (an agent's, or the AICPU cluster's): its bytes, which of them are
/// dirty, and the store (agent `ow`, clock `ot`) each byte holds.
pub(super) struct CLine {
    pub(super) data: [u8; 64],
    pub(super) dirty: u64,
    pub(super) ow: [u16; 64],
    pub(super) ot: [u32; 64],
    /// The line's write-back count when the copy was filled.
    pub(super) fill_gen: u32,
    /// Whether the fill was ordered after the line's last write-back and no other agent held
    /// the line dirty (else a store to this copy breaks the whole-line rule).
    pub(super) fill_ok: bool,
    /// Whether this copy has been stored to (the whole-line check is made at the first store).
    pub(super) owned: bool,
    /// Its place in its holder's key list (so dropping it does not search the list).
    pub(super) key: u32,
}

/// Take `line`'s record out of `map` and its key out of `keys` (the record knows its place:
/// the last key moves there, and its record learns it).
pub(super) fn take_line(map: &mut LineMap<Box<CLine>>, keys: &mut Vec<u64>, line: u64) -> Option<Box<CLine>> {
    let l = map.remove(&line)?;
    let i = l.key as usize;
    debug_assert_eq!(keys.get(i), Some(&line), "a cached line knows its place in the key list");
    keys.swap_remove(i);
    if let Some(&moved) = keys.get(i) {
        if let Some(m) = map.get_mut(&moved) {
            m.key = i as u32;
        }
    }
    Some(l)
}

/// What memory and the program know about one line: per byte, the last store and the store
/// whose bytes memory now holds.
pub(super) struct LineMeta {
    /// Last logical store of each byte: (agent, clock).
    pub(super) tw: [u16; 64],
    pub(super) tt: [u32; 64],
    /// Origin of the bytes now in memory.
    pub(super) mw: [u16; 64],
    pub(super) mt: [u32; 64],
    /// Who put each byte in memory (a write-back, a direct store, DMA).
    pub(super) mby: [u16; 64],
    /// Write-backs of this line so far.
    pub(super) r#gen: u32,
    pub(super) last_writer: u16,
    pub(super) last_wb_t: u32,
    /// Agents holding this line dirty.
    pub(super) dirty_by: u128,
}

impl Default for LineMeta {
    fn default() -> Self {
        LineMeta {
            tw: [NONE; 64],
            tt: [0; 64],
            mw: [NONE; 64],
            mt: [0; 64],
            mby: [NONE; 64],
            r#gen: 0,
            last_writer: NONE,
            last_wb_t: 0,
            dirty_by: 0,
        }
    }
}

/// The lines the AICPU cluster holds dirty under the write-back policy, and their keys (for
/// random eviction).
#[derive(Default)]
pub(super) struct Cluster {
    pub(super) lines: LineMap<Box<CLine>>,
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
