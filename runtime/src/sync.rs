//! Atomics for lock-free code: `core`'s normally, loom's under `--cfg loom` so the same code
//! is model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
