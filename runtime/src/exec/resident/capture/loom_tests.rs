//! Loom models of the resident route's argument-capture rendezvous (`docs/args-dump.md`, "The
//! resident route": the guarantees numbered 3–6 there): the slot's step functions from
//! `crate::exec::resident::capture::{slot, lines}` (`claim`, `arrive`, `publisher`, `publisher_word`,
//! `leave`, `departed`, `read_ack`, `write_request`, `ask`; on the AICPU's side `read_request`,
//! `look_asked`, `write_ack`) driven by loom threads as the cores and the service drive them, over the loom device of [`hal`](crate::loom_support::hal) (every slot, request and acknowledgement word a
//! loom atomic, as `GmAtomic` defines it), and the real [`GmLane`] for the lane's one open
//! reservation.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std,breakage --lib exec::resident::capture::loom_tests -- --test-threads=1
//! ```
//!
//! Without `--cfg loom` this module is not compiled. Every model is one `#[test]` whose doc
//! comment states the invariant it checks; each prints its execution count and wall time.
//!
//! Models:
//!
//! * **claim race** ([`acceptance_03_claim_race`]): the participants of one occupancy all
//!   claim at once, from FREE and from SETTLED of the previous occupancy;
//! * **split publishers** ([`acceptance_04_split_publishers`]): two cores cross both phases of
//!   one occupancy, each phase published by whichever arrives last, against an AICPU thread
//!   answering the requests;
//! * **departure proof** ([`acceptance_05_departure_proof`]): the participants leave the AFTER
//!   phase while the next occupancy's claimer tries to claim;
//! * **lane reservation** ([`acceptance_06_lane_reservation`]): the real `GmLane` with one
//!   reservation suspended mid-copy, against the host's collector;
//! * **the `ASKED` counter** ([`asked_counter_never_hides_a_request`]): two cores write a
//!   request and ask while the serving thread looks at the counter and reads what each look
//!   names.
//!
//! * **The core's walk is re-stated, its steps are the runtime's.** `Boundary::cross` (with
//!   its budgets, clock reads, DMB polls and every waiter spinning on a word of its own) is
//!   beyond what loom explores in CI time; [`Seat::cross`] re-states its order (claim, arrive,
//!   publish or follow, leave; the publisher's wait for its previous phase's departures before
//!   it reuses its acknowledgement line) around the real step functions, with no budget
//!   (budgets, aborts and DMB EXIT are not modelled). The peer's choice of the sequence it
//!   matches is the one place the re-statement carries `Boundary::follow`'s breakage switch
//!   (`CAPTURE_PEER_OWN_SEQ`), in a branch marked `BROKEN`.
//! * **Waits block instead of spinning** ([`Bell`]): with two threads yielding while they wait
//!   for a third, loom explores the two yielding to each other without end ("maximum number of
//!   branches"); so a failed look blocks on a loom condition variable until the model's next
//!   step (each step that can end a wait rings it), the way `wait_for_word` ends on a store.
//! * **The AICPU side's walk is re-stated, its steps are the runtime's** ([`serve_requests`],
//!   [`asked_model`]): a request line is read with the real `read_request` (tick, read barrier,
//!   words), the counter looked at with the real `look_asked`, the acknowledgement written
//!   with the real `write_ack` (the new tick in `BEGIN`, the other words, a store barrier, the
//!   answered tick last); the loop around them (`Service::step`'s choice of lines, its wait on
//!   the counter) is re-stated. Every phase is answered SEALED at once (the task records
//!   nothing).
//! * **The host side of the lane** is [`collector`], a cut-down transcription of
//!   `host::dump::Collector` (as in `dump::loom_tests`): drain the ready queue, read the
//!   records and payloads, give the buffer back, acknowledge the payload bytes.
//!
//! **Reproducers** run a model with one breakage switch on (process-wide, so the tests of this
//! file run under one lock, [`serial`]) and assert that loom finds the violation:
//! `CAPTURE_CLAIM_FROM_CLAIMING` (in `claim`), `CAPTURE_PEER_OWN_SEQ` (the marked branch of
//! [`Seat::cross`]), `CAPTURE_SETTLE_FIRST` (in `leave`), `CAPTURE_TWO_RESERVATIONS` (in
//! `GmLane::try_begin` and `publish`), `CAPTURE_ACK_TICK_KEPT` (in `write_ack`) and
//! `CAPTURE_ASKED_JUMP_AS_ONE` (in `look_asked`).
//!
//! What loom does not cover: see `crate::loom_support` (no load buffering; preemption-bounded models
//! cover every interleaving with at most that many preemptions, and `LOOM_MAX_PREEMPTIONS`
//! overrides every model's bound). The tallies assert that each interesting outcome was
//! reached, so a model that silently lost coverage fails.

// The shared harness counts executions and outcomes with std atomics, invisible to loom on
// purpose (`runtime/clippy.toml` forbids them elsewhere).
#[allow(clippy::disallowed_types, reason = "the harness's tallies must not be loom objects")]
use crate::loom_support::prelude::*;
use parking_lot::{Mutex, MutexGuard};

use crate::dump::{Begin, Blocked, Capture, DumpLane, DumpLevel, DumpReservation, GmLane};
use crate::exec::resident::capture::lines::{
    Ack, Asked, Request, ask, look_asked, read_ack, read_request, write_ack, write_request,
};
use crate::exec::resident::capture::slot::{Claim, arrive, claim, departed, leave, publisher, publisher_word};
use crate::layout::{
    CaptureLayout, DUMP_MAGIC, DumpHeader, DumpLayout, DumpReady, DumpRecord, capture_ack, capture_header,
    capture_phase, capture_request, capture_slot, capture_status,
};
use crate::loom_support::hal::{Device, GM_BASE, LoomAicpu, LoomCore, RegOrder};
#[cfg(feature = "breakage")]
use crate::loom_support::harness::expect_found;
use crate::loom_support::harness::{Tally, check};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use pto_hal::{GmAddr, GmAtomic, GmMemory};
use zerocopy::{FromZeros, IntoBytes};

/// The run's epoch.
const EPOCH: u64 = 7;
/// The task whose boundaries are captured.
const TASK: u64 = 5;
/// Its rendezvous slot: lane 0 of cluster 0.
const LANE: u32 = 0;

/// Every test of this file holds this lock: the breakage switch is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock()
}

// ---------------------------------------------------------------------------------------------
// The capture region
// ---------------------------------------------------------------------------------------------

/// The capture region of a one-cluster run (three workers), at the start of GM.
const fn region() -> CaptureLayout {
    CaptureLayout { base: GM_BASE, clusters: 1 }
}

/// The task's rendezvous slot.
fn slot() -> GmAddr {
    GmAddr(region().slot(0, LANE))
}

/// A device holding a zeroed capture region, with `words` (slot word offset, value) set in the
/// task's slot; three cores (their registers are not used).
fn device(words: &[(u64, u64)]) -> Arc<Device> {
    let at: Vec<(u64, u64)> = words.iter().map(|&(w, v)| (slot().0 + w, v)).collect();
    device_at(&at)
}

/// A device holding a zeroed capture region with `words` (GM address, value) set.
fn device_at(words: &[(u64, u64)]) -> Arc<Device> {
    let l = region();
    let mut gm = vec![0u64; (l.bytes() / 8) as usize];
    for &(at, v) in words {
        gm[((at - GM_BASE) / 8) as usize] = v;
    }
    Device::new(&gm, 3, 0, 0, RegOrder::HalContract)
}

/// Core `w` of the device.
fn core(dev: &Arc<Device>, w: u32) -> LoomCore {
    LoomCore { dev: dev.clone(), phys: w }
}

/// Slot word `w` as it is now (after the threads joined).
fn word(dev: &Arc<Device>, w: u64) -> u64 {
    dev.peek(slot().offset(w))
}

/// The claim word's `(state, occupancy)` as it is now.
fn state(dev: &Arc<Device>) -> (u64, u64) {
    capture_slot::fields(word(dev, capture_slot::CLAIM))
}

/// The slot of an occupancy `n` that was claimed and initialised (READY, every other word 0).
fn ready(n: u64) -> [(u64, u64); 1] {
    [(capture_slot::CLAIM, capture_slot::claim(capture_slot::READY, n))]
}

/// The model's stand-in for `wait_for_word` / `send_event`: a count of the protocol steps that
/// may end someone's wait, rung by the model after each such step. A waiter reads the count
/// before its attempt and, when the attempt fails, blocks until the count moves (no wake-up is
/// lost: a step after the read moved it already). A waiter never spins: with two threads
/// spinning on a third's progress, loom would explore the two yielding to each other forever.
struct Bell {
    count: loom::sync::Mutex<u64>,
    moved: loom::sync::Condvar,
}

impl Bell {
    fn new() -> Arc<Bell> {
        Arc::new(Bell { count: loom::sync::Mutex::new(0), moved: loom::sync::Condvar::new() })
    }

    /// The count now (read before an attempt).
    fn seen(&self) -> u64 {
        *self.count.lock().unwrap()
    }

    /// A step that may end a wait happened.
    fn ring(&self) {
        *self.count.lock().unwrap() += 1;
        self.moved.notify_all();
    }

    /// Block until the count is no longer `seen`.
    fn wait(&self, seen: u64) {
        let mut c = self.count.lock().unwrap();
        while *c == seen {
            c = self.moved.wait(c).unwrap();
        }
    }

    /// Wait until `cond` holds (checked after every step).
    fn wait_until(&self, mut cond: impl FnMut() -> bool) {
        loop {
            let seen = self.seen();
            if cond() {
                return;
            }
            self.wait(seen);
        }
    }
}

/// Claim or join occupancy `n` as the cores do (`Boundary::cross`'s claim loop; a failed
/// attempt waits for the next step): `true` for the caller that claimed and initialised the
/// slot, which then rings. `before` is called with the claim word read just before each
/// attempt (a witness read).
fn claim_loop(a: &LoomCore, bell: &Bell, n: u64, mut before: impl FnMut(u64)) -> bool {
    loop {
        let seen = bell.seen();
        before(a.query(slot().offset(capture_slot::CLAIM)));
        match claim(a, slot(), n) {
            Claim::Ready(won) => {
                if won {
                    bell.ring();
                }
                return won;
            }
            Claim::Initialising | Claim::Busy => bell.wait(seen),
            Claim::Moved => panic!("a participant of occupancy {n} found the slot moved past it"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Claim race
// ---------------------------------------------------------------------------------------------

/// `participants` cores of occupancy `n` claim the slot at once (`claim` until it answers
/// Ready, yielding on Initialising / Busy), then set their BEFORE arrival bit (`arrive`). The
/// slot starts FREE (`n` = 1) or SETTLED at `n - 1` with every other word left as the previous
/// occupancy left it (both masks full, both publisher words set: what the claimer must clear).
/// Returns the index of the initialiser.
fn claim_model(participants: u32, from_settled: bool) -> usize {
    use capture_slot::{ABORTED, ARRIVED, CLAIM, CLAIMING, PUBLISHER, READY, RELEASED, SETTLED};
    let mask = (1u64 << participants) - 1;
    let n = if from_settled { 2 } else { 1 };
    let dev = if from_settled {
        device(&[
            (CLAIM, capture_slot::claim(SETTLED, n - 1)),
            (ARRIVED, mask),
            (ARRIVED + 8, mask),
            (RELEASED, mask),
            (RELEASED + 8, mask),
            (PUBLISHER, publisher_word(0, 3)),
            (PUBLISHER + 8, publisher_word(1, 4)),
        ])
    } else {
        device(&[])
    };
    let bell = Bell::new();
    let hs: Vec<_> = (0..participants)
        .map(|p| {
            let (a, bell) = (core(&dev, p), bell.clone());
            thread::spawn(move || {
                let mut joined_seen = false;
                let won = claim_loop(&a, &bell, n, |w| {
                    let (s, o) = capture_slot::fields(w);
                    joined_seen |= (s == CLAIMING || s == READY) && o == n;
                });
                assert!(
                    !(won && joined_seen),
                    "participant {p} claimed while the slot read CLAIMING or READY of occupancy {n}: \
                     a second initialiser"
                );
                let last = arrive(&a, slot(), capture_phase::BEFORE, 1 << p, mask);
                (won, last)
            })
        })
        .collect();
    let got: Vec<(bool, bool)> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<usize> = (0..got.len()).filter(|&i| got[i].0).collect();
    assert!(winners.len() <= 1, "participants {winners:?} all initialised occupancy {n}: a second initialiser");
    assert_eq!(winners.len(), 1, "nobody initialised occupancy {n}");
    let arrived = word(&dev, ARRIVED);
    assert!(arrived == mask, "an arrival bit was lost: the BEFORE mask ends {arrived:#b}, not {mask:#b}");
    let lasts = got.iter().filter(|g| g.1).count();
    assert!(lasts == 1, "{lasts} last arrivers: an arrival bit was lost or a stale mask counted");
    assert_eq!(state(&dev), (READY, n), "the slot ends READY at occupancy {n}");
    for (w, what) in [
        (ARRIVED + 8, "AFTER arrival mask"),
        (RELEASED, "BEFORE released mask"),
        (RELEASED + 8, "AFTER released mask"),
        (PUBLISHER, "BEFORE publisher word"),
        (PUBLISHER + 8, "AFTER publisher word"),
        (ABORTED, "aborted word"),
    ] {
        assert_eq!(word(&dev, w), 0, "the initialiser left the previous occupancy's {what}");
    }
    winners[0]
}

/// Acceptance 3, claim race. Three participants of occupancy 1 claim a FREE slot at once, and
/// three (then two, unbounded) of occupancy 2 claim a slot SETTLED at occupancy 1 whose words
/// still hold the previous occupancy's masks and publisher words. Invariants: exactly one
/// `claim` answers `Ready(true)` (one initialiser), and none does after its own witness read
/// saw CLAIMING or READY of its occupancy (nobody claims from those states); every participant
/// joins (`Ready`, never `Moved`) and sets its bit: the BEFORE arrival mask ends full and
/// exactly one participant is the last arriver (no bit lost, no stale mask counted); the slot
/// ends READY at the occupancy with every other word zero. Reached: each participant was the
/// initialiser in some execution. Preemption bound 2 for three participants.
#[test]
fn acceptance_03_claim_race() {
    let _s = serial();
    for (participants, from_settled, bound) in [(3, false, Some(2)), (3, true, Some(2)), (2, true, None)] {
        let won = Tally::new(participants as usize);
        let t = won.clone();
        let name = format!("acceptance_03_claim_race ({participants} participants, from settled: {from_settled})");
        check(&name, bound, move || t.hit(claim_model(participants, from_settled)));
        let names: Vec<String> = (0..participants).map(|p| format!("participant {p} initialised")).collect();
        won.assert_all_reached(&names.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

/// Reproducer: a core that reads CLAIMING of its occupancy also claims and re-initialises the
/// slot (`breakage::CAPTURE_CLAIM_FROM_CLAIMING`), in [`claim_model`] with two participants
/// from FREE. Loom must find the late claimer taken as a second initialiser, or its clear
/// wiping a peer's arrival bit.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_03_late_claimer_from_claiming() {
    let _s = serial();
    expect_found(
        "reproducer_03_late_claimer_from_claiming",
        Some(2),
        crate::breakage::CAPTURE_CLAIM_FROM_CLAIMING,
        &["a second initialiser", "an arrival bit was lost"],
        || {
            claim_model(2, false);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Split publishers
// ---------------------------------------------------------------------------------------------

/// How a core crossed one phase.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Crossed {
    /// The phase's publisher as the core learned it: `(core, phase_seq)`.
    publisher: (u32, u64),
    /// Whether this core published it.
    published: bool,
}

/// One core's capture state (`Boundary`'s): its seat, its per-core phase counter, its request
/// tick and the phase it published last (whose acknowledgement line it may reuse only after
/// that phase's departures).
struct Seat {
    a: LoomCore,
    w: u32,
    seq: u64,
    tick: u64,
    last: Option<(u64, u64, u64)>,
    /// The request its line holds (`Boundary`'s `sent`): only changed words are stored again.
    sent: Option<Request>,
}

impl Seat {
    fn new(dev: &Arc<Device>, w: u32) -> Seat {
        Seat { a: core(dev, w), w, seq: 0, tick: 0, last: None, sent: None }
    }

    /// Cross phase `phase` of the task at occupancy `n` as participant `bit` of `mask`, in
    /// `Boundary::cross`'s order (the slot is already joined): arrive; the last arriver waits
    /// for the departures of the phase it published last, allocates `phase_seq` from its own
    /// counter, writes its request, stores the publisher word and waits for the SEALED
    /// acknowledgement of its tick; every other participant learns the publisher from the
    /// phase's publisher word and waits for a SEALED acknowledgement on that publisher's line
    /// carrying the publisher's `phase_seq`; then leave. Every wait is on `bell`, rung after
    /// each step; once [`Served::over`], a core that still finds no seal never will (the model
    /// fails).
    fn cross(&mut self, n: u64, mask: u64, bit: u64, phase: u64, bell: &Bell, served: &Served) -> Crossed {
        let a = &self.a;
        let l = region();
        let crossed = if arrive(a, slot(), phase, bit, mask) {
            if let Some((p, m, o)) = self.last {
                bell.wait_until(|| departed(a, slot(), p, m, o));
            }
            let seq = self.seq % 0xFFFF_FFFF + 1;
            self.seq = seq;
            self.last = Some((phase, mask, n));
            self.tick += 1;
            let r = Request {
                epoch: EPOCH,
                task: TASK,
                phase,
                phase_seq: seq,
                arg_index: 0,
                cursor: 0,
                slot: LANE as u64,
                tick: self.tick,
            };
            write_request(a, GmAddr(l.request(self.w)), &r, self.sent.as_ref());
            self.sent = Some(r);
            a.store_direct(slot().offset(capture_slot::PUBLISHER + 8 * phase), publisher_word(self.w, seq));
            served.named.fetch_add(1, Ordering::SeqCst);
            bell.ring();
            loop {
                let seen = bell.seen();
                let over = served.over();
                if let Some(ack) = read_ack(a, GmAddr(l.ack(self.w)))
                    && ack.identity == (EPOCH, TASK, seq)
                    && ack.tick == r.tick
                {
                    assert_eq!(ack.status, capture_status::SEALED, "the AICPU answers every phase SEALED");
                    break;
                }
                assert!(!over, "core {} never got the seal of the phase {phase} it published", self.w);
                bell.wait(seen);
            }
            Crossed { publisher: (self.w, seq), published: true }
        } else {
            let mut named = None;
            loop {
                let seen = bell.seen();
                let over = served.over();
                if named.is_none() {
                    named = publisher(a, slot(), phase);
                }
                if let Some((p, seq)) = named {
                    let want = if crate::breakage::broken(crate::breakage::CAPTURE_PEER_OWN_SEQ) {
                        // BROKEN (`Boundary::follow` under CAPTURE_PEER_OWN_SEQ): the peer's own
                        // counter proves nothing about this phase.
                        self.seq % 0xFFFF_FFFF + 1
                    } else {
                        seq
                    };
                    if let Some(ack) = read_ack(a, GmAddr(l.ack(p)))
                        && ack.identity == (EPOCH, TASK, want)
                        && ack.status == capture_status::SEALED
                    {
                        assert!(
                            ack.identity.2 == seq,
                            "core {} accepted phase_seq {} on core {p}'s line for phase {phase}, whose \
                             publisher word names phase_seq {seq}: it accepted the other phase's sequence",
                            self.w,
                            ack.identity.2
                        );
                        break Crossed { publisher: (p, seq), published: false };
                    }
                }
                assert!(!over, "core {} never accepted the seal of phase {phase} (publisher {named:?})", self.w);
                bell.wait(seen);
            }
        };
        leave(a, slot(), phase, bit, mask, n, true);
        bell.ring();
        crossed
    }
}

/// What the model's waiters give up on: the AICPU has sealed every phase (`sealed`, stored
/// after its last acknowledgement) and every publisher word was stored (`named`, counted after
/// each store). A publisher stores its word after its request, so the AICPU may seal a phase
/// before its peers can learn who published it.
struct Served {
    sealed: AtomicBool,
    named: AtomicUsize,
    phases: usize,
}

impl Served {
    fn new(phases: usize) -> Arc<Served> {
        Arc::new(Served { sealed: AtomicBool::new(false), named: AtomicUsize::new(0), phases })
    }

    /// Everything that will ever be answered and named has been.
    fn over(&self) -> bool {
        self.sealed.load(Ordering::SeqCst) && self.named.load(Ordering::SeqCst) == self.phases
    }
}

/// The AICPU thread serving cores `0..cores`: `Service::scan`'s walk over its cores' lines,
/// each read with the real `read_request` (a tick not seen before is a request: read barrier,
/// then its words), answered with the real `write_ack` (status, echoes, epoch, task,
/// `phase_seq`, a store barrier, the answered tick last), each request SEALED at once (and
/// rings), until every phase is sealed; then it says so
/// (`served.sealed`). Between scans it waits for the next step. Returns `(phase, core,
/// phase_seq)` of each phase it sealed.
fn serve_requests(a: LoomAicpu, mut seen: Vec<u64>, bell: &Bell, served: &Served) -> Vec<(u64, u32, u64)> {
    let l = region();
    let cores = seen.len() as u32;
    let mut sealed = Vec::new();
    // The answer each core's line holds (`Service`'s `acked`): only changed words are stored.
    let mut acked: Vec<Option<Ack>> = vec![None; cores as usize];
    while sealed.len() < served.phases {
        let rung = bell.seen();
        let before = sealed.len();
        for w in 0..cores {
            let Some(q) = read_request(&a, GmAddr(l.request(w)), seen[w as usize]) else { continue };
            let (tick, epoch, task, phase, seq) = (q.tick, q.epoch, q.task, q.phase, q.phase_seq);
            seen[w as usize] = tick;
            assert_eq!((epoch, task), (EPOCH, TASK), "core {w}'s request read torn: tick before its words");
            assert!(
                !sealed.iter().any(|&(p, _, _)| p == phase),
                "phase {phase} requested twice (by core {w}): two last arrivers"
            );
            let ack =
                Ack { status: capture_status::SEALED, arg_index: 0, cursor: 0, tick, identity: (EPOCH, TASK, seq) };
            write_ack(&a, GmAddr(l.ack(w)), &ack, acked[w as usize].as_ref());
            acked[w as usize] = Some(ack);
            sealed.push((phase, w, seq));
            bell.ring();
        }
        if sealed.len() == before {
            bell.wait(rung);
        }
    }
    served.sealed.store(true, Ordering::SeqCst);
    bell.ring();
    sealed
}

/// Two cores (workers 0 and 1, mask 0b11) of occupancy 1 of a slot already READY cross its
/// phases ([`Seat::cross`]) against one AICPU thread ([`serve_requests`]): both phases, or
/// with `before_by: Some(x)` only AFTER, BEFORE having been published by core `x` (phase_seq
/// 1, tick 1), sealed and left by both: its seal is still on core `x`'s acknowledgement line.
/// Returns whether the two phases had different publishers.
fn split_model(before_by: Option<u32>) -> bool {
    use capture_slot::{ARRIVED, CLAIM, PUBLISHER, READY, RELEASED};
    let l = region();
    let phases: &[u64] = match before_by {
        None => &[capture_phase::BEFORE, capture_phase::AFTER],
        Some(_) => &[capture_phase::AFTER],
    };
    let mut words = vec![(slot().0 + CLAIM, capture_slot::claim(READY, 1))];
    let mut seen = vec![0u64; 2];
    if let Some(x) = before_by {
        let (req, ack) = (l.request(x), l.ack(x));
        words.extend([
            (slot().0 + ARRIVED, 0b11),
            (slot().0 + RELEASED, 0b11),
            (slot().0 + PUBLISHER, publisher_word(x, 1)),
            (req + capture_request::EPOCH, EPOCH),
            (req + capture_request::WHICH, capture_request::which(TASK, capture_phase::BEFORE, LANE as u64)),
            (req + capture_request::PHASE_SEQ, 1),
            (req + capture_request::TICK, 1),
            (ack + capture_ack::STATE, capture_ack::state(capture_status::SEALED, 0)),
            (ack + capture_ack::TICK, 1),
            (ack + capture_ack::EPOCH, EPOCH),
            (ack + capture_ack::IDENTITY, capture_ack::identity(TASK, 1)),
        ]);
        seen[x as usize] = 1;
    }
    let dev = device_at(&words);
    let served = Served::new(phases.len());
    let bell = Bell::new();
    let cores: Vec<_> = (0..2u32)
        .map(|w| {
            let (dev, bell, served) = (dev.clone(), bell.clone(), served.clone());
            thread::spawn(move || {
                let mut seat = Seat::new(&dev, w);
                let mut crossed = Vec::new();
                if let Some(x) = before_by {
                    if w == x {
                        (seat.seq, seat.tick, seat.last) = (1, 1, Some((capture_phase::BEFORE, 0b11, 1)));
                    }
                    crossed.push(Crossed { publisher: (x, 1), published: w == x });
                }
                for &p in phases {
                    crossed.push(seat.cross(1, 0b11, 1 << w, p, &bell, &served));
                }
                crossed
            })
        })
        .collect();
    let aicpu = {
        let (a, bell, served) = (LoomAicpu { dev: dev.clone() }, bell.clone(), served.clone());
        thread::spawn(move || serve_requests(a, seen, &bell, &served))
    };
    let crossed: Vec<Vec<Crossed>> = cores.into_iter().map(|h| h.join().unwrap()).collect();
    let mut sealed = aicpu.join().unwrap();
    if let Some(x) = before_by {
        sealed.push((capture_phase::BEFORE, x, 1));
    }
    for (k, phase) in [capture_phase::BEFORE, capture_phase::AFTER].into_iter().enumerate() {
        let &(_, w, seq) = sealed.iter().find(|s| s.0 == phase).expect("each phase sealed");
        for (c, x) in crossed.iter().enumerate() {
            assert_eq!(x[k].publisher, (w, seq), "core {c} followed another publisher than phase {phase}'s");
            assert_eq!(x[k].published, c as u32 == w, "core {c}: publisher of phase {phase} or not");
        }
        assert_eq!(
            publisher(&core(&dev, 0), slot(), phase),
            Some((w, seq)),
            "phase {phase}'s publisher word names its publisher"
        );
    }
    let (b, f) = (crossed[0][0].publisher, crossed[0][1].publisher);
    assert!(b != f, "both phases carry the identity {b:?}: a peer could not tell them apart");
    assert_eq!(state(&dev), (capture_slot::SETTLED, 1), "the last departure settles the slot");
    b.0 != f.0
}

/// Acceptance 4, split publishers. Two cores cross BEFORE and AFTER of one occupancy against
/// an AICPU thread that seals each phase at once; each phase is published by its last arriver,
/// so the two phases' publishers differ in some executions and coincide in others (then the
/// publisher's acknowledgement line still holds the BEFORE seal while its AFTER peer polls
/// it). Invariants: every peer follows the publisher the phase's own publisher word names and
/// accepts only a SEALED acknowledgement on that publisher's line carrying that publisher's
/// `phase_seq` (never the other phase's); every core finishes both phases (no seal missed);
/// each phase is requested once, its request read whole; the two phases' identities differ;
/// the slot ends SETTLED. Run on both phases, and on AFTER alone with BEFORE already published
/// by core 0, then by core 1 (its seal still on that core's line). Reached: split and shared
/// publishers. Preemption bound 1 (bound 2 takes more than five minutes even for AFTER alone).
#[test]
fn acceptance_04_split_publishers() {
    let _s = serial();
    let seen = Tally::new(2);
    for (before_by, bound) in [(None, Some(1)), (Some(0), Some(1)), (Some(1), Some(1))] {
        let t = seen.clone();
        let name = format!("acceptance_04_split_publishers (BEFORE published by: {before_by:?})");
        check(&name, bound, move || t.hit(if split_model(before_by) { 0 } else { 1 }));
    }
    seen.assert_all_reached(&["BEFORE and AFTER published by different cores", "one core published both"]);
}

/// Reproducer: a peer matches the acknowledgement against its own phase counter instead of the
/// publisher's `phase_seq` (`breakage::CAPTURE_PEER_OWN_SEQ`, the marked branch of
/// [`Seat::cross`]), in [`split_model`] on AFTER alone after core 1 published BEFORE. Loom must
/// find a peer accepting the BEFORE seal still
/// on the line as AFTER's (one publisher for both), or never accepting (split publishers,
/// whose counters disagree with the peer's).
#[cfg(feature = "breakage")]
#[test]
fn reproducer_04_peer_matches_its_own_counter() {
    let _s = serial();
    expect_found(
        "reproducer_04_peer_matches_its_own_counter",
        Some(1),
        crate::breakage::CAPTURE_PEER_OWN_SEQ,
        &["the other phase's sequence", "never accepted the seal"],
        || {
            split_model(Some(1));
        },
    );
}

// ---------------------------------------------------------------------------------------------
// The acknowledgement line: never read torn
// ---------------------------------------------------------------------------------------------

/// Core 0's acknowledgement line holds phase 1's terminal answer (SEALED, `phase_seq` 1, tick
/// 1) when the service rewrites it with phase 2's first answer (IN_PROGRESS, `phase_seq` 2,
/// tick 2) through the real [`write_ack`], while a peer of phase 1 reads it through the real
/// [`read_ack`]. Invariant: every read is either answer whole, or `None` — never phase
/// 1's SEALED under phase 2's identity (a peer of phase 2 would run before its input capture
/// was sealed), nor phase 2's status under phase 1's identity. Returns whether a read saw
/// nothing (the rewrite in progress).
fn ack_model() -> bool {
    let line = GmAddr(region().ack(0));
    let first = Ack { status: capture_status::SEALED, arg_index: 0, cursor: 0, tick: 1, identity: (EPOCH, TASK, 1) };
    let second =
        Ack { status: capture_status::IN_PROGRESS, arg_index: 1, cursor: 64, tick: 2, identity: (EPOCH, TASK, 2) };
    let dev = device_at(&[]);
    // The line as the service left it after phase 1 (written before the threads start).
    write_ack(&LoomAicpu { dev: dev.clone() }, line, &first, None);
    let service = LoomAicpu { dev: dev.clone() };
    // As the service rewrites a line: the words the two answers share are not stored again.
    let writer = thread::spawn(move || write_ack(&service, line, &second, Some(&first)));
    let peer = core(&dev, 1);
    let none = match read_ack(&peer, line) {
        None => true,
        Some(ack) => {
            assert!(ack == first || ack == second, "a torn acknowledgement: {ack:?}");
            false
        }
    };
    writer.join().unwrap();
    assert_eq!(read_ack(&peer, line), Some(second), "the rewrite ends with the new answer whole");
    none
}

/// The acknowledgement is never read torn ([`ack_model`]), with up to three preemptions (a
/// torn read needs two: into the rewrite after the first tick, and back); the model must reach
/// both a read that saw nothing (mid-rewrite) and reads that saw whole answers only.
#[test]
fn acknowledgement_is_never_read_torn() {
    let _s = serial();
    let seen = Tally::new(2);
    let t = seen.clone();
    check("acknowledgement_is_never_read_torn", Some(3), move || t.hit(if ack_model() { 0 } else { 1 }));
    seen.assert_all_reached(&["a read during the rewrite saw nothing", "every read saw a whole answer"]);
}

/// Reproducer: the writer marks the line only after rewriting it (`BEGIN` keeps the previous
/// tick meanwhile, `breakage::CAPTURE_ACK_TICK_KEPT`). Loom must find a read that takes the old tick on both
/// sides of a mix of the two answers.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_acknowledgement_read_torn() {
    let _s = serial();
    expect_found(
        "reproducer_acknowledgement_read_torn",
        Some(3),
        crate::breakage::CAPTURE_ACK_TICK_KEPT,
        &["a torn acknowledgement"],
        || {
            ack_model();
        },
    );
}

// ---------------------------------------------------------------------------------------------
// The ASKED counter
// ---------------------------------------------------------------------------------------------

/// Two cores (workers 0 and 1) each write a request on their own line (the real
/// `write_request`) and then ask on the one counter of the AICPU thread serving them (the real
/// `ask`), while that thread looks at the counter (the real `look_asked`, from `u64::MAX` as a
/// `Service` starts) and reads what each look names (the real `read_request`): one core's
/// line for a move by one that names it, every line otherwise, as `Service::step` does.
/// Between looks the thread waits for a core's ask. Invariant: once a look has seen both asks,
/// both requests have been read, whole — a request whose ask the thread saw is never left
/// unread. Returns whether some look read one line alone.
fn asked_model() -> bool {
    let l = region();
    let asked = GmAddr(l.asked(0));
    let dev = device_at(&[]);
    let bell = Bell::new();
    let askers: Vec<_> = (0..2u32)
        .map(|w| {
            let a = core(&dev, w);
            let bell = bell.clone();
            thread::spawn(move || {
                let r = Request {
                    epoch: EPOCH,
                    task: TASK,
                    phase: capture_phase::BEFORE,
                    phase_seq: w as u64 + 1,
                    arg_index: 0,
                    cursor: 0,
                    slot: 0,
                    tick: 1,
                };
                write_request(&a, GmAddr(l.request(w)), &r, None);
                ask(&a, asked, w);
                bell.ring();
            })
        })
        .collect();
    let a = LoomAicpu { dev: dev.clone() };
    let mut last = u64::MAX;
    let mut seen = [0u64; 2];
    let mut alone = false;
    loop {
        let rung = bell.seen();
        let mut read = |w: u32| {
            if let Some(q) = read_request(&a, GmAddr(l.request(w)), seen[w as usize]) {
                assert_eq!((q.epoch, q.task, q.phase_seq), (EPOCH, TASK, w as u64 + 1), "core {w}'s request read torn");
                seen[w as usize] = q.tick;
            }
        };
        match look_asked(&a, asked, &mut last) {
            Asked::Nothing => {}
            Asked::One(w) => {
                alone = true;
                read(w);
            }
            Asked::Several => (0..2).for_each(&mut read),
        }
        if capture_header::asked_fields(last).0 == 2 {
            assert_eq!(seen, [1, 1], "a request whose ask the AICPU thread saw was never read");
            break;
        }
        bell.wait(rung);
    }
    for t in askers {
        t.join().unwrap();
    }
    alone
}

/// No request is hidden by the `ASKED` counter ([`asked_model`]); the model must reach both a
/// look that read one line alone and runs whose looks read every line.
#[test]
fn asked_counter_never_hides_a_request() {
    let _s = serial();
    let seen = Tally::new(2);
    let t = seen.clone();
    check("asked_counter_never_hides_a_request", Some(3), move || t.hit(if asked_model() { 0 } else { 1 }));
    seen.assert_all_reached(&["a look read one core's line alone", "every look read every line"]);
}

/// Reproducer: the thread takes any move of its counter for one ask by the core the word
/// names (`breakage::CAPTURE_ASKED_JUMP_AS_ONE`). Loom must find both asks landing between two
/// looks, the second look reading the last asker's line alone.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_asked_jump_taken_for_one_ask() {
    let _s = serial();
    expect_found(
        "reproducer_asked_jump_taken_for_one_ask",
        Some(3),
        crate::breakage::CAPTURE_ASKED_JUMP_AS_ONE,
        &["was never read"],
        || {
            asked_model();
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Departure proof
// ---------------------------------------------------------------------------------------------

/// `participants` cores of occupancy 1 (slot READY) leave its sealed AFTER phase (`leave`),
/// each after a last look at the slot (it is still inside until its released bit is set),
/// while a core of occupancy 2 (mask of its own) claims the slot. Participant 0, the AFTER
/// publisher, then waits for the phase's departures (`departed`) before it would reuse its
/// acknowledgement line. Returns `(which participant settled, whether the claimer found the
/// slot busy first)`.
fn departure_model(participants: u32) -> (usize, bool) {
    use capture_slot::{CLAIMING, READY, RELEASED, SETTLED};
    let mask = (1u64 << participants) - 1;
    let dev = device(&ready(1));
    let inside = Arc::new(AtomicUsize::new(participants as usize));
    let bell = Bell::new();
    let hs: Vec<_> = (0..participants)
        .map(|p| {
            let (a, inside, bell) = (core(&dev, p), inside.clone(), bell.clone());
            thread::spawn(move || {
                let seen = capture_slot::fields(a.query(slot().offset(capture_slot::CLAIM)));
                assert!(
                    seen == (READY, 1),
                    "participant {p} of occupancy 1, still inside, read the slot as {seen:?}: \
                     the next occupancy was claimed before its departure"
                );
                inside.fetch_sub(1, Ordering::SeqCst);
                let settled = leave(&a, slot(), capture_phase::AFTER, 1 << p, mask, 1, true);
                bell.ring();
                if p == 0 {
                    bell.wait_until(|| departed(&a, slot(), capture_phase::AFTER, mask, 1));
                    let left = inside.load(Ordering::SeqCst);
                    assert!(left == 0, "departed() with {left} participant(s) still inside: the ack line reused early");
                }
                settled
            })
        })
        .collect();
    let claimer = {
        let (a, inside, bell) = (core(&dev, participants), inside.clone(), bell.clone());
        thread::spawn(move || {
            let mut busy = false;
            let won = claim_loop(&a, &bell, 2, |w| {
                let (s, o) = capture_slot::fields(w);
                if (s, o) == (SETTLED, 1) {
                    let released = a.query(slot().offset(RELEASED + 8 * capture_phase::AFTER));
                    assert!(
                        released & mask == mask,
                        "the slot read SETTLED with the released mask {released:#b}, not {mask:#b}: \
                         settled before every participant left"
                    );
                } else {
                    busy = true;
                }
            });
            assert!(won, "the next occupancy's only participant claims it");
            let left = inside.load(Ordering::SeqCst);
            assert!(left == 0, "occupancy 2 claimed with {left} participant(s) of occupancy 1 still inside");
            busy
        })
    };
    let settled: Vec<bool> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let busy = claimer.join().unwrap();
    let settlers: Vec<usize> = (0..settled.len()).filter(|&i| settled[i]).collect();
    assert!(settlers.len() == 1, "participants {settlers:?} settled the slot: exactly one last departure");
    let end = state(&dev);
    assert!(end == (READY, 2) || end == (CLAIMING, 2), "the slot ends at occupancy 2, not {end:?}");
    assert_eq!(end.0, READY, "the claimer finished its initialisation");
    (settlers[0], busy)
}

/// Acceptance 5, departure proof. Two, then three (bounded) participants of occupancy 1 leave
/// its sealed AFTER phase while the next occupancy's claimer tries to claim, the publisher
/// waiting for the departures before reusing its line. Invariants: whenever the claimer reads
/// SETTLED of occupancy 1, the AFTER released mask is already full (SETTLED is a proof);
/// exactly one participant settles (the one completing the mask); the claimer wins only once
/// every participant has left (a witness count each decrements just before its `leave`), and
/// no participant still inside ever reads the slot at another occupancy, however late it
/// leaves; `departed` answers true only once every participant has left; the slot ends READY
/// at occupancy 2. Reached: each participant was the last to leave, and the claimer found the
/// slot still held before it won. Two participants with preemption bound 3 (about half a
/// minute), three with bound 1 (bound 2 takes minutes).
#[test]
fn acceptance_05_departure_proof() {
    let _s = serial();
    for (participants, bound) in [(2u32, Some(3)), (3, Some(1))] {
        let seen = Tally::new(participants as usize + 1);
        let t = seen.clone();
        let name = format!("acceptance_05_departure_proof ({participants} participants)");
        check(&name, bound, move || {
            let (settler, busy) = departure_model(participants);
            t.hit(settler);
            if busy {
                t.hit(participants as usize);
            }
        });
        let mut names: Vec<String> = (0..participants).map(|p| format!("participant {p} left last")).collect();
        names.push("the claimer waited for the departures".into());
        seen.assert_all_reached(&names.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

/// Reproducer: the first participant to leave the AFTER phase stores SETTLED, not the last
/// (`breakage::CAPTURE_SETTLE_FIRST`), in [`departure_model`] with two participants. Loom must
/// find the claimer reading SETTLED before the last released bit, or winning while a
/// participant is still inside.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_05_settled_before_last_release() {
    let _s = serial();
    expect_found(
        "reproducer_05_settled_before_last_release",
        None,
        crate::breakage::CAPTURE_SETTLE_FIRST,
        &["settled before every participant left", "still inside", "exactly one last departure", "ack line reused"],
        || {
            departure_model(2);
        },
    );
}

// ---------------------------------------------------------------------------------------------
// 6. Lane reservation
// ---------------------------------------------------------------------------------------------

/// The dump lane of the reservation model: one lane, two buffers of two records, a 64-byte
/// arena, three captures (tasks 0–2) of two `u64` elements each.
const BUFFERS: u32 = 2;
const RECORDS: u32 = 2;
const ARENA: u64 = 64;
const ELEMS: u32 = 2;
const CAPTURES: u32 = 3;
/// Offsets in a lane's state and ack lines (`DumpLaneState`, `DumpLaneAck`).
const READY_TAIL: u64 = 0;
const COMMITTED: u64 = 16;
const DROPPED: u64 = 24;
const CLOSED: u64 = 32;
const ACK_COMPLETED: u64 = 8;
const ACK_FREE_TAIL: u64 = 16;

fn dump_layout() -> DumpLayout {
    let header = DumpHeader {
        magic: DUMP_MAGIC,
        level: DumpLevel::Full.into(),
        lanes: 1,
        buffers: BUFFERS,
        records: RECORDS,
        reserved0: 0,
        arena: ARENA,
        wait_ticks: u64::MAX / 4,
        epoch: EPOCH,
        reserved: [0; 2],
    };
    DumpLayout { base: GM_BASE, header }
}

/// GM address of task `task`'s source view (after the dump region).
fn src(task: u32) -> u64 {
    let region = DumpLayout::region_bytes(&dump_layout().header).expect("a tiny region");
    GM_BASE + region.next_multiple_of(64) + task as u64 * ELEMS as u64 * 8
}

/// Element `j` of task `task`'s view: distinct per task and element, never zero.
fn value(task: u32, j: u32) -> u64 {
    0xD0_0000_0000 | (task as u64 + 1) << 16 | (j as u64 + 1)
}

/// A device holding the dump region as `host::dump::initialize` leaves it (header, the free
/// queue holding every buffer) and the source views.
fn lane_device() -> Arc<Device> {
    let l = dump_layout();
    let mut gm = vec![0u64; ((src(CAPTURES) - GM_BASE) / 8) as usize];
    let mut set = |at: u64, v: u64| gm[((at - GM_BASE) / 8) as usize] = v;
    for (k, w) in l.header.as_bytes().chunks_exact(8).enumerate() {
        set(GM_BASE + 8 * k as u64, u64::from_le_bytes(w.try_into().unwrap()));
    }
    for b in 0..BUFFERS {
        set(l.free(0, b as u64), b as u64);
    }
    set(l.ack(0) + ACK_FREE_TAIL, BUFFERS as u64);
    for task in 0..CAPTURES {
        for j in 0..ELEMS {
            set(src(task) + 8 * j as u64, value(task, j));
        }
    }
    Device::new(&gm, 0, 0, 0, RegOrder::Simulator)
}

/// What the service asks the lane to record for `task`: its whole view, with data.
fn capture_of(task: u32) -> Capture {
    let (mut shape, mut strides) = ([0; 5], [0; 5]);
    shape[0] = ELEMS;
    strides[0] = 1;
    let record =
        DumpRecord { task, elem_bytes: 8, addr: src(task), ndims: 1, shape, strides, ..DumpRecord::new_zeroed() };
    Capture { record, payload: true }
}

/// The host's collector of the one lane: a cut-down transcription of `host::dump::Collector`
/// (`drain` / `take` / `record`: entry, records, payloads, buffer back, payload bytes
/// acknowledged, entry acknowledged) until the lane is closed. Every entry it takes is checked
/// against the producer's witness `open`: no buffer may be published while a reservation is.
fn collector(d: LoomAicpu, open: Arc<AtomicBool>) -> Vec<(u32, u64, Vec<u64>)> {
    let l = dump_layout();
    let (mut head, mut free_tail) = (0u64, BUFFERS as u64);
    let mut got = Vec::new();
    loop {
        let over = d.query(GmAddr(l.lane(0) + CLOSED)) == EPOCH;
        let tail = d.query(GmAddr(l.lane(0) + READY_TAIL));
        while head < tail {
            assert!(!open.load(Ordering::SeqCst), "a metadata buffer was published while a reservation was open");
            let mut e = DumpReady::new_zeroed();
            d.read(GmAddr(l.ready(0, head)), e.as_mut_bytes());
            assert!(e.buffer < BUFFERS && e.count <= RECORDS, "a ready entry read torn: {e:?}");
            let mut recs = vec![DumpRecord::new_zeroed(); e.count as usize];
            d.read(GmAddr(l.buffer(0, e.buffer)), recs.as_mut_slice().as_mut_bytes());
            for r in recs {
                let mut words = vec![0u64; (r.payload_len / 8) as usize];
                d.read(GmAddr(l.arena(0) + r.payload_offset % ARENA), words.as_mut_slice().as_mut_bytes());
                got.push((r.task, r.payload_offset, words));
            }
            d.store_direct(GmAddr(l.free(0, free_tail)), e.buffer as u64);
            free_tail += 1;
            d.store_direct(GmAddr(l.ack(0) + ACK_FREE_TAIL), free_tail);
            d.store_direct(GmAddr(l.ack(0) + ACK_COMPLETED), e.end);
            head += 1;
            d.store_direct(GmAddr(l.ack(0)), head);
        }
        if over {
            return got;
        }
        thread::yield_now();
    }
}

/// The lane's service thread: commit task 0 (the buffer keeps it, unpublished); open task 1's
/// reservation, copy one element and suspend it (as `Service::serve` does between steps); ask
/// for task 2 (a peer's request) and publish while it is open; resume and abandon task 1; then
/// commit task 2 and close. Returns task 2's payload offset.
fn reservation_producer(d: LoomAicpu, open: Arc<AtomicBool>) -> u64 {
    let l = dump_layout();
    let mut lane = GmLane::new(&d, l, 0);
    let commit = |lane: &mut GmLane<'_, LoomAicpu>, task: u32| -> u64 {
        let Begin::Accepted(mut r) = lane.try_begin(&capture_of(task)) else {
            panic!("task {task} not accepted on a lane with room")
        };
        let at = r.record().payload_offset;
        while r.copy_chunk(8) > 0 {}
        r.commit();
        at
    };
    assert_eq!(commit(&mut lane, 0), 0);
    let before = (lane.cursor(), lane.records_committed(), lane.dropped());
    open.store(true, Ordering::SeqCst);
    let Begin::Accepted(mut r) = lane.try_begin(&capture_of(1)) else { panic!("task 1 not accepted") };
    assert_eq!(r.copy_chunk(8), 8, "one element copied");
    assert_eq!(r.remaining(), 8, "the reservation is mid-copy");
    let suspended = r.suspend();
    assert!(lane.is_suspended());
    assert_eq!(suspended.before(), before.0, "the reservation remembers the offset it opened at");
    let opened = (lane.cursor(), lane.records_committed(), lane.dropped());
    let tail = |d: &LoomAicpu| d.query(GmAddr(l.lane(0) + READY_TAIL));
    let gm_counters = |d: &LoomAicpu| (d.query(GmAddr(l.lane(0) + COMMITTED)), d.query(GmAddr(l.lane(0) + DROPPED)));
    let (tail_open, counters_open) = (tail(&d), gm_counters(&d));
    // A peer's request while the reservation is open (`Service::serve` of another core).
    let second = match lane.try_begin(&capture_of(2)) {
        Begin::WouldBlock(Blocked::ReservationOpen) => None,
        Begin::WouldBlock(b) => panic!("the second request would block on {b:?}, not on the open reservation"),
        Begin::Refused(why) => panic!("the second request was refused ({why:?}): accounted as dropped"),
        Begin::Accepted(mut r2) => {
            // The service would copy and commit it (and publish a sealed phase).
            while r2.copy_chunk(8) > 0 {}
            let at = r2.record().payload_offset;
            r2.commit();
            Some(at)
        }
    };
    assert!(!lane.publish(), "the lane published a buffer while a reservation was open");
    assert!(
        tail(&d) == tail_open,
        "a metadata buffer was published while a reservation was open (the ready tail moved)"
    );
    assert!(second.is_none(), "a second reservation began while one was open (at offset {second:?})");
    assert_eq!(
        (lane.cursor(), lane.records_committed(), lane.dropped()),
        opened,
        "the would-block request accounted something"
    );
    assert_eq!(gm_counters(&d), counters_open, "the would-block request moved the lane's counters");
    lane.resume(suspended).abandon();
    assert!(!lane.is_suspended());
    assert_eq!(lane.cursor(), before.0, "abandon did not restore the arena offset");
    assert_eq!(lane.records_committed(), before.1, "abandon changed the record count");
    assert_eq!(lane.dropped(), before.2 + 1, "the abandoned record is dropped once");
    open.store(false, Ordering::SeqCst);
    let at = commit(&mut lane, 2);
    lane.close();
    at
}

/// The reservation model: [`reservation_producer`] against [`collector`].
fn reservation_model() {
    let dev = lane_device();
    let open = Arc::new(AtomicBool::new(false));
    let p = {
        let (d, open) = (LoomAicpu { dev: dev.clone() }, open.clone());
        thread::spawn(move || reservation_producer(d, open))
    };
    let h = {
        let d = LoomAicpu { dev: dev.clone() };
        thread::spawn(move || collector(d, open))
    };
    let at = p.join().unwrap();
    let got = h.join().unwrap();
    assert_eq!(at, 16, "task 2's payload starts where the abandoned task 1's did");
    let want: Vec<(u32, u64, Vec<u64>)> =
        [(0, 0), (2, 16)].iter().map(|&(t, o)| (t, o, (0..ELEMS).map(|j| value(t, j)).collect())).collect();
    assert!(got == want, "the host collected {got:x?}, not tasks 0 and 2 with their values (hex)");
    let l = dump_layout();
    let q = |w: u64| dev.peek(GmAddr(l.lane(0) + w));
    assert_eq!((q(COMMITTED), q(DROPPED), q(CLOSED)), (2, 1, EPOCH), "the lane's final accounting");
}

/// Acceptance 6, lane reservation, on the real `GmLane`. The service thread commits task 0
/// (kept in the unpublished buffer), opens task 1's reservation, copies one of its two
/// elements and suspends it; a second request (task 2) then gets `WouldBlock(ReservationOpen)`
/// with nothing accounted (arena offset, record count, dropped count and the lane's published
/// counters unchanged), and `publish` publishes nothing; after resume and abandon the arena
/// offset and the record count are exactly what they were before the reservation opened (one
/// record dropped); task 2 then takes task 1's offset. Against the host's collector, which
/// checks that it never takes a buffer published while the reservation is open. Invariants
/// besides: the host collects exactly tasks 0 and 2 with their values (never task 1), and the
/// lane closes with committed 2, dropped 1. Unbounded.
#[test]
fn acceptance_06_lane_reservation() {
    let _s = serial();
    check("acceptance_06_lane_reservation", None, reservation_model);
}

/// Reproducer: a lane that lets a second reservation begin, and publishes, while one is
/// suspended open (`breakage::CAPTURE_TWO_RESERVATIONS`), in [`reservation_model`]. Loom must
/// find task 2 accepted and its buffer published with task 1 still open.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_06_two_open_reservations() {
    let _s = serial();
    expect_found(
        "reproducer_06_two_open_reservations",
        None,
        crate::breakage::CAPTURE_TWO_RESERVATIONS,
        &["published while a reservation was open", "a second reservation began"],
        reservation_model,
    );
}
