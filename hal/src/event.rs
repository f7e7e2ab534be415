//! Waiting without burning the machine.

use crate::{GmAddr, Ticks};

/// Wait-for-event / send-event, in the manner of aarch64 `wfe` / `sev`.
///
/// An agent with nothing to do calls [`Events::wait_for_event`]: it returns when something the
/// agent watches may have changed (a register written towards it, an event sent by a peer) or
/// when the deadline passes, and it may return spuriously. Callers always re-check their
/// condition and their budget. On the simulator this parks the agent's thread, so idle agents
/// cost nothing; on hardware it is a spin hint.
pub trait Events {
    /// Wait until an event may have arrived or `deadline` (device ticks) has passed.
    /// Tier: AICPU, AICore.
    fn wait_for_event(&self, deadline: Ticks);
    /// Wake every AICPU thread of this device that waits for an event. Tier: AICPU, AICore.
    fn send_event(&self);
    /// Wait until the GM word at `addr` may no longer hold `seen`, an event arrives, or
    /// `deadline` passes (aarch64: a load-exclusive arms the monitor on the line, then `wfe`).
    /// Only a write of the word through [`GmAtomic`](crate::GmAtomic) (device-direct store or
    /// read-modify-write) by another agent is guaranteed to wake the waiter; the word must be
    /// one that is written that way. May return spuriously; callers re-read the word.
    /// Tier: AICPU, AICore.
    fn wait_for_word(&self, addr: GmAddr, seen: u64, deadline: Ticks);
}

/// Timed pauses: embedded-hal's [`DelayNs`](embedded_hal::delay::DelayNs), as a value the
/// waiting code owns.
///
/// [`Events`] ends a wait when something may have changed; a [`Pause`] delay waits for time
/// alone, for code that has to let time pass whatever happens: the back-off between two polls
/// of a budgeted wait that saw nothing new. The runtime never
/// asks for more than its callers' budgets allow (deadlines stay in device ticks; a delay is
/// cut to what is left of one). Agents are shared (`&self`) and `DelayNs` takes `&mut self`,
/// so the agent hands out a delay value rather than being one.
///
/// Tier: AICPU, AICore. The aarch64 agents hand out the generic timer (a bounded busy wait on
/// the counter); the simulator's delay yields the thread until the time has passed, and
/// sleeps only for delays long enough that a sleep's overshoot does not matter.
pub trait Pause {
    /// The delay this agent hands out.
    type Delay: embedded_hal::delay::DelayNs;
    /// A delay for this agent. Cheap: a waiting loop makes one when it starts.
    fn delay(&self) -> Self::Delay;
}
