//! Lines into and out of a cache: fills, whole-line write-backs (an agent's own and the AICPU
//! cluster's), dropping a line, and the seeded random evictions.

use std::sync::atomic::Ordering;

use super::line::{CLine, Cluster, Held, LineMeta, NONE, PerByte, Stamp, gm_offset, lines};
use super::model::{AgentState, Faithful, PausePoint, is_aicpu, is_core, keep_spare, lock, remove_key};
use crate::gm::Gm;
use crate::violation::Missing;

impl Faithful {
    pub(super) fn rand(st: &mut AgentState) -> u64 {
        let mut x = st.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        st.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub(super) fn maybe_evict(&self, st: &mut AgentState, a: u16, gm: &Gm) {
        let p = self.evict_per_mille.load(Ordering::Relaxed) as u64;
        if p == 0 || st.keys.is_empty() {
            return;
        }
        if Self::rand(st) % 1000 < p {
            let r = Self::rand(st);
            let k = st.keys[(r % st.keys.len() as u64) as usize];
            self.drop_line(st, a, k, gm, true);
        }
    }

    /// An AICPU access may evict one of the cluster's dirty lines (write-back policy): a line of
    /// a set chosen at random, or of the next set that holds any (one set locked at a time), so
    /// an eviction drawn while the cluster holds a line always evicts one.
    pub(super) fn maybe_evict_cluster(&self, st: &mut AgentState, a: u16, gm: &Gm) {
        let p = self.evict_per_mille.load(Ordering::Relaxed) as u64;
        // The second draw only when some set holds a line, as when one count stood for the
        // whole cluster: a seed evicts what it evicted before.
        if p == 0 || Self::rand(st) % 1000 >= p || self.cluster.iter().all(|s| s.count.load(Ordering::Relaxed) == 0) {
            return;
        }
        let r = Self::rand(st);
        let sets = self.cluster.len();
        let first = (r % sets as u64) as usize;
        for i in 0..sets {
            let set = &self.cluster[(first + i) % sets];
            if set.count.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut cl = lock(&set.cache);
            if cl.keys.is_empty() {
                continue;
            }
            let k = cl.keys[((r / sets as u64) % cl.keys.len() as u64) as usize];
            self.cluster_write_back(st, a, &mut cl, k, gm);
            return;
        }
    }

    /// AICPU thread `a` writes the cluster's dirty copy of `line` back (whole line) and drops it.
    /// The caller holds `line`'s set (`cl`) for the whole write-back.
    ///
    /// The set's line count falls only once the bytes are in memory, with a release: a
    /// clean by another thread that reads the count (`clean_cluster`) either sees the line still
    /// counted, and so waits on the set for this write-back to end, or sees it gone, and so sees
    /// its bytes. (Falling first let a scheduler's clean of a payload pass while an orchestrator's
    /// eviction of that line was still on its way to memory: the core read the payload of two
    /// dispatches before. `a_clean_waits_for_a_write_back_another_thread_has_in_flight`.)
    pub(super) fn cluster_write_back(&self, st: &mut AgentState, a: u16, cl: &mut Cluster, line: u64, gm: &Gm) {
        let Some(l) = cl.remove(line) else { return };
        self.pause(a, PausePoint::LineTaken);
        if l.dirty == 0 {
            keep_spare(st, l);
            self.cluster_set_of(line).count_out();
            return;
        }
        let stamp = st.vc[a as usize];
        let mut clobber = None;
        {
            let mut shard = self.shard(line);
            let m = shard.record(line);
            // A whole-line write-back: a byte this copy did not dirty that memory holds newer
            // than the copy's origin is clobbered (the first such byte is reported).
            let mut clean = !l.dirty;
            while clean != 0 {
                let b = clean.trailing_zeros() as usize;
                if m.mem.get(b) != l.origin.get(b) {
                    clobber = Some((b, m.mem.get(b).pair()));
                    break;
                }
                clean &= clean - 1;
            }
            m.mem.set(&l.origin);
            m.mby = PerByte::Same(a);
            m.r#gen += 1;
            m.last_writer = a;
            m.last_wb_t = stamp;
            m.dirty_by &= !self.aicpu_mask();
            // Memory changes with its record, under the shard a fill reads both under.
            self.pause(a, PausePoint::RecordWritten);
            if let Some(off) = gm_offset(line) {
                gm.write_line(off, &l.data);
            }
        }
        keep_spare(st, l);
        self.cluster_set_of(line).count_out();
        self.unfenced[a as usize].store(true, Ordering::Relaxed);
        if let Some((b, w)) = clobber {
            let v = self.violation(a, "whole-line write-back", line + b as u64, w, Missing::WholeLineRule);
            self.report(st, v);
        }
    }

    /// Evict one of agent `a`'s lines at random when its cache is full. Done before the shard
    /// of the line to fill is locked: the eviction may write back a line of that shard.
    pub(super) fn make_room(&self, st: &mut AgentState, a: u16, gm: &Gm) {
        if st.cache.len() >= self.capacity {
            let r = Self::rand(st);
            let k = st.keys[(r % st.keys.len() as u64) as usize];
            self.drop_line(st, a, k, gm, true);
        }
    }

    /// Fill `line` (not in agent `a`'s cache, which has room) from memory, its bytes' origins
    /// from the line's record `meta` (`None`: never written), which the caller holds locked.
    pub(super) fn fill_from(
        &self,
        st: &mut AgentState,
        a: u16,
        line: u64,
        off_line: u64,
        gm: &Gm,
        meta: Option<&mut LineMeta>,
    ) {
        // The record is written in place (a reused one when there is one): no line-sized
        // temporaries are built and copied.
        let mut l = st.spare.pop().unwrap_or_else(CLine::blank);
        gm.read_line(off_line, &mut l.data);
        debug_assert!(meta.is_some() || !is_aicpu(self.n_aicpu, a), "an AICPU thread's fill marks the line's record");
        match meta {
            Some(m) => {
                if is_aicpu(self.n_aicpu, a) {
                    m.aicpu_copies |= 1 << (a - 1);
                }
                let others_dirty = m.dirty_by & !(1u128 << a) != 0;
                let lw = m.last_writer;
                let ordered = lw == NONE || lw == a || st.vc[lw as usize] >= m.last_wb_t;
                l.origin.set(&m.mem);
                l.fill_gen = m.r#gen;
                l.fill_ok = !others_dirty && ordered;
            }
            None => {
                l.origin = PerByte::Same(Stamp::NOBODY);
                l.fill_gen = 0;
                l.fill_ok = true;
            }
        }
        l.dirty = 0;
        l.owned = false;
        let key = st.keys.len() as u32;
        st.cache.insert(line, Held { key, copy: l });
        st.keys.push(line);
    }

    /// Drop every AICPU thread's own copy of the lines of `[addr, addr+len)` (but `except`'s),
    /// after a write put new bytes in memory or in the cluster's copy: the threads the lines'
    /// records mark as holders, each locked once (the others hold no copy). A thread that
    /// fills a line after its record was looked at here reads the new bytes. The caller holds
    /// no AICPU thread's state and no shard.
    pub(super) fn drop_aicpu_copies(&self, except: Option<u16>, addr: u64, len: u64) {
        let mut holders = 0u64;
        for line in lines(addr, len) {
            holders |= self.shard(line).get(&line).map_or(0, |m| m.aicpu_copies);
        }
        if let Some(a) = except {
            holders &= !(1 << (a - 1));
        }
        while holders != 0 {
            let t = holders.trailing_zeros();
            holders &= holders - 1;
            let mut other = lock(&self.agents[1 + t as usize]);
            for line in lines(addr, len) {
                let mut shard = self.shard(line);
                if let Some(m) = shard.get_mut(&line)
                    && m.aicpu_copies & (1 << t) != 0
                {
                    remove_key(&mut other, line);
                    m.aicpu_copies &= !(1 << t);
                }
            }
        }
    }

    /// Write back (when dirty) and/or drop `line` from agent `a`'s cache.
    pub(super) fn drop_line(&self, st: &mut AgentState, a: u16, line: u64, gm: &Gm, write_back: bool) {
        if write_back {
            self.write_back(st, a, line, gm);
        } else if st.dirty_lines != 0
            && let Some(l) = st.cache.get(&line)
            && l.dirty != 0
        {
            self.shard(line).record(line).dirty_by &= !(1u128 << a);
        }
        remove_key(st, line);
    }

    pub(super) fn write_back(&self, st: &mut AgentState, a: u16, line: u64, gm: &Gm) {
        // No dirty line at all (a core before its kernel's stores, an AICPU thread): the copy
        // is not looked at.
        if st.dirty_lines == 0 {
            return;
        }
        let Some(l) = st.cache.get_mut(&line) else { return };
        if l.dirty == 0 {
            return;
        }
        let stamp = st.vc[a as usize];
        let mut clobber = None;
        {
            let mut shard = self.shard(line);
            let m = shard.record(line);
            // A whole-line write-back: a byte this copy did not dirty that memory holds newer
            // than the copy's origin is clobbered (the first such byte is reported).
            let mut clean = !l.dirty;
            while clean != 0 {
                let b = clean.trailing_zeros() as usize;
                if m.mem.get(b) != l.origin.get(b) {
                    clobber = Some((b, m.mem.get(b).pair()));
                    break;
                }
                clean &= clean - 1;
            }
            m.mem.set(&l.origin);
            m.mby = PerByte::Same(a);
            m.r#gen += 1;
            m.last_writer = a;
            m.last_wb_t = stamp;
            m.dirty_by &= !(1u128 << a);
            l.fill_gen = m.r#gen;
            // Memory changes with its record, under the shard a fill reads both under.
            if let Some(off) = gm_offset(line) {
                gm.write_line(off, &l.data);
            }
        }
        l.dirty = 0;
        st.dirty_lines -= 1;
        self.unfenced[a as usize].store(true, Ordering::Relaxed);
        if let Some((b, w)) = clobber {
            let v = self.violation(a, "whole-line write-back", line + b as u64, w, Missing::WholeLineRule);
            self.report(st, v);
        }
        // The AICPU shares the AICores' coherence domain: its copy of the line is dropped.
        if is_core(self.n_aicpu, a) {
            self.drop_aicpu_copies(None, line, 1);
        }
    }
}
