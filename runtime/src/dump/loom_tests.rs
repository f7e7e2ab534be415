//! Loom models of the args-dump lane (issue 14 item 8): the AICPU producer — the real
//! [`GmLane`], driven through [`Dumper::capture`] or its resumable `try_begin` / `copy_chunk` /
//! `commit` / `abandon` — against the host's collector over the lane's queues and counters, on
//! the loom device of [`hal`](crate::loom_support::hal).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p pto-runtime --release --features std,breakage --lib dump::loom_tests
//! ```
//!
//! Without `--cfg loom` this module is not compiled. Every model is one `#[test]` whose doc
//! comment states the invariant it checks; each prints its execution count and wall time.
//!
//! * **The host side is a transcription.** `host::dump::Collector` is crate-private and writes
//!   files, so [`Host`] transcribes its `drain`, `take`, `record` and `finish` for one lane,
//!   with the `DeviceMemory` operations mapped onto the loom device as the HAL defines them:
//!   `load_word` an acquire load, `store_word` a release store, `copy_d2h` plain (`Relaxed`)
//!   word reads. It must follow `host/dump.rs`. The host learns that the run is over from the
//!   lane's `closed` word (the real host learns it from the stream, after the AICPU thread
//!   closed its lane), then finishes as `Collector::finish` does.
//! * **The device side is the runtime's own code**: [`Dumper::open`] / [`Dumper::capture`] /
//!   [`Dumper::close`], or [`GmLane`] directly. The loom device is host-coherent, so the
//!   lane's cache maintenance is a no-op here; what is checked is the order of its stores.
//! * Lanes are tiny (two buffers of one or two records, a 64-byte arena, payloads of one to
//!   four `u64` elements), so buffers and arena bytes are reused within a model.
//!
//! Invariants every model checks (see [`check_outcome`]): the host collects exactly the
//! committed records, each once, in commit order (their sequence numbers are `0..n`); every
//! collected payload equals the source view's values (never overwritten, never stale); the
//! host drops nothing; the accounting `finish` computes is known, with
//! `total == collected + dropped` and the lane's `committed` equal to what was collected.
//!
//! **Reproducers.** Each broken variant is a test that runs a model with one change and
//! asserts that loom finds the violation (the model panics with the expected invariant):
//! the host acknowledging `completed` before it copies the payloads, the host returning the
//! buffer before it reads its records (both changes in [`Host`], marked `BROKEN`), and the
//! producer storing its ready tail before the ready entry (the runtime's own `GmLane::publish`
//! under `breakage::DUMP_TAIL_FIRST`; needs the `breakage` feature). The breakage switch is
//! process-wide, so every test of this file runs under one lock ([`serial`]).
//!
//! What loom does not cover: see `crate::loom_support` (no load buffering; partial-order reduction
//! can miss interleavings, so every model runs under both spawn orders and tallies that each
//! interesting outcome was reached; preemption-bounded models cover every interleaving with at
//! most that many preemptions, and `LOOM_MAX_PREEMPTIONS` overrides every model's bound).

use crate::loom_support::prelude::*;
use parking_lot::{Mutex, MutexGuard};

use crate::dump::{Begin, Blocked, Capture, DumpLane, DumpLevel, DumpReservation, Dumper, GmLane};
use crate::layout::{DUMP_MAGIC, DumpHeader, DumpLaneState, DumpLayout, DumpReady, DumpRecord, LaunchConfig};
use crate::loom_support::hal::{Device, GM_BASE, LoomAicpu, RegOrder};
use crate::loom_support::harness::{Tally, check};
use loom::thread;
use pto_hal::{GmAddr, GmAtomic, GmMemory};
use zerocopy::{FromZeros, IntoBytes};

/// The run's epoch.
const EPOCH: u64 = 7;
/// The lane (one AICPU thread).
const LANE: u32 = 0;
/// Offset of the `closed` word in a lane's state line.
const CLOSED: u64 = 32;
/// Offsets of the words of a lane's ack line.
const ACK_COMPLETED: u64 = 8;
const ACK_FREE_TAIL: u64 = 16;

/// Every test of this file holds this lock: the breakage switch is process-wide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock()
}

// ---------------------------------------------------------------------------------------------
// The lane and its workload
// ---------------------------------------------------------------------------------------------

/// One model's lane and workload.
#[derive(Copy, Clone, Debug)]
struct Shape {
    /// Metadata buffers.
    buffers: u32,
    /// Records per buffer.
    records: u32,
    /// Payload arena bytes (a multiple of 64, as `Dumper::open` requires).
    arena: u64,
    /// Captures the producer makes: tasks `0..captures`.
    captures: u32,
    /// `u64` elements of each capture's view: its payload is `8 * elems` bytes.
    elems: u32,
}

impl Shape {
    fn header(&self) -> DumpHeader {
        DumpHeader {
            magic: DUMP_MAGIC,
            level: DumpLevel::Full.into(),
            lanes: 1,
            buffers: self.buffers,
            records: self.records,
            reserved0: 0,
            arena: self.arena,
            // Never expires: every wait is bounded by loom's yields instead.
            wait_ticks: u64::MAX / 4,
            epoch: EPOCH,
            reserved: [0; 2],
        }
    }

    fn layout(&self) -> DumpLayout {
        DumpLayout { base: GM_BASE, header: self.header() }
    }

    /// GM address of task `task`'s source view (after the dump region).
    fn src(&self, task: u32) -> u64 {
        let region = DumpLayout::region_bytes(&self.header()).expect("a tiny region");
        GM_BASE + region.next_multiple_of(64) + task as u64 * self.elems as u64 * 8
    }

    /// Initial GM: the region as `host::dump::initialize` leaves it (header, zeroed lane, the
    /// free queue holding every buffer), then the source views.
    fn gm(&self) -> Vec<u64> {
        let l = self.layout();
        let end = self.src(self.captures);
        let mut gm = vec![0u64; ((end - GM_BASE) / 8) as usize];
        let mut set = |at: u64, v: u64| gm[((at - GM_BASE) / 8) as usize] = v;
        for (k, w) in l.header.as_bytes().chunks_exact(8).enumerate() {
            set(GM_BASE + 8 * k as u64, u64::from_le_bytes(w.try_into().unwrap()));
        }
        for b in 0..self.buffers {
            set(l.free(LANE, b as u64), b as u64);
        }
        set(l.ack(LANE) + ACK_FREE_TAIL, self.buffers as u64);
        for task in 0..self.captures {
            for j in 0..self.elems {
                set(self.src(task) + 8 * j as u64, value(task, j));
            }
        }
        gm
    }

    /// What the producer captures for `task`: its whole view, with data.
    fn capture(&self, task: u32) -> Capture {
        let (mut shape, mut strides) = ([0; 5], [0; 5]);
        shape[0] = self.elems;
        strides[0] = 1;
        let record = DumpRecord {
            task,
            elem_bytes: 8,
            addr: self.src(task),
            ndims: 1,
            shape,
            strides,
            ..DumpRecord::new_zeroed()
        };
        Capture { record, payload: true }
    }
}

/// Element `j` of task `task`'s view: distinct per task and element, never zero.
fn value(task: u32, j: u32) -> u64 {
    0xD0_0000_0000 | (task as u64 + 1) << 16 | (j as u64 + 1)
}

/// The payload task `task`'s record must carry.
fn expected(task: u32, elems: u32) -> Vec<u8> {
    (0..elems).flat_map(|j| value(task, j).to_le_bytes()).collect()
}

// ---------------------------------------------------------------------------------------------
// The host: a transcription of host::dump::Collector for one lane
// ---------------------------------------------------------------------------------------------

/// A deliberate change to the host's `take` (a reproducer's), or none.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum HostBug {
    /// `Collector::take` as it is.
    None,
    /// BROKEN: acknowledges the entry's `end` (`completed`) before copying the payloads.
    AckBeforeCopy,
    /// BROKEN: returns the buffer on the free queue before reading its records.
    FreeBeforeRead,
}

/// What the host collected and concluded.
struct Outcome {
    /// Records collected (`Collector::records`), with their payload bytes (`args.bin`).
    records: Vec<(DumpRecord, Vec<u8>)>,
    /// Records whose payload could not be taken (`Collector::host_dropped`).
    host_dropped: u64,
    /// `finish`'s accounting: `(total, collected, dropped)`, `None` when unknown.
    accounting: Option<(u64, u64, u64)>,
    /// The lane's state line as `finish` read it.
    state: DumpLaneState,
    /// Ready entries taken after the host saw the lane closed (by the last drain and
    /// `finish`'s).
    late: usize,
}

/// The collector of one lane (`host::dump::Collector`, `LaneCursor`).
struct Host {
    d: LoomAicpu,
    l: DumpLayout,
    bug: HostBug,
    ready_head: u64,
    free_tail: u64,
    host_dropped: u64,
    records: Vec<(DumpRecord, Vec<u8>)>,
}

impl Host {
    fn new(d: LoomAicpu, l: DumpLayout, bug: HostBug) -> Host {
        Host { d, l, bug, ready_head: 0, free_tail: l.header.buffers as u64, host_dropped: 0, records: Vec::new() }
    }

    /// `DeviceMemory::load_word`: an acquire.
    fn load_word(&self, at: u64) -> u64 {
        self.d.query(GmAddr(at))
    }

    /// `DeviceMemory::store_word`: a release.
    fn store_word(&self, at: u64, v: u64) {
        self.d.store_direct(GmAddr(at), v)
    }

    /// `DeviceMemory::copy_d2h`: plain reads.
    fn copy_d2h(&self, dst: &mut [u8], at: u64) {
        self.d.read(GmAddr(at), dst)
    }

    /// `Collector::drain` for the one lane.
    fn drain(&mut self) -> usize {
        let mut n = 0;
        let tail = self.load_word(self.l.lane(LANE));
        while self.ready_head < tail {
            self.take();
            n += 1;
        }
        n
    }

    /// `Collector::take`.
    fn take(&mut self) {
        let h = self.l.header;
        let head = self.ready_head;
        let mut e = DumpReady::new_zeroed();
        self.copy_d2h(e.as_mut_bytes(), self.l.ready(LANE, head));
        if self.bug == HostBug::AckBeforeCopy {
            // BROKEN: the payload bytes are acknowledged before they are copied.
            self.store_word(self.l.ack(LANE) + ACK_COMPLETED, e.end);
        }
        if self.bug == HostBug::FreeBeforeRead && e.buffer < h.buffers {
            // BROKEN: the buffer goes back before its records are read.
            self.give_back(e.buffer);
        }
        if e.buffer < h.buffers && e.count <= h.records {
            let mut recs = vec![DumpRecord::new_zeroed(); e.count as usize];
            self.copy_d2h(recs.as_mut_slice().as_mut_bytes(), self.l.buffer(LANE, e.buffer));
            for rec in recs {
                self.record(rec);
            }
        } else {
            self.host_dropped += e.count.min(h.records) as u64;
        }
        // Give the buffer back, then the payload bytes, then the entry.
        if self.bug != HostBug::FreeBeforeRead && e.buffer < h.buffers {
            self.give_back(e.buffer);
        }
        if self.bug != HostBug::AckBeforeCopy {
            self.store_word(self.l.ack(LANE) + ACK_COMPLETED, e.end);
        }
        self.ready_head += 1;
        self.store_word(self.l.ack(LANE), self.ready_head);
    }

    /// `take`'s free-queue push.
    fn give_back(&mut self, buffer: u32) {
        self.store_word(self.l.free(LANE, self.free_tail), buffer as u64);
        self.free_tail += 1;
        self.store_word(self.l.ack(LANE) + ACK_FREE_TAIL, self.free_tail);
    }

    /// `Collector::record`.
    fn record(&mut self, rec: DumpRecord) {
        let size = self.l.header.arena;
        let len = rec.payload_len;
        let sound = len <= size / 2 && rec.ndims <= 5 && (rec.payload_offset % size) + len <= size;
        if !sound {
            self.host_dropped += 1;
            return;
        }
        let mut bytes = vec![0u8; len as usize];
        if len > 0 {
            self.copy_d2h(&mut bytes, self.l.arena(LANE) + rec.payload_offset % size);
        }
        self.records.push((rec, bytes));
    }

    /// `Collector::finish` of a completed run: the final drain, the lane's counters, the
    /// accounting.
    fn finish(mut self, late: usize) -> Outcome {
        let late = late + self.drain();
        let mut s = DumpLaneState::new_zeroed();
        self.copy_d2h(s.as_mut_bytes(), self.l.lane(LANE));
        let totals =
            (s.closed == self.l.header.epoch && s.ready_tail == self.ready_head).then_some((s.committed, s.dropped));
        let collected = self.records.len() as u64;
        let accounting = match totals {
            Some((committed, dropped)) if committed == collected + self.host_dropped => {
                Some((committed + dropped, collected, dropped + self.host_dropped))
            }
            _ => None,
        };
        Outcome { records: self.records, host_dropped: self.host_dropped, accounting, state: s, late }
    }
}

/// The host's side of a run: drain between waits until the run is over (the lane closed; the
/// real host learns it from the stream), then finish.
fn collector(d: LoomAicpu, l: DumpLayout, bug: HostBug) -> Outcome {
    let mut host = Host::new(d, l, bug);
    loop {
        let over = host.load_word(l.lane(LANE) + CLOSED) == EPOCH;
        let n = host.drain();
        if over {
            return host.finish(n);
        }
        thread::yield_now();
    }
}

// ---------------------------------------------------------------------------------------------
// The producer
// ---------------------------------------------------------------------------------------------

/// The real capture path: `Dumper::open` on the region, `Dumper::capture` of every task (never
/// giving up), `Dumper::close`. Returns the tasks it committed, in order.
fn dumper_producer(d: LoomAicpu, shape: Shape) -> Vec<u32> {
    let cfg = LaunchConfig { epoch: EPOCH, dump: GM_BASE, ..LaunchConfig::default() };
    let mut dumper = Dumper::open(&d, &cfg, LANE).expect("Dumper::open refused the model's region");
    let mut committed = Vec::new();
    for task in 0..shape.captures {
        if dumper.capture(&shape.capture(task), &|| false) {
            committed.push(task);
        }
    }
    dumper.close();
    committed
}

/// The resumable path: `GmLane::try_begin` until accepted (tallying why it would block: 0
/// NoBuffer, 1 ArenaFull), `copy_chunk` one element at a time, `commit`; then `close`.
fn lane_producer(d: LoomAicpu, shape: Shape, blocked: &Tally) -> Vec<u32> {
    let mut lane = GmLane::new(&d, shape.layout(), LANE);
    for task in 0..shape.captures {
        let c = shape.capture(task);
        loop {
            match lane.try_begin(&c) {
                Begin::Accepted(mut r) => {
                    assert_eq!(r.record().payload_len, 8 * shape.elems as u64);
                    while r.copy_chunk(8) > 0 {}
                    r.commit();
                    break;
                }
                Begin::WouldBlock(Blocked::NoBuffer) => blocked.hit(0),
                Begin::WouldBlock(Blocked::ArenaFull) => blocked.hit(1),
                // This producer commits each reservation before it asks again, so its lane
                // never holds one open: being told so is a lane bug.
                Begin::WouldBlock(Blocked::ReservationOpen) => {
                    panic!("task {task}: lane reports an open reservation none was left open")
                }
                Begin::Refused(why) => panic!("task {task} refused: {why:?}"),
            }
            thread::yield_now();
        }
    }
    lane.close();
    assert_eq!((lane.records_committed(), lane.dropped()), (shape.captures as u64, 0));
    (0..shape.captures).collect()
}

// ---------------------------------------------------------------------------------------------
// Running and checking a model
// ---------------------------------------------------------------------------------------------

/// One execution: a fresh device for `shape`, the producer and the host (`bug`) as two loom
/// threads spawned host first or producer first; returns what each returned.
fn run<P: Send + 'static>(
    shape: Shape,
    bug: HostBug,
    host_first: bool,
    producer: impl FnOnce(LoomAicpu) -> P + Send + 'static,
) -> (P, Outcome) {
    let dev = Device::new(&shape.gm(), 0, 0, 0, RegOrder::Simulator);
    let l = shape.layout();
    let (dp, dh) = (dev.clone(), dev);
    let prod = move || producer(LoomAicpu { dev: dp });
    let host = move || collector(LoomAicpu { dev: dh }, l, bug);
    if host_first {
        let h = thread::spawn(host);
        let p = thread::spawn(prod);
        (p.join().unwrap(), h.join().unwrap())
    } else {
        let p = thread::spawn(prod);
        let h = thread::spawn(host);
        (p.join().unwrap(), h.join().unwrap())
    }
}

/// The invariants: `committed` (tasks, in commit order) are collected exactly, once each, in
/// order, with the source views' values; `dropped` records were dropped on the device;
/// nothing was dropped on the host; the accounting is known and adds up.
fn check_outcome(shape: &Shape, out: &Outcome, committed: &[u32], dropped: u64) {
    let seqs: Vec<u64> = out.records.iter().map(|(r, _)| r.seq).collect();
    let want: Vec<u64> = (0..committed.len() as u64).collect();
    assert_eq!(seqs, want, "records lost, duplicated or reordered (sequence numbers)");
    let tasks: Vec<u32> = out.records.iter().map(|(r, _)| r.task).collect();
    assert_eq!(tasks, committed, "records lost, duplicated or reordered (tasks)");
    let words =
        |b: &[u8]| -> Vec<u64> { b.chunks(8).map(|w| w.iter().rev().fold(0, |x, &y| x << 8 | y as u64)).collect() };
    for (r, bytes) in &out.records {
        let (got, want) = (words(bytes), words(&expected(r.task, shape.elems)));
        assert!(
            got == want,
            "payload mismatch: task {}'s payload (arena offset {}) was overwritten or read stale: \
             {got:x?} instead of {want:x?} (hex)",
            r.task,
            r.payload_offset
        );
    }
    assert_eq!(out.host_dropped, 0, "the host dropped a record");
    let n = committed.len() as u64;
    assert_eq!(out.accounting, Some((n + dropped, n, dropped)), "accounting unknown or not adding up");
    assert_eq!(out.state.committed, n, "the lane's committed counter");
    assert_eq!(out.state.dropped, dropped, "the lane's dropped counter");
}

/// Producer first, then host first.
const ORDERS: [bool; 2] = [false, true];

/// Run `f(host_first)` as a loom model under each spawn order and assert that loom FINDS the
/// bug: under at least one order the model panics, with a message containing one of `what`
/// (the invariant the broken variant violates), and under no order with another message.
fn expect_found(
    name: &str,
    preemption_bound: Option<usize>,
    what: &[&str],
    f: impl Fn(bool) + Sync + Send + Copy + 'static,
) {
    let mut found = false;
    for host_first in ORDERS {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check(name, preemption_bound, move || f(host_first))
        }));
        let Err(e) = r else { continue };
        let msg = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("<non-string panic>");
        assert!(what.iter().any(|w| msg.contains(w)), "{name}: the model failed, but not as expected: {msg}");
        eprintln!("loom model {name} (host first: {host_first}): found, as expected: {msg}");
        found = true;
    }
    assert!(found, "{name}: loom did not find the bug under either spawn order");
}

// ---------------------------------------------------------------------------------------------
// 1. Producer against collector
// ---------------------------------------------------------------------------------------------

/// Two buffers of one record, three captures of one element through the real
/// `Dumper::capture` / `close`, against the collector; both spawn orders. The third capture
/// needs a buffer the host gives back (NoBuffer), and the ready and free rings wrap. Invariant
/// ([`check_outcome`]): every record collected once, in order, with its source values; the
/// accounting is known: committed == collected == 3, total == collected + dropped (0).
/// Reached: the host took the last buffer after it saw the lane closed, and took everything
/// before it saw the close. Preemption bound 4 (unbounded, the producer's wait for a buffer
/// makes the model run for more than ten minutes).
#[test]
fn lane_delivers_every_record_once() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 1, arena: 64, captures: 3, elems: 1 };
    let seen = Tally::new(2);
    for host_first in ORDERS {
        let t = seen.clone();
        check("lane_delivers_every_record_once", Some(4), move || {
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| dumper_producer(d, shape));
            assert_eq!(committed, [0, 1, 2], "a capture gave up");
            check_outcome(&shape, &out, &committed, 0);
            t.hit(if out.late > 0 { 0 } else { 1 });
        });
    }
    seen.assert_all_reached(&["a buffer taken after the close", "everything taken before the close"]);
}

/// Two buffers of two records, three captures of one element (`Dumper`): the first buffer is
/// published full at the second commit, the second one half full by `close`. Invariant as in
/// [`lane_delivers_every_record_once`]. Unbounded.
#[test]
fn lane_close_publishes_a_partial_buffer() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 2, arena: 64, captures: 3, elems: 1 };
    for host_first in ORDERS {
        check("lane_close_publishes_a_partial_buffer", None, move || {
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| dumper_producer(d, shape));
            assert_eq!(committed, [0, 1, 2], "a capture gave up");
            check_outcome(&shape, &out, &committed, 0);
        });
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Back-pressure
// ---------------------------------------------------------------------------------------------

/// Two buffers of one record, a 64-byte arena, three captures of four elements (32 bytes)
/// through `GmLane::try_begin` / `copy_chunk` / `commit` directly: the third capture has
/// neither a buffer nor arena room until the host takes the first. Both spawn orders.
/// Invariant: no deadlock (loom would report a thread that never finishes), and
/// [`check_outcome`]. Reached: `WouldBlock(NoBuffer)` and `WouldBlock(ArenaFull)` (the host
/// has returned the buffer but not yet acknowledged the payload bytes). Preemption bound 4.
#[test]
fn lane_back_pressure_no_buffer_and_arena_full() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 1, arena: 64, captures: 3, elems: 4 };
    let blocked = Tally::new(2);
    for host_first in ORDERS {
        let t = blocked.clone();
        check("lane_back_pressure_no_buffer_and_arena_full", Some(4), move || {
            let t = t.clone();
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| lane_producer(d, shape, &t));
            check_outcome(&shape, &out, &committed, 0);
        });
    }
    blocked.assert_all_reached(&["WouldBlock(NoBuffer)", "WouldBlock(ArenaFull)"]);
}

/// Two buffers of two records, a 64-byte arena, three captures of 32 bytes (`Dumper`): the
/// first two fill the arena and the first buffer; the third has a buffer but no room
/// (ArenaFull) until the host acknowledges the first buffer's payloads, then wraps to the
/// arena's start, over the bytes of the first capture. Both spawn orders. Invariant: no
/// deadlock, and [`check_outcome`] — in particular the host reads the first payloads before
/// they are overwritten. Unbounded. (The correct counterpart of
/// [`reproducer_host_acks_before_copy`].)
#[test]
fn lane_back_pressure_wraps_the_arena() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 2, arena: 64, captures: 3, elems: 4 };
    for host_first in ORDERS {
        check("lane_back_pressure_wraps_the_arena", None, move || {
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| dumper_producer(d, shape));
            assert_eq!(committed, [0, 1, 2], "a capture gave up");
            check_outcome(&shape, &out, &committed, 0);
            let offsets: Vec<u64> = out.records.iter().map(|(r, _)| r.payload_offset).collect();
            assert_eq!(offsets, [0, 32, 64], "payload offsets");
        });
    }
}

/// Two buffers of one record, a 64-byte arena, five captures of three elements (24 bytes),
/// `GmLane` directly: the rings go round two and a half times and the arena twice, and two
/// payloads that would straddle the arena's end skip to the next lap (offsets 0, 24, 64, 88,
/// 128). Both spawn orders. Invariant: no deadlock, [`check_outcome`], and the payload
/// offsets. Reached: `WouldBlock(NoBuffer)` and `WouldBlock(ArenaFull)`. Preemption bound 2
/// (bound 3 takes minutes).
#[test]
fn lane_back_pressure_many_laps() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 1, arena: 64, captures: 5, elems: 3 };
    let blocked = Tally::new(2);
    for host_first in ORDERS {
        let t = blocked.clone();
        check("lane_back_pressure_many_laps", Some(2), move || {
            let t = t.clone();
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| lane_producer(d, shape, &t));
            check_outcome(&shape, &out, &committed, 0);
            let offsets: Vec<u64> = out.records.iter().map(|(r, _)| r.payload_offset).collect();
            assert_eq!(offsets, [0, 24, 64, 88, 128], "payload offsets");
        });
    }
    blocked.assert_all_reached(&["WouldBlock(NoBuffer)", "WouldBlock(ArenaFull)"]);
}

// ---------------------------------------------------------------------------------------------
// 3. Abandon
// ---------------------------------------------------------------------------------------------

/// Two buffers of two records, a 64-byte arena, two-element payloads, `GmLane` directly:
/// commit task 0; reserve task 1, copy one chunk (one element) and abandon it; reserve and
/// commit task 2; close — against the collector, both spawn orders. Invariant: task 2's
/// payload starts where task 1's did (the cursor is restored); the host never sees task 1;
/// tasks 0 and 2 are collected with their own values (task 1's partial bytes are overwritten);
/// the lane counts task 1 dropped exactly once, and the accounting is total 3 == collected 2
/// + dropped 1. Unbounded.
#[test]
fn lane_abandon_restores_the_cursor() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 2, arena: 64, captures: 3, elems: 2 };
    for host_first in ORDERS {
        check("lane_abandon_restores_the_cursor", None, move || {
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| {
                let mut lane = GmLane::new(&d, shape.layout(), LANE);
                let commit = |lane: &mut GmLane<'_, LoomAicpu>, task: u32| -> u64 {
                    let Begin::Accepted(mut r) = lane.try_begin(&shape.capture(task)) else {
                        panic!("task {task} not accepted on an empty lane")
                    };
                    let at = r.record().payload_offset;
                    while r.copy_chunk(8) > 0 {}
                    r.commit();
                    at
                };
                assert_eq!(commit(&mut lane, 0), 0);
                let Begin::Accepted(mut r) = lane.try_begin(&shape.capture(1)) else {
                    panic!("task 1 not accepted on an empty lane")
                };
                let abandoned_at = r.record().payload_offset;
                assert_eq!(abandoned_at, 16);
                assert_eq!(r.copy_chunk(8), 8);
                assert_eq!(r.remaining(), 8);
                r.abandon();
                assert_eq!((lane.records_committed(), lane.dropped()), (1, 1));
                assert_eq!(commit(&mut lane, 2), abandoned_at, "abandon did not restore the cursor");
                lane.close();
                assert_eq!((lane.records_committed(), lane.dropped()), (2, 1));
                vec![0, 2]
            });
            assert!(out.records.iter().all(|(r, _)| r.task != 1), "the host saw the abandoned record");
            check_outcome(&shape, &out, &committed, 1);
        });
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Reproducers: broken variants loom must catch
// ---------------------------------------------------------------------------------------------

/// Reproducer: the host stores `completed` (the entry's `end`) before it copies the payloads
/// — in [`lane_back_pressure_wraps_the_arena`]'s model. Loom must find the third capture's
/// payload written over the first's while the host copies it: a payload mismatch. Unbounded,
/// as its counterpart.
#[test]
fn reproducer_host_acks_before_copy() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 2, arena: 64, captures: 3, elems: 4 };
    expect_found("reproducer_host_acks_before_copy", None, &["payload mismatch"], move |host_first| {
        let (committed, out) = run(shape, HostBug::AckBeforeCopy, host_first, move |d| dumper_producer(d, shape));
        check_outcome(&shape, &out, &committed, 0);
    });
}

/// Reproducer: the host returns the buffer on the free queue before it reads the buffer's
/// records — in [`lane_delivers_every_record_once`]'s model. Loom must find the producer
/// committing the third record into that buffer before the host reads it: the first record
/// is lost and the third taken twice (or a record torn between the two). Preemption bound 4,
/// as its counterpart.
#[test]
fn reproducer_host_frees_before_read() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 1, arena: 64, captures: 3, elems: 1 };
    expect_found(
        "reproducer_host_frees_before_read",
        Some(4),
        &["lost, duplicated or reordered", "payload mismatch"],
        move |host_first| {
            let (committed, out) = run(shape, HostBug::FreeBeforeRead, host_first, move |d| dumper_producer(d, shape));
            check_outcome(&shape, &out, &committed, 0);
        },
    );
}

/// Reproducer: `GmLane::publish` stores the ready tail before the ready entry
/// (`breakage::DUMP_TAIL_FIRST`) — in [`lane_delivers_every_record_once`]'s model. Loom must
/// find the host taking the entry before it is written (a stale buffer index and count): a
/// record lost or taken twice. Preemption bound 4, as its counterpart.
#[cfg(feature = "breakage")]
#[test]
fn reproducer_producer_stores_tail_first() {
    let _s = serial();
    let shape = Shape { buffers: 2, records: 1, arena: 64, captures: 3, elems: 1 };
    let _broken = crate::breakage::activate(crate::breakage::DUMP_TAIL_FIRST);
    expect_found(
        "reproducer_producer_stores_tail_first",
        Some(4),
        &["lost, duplicated or reordered", "accounting unknown"],
        move |host_first| {
            let (committed, out) = run(shape, HostBug::None, host_first, move |d| dumper_producer(d, shape));
            check_outcome(&shape, &out, &committed, 0);
        },
    );
}
