//! Spawning a model's participants in every order: type-erased [`Job`]s, joined by
//! [`run_jobs`] in a given spawn order.

use std::any::Any;

use loom::thread;

use super::prelude::*;

/// One protocol participant, type-erased so that participants of different types can be spawned
/// in any order.
pub(crate) type Job = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;

/// Wrap a participant as a [`Job`].
pub(crate) fn job<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Job {
    Box::new(move || Box::new(f()) as Box<dyn Any + Send>)
}

/// The results of [`run_jobs`], by job index.
pub(crate) struct Joined(pub(crate) Vec<Option<Box<dyn Any + Send>>>);

impl Joined {
    /// The result of job `i`.
    pub(crate) fn take<R: 'static>(&mut self, i: usize) -> R {
        match self.0[i].take().map(|b| b.downcast::<R>()) {
            Some(Ok(r)) => *r,
            _ => panic!("job {i}: result missing or of another type"),
        }
    }
}

/// Spawn `jobs` in the order `order` (a permutation of their indices), join them all.
pub(crate) fn run_jobs(order: &[usize], jobs: Vec<Job>) -> Joined {
    assert_eq!(order.len(), jobs.len());
    let mut jobs: Vec<Option<Job>> = jobs.into_iter().map(Some).collect();
    let handles: Vec<_> =
        order.iter().map(|&i| (i, thread::spawn(jobs[i].take().expect("job spawned twice")))).collect();
    let mut out: Vec<Option<Box<dyn Any + Send>>> = (0..jobs.len()).map(|_| None).collect();
    for (i, h) in handles {
        out[i] = Some(h.join().unwrap());
    }
    Joined(out)
}

/// Both spawn orders of two participants.
pub(crate) const ORDERS_2: [&[usize]; 2] = [&[0, 1], &[1, 0]];
/// All spawn orders of three participants.
pub(crate) const ORDERS_3: [&[usize]; 6] = [&[0, 1, 2], &[0, 2, 1], &[1, 0, 2], &[1, 2, 0], &[2, 0, 1], &[2, 1, 0]];
