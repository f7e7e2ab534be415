//! The AICPU side of a boundary capture: [`Service`] answers the requests of the cores one
//! AICPU thread serves (the clusters `c` with `c % threads == thread`), through that thread's
//! dump lane.
//!
//! One [`Service::step`] is bounded: when the thread's `ASKED` counter moved since the last
//! scan (every core adds 1 to it after writing a request), it scans every served core's request
//! line once, after a read barrier (a request seen for the first time joins the end of the
//! thread's list of requests in flight, which is so in order of first observation), answers an
//! aborted phase, then serves one request — the one
//! whose reservation is open if it asked again, else the earliest observed request in flight —
//! copying at most `max_bytes` of payload. A request that asks while another core's reservation is open is answered
//! WOULD_BLOCK (the lane would answer its begin `WouldBlock(ReservationOpen)`): nothing is
//! reserved or accounted for it, and it keeps its place, its first observation, across any
//! number of such answers — the earliest observed request in flight is served next even while
//! it waits to ask again, so no later publisher overtakes it. Between steps
//! the supervisor polls completion, the error latch and its stop flag, so no argument, however
//! large or strided, holds the thread.
//!
//! The lane holds at most one open reservation: between steps it is suspended
//! ([`Reservation::suspend`](crate::dump::lane::Reservation::suspend)), which keeps every other
//! reservation out ([`Blocked::ReservationOpen`](crate::dump::Blocked::ReservationOpen)) and the lane unpublished until it is resumed
//! and committed or abandoned.

use alloc::boxed::Box;

use pto_hal::{AicpuAgent, GmAddr};

use super::lines::{Ack, Asked, Asking, look_asked, read_request, write_ack};
use crate::dump::{Begin, DumpLane, DumpLevel, DumpReservation, GmLane, Suspended, TaskArgs, observe_args};
use crate::fixed::PerCore;
use crate::layout::{CaptureLayout, capture_header, capture_phase, capture_slot, capture_status, dump_stage};

/// A request as the service tracks it.
#[derive(Copy, Clone, Debug, Default)]
struct Req {
    task: u32,
    phase: u64,
    seq: u64,
    /// `(cluster, lane)` of its rendezvous slot.
    slot: (u32, u32),
    /// The newest tick the core published for it.
    tick: u64,
    /// The tick last answered.
    answered: u64,
    /// The next argument index to look at.
    arg: u32,
}

/// One served core.
#[derive(Copy, Clone, Debug, Default)]
struct Served {
    w: u32,
    /// The request tick last read from its line.
    seen: u64,
    req: Option<Req>,
    /// The answer its acknowledgement line holds (the last this thread wrote in this run):
    /// only the words that change are stored again.
    acked: Option<Ack>,
    /// The task whose argument record this thread made visible last for this core, and its
    /// header: the image does not change during a run, so the task's later steps and its
    /// other phase read the record without observing it again.
    observed: Option<(u32, TaskArgs)>,
}

/// What the service counted (for tests and the run's diagnostics).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Steps that copied or committed something.
    pub steps: u64,
    /// Most payload bytes one step copied.
    pub largest_step: u64,
    /// Phases sealed.
    pub sealed: u64,
    /// Phases aborted.
    pub aborted: u64,
    /// WOULD_BLOCK answers (the lane had no buffer, no arena room, or another core's
    /// reservation open).
    pub would_block: u64,
    /// Records committed.
    pub committed: u64,
    /// Records begun for a request while an earlier-observed one was in flight.
    pub overtakes: u64,
    /// Answers given to other requests while a reservation was open.
    pub answered_while_open: u64,
}

/// The boundary-capture service of one AICPU thread.
pub struct Service<'a, A: AicpuAgent> {
    a: &'a A,
    l: CaptureLayout,
    lane: GmLane<'a, A>,
    level: DumpLevel,
    max_bytes: u64,
    epoch: u64,
    /// Each task's argument record (GM address), by task id.
    args: &'a [u64],
    /// The served cores' request state, one place per core of the platform's bound
    /// (`A::MaxClusters`): allocated once, when the service is made, and never grown. On the
    /// heap, not in the thread's frame: some 10 KiB at the simulator's bound, held for the whole
    /// run beside the thread's scheduler (see `Scheduler`).
    cores: Box<PerCore<Served, A::MaxClusters>>,
    /// The indices in `cores` of the requests in flight (`req` set), in the order they were
    /// first observed: the earliest is first. A step looks at these alone, not at every
    /// served core.
    inflight: PerCore<u32, A::MaxClusters>,
    /// This thread's [`capture_header::ASKED`] counter, and its value at the last scan.
    asked: (GmAddr, u64),
    /// The open (suspended) reservation and the index in `cores` of the request it serves.
    open: Option<(usize, Suspended)>,
    /// A phase was aborted or a reservation abandoned: the lane is left unclosed.
    unsettled: bool,
    /// Steps that sealed their phase, not yet added to [`capture_header::SERVED`].
    unpublished_steps: u64,
    /// Counters.
    pub stats: ServiceStats,
}

impl<'a, A: AicpuAgent> Service<'a, A> {
    /// The service of thread `t` of `threads` over region `l`, recording into `lane` at
    /// `level`, for a run of epoch `epoch` whose tasks' argument records are `args`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        a: &'a A,
        l: CaptureLayout,
        lane: GmLane<'a, A>,
        level: DumpLevel,
        epoch: u64,
        args: &'a [u64],
        t: u32,
        threads: u32,
    ) -> Service<'a, A> {
        let threads = threads.max(1);
        let mut cores = Box::new(PerCore::new());
        // Boot refused a launch of more clusters than the bound, so every served core fits;
        // were one not to, it would go unserved (its budget ends its wait), never indexed past
        // the table.
        for w in (0..l.workers()).filter(|&w| crate::exec::resident::state::seat(w, l.clusters).0 % threads == t) {
            if cores.push(Served { w, seen: 0, req: None, acked: None, observed: None }).is_err() {
                break;
            }
        }
        let max_bytes = a.query(GmAddr(l.header(capture_header::MAX_BYTES))).max(1);
        Service {
            a,
            l,
            lane,
            level,
            max_bytes,
            epoch,
            args,
            cores,
            inflight: PerCore::new(),
            // Not a value the counter holds at the start: the first step scans.
            asked: (GmAddr(l.asked(t)), u64::MAX),
            open: None,
            unsettled: false,
            unpublished_steps: 0,
            stats: ServiceStats::default(),
        }
    }

    /// The word this thread sleeps on between steps and the value it was based on: its
    /// [`capture_header::ASKED`] counter as the last step read it (a request written since
    /// ends the wait at once).
    pub fn asked(&self) -> (GmAddr, u64) {
        self.asked
    }

    /// One bounded service step (see the module documentation). Returns whether it answered
    /// anything.
    pub fn step(&mut self) -> bool {
        // The request lines are read only when a core asked since the last scan.
        match look_asked(self.a, self.asked.0, &mut self.asked.1) {
            Asked::Nothing => {}
            // One ask since the last look, by a core this thread serves: its line alone.
            Asked::One(w) => match self.cores.iter().position(|s| s.w == w) {
                Some(i) => self.scan_core(i),
                // Another thread's core sharing the counter: every line, as for several.
                None => self.scan(),
            },
            Asked::Several => self.scan(),
        }
        let mut answered = self.abort_aborted();
        // The open reservation's owner first: it keeps advancing.
        let owner = self.open.as_ref().map(|(i, _)| *i);
        if let Some(i) = self.choose(owner) {
            if owner.is_none() {
                self.count_overtakes(i);
            }
            self.serve(i);
            answered = true;
        }
        self.answer_would_block() || answered
    }

    /// Which request a step serves: the open reservation's owner (`owner`), when it asked
    /// again; else the earliest observed request in flight, whether or not it asked again since
    /// its last answer (one told WOULD_BLOCK keeps its place until it asks again).
    fn choose(&self, owner: Option<usize>) -> Option<usize> {
        crate::seam!(CAPTURE_STALL_OPEN => broken::choose_stalling_the_owner(self, owner));
        crate::seam!(CAPTURE_HOLD_OPEN => broken::choose_holding_the_owner(self, owner));
        crate::seam!(CAPTURE_SERVE_NEWEST => broken::choose_the_newest(self, owner));
        match owner {
            Some(i) => Some(i).filter(|&i| self.asking(i)),
            None => self.earliest_asking(),
        }
    }

    /// The earliest observed request in flight, when it asked since its last answer.
    fn earliest_asking(&self) -> Option<usize> {
        self.inflight.first().map(|&i| i as usize).filter(|&i| self.asking(i))
    }

    /// While a reservation is open, every other request that asked is told WOULD_BLOCK:
    /// nothing reserved, nothing accounted; it asks again later and keeps its place. Whether
    /// any was answered.
    fn answer_would_block(&mut self) -> bool {
        // Broken: the others are left unanswered while a reservation is open.
        crate::seam!(CAPTURE_SILENT_WHILE_OPEN => false);
        let mut answered = false;
        if let Some(o) = self.open.as_ref().map(|(o, _)| *o) {
            for k in 0..self.inflight.len() {
                let i = self.inflight[k] as usize;
                if i != o
                    && self.asking(i)
                    && let Some(r) = self.cores[i].req
                {
                    self.count_would_block();
                    self.stats.answered_while_open += 1;
                    self.a.fetch_add(GmAddr(self.l.header(capture_header::ANSWERED_WHILE_OPEN)), 1);
                    self.ack(i, capture_status::WOULD_BLOCK, r.arg as u64, 0);
                    answered = true;
                }
            }
        }
        answered
    }

    /// Whether an abort of the open reservation's owner waits for another one's (never).
    #[cfg_attr(not(feature = "breakage"), allow(clippy::unused_self))]
    fn defers_the_owners_abort(&self) -> bool {
        // Injected (CAPTURE_ABORT_OWNER_LAST): until this service answered one abort, the
        // owner's abort waits for another one's.
        crate::seam!(CAPTURE_ABORT_OWNER_LAST => self.stats.aborted == 0);
        false
    }

    /// Whether a request this service has read asked since its last answer (it can be served
    /// without another request being written): after a step that answered one request, another
    /// may be waiting its turn.
    pub fn pending(&self) -> bool {
        self.inflight.iter().any(|&i| self.asking(i as usize))
    }

    /// Whether served core `i` has a request in flight that asked since its last answer.
    fn asking(&self, i: usize) -> bool {
        self.cores[i].req.is_some_and(|r| r.tick != r.answered)
    }

    /// Answer the aborted phases only (the run is stopping: nothing else is served).
    pub fn answer_aborts(&mut self) -> bool {
        self.scan();
        self.abort_aborted()
    }

    /// Read every served core's request line once ([`Service::scan_core`]).
    fn scan(&mut self) {
        for i in 0..self.cores.len() {
            self.scan_core(i);
        }
    }

    /// Read served core `i`'s request line; a new phase joins the end of the list in flight, a
    /// new tick of a known phase only marks it as asking again.
    fn scan_core(&mut self, i: usize) {
        let a = self.a;
        let w = self.cores[i].w;
        let line = GmAddr(self.l.request(w));
        // The core wrote every other word before the tick.
        let Some(Asking { tick, epoch, task, phase, slot, phase_seq: seq }) = read_request(a, line, self.cores[i].seen)
        else {
            return;
        };
        self.cores[i].seen = tick;
        if epoch != self.epoch || task >= self.args.len() as u64 || phase > capture_phase::AFTER {
            // Not a request of this run: nothing to answer (the core's budget covers it).
            return;
        }
        let task = task as u32;
        let slot = ((slot >> 8) as u32, (slot & 0xFF) as u32);
        match &mut self.cores[i].req {
            Some(r) if (r.task, r.phase, r.seq) == (task, phase, seq) => r.tick = tick,
            cur => {
                *cur = Some(Req { task, phase, seq, slot, tick, answered: 0, arg: 0 });
                // A new phase of this core replaces the one it had in flight (if any) and
                // takes its place at the end: the latest observed.
                self.inflight.retain(|&k| k as usize != i);
                // Every served core has at most one place, and the list holds one per core.
                let _ = self.inflight.push(i as u32);
            }
        }
    }

    /// Request `i` is no longer in flight (sealed or aborted).
    fn retire(&mut self, i: usize) {
        self.cores[i].req = None;
        self.inflight.retain(|&k| k as usize != i);
    }

    /// Answer every request whose slot is marked aborted: finish nothing more, abandon its
    /// reservation if it holds the open one (the only case a record is charged), acknowledge
    /// ABORTED with the full identity.
    fn abort_aborted(&mut self) -> bool {
        let mut any = false;
        let owner_last = self.defers_the_owners_abort();
        let mut k = 0;
        while k < self.inflight.len() {
            let i = self.inflight[k] as usize;
            k += 1;
            let Some(r) = self.cores[i].req else { continue };
            let slot = GmAddr(self.l.slot(r.slot.0, r.slot.1));
            if self.a.query(slot.offset(capture_slot::ABORTED)) == 0 {
                continue;
            }
            if owner_last && self.open.as_ref().is_some_and(|(o, _)| *o == i) {
                // Injected: the owner's abort waits for another one's.
                continue;
            }
            if self.open.as_ref().is_some_and(|(o, _)| *o == i)
                && let Some((_, s)) = self.open.take()
            {
                self.lane.resume(s).abandon();
            }
            self.unsettled = true;
            self.ack(i, capture_status::ABORTED, r.arg as u64, 0);
            self.retire(i);
            // The list moved down by one under the cursor.
            k -= 1;
            self.stats.aborted += 1;
            self.a.fetch_add(GmAddr(self.l.header(capture_header::ABORTS_ANSWERED)), 1);
            any = true;
        }
        any
    }

    /// Serve request `i` one step: continue its open reservation, or begin its next record;
    /// copy at most `max_bytes`, committing what completes; then acknowledge.
    fn serve(&mut self, i: usize) {
        let Some(mut r) = self.cores[i].req else { return };
        let stage =
            if r.phase == capture_phase::BEFORE { dump_stage::BEFORE_DISPATCH } else { dump_stage::AFTER_COMPLETION };
        // This thread may not be the one that made the image visible at boot: it observes a
        // task's record once, at the first step it serves of the task.
        let record = match self.cores[i].observed {
            Some((t, record)) if t == r.task => record,
            _ => {
                let record = observe_args(self.a, self.args[r.task as usize]);
                self.cores[i].observed = Some((r.task, record));
                record
            }
        };
        let mut budget = self.max_bytes;
        let mut copied_total = 0u64;
        let mut committed = 0u64;
        let mut status = capture_status::IN_PROGRESS;
        let mut cursor = 0u64;
        loop {
            let res = match self.open.take() {
                Some((o, s)) if o == i => Begin::Accepted(self.lane.resume(s)),
                Some(other) => {
                    // Not this request's reservation (the owner was chosen first): wait.
                    self.open = Some(other);
                    status = capture_status::WOULD_BLOCK;
                    break;
                }
                None => match record.next(self.a, self.level, r.task, stage, r.arg) {
                    None => {
                        status = capture_status::SEALED;
                        break;
                    }
                    Some((k, c)) => {
                        r.arg = k;
                        self.lane.try_begin(&c)
                    }
                },
            };
            match res {
                Begin::Accepted(mut res) => {
                    let n = if budget > 0 { res.copy_chunk(budget) } else { 0 };
                    budget = budget.saturating_sub(n);
                    copied_total += n;
                    if res.remaining() == 0 {
                        res.commit();
                        committed += 1;
                        r.arg += 1;
                        if budget > 0 {
                            continue;
                        }
                        // Out of budget for this step: the next record begins on the next.
                        status = match record.next(self.a, self.level, r.task, stage, r.arg) {
                            None => capture_status::SEALED,
                            Some(_) => capture_status::IN_PROGRESS,
                        };
                    } else {
                        cursor = res.copied();
                        self.open = Some((i, res.suspend()));
                    }
                    break;
                }
                Begin::WouldBlock(_) => {
                    status = if committed > 0 { capture_status::IN_PROGRESS } else { capture_status::WOULD_BLOCK };
                    if committed == 0 {
                        self.count_would_block();
                    }
                    break;
                }
                Begin::Refused(_) => {
                    // Counted as dropped by the lane; go on with the next argument.
                    r.arg += 1;
                    continue;
                }
            }
        }
        if committed > 0 || copied_total > 0 {
            self.stats.steps += 1;
            self.stats.committed += committed;
            // A step that sealed its phase shows its progress in the task's completion (the
            // core completes it next): it is added to the header's count later. One that left
            // the phase unsealed adds itself (and those) now, for the idle cores' watchdog.
            if status == capture_status::SEALED {
                self.unpublished_steps += 1;
            } else {
                self.publish_steps(1);
            }
            // The header's word is the largest step of every thread, never below this
            // thread's own largest: only a new largest of this thread can raise it.
            if copied_total > self.stats.largest_step {
                self.stats.largest_step = copied_total;
                let at = GmAddr(self.l.header(capture_header::LARGEST_STEP));
                let mut cur = self.a.query(at);
                while cur < copied_total {
                    let seen = self.a.compare_exchange(at, cur, copied_total);
                    if seen == cur {
                        break;
                    }
                    cur = seen;
                }
            }
        }
        if status == capture_status::SEALED {
            // The lane publishes a buffer when it is full, when the arena is (so the host can
            // make room) and at close: publishing every sealed phase would spend a buffer per
            // phase and leave the next ones waiting for the host's drain (WOULD_BLOCK).
            self.stats.sealed += 1;
        }
        self.cores[i].req = Some(r);
        self.ack(i, status, r.arg as u64, cursor);
        if status == capture_status::SEALED {
            self.retire(i);
        }
    }

    /// Request `i` is about to be served with no reservation open: count an overtake when an
    /// earlier-observed request of this thread is still in flight (waiting for its turn).
    fn count_overtakes(&mut self, i: usize) {
        // The list is in order of first observation: an earlier request is one before it.
        if self.inflight.first().is_some_and(|&k| k as usize != i) {
            self.stats.overtakes += 1;
            self.a.fetch_add(GmAddr(self.l.header(capture_header::OVERTAKES)), 1);
        }
    }

    /// Add `n` steps and the sealing steps not yet counted to [`capture_header::SERVED`].
    fn publish_steps(&mut self, n: u64) {
        let n = n + core::mem::take(&mut self.unpublished_steps);
        if n > 0 {
            self.a.fetch_add(GmAddr(self.l.header(capture_header::SERVED)), n);
        }
    }

    fn count_would_block(&mut self) {
        self.stats.would_block += 1;
        self.a.fetch_add(GmAddr(self.l.header(capture_header::WOULD_BLOCK)), 1);
    }

    /// Write request `i`'s acknowledgement: status, echoes and identity, a store barrier, then
    /// the answered tick last (the word its waiters watch; the store wakes them).
    fn ack(&mut self, i: usize, status: u64, arg: u64, cursor: u64) {
        let line = GmAddr(self.l.ack(self.cores[i].w));
        let c = &mut self.cores[i];
        let Some(r) = c.req.as_mut() else { return };
        r.answered = r.tick;
        let ack = Ack { status, arg_index: arg, cursor, tick: r.tick, identity: (self.epoch, r.task as u64, r.seq) };
        write_ack(self.a, line, &ack, c.acked.as_ref());
        c.acked = Some(ack);
    }

    /// The producer stops: an open reservation is abandoned (one dropped record) and the lane
    /// is left unclosed — the host reports its accounting unknown — unless every phase this
    /// service saw was sealed and `settled` (the run completed) holds; then the lane closes.
    /// Either way what was committed is published (a failed run's dump keeps the boundaries
    /// that were sealed: a faulted task's inputs). Returns whether the lane closed.
    pub fn finish(mut self, settled: bool) -> bool {
        self.publish_steps(0);
        if let Some((_, s)) = self.open.take() {
            self.lane.resume(s).abandon();
            self.unsettled = true;
        }
        if self.unsettled || !settled || !self.inflight.is_empty() {
            self.lane.publish();
            return false;
        }
        self.lane.close();
        true
    }
}

/// The broken twins of the service's choice (the breakage suites' variants and fault
/// injections): each is the whole choice with one bug, entered from the first line of
/// `Service::choose` when its switch is active ([`seam!`](crate::seam)). Compiled with the
/// `breakage` feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::AicpuAgent;

    use super::Service;

    /// `CAPTURE_STALL_OPEN` (fault injection): the open reservation's owner is never served
    /// again (it still answers aborts): the owner's budget runs out mid-record.
    pub(super) fn choose_stalling_the_owner<A: AicpuAgent>(s: &Service<'_, A>, owner: Option<usize>) -> Option<usize> {
        if owner.is_some() { None } else { s.earliest_asking() }
    }

    /// `CAPTURE_HOLD_OPEN` (fault injection): the open reservation is held (not advanced)
    /// until the service has answered another core's request WOULD_BLOCK.
    pub(super) fn choose_holding_the_owner<A: AicpuAgent>(s: &Service<'_, A>, owner: Option<usize>) -> Option<usize> {
        match owner {
            Some(_) if s.stats.would_block == 0 => None,
            Some(i) => Some(i).filter(|&i| s.asking(i)),
            None => s.earliest_asking(),
        }
    }

    /// `CAPTURE_SERVE_NEWEST`: with no reservation open, the newest request that asked is
    /// served, not the earliest observed (an early one may wait for ever).
    pub(super) fn choose_the_newest<A: AicpuAgent>(s: &Service<'_, A>, owner: Option<usize>) -> Option<usize> {
        match owner {
            Some(i) => Some(i).filter(|&i| s.asking(i)),
            None => s.inflight.iter().rev().map(|&i| i as usize).find(|&i| s.asking(i)),
        }
    }
}
