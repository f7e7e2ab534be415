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
//! **No lost wake-up.** The waiter stores its word's address, sets its bit (sequentially
//! consistent read-modify-write), then re-reads the word (sequentially consistent). The writer
//! writes the word with a sequentially consistent store or read-modify-write (every word write
//! that wakes is one), then reads the bucket (sequentially consistent). In the
//! single total order of those four, either the waiter's re-read comes after the write and
//! sees it (it does not sleep), or it comes before, and then the writer's bucket read comes
//! after the waiter's bit and sees it (and, acquiring it, the address stored before it). No
//! fence: on x86 the write is a locked instruction (or `xchg`) already.

use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets of the index (a power of two): several times the agents of the largest board, so
/// most writes find their bucket empty and look at no agent's address (64 measured a few per
/// cent slower on the args dump's resident route, where most word writes have no waiter).
const BUCKETS: usize = 512;

/// The monitors of a device's agents (AICPU threads, then cores: the engine's slots).
pub struct WordMonitors {
    /// Per agent: the GM address it waits on, 0 when none.
    addrs: Box<[AtomicU64]>,
    /// Per bucket, `words` mask words: bit `i` of word `w` is agent `64 w + i`, armed on a
    /// word of this bucket.
    masks: Box<[AtomicU64]>,
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
        WordMonitors {
            addrs: (0..agents).map(|_| AtomicU64::new(0)).collect(),
            masks: (0..BUCKETS * words).map(|_| AtomicU64::new(0)).collect(),
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
    }

    /// Agent `agent` no longer waits on `addr` (the address it armed on).
    pub fn disarm(&self, agent: usize, addr: u64) {
        let (m, bit) = self.mask(addr, agent);
        m.fetch_and(!bit, Ordering::SeqCst);
        self.addrs[agent].store(0, Ordering::Release);
    }

    /// Call `wake` with each agent armed on the word at `addr`; the caller has written that
    /// word just before, with a sequentially consistent store or read-modify-write.
    #[inline]
    pub fn waiters(&self, addr: u64, mut wake: impl FnMut(usize)) {
        let b = bucket(addr) * self.words;
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
