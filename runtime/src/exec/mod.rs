//! AICore executors, each a room with both of its halves, and the AICPU half they share.
//!
//! * [`aicpu`]: what every executor's AICPU thread shares — the launch's shared state, the
//!   task source and its ready queues, the thread's cores from handshake to retirement.
//! * `legacy`: the AICPU dispatches every subtask and the core executes it — the AICPU
//!   scheduler (`legacy::sched`, over the ready queues of `aicpu::queue`) and the core's
//!   dispatch loop (`legacy::core`).
//! * `resident`: the cores schedule the host-built graph themselves — the scheduler state in
//!   GM that the loom models check (`resident::state`), the core loop (`resident::core`),
//!   the AICPU supervisor (`resident::supervisor`) and the args-dump capture at task
//!   boundaries (`resident::capture`).
//!
//! Both run behind one AICore entry point ([`entry::aicore_entry`]: report, window, the
//! executor the launch descriptor names, then one exit path through the teardown gate), call
//! kernels through one context (`kernel_call::CoreCtx`) and share the core-ownership
//! protocol of `crate::lifecycle` (handshake, window, retire, gates), the trace rings of
//! `crate::trace` and the dump lanes of `crate::dump`.

pub mod aicpu;
pub mod entry;
pub(crate) mod kernel_call;
pub(crate) mod legacy;
pub(crate) mod resident;
