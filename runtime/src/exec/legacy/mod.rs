//! The legacy executor: the AICPU threads dispatch every subtask to the cores and retire
//! their completions ([`sched`], from the ready queues a task source fills, deciding each
//! completion from COND with [`cond`]); each core runs what it is given ([`core`]).
//!
//! [`run`] is the AICPU half's one entry: a thread that has handshaken its cores
//! ([`ThreadCores`]) dispatches until every task completed or a fault stopped the run.

pub mod cond;
pub mod core;
pub mod sched;

/// Loom models of the scheduler ↔ core register hand-off (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;

use pto_hal::AicpuAgent;

use crate::exec::aicpu::cores::ThreadCores;
use crate::exec::aicpu::source::TaskSource;

/// Dispatch the tasks of `source` to `cores` (handshaken) until every task completed or a
/// fault stopped the run; returns how many subtasks this thread dispatched.
pub fn run<'s, A: AicpuAgent, S: TaskSource>(a: &'s A, source: &'s S, cores: &mut ThreadCores<'s, A>) -> u64 {
    let mut sched = sched::Scheduler::new(a, source, cores);
    sched.run();
    sched.dispatched()
}
