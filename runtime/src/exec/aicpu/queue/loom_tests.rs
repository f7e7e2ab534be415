//! Loom model of the ready queue: the real [`ReadyQueue`] (it is built on the crate's `sync`
//! shim, so it runs on loom atomics here), pushed and popped by producers and consumers in
//! every spawn order.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std --lib exec::aicpu::queue::loom_tests
//! ```
//!
//! Every model is one `#[test]` whose doc comment states the invariant it checks; each prints
//! its execution count and wall time. What loom does not cover: see `crate::loom_support`.

use loom::sync::Arc;
use loom::thread;

use crate::exec::aicpu::queue::{Full, ReadyQueue};
use crate::loom_support::harness::{Tally, check};
use crate::loom_support::jobs::{Job, ORDERS_2, job, run_jobs};
use crate::loom_support::prelude::*;

// ---------------------------------------------------------------------------------------------
// 1. Ready queue
// ---------------------------------------------------------------------------------------------

/// Push `v`, retrying while the queue reports `Full`; every `Full` must hand back `v` itself.
/// Returns how many times the push was refused.
fn push_retrying(q: &ReadyQueue, v: u32) -> usize {
    let mut refused = 0;
    loop {
        match q.push(v) {
            Ok(()) => return refused,
            Err(Full(back)) => {
                assert_eq!(back, v, "Full handed back a different value");
                refused += 1;
                thread::yield_now();
            }
        }
    }
}

/// Pop until `n` values arrived; returns them in pop order.
fn pop_n(q: &ReadyQueue, n: usize) -> Vec<u32> {
    let mut got = Vec::new();
    while got.len() < n {
        match q.pop() {
            Some(v) => got.push(v),
            None => thread::yield_now(),
        }
    }
    got
}

/// Ready queue, capacity 2, one producer pushing 1, 2, 3 (retrying on `Full`) and one consumer
/// popping three values, so the producer wraps around the ring and meets a full queue; both
/// spawn orders. Invariant: the consumer receives exactly `[1, 2, 3]` — every value once, in
/// order, nothing that was not pushed; every `Full` hands back the value being pushed and loses
/// nothing; the queue ends empty. Reached: a push refused as `Full`.
#[test]
fn queue_one_producer_one_consumer_through_full() {
    let fulls = Tally::new(1);
    for order in ORDERS_2 {
        let tally = fulls.clone();
        check("queue_one_producer_one_consumer_through_full", None, move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            assert_eq!(q.capacity(), 2);
            let (qp, qc, tally) = (q.clone(), q.clone(), tally.clone());
            let producer = job(move || {
                for v in 1..=3 {
                    if push_retrying(&qp, v) > 0 {
                        tally.hit(0);
                    }
                }
            });
            let consumer = job(move || pop_n(&qc, 3));
            let mut r = run_jobs(order, vec![producer, consumer]);
            r.take::<()>(0);
            assert_eq!(r.take::<Vec<u32>>(1), [1, 2, 3], "lost, duplicated, invented or reordered value");
            assert_eq!(q.pop(), None, "queue not empty after every value was delivered");
        });
    }
    fulls.assert_all_reached(&["push refused as Full"]);
}

/// Ready queue, capacity 2, already full with 1 and 2: one producer tries once to push 3 while
/// one consumer pops once; both spawn orders. Invariant: the pop returns the head (1); the push
/// either succeeds or returns `Full(3)`, and the queue then holds exactly `[2, 3]` or `[2]`
/// accordingly — a refused value is handed back and never also enqueued, an accepted one is
/// never lost. Reached: both outcomes.
#[test]
fn queue_full_hands_the_value_back() {
    let outcomes = Tally::new(2);
    for order in ORDERS_2 {
        let t = outcomes.clone();
        check("queue_full_hands_the_value_back", None, move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            q.push(1).unwrap();
            q.push(2).unwrap();
            assert_eq!(q.push(9), Err(Full(9)), "a full queue accepted a value");
            let (qc, qp) = (q.clone(), q.clone());
            let mut r = run_jobs(order, vec![job(move || qc.pop()), job(move || qp.push(3))]);
            assert_eq!(r.take::<Option<u32>>(0), Some(1));
            let mut rest = Vec::new();
            while let Some(v) = q.pop() {
                rest.push(v);
            }
            match r.take::<Result<(), Full>>(1) {
                Ok(()) => {
                    assert_eq!(rest, [2, 3]);
                    t.hit(0);
                }
                Err(Full(v)) => {
                    assert_eq!(v, 3);
                    assert_eq!(rest, [2]);
                    t.hit(1);
                }
            }
        });
    }
    outcomes.assert_all_reached(&["push accepted", "push refused"]);
}

/// Push each of `values` in order, trying each up to `tries` times (yielding after a `Full`);
/// every `Full` must hand back the value being pushed. Returns the values accepted.
fn push_bounded(q: &ReadyQueue, values: &[u32], tries: usize) -> Vec<u32> {
    let mut accepted = Vec::new();
    for &v in values {
        for _ in 0..tries {
            match q.push(v) {
                Ok(()) => {
                    accepted.push(v);
                    break;
                }
                Err(Full(back)) => {
                    assert_eq!(back, v, "Full handed back a different value");
                    thread::yield_now();
                }
            }
        }
    }
    accepted
}

/// Ready queue, capacity 2, two producers (one pushes 1 then 2, the other 3, each value tried
/// up to three times) and one consumer popping up to five times (yielding when empty); the
/// queue is drained after the join; producers spawned before and after the consumer.
/// Invariant: the values popped plus the values drained are exactly the values accepted — each
/// once, none lost, none invented, no refused value ever delivered (a `Full` hands its value
/// back and keeps nothing); one producer's accepted values come out in push order. Reached: a
/// push refused as `Full`, and all three values accepted. (Every wait is bounded: loom 0.7 can
/// serve a spinning thread the same stale value across yields, see the module docs.)
/// Preemption bound 3 (unbounded, it runs for many minutes).
#[test]
fn queue_two_producers_one_consumer() {
    let outcomes = Tally::new(2);
    for order in [&[0usize, 1, 2][..], &[2, 0, 1]] {
        let tally = outcomes.clone();
        check("queue_two_producers_one_consumer", Some(3), move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            let (q1, q2, qc) = (q.clone(), q.clone(), q.clone());
            let p1 = job(move || push_bounded(&q1, &[1, 2], 3));
            let p2 = job(move || push_bounded(&q2, &[3], 3));
            let consumer = job(move || {
                let mut got = Vec::new();
                for _ in 0..5 {
                    match qc.pop() {
                        Some(v) => got.push(v),
                        None => thread::yield_now(),
                    }
                }
                got
            });
            let mut r = run_jobs(order, vec![p1, p2, consumer]);
            let (a1, a2) = (r.take::<Vec<u32>>(0), r.take::<Vec<u32>>(1));
            let mut delivered = r.take::<Vec<u32>>(2);
            while let Some(v) = q.pop() {
                delivered.push(v);
            }
            let mut accepted: Vec<u32> = a1.iter().chain(&a2).copied().collect();
            let mut sorted = delivered.clone();
            accepted.sort_unstable();
            sorted.sort_unstable();
            assert_eq!(sorted, accepted, "delivered values differ from the accepted ones");
            let p1_order: Vec<u32> = delivered.iter().copied().filter(|&v| v != 3).collect();
            assert_eq!(p1_order, a1, "one producer's values out of order");
            if a1.len() + a2.len() < 3 {
                tally.hit(0);
            } else {
                tally.hit(1);
            }
        });
    }
    outcomes.assert_all_reached(&["a value refused as Full", "every value accepted"]);
}

/// Ready queue, capacity 2, two producers (values 1 and 2) and two consumers that each try up
/// to three times (yielding in between) to pop one value; producers spawned before and after
/// the consumers; whatever the consumers did not take is drained after the join. Invariant:
/// every push succeeds; the values the consumers took plus the values left in the queue are
/// exactly 1 and 2 — each value exactly once, to exactly one taker, nothing that was not pushed.
/// Reached: both consumers served. (Consumers give up instead of spinning until served: loom
/// 0.7 can serve a spinning reader the same stale slot sequence number across yields, so an
/// unbounded wait there exceeds loom's branch limit without any fault in the queue.)
/// Preemption bound 2 (bound 3 takes minutes).
#[test]
fn queue_two_producers_two_consumers() {
    let outcomes = Tally::new(1);
    for order in [&[0usize, 1, 2, 3][..], &[2, 3, 0, 1]] {
        let tally = outcomes.clone();
        check("queue_two_producers_two_consumers", Some(2), move || {
            let q = Arc::new(ReadyQueue::with_capacity(2));
            let mut jobs: Vec<Job> = [1u32, 2]
                .into_iter()
                .map(|v| {
                    let q = q.clone();
                    job(move || assert_eq!(q.push(v), Ok(()), "spurious Full"))
                })
                .collect();
            for _ in 0..2 {
                let q = q.clone();
                jobs.push(job(move || {
                    for _ in 0..3 {
                        if let Some(v) = q.pop() {
                            return Some(v);
                        }
                        thread::yield_now();
                    }
                    None
                }));
            }
            let mut r = run_jobs(order, jobs);
            let taken = [r.take::<Option<u32>>(2), r.take::<Option<u32>>(3)];
            if taken.iter().all(Option::is_some) {
                tally.hit(0);
            }
            let mut all: Vec<u32> = taken.into_iter().flatten().collect();
            while let Some(v) = q.pop() {
                all.push(v);
            }
            all.sort_unstable();
            assert_eq!(all, [1, 2], "a value lost, duplicated or invented");
        });
    }
    outcomes.assert_all_reached(&["both consumers served"]);
}
