//! The faithful cache model: the simulator as the silicon behaves, so coherence bugs fail here.
//!
//! * Every AICore has a **write-back** cache of 64-byte lines over GM: a store dirties the
//!   core's copy; a load is served from the copy when present (stale or not) and fills it from
//!   memory otherwise; a write-back emits the **whole** line, bytes the core never wrote
//!   included; invalidate drops the copy (writing it back first when dirty, like `dcci`).
//! * Every AICPU thread has a cache too. What an AICPU store does is the board's
//!   [`AicpuWritePolicy`] (seed 004's unknown 3: "is GM cacheable for the AICPU, and under what
//!   write policy?"):
//!   * **write-through**: the store reaches memory at once (an AICore fill and a device-direct
//!     load see it);
//!   * **write-back** (the a2a3 default, the conservative answer): the store dirties the AICPU
//!     cluster's copy of the line and memory keeps the old bytes until that line is written back
//!     — by a range clean or invalidate (`flush_range` / `invalidate_range`) issued by **any**
//!     AICPU thread (`dc cvac` / `dc civac` act on the whole inner-shareable cluster), by a
//!     random eviction, or never (a program that ends with it is a violation). The write-back
//!     emits the whole line, as an AICore's does. The AICPU threads are one coherent SMP
//!     cluster: a line one thread dirtied is what every AICPU thread reads (the model keeps
//!     AICPU-dirty lines in one cluster-level map, and a line there has no copy in any
//!     thread's own cache). Another agent's cached or device-direct read, and a host D2H read,
//!     see memory. Under the host-coherent contract (a5) the contract's premise — completed
//!     AICPU GM writes are visible to every consumer without a clean — makes `back` behave as
//!     `through`.
//!
//!   Either way an AICore write-back drops the AICPU threads' copies of the line (one coherence
//!   domain on the read side), and host DMA writes memory, not caches: with the
//!   host-non-coherent contract (a2a3) AICPU caches keep stale lines across it; with the
//!   host-coherent contract (a5) host DMA drops them.
//! * Device-direct loads/stores and atomics act on memory and bypass every cache.
//! * Lines are evicted at seeded random points (and when a cache is full), so a run is
//!   reproducible for a seed, and every report prints the seed.
//!
//! Happens-before is tracked with vector clocks over the synchronisation the device really has:
//! register hand-offs (DMB/COND), GM atomics, and kernel launch/completion on the streams; the
//! AICPU threads, which also synchronise through their own private memory (the device-side
//! runtime's ring slots), share what they know at every HAL event and GM access. A
//! load that misses a write which happened before it is a **violation**, reported with the
//! agent, address, line, last writer and the maintenance operation that was missing. So are
//! a write-back that overwrote another agent's bytes, a line written through caches by two
//! agents whose writes are not ordered (the whole-line rule), a register write (FIN, ACK, a
//! report marker) issued while the core still holds dirty or unfenced lines, and a program that
//! ends with dirty lines. Violations fail the launch that found them.
//!
//! Locks: an agent's state, then (AICPU threads only) the cluster's dirty lines, then a line
//! shard; the shared AICPU clock and the word clocks are taken under an agent's state only.
//! An AICPU thread never holds two agent locks (it drops other threads' copies after releasing
//! its own); an AICore holds its own and then one AICPU thread's at a time; nobody takes an
//! agent lock or the cluster lock while holding a shard. So no cycle, hence no deadlock.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::config::AicpuWritePolicy;
use crate::gm::Gm;
use crate::launch::LaunchState;
use crate::violation::{Missing, Violation};

/// Agent id of the host (DMA). AICPU thread `t` is `1 + t`; AICore worker `w` is `1 + T + w`.
pub const HOST: u16 = 0;
const NONE: u16 = u16::MAX;
const LINE: u64 = 64;

type Vc = Vec<u32>;

/// Hashes a line address (a multiple of 64) with one multiply: the maps below are keyed by
/// nothing else, and SipHash dominated the model's cost.
#[derive(Default)]
struct LineHasher(u64);

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

type LineMap<V> = HashMap<u64, V, BuildHasherDefault<LineHasher>>;

fn join(into: &mut Vc, from: &Vc) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

struct CLine {
    data: [u8; 64],
    dirty: u64,
    ow: [u16; 64],
    ot: [u32; 64],
    fill_gen: u32,
    fill_ok: bool,
    owned: bool,
}

struct LineMeta {
    /// Last logical store of each byte: (agent, clock).
    tw: [u16; 64],
    tt: [u32; 64],
    /// Origin of the bytes now in memory.
    mw: [u16; 64],
    mt: [u32; 64],
    /// Who put each byte in memory (a write-back, a direct store, DMA).
    mby: [u16; 64],
    /// Write-backs of this line so far.
    r#gen: u32,
    last_writer: u16,
    last_wb_t: u32,
    /// Agents holding this line dirty.
    dirty_by: u128,
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

struct AgentState {
    vc: Vc,
    cache: LineMap<Box<CLine>>,
    keys: Vec<u64>,
    rng: u64,
    unfenced: bool,
    seen: HashMap<u32, u64, BuildHasherDefault<LineHasher>>,
    current: Option<Arc<LaunchState>>,
}

#[derive(Default)]
struct Cluster {
    lines: LineMap<Box<CLine>>,
    keys: Vec<u64>,
}

impl Cluster {
    fn remove(&mut self, line: u64) -> Option<Box<CLine>> {
        let l = self.lines.remove(&line)?;
        if let Some(i) = self.keys.iter().position(|&k| k == line) {
            self.keys.swap_remove(i);
        }
        Some(l)
    }
}

struct RegSync {
    vc: Vc,
    version: u64,
}

/// The faithful model's state for one device.
pub struct Faithful {
    seed: AtomicU64,
    evict_per_mille: AtomicU32,
    host_coherent: bool,
    /// AICPU stores stay in the cluster's cache until written back (write-back policy, and
    /// only under the host-non-coherent contract).
    aicpu_write_back: std::sync::atomic::AtomicBool,
    n_aicpu: u16,
    agents: Box<[Mutex<AgentState>]>,
    /// Lines the AICPU cluster holds dirty (write-back policy): one map for the whole cluster,
    /// so a line one thread dirtied is what every thread reads. A line here has no copy in any
    /// AICPU thread's own cache.
    cluster: Mutex<Cluster>,
    shards: Box<[Mutex<LineMap<Box<LineMeta>>>]>,
    regs: Box<[Mutex<RegSync>]>,
    words: Mutex<LineMap<Vc>>,
    /// What the AICPU threads know together: they synchronise with each other through their own
    /// memory (ready queues, counters), which the model does not see, so every AICPU
    /// acquire adds to this clock and every AICPU release carries it.
    aicpu_shared: Mutex<Vc>,
    violations: Mutex<Vec<Violation>>,
    capacity: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

fn is_core(n_aicpu: u16, a: u16) -> bool {
    a != HOST && a > n_aicpu && a != NONE
}

fn is_aicpu(n_aicpu: u16, a: u16) -> bool {
    a != HOST && a <= n_aicpu
}

impl Faithful {
    /// A model for `aicpu` AICPU threads and `cores` AICores, AICPU stores writing through
    /// (see [`Faithful::set_aicpu_writes`]).
    pub fn new(seed: u64, evict_per_mille: u32, host_coherent: bool, aicpu: u32, cores: u32) -> Faithful {
        let n = 1 + aicpu as usize + cores as usize;
        assert!(n <= 128, "the faithful model tracks at most 128 agents");
        Faithful {
            seed: AtomicU64::new(seed),
            evict_per_mille: AtomicU32::new(evict_per_mille),
            host_coherent,
            aicpu_write_back: std::sync::atomic::AtomicBool::new(false),
            n_aicpu: aicpu as u16,
            agents: (0..n)
                .map(|i| {
                    Mutex::new(AgentState {
                        vc: own_clock(n, i),
                        cache: LineMap::default(),
                        keys: Vec::new(),
                        rng: (seed ^ ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))) | 1,
                        unfenced: false,
                        seen: HashMap::default(),
                        current: None,
                    })
                })
                .collect(),
            cluster: Mutex::new(Cluster::default()),
            shards: (0..64).map(|_| Mutex::new(LineMap::default())).collect(),
            regs: (0..cores as usize * 2).map(|_| Mutex::new(RegSync { vc: vec![0; n], version: 0 })).collect(),
            words: Mutex::new(LineMap::default()),
            aicpu_shared: Mutex::new(vec![0; n]),
            violations: Mutex::new(Vec::new()),
            capacity: 256,
        }
    }

    /// The eviction seed.
    pub fn seed(&self) -> u64 {
        self.seed.load(Ordering::Relaxed)
    }

    /// Set the AICPU write policy (between runs, with [`Faithful::reset`]). Under the
    /// host-coherent contract AICPU stores are visible to every agent whatever the policy, so
    /// `WriteBack` acts as `WriteThrough` there. Returns the policy in effect.
    pub fn set_aicpu_writes(&self, policy: AicpuWritePolicy) -> AicpuWritePolicy {
        let back = policy == AicpuWritePolicy::WriteBack && !self.host_coherent;
        self.aicpu_write_back.store(back, Ordering::Relaxed);
        self.aicpu_writes()
    }

    /// The AICPU write policy in effect.
    pub fn aicpu_writes(&self) -> AicpuWritePolicy {
        if self.aicpu_wb() { AicpuWritePolicy::WriteBack } else { AicpuWritePolicy::WriteThrough }
    }

    #[inline]
    fn aicpu_wb(&self) -> bool {
        self.aicpu_write_back.load(Ordering::Relaxed)
    }

    fn aicpu_mask(&self) -> u128 {
        ((1u128 << (self.n_aicpu + 1)) - 1) & !1
    }

    /// Forget every cache, clock and line record (between runs, when no program is active).
    pub fn reset(&self, seed: u64, evict_per_mille: u32) {
        self.seed.store(seed, Ordering::Relaxed);
        self.evict_per_mille.store(evict_per_mille, Ordering::Relaxed);
        lock(&self.violations).clear();
        let n = self.agents.len();
        for (i, m) in self.agents.iter().enumerate() {
            let mut st = lock(m);
            st.vc = own_clock(n, i);
            st.cache.clear();
            st.keys.clear();
            st.rng = (seed ^ ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))) | 1;
            st.unfenced = false;
            st.seen.clear();
            st.current = None;
        }
        for s in self.shards.iter() {
            lock(s).clear();
        }
        for r in self.regs.iter() {
            let mut r = lock(r);
            r.vc = vec![0; n];
            r.version = 0;
        }
        lock(&self.words).clear();
        *lock(&self.aicpu_shared) = vec![0; n];
        *lock(&self.cluster) = Cluster::default();
    }

    /// AICPU thread `a` exchanges what it knows with the other AICPU threads (see
    /// `aicpu_shared`); other agents keep their own clocks.
    fn cluster_sync(&self, a: u16, st: &mut AgentState) {
        if a != HOST && !is_core(self.n_aicpu, a) {
            let mut shared = lock(&self.aicpu_shared);
            join(&mut shared, &st.vc);
            join(&mut st.vc, &shared);
        }
    }

    /// Agent id of AICPU thread `t`.
    pub fn aicpu_id(&self, t: u32) -> u16 {
        1 + t as u16
    }

    /// Agent id of AICore worker `w`.
    pub fn core_id(&self, w: u32) -> u16 {
        1 + self.n_aicpu + w as u16
    }

    fn name(&self, a: u16) -> String {
        if a == HOST {
            "host".into()
        } else if a == NONE {
            "nobody (initial contents)".into()
        } else if a <= self.n_aicpu {
            format!("aicpu {}", a - 1)
        } else {
            format!("core {}", a - 1 - self.n_aicpu)
        }
    }

    fn shard(&self, line: u64) -> MutexGuard<'_, LineMap<Box<LineMeta>>> {
        lock(&self.shards[((line / LINE) % self.shards.len() as u64) as usize])
    }

    fn report(&self, st: &AgentState, v: Violation) {
        if let Some(l) = &st.current {
            l.fail_with_violation(v.clone());
        }
        let mut vs = lock(&self.violations);
        if vs.len() < 256 {
            vs.push(v);
        }
    }

    /// Every violation found so far (kept until [`Faithful::take_violations`]).
    pub fn take_violations(&self) -> Vec<Violation> {
        std::mem::take(&mut *lock(&self.violations))
    }

    fn violation(&self, a: u16, op: &'static str, addr: u64, writer: (u16, u32), missing: Missing) -> Violation {
        Violation {
            agent: self.name(a),
            op,
            addr,
            line: addr & !(LINE - 1),
            last_writer: format!("{} @ {}", self.name(writer.0), writer.1),
            missing,
            seed: self.seed(),
        }
    }

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

    /// Agent `a` starts a program of `launch`, whose submission released `start`.
    pub fn job_start(&self, a: u16, start: &[u32], launch: &Arc<LaunchState>) {
        let mut st = lock(&self.agents[a as usize]);
        for (x, y) in st.vc.iter_mut().zip(start) {
            *x = (*x).max(*y);
        }
        self.cluster_sync(a, &mut st);
        st.current = Some(launch.clone());
    }

    /// Agent `a` ends its program: dirty lines left behind were never published.
    pub fn job_end(&self, a: u16, gm: &Gm) -> Vc {
        let mut st = lock(&self.agents[a as usize]);
        let dirty: Vec<u64> = st.cache.iter().filter(|(_, l)| l.dirty != 0).map(|(&k, _)| k).collect();
        for line in dirty {
            let (first, w) = {
                let l = &st.cache[&line];
                let b = l.dirty.trailing_zeros() as usize;
                (b, (l.ow[b], l.ot[b]))
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
        st.unfenced = false;
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
            if let Some((&line, l)) = st.cache.iter().find(|(_, l)| l.dirty != 0) {
                let b = l.dirty.trailing_zeros() as usize;
                let v = self.violation(
                    a,
                    "register hand-off",
                    line + b as u64,
                    (l.ow[b], l.ot[b]),
                    Missing::WriteBackBeforeSignal,
                );
                self.report(&st, v);
            } else if st.unfenced {
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
        let mut r = lock(&self.regs[(phys * 2 + reg) as usize]);
        r.vc.clone_from(&st.vc);
        r.version += 1;
        st.vc[a as usize] += 1;
    }

    /// Agent `a` read register `reg` of `phys`: an acquire when it changed since `a` last looked.
    pub fn reg_read(&self, a: u16, phys: u32, reg: u32) {
        let mut st = lock(&self.agents[a as usize]);
        let r = lock(&self.regs[(phys * 2 + reg) as usize]);
        let key = phys * 2 + reg;
        if st.seen.get(&key) != Some(&r.version) {
            st.seen.insert(key, r.version);
            join(&mut st.vc, &r.vc);
            drop(r);
            self.cluster_sync(a, &mut st);
        }
    }

    // ------------------------------------------------------------ device-direct words

    /// A device-direct load of the word at arena offset `off`: acquire, and check the word.
    pub fn word_load(&self, a: u16, off: u64, addr: u64) {
        let mut st = lock(&self.agents[a as usize]);
        if let Some(vc) = lock(&self.words).get(&off) {
            join(&mut st.vc, vc);
        }
        self.cluster_sync(a, &mut st);
        let line = addr & !(LINE - 1);
        let shard = self.shard(line);
        if let Some(m) = shard.get(&line) {
            let b0 = (addr - line) as usize;
            for b in b0..b0 + 8 {
                if let Some(missing) = self.stale(a, &st, m, b, (m.mw[b], m.mt[b]), false) {
                    let v = self.violation(a, "device-direct load", line + b as u64, (m.tw[b], m.tt[b]), missing);
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
            let mut words = lock(&self.words);
            let w = words.entry(off).or_insert_with(|| vec![0; st.vc.len()]);
            if rmw {
                join(&mut st.vc, w);
            }
            join(w, &st.vc);
        }
        let stamp = st.vc[a as usize];
        let line = addr & !(LINE - 1);
        let mut shard = self.shard(line);
        let m = shard.entry(line).or_default();
        let b0 = (addr - line) as usize;
        for b in b0..b0 + 8 {
            m.tw[b] = a;
            m.tt[b] = stamp;
            m.mw[b] = a;
            m.mt[b] = stamp;
            m.mby[b] = a;
        }
        drop(shard);
        st.vc[a as usize] += 1;
    }

    // ------------------------------------------------------------ host DMA

    /// Host DMA wrote `[off, off+len)` at `addr`: memory now holds the host's bytes.
    pub fn host_write(&self, addr: u64, len: u64) {
        let stamp = lock(&self.agents[HOST as usize]).vc[HOST as usize];
        for line in lines(addr, len) {
            let (lo, hi) = span_in(line, addr, len);
            let mut shard = self.shard(line);
            let m = shard.entry(line).or_default();
            for b in lo..hi {
                m.tw[b] = HOST;
                m.tt[b] = stamp;
                m.mw[b] = HOST;
                m.mt[b] = stamp;
                m.mby[b] = HOST;
            }
            m.r#gen += 1;
            m.last_writer = HOST;
            m.last_wb_t = stamp;
        }
        if self.host_coherent {
            for t in 0..self.n_aicpu {
                let mut st = lock(&self.agents[1 + t as usize]);
                for line in lines(addr, len) {
                    remove_key(&mut st, line);
                }
            }
        }
    }

    /// Host DMA read `[addr, addr+len)` after observing the run complete: every byte must be
    /// the latest write that happened before the read.
    pub fn host_read(&self, addr: u64, len: u64) -> Result<(), Violation> {
        let st = lock(&self.agents[HOST as usize]);
        for line in lines(addr, len) {
            let (lo, hi) = span_in(line, addr, len);
            let shard = self.shard(line);
            if let Some(m) = shard.get(&line) {
                for b in lo..hi {
                    if let Some(missing) = self.stale(HOST, &st, m, b, (m.mw[b], m.mt[b]), false) {
                        return Err(self.violation(HOST, "read (D2H)", line + b as u64, (m.tw[b], m.tt[b]), missing));
                    }
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ cached accesses

    /// Whether byte `b` as seen (`origin`) by the reader is stale in a way that matters: the
    /// latest write happened before the read and the reader does not see it.
    fn stale(
        &self,
        reader: u16,
        st: &AgentState,
        m: &LineMeta,
        b: usize,
        origin: (u16, u32),
        hit: bool,
    ) -> Option<Missing> {
        let (w, t) = (m.tw[b], m.tt[b]);
        if origin == (w, t) || w == NONE || st.vc[w as usize] < t {
            return None;
        }
        let in_memory = (m.mw[b], m.mt[b]) == (w, t);
        Some(if hit && in_memory {
            let reader_aicpu = reader != HOST && !is_core(self.n_aicpu, reader);
            if reader_aicpu && w == HOST { Missing::InvalidateAfterHostDma } else { Missing::Invalidate }
        } else if m.dirty_by & (1u128 << w) != 0 {
            if is_aicpu(self.n_aicpu, w) { Missing::AicpuClean } else { Missing::WriteBack }
        } else if !in_memory && m.mby[b] != w {
            Missing::WholeLineRule
        } else if is_aicpu(self.n_aicpu, w) {
            Missing::AicpuClean
        } else {
            Missing::WriteBack
        })
    }

    fn rand(st: &mut AgentState) -> u64 {
        let mut x = st.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        st.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn maybe_evict(&self, st: &mut AgentState, a: u16, gm: &Gm) {
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

    /// An AICPU access may evict one of the cluster's dirty lines (write-back policy).
    fn maybe_evict_cluster(&self, st: &mut AgentState, a: u16, gm: &Gm) {
        let p = self.evict_per_mille.load(Ordering::Relaxed) as u64;
        if p == 0 || Self::rand(st) % 1000 >= p {
            return;
        }
        let r = Self::rand(st);
        let mut cl = lock(&self.cluster);
        if cl.keys.is_empty() {
            return;
        }
        let k = cl.keys[(r % cl.keys.len() as u64) as usize];
        self.cluster_write_back(st, a, &mut cl, k, gm);
    }

    /// AICPU thread `a` writes the cluster's dirty copy of `line` back (whole line) and drops it.
    fn cluster_write_back(&self, st: &mut AgentState, a: u16, cl: &mut Cluster, line: u64, gm: &Gm) {
        let Some(l) = cl.remove(line) else { return };
        if l.dirty == 0 {
            return;
        }
        let stamp = st.vc[a as usize];
        let mut clobber = None;
        {
            let mut shard = self.shard(line);
            let m = shard.entry(line).or_default();
            for b in 0..64 {
                if l.dirty & (1 << b) == 0 && (m.mw[b], m.mt[b]) != (l.ow[b], l.ot[b]) && clobber.is_none() {
                    clobber = Some((b, (m.mw[b], m.mt[b])));
                }
                m.mw[b] = l.ow[b];
                m.mt[b] = l.ot[b];
                m.mby[b] = a;
            }
            m.r#gen += 1;
            m.last_writer = a;
            m.last_wb_t = stamp;
            m.dirty_by &= !self.aicpu_mask();
        }
        if let Some(off) = gm_offset(line) {
            gm.write_bytes(off, &l.data);
        }
        st.unfenced = true;
        if let Some((b, w)) = clobber {
            let v = self.violation(a, "whole-line write-back", line + b as u64, w, Missing::WholeLineRule);
            self.report(st, v);
        }
    }

    fn fill(&self, st: &mut AgentState, a: u16, line: u64, off_line: u64, gm: &Gm) {
        if st.cache.len() >= self.capacity {
            let r = Self::rand(st);
            let k = st.keys[(r % st.keys.len() as u64) as usize];
            self.drop_line(st, a, k, gm, true);
        }
        let mut data = [0u8; 64];
        gm.read_bytes(off_line, &mut data);
        let shard = self.shard(line);
        let (ow, ot, fill_gen, fill_ok) = match shard.get(&line) {
            Some(m) => {
                let others_dirty = m.dirty_by & !(1u128 << a) != 0;
                let lw = m.last_writer;
                let ordered = lw == NONE || lw == a || st.vc[lw as usize] >= m.last_wb_t;
                (m.mw, m.mt, m.r#gen, !others_dirty && ordered)
            }
            None => ([NONE; 64], [0; 64], 0, true),
        };
        drop(shard);
        st.cache.insert(line, Box::new(CLine { data, dirty: 0, ow, ot, fill_gen, fill_ok, owned: false }));
        st.keys.push(line);
    }

    /// Write back (when dirty) and/or drop `line` from agent `a`'s cache.
    fn drop_line(&self, st: &mut AgentState, a: u16, line: u64, gm: &Gm, write_back: bool) {
        if write_back {
            self.write_back(st, a, line, gm);
        } else if let Some(l) = st.cache.get(&line) {
            if l.dirty != 0 {
                self.shard(line).entry(line).or_default().dirty_by &= !(1u128 << a);
            }
        }
        remove_key(st, line);
    }

    fn write_back(&self, st: &mut AgentState, a: u16, line: u64, gm: &Gm) {
        let Some(l) = st.cache.get_mut(&line) else { return };
        if l.dirty == 0 {
            return;
        }
        let stamp = st.vc[a as usize];
        let mut clobber = None;
        {
            let mut shard = self.shard(line);
            let m = shard.entry(line).or_default();
            for b in 0..64 {
                if l.dirty & (1 << b) == 0 && (m.mw[b], m.mt[b]) != (l.ow[b], l.ot[b]) && clobber.is_none() {
                    clobber = Some((b, (m.mw[b], m.mt[b])));
                }
                m.mw[b] = l.ow[b];
                m.mt[b] = l.ot[b];
                m.mby[b] = a;
            }
            m.r#gen += 1;
            m.last_writer = a;
            m.last_wb_t = stamp;
            m.dirty_by &= !(1u128 << a);
            l.fill_gen = m.r#gen;
        }
        if let Some(off) = gm_offset(line) {
            gm.write_bytes(off, &l.data);
        }
        l.dirty = 0;
        st.unfenced = true;
        if let Some((b, w)) = clobber {
            let v = self.violation(a, "whole-line write-back", line + b as u64, w, Missing::WholeLineRule);
            self.report(st, v);
        }
        // The AICPU shares the AICores' coherence domain: its copy of the line is dropped.
        if is_core(self.n_aicpu, a) {
            for t in 0..self.n_aicpu {
                remove_key(&mut lock(&self.agents[1 + t as usize]), line);
            }
        }
    }

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
            if cluster {
                // A line the cluster holds dirty is what every AICPU thread reads.
                let mut found = None;
                let served = {
                    let cl = lock(&self.cluster);
                    match cl.lines.get(&line) {
                        Some(l) => {
                            let shard = self.shard(line);
                            if let Some(m) = shard.get(&line) {
                                for b in lo..hi {
                                    if let Some(missing) = self.stale(a, &st, m, b, (l.ow[b], l.ot[b]), true) {
                                        found = Some(self.violation(
                                            a,
                                            "load",
                                            line + b as u64,
                                            (m.tw[b], m.tt[b]),
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
                if let Some(v) = found {
                    self.report(&st, v);
                }
                if served {
                    done += hi - lo;
                    continue;
                }
            }
            let hit = st.cache.contains_key(&line);
            if !hit {
                self.fill(&mut st, a, line, off + line - addr, gm);
            }
            let mut found = None;
            {
                let l = &st.cache[&line];
                let shard = self.shard(line);
                if let Some(m) = shard.get(&line) {
                    for b in lo..hi {
                        if let Some(missing) = self.stale(a, &st, m, b, (l.ow[b], l.ot[b]), hit) {
                            found = Some(self.violation(a, "load", line + b as u64, (m.tw[b], m.tt[b]), missing));
                            break;
                        }
                    }
                }
                dst[done..done + (hi - lo)].copy_from_slice(&l.data[lo..hi]);
            }
            done += hi - lo;
            if let Some(v) = found {
                self.report(&st, v);
            }
        }
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
            if !st.cache.contains_key(&line) {
                self.fill(&mut st, a, line, off + line - addr, gm);
            }
            let mut violation = None;
            {
                let mut shard = self.shard(line);
                let m = shard.entry(line).or_default();
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
                for (i, b) in (lo..hi).enumerate() {
                    l.data[b] = src[done + i];
                    l.ow[b] = a;
                    l.ot[b] = stamp;
                    m.tw[b] = a;
                    m.tt[b] = stamp;
                    if core {
                        l.dirty |= 1 << b;
                    } else {
                        // AICPU stores write through.
                        m.mw[b] = a;
                        m.mt[b] = stamp;
                        m.mby[b] = a;
                    }
                }
                if core {
                    m.dirty_by |= 1u128 << a;
                } else {
                    m.r#gen += 1;
                    m.last_writer = a;
                    m.last_wb_t = stamp;
                    l.fill_gen = m.r#gen;
                }
            }
            if !core {
                gm.write_bytes(off + done as u64, &src[done..done + (hi - lo)]);
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
            for t in 0..self.n_aicpu {
                if 1 + t != a {
                    let mut other = lock(&self.agents[1 + t as usize]);
                    for line in lines(addr, len) {
                        remove_key(&mut other, line);
                    }
                }
            }
        }
    }

    /// An AICPU store under the write-back policy: the bytes go to the cluster's dirty copy of
    /// each line (filled from memory when the cluster has none), not to memory; every AICPU
    /// thread's own copy of those lines is dropped (the cluster's copy supersedes it).
    fn store_write_back(&self, a: u16, mut st: MutexGuard<'_, AgentState>, addr: u64, off: u64, src: &[u8], gm: &Gm) {
        self.maybe_evict_cluster(&mut st, a, gm);
        let stamp = st.vc[a as usize];
        let len = src.len() as u64;
        let mut done = 0usize;
        let mut found = Vec::new();
        {
            let mut cl = lock(&self.cluster);
            for line in lines(addr, len) {
                let (lo, hi) = span_in(line, addr, len);
                remove_key(&mut st, line);
                if !cl.lines.contains_key(&line) {
                    if cl.lines.len() >= self.capacity {
                        let r = Self::rand(&mut st);
                        let k = cl.keys[(r % cl.keys.len() as u64) as usize];
                        self.cluster_write_back(&mut st, a, &mut cl, k, gm);
                    }
                    let mut data = [0u8; 64];
                    gm.read_bytes(off + line - addr, &mut data);
                    let (ow, ot, fill_gen, fill_ok) = match self.shard(line).get(&line) {
                        Some(m) => {
                            let others_dirty = m.dirty_by & !self.aicpu_mask() != 0;
                            let lw = m.last_writer;
                            let ordered = lw == NONE || lw == a || st.vc[lw as usize] >= m.last_wb_t;
                            (m.mw, m.mt, m.r#gen, !others_dirty && ordered)
                        }
                        None => ([NONE; 64], [0; 64], 0, true),
                    };
                    cl.lines.insert(line, Box::new(CLine { data, dirty: 0, ow, ot, fill_gen, fill_ok, owned: false }));
                    cl.keys.push(line);
                }
                let mut shard = self.shard(line);
                let m = shard.entry(line).or_default();
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
                for (i, b) in (lo..hi).enumerate() {
                    l.data[b] = src[done + i];
                    l.ow[b] = a;
                    l.ot[b] = stamp;
                    l.dirty |= 1 << b;
                    m.tw[b] = a;
                    m.tt[b] = stamp;
                }
                m.dirty_by |= 1u128 << a;
                done += hi - lo;
            }
        }
        for v in found {
            self.report(&st, v);
        }
        drop(st);
        for t in 0..self.n_aicpu {
            if 1 + t != a {
                let mut other = lock(&self.agents[1 + t as usize]);
                for line in lines(addr, len) {
                    remove_key(&mut other, line);
                }
            }
        }
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

    fn clean_cluster(&self, st: &mut AgentState, a: u16, addr: u64, len: u64, gm: &Gm) {
        if is_aicpu(self.n_aicpu, a) && self.aicpu_wb() {
            let mut cl = lock(&self.cluster);
            if cl.lines.is_empty() {
                return;
            }
            for line in lines(addr, len) {
                self.cluster_write_back(st, a, &mut cl, line, gm);
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
        lock(&self.agents[a as usize]).unfenced = false;
    }
}

/// A fresh clock for agent `i` of `n`: its own entry starts at 1, so its first stores (stamp 1)
/// are visible to others only after its first release.
fn own_clock(n: usize, i: usize) -> Vc {
    let mut v = vec![0; n];
    v[i] = 1;
    v
}

fn remove_key(st: &mut AgentState, line: u64) {
    if st.cache.remove(&line).is_some() {
        if let Some(i) = st.keys.iter().position(|&k| k == line) {
            st.keys.swap_remove(i);
        }
    }
}

fn gm_offset(line: u64) -> Option<u64> {
    line.checked_sub(crate::gm::GM_BASE)
}

/// The lines covering `[addr, addr+len)`.
fn lines(addr: u64, len: u64) -> impl Iterator<Item = u64> {
    let first = addr & !(LINE - 1);
    let end = if len == 0 { first } else { (addr + len + LINE - 1) & !(LINE - 1) };
    (first..end).step_by(LINE as usize)
}

/// The byte range of `line` that `[addr, addr+len)` covers.
fn span_in(line: u64, addr: u64, len: u64) -> (usize, usize) {
    let lo = addr.max(line) - line;
    let hi = (addr + len).min(line + LINE) - line;
    (lo as usize, hi as usize)
}

impl Faithful {
    /// Eviction probability per access, per mille.
    pub fn evict_per_mille(&self) -> u32 {
        self.evict_per_mille.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pto_hal::GmAddr;

    // Agents: host 0, AICPU thread 0 = 1, cores 0 and 1 = 2 and 3.
    const CPU: u16 = 1;
    const C0: u16 = 2;
    const C1: u16 = 3;

    fn setup(host_coherent: bool) -> (Gm, Faithful, u64, u64) {
        let gm = Gm::new(1 << 20);
        let a = gm.alloc(4096, 64).unwrap();
        let off = gm.offset_of(a, 4096).unwrap();
        (gm, Faithful::new(9, 0, host_coherent, 1, 2), a.0, off)
    }

    fn missing(f: &Faithful) -> Vec<Missing> {
        f.take_violations().into_iter().map(|v| v.missing).collect()
    }

    /// Core 0 hands off to core 1 through the AICPU: COND of core 0, then DMB of core 1.
    fn handoff(f: &Faithful) {
        f.reg_write(C0, 0, 1);
        f.reg_read(CPU, 0, 1);
        f.reg_write(CPU, 1, 0);
        f.reg_read(C1, 1, 0);
    }

    #[test]
    fn unpublished_store_is_a_missing_write_back() {
        let (gm, f, a, off) = setup(false);
        f.store(C0, a, off, &[7; 8], &gm);
        handoff(&f);
        let mut b = [0u8; 8];
        f.load(C1, a, off, &mut b, &gm);
        assert_eq!(b, [0; 8], "the bytes never reached memory");
        assert_eq!(missing(&f), [Missing::WriteBackBeforeSignal, Missing::WriteBack]);
    }

    #[test]
    fn published_store_is_seen() {
        let (gm, f, a, off) = setup(false);
        f.store(C0, a, off, &[7; 8], &gm);
        f.clean(C0, a, 8, &gm);
        f.fence(C0);
        handoff(&f);
        let mut b = [0u8; 8];
        f.load(C1, a, off, &mut b, &gm);
        assert_eq!(b, [7; 8]);
        assert_eq!(missing(&f), []);
    }

    #[test]
    fn write_back_without_barrier_before_signal_is_caught() {
        let (gm, f, a, off) = setup(false);
        f.store(C0, a, off, &[7; 8], &gm);
        f.clean(C0, a, 8, &gm);
        handoff(&f);
        assert_eq!(missing(&f), [Missing::StoreBarrierBeforeSignal]);
    }

    #[test]
    fn stale_copy_needs_an_invalidate() {
        for invalidate in [false, true] {
            let (gm, f, a, off) = setup(false);
            let mut b = [0u8; 8];
            f.load(C1, a, off, &mut b, &gm); // core 1 caches the line
            f.store(C0, a, off, &[7; 8], &gm);
            f.clean(C0, a, 8, &gm);
            f.fence(C0);
            handoff(&f);
            if invalidate {
                f.invalidate(C1, a, 8, &gm);
            }
            f.load(C1, a, off, &mut b, &gm);
            if invalidate {
                assert_eq!((b, missing(&f)), ([7; 8], vec![]));
            } else {
                assert_eq!((b, missing(&f)), ([0; 8], vec![Missing::Invalidate]));
            }
        }
    }

    #[test]
    fn host_dma_is_visible_to_the_aicpu_only_under_the_coherent_contract() {
        for coherent in [false, true] {
            let (gm, f, a, off) = setup(coherent);
            let mut b = [0u8; 8];
            f.load(CPU, a, off, &mut b, &gm); // the AICPU caches the line
            gm.write_bytes(off, &[5; 8]);
            f.host_write(a, 8);
            let launch = LaunchState::new(1, 4);
            f.job_start(CPU, &f.host_release(), &launch);
            f.load(CPU, a, off, &mut b, &gm);
            if coherent {
                assert_eq!((b, missing(&f)), ([5; 8], vec![]));
            } else {
                assert_eq!((b, missing(&f)), ([0; 8], vec![Missing::InvalidateAfterHostDma]));
            }
        }
    }

    #[test]
    fn two_unordered_writers_of_one_line_break_the_whole_line_rule() {
        let (gm, f, a, off) = setup(false);
        f.store(C0, a, off, &[1; 8], &gm);
        f.store(C1, a + 32, off + 32, &[2; 8], &gm);
        assert_eq!(missing(&f), [Missing::WholeLineRule]);
        // Both write back: the second whole-line write-back clobbers the first one's bytes.
        f.clean(C0, a, 64, &gm);
        f.clean(C1, a, 64, &gm);
        assert_eq!(missing(&f), [Missing::WholeLineRule]);
        let mut b = [9u8; 8];
        gm.read_bytes(off, &mut b);
        assert_eq!(b, [0; 8], "core 0's bytes were overwritten by core 1's stale copy");
    }

    #[test]
    fn ordered_writers_may_share_a_line() {
        let (gm, f, a, off) = setup(false);
        f.store(C0, a, off, &[1; 8], &gm);
        f.clean(C0, a, 64, &gm);
        f.fence(C0);
        handoff(&f);
        f.invalidate(C1, a, 64, &gm);
        f.store(C1, a + 32, off + 32, &[2; 8], &gm);
        f.clean(C1, a, 64, &gm);
        assert_eq!(missing(&f), []);
        let mut b = [0u8; 64];
        gm.read_bytes(off, &mut b);
        assert_eq!((&b[..8], &b[32..40]), (&[1u8; 8][..], &[2u8; 8][..]));
    }

    #[test]
    fn aicpu_threads_hand_work_to_each_other() {
        // Two AICPU threads (1, 2) and two cores (3, 4): thread 1 sees core 3 finish, thread 2
        // (which learnt of it through the AICPU's own memory) dispatches the consumer to core 4.
        let gm = Gm::new(1 << 20);
        let a = gm.alloc(4096, 64).unwrap().0;
        let off = gm.offset_of(GmAddr(a), 64).unwrap();
        let f = Faithful::new(9, 0, false, 2, 2);
        f.store(3, a, off, &[4; 8], &gm);
        f.clean(3, a, 64, &gm);
        f.fence(3);
        f.reg_write(3, 0, 1);
        f.reg_read(1, 0, 1);
        f.reg_write(2, 1, 0);
        f.reg_read(4, 1, 0);
        // Core 4 takes the line over (a WAW consumer): ordered after core 3's write-back.
        f.store(4, a + 8, off + 8, &[5; 8], &gm);
        f.clean(4, a, 64, &gm);
        assert_eq!(missing(&f), []);
        let mut b = [0u8; 16];
        gm.read_bytes(off, &mut b);
        assert_eq!(b, [4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5]);
    }

    /// The AICPU dispatches to core 0: DMB of core 0.
    fn dispatch(f: &Faithful) {
        f.reg_write(CPU, 0, 0);
        f.reg_read(C0, 0, 0);
    }

    #[test]
    fn write_back_aicpu_store_is_invisible_until_cleaned() {
        for clean in [false, true] {
            let (gm, f, a, off) = setup(false);
            assert_eq!(f.set_aicpu_writes(AicpuWritePolicy::WriteBack), AicpuWritePolicy::WriteBack);
            f.store(CPU, a, off, &[7; 8], &gm);
            let mut mem = [9u8; 8];
            gm.read_bytes(off, &mut mem);
            assert_eq!(mem, [0; 8], "a write-back AICPU store does not reach memory");
            if clean {
                f.clean(CPU, a, 8, &gm);
                f.fence(CPU);
            }
            dispatch(&f);
            f.invalidate(C0, a, 8, &gm);
            let mut b = [0u8; 8];
            f.load(C0, a, off, &mut b, &gm);
            if clean {
                assert_eq!((b, missing(&f)), ([7; 8], vec![]));
            } else {
                assert_eq!((b, missing(&f)), ([0; 8], vec![Missing::AicpuClean]));
            }
            // A device-direct load sees memory too.
            f.word_load(C0, off, a);
            assert_eq!(missing(&f), if clean { vec![] } else { vec![Missing::AicpuClean] });
        }
    }

    #[test]
    fn write_through_aicpu_store_needs_no_clean() {
        let (gm, f, a, off) = setup(false);
        f.store(CPU, a, off, &[7; 8], &gm);
        dispatch(&f);
        f.invalidate(C0, a, 8, &gm);
        let mut b = [0u8; 8];
        f.load(C0, a, off, &mut b, &gm);
        assert_eq!((b, missing(&f)), ([7; 8], vec![]));
    }

    #[test]
    fn the_aicpu_cluster_reads_its_own_dirty_lines_and_any_thread_may_clean_them() {
        // Two AICPU threads (1, 2), one core (3).
        let gm = Gm::new(1 << 20);
        let a = gm.alloc(4096, 64).unwrap().0;
        let off = gm.offset_of(GmAddr(a), 64).unwrap();
        let f = Faithful::new(9, 0, false, 2, 1);
        f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
        let mut b = [0u8; 8];
        f.load(2, a, off, &mut b, &gm); // thread 2 caches the line (stale soon)
        f.store(1, a, off, &[4; 8], &gm);
        f.load(2, a, off, &mut b, &gm);
        assert_eq!((b, missing(&f)), ([4; 8], vec![]), "one SMP cluster: thread 2 reads thread 1's dirty line");
        f.store(2, a + 8, off + 8, &[5; 8], &gm);
        f.clean(2, a, 64, &gm); // thread 2's clean writes back thread 1's bytes too
        f.fence(2);
        f.reg_write(2, 0, 0);
        f.reg_read(3, 0, 0);
        let mut c = [0u8; 16];
        f.load(3, a, off, &mut c, &gm);
        assert_eq!((c, missing(&f)), ([4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5], vec![]));
    }

    #[test]
    fn write_back_dirty_aicpu_line_outlives_the_program_and_a_host_read_of_it_is_caught() {
        let (gm, f, a, off) = setup(false);
        f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
        f.store(CPU, a, off, &[3; 8], &gm);
        let end = f.job_end(CPU, &gm);
        assert_eq!(missing(&f), []);
        f.host_acquire(&end);
        assert_eq!(f.host_read(a, 8).map_err(|v| v.missing), Err(Missing::AicpuClean));
    }

    #[test]
    fn write_back_acts_as_write_through_under_the_host_coherent_contract() {
        let (gm, f, a, off) = setup(true);
        assert_eq!(f.set_aicpu_writes(AicpuWritePolicy::WriteBack), AicpuWritePolicy::WriteThrough);
        f.store(CPU, a, off, &[7; 8], &gm);
        let mut mem = [0u8; 8];
        gm.read_bytes(off, &mut mem);
        assert_eq!(mem, [7; 8]);
    }

    #[test]
    fn dirty_lines_at_program_end_are_reported_and_lost() {
        let (gm, f, a, off) = setup(false);
        f.store(C0, a, off, &[3; 8], &gm);
        f.job_end(C0, &gm);
        assert_eq!(missing(&f), [Missing::WriteBack]);
        let mut b = [9u8; 8];
        gm.read_bytes(off, &mut b);
        assert_eq!(b, [0; 8]);
    }
}
