//! Device-side trace recording: each AICore and each AICPU thread appends records to its own
//! ring in GM ([`TraceLayout`]) with device-direct stores, and writes the ring's header when it
//! is done with the run. With tracing off a launch carries no ring address, [`TraceRing::open`]
//! answers `None`, and the only cost left at each recording site is testing that `Option`.
//!
//! A full ring keeps its first records and counts the rest as dropped; the header reports both,
//! so an overflow is visible to the host, never silent.

use pto_hal::{Barriers, GmAddr, GmAtomic};
use zerocopy::IntoBytes;

use crate::layout::{LaunchConfig, TraceHeader, TraceLayout, TraceRecord};

/// One agent's trace ring for one run.
#[derive(Debug)]
pub struct TraceRing {
    at: GmAddr,
    cap: u32,
    count: u32,
    dropped: u64,
    epoch: u64,
}

impl TraceRing {
    /// Worker `w`'s ring (`core`) or AICPU thread `w`'s ring, when the launch traces.
    #[inline]
    pub fn open(cfg: &LaunchConfig, core: bool, w: u32) -> Option<TraceRing> {
        let l = TraceLayout::of(cfg)?;
        let (at, cap, n) = if core {
            (l.core_ring(w), l.core_records, l.workers)
        } else {
            (l.thread_ring(w), l.thread_records, l.threads)
        };
        (w < n).then_some(TraceRing { at: GmAddr(at), cap, count: 0, dropped: 0, epoch: cfg.epoch })
    }

    /// Append `r` (device-direct stores: no line of the ring is ever cached), or count it as
    /// dropped when the ring is full.
    #[inline]
    pub fn push<A: GmAtomic>(&mut self, a: &A, r: &TraceRecord) {
        if self.count >= self.cap {
            self.dropped += 1;
            return;
        }
        let at = self.at.offset(
            core::mem::size_of::<TraceHeader>() as u64 + self.count as u64 * core::mem::size_of::<TraceRecord>() as u64,
        );
        for (i, w) in r.as_bytes().chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            a.store_direct(at.offset(i as u64 * 8), u64::from_le_bytes(b));
        }
        self.count += 1;
    }

    /// A phase `[start, end)` of kind `kind`.
    #[inline]
    pub fn phase<A: GmAtomic>(&mut self, a: &A, kind: u8, start: u64, end: u64) {
        self.push(a, &TraceRecord { kind, start, end, core: u32::MAX, task: u32::MAX, ..TraceRecord::default() });
    }

    /// Write the header: count and dropped, then (after a store barrier) this run's epoch,
    /// which tells the host the ring is complete.
    pub fn close<A: GmAtomic + Barriers>(&self, a: &A) {
        a.store_direct(self.at.offset(8), self.count as u64);
        a.store_direct(self.at.offset(16), self.dropped);
        a.store_barrier();
        a.store_direct(self.at, self.epoch);
    }
}
