//! The AICPU half every executor shares: what one AICPU thread of a launch does whatever runs
//! the tasks.
//!
//! * `shared_state`: the state the threads of one launch share — built by one booting thread,
//!   published in the launch's scratch cell, freed by the last thread to depart.
//! * `source`: a run's tasks as the AICPU sees them (a `TaskSource`:
//!   the host-built graph's image or the device-side runtime's rings), the state every source
//!   shares (`Base`: the run map, the stop flag, counters) and the routing of
//!   tasks whose producers are done (`Completions`) into the ready
//!   queues of [`queue`].
//! * `cores`: one thread's share of the cores (`ThreadCores`) — the
//!   handshake that opens their windows, their retirement through the teardown gates, the
//!   thread's counters, trace ring and dump lane.
//!
//! The legacy executor (`super::legacy`) dispatches from the ready queues to these cores; the
//! resident executor (`super::resident`) lets the cores schedule themselves and only
//! supervises. Both start and end a thread the same way: share the launch state, handshake,
//! run, retire, publish the counters, depart.

pub(crate) mod cores;
pub mod queue;
pub(crate) mod shared_state;
pub(crate) mod source;

/// Loom models of the schedulers' shared counters (`shared_state`, `source`) (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;
