//! AICore executors, each a room with both of its halves.
//!
//! * [`legacy`]: the AICPU dispatches every subtask and the core executes it — the AICPU
//!   scheduler and the ready queues it drives ([`legacy::sched`], [`legacy::queue`]) and the
//!   core's dispatch loop ([`legacy::core`]).
//! * [`resident`]: the cores schedule the host-built graph themselves — the scheduler state in
//!   GM that the loom models check ([`resident::state`]), the core loop ([`resident::core`]),
//!   the AICPU supervisor ([`resident::supervisor`]) and the args-dump capture at task
//!   boundaries ([`resident::capture`]).
//!
//! Both run behind one AICore entry point ([`entry::aicore_entry`]: report, window, the
//! executor the launch descriptor names, then one exit path through the teardown gate), call
//! kernels through one context (`kernel_call::CoreCtx`) and share the core-ownership
//! protocol of [`crate::lifecycle`] (handshake, window, retire, gates), the trace rings of
//! [`crate::trace`] and the dump lanes of [`crate::dump`].

pub mod entry;
pub mod kernel_call;
pub mod legacy;
pub mod resident;
