//! The legacy executor: the AICPU threads dispatch every subtask to the cores and retire
//! their completions ([`sched`], over the ready queues of [`queue`] and a task [`source`],
//! deciding each completion from COND with [`cond`]); each core runs what it is given
//! ([`core`]).

pub mod cond;
pub mod core;
pub mod queue;
pub mod sched;
pub mod source;
