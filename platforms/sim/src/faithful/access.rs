//! Cached accesses: an agent's loads and stores through its cache (or, for AICPU stores under
//! the write-back policy, the cluster's), range maintenance (clean, invalidate) and barriers.

use super::spin::MutexGuard;
use std::sync::atomic::Ordering;

use super::line::{CLine, Held, NONE, Stamp, lines, span_in};
use super::model::{AgentState, Faithful, HOST, PausePoint, is_aicpu, is_core, lock, remove_key};
use crate::gm::Gm;
use crate::violation::Missing;

impl Faithful {
    /// Agent `a` loads `dst.len()` bytes at `addr` (arena offset `off`).
    pub fn load(&self, a: u16, addr: u64, off: u64, dst: &mut [u8], gm: &Gm) {
        let mut st = lock(&self.agents[a as usize]);
        // The AICPU threads synchronise through their own (coherent, private) memory too, which
        // the model cannot see: every AICPU access joins what the cluster knows.
        self.cluster_sync(a, &mut st);
        self.maybe_evict(&mut st, a, gm);
        let cluster = is_aicpu(self.n_aicpu, a) && self.aicpu_wb();
        if cluster {
            self.maybe_evict_cluster(&mut st, a, gm);
        }
        let len = dst.len() as u64;
        let mut done = 0usize;
        for line in lines(addr, len) {
            let (lo, hi) = span_in(line, addr, len);
            // An AICPU thread (write-back policy) holds the line's set of the cluster until it
            // has read the line: another thread's store to the line waits, so a copy this
            // thread fills below is filled before that store (which then drops it) or the store
            // is found in the cluster. Released between the look and the fill, a store could
            // fall between them, drop no copy, and leave this thread's copy stale under the
            // cluster's once the cluster wrote its line back
            // (`an_aicpu_fill_never_outlives_a_store_to_its_line_by_another_thread`).
            let mut set = None;
            if cluster {
                // A line the cluster holds dirty is what every AICPU thread reads.
                let mut found = None;
                let served = {
                    let cl = set.insert(self.cluster_set(line));
                    match cl.lines.get(&line) {
                        Some(l) => {
                            let shard = self.shard(line);
                            if let Some(m) = shard.get(&line)
                                && !l.origin.same_in(&m.last, lo, hi)
                            {
                                for b in lo..hi {
                                    if let Some(missing) = self.stale(a, &st, m, b, l.origin.get(b), true) {
                                        found = Some(self.violation(
                                            a,
                                            "load",
                                            line + b as u64,
                                            m.last.get(b).pair(),
                                            missing,
                                        ));
                                        break;
                                    }
                                }
                            }
                            dst[done..done + (hi - lo)].copy_from_slice(&l.data[lo..hi]);
                            true
                        }
                        None => false,
                    }
                };
                if served {
                    drop(set);
                    if let Some(v) = found {
                        self.report(&st, v);
                    }
                    done += hi - lo;
                    continue;
                }
                self.pause(a, PausePoint::ClusterMissed);
            }
            let mut hit = st.cache.contains_key(&line);
            if !hit {
                self.make_room(&mut st, a, gm);
            }
            let mut found = None;
            {
                // One look at the line's record serves the fill and the check.
                let mut shard = self.shard(line);
                if hit && is_aicpu(self.n_aicpu, a) && self.dropping(&st, shard.get(&line), line) {
                    // The copy is one whose drop is under way: read the line as the drop
                    // leaves it.
                    remove_key(&mut st, line);
                    hit = false;
                }
                if !hit {
                    // An AICPU thread's fill marks it as a holder in the line's record.
                    let meta = if is_aicpu(self.n_aicpu, a) { Some(shard.record(line)) } else { shard.get_mut(&line) };
                    self.fill_from(&mut st, a, line, off + line - addr, gm, meta);
                }
                let l = &st.cache[&line];
                // Every byte whose copy is the last store to it is fresh (the common case,
                // looked at a slice at a time); only the others are judged one by one.
                if let Some(m) = shard.get(&line)
                    && !l.origin.same_in(&m.last, lo, hi)
                {
                    for b in lo..hi {
                        if let Some(missing) = self.stale(a, &st, m, b, l.origin.get(b), hit) {
                            found = Some(self.violation(a, "load", line + b as u64, m.last.get(b).pair(), missing));
                            break;
                        }
                    }
                }
                dst[done..done + (hi - lo)].copy_from_slice(&l.data[lo..hi]);
            }
            drop(set);
            done += hi - lo;
            if let Some(v) = found {
                self.report(&st, v);
            }
        }
    }

    /// Whether an AICPU thread's copy of `line` (in `st`'s cache) is one whose drop is under
    /// way: its line changed in memory since the fill, and not by host DMA under the
    /// host-non-coherent contract, across which AICPU copies stay stale. Every other change
    /// drops the AICPU threads' copies — another thread's store, a core's write-back, host DMA
    /// under the host-coherent contract — but after the change reached memory and the line's
    /// record (`drop_aicpu_copies` takes agent locks, which no one takes under a shard). A
    /// thread reading in between reads the line as that drop leaves it: an AICPU thread never
    /// needs to invalidate for those
    /// (`an_aicpu_copy_a_store_is_about_to_drop_is_never_read`).
    fn dropping(&self, st: &AgentState, m: Option<&super::line::LineMeta>, line: u64) -> bool {
        let (Some(m), Some(l)) = (m, st.cache.get(&line)) else { return false };
        m.r#gen != l.fill_gen && (self.host_coherent || m.last_writer != HOST)
    }

    /// Agent `a` stores `src` at `addr` (arena offset `off`).
    pub fn store(&self, a: u16, addr: u64, off: u64, src: &[u8], gm: &Gm) {
        let core = is_core(self.n_aicpu, a);
        let mut st = lock(&self.agents[a as usize]);
        self.cluster_sync(a, &mut st);
        self.maybe_evict(&mut st, a, gm);
        if !core && self.aicpu_wb() {
            self.store_write_back(a, st, addr, off, src, gm);
            return;
        }
        let stamp = st.vc[a as usize];
        let len = src.len() as u64;
        let mut done = 0usize;
        for line in lines(addr, len) {
            let (lo, hi) = span_in(line, addr, len);
            let hit = st.cache.contains_key(&line);
            if !hit {
                self.make_room(&mut st, a, gm);
            }
            let mut violation = None;
            let mut newly_dirty = false;
            {
                let mut shard = self.shard(line);
                let m = shard.record(line);
                if !hit {
                    // A record made just now is the default one: what a never-written line's
                    // fill sees.
                    self.fill_from(&mut st, a, line, off + line - addr, gm, Some(m));
                }
                let l = st.cache.get_mut(&line).expect("filled above");
                if !l.owned {
                    l.owned = true;
                    let others_dirty = m.dirty_by & !(1u128 << a) != 0;
                    if !l.fill_ok || m.r#gen != l.fill_gen || others_dirty {
                        let lw = if others_dirty {
                            (m.dirty_by & !(1u128 << a)).trailing_zeros() as u16
                        } else {
                            m.last_writer
                        };
                        violation = Some(self.violation(
                            a,
                            "store",
                            line + lo as u64,
                            (lw, m.last_wb_t),
                            Missing::WholeLineRule,
                        ));
                    }
                }
                l.data[lo..hi].copy_from_slice(&src[done..done + (hi - lo)]);
                let s = Stamp::new(a, stamp);
                l.origin.fill(lo, hi, s);
                m.last.fill(lo, hi, s);
                if core {
                    newly_dirty = l.dirty == 0;
                    l.dirty |= byte_mask(lo, hi);
                } else {
                    // AICPU stores write through.
                    m.mem.fill(lo, hi, s);
                    m.mby.fill(lo, hi, a);
                }
                if core {
                    m.dirty_by |= 1u128 << a;
                } else {
                    m.r#gen += 1;
                    m.last_writer = a;
                    m.last_wb_t = stamp;
                    l.fill_gen = m.r#gen;
                    // Memory changes with its record, under the shard a fill reads both under.
                    gm.write_bytes(off + done as u64, &src[done..done + (hi - lo)]);
                }
            }
            if newly_dirty {
                st.dirty_lines += 1;
            }
            done += hi - lo;
            if let Some(v) = violation {
                self.report(&st, v);
            }
        }
        if !core {
            // The AICPU threads are one coherent SMP cluster: a store drops the other threads'
            // copies (after this thread's own state is released: AICPUs never hold two locks).
            drop(st);
            self.pause(a, PausePoint::StoreLanded);
            self.drop_aicpu_copies(Some(a), addr, len);
        }
    }

    /// An AICPU store under the write-back policy: the bytes go to the cluster's dirty copy of
    /// each line (filled from memory when the cluster has none), not to memory; every AICPU
    /// thread's own copy of those lines is dropped (the cluster's copy supersedes it).
    pub(super) fn store_write_back(
        &self,
        a: u16,
        mut st: MutexGuard<'_, AgentState>,
        addr: u64,
        off: u64,
        src: &[u8],
        gm: &Gm,
    ) {
        self.maybe_evict_cluster(&mut st, a, gm);
        let stamp = st.vc[a as usize];
        let len = src.len() as u64;
        let mut done = 0usize;
        let mut found = Vec::new();
        {
            for line in lines(addr, len) {
                let (lo, hi) = span_in(line, addr, len);
                remove_key(&mut st, line);
                let mut cl = self.cluster_set(line);
                let fresh = !cl.lines.contains_key(&line);
                if fresh && cl.lines.len() >= self.cluster_set_capacity() {
                    let r = Self::rand(&mut st);
                    let k = cl.keys[(r % cl.keys.len() as u64) as usize];
                    self.cluster_write_back(&mut st, a, &mut cl, k, gm);
                }
                // One look at the line's record serves the fill and the store.
                let mut shard = self.shard(line);
                let m = shard.record(line);
                if fresh {
                    // A record made just now is the default one: what a never-written line's
                    // fill sees. The copy is a reused one when there is one (its per-byte
                    // origins' storage too): no allocation per fill.
                    let mut l = st.spare.pop().unwrap_or_else(CLine::blank);
                    gm.read_line(off + line - addr, &mut l.data);
                    let others_dirty = m.dirty_by & !self.aicpu_mask() != 0;
                    let lw = m.last_writer;
                    let ordered = lw == NONE || lw == a || st.vc[lw as usize] >= m.last_wb_t;
                    l.origin.set(&m.mem);
                    l.fill_gen = m.r#gen;
                    l.fill_ok = !others_dirty && ordered;
                    l.dirty = 0;
                    l.owned = false;
                    let key = cl.keys.len() as u32;
                    cl.lines.insert(line, Held { key, copy: l });
                    self.cluster_set_of(line).count_in();
                    cl.keys.push(line);
                }
                let l = cl.lines.get_mut(&line).expect("inserted above");
                if !l.owned {
                    l.owned = true;
                    let others_dirty = m.dirty_by & !self.aicpu_mask();
                    if !l.fill_ok || m.r#gen != l.fill_gen || others_dirty != 0 {
                        let lw = if others_dirty != 0 { others_dirty.trailing_zeros() as u16 } else { m.last_writer };
                        found.push(self.violation(
                            a,
                            "store",
                            line + lo as u64,
                            (lw, m.last_wb_t),
                            Missing::WholeLineRule,
                        ));
                    }
                }
                l.data[lo..hi].copy_from_slice(&src[done..done + (hi - lo)]);
                let s = Stamp::new(a, stamp);
                l.origin.fill(lo, hi, s);
                l.dirty |= byte_mask(lo, hi);
                m.last.fill(lo, hi, s);
                m.dirty_by |= 1u128 << a;
                done += hi - lo;
            }
        }
        for v in found {
            self.report(&st, v);
        }
        drop(st);
        self.drop_aicpu_copies(Some(a), addr, len);
    }

    /// Write back every dirty line of `[addr, addr+len)` (a range clean). An AICPU clean also
    /// writes back the lines the cluster holds dirty, whichever thread dirtied them.
    pub fn clean(&self, a: u16, addr: u64, len: u64, gm: &Gm) {
        let mut st = lock(&self.agents[a as usize]);
        self.clean_cluster(&mut st, a, addr, len, gm);
        for line in lines(addr, len) {
            self.write_back(&mut st, a, line, gm);
        }
    }

    /// Write back (when dirty) and drop every line of `[addr, addr+len)`.
    pub fn invalidate(&self, a: u16, addr: u64, len: u64, gm: &Gm) {
        let mut st = lock(&self.agents[a as usize]);
        self.clean_cluster(&mut st, a, addr, len, gm);
        for line in lines(addr, len) {
            self.drop_line(&mut st, a, line, gm, true);
        }
    }

    /// An AICPU thread's clean or invalidate of `[addr, addr+len)` writes back the lines of it
    /// the cluster holds dirty. A cluster that holds no line at all is not looked at; the count
    /// is read with an acquire, so a write-back that emptied it (another thread's eviction of
    /// one of these lines) is in memory when this clean returns, as a `dc cvac` completes a
    /// write-back already under way (see [`Faithful::cluster_write_back`]).
    pub(super) fn clean_cluster(&self, st: &mut AgentState, a: u16, addr: u64, len: u64, gm: &Gm) {
        if is_aicpu(self.n_aicpu, a) && self.aicpu_wb() {
            for line in lines(addr, len) {
                let set = self.cluster_set_of(line);
                if set.count.load(Ordering::Acquire) > 0 {
                    self.cluster_write_back(st, a, &mut lock(&set.cache), line, gm);
                }
            }
        }
    }

    /// Write back and drop every line of agent `a`'s cache.
    pub fn invalidate_all(&self, a: u16, gm: &Gm) {
        let mut st = lock(&self.agents[a as usize]);
        let keys = st.keys.clone();
        for line in keys {
            self.drop_line(&mut st, a, line, gm, true);
        }
    }

    /// A barrier: write-backs issued so far have completed.
    pub fn fence(&self, a: u16) {
        self.unfenced[a as usize].store(false, Ordering::Relaxed);
    }
}

/// The dirty-mask bits of bytes `lo..hi` of a line (`hi <= 64`).
#[inline]
fn byte_mask(lo: usize, hi: usize) -> u64 {
    let upper = if hi >= 64 { u64::MAX } else { (1u64 << hi) - 1 };
    upper & !((1u64 << lo) - 1)
}

#[cfg(test)]
mod byte_mask_tests {
    use super::byte_mask;

    #[test]
    fn byte_mask_covers_exactly_the_bytes() {
        assert_eq!(byte_mask(0, 64), u64::MAX);
        assert_eq!(byte_mask(0, 1), 1);
        assert_eq!(byte_mask(63, 64), 1 << 63);
        assert_eq!(byte_mask(8, 16), 0xff00);
        for lo in 0..64 {
            for hi in lo..=64 {
                let want = (lo..hi).fold(0u64, |m, b| m | 1 << b);
                assert_eq!(byte_mask(lo, hi), want, "{lo}..{hi}");
            }
        }
    }
}
