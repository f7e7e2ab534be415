//! The state the AICPU threads of one launch share: built by one booting thread, published in
//! the launch's scratch cell, awaited (within the watchdog) by the others, and freed by the
//! last thread to depart — after it recorded how many tasks the run completed.

use alloc::boxed::Box;
use core::sync::atomic::Ordering;

use pto_hal::{AicpuAgent, AicpuLaunch};

use crate::layout::offsets;
use crate::lifecycle;
use crate::sched::TaskSource;

/// Status when the descriptor cannot be used at all.
pub const STATUS_BAD_DESC: i32 = -202;
/// Status when a thread never received the shared state from the booting thread.
pub const STATUS_NO_BOOT: i32 = -201;

/// One thread's handle on the launch's shared state. Not `Copy`: [`Shared::depart`] consumes
/// it, so no thread can touch the state after its own departure.
pub struct Shared<'l, S> {
    state: &'l S,
    launch: &'l AicpuLaunch<'l>,
}

impl<S> core::ops::Deref for Shared<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        self.state
    }
}

/// The booting thread (`boot_thread`) builds the state with `boot` and publishes it; every
/// other thread waits for it. `Err` is the thread's exit status: the descriptor was unusable
/// ([`STATUS_BAD_DESC`]) or the state never came ([`STATUS_NO_BOOT`]).
pub fn share<'l, A: AicpuAgent, S: TaskSource>(
    a: &A,
    launch: &'l AicpuLaunch<'l>,
    boot_thread: u32,
    boot: impl FnOnce() -> Option<S>,
) -> Result<Shared<'l, S>, i32> {
    if launch.thread_idx == boot_thread {
        let state = boot().ok_or(STATUS_BAD_DESC)?;
        let ptr = Box::into_raw(Box::new(state));
        launch.scratch.store(ptr.cast(), Ordering::Release);
        a.send_event();
        // SAFETY: `ptr` came from `Box::into_raw` just above and is freed only by the last
        // thread to depart, which cannot happen before this thread departs.
        return Ok(Shared { state: unsafe { &*ptr }, launch });
    }
    // The booting thread boots within the watchdog of this run (read here, not trusted from it).
    let cfg = lifecycle::read_config(a, launch.args);
    let deadline = a.now_ticks().saturating_add(cfg.watchdog_ticks.max(a.ticks_from_micros(1_000)));
    loop {
        let p = launch.scratch.load(Ordering::Acquire) as *const S;
        if !p.is_null() {
            // SAFETY: the booting thread published a pointer from `Box::into_raw`; it stays
            // valid until every thread, this one included, has departed.
            return Ok(Shared { state: unsafe { &*p }, launch });
        }
        if a.now_ticks() >= deadline {
            return Err(STATUS_NO_BOOT);
        }
        a.wait_for_event(deadline);
    }
}

impl<'l, S: TaskSource> Shared<'l, S> {
    /// This thread is done with the state. The last one records the run's completed tasks and
    /// frees it.
    pub fn depart<A: AicpuAgent>(self, a: &A) {
        let base = self.state.base();
        if base.departed.fetch_add(1, Ordering::AcqRel) + 1 == self.launch.thread_count {
            a.store_direct(base.map.desc.offset(offsets::RUN_COMPLETED), base.completed());
            let ptr = self.launch.scratch.swap(core::ptr::null_mut(), Ordering::AcqRel) as *mut S;
            // SAFETY: every thread of the launch has departed (the counter reached the thread
            // count) and each gave up its handle, so no reference to the state remains; `ptr`
            // came from `Box::into_raw` in the booting thread and is freed exactly once because
            // the scratch cell was swapped to null.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}
