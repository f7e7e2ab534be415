//! The model's state: agent ids and vector clocks, each agent's cache and clock
//! (`AgentState`), the register and word clocks, the line shards, and the model's settings
//! (seed, eviction rate, AICPU write policy), with construction and reset between runs.

use super::spin::{Mutex, MutexGuard};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::line::{CLine, Cluster, Held, LINE, LineMap, NONE, PAGE_LINES, Records, lines, span_in};
use crate::config::AicpuWritePolicy;
use crate::launch::LaunchState;
use crate::violation::Violation;

/// Agent id of the host (DMA). AICPU thread `t` is `1 + t`; AICore worker `w` is `1 + T + w`.
pub const HOST: u16 = 0;

/// Whether agent `a` is an AICore (not the host, an AICPU thread or nobody).
pub(super) fn is_core(n_aicpu: u16, a: u16) -> bool {
    a != HOST && a > n_aicpu && a != NONE
}

/// Whether agent `a` is an AICPU thread.
pub(super) fn is_aicpu(n_aicpu: u16, a: u16) -> bool {
    a != HOST && a <= n_aicpu
}

/// A vector clock: one entry per agent.
pub(super) type Vc = Vec<u32>;

/// Joins `from` into `into` (entrywise maximum). A join runs at every register hand-off and
/// every acquire of a word, over one entry per agent (77 on an a2a3 board): eight entries at a
/// time where the host has AVX2, four (SSE2, the x86-64 baseline) otherwise.
pub(super) fn join(into: &mut Vc, from: &Vc) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the host's processor has AVX2 (detected just above), the only requirement
        // of calling a function compiled for it.
        unsafe { join_avx2(into, from) };
        return;
    }
    join_entries(into, from);
}

/// [`join_entries`] compiled for AVX2 (eight unsigned maxima per instruction).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn join_avx2(into: &mut [u32], from: &[u32]) {
    join_entries(into, from);
}

/// The entrywise maximum of `into` and `from` into `into`, over the shorter of the two.
#[inline(always)]
fn join_entries(into: &mut [u32], from: &[u32]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

/// The largest own clock entry an agent may start a launch with. Entries are 32 bits and only
/// grow (one per release; a reset restarts them above their old values), a busy agent's by
/// about 7,000 per run of 1,000 tasks, so one device reaches the limit after about 450,000
/// such runs under the model; the 2^30 left above it are more than any one run takes. A launch
/// started past it fails by name, with [`MODEL_LIMIT_STATUS`](crate::MODEL_LIMIT_STATUS), instead of
/// wrapping.
pub const CLOCK_LIMIT: u32 = u32::MAX - (1 << 30);

/// A fresh clock for agent `i` of `n` that knows every agent's stores up to `base`: its own
/// entry starts at `base + 1`, so its first stores are visible to others only after its first
/// release. A new model starts from base 0; a reset from a base above every clock entry of the
/// model before it ([`Faithful::reset`]).
pub(super) fn own_clock(n: usize, i: usize, base: u32) -> Vc {
    let mut v = vec![base; n];
    v[i] = base + 1;
    v
}

/// One agent's cache (lines, and their keys for random eviction), its clock and eviction
/// generator, the register versions it has seen, and the launch it is running (which a
/// violation fails).
pub(super) struct AgentState {
    pub(super) vc: Vc,
    pub(super) cache: LineMap<Held>,
    pub(super) keys: Vec<u64>,
    /// Lines of `cache` holding dirty bytes (a hand-off looks for one only when there is one).
    pub(super) dirty_lines: u32,
    /// Line records dropped from `cache`, reused by the next fills (no allocation per fill).
    /// Boxed because they move between this list and the cache map without reallocating.
    #[allow(clippy::vec_box)]
    pub(super) spare: Vec<Box<CLine>>,
    pub(super) rng: u64,
    pub(super) current: Option<Arc<LaunchState>>,
    /// The clock learned from outside the AICPU cluster (a launch, a register, a GM word)
    /// since this agent's last exchange with it (`cluster_sync`).
    pub(super) foreign: bool,
    /// The version of the cluster's clock this agent last joined whole.
    pub(super) shared_seen: u64,
}

/// What the AICPU threads know together, and a version raised whenever a thread adds more
/// than its threads' own entries (so a thread joins the whole clock only when it changed so).
pub(super) struct SharedClock {
    pub(super) vc: Vc,
    pub(super) version: u64,
}

/// One set of the AICPU cluster's cache: its lines, and how many it holds, readable without
/// the lock — a clean or an eviction draw that finds a set empty locks nothing. The count is
/// changed under the set's lock (so a plain load and store, no read-modify-write) by the
/// insert or the removal; a removal's fall comes after the write-back's bytes are in memory,
/// with a release, which a clean's acquire pairs with (see [`Faithful::cluster_write_back`]).
/// One count per set, beside its lock, so the orchestrating thread's inserts do not move a
/// line every other AICPU thread's clean reads.
pub(super) struct ClusterSet {
    pub(super) count: AtomicUsize,
    pub(super) cache: Mutex<Cluster>,
}

impl ClusterSet {
    /// A line came in: the count one higher (by the holder of the set's lock).
    pub(super) fn count_in(&self) {
        self.count.store(self.count.load(Ordering::Relaxed) + 1, Ordering::Release);
    }

    /// A line went out, its bytes in memory: the count one lower (by the holder of the set's
    /// lock).
    pub(super) fn count_out(&self) {
        self.count.store(self.count.load(Ordering::Relaxed) - 1, Ordering::Release);
    }
}

/// The clock a register's last write released, and how many writes it has had.
pub(super) struct RegSync {
    pub(super) vc: Vc,
    pub(super) version: u64,
}

/// Which write of each register each agent last acquired, and how many writes each register
/// has had, readable without a lock: a read of a register that was not written since the
/// reader last looked (a core polling its DMB, the scheduler polling a COND) takes no lock.
///
/// A register write raises its count (release) before the register's value is stored
/// (release); a read loads the value (acquire) before the count, so a reader that sees a value
/// sees at least the count of the write that stored it, and acquires that write's clock.
pub(super) struct RegVersions {
    /// Per register: writes so far (the `version` of its `RegSync`).
    pub(super) written: Box<[Padded<AtomicU64>]>,
    /// Per agent, per register: the count it last acquired (`u64::MAX`: never looked). Row
    /// `a` is touched by agent `a` alone (and by `reset`, when no program runs).
    pub(super) seen: Box<[AtomicU64]>,
}

impl RegVersions {
    fn new(agents: usize, regs: usize) -> RegVersions {
        RegVersions {
            written: (0..regs).map(|_| Padded(AtomicU64::new(0))).collect(),
            seen: (0..agents * regs).map(|_| AtomicU64::new(u64::MAX)).collect(),
        }
    }

    fn reset(&self) {
        self.written.iter().for_each(|w| w.store(0, Ordering::Relaxed));
        self.seen.iter().for_each(|s| s.store(u64::MAX, Ordering::Relaxed));
    }
}

/// The faithful model's state for one device.
pub struct Faithful {
    pub(super) seed: AtomicU64,
    pub(super) evict_per_mille: AtomicU32,
    pub(super) host_coherent: bool,
    /// AICPU stores stay in the cluster's cache until written back (write-back policy, and
    /// only under the host-non-coherent contract).
    pub(super) aicpu_write_back: std::sync::atomic::AtomicBool,
    pub(super) n_aicpu: u16,
    pub(super) agents: Box<[Padded<Mutex<AgentState>>]>,
    /// Per agent: whether it has write-backs not yet fenced. Apart from its state's lock:
    /// only the agent itself reads or writes its flag (and `reset`, when no program runs),
    /// and a barrier, several per task, is then one store instead of a lock and an unlock.
    pub(super) unfenced: Box<[Padded<AtomicBool>]>,
    /// Lines the AICPU cluster holds dirty (write-back policy): one cache for the whole
    /// cluster, so a line one thread dirtied is what every thread reads. A line here has no
    /// copy in any AICPU thread's own cache. The cache is [`CLUSTER_SETS`] sets of lines, a
    /// line's set chosen by its address ([`Faithful::cluster_set`]), each set locked on its
    /// own: the device-side orchestrator and a scheduler thread, on two host threads, store
    /// to different lines and so seldom wait for each other.
    pub(super) cluster: Box<[Padded<ClusterSet>]>,
    pub(super) shards: Box<[Padded<Mutex<Records>>]>,
    pub(super) regs: Box<[Padded<Mutex<RegSync>>]>,
    pub(super) reg_versions: RegVersions,
    /// The clock each device-direct word's last store or RMW released, by arena offset, in
    /// [`WORD_SHARDS`] maps a word's line chooses among (the words of one line share one), each
    /// locked on its own: the scheduler threads and the cores poll different words.
    pub(super) words: Box<[Padded<Mutex<LineMap<Vc>>>]>,
    /// What the AICPU threads know together: they synchronise with each other through their own
    /// memory (ready queues, counters), which the model does not see, so every AICPU
    /// acquire adds to this clock and every AICPU release carries it.
    pub(super) aicpu_shared: Padded<Mutex<SharedClock>>,
    pub(super) violations: Mutex<Vec<Violation>>,
    pub(super) capacity: usize,
    /// Which agent a unit test holds at which point (`Faithful::pause`).
    #[cfg(test)]
    pub(super) held: Hold,
}

/// A point inside an AICPU thread's write-back of one of the cluster's lines
/// ([`Faithful::cluster_write_back`]), its load of a line or its store, where a unit test can
/// hold the thread to force the interleaving it checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum PausePoint {
    /// The line is out of its set (the set still locked), nothing of it written yet.
    LineTaken = 1,
    /// The line's record says memory holds its bytes (its shard still locked); memory is next.
    RecordWritten = 2,
    /// An AICPU thread's load found the line not in the cluster; its own copy is next.
    ClusterMissed = 3,
    /// An AICPU thread's store (write-through) is in memory and in the line's record; dropping
    /// the other threads' copies is next.
    StoreLanded = 4,
    /// Host DMA wrote a line's piece to memory (its shard locked); the line's record is next.
    HostWrote = 5,
}

/// Which agent a unit test holds at which [`PausePoint`], whether it got there, and whether
/// the test let it go. A held agent waits at most [`Hold::MAX`]: a test that never lets go
/// is slow, never stuck.
#[cfg(test)]
#[derive(Default)]
pub(super) struct Hold {
    pub(super) at: std::sync::atomic::AtomicU8,
    pub(super) agent: std::sync::atomic::AtomicU16,
    pub(super) reached: std::sync::atomic::AtomicBool,
    pub(super) released: std::sync::atomic::AtomicBool,
}

#[cfg(test)]
impl Hold {
    pub(super) const MAX: std::time::Duration = std::time::Duration::from_secs(20);

    /// Hold agent `a` at `p` (once: the hold is spent when it lets go).
    pub(super) fn arm(&self, a: u16, p: PausePoint) {
        self.agent.store(a, Ordering::SeqCst);
        self.reached.store(false, Ordering::SeqCst);
        self.released.store(false, Ordering::SeqCst);
        self.at.store(p as u8, Ordering::SeqCst);
    }

    /// Wait until the held agent got to its point (at most [`Hold::MAX`]); whether it did.
    pub(super) fn wait_reached(&self) -> bool {
        let t = std::time::Instant::now();
        while !self.reached.load(Ordering::SeqCst) && t.elapsed() < Self::MAX {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.reached.load(Ordering::SeqCst)
    }

    /// Let the held agent go on.
    pub(super) fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

/// A value alone on its cache lines (128 bytes: two lines, as neighbouring-line prefetch
/// pairs them). The model's per-agent, per-set, per-shard and per-register states sit in
/// arrays that host threads touch at once; packed, two of them shared a line, and every lock
/// or count update of one evicted its neighbour from the other thread's cache.
#[repr(align(128))]
pub(super) struct Padded<T>(pub(super) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Takes `m`'s lock.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock()
}

/// Sets of the AICPU cluster's cache; its capacity is spread evenly over them.
pub(super) const CLUSTER_SETS: usize = 16;

/// Maps of the device-direct words' clocks (`Faithful::words`).
pub(super) const WORD_SHARDS: usize = 16;

/// Line records an agent keeps for reuse.
const SPARE_LINES: usize = 32;

/// Drops `line` from the agent's cache, without a write-back.
pub(super) fn remove_key(st: &mut AgentState, line: u64) {
    if let Some(l) = super::line::take_line(&mut st.cache, &mut st.keys, line) {
        if st.dirty_lines != 0 && l.dirty != 0 {
            st.dirty_lines -= 1;
        }
        keep_spare(st, l);
    }
}

/// Keeps the dropped line record `l` for the agent's next fill (its own cache's or, for an
/// AICPU thread, the cluster's), up to [`SPARE_LINES`].
pub(super) fn keep_spare(st: &mut AgentState, l: Box<CLine>) {
    if st.spare.len() < SPARE_LINES {
        st.spare.push(l);
    }
}

impl Faithful {
    /// A model for `aicpu` AICPU threads and `cores` AICores, AICPU stores writing through
    /// (see [`Faithful::set_aicpu_writes`]).
    pub fn new(seed: u64, evict_per_mille: u32, host_coherent: bool, aicpu: u32, cores: u32) -> Faithful {
        let n = 1 + aicpu as usize + cores as usize;
        assert!(n <= 128, "the faithful model tracks at most 128 agents");
        assert!(aicpu <= 64, "the faithful model tracks at most 64 AICPU threads");
        Faithful {
            seed: AtomicU64::new(seed),
            evict_per_mille: AtomicU32::new(evict_per_mille),
            host_coherent,
            aicpu_write_back: std::sync::atomic::AtomicBool::new(false),
            n_aicpu: aicpu as u16,
            agents: (0..n)
                .map(|i| {
                    Padded(Mutex::new(AgentState {
                        vc: own_clock(n, i, 0),
                        cache: LineMap::default(),
                        keys: Vec::new(),
                        dirty_lines: 0,
                        spare: Vec::new(),
                        rng: (seed ^ ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))) | 1,
                        current: None,
                        foreign: true,
                        shared_seen: u64::MAX,
                    }))
                })
                .collect(),
            unfenced: (0..n).map(|_| Padded(AtomicBool::new(false))).collect(),
            cluster: (0..CLUSTER_SETS)
                .map(|_| Padded(ClusterSet { count: AtomicUsize::new(0), cache: Mutex::new(Cluster::default()) }))
                .collect(),
            shards: (0..64).map(|_| Padded(Mutex::new(Records::default()))).collect(),
            regs: (0..cores as usize * 2).map(|_| Padded(Mutex::new(RegSync { vc: vec![0; n], version: 0 }))).collect(),
            reg_versions: RegVersions::new(n, cores as usize * 2),
            words: (0..WORD_SHARDS).map(|_| Padded(Mutex::new(LineMap::default()))).collect(),
            aicpu_shared: Padded(Mutex::new(SharedClock { vc: vec![0; n], version: 0 })),
            violations: Mutex::new(Vec::new()),
            capacity: 256,
            #[cfg(test)]
            held: Hold::default(),
        }
    }

    /// The eviction seed.
    pub fn seed(&self) -> u64 {
        self.seed.load(Ordering::Relaxed)
    }

    /// Eviction probability per access, per mille.
    pub fn evict_per_mille(&self) -> u32 {
        self.evict_per_mille.load(Ordering::Relaxed)
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
    pub(super) fn aicpu_wb(&self) -> bool {
        self.aicpu_write_back.load(Ordering::Relaxed)
    }

    pub(super) fn aicpu_mask(&self) -> u128 {
        ((1u128 << (self.n_aicpu + 1)) - 1) & !1
    }

    /// Forget every cache and line record, and start every clock again (between runs, when no
    /// program is active).
    ///
    /// Clocks restart *above* every entry they hold now, never from zero: a clock taken before
    /// the reset outlives it — a finished launch's end clock, which the next launch on its
    /// stream joins into its start clock, and which the host acquires when it retires that
    /// launch. Restarted from zero, a core's first stores after the reset would carry stamps
    /// that such a clock already names, and an AICPU polling the line before the core wrote it
    /// back would be told the store had been published to it (a handshake report's marker,
    /// read between the core's store and its write-back:
    /// `a_clock_from_before_a_reset_names_no_store_after_it`). Every agent starts knowing every
    /// store up to the base; none is left to know, as the line records are forgotten.
    pub fn reset(&self, seed: u64, evict_per_mille: u32) {
        self.seed.store(seed, Ordering::Relaxed);
        self.evict_per_mille.store(evict_per_mille, Ordering::Relaxed);
        lock(&self.violations).clear();
        let n = self.agents.len();
        // Any clock's entry for agent `x` is at most `x`'s own entry, which only grows.
        let base = self.agents.iter().enumerate().map(|(i, m)| lock(m).vc[i]).max().unwrap_or(0);
        for (i, m) in self.agents.iter().enumerate() {
            let mut st = lock(m);
            st.vc = own_clock(n, i, base);
            st.cache.clear();
            st.keys.clear();
            st.dirty_lines = 0;
            st.rng = (seed ^ ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))) | 1;
            st.current = None;
            st.foreign = true;
            st.shared_seen = u64::MAX;
        }
        for u in self.unfenced.iter() {
            u.store(false, Ordering::Relaxed);
        }
        for s in self.shards.iter() {
            lock(s).clear();
        }
        for r in self.regs.iter() {
            let mut r = lock(r);
            r.vc = vec![0; n];
            r.version = 0;
        }
        self.reg_versions.reset();
        for w in self.words.iter() {
            lock(w).clear();
        }
        *lock(&self.aicpu_shared) = SharedClock { vc: vec![base; n], version: 0 };
        for set in self.cluster.iter() {
            *lock(&set.cache) = Cluster::default();
            set.count.store(0, Ordering::Relaxed);
        }
    }

    /// AICPU thread `a` exchanges what it knows with the other AICPU threads (see
    /// `aicpu_shared`); other agents keep their own clocks.
    ///
    /// Each exchange opens a new epoch of `a`'s clock before it publishes: the stores `a`
    /// makes until its next exchange carry that epoch's stamp, which the cluster knows from
    /// now on (as before, a thread that exchanges next learns of them), and stores on either
    /// side of an exchange never share a stamp. Without the new epoch, an AICPU thread that
    /// publishes only through the cluster (the device-side orchestrator writing argument
    /// records) would stamp a record and its later rewrite of the same heap bytes alike, and a
    /// core reading the rewrite through the line it cached for the first would look fresh.
    ///
    /// The exchange is a join both ways of the two clocks. A thread that learned something from
    /// outside since its last exchange (`foreign`) joins its whole clock into the cluster's,
    /// which moves the cluster's version; otherwise its own entry is the only one it can know
    /// better than the cluster, and publishing it is one store (debug-asserted). Back, a thread
    /// that saw the cluster's version copies the AICPU threads' entries (the cluster's are then
    /// at least its own), and one that did not joins the cluster's whole clock.
    pub(super) fn cluster_sync(&self, a: u16, st: &mut AgentState) {
        if a != HOST && !is_core(self.n_aicpu, a) {
            st.vc[a as usize] += 1;
            let mut shared = lock(&self.aicpu_shared);
            let aicpu = 1..1 + self.n_aicpu as usize;
            if st.foreign {
                join(&mut shared.vc, &st.vc);
                shared.version += 1;
                st.foreign = false;
            } else {
                // Nothing learned from outside since the last exchange: the thread's entries of
                // the other AICPU threads came from the cluster's clock, which only grows, and
                // its own entry is its own to advance, so the join is one store.
                debug_assert!(
                    aicpu.clone().all(|t| if t == a as usize {
                        st.vc[t] >= shared.vc[t]
                    } else {
                        st.vc[t] <= shared.vc[t]
                    }),
                    "an AICPU thread that learned nothing from outside knows no more than the cluster but its own entry"
                );
                shared.vc[a as usize] = st.vc[a as usize];
            }
            if st.shared_seen == shared.version {
                // The cluster's AICPU entries are now at least the thread's: a copy is the join.
                st.vc[aicpu.clone()].copy_from_slice(&shared.vc[aicpu]);
            } else {
                join(&mut st.vc, &shared.vc);
                st.shared_seen = shared.version;
            }
        }
    }

    /// A point where a unit test may hold agent `a` ([`Hold`]); nothing outside unit tests.
    #[cfg(not(test))]
    #[inline(always)]
    pub(super) fn pause(&self, _a: u16, _p: PausePoint) {}

    /// A point where a unit test may hold agent `a` ([`Hold`]).
    #[cfg(test)]
    pub(super) fn pause(&self, a: u16, p: PausePoint) {
        let h = &self.held;
        if h.at.load(Ordering::SeqCst) != p as u8 || h.agent.load(Ordering::SeqCst) != a {
            return;
        }
        h.at.store(0, Ordering::SeqCst);
        h.reached.store(true, Ordering::SeqCst);
        let t = std::time::Instant::now();
        while !h.released.load(Ordering::SeqCst) && t.elapsed() < Hold::MAX {
            std::thread::sleep(std::time::Duration::from_millis(1));
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

    /// The set of the AICPU cluster's cache that holds `line` when the cluster has it, locked.
    /// Consecutive lines fall in consecutive sets.
    pub(super) fn cluster_set(&self, line: u64) -> MutexGuard<'_, Cluster> {
        lock(&self.cluster_set_of(line).cache)
    }

    /// The set of the AICPU cluster's cache that holds `line` when the cluster has it.
    pub(super) fn cluster_set_of(&self, line: u64) -> &ClusterSet {
        &self.cluster[((line / LINE) % CLUSTER_SETS as u64) as usize]
    }

    /// How many lines one set of the AICPU cluster's cache holds.
    pub(super) fn cluster_set_capacity(&self) -> usize {
        (self.capacity / CLUSTER_SETS).max(1)
    }

    /// The clocks of the device-direct words of the line holding arena offset `off`, locked.
    pub(super) fn words(&self, off: u64) -> MutexGuard<'_, LineMap<Vc>> {
        lock(&self.words[((off / LINE) % WORD_SHARDS as u64) as usize])
    }

    /// The shard holding `line`'s record (a page's lines share one), locked.
    pub(super) fn shard(&self, line: u64) -> MutexGuard<'_, Records> {
        lock(&self.shards[((line / (LINE * PAGE_LINES)) % self.shards.len() as u64) as usize])
    }

    /// Calls `f` with each line of `[addr, addr+len)`, in address order, and the bytes of it
    /// the range covers, holding the line's shard: locked once per page of lines, not once per
    /// line (a host DMA of the image spans thousands of lines).
    pub(super) fn by_page(&self, addr: u64, len: u64, mut f: impl FnMut(&mut Records, u64, usize, usize)) {
        let mut held: Option<(u64, MutexGuard<'_, Records>)> = None;
        for line in lines(addr, len) {
            let page = line / (LINE * PAGE_LINES);
            if held.as_ref().is_none_or(|(p, _)| *p != page) {
                // The previous page's shard is released before the next one is taken.
                drop(held.take());
                held = Some((page, self.shard(line)));
            }
            let (lo, hi) = span_in(line, addr, len);
            if let Some((_, shard)) = held.as_mut() {
                f(shard, line, lo, hi);
            }
        }
    }
}
