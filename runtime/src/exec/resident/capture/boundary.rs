//! [`Boundary::cross`]: the blocking walk one core takes through one phase of a task boundary,
//! over the slot's steps ([`super::slot`]) and the request and acknowledgement lines
//! ([`super::lines`]): claim or join, arrive, publish the request if last and drive it to its
//! terminal acknowledgement (or follow the publisher's), then leave — within a budget, with
//! EXIT and a peer's abort seen on the way.

use pto_hal::{AicoreAgent, Barriers, GmAddr, GmAtomic};

use super::lines::{Request, ask, look_ack, read_ack, write_request};
use super::slot::{Claim, abort, arrive, claim, departed, leave, publisher, publisher_word};
use crate::layout::{CaptureLayout, capture_ack, capture_header, capture_phase, capture_slot, regs};

/// Why a core did not get through a boundary.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The phase was aborted (by this core's timeout or a peer's) and acknowledged, or this
    /// core's budget ran out: the code to latch, if this core latches one.
    Aborted(Option<crate::codes::DeviceFault>),
    /// DMB said EXIT while the core waited: the AICPU's producer has stopped.
    Exit,
}

/// What a peer's look at its phase's answer found.
enum Look {
    /// The phase is sealed.
    Sealed,
    /// The phase was answered ABORTED.
    Aborted,
    /// No answer yet: the word to wait on and the value seen (`None`: no publisher yet).
    Pending(Option<(GmAddr, u64)>),
}

/// One core's boundary captures: its seat, its counters and the phase it published last
/// (whose acknowledgement line it may reuse only after that phase's departures).
pub struct Boundary {
    /// The [`capture_header::ASKED`] counter of the AICPU thread serving this core's cluster.
    asked: GmAddr,
    l: CaptureLayout,
    w: u32,
    c: u32,
    epoch: u64,
    budget: u64,
    seq: core::cell::Cell<u64>,
    tick: core::cell::Cell<u64>,
    /// `(slot, phase, mask, occupancy)` of the phase this core published last.
    last: core::cell::Cell<Option<(GmAddr, u64, u64, u64)>>,
    /// The request this core's line holds (the last it wrote in this run): only the words
    /// that change are stored again.
    sent: core::cell::Cell<Option<Request>>,
    /// Spaces this core's looks at a word that did not change ([`Boundary::pause`]).
    backoff: core::cell::Cell<crate::backoff::Backoff>,
    /// Phases this core published and has not yet added to [`capture_header::REQUESTS`]
    /// ([`Boundary::count_requests`]).
    requested: core::cell::Cell<u64>,
}

/// A waiter's budget: its deadline, whether it already ran out once (and marked the slot
/// aborted), and the code this core latches, if any.
struct Waiting {
    deadline: u64,
    /// The clock as the waiter last read it (at the phase's start, then at each look that
    /// found nothing): one read serves the budget's check and the next wait's slice.
    now: u64,
    expired: bool,
    code: Option<crate::codes::DeviceFault>,
}

/// How long a waiting core sleeps at most between looks at the words it waits on (a store to
/// the watched word ends the wait at once; the slice only bounds a missed wake).
const SLICE_US: u64 = 1_000;

/// How long a publisher waits before it asks again after a WOULD_BLOCK answer.
const RETRY_US: u64 = 200;

impl Boundary {
    /// Worker `w` (cluster `c`) of a run of epoch `epoch` over the region `l`, served by one
    /// of `threads` AICPU threads (the one of index `c % threads`).
    pub fn new<G: GmAtomic>(a: &G, l: CaptureLayout, w: u32, c: u32, epoch: u64, threads: u32) -> Boundary {
        Boundary {
            l,
            w,
            c,
            epoch,
            asked: GmAddr(l.asked(c % threads.max(1))),
            budget: a.query(GmAddr(l.header(capture_header::BUDGET))).max(1),
            seq: core::cell::Cell::new(0),
            tick: core::cell::Cell::new(0),
            last: core::cell::Cell::new(None),
            sent: core::cell::Cell::new(None),
            backoff: core::cell::Cell::new(crate::backoff::Backoff::new()),
            requested: core::cell::Cell::new(0),
        }
    }

    /// Add the phases this core published since the last call to the region's
    /// [`capture_header::REQUESTS`] count (one read-modify-write when the core leaves the run,
    /// not one per phase: the count is read by the host after the run).
    pub fn count_requests<G: GmAtomic>(&self, a: &G) {
        let n = self.requested.replace(0);
        if n > 0 {
            a.fetch_add(GmAddr(self.l.header(capture_header::REQUESTS)), n);
        }
    }

    /// Tell the serving AICPU thread a request was written: its counter, the word it sleeps on
    /// (an event would wake every AICPU thread, each to scan its cores' request lines), one
    /// more and naming this core ([`capture_header::asked_word`]), so a thread that finds one
    /// ask since its last look reads this core's line alone.
    fn ask<G: GmAtomic>(&self, a: &G) {
        ask(a, self.asked, self.w);
    }

    /// Write request `r` into this core's request line (`line`), storing only what changed.
    fn send<G: GmAtomic + Barriers>(&self, a: &G, line: GmAddr, r: &Request) {
        write_request(a, line, r, self.sent.get().as_ref());
        self.sent.set(Some(*r));
    }

    /// The region this core's captures use.
    pub fn layout(&self) -> &CaptureLayout {
        &self.l
    }

    /// The occupancy of the publication in this core's lane `lane` (written by the
    /// dispatcher before the entry; read after the slot's generation).
    pub fn occupancy<G: GmAtomic>(&self, a: &G, lane: u32) -> u64 {
        a.query(GmAddr(self.l.occupancy(self.c, lane)))
    }

    /// Cross phase `phase` of task `task` at occupancy `n` of the slot of lane `key` of this
    /// core's cluster, as the participant `bit` of `mask`: claim or join (`claim`: the first
    /// phase the task enters — BEFORE, or AFTER when BEFORE records nothing), arrive,
    /// publish the request if last (and drive it to its terminal acknowledgement) or follow
    /// the publisher's, then leave. `Ok` once the phase is sealed; the core may then execute
    /// (BEFORE) or complete (AFTER).
    #[allow(clippy::too_many_arguments)]
    pub fn cross<A: AicoreAgent>(
        &self,
        a: &A,
        key: u32,
        n: u64,
        mask: u64,
        bit: u64,
        phase: u64,
        task: u32,
        claim_first: bool,
    ) -> Result<(), Failure> {
        let slot = GmAddr(self.l.slot(self.c, key));
        let site = if phase == capture_phase::BEFORE {
            crate::codes::Site::CaptureBefore
        } else {
            crate::codes::Site::CaptureAfter
        };
        let mut now = a.now_ticks();
        let deadline = now.saturating_add(self.budget);
        if mask == bit {
            return self.alone(a, slot, key, phase, task, site as u32, (now, deadline));
        }
        let exit = |a: &A| a.read_dmb() == regs::DMB_EXIT;
        if claim_first {
            loop {
                match claim(a, slot, n) {
                    Claim::Ready(won) => {
                        if won {
                            a.fetch_add(GmAddr(self.l.header(capture_header::CLAIMS)), 1);
                        }
                        break;
                    }
                    Claim::Moved => return Err(Failure::Aborted(None)),
                    c @ (Claim::Initialising | Claim::Busy) => {
                        if exit(a) {
                            return Err(Failure::Exit);
                        }
                        now = a.now_ticks();
                        if now >= deadline {
                            // In CLAIMING nothing may be written: no abort word, just the code.
                            return Err(Failure::Aborted(Some(if c == Claim::Initialising {
                                crate::codes::DeviceFault::ArgsCaptureInitLost
                            } else {
                                crate::codes::DeviceFault::ArgsCaptureTimeout
                            })));
                        }
                        let at = slot.offset(capture_slot::CLAIM);
                        self.pause(a, at, a.query(at), deadline, now);
                    }
                }
            }
        }
        let last = arrive(a, slot, phase, bit, mask);
        let mut w = Waiting { deadline, now, expired: false, code: None };
        let sealed = if last {
            self.publish(a, slot, key, Some((n, mask)), phase, task, site as u32, &mut w)?
        } else {
            self.follow(a, slot, phase, task, site as u32, &mut w)?
        };
        leave(a, slot, phase, bit, mask, n, sealed);
        if !sealed {
            // The phase's answer was ABORTED (acknowledged by the AICPU).
            a.fetch_add(GmAddr(self.l.header(capture_header::ABORTS_TAKEN)), 1);
        }
        if sealed { Ok(()) } else { Err(Failure::Aborted(w.code)) }
    }

    /// Cross phase `phase` of task `task` as its one participant: no peer waits on the slot,
    /// so nothing of it is claimed, joined or left (its occupancy is not read); the core
    /// publishes its request and waits for the terminal answer as a publisher does, and only
    /// the slot's abort word is shared with the AICPU (see [`Boundary::publish`]). A lone phase
    /// whose budget ran out fails even if its seal comes late: it has marked the slot aborted,
    /// and no later claim clears that mark for the lone tasks that come after it.
    #[allow(clippy::too_many_arguments)]
    fn alone<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        key: u32,
        phase: u64,
        task: u32,
        site: u32,
        (now, deadline): (u64, u64),
    ) -> Result<(), Failure> {
        let mut w = Waiting { deadline, now, expired: false, code: None };
        let sealed = self.publish(a, slot, key, None, phase, task, site, &mut w)?;
        if sealed && !w.expired {
            return Ok(());
        }
        if !sealed {
            // The phase's answer was ABORTED (acknowledged by the AICPU).
            a.fetch_add(GmAddr(self.l.header(capture_header::ABORTS_TAKEN)), 1);
        }
        Err(Failure::Aborted(w.code))
    }

    /// Wait a slice (or until `deadline`) for `word` to change from `seen`, the value the
    /// caller's last look was based on (so a store landing since then ends the wait at once).
    /// A look that finds the same word with the same value as the last one backs off
    /// ([`Backoff::wait_word`](crate::backoff::Backoff::wait_word)).
    /// `now` is the caller's latest clock read.
    fn pause<A: AicoreAgent>(&self, a: &A, word: GmAddr, seen: u64, deadline: u64, now: u64) {
        let until = deadline.min(now.saturating_add(a.ticks_from_micros(SLICE_US)));
        let mut b = self.backoff.get();
        b.wait_word(a, word, seen, until);
        self.backoff.set(b);
    }

    /// The budget ran out: the first time, mark the slot aborted (the waiter whose
    /// compare-and-swap set it latches ARGS_CAPTURE_TIMEOUT) and allow one more budget for the
    /// AICPU's acknowledgement, waiting on; the second time, `false`: the core leaves into the
    /// run's fatal path unacknowledged.
    fn expire<A: AicoreAgent>(&self, a: &A, slot: GmAddr, site: u32, w: &mut Waiting) -> bool {
        if w.expired {
            return false;
        }
        w.expired = true;
        if abort(a, slot, site) {
            w.code = Some(crate::codes::DeviceFault::ArgsCaptureTimeout);
        }
        a.send_event();
        w.deadline = a.now_ticks().saturating_add(self.budget);
        true
    }

    /// The last arriver (or a lone participant: `peers` is `None`): allocate the phase's
    /// `phase_seq`, write the request, store the publisher word when there are peers
    /// (`(occupancy, mask)`), and re-request (a new tick) until the acknowledgement for this
    /// tick is terminal. `Ok(true)` sealed, `Ok(false)` aborted and acknowledged.
    #[allow(clippy::too_many_arguments)]
    fn publish<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        key: u32,
        peers: Option<(u64, u64)>,
        phase: u64,
        task: u32,
        site: u32,
        w: &mut Waiting,
    ) -> Result<bool, Failure> {
        self.await_last_departures(a, w)?;
        // Broken (CAPTURE_PEERS_SKIP_SEAL, forced): the peers run ahead first.
        #[cfg(feature = "breakage")]
        broken::let_the_peers_run_ahead(self, a, slot, peers, phase);
        let seq = self.seq.get() % 0xFFFF_FFFF + 1;
        self.seq.set(seq);
        // A lone phase's line is read by its publisher alone: nothing to wait for before the
        // next reuse.
        self.last.set(peers.map(|(n, mask)| (slot, phase, mask, n)));
        let r = Request {
            epoch: self.epoch,
            task: task as u64,
            phase,
            phase_seq: seq,
            arg_index: 0,
            cursor: 0,
            slot: ((self.c as u64) << 8) | key as u64,
            tick: self.next_tick(),
        };
        let line = GmAddr(self.l.request(self.w));
        self.requested.set(self.requested.get() + 1);
        self.send(a, line, &r);
        if peers.is_some() {
            a.store_direct(slot.offset(capture_slot::PUBLISHER + 8 * phase), publisher_word(self.w, seq));
        }
        self.ask(a);
        self.await_answer(a, slot, site, line, r, w)
    }

    /// This core's acknowledgement line is reused only after its last phase's departures: wait
    /// for them (within the phase's budget; EXIT ends the wait).
    fn await_last_departures<A: AicoreAgent>(&self, a: &A, w: &mut Waiting) -> Result<(), Failure> {
        let Some((s, p, m, o)) = self.last.get() else {
            return Ok(());
        };
        while !departed(a, s, p, m, o) {
            if a.read_dmb() == regs::DMB_EXIT {
                return Err(Failure::Exit);
            }
            w.now = a.now_ticks();
            if w.now >= w.deadline {
                return Err(Failure::Aborted(Some(crate::codes::DeviceFault::ArgsCaptureTimeout)));
            }
            let at = s.offset(capture_slot::RELEASED + 8 * p);
            self.pause(a, at, a.query(at), w.deadline, w.now);
        }
        Ok(())
    }

    /// The publisher's wait for a terminal acknowledgement of request `r` (written to `line`
    /// and asked for): re-request with a new tick after each non-terminal answer, while the
    /// budget lasts and the phase is not aborted. `Ok(true)` sealed, `Ok(false)` aborted and
    /// acknowledged.
    fn await_answer<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        site: u32,
        line: GmAddr,
        mut r: Request,
        w: &mut Waiting,
    ) -> Result<bool, Failure> {
        let ack_line = GmAddr(self.l.ack(self.w));
        let identity = (self.epoch, r.task, r.phase_seq);
        let mut first = true;
        loop {
            // The tick the look was based on; `None`: the line changed during the read, or its
            // tick is an earlier answer's (or none yet).
            let (held, seen) = look_ack(a, ack_line, r.tick);
            if let Some(ack) = seen
                && ack.answers(identity, r.tick)
            {
                match ack.status {
                    crate::layout::capture_status::SEALED => return Ok(true),
                    crate::layout::capture_status::ABORTED => return Ok(false),
                    status => {
                        if status == crate::layout::capture_status::WOULD_BLOCK {
                            // The lane cannot take the record yet: ask again after a while.
                            let until = a.now_ticks().saturating_add(a.ticks_from_micros(RETRY_US));
                            a.wait_for_event(until.min(w.deadline));
                        }
                        // Ask again only within the budget and while the phase is not aborted:
                        // out of budget, the wait below expires it; aborted (by this core or a
                        // peer), the service answers ABORTED to the tick it has, and a new
                        // request would only be a second phase to abort.
                        let aborted = w.expired || a.query(slot.offset(capture_slot::ABORTED)) != 0;
                        if !aborted && a.now_ticks() < w.deadline {
                            r.arg_index = ack.arg_index;
                            r.cursor = ack.cursor;
                            r.tick = self.next_tick();
                            self.send(a, line, &r);
                            self.ask(a);
                            continue;
                        }
                    }
                }
            }
            // Fault injection (CAPTURE_STOP_AFTER_LOOK): the run's stop lands here.
            #[cfg(feature = "breakage")]
            broken::wait_for_the_stop(a);
            if a.read_dmb() == regs::DMB_EXIT {
                // The run's stop may have overtaken the last look: an ABORTED answer written
                // before the stop (the AICPU answers the aborted phases before it retires its
                // cores) is visible to a look after it, and is this publisher's to take, as it
                // is a peer's (`Boundary::follow`).
                if aborted_before_the_stop(a, ack_line, identity, r.tick) {
                    return Ok(false);
                }
                return Err(Failure::Exit);
            }
            // The first look's clock is the last one read before the request (the phase's start,
            // the claim's or the departures' last look): no wait came since.
            let now = if first { w.now } else { a.now_ticks() };
            first = false;
            if now >= w.deadline && !self.expire(a, slot, site, w) {
                return Err(Failure::Aborted(w.code));
            }
            // Not this request's answer yet (an earlier answer's tick, or 0): wait for the tick
            // to change from the one read. This request's tick but rewritten during the read
            // (`None`): look again soon (a wait based on 0 ends at once, and backs off).
            let tick = match seen {
                Some(ack) => ack.tick,
                None if held == r.tick => 0,
                None => held,
            };
            self.pause(a, ack_line.offset(capture_ack::TICK), tick, w.deadline, now);
        }
    }

    /// A peer: wait for the phase's publisher word, then for a terminal acknowledgement on the
    /// publisher's line carrying the publisher's `phase_seq`. `Ok(true)` sealed, `Ok(false)`
    /// aborted and acknowledged.
    #[allow(clippy::too_many_arguments)]
    fn follow<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        phase: u64,
        task: u32,
        site: u32,
        w: &mut Waiting,
    ) -> Result<bool, Failure> {
        // Broken: the peer goes on without its phase's seal.
        crate::seam!(CAPTURE_PEERS_SKIP_SEAL => Ok(true));
        let word = slot.offset(capture_slot::PUBLISHER + 8 * phase);
        let mut publisher_seen = None;
        loop {
            let (on, seen) = match self.look(a, slot, phase, task, &mut publisher_seen) {
                Look::Sealed => return Ok(true),
                Look::Aborted => return Ok(false),
                Look::Pending(wait) => wait.unwrap_or((word, 0)),
            };
            if a.read_dmb() == regs::DMB_EXIT {
                // The run's stop may have overtaken the last look: an ABORTED answer written
                // before the stop (the publisher's abort latched the fault that stopped the
                // run) is visible to a look after it, and is this peer's to take.
                if let Look::Aborted = self.look(a, slot, phase, task, &mut publisher_seen) {
                    return Ok(false);
                }
                return Err(Failure::Exit);
            }
            // Until the last participant arrived (no publisher yet) it may still be running its
            // kernel, which is the AICPU watchdog's to judge (KERNEL_HUNG, at the watchdog: the
            // boundary budget is half of it): the wait for arrivals gets two more budgets
            // before it counts as the capture's failure, so a hung gang lane is reported as
            // hung, never as its peers' capture timeout.
            let deadline =
                if publisher_seen.is_none() { w.deadline.saturating_add(2 * self.budget) } else { w.deadline };
            let now = a.now_ticks();
            if now >= deadline && !self.expire(a, slot, site, w) {
                return Err(Failure::Aborted(w.code));
            }
            self.pause(a, on, seen, deadline, now);
        }
    }

    /// One look at the phase's answer: the publisher (found once), then its acknowledgement
    /// line for this phase's identity.
    fn look<A: AicoreAgent>(
        &self,
        a: &A,
        slot: GmAddr,
        phase: u64,
        task: u32,
        publisher_seen: &mut Option<(u32, u64)>,
    ) -> Look {
        if publisher_seen.is_none() {
            *publisher_seen = publisher(a, slot, phase);
        }
        let Some((p, seq)) = *publisher_seen else { return Look::Pending(None) };
        let seq = self.awaited_seq(seq);
        let line = GmAddr(self.l.ack(p));
        let Some(ack) = read_ack(a, line) else {
            // A line being rewritten (or not written yet): look again soon (a wait based on 0
            // ends at once; the waits back off while the look finds the same).
            return Look::Pending(Some((line.offset(capture_ack::TICK), 0)));
        };
        if ack.identity == (self.epoch, task as u64, seq) {
            match ack.status {
                crate::layout::capture_status::SEALED => return Look::Sealed,
                crate::layout::capture_status::ABORTED if takes_an_abort() => return Look::Aborted,
                _ => {}
            }
        }
        Look::Pending(Some((line.offset(capture_ack::TICK), ack.tick)))
    }

    /// The `phase_seq` a peer waits for: the one its publisher's word names (`published`).
    #[cfg_attr(not(feature = "breakage"), allow(clippy::unused_self))]
    fn awaited_seq(&self, published: u64) -> u64 {
        // Broken: the peer's own counter, which proves nothing about this phase.
        crate::seam!(CAPTURE_PEER_OWN_SEQ => self.seq.get() % 0xFFFF_FFFF + 1);
        published
    }

    fn next_tick(&self) -> u64 {
        let t = self.tick.get() + 1;
        self.tick.set(t);
        t
    }
}

/// Whether the acknowledgement line `line` holds an ABORTED answer to the request of `identity`
/// asked with `tick`: a publisher that saw the run's stop looks once more, since the stop may
/// have overtaken its last look at an answer written before it.
fn aborted_before_the_stop<G: GmAtomic + Barriers>(a: &G, line: GmAddr, identity: (u64, u64, u64), tick: u64) -> bool {
    // Broken: no second look; the ABORTED answer the stop overtook is left untaken.
    crate::seam!(CAPTURE_PUBLISHER_EXIT_NO_RELOOK => false);
    look_ack(a, line, tick)
        .1
        .is_some_and(|ack| ack.answers(identity, tick) && ack.status == crate::layout::capture_status::ABORTED)
}

/// Whether a peer takes an ABORTED answer to its phase as the phase's end (always).
fn takes_an_abort() -> bool {
    // Broken: the peer ignores it and waits on.
    crate::seam!(CAPTURE_PEER_IGNORES_ABORTED => false);
    true
}

/// The injected waits of the boundary walk's broken variants (forced interleavings), each a
/// no-op unless its switch is on. Compiled with the `breakage` feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::{AicoreAgent, GmAddr};

    use super::Boundary;
    use crate::layout::{capture_phase, capture_slot, regs};

    /// `CAPTURE_PEERS_SKIP_SEAL`, forced: before a BEFORE request is written, the publisher
    /// waits (up to a second) until its peers — which did not wait for the seal — ran their
    /// kernels and arrived at AFTER.
    pub(super) fn let_the_peers_run_ahead<A: AicoreAgent>(
        b: &Boundary,
        a: &A,
        slot: GmAddr,
        peers: Option<(u64, u64)>,
        phase: u64,
    ) {
        let Some((_, mask)) = peers else { return };
        if phase != capture_phase::BEFORE
            || !crate::breakage::broken(crate::breakage::CAPTURE_PEERS_SKIP_SEAL)
            || !crate::breakage::forcing()
        {
            return;
        }
        let after = slot.offset(capture_slot::ARRIVED + 8 * capture_phase::AFTER);
        let until = a.now_ticks().saturating_add(a.ticks_from_micros(1_000_000));
        while (a.query(after).count_ones() + 1) < mask.count_ones() && a.now_ticks() < until {
            b.pause(a, after, a.query(after), until, a.now_ticks());
        }
    }

    /// `CAPTURE_STOP_AFTER_LOOK` (fault injection, forced): a publisher whose look found no
    /// answer waits (up to ten seconds) for the run's stop before it reads DMB, so the stop
    /// lands between the look and the read.
    pub(super) fn wait_for_the_stop<A: AicoreAgent>(a: &A) {
        if !crate::breakage::broken(crate::breakage::CAPTURE_STOP_AFTER_LOOK) || !crate::breakage::forcing() {
            return;
        }
        let until = a.now_ticks().saturating_add(a.ticks_from_micros(10_000_000));
        while a.read_dmb() != regs::DMB_EXIT && a.now_ticks() < until {
            let slice = a.now_ticks().saturating_add(a.ticks_from_micros(1_000));
            a.wait_for_event(slice.min(until));
        }
    }
}
