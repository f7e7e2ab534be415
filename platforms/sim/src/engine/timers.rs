//! The coroutine engine's timers: the deadlines of blocked agents, earliest first.
//!
//! An agent blocks with a deadline far more often than the deadline passes (a core waits for
//! its next dispatch with an idle budget of seconds and is woken a microsecond later), so a
//! wake does not look for its timer: the entry stays, and is dropped when it reaches the front
//! and its agent no longer waits for that deadline (or when stale entries pile up). A min-heap
//! of `(deadline, slot)` makes adding one a few steps of an array, where an ordered set paid
//! for a tree insertion and a removal per wait.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Deadlines of blocked agents. Every query takes `live(deadline, slot)`: whether agent `slot`
/// still waits for `deadline` (entries for which it does not are stale and are dropped).
#[derive(Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl Timers {
    /// Agent `slot` waits until `deadline`. `agents` is how many agents there are: past a few
    /// stale entries per agent, the stale ones are swept out.
    pub(super) fn add(&mut self, deadline: u64, slot: usize, agents: usize, live: impl Fn(u64, usize) -> bool) {
        if self.heap.len() >= 4 * agents + 64 {
            self.heap.retain(|&Reverse((d, i))| live(d, i));
        }
        self.heap.push(Reverse((deadline, slot)));
    }

    /// The earliest deadline an agent still waits for, and that agent.
    pub(super) fn first(&mut self, live: impl Fn(u64, usize) -> bool) -> Option<(u64, usize)> {
        while let Some(&Reverse((d, i))) = self.heap.peek() {
            if live(d, i) {
                return Some((d, i));
            }
            self.heap.pop();
        }
        None
    }

    /// Take the earliest live timer if its deadline is at or before `now`: its agent.
    pub(super) fn pop_due(&mut self, now: u64, live: impl Fn(u64, usize) -> bool) -> Option<usize> {
        let (d, i) = self.first(&live)?;
        if d > now {
            return None;
        }
        self.heap.pop();
        Some(i)
    }

    /// Entries held, stale ones included.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::Timers;
    use std::cell::RefCell;

    #[test]
    fn due_timers_come_out_earliest_first_and_stale_ones_never() {
        // waits[i]: the deadline agent i waits for, if any.
        let waits = RefCell::new(vec![None; 4]);
        let live = |d: u64, i: usize| waits.borrow()[i] == Some(d);
        let mut t = Timers::default();
        for (i, d) in [(0, 30), (1, 10), (2, 20), (3, 40)] {
            waits.borrow_mut()[i] = Some(d);
            t.add(d, i, 4, live);
        }
        // Agent 1 is woken before its deadline, then waits again, later.
        waits.borrow_mut()[1] = None;
        assert_eq!(t.first(live), Some((20, 2)), "a woken agent's timer is not the first");
        waits.borrow_mut()[1] = Some(35);
        t.add(35, 1, 4, live);
        let mut fired = Vec::new();
        while let Some(i) = t.pop_due(36, live) {
            waits.borrow_mut()[i] = None;
            fired.push(i);
        }
        assert_eq!(fired, [2, 0, 1], "due at 36: deadlines 20, 30, 35");
        assert_eq!(t.first(live), Some((40, 3)));
        assert_eq!(t.pop_due(39, live), None, "not due yet");
    }

    #[test]
    fn stale_entries_are_swept_and_stay_bounded() {
        let waits = RefCell::new(vec![None; 2]);
        let live = |d: u64, i: usize| waits.borrow()[i] == Some(d);
        let mut t = Timers::default();
        // Agent 0 waits with a far deadline and is woken early, a thousand times.
        for k in 0..1000u64 {
            waits.borrow_mut()[0] = Some(1_000_000 + k);
            t.add(1_000_000 + k, 0, 2, live);
            waits.borrow_mut()[0] = None;
        }
        assert!(t.held() <= 4 * 2 + 64 + 1, "held {}", t.held());
        assert_eq!(t.first(live), None);
        assert_eq!(t.held(), 0, "a look drops stale entries");
    }
}
