//! The back-off between the polls of a budgeted wait, in embedded-hal's `DelayNs` (the agent's
//! [`Pause`]).
//!
//! A budgeted wait polls its condition, checks its deadline (in device ticks), and waits
//! through [`Events`] until something may have changed. On the simulator that wait parks the
//! thread until a store or an event wakes it; on the aarch64 agents it is one spin hint (user
//! space has no `wfe` that another agent's store ends), so the loop polls GM or the registers
//! back to back. [`Backoff`] spaces the polls that see nothing new: once the same word still
//! holds the value the last wait was for (or, for an event wait, the caller saw no progress),
//! it adds a delay, doubling from [`FIRST_NS`] up to [`MAX_NS`]; anything new starts it over.
//!
//! The back-off reads no clock and touches no shared memory: a deadline is still checked by the
//! caller, in ticks, before every wait, and is overshot by at most [`MAX_NS`]. It is not used
//! on the dispatch hot paths (the legacy scheduler's pass loop, an AICore's dispatch wait),
//! whose latency is the executor's, nor where the resident capture service answers requests
//! (the supervisor's event wait with the dump on, a publisher's wait after WOULD_BLOCK), whose
//! timing against the publisher's next look is left as it was (`docs/architecture.md`,
//! "Waiting").

use pto_hal::{DelayNs, Events, GmAddr, Pause, Ticks};

/// The first delay after a poll that saw nothing new, in nanoseconds.
pub const FIRST_NS: u32 = 64;
/// The longest delay between two polls, in nanoseconds: about one dispatch's cost, so a wait
/// notices a change at most this much later than a spinning one would.
pub const MAX_NS: u32 = 1_000;

/// The back-off state of one waiting loop (see the module documentation). Plain data: the
/// delay itself comes from the agent ([`Pause::delay`]) when one is due.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// The next delay, in nanoseconds (0: none due yet).
    next_ns: u32,
    /// The word and value the last [`Backoff::wait_word`] waited on.
    last: Option<(u64, u64)>,
}

impl Backoff {
    /// A loop that has not waited yet.
    pub const fn new() -> Backoff {
        Backoff { next_ns: 0, last: None }
    }

    /// Wait until the word at `addr` may no longer hold `seen` (the value of the caller's last
    /// look) or `until` passes ([`Events::wait_for_word`]); then, if the previous call waited
    /// on the same word for the same value — that wait ended and the caller found nothing
    /// new — back off: [`FIRST_NS`], doubling up to [`MAX_NS`].
    pub fn wait_word<A: Events + Pause>(&mut self, a: &A, addr: GmAddr, seen: u64, until: Ticks) {
        a.wait_for_word(addr, seen, until);
        if self.last == Some((addr.0, seen)) {
            self.back_off(a);
        } else {
            self.last = Some((addr.0, seen));
            self.next_ns = FIRST_NS;
        }
    }

    /// A poll found nothing new: wait for an event or `until` ([`Events::wait_for_event`]),
    /// then back off — no delay the first time, then [`FIRST_NS`], doubling up to [`MAX_NS`].
    pub fn idle<A: Events + Pause>(&mut self, a: &A, until: Ticks) {
        a.wait_for_event(until);
        self.back_off(a);
    }

    /// A poll found something new: the next wait starts without a delay.
    pub fn reset(&mut self) {
        *self = Backoff::new();
    }

    fn back_off<A: Pause>(&mut self, a: &A) {
        if self.next_ns > 0 {
            a.delay().delay_ns(self.next_ns);
        }
        self.next_ns = self.next_ns.saturating_mul(2).clamp(FIRST_NS, MAX_NS);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use super::*;
    use std::cell::RefCell;
    use std::vec::Vec;

    std::thread_local! {
        /// The delays asked for on this thread, in nanoseconds.
        static DELAYS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    }

    /// An agent whose waits return at once and whose delays are recorded.
    struct Agent;
    struct Rec;

    impl DelayNs for Rec {
        fn delay_ns(&mut self, ns: u32) {
            DELAYS.with(|d| d.borrow_mut().push(ns));
        }
    }

    impl Events for Agent {
        fn wait_for_event(&self, _deadline: Ticks) {}
        fn send_event(&self) {}
        fn wait_for_word(&self, _addr: GmAddr, _seen: u64, _deadline: Ticks) {}
    }

    impl Pause for Agent {
        type Delay = Rec;
        fn delay(&self) -> Rec {
            Rec
        }
    }

    fn delays() -> Vec<u32> {
        DELAYS.with(|d| d.borrow_mut().drain(..).collect())
    }

    /// A word wait backs off only when it waits again for the same value of the same word: the
    /// delay doubles from `FIRST_NS` to `MAX_NS`; a new value or another word starts over.
    #[test]
    fn word_waits_back_off_while_nothing_changes() {
        let mut b = Backoff::new();
        let (w, v) = (GmAddr(0x40), 5);
        for _ in 0..8 {
            b.wait_word(&Agent, w, v, 0);
        }
        assert_eq!(delays(), [64, 128, 256, 512, 1_000, 1_000, 1_000]);
        b.wait_word(&Agent, w, v + 1, 0);
        b.wait_word(&Agent, GmAddr(0x48), v + 1, 0);
        assert_eq!(delays(), [0u32; 0], "a change is no reason to wait");
        b.wait_word(&Agent, GmAddr(0x48), v + 1, 0);
        assert_eq!(delays(), [64]);
    }

    /// An idle poll waits for an event, then backs off from the second idle poll on; progress
    /// (`reset`) starts over.
    #[test]
    fn idle_polls_back_off_until_reset() {
        let mut b = Backoff::new();
        for _ in 0..4 {
            b.idle(&Agent, 0);
        }
        assert_eq!(delays(), [64, 128, 256]);
        b.reset();
        b.idle(&Agent, 0);
        assert_eq!(delays(), [0u32; 0]);
    }
}
