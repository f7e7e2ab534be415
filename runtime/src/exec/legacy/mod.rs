//! The legacy executor: the AICPU threads dispatch every subtask to the cores and retire
//! their completions ([`sched`], over the ready queues of [`queue`]); each core runs what it is
//! given ([`core`]).

pub mod core;
pub mod queue;
pub mod sched;
