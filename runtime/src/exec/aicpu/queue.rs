//! The ready queue: a bounded lock-free multi-producer multi-consumer queue of task ids.
//!
//! Vyukov's design: every slot carries a sequence number. A slot at position `p` is free for
//! the producer of lap `p` when `seq == p`, and holds a value for the consumer when
//! `seq == p + 1`; the consumer hands it to the next lap by storing `p + capacity`.
//! Producers and consumers claim positions with a CAS on their own counter, so each value is
//! delivered exactly once. Values are stored in atomics (no `unsafe`); the sequence number's
//! release/acquire pair publishes them.

use alloc::boxed::Box;

use crate::sync::{AtomicU32, AtomicUsize, Ordering};

struct Slot {
    seq: AtomicUsize,
    value: AtomicU32,
}

/// AICPU bytes of one queue entry (what a queue of capacity `n` costs per value).
pub const ENTRY_BYTES: u64 = core::mem::size_of::<Slot>() as u64;

/// A bounded MPMC queue of `u32` values.
pub struct ReadyQueue {
    slots: Box<[Slot]>,
    mask: usize,
    enqueue: AtomicUsize,
    dequeue: AtomicUsize,
}

/// The queue was full; the value is handed back.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Full(pub u32);

impl ReadyQueue {
    /// A queue holding at least `capacity` values (rounded up to a power of two, at least 2).
    pub fn with_capacity(capacity: usize) -> ReadyQueue {
        let cap = capacity.max(2).next_power_of_two();
        ReadyQueue {
            slots: (0..cap).map(|i| Slot { seq: AtomicUsize::new(i), value: AtomicU32::new(0) }).collect(),
            mask: cap - 1,
            enqueue: AtomicUsize::new(0),
            dequeue: AtomicUsize::new(0),
        }
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Append `v`; `Err(Full(v))` when every slot is taken.
    pub fn push(&self, v: u32) -> Result<(), Full> {
        let mut pos = self.enqueue.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let dif = seq as isize - pos as isize;
            if dif == 0 {
                match self.enqueue.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        slot.value.store(v, Ordering::Relaxed);
                        slot.seq.store(pos + 1, Ordering::Release);
                        return Ok(());
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return Err(Full(v));
            } else {
                pos = self.enqueue.load(Ordering::Relaxed);
            }
        }
    }

    /// Take the oldest value, if any.
    pub fn pop(&self) -> Option<u32> {
        let mut pos = self.dequeue.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let dif = seq as isize - (pos + 1) as isize;
            if dif == 0 {
                match self.dequeue.compare_exchange_weak(pos, pos + 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        let v = slot.value.load(Ordering::Relaxed);
                        slot.seq.store(pos + self.mask + 1, Ordering::Release);
                        return Some(v);
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return None;
            } else {
                pos = self.dequeue.load(Ordering::Relaxed);
            }
        }
    }

    /// Whether the queue looked empty at some instant during the call (a hint).
    pub fn is_empty_hint(&self) -> bool {
        self.dequeue.load(Ordering::Relaxed) >= self.enqueue.load(Ordering::Relaxed)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_bounded() {
        let q = ReadyQueue::with_capacity(3);
        assert_eq!(q.capacity(), 4);
        for i in 0..4 {
            q.push(i).unwrap();
        }
        assert_eq!(q.push(9), Err(Full(9)));
        assert_eq!(q.pop(), Some(0));
        q.push(4).unwrap();
        assert_eq!((1..=4).map(|_| q.pop().unwrap()).collect::<alloc::vec::Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(q.pop(), None);
        assert!(q.is_empty_hint());
    }

    #[test]
    fn concurrent_values_delivered_exactly_once() {
        extern crate std;
        use std::sync::Arc;
        let q = Arc::new(ReadyQueue::with_capacity(1024));
        let producers: alloc::vec::Vec<_> = (0..2u32)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..5000u32 {
                        let mut v = p * 5000 + i;
                        while let Err(Full(back)) = q.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut seen = alloc::vec![false; 10000];
        let mut got = 0;
        while got < 10000 {
            match q.pop() {
                Some(v) => {
                    assert!(!seen[v as usize], "value {v} delivered twice");
                    seen[v as usize] = true;
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert!(q.pop().is_none());
    }
}
/// Loom models of the ready queue (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;
