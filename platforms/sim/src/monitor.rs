//! GM word monitors: which agents sleep on which GM word, so a write to a word wakes exactly
//! the agents waiting on it.
//!
//! An agent *arms* its monitor on a word, re-reads the word, and sleeps only if it still holds
//! the value it saw; every word write through the word operations (an agent's device-direct
//! store or read-modify-write, the host's word store) then asks [`WordMonitors::waiters`] who
//! waits on the written word. Byte writes and cached write-backs wake nobody: the runtime
//! waits only on words written device-direct, and every wait has a deadline, so a word written
//! otherwise is seen when the wait's slice ends. Armed monitors are indexed by a
//! hash of the word's address: a bucket is a bit mask of the agents armed on a word of that
//! hash, so a write looks at one bucket (one mask word per 64 agents) instead of every
//! agent's monitor. With every core of a board asleep on its cluster's doorbell (the resident
//! executor), a scan of every monitor per write was a fifth of the simulator's time.
//!
//! Most word writes have no waiter in their bucket, so a writer first reads the bucket's count
//! of armed agents, in a table of two bytes per bucket that stays in the processor's nearest
//! cache; only a non-zero count sends it to the bucket's masks (a table eight times larger,
//! whose line a write used to miss: a third of this function's time on the args dump's
//! resident route).
//!
//! **No lost wake-up.** The waiter stores its word's address, sets its bit, adds 1 to its
//! bucket's count (sequentially consistent read-modify-writes), then re-reads the word
//! (sequentially consistent). The writer writes the word with a sequentially consistent store
//! or read-modify-write (every word write that wakes is one), then reads the bucket's count and,
//! when it is not zero, its masks (sequentially consistent). In the single total order, either
//! the waiter's re-read comes after the write and sees it (it does not sleep), or it comes
//! before, and then the writer's count read comes after the waiter's add and sees at least 1 (a
//! count only falls by the disarm of an agent whose add preceded it, so it never drops below
//! the agents still armed), and its mask read comes after the waiter's bit and sees it (and,
//! acquiring it, the address stored before it). No fence: on x86 the write is a locked
//! instruction (or `xchg`) already.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU16, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

/// Buckets of the index (a power of two): several times the agents of the largest board, so
/// most writes find their bucket empty and look at no agent's address (64 measured a few per
/// cent slower on the args dump's resident route, where most word writes have no waiter).
/// (Eight under loom, whose every atomic is a modelled object: the protocol is the same.)
const BUCKETS: usize = if cfg!(loom) { 8 } else { 512 };

/// The monitors of a device's agents (AICPU threads, then cores: the engine's slots).
pub struct WordMonitors {
    /// Per agent: the GM address it waits on, 0 when none.
    addrs: Box<[AtomicU64]>,
    /// Per bucket, `words` mask words: bit `i` of word `w` is agent `64 w + i`, armed on a
    /// word of this bucket.
    masks: Box<[AtomicU64]>,
    /// Per bucket, how many agents are armed on a word of it (the bits set in its masks).
    armed: Box<[AtomicU16]>,
    /// Mask words per bucket.
    words: usize,
}

/// The bucket of GM address `addr` (its 8-byte word, hashed).
fn bucket(addr: u64) -> usize {
    ((addr >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKETS.trailing_zeros())) as usize
}

impl WordMonitors {
    /// Monitors for `agents` agents, none armed.
    pub fn new(agents: usize) -> WordMonitors {
        let words = agents.div_ceil(64).max(1);
        assert!(agents <= u16::MAX as usize, "{agents} agents: a bucket counts at most {}", u16::MAX);
        WordMonitors {
            addrs: (0..agents).map(|_| AtomicU64::new(0)).collect(),
            masks: (0..BUCKETS * words).map(|_| AtomicU64::new(0)).collect(),
            armed: (0..BUCKETS).map(|_| AtomicU16::new(0)).collect(),
            words,
        }
    }

    fn mask(&self, addr: u64, agent: usize) -> (&AtomicU64, u64) {
        (&self.masks[bucket(addr) * self.words + agent / 64], 1 << (agent % 64))
    }

    /// Agent `agent` waits on the word at `addr` (non-zero) until [`WordMonitors::disarm`]. The
    /// caller re-reads the word after this (sequentially consistent) before it sleeps.
    pub fn arm(&self, agent: usize, addr: u64) {
        self.addrs[agent].store(addr, Ordering::SeqCst);
        let (m, bit) = self.mask(addr, agent);
        m.fetch_or(bit, Ordering::SeqCst);
        self.armed[bucket(addr)].fetch_add(1, Ordering::SeqCst);
        loom_sc_point();
    }

    /// Agent `agent` no longer waits on `addr` (the address it armed on).
    pub fn disarm(&self, agent: usize, addr: u64) {
        self.armed[bucket(addr)].fetch_sub(1, Ordering::SeqCst);
        let (m, bit) = self.mask(addr, agent);
        m.fetch_and(!bit, Ordering::SeqCst);
        self.addrs[agent].store(0, Ordering::Release);
    }

    /// Call `wake` with each agent armed on the word at `addr`; the caller has written that
    /// word just before, with a sequentially consistent store or read-modify-write.
    #[inline]
    pub fn waiters(&self, addr: u64, mut wake: impl FnMut(usize)) {
        loom_sc_point();
        let b = bucket(addr);
        if self.armed[b].load(Ordering::SeqCst) == 0 {
            return;
        }
        let b = b * self.words;
        for w in 0..self.words {
            let mut bits = self.masks[b + w].load(Ordering::SeqCst);
            while bits != 0 {
                let i = 64 * w + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if self.addrs[i].load(Ordering::Acquire) == addr {
                    wake(i);
                }
            }
        }
    }
}

/// Where the argument above rests on sequentially consistent accesses being totally ordered
/// with each other (the waiter's add before its re-read, the writer's word write before its
/// count read: the store-buffering shape). Loom models a `SeqCst` access as acquire-release and
/// would report that shape broken although the language's model forbids it; its `SeqCst` fence
/// it models exactly, so under loom one stands at each of the two places. Elsewhere nothing is
/// needed: the accesses are `SeqCst` (and on x86 the add is a locked instruction, the write a
/// locked instruction or `xchg`).
#[inline(always)]
fn loom_sc_point() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn woken(m: &WordMonitors, addr: u64) -> Vec<usize> {
        let mut v = Vec::new();
        m.waiters(addr, |i| v.push(i));
        v
    }

    /// A write wakes exactly the agents armed on its word, across mask words and whatever
    /// else shares the bucket; a disarmed agent is not woken.
    #[test]
    fn a_write_wakes_exactly_the_agents_armed_on_its_word() {
        let m = WordMonitors::new(130);
        // Two words in one bucket, so the address check is what tells them apart.
        let a = 0x1000_0040u64;
        let b = (1..).map(|i| a + 8 * i).find(|&x| bucket(x) == bucket(a)).expect("a colliding word");
        m.arm(0, a);
        m.arm(65, a);
        m.arm(129, b);
        m.arm(7, a + 8);
        assert_eq!(woken(&m, a), [0, 65]);
        assert_eq!(woken(&m, b), [129]);
        m.disarm(65, a);
        assert_eq!(woken(&m, a), [0]);
        m.disarm(0, a);
        m.disarm(129, b);
        m.disarm(7, a + 8);
        assert!(woken(&m, a).is_empty() && woken(&m, b).is_empty() && woken(&m, a + 8).is_empty());
        assert!(m.masks.iter().all(|w| w.load(Ordering::Relaxed) == 0), "every bit cleared");
        assert!(m.armed.iter().all(|c| c.load(Ordering::Relaxed) == 0), "every count back to zero");
    }

    /// The hash spreads words a line apart (a board's doorbells, per-cluster words) over the
    /// buckets: 64 consecutive lines land in at least 56 distinct buckets of the 512 (random
    /// placement would give about 60), so a write rarely shares its bucket with another
    /// waiter's word.
    #[test]
    fn words_a_line_apart_spread_over_the_buckets() {
        let used: std::collections::BTreeSet<usize> = (0..64u64).map(|i| bucket(0x4000_0000 + 64 * i)).collect();
        assert!(used.len() >= 56, "{} buckets for 64 lines", used.len());
    }
}

/// The no-lost-wake-up argument above, checked by loom over every interleaving of a waiter
/// (arm, re-read, sleep when unchanged), a writer (store, then [`WordMonitors::waiters`]) and a
/// third agent arming and disarming a word of the same bucket (moving its count under both).
/// Run with `RUSTFLAGS="--cfg loom" cargo test -p pto-sim --release --lib loom_model`. The
/// reproducer is one line: a disarm that stores 0 into its bucket's count instead of taking its
/// own 1 away lets the third agent's disarm hide the waiter from the writer, and the model
/// fails (as it does without the fences of `loom_sc_point`, loom's own limit).
#[cfg(all(test, loom))]
mod loom_model {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;

    #[test]
    fn a_waiter_that_sleeps_on_an_unchanged_word_is_woken_by_its_write() {
        loom::model(|| {
            let m = Arc::new(WordMonitors::new(2));
            let a = 0x1000_0040u64;
            let other = (1..).map(|i| a + 8 * i).find(|&x| bucket(x) == bucket(a)).expect("a colliding word");
            let word = Arc::new(AtomicU64::new(0));
            let woken = Arc::new(AtomicBool::new(false));
            let writer = {
                let (m, word, woken) = (m.clone(), word.clone(), woken.clone());
                loom::thread::spawn(move || {
                    word.store(1, Ordering::SeqCst);
                    m.waiters(a, |i| {
                        if i == 0 {
                            woken.store(true, Ordering::SeqCst);
                        }
                    });
                })
            };
            let churn = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    m.arm(1, other);
                    m.disarm(1, other);
                })
            };
            m.arm(0, a);
            let sleeps = word.load(Ordering::SeqCst) == 0;
            writer.join().unwrap();
            churn.join().unwrap();
            assert!(!sleeps || woken.load(Ordering::SeqCst), "the waiter slept on a word written after it armed");
            m.disarm(0, a);
        });
    }
}
