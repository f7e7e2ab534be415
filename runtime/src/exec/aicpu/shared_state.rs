//! The state the AICPU threads of one launch share: built by one booting thread, published in
//! the launch's scratch cell, awaited (within the watchdog) by the others, and freed by the
//! last thread to depart — after it recorded how many tasks the run completed.
//!
//! # The protocol
//!
//! The launch's scratch cell (one `AtomicPtr<()>`, null at the start of a launch) holds one of
//! three things:
//!
//! * **null**: nothing decided yet;
//! * **a state pointer** (from `Box::into_raw`, aligned, so never odd): the booting thread
//!   published the state. The allocation is a small header — the count of threads that have
//!   not departed yet, starting at the launch's thread count — followed by the state;
//! * **a failure tag** (an odd value, `2k + 1`): the launch has no state — the booting
//!   thread's `boot` failed, or a waiting thread gave up first — and `k` threads have already
//!   accounted for themselves.
//!
//! The invariants that make it sound and leak-free:
//!
//! 1. **All or nothing.** The cell leaves null exactly once per launch, either to a state
//!    pointer (only the booting thread's compare-exchange does that) or to a failure tag (a
//!    failed boot or a timed-out waiter). So either *every* thread of the launch attaches to
//!    the state, or *none* does. A thread that times out therefore never leaves the state
//!    waiting for a departure that will not come: if the state was published first, the
//!    timed-out thread attaches after all (and departs later like everyone else); if it was
//!    not, the booting thread's publication fails, and it drops the state itself.
//! 2. **Last out frees and resets.** Every thread accounts for itself exactly once: by
//!    [`Shared::depart`] when attached (the header's count), by bumping the failure tag
//!    otherwise. Whoever accounts last — the count reaches zero, or the tag reaches the
//!    thread count — resets the cell to null, so nothing is left for the next launch; in the
//!    attached case it also records `RUN_COMPLETED` and frees the state.
//! 3. **No reference across the decrement.** A handle holds the allocation as a raw pointer,
//!    never as a reference. [`Shared::depart`] reaches only the counter (an atomic, as
//!    `Arc::drop` does), decrements it with `Release`, and after that touches nothing of the
//!    allocation unless it was the last, in which case an `Acquire` fence orders every other
//!    thread's use of the state before its own reads and the free (rust-lang/rust#55005).
//!
//! The booting thread wakes the waiters whatever the outcome, so a failed boot costs them an
//! event, not a watchdog period.

use crate::sync::{AtomicU32, Ordering, fence};
use alloc::boxed::Box;
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use pto_hal::{AicpuAgent, AicpuLaunch};

use super::source::TaskSource;
use crate::layout::offsets;
use crate::lifecycle;

/// The launch's scratch cell. It is the HAL's (`AicpuLaunch::scratch`), so it is core's
/// atomic pointer even under loom; the departure count and the fence are the shim's.
#[allow(clippy::disallowed_types, reason = "the HAL's scratch cell, not ours to choose")]
type ScratchCell = core::sync::atomic::AtomicPtr<()>;

/// Status when the descriptor cannot be used at all.
pub const STATUS_BAD_DESC: i32 = -202;
/// Status when a thread never received the shared state from the booting thread (it timed
/// out waiting, the booting thread failed to boot, or — for the booting thread — the others
/// gave up before it published).
pub const STATUS_NO_BOOT: i32 = -201;

/// One thread's handle on the launch's shared state. Not `Copy`: [`Shared::depart`] consumes
/// it, so no thread can touch the state after its own departure.
pub struct Shared<'l, S> {
    handle: Handle<'l, S>,
}

impl<S> core::ops::Deref for Shared<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.handle
    }
}

/// The booting thread (`boot_thread`) builds the state with `boot` and publishes it; every
/// other thread waits for it. `Err` is the thread's exit status: the descriptor was unusable
/// ([`STATUS_BAD_DESC`]) or the state never came ([`STATUS_NO_BOOT`]). Every thread of the
/// launch must call this once with the same `S`, and depart if it got `Ok` (see the module
/// documentation).
pub fn share<'l, A: AicpuAgent, S: TaskSource>(
    a: &A,
    launch: &'l AicpuLaunch<'l>,
    boot_thread: u32,
    boot: impl FnOnce() -> Option<S>,
) -> Result<Shared<'l, S>, i32> {
    // SAFETY: every thread of a launch runs the same AICPU entry point, which calls `share`
    // with the same `S` and the launch's own thread count; the HAL hands the cell over null.
    let cell = unsafe { Cell::<S>::new(launch.scratch, launch.thread_count) };
    if launch.thread_idx == boot_thread {
        let published = cell.publish(boot());
        // Wake the waiters whatever happened: they either attach or learn there is nothing.
        a.send_event();
        return match published {
            Ok(handle) => Ok(Shared { handle }),
            Err(Unpublished::BootFailed) => {
                error!("launch: boot failed on thread {}: the descriptor is unusable", launch.thread_idx);
                Err(STATUS_BAD_DESC)
            }
            Err(Unpublished::Abandoned) => {
                warn!("launch: thread {} booted after a waiter gave up: launch abandoned", launch.thread_idx);
                Err(STATUS_NO_BOOT)
            }
        };
    }
    // The booting thread boots within the watchdog of this run (read here, not trusted from it).
    let cfg = lifecycle::read_config(a, launch.args);
    let deadline = a.now_ticks().saturating_add(cfg.watchdog_ticks.max(a.ticks_from_micros(1_000)));
    let mut backoff = crate::backoff::Backoff::new();
    loop {
        let give_up = a.now_ticks() >= deadline;
        match cell.attach(give_up) {
            Attach::Attached(handle) => return Ok(Shared { handle }),
            Attach::NoState => {
                warn!("launch: thread {} got no launch state (boot failed or timed out)", launch.thread_idx);
                return Err(STATUS_NO_BOOT);
            }
            Attach::Pending => backoff.idle(a, deadline),
        }
    }
}

/// [`share`], then the refusal every runtime makes alike: on a launch naming more clusters than
/// the platform's tables hold ([`Base::refused`](super::source::Base::refused)) this thread
/// cancels its share of the cores ([`lifecycle::refuse`]) and departs at once, and the status is
/// [`STATUS_BAD_DESC`].
pub fn join<'l, A: AicpuAgent, S: TaskSource>(
    a: &A,
    launch: &'l AicpuLaunch<'l>,
    boot_thread: u32,
    boot: impl FnOnce() -> Option<S>,
) -> Result<Shared<'l, S>, i32> {
    let shared = share(a, launch, boot_thread, boot)?;
    if shared.base().refused {
        lifecycle::refuse(a, &shared.base().map, launch.thread_idx, launch.thread_count);
        shared.depart(a);
        return Err(STATUS_BAD_DESC);
    }
    Ok(shared)
}

impl<S: TaskSource> Shared<'_, S> {
    /// This thread is done with the state. The last one records the run's completed tasks and
    /// frees it.
    pub fn depart<A: AicpuAgent>(self, a: &A) {
        self.handle.depart(|s| {
            let base = s.base();
            a.store_direct(base.map.desc.offset(offsets::RUN_COMPLETED), base.completed());
        });
    }
}

/// The value of the cell: what the threads of the launch have decided so far.
enum Seen<S> {
    /// Nothing yet.
    Nothing,
    /// The published state.
    State(NonNull<Inner<S>>),
    /// No state: this many threads have accounted for themselves.
    Failed(u32),
}

/// The shared allocation: the departure count in front of the state.
struct Inner<S> {
    /// Threads of the launch that have not departed yet.
    remaining: AtomicU32,
    state: S,
}

/// The protocol on one launch's cell, free of any HAL: the booting thread publishes
/// ([`Cell::publish`]), the others attach ([`Cell::attach`]), attached ones depart through
/// their [`Handle`].
struct Cell<'l, S> {
    cell: &'l ScratchCell,
    threads: u32,
    /// The cell holds an `Inner<S>` (shared across threads, dropped by whichever departs last).
    _state: PhantomData<fn(S) -> S>,
}

/// Why the booting thread holds no handle.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Unpublished {
    /// `boot` produced no state.
    BootFailed,
    /// Some thread gave up before the state could be published; the state was dropped.
    Abandoned,
}

/// What a waiting thread found.
enum Attach<'l, S> {
    /// The state: depart when done.
    Attached(Handle<'l, S>),
    /// There is none and there will be none (this thread is accounted for).
    NoState,
    /// Nothing yet (only when not giving up).
    Pending,
}

impl<'l, S> Cell<'l, S> {
    /// The protocol for `threads` threads on `cell`.
    ///
    /// # Safety
    ///
    /// For as long as the cell is not back to null, every user of `cell` is one of the
    /// `threads` threads of one launch, each calling [`Cell::publish`] (one of them, once) or
    /// [`Cell::attach`] (the others, until it stops returning `Pending`) on a `Cell` built
    /// with this same `S` and `threads`; and the cell holds null or a value this protocol
    /// stored.
    unsafe fn new(cell: &'l ScratchCell, threads: u32) -> Self {
        Cell { cell, threads, _state: PhantomData }
    }

    fn seen(v: *mut ()) -> Seen<S> {
        match NonNull::new(v) {
            None => Seen::Nothing,
            // The tag is `2k + 1` with `k` below the thread count, so it fits a `u32`.
            Some(_) if v.addr() & 1 == 1 => Seen::Failed((v.addr() >> 1) as u32),
            Some(p) => Seen::State(p.cast()),
        }
    }

    /// The failure tag once `k` threads accounted for themselves (null when all have: the
    /// launch is over and the cell ready for the next one).
    fn failed(&self, k: u32) -> *mut () {
        if k >= self.threads { ptr::null_mut() } else { ptr::without_provenance_mut(((k as usize) << 1) | 1) }
    }

    /// Account for this thread as one of a launch without state, the cell last seen as `v`
    /// — unless the state is published: then `Err` is the state.
    fn close(&self, mut v: *mut ()) -> Result<(), NonNull<Inner<S>>> {
        loop {
            let k = match Self::seen(v) {
                Seen::State(inner) => return Err(inner),
                Seen::Failed(k) => k,
                Seen::Nothing => 0,
            };
            match self.cell.compare_exchange(v, self.failed(k + 1), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => v = now,
            }
        }
    }

    /// The booting thread: publish `state` (`None`: the boot failed). Without a handle, the
    /// booting thread is accounted for.
    fn publish(&self, state: Option<S>) -> Result<Handle<'l, S>, Unpublished> {
        let Some(state) = state else {
            return match self.close(self.cell.load(Ordering::Acquire)) {
                Ok(()) => Err(Unpublished::BootFailed),
                Err(_) => unreachable!("launch state published by a thread that did not boot"),
            };
        };
        let inner = NonNull::from(Box::leak(Box::new(Inner { remaining: AtomicU32::new(self.threads), state })));
        match self.cell.compare_exchange(ptr::null_mut(), inner.as_ptr().cast(), Ordering::AcqRel, Ordering::Acquire) {
            // Published: the allocation now belongs to the launch (invariant 2).
            Ok(_) => Ok(Handle { inner, cell: self.cell }),
            // A failure tag: a waiter gave up first and the cell will not be null again before
            // this thread accounts for itself (invariant 1). The state is not wanted.
            Err(now) => {
                if self.close(now).is_err() {
                    unreachable!("launch state published by a thread that did not boot");
                }
                // SAFETY: `inner` came from `Box::leak` above and was never published, so
                // this thread is its only owner.
                drop(unsafe { Box::from_raw(inner.as_ptr()) });
                Err(Unpublished::Abandoned)
            }
        }
    }

    /// A waiting thread: take the published state if there is one; if there is none, return
    /// `Pending`, or with `give_up` (the deadline passed), close the launch to any state.
    fn attach(&self, give_up: bool) -> Attach<'l, S> {
        let v = self.cell.load(Ordering::Acquire);
        let closed = match Self::seen(v) {
            Seen::State(inner) => Err(inner),
            Seen::Nothing if !give_up => return Attach::Pending,
            Seen::Nothing | Seen::Failed(_) => self.close(v),
        };
        match closed {
            Ok(()) => Attach::NoState,
            Err(inner) => Attach::Attached(Handle { inner, cell: self.cell }),
        }
    }
}

/// One thread's share of the published state: a raw pointer, never a reference, so that no
/// reference to the allocation outlives this thread's departure.
struct Handle<'l, S> {
    inner: NonNull<Inner<S>>,
    cell: &'l ScratchCell,
}

impl<S> core::ops::Deref for Handle<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        // SAFETY: the allocation lives until every thread of the launch has departed, this
        // one included; this handle has not departed (`depart` consumes it) and the returned
        // borrow cannot outlive it. Other threads only share the state (`&S`).
        unsafe { &(*self.inner.as_ptr()).state }
    }
}

impl<S> Handle<'_, S> {
    /// This thread is done with the state. The last one runs `last` on it, resets the cell
    /// and frees the allocation.
    fn depart(self, last: impl FnOnce(&S)) {
        let Handle { inner, cell } = self;
        let inner = inner.as_ptr();
        // SAFETY: this handle has not departed, so the allocation is live. Only the counter
        // is borrowed (not the state, nor the whole header), and only for the decrement, as
        // in `Arc::drop`: the counter is interior-mutable, so the borrow asserts nothing about
        // the memory beyond the atomic operation.
        let remaining = unsafe { &(*inner).remaining };
        let (decrement, acquire) = departure_orderings();
        if remaining.fetch_sub(1, decrement) != 1 {
            // Another thread may free the allocation from now on: touch nothing of it.
            return;
        }
        // Every other thread's use of the state happens before what follows.
        if acquire {
            fence(Ordering::Acquire);
        }
        // SAFETY: every thread of the launch has departed (the count reached zero, and each
        // thread decrements once, with its handle consumed), so this thread is the only owner
        // of the allocation, which came from `Box::leak` in `Cell::publish`.
        let inner = unsafe { Box::from_raw(inner) };
        last(&inner.state);
        // Every thread read the cell before departing: the launch is over, ready the cell for
        // the next one.
        cell.store(ptr::null_mut(), Ordering::Release);
        drop(inner);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use crate::sync::AtomicUsize;
    use std::sync::{Arc, Barrier};
    use std::thread;
    use std::vec::Vec;

    /// A state that counts its drops and who used it.
    struct State {
        drops: Arc<AtomicUsize>,
        uses: AtomicU32,
    }

    impl Drop for State {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How one thread of a simulated launch behaves.
    #[derive(Copy, Clone)]
    enum Role {
        /// Boots (successfully or not) after `delay` yields.
        Boot { ok: bool, delay: u32 },
        /// Polls `patience` times, then gives up.
        Wait { patience: u32 },
    }

    #[derive(Debug, PartialEq, Eq)]
    enum Outcome {
        Attached,
        BootFailed,
        Abandoned,
        NoState,
    }

    /// Run one launch with one thread per role; return each thread's outcome, after checking
    /// the protocol's invariants.
    fn launch(roles: &[Role]) -> Vec<Outcome> {
        let threads = roles.len() as u32;
        let cell = Arc::new(ScratchCell::new(ptr::null_mut()));
        let drops = Arc::new(AtomicUsize::new(0));
        let lasts = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(roles.len()));
        let joins: Vec<_> = roles
            .iter()
            .map(|&role| {
                let (cell, drops, lasts, start) = (cell.clone(), drops.clone(), lasts.clone(), start.clone());
                thread::spawn(move || {
                    // SAFETY: every thread of this launch uses `State` and `threads`; the cell
                    // starts null.
                    let c = unsafe { Cell::<State>::new(&cell, threads) };
                    start.wait();
                    let handle = match role {
                        Role::Boot { ok, delay } => {
                            for _ in 0..delay {
                                thread::yield_now();
                            }
                            let state = ok.then(|| State { drops: drops.clone(), uses: AtomicU32::new(0) });
                            match c.publish(state) {
                                Ok(h) => h,
                                Err(Unpublished::BootFailed) => return Outcome::BootFailed,
                                Err(Unpublished::Abandoned) => return Outcome::Abandoned,
                            }
                        }
                        Role::Wait { patience } => {
                            let mut polls = 0;
                            loop {
                                match c.attach(polls >= patience) {
                                    Attach::Attached(h) => break h,
                                    Attach::NoState => return Outcome::NoState,
                                    Attach::Pending => thread::yield_now(),
                                }
                                polls += 1;
                            }
                        }
                    };
                    handle.uses.fetch_add(1, Ordering::Relaxed);
                    thread::yield_now();
                    handle.depart(|s| {
                        // The last one sees every thread's use.
                        assert_eq!(s.uses.load(Ordering::Relaxed), threads);
                        lasts.fetch_add(1, Ordering::Relaxed);
                    });
                    Outcome::Attached
                })
            })
            .collect();
        let outcomes: Vec<Outcome> = joins.into_iter().map(|j| j.join().unwrap()).collect();
        // Nothing left for the next launch, nothing leaked, nothing freed twice.
        assert!(cell.load(Ordering::Relaxed).is_null(), "cell not reset");
        let attached = outcomes.iter().filter(|o| **o == Outcome::Attached).count();
        // All or nothing.
        assert!(attached == 0 || attached == roles.len(), "{outcomes:?}");
        let booted = roles.iter().any(|r| matches!(r, Role::Boot { ok: true, .. }));
        assert_eq!(drops.load(Ordering::Relaxed), usize::from(booted));
        assert_eq!(lasts.load(Ordering::Relaxed), usize::from(attached > 0));
        outcomes
    }

    /// Many launches of four threads (few under Miri, which is slow): a slow or failing boot,
    /// patient and impatient waiters. Whatever the interleaving, the invariants hold (checked
    /// by `launch`); a failed boot never shares, and patient waiters always attach.
    #[test]
    fn departures_free_once_and_reset_the_cell() {
        let rounds = if cfg!(miri) { 8 } else { 200 };
        for round in 0..rounds {
            for ok in [true, false] {
                let patient = round % 2 == 0;
                let impatience = |p: u32| if patient { u32::MAX } else { p };
                let roles = [
                    Role::Wait { patience: u32::MAX },
                    Role::Wait { patience: impatience(round % 5) },
                    Role::Boot { ok, delay: round % 3 * 4 },
                    Role::Wait { patience: impatience((round * 7) % 11) },
                ];
                let outcomes = launch(&roles);
                if !ok {
                    assert_eq!(outcomes[2], Outcome::BootFailed);
                } else if patient {
                    assert!(outcomes.iter().all(|o| *o == Outcome::Attached), "{outcomes:?}");
                } else if outcomes[2] == Outcome::Abandoned {
                    assert!(outcomes[1] == Outcome::NoState || outcomes[3] == Outcome::NoState, "{outcomes:?}");
                }
            }
        }
    }

    #[test]
    fn a_thread_that_never_waits_abandons_the_launch_or_attaches() {
        // The impatient thread gives up at once: either before the boot (nobody attaches, the
        // booting thread drops its state) or after it (it attaches after all).
        for delay in [0, 1, 3] {
            let outcomes = launch(&[Role::Boot { ok: true, delay }, Role::Wait { patience: 0 }]);
            assert!(
                outcomes == [Outcome::Attached, Outcome::Attached]
                    || outcomes == [Outcome::Abandoned, Outcome::NoState],
                "{outcomes:?}"
            );
        }
    }

    #[test]
    fn a_failed_boot_releases_the_waiters() {
        // Infinitely patient waiters still finish: the failure is published.
        let outcomes = launch(&[
            Role::Wait { patience: u32::MAX },
            Role::Boot { ok: false, delay: 2 },
            Role::Wait { patience: u32::MAX },
        ]);
        assert_eq!(outcomes, [Outcome::NoState, Outcome::BootFailed, Outcome::NoState]);
    }

    #[test]
    fn a_single_thread_launch() {
        assert_eq!(launch(&[Role::Boot { ok: true, delay: 0 }]), [Outcome::Attached]);
        assert_eq!(launch(&[Role::Boot { ok: false, delay: 0 }]), [Outcome::BootFailed]);
    }

    #[test]
    fn the_cell_serves_launch_after_launch() {
        let cell = ScratchCell::new(ptr::null_mut());
        for _ in 0..3 {
            // SAFETY: one thread plays the only thread of each launch; the cell is null.
            let c = unsafe { Cell::<u64>::new(&cell, 1) };
            let h = c.publish(Some(7)).unwrap();
            assert_eq!(*h, 7);
            let mut seen = 0;
            h.depart(|s| seen = *s);
            assert_eq!(seen, 7);
            assert!(cell.load(Ordering::Relaxed).is_null());
        }
    }
}

/// How a departing thread orders its departure: the decrement's ordering, and whether the last
/// one out fences with `Acquire` before it frees the state (release-decrement, acquire-fence,
/// as `Arc::drop`).
fn departure_orderings() -> (Ordering, bool) {
    // Broken: a relaxed decrement and no fence (another thread's last use of the state is not
    // ordered before the free).
    crate::seam!(DEPART_RELAXED => (Ordering::Relaxed, false));
    (Ordering::Release, true)
}
