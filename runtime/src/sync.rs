//! Atomics for lock-free code: `core`'s normally, loom's under `--cfg loom` so the same code
//! is model-checked.
//!
//! Every atomic of this crate comes from here; `runtime/clippy.toml` forbids
//! `core::sync::atomic`'s types and `fence` anywhere else (`clippy::disallowed_types`,
//! `clippy::disallowed_methods`). It is public because the schedulers' shared state
//! (the legacy scheduler's task sources, the rings' slots) hands these types out. Outside loom the
//! types are thin `#[repr(transparent)]` wrappers (not re-exports, so that the lint can tell
//! the two paths apart); they forward to `core` and cost nothing.
//!
//! The exceptions, each marked with an `allow` and its reason at the site:
//! * process-wide `static`s (`host::memory`'s device counter, `breakage`'s switch): loom's
//!   atomics have no `const` constructor and live inside one model execution;
//! * the launch's scratch cell, which is the HAL's (`AicpuLaunch::scratch`).

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
pub use core::sync::atomic::Ordering;
#[cfg(not(loom))]
pub use plain::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, fence};

#[cfg(not(loom))]
#[allow(clippy::disallowed_types, clippy::disallowed_methods, reason = "the one place core's atomics are named")]
mod plain {
    //! `core`'s atomics behind the wrappers the lint can tell apart.

    use core::sync::atomic::{self as a, Ordering};

    /// A memory fence (`core::sync::atomic::fence`).
    #[inline(always)]
    pub fn fence(order: Ordering) {
        a::fence(order);
    }

    /// The operations every wrapper has: the subset of loom's API this crate may use.
    macro_rules! atomic {
        ($(#[$m:meta])* $name:ident, $t:ty) => {
            $(#[$m])*
            #[repr(transparent)]
            #[derive(Default)]
            pub struct $name(a::$name);

            // Not every operation is used on every width; the set mirrors loom's.
            #[allow(dead_code)]
            impl $name {
                /// A new atomic holding `v`.
                #[inline(always)]
                pub const fn new(v: $t) -> Self {
                    Self(a::$name::new(v))
                }
                /// Load the value.
                #[inline(always)]
                pub fn load(&self, order: Ordering) -> $t {
                    self.0.load(order)
                }
                /// Store `v`.
                #[inline(always)]
                pub fn store(&self, v: $t, order: Ordering) {
                    self.0.store(v, order)
                }
                /// Store `v`, returning the previous value.
                #[inline(always)]
                pub fn swap(&self, v: $t, order: Ordering) -> $t {
                    self.0.swap(v, order)
                }
                /// Store `new` if the value is `current`; the previous value, `Ok` if it was `current`.
                #[inline(always)]
                pub fn compare_exchange(
                    &self,
                    current: $t,
                    new: $t,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$t, $t> {
                    self.0.compare_exchange(current, new, success, failure)
                }
                /// As `compare_exchange`, but may fail spuriously.
                #[inline(always)]
                pub fn compare_exchange_weak(
                    &self,
                    current: $t,
                    new: $t,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$t, $t> {
                    self.0.compare_exchange_weak(current, new, success, failure)
                }
                /// Bitwise or with `v`, returning the previous value.
                #[inline(always)]
                pub fn fetch_or(&self, v: $t, order: Ordering) -> $t {
                    self.0.fetch_or(v, order)
                }
                /// Bitwise and with `v`, returning the previous value.
                #[inline(always)]
                pub fn fetch_and(&self, v: $t, order: Ordering) -> $t {
                    self.0.fetch_and(v, order)
                }
            }

            impl core::fmt::Debug for $name {
                fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                    core::fmt::Debug::fmt(&self.0, f)
                }
            }
        };
    }

    /// Integer operations on top of [`atomic!`]'s.
    macro_rules! integer {
        ($name:ident, $t:ty) => {
            #[allow(dead_code)]
            impl $name {
                /// Add `v` (wrapping), returning the previous value.
                #[inline(always)]
                pub fn fetch_add(&self, v: $t, order: Ordering) -> $t {
                    self.0.fetch_add(v, order)
                }
                /// Subtract `v` (wrapping), returning the previous value.
                #[inline(always)]
                pub fn fetch_sub(&self, v: $t, order: Ordering) -> $t {
                    self.0.fetch_sub(v, order)
                }
                /// Store the maximum of the value and `v`, returning the previous value.
                #[inline(always)]
                pub fn fetch_max(&self, v: $t, order: Ordering) -> $t {
                    self.0.fetch_max(v, order)
                }
            }
        };
    }

    atomic!(
        /// `core::sync::atomic::AtomicBool`, through the loom shim.
        AtomicBool,
        bool
    );
    atomic!(
        /// `core::sync::atomic::AtomicU32`, through the loom shim.
        AtomicU32,
        u32
    );
    atomic!(
        /// `core::sync::atomic::AtomicU64`, through the loom shim.
        AtomicU64,
        u64
    );
    atomic!(
        /// `core::sync::atomic::AtomicUsize`, through the loom shim.
        AtomicUsize,
        usize
    );
    integer!(AtomicU32, u32);
    integer!(AtomicU64, u64);
    integer!(AtomicUsize, usize);
}

/// A spin-wait hint (under loom: a yield, so the model explores the other threads).
#[inline]
pub fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
