//! The tensor map: dependency discovery from tensor regions.
//!
//! A task that reads or writes a tensor region must run after every earlier task that wrote
//! any byte of it (read-after-write and write-after-write). The map remembers, per buffer,
//! which task last wrote which [`Region`], answers "which writers overlap this region?" and
//! registers new writers. It is `no_std + alloc` and generic over the producer handle `P`,
//! so the host graph builder (task indexes, `u32`) and the device orchestrator (task ids,
//! `u64`) share it.
//!
//! # Three-way classification
//!
//! [`classify`] says how a new region relates to an old one:
//!
//! * [`Overlap::None`]: the two share no element byte. Only said when that is certain: the
//!   regions lie in different buffers, their bounding byte ranges are disjoint, or an exact
//!   per-dimension test proves it.
//! * [`Overlap::Covered`]: every byte the old region can touch is touched by the new one.
//!   Only said when certain, too.
//! * [`Overlap::Partial`]: everything else, including "cannot tell cheaply". A spurious
//!   `Partial` costs at most an extra dependency; a wrong `None` would lose one, so the
//!   classification leans to `Partial` whenever it is unsure.
//!
//! The exact test applies when both regions are views of one row-major layout: same element
//! size, same rank, identical strides ending in 1, each stride a multiple of the next one
//! and every view staying inside its row in every dimension but the outermost. Then an
//! element offset has one coordinate per dimension, each region is a box of coordinates,
//! and overlap and containment are decided one dimension at a time. Any other pair is
//! judged by bounding byte ranges: disjoint ranges give `None`; a dense new region (no
//! holes) whose range contains the old range gives `Covered`; anything else is `Partial`.
//!
//! # Why covered writers are dropped on insert
//!
//! A new writer looks its region up before it is inserted, so it depends on every live
//! writer it overlaps (write-after-write). When it covers an old writer completely, any
//! later task touching the old writer's bytes also touches the new writer's, finds the new
//! writer and reaches the old one transitively through that write-after-write edge. So
//! [`TensorMap::insert`] removes the entries its region covers: the map stays as small as
//! the set of writers that are still individually visible. Entries only partly overwritten
//! stay whole (they are never split), so a reader of the overwritten part still finds the
//! older writer as well; that dependency is redundant but harmless.
//!
//! # What is not tracked
//!
//! Write-after-read is **not** discovered: the map records writers only, so a writer does
//! not wait for earlier readers of its bytes. Callers declare such edges explicitly.
//!
//! # Cost
//!
//! Entries of one buffer are grouped by the power-of-two class of their byte span (class `c`
//! holds spans in `(2^(c-1), 2^c]`) and kept in a B-tree per class ordered by first byte. A
//! query for bytes `[s, e)` scans, in each class present in the buffer, only the entries
//! starting in `[s - 2^c + 1, e)`: no entry of that class starting earlier can reach `s`.
//! Per call ([`TensorMap::lookup`], [`TensorMap::lookup_pruning`], [`TensorMap::insert`])
//! this is `O(c · log n + k)`: `c` is the number of span classes present in the buffer (at
//! most 65, a handful in practice), `n` the number of entries and `k` the entries visited.
//! Those are the entries whose bounding byte ranges overlap the query, plus, per class,
//! entries that end just before `s`; the latter all contain byte `s - 2^(c-1)`, so there are
//! no more of them than writers live on one byte. A single large span (say, an initial
//! whole-buffer write) therefore does not widen the scans of small views. N views of one
//! buffer, each inserted and looked up once, cost `O(N log N)` overall rather than `O(N²)`.
//! [`TensorMap::prune`] walks every entry and is linear in the map's size.
//!
//! All byte arithmetic assumes regions lie below `2^64` bytes, as every real buffer does;
//! [`Region::byte_range`] saturates beyond that.

mod classes;
#[cfg(test)]
mod tests;

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use classes::{Classes, Entry, Key, class_of, remove_keys, scan};

pub use crate::region::{Overlap, Region, classify};

/// [`TensorMap::insert`] refused a new entry: the map holds its capacity of live entries.
/// Retire producers ([`TensorMap::prune`]) and try again.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tensor map is full")]
pub struct MapFull;

/// The live writers of tensor regions, per buffer: see the [module documentation](self).
#[derive(Clone, Debug)]
pub struct TensorMap<P> {
    bufs: BTreeMap<u64, Classes<P>>,
    len: usize,
    capacity: usize,
    seq: u64,
    /// Keys to remove, reused across calls.
    scratch: Vec<(u8, Key)>,
}

impl<P: Copy + Eq> TensorMap<P> {
    /// An empty map holding at most `capacity` live entries (`usize::MAX`: unbounded).
    pub fn new(capacity: usize) -> Self {
        TensorMap { bufs: BTreeMap::new(), len: 0, capacity, seq: 0, scratch: Vec::new() }
    }

    /// Push onto `out` the producer of every entry whose region overlaps `r`
    /// (`classify(r, entry) != Overlap::None`). Nothing is deduplicated: a producer with
    /// several overlapping entries appears once per entry, and `out` keeps what it held.
    pub fn lookup(&self, r: &Region, out: &mut Vec<P>) {
        self.lookup_counted(r, out);
    }

    /// [`lookup`](Self::lookup), returning how many entries were examined.
    fn lookup_counted(&self, r: &Region, out: &mut Vec<P>) -> usize {
        let Some(classes) = self.bufs.get(&r.buffer) else { return 0 };
        if r.is_void() {
            return 0;
        }
        let (s, e) = r.byte_range();
        scan(classes, s, e, |_, _, ent| {
            if classify(r, &ent.region) != Overlap::None {
                out.push(ent.producer);
            }
        })
    }

    /// Like [`lookup`](Self::lookup), but an overlapping entry whose producer is retired
    /// (`retired(producer)` is true) is removed from the map instead of reported. Entries
    /// that do not overlap `r` are left alone, retired or not.
    pub fn lookup_pruning(&mut self, r: &Region, mut retired: impl FnMut(P) -> bool, out: &mut Vec<P>) {
        if r.is_void() {
            return;
        }
        let Some(classes) = self.bufs.get_mut(&r.buffer) else { return };
        let (s, e) = r.byte_range();
        let mut doomed = core::mem::take(&mut self.scratch);
        doomed.clear();
        scan(classes, s, e, |c, key, ent| {
            if classify(r, &ent.region) != Overlap::None {
                if retired(ent.producer) {
                    doomed.push((c, *key));
                } else {
                    out.push(ent.producer);
                }
            }
        });
        remove_keys(classes, &doomed);
        if classes.is_empty() {
            self.bufs.remove(&r.buffer);
        }
        self.len -= doomed.len();
        self.scratch = doomed;
    }

    /// Register `producer` as the latest writer of `r`.
    ///
    /// Every entry of the same buffer whose region `r` covers ([`Overlap::Covered`]) is
    /// removed: the new writer depends on it (write-after-write), so later tasks reach it
    /// through the new writer. Callers look `r` up *before* inserting it so that edge
    /// exists. Fails with [`MapFull`], changing nothing, when the map would still hold
    /// `capacity` entries after those removals. A region touching no byte is not stored.
    pub fn insert(&mut self, r: &Region, producer: P) -> Result<(), MapFull> {
        self.insert_counted(r, producer).0
    }

    /// [`insert`](Self::insert), also returning how many entries were examined.
    fn insert_counted(&mut self, r: &Region, producer: P) -> (Result<(), MapFull>, usize) {
        if r.is_void() {
            return (Ok(()), 0);
        }
        let (s, e) = r.byte_range();
        let mut doomed = core::mem::take(&mut self.scratch);
        doomed.clear();
        let mut visited = 0;
        if let Some(classes) = self.bufs.get(&r.buffer) {
            visited = scan(classes, s, e, |c, key, ent| {
                if classify(r, &ent.region) == Overlap::Covered {
                    doomed.push((c, *key));
                }
            });
        }
        if self.len - doomed.len() >= self.capacity {
            self.scratch = doomed;
            return (Err(MapFull), visited);
        }
        let classes = self.bufs.entry(r.buffer).or_default();
        remove_keys(classes, &doomed);
        self.len -= doomed.len();
        classes.entry(class_of(e - s)).or_default().insert((s, self.seq), Entry { end: e, region: *r, producer });
        self.seq += 1;
        self.len += 1;
        self.scratch = doomed;
        (Ok(()), visited)
    }

    /// Remove every entry whose producer is retired; returns how many were removed.
    /// Walks the whole map.
    pub fn prune(&mut self, mut retired: impl FnMut(P) -> bool) -> usize {
        let before = self.len;
        let mut kept = 0;
        self.bufs.retain(|_, classes| {
            classes.retain(|_, entries| {
                entries.retain(|_, ent| !retired(ent.producer));
                kept += entries.len();
                !entries.is_empty()
            });
            !classes.is_empty()
        });
        self.len = kept;
        before - kept
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most live entries ([`insert`](Self::insert) refuses beyond it).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        self.bufs.clear();
        self.len = 0;
    }
}
