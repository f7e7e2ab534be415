//! Happens-before: the synchronisation the device really has, as vector clocks — launch and
//! completion on the streams, register hand-offs (DMB/COND), device-direct GM words — and host
//! DMA, with the checks each makes (a program that ends with dirty lines, a hand-off with dirty
//! or unfenced lines, a stale word or D2H read).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::line::{LINE, Stamp};
use super::model::{CLOCK_LIMIT, Faithful, HOST, Vc, is_core, join, lock};
use crate::gm::Gm;
use crate::launch::{LaunchState, MODEL_LIMIT_STATUS};
use crate::violation::{Missing, Violation};

impl Faithful {
    // ------------------------------------------------------------ launches

    /// The host submits a launch: everything it did so far happens before the launch.
    pub fn host_release(&self) -> Vc {
        let mut h = lock(&self.agents[HOST as usize]);
        let vc = h.vc.clone();
        h.vc[HOST as usize] += 1;
        vc
    }

    /// The host observed a launch's completion.
    pub fn host_acquire(&self, vc: &Vc) {
        join(&mut lock(&self.agents[HOST as usize]).vc, vc);
    }

    /// Agent `a` starts a program of `launch`, whose submission released `start`. An agent
    /// whose own clock entry reached [`CLOCK_LIMIT`] fails the launch by name
    /// ([`MODEL_LIMIT_STATUS`]) rather than let the entry wrap during it.
    pub fn job_start(&self, a: u16, start: &[u32], launch: &Arc<LaunchState>) {
        let mut st = lock(&self.agents[a as usize]);
        for (x, y) in st.vc.iter_mut().zip(start) {
            *x = (*x).max(*y);
        }
        let own = st.vc[a as usize];
        if own >= CLOCK_LIMIT {
            launch.fail_with_message(
                MODEL_LIMIT_STATUS,
                format!(
                    "the faithful cache model's clocks are exhausted: agent {a}'s entry is {own}, past the \
                     limit {CLOCK_LIMIT} of its 32 bits, after this device's runs under the model; it would \
                     wrap within a run. Open the device again (a switch of the cache model keeps the clocks)"
                ),
            );
        }
        st.foreign = true;
        self.cluster_sync(a, &mut st);
        st.current = Some(launch.clone());
    }

    /// Agent `a` ends its program: dirty lines left behind were never published.
    pub fn job_end(&self, a: u16, gm: &Gm) -> Vc {
        let mut st = lock(&self.agents[a as usize]);
        let dirty: Vec<u64> = if st.dirty_lines == 0 {
            Vec::new()
        } else {
            st.cache.iter().filter(|(_, l)| l.dirty != 0).map(|(&k, _)| k).collect()
        };
        for line in dirty {
            let (first, w) = {
                let l = &st.cache[&line];
                let b = l.dirty.trailing_zeros() as usize;
                (b, l.origin.get(b).pair())
            };
            let v = self.violation(a, "program end with a dirty line", line + first as u64, w, Missing::WriteBack);
            self.report(&st, v);
            // The bytes are lost, as on silicon they would reach memory at some later eviction.
            self.drop_line(&mut st, a, line, gm, false);
        }
        // An AICPU thread's dirty lines (write-back policy) are the cluster's and outlive its
        // program, as a real AICPU cache is not emptied when a program ends: they are not a
        // violation by themselves (AICPU-to-AICPU data needs no publication), but any other
        // agent's or the host's later read of them is (`Missing::AicpuClean`), and so is a
        // later write-back over bytes written since (the whole-line rule).
        self.unfenced[a as usize].store(false, Ordering::Relaxed);
        let vc = st.vc.clone();
        st.vc[a as usize] += 1;
        st.current = None;
        vc
    }

    // ------------------------------------------------------------ registers

    /// Agent `a` writes register `reg` (0 = DMB, 1 = COND) of physical core `phys`: a release.
    pub fn reg_write(&self, a: u16, phys: u32, reg: u32) {
        let mut st = lock(&self.agents[a as usize]);
        if is_core(self.n_aicpu, a) {
            let dirty = if st.dirty_lines == 0 { None } else { st.cache.iter().find(|(_, l)| l.dirty != 0) };
            debug_assert_eq!(dirty.is_some(), st.dirty_lines != 0, "the dirty-line count is the cache's");
            if let Some((&line, l)) = dirty {
                let b = l.dirty.trailing_zeros() as usize;
                let v = self.violation(
                    a,
                    "register hand-off",
                    line + b as u64,
                    l.origin.get(b).pair(),
                    Missing::WriteBackBeforeSignal,
                );
                self.report(&st, v);
            } else if self.unfenced[a as usize].load(Ordering::Relaxed) {
                let v = self.violation(
                    a,
                    "register hand-off",
                    0,
                    (a, st.vc[a as usize]),
                    Missing::StoreBarrierBeforeSignal,
                );
                self.report(&st, v);
            }
        }
        self.cluster_sync(a, &mut st);
        let key = (phys * 2 + reg) as usize;
        let mut r = lock(&self.regs[key]);
        r.vc.clone_from(&st.vc);
        r.version += 1;
        self.reg_versions.written[key].store(r.version, Ordering::Release);
        st.vc[a as usize] += 1;
    }

    /// Agent `a` read register `reg` of `phys`: an acquire when it changed since `a` last looked.
    pub fn reg_read(&self, a: u16, phys: u32, reg: u32) {
        let key = (phys * 2 + reg) as usize;
        let seen = &self.reg_versions.seen[a as usize * self.regs.len() + key];
        if seen.load(Ordering::Relaxed) == self.reg_versions.written[key].load(Ordering::Acquire) {
            // Nothing written since `a` last acquired this register.
            return;
        }
        let mut st = lock(&self.agents[a as usize]);
        let r = lock(&self.regs[key]);
        if seen.load(Ordering::Relaxed) != r.version {
            seen.store(r.version, Ordering::Relaxed);
            join(&mut st.vc, &r.vc);
            st.foreign = true;
            drop(r);
            self.cluster_sync(a, &mut st);
        }
    }

    // ------------------------------------------------------------ device-direct words

    /// A device-direct load of the word at arena offset `off`: acquire, and check the word.
    pub fn word_load(&self, a: u16, off: u64, addr: u64) {
        let mut st = lock(&self.agents[a as usize]);
        if let Some(vc) = self.words(off).get(&off) {
            join(&mut st.vc, vc);
            st.foreign = true;
        }
        self.cluster_sync(a, &mut st);
        let line = addr & !(LINE - 1);
        let shard = self.shard(line);
        if let Some(m) = shard.get(&line) {
            let b0 = (addr - line) as usize;
            for b in b0..b0 + 8 {
                if let Some(missing) = self.stale(a, &st, m, b, m.mem.get(b), false) {
                    let v = self.violation(a, "device-direct load", line + b as u64, m.last.get(b).pair(), missing);
                    drop(shard);
                    self.report(&st, v);
                    return;
                }
            }
        }
    }

    /// A device-direct store or RMW of the word at arena offset `off` (address `addr`): a
    /// release (and acquire for RMW), and the bytes reach memory now.
    pub fn word_store(&self, a: u16, off: u64, addr: u64, rmw: bool) {
        let mut st = lock(&self.agents[a as usize]);
        self.cluster_sync(a, &mut st);
        {
            let mut words = self.words(off);
            let w = words.entry(off).or_insert_with(|| vec![0; st.vc.len()]);
            if rmw {
                join(&mut st.vc, w);
                st.foreign = true;
            }
            join(w, &st.vc);
        }
        let stamp = st.vc[a as usize];
        let line = addr & !(LINE - 1);
        let mut shard = self.shard(line);
        let m = shard.record(line);
        let b0 = (addr - line) as usize;
        let s = Stamp::new(a, stamp);
        m.last.fill(b0, b0 + 8, s);
        m.mem.fill(b0, b0 + 8, s);
        m.mby.fill(b0, b0 + 8, a);
        drop(shard);
        st.vc[a as usize] += 1;
    }

    // ------------------------------------------------------------ host DMA

    /// Host DMA writes `[addr, addr+len)`: `put(at, n)` writes the host's bytes of
    /// `[at, at+n)` to memory. Each line's piece is written under the line's shard lock, with
    /// its record: a fill (which reads memory under the same lock) sees the host's bytes only
    /// with the host's origins, never the new bytes under the old origins (a later whole-line
    /// write-back of that copy would be reported as a clobber of the bytes it carries).
    pub fn host_write(&self, addr: u64, len: u64, mut put: impl FnMut(u64, u64)) {
        let stamp = lock(&self.agents[HOST as usize]).vc[HOST as usize];
        let s = Stamp::new(HOST, stamp);
        self.by_page(addr, len, |shard, line, lo, hi| {
            put(line + lo as u64, (hi - lo) as u64);
            self.pause(HOST, super::model::PausePoint::HostWrote);
            let m = shard.record(line);
            m.last.fill(lo, hi, s);
            m.mem.fill(lo, hi, s);
            m.mby.fill(lo, hi, HOST);
            m.r#gen += 1;
            m.last_writer = HOST;
            m.last_wb_t = stamp;
        });
        if self.host_coherent {
            self.drop_aicpu_copies(None, addr, len);
        }
    }

    /// Host DMA read `[addr, addr+len)` after observing the run complete: every byte must be
    /// the latest write that happened before the read.
    pub fn host_read(&self, addr: u64, len: u64) -> Result<(), Violation> {
        let st = lock(&self.agents[HOST as usize]);
        // The first stale byte in address order is the one reported (`by_page` goes in
        // address order; the lines after it are not looked at).
        let mut first: Option<Violation> = None;
        self.by_page(addr, len, |shard, line, lo, hi| {
            if first.is_some() {
                return;
            }
            // Memory holding the last store to every byte is fresh (the common case, looked at
            // a slice at a time); only the other bytes are judged one by one.
            if let Some(m) = shard.get(&line)
                && !m.mem.same_in(&m.last, lo, hi)
            {
                for b in lo..hi {
                    if let Some(missing) = self.stale(HOST, &st, m, b, m.mem.get(b), false) {
                        first =
                            Some(self.violation(HOST, "read (D2H)", line + b as u64, m.last.get(b).pair(), missing));
                        return;
                    }
                }
            }
        });
        first.map_or(Ok(()), Err)
    }
}
