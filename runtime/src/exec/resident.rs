//! The resident executor: the cores schedule the host-built graph themselves.
//!
//! The host writes the scheduler state ([`ResidentLayout`]) before the launch: per task a
//! fan-in count, a count of subtasks left and a home cluster; per cluster three ready inboxes
//! (AIC, AIV and dummy, gang), a dispatch slot per lane and a doorbell; the inboxes hold the
//! blocks of the tasks that wait for nothing. Once its window is open and the AICPU has said
//! the image is valid (this run's [`resident_ready_word`](crate::layout::resident_ready_word)),
//! a core loops:
//!
//! 1. **its slot**: when its lane's publication generation moved past the one it completed,
//!    it reads the entry, runs that subtask (as the legacy executor runs one: `CoreCtx`),
//!    writes back the outputs, counts the subtask off its task ([`finish`]), and — when it
//!    was the task's last — releases the consumers and counts the task `completed`; then it
//!    posts the generation as its lane's completion and goes straight to step 2 (ringing its
//!    doorbell instead when another core holds the token);
//! 2. **dispatch**: otherwise it tries to take its cluster's token and, holding it, fills the
//!    cluster's free lanes ([`dispatch`]): a gang (MIX task) waits in `held` until every lane
//!    it needs is free and is then published to all of them at once; a free lane takes the
//!    next entry of its class from its own cluster's inbox, else from another cluster's (in
//!    cluster order from its own); dummies are completed on the spot;
//! 3. **sleep**: with nothing to do it waits on its cluster's doorbell, whose value it read
//!    *before* looking for work, so a ring in between is never lost.
//!
//! Releasing a task pushes each of its blocks to the inbox of its home cluster (block `b` one
//! cluster after block `b - 1`, [`push_ready`]); after the releasing core's own dispatch pass
//! (which may take them itself, keeping a chain on one cluster) it rings each of those
//! clusters whose inbox still holds them, and one idle cluster (the idle mask: clusters whose
//! last pass left a lane with nothing to do), which steals ([`ring_pushed`]).
//! Progress rests on the home ring alone: the idle bit is set at the end of a pass, so a
//! release between that pass's look and the bit misses the steal (found by loom), and the
//! block then waits for its home cluster or any later pass.
//!
//! Every word of the state is touched only through `GmAtomic`, so no line of it is cached on
//! either tier; the image (task records, fan-out lists, funcs, argument records) is read
//! through the cache after invalidating it, as host-written data always is. Each word has one
//! writer or is only changed by atomic read-modify-writes: a slot's entry and publication are
//! written by the token holder, its completion only by the lane's core. A core leaves on
//! EXIT, as on the legacy executor, and stops taking work once a fault is latched.
//!
//! The AICPU threads do not dispatch: after the handshake, [`supervise`] waits for the run to
//! complete, watching `completed` with a no-progress watchdog that names a stuck core and its
//! task from `running`; then the threads retire their cores through the teardown gates as the
//! legacy executor's do.

use pto_hal::{AicoreAgent, AicoreLaunch, AicpuAgent, Barriers, CoreType, GmAddr, GmAtomic};
use zerocopy::{FromZeros, IntoBytes};

use super::legacy::CoreCtx;
use crate::capture::rendezvous::{Boundary, Failure};
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::dump::{DumpLevel, next_capture};
use crate::layout::{
    ARGS_HEAD, ArgsHeader, CaptureLayout, DispatchPayload, ENTRY_DUMMY, ENTRY_GANG, HOME_DUMMY, ImageSource, ImageView,
    NO_FUNC, ResidentLayout, TaskRecord, TraceRecord, entry_task_block, entry_word, home_fields, inbox_class, regs,
    trace_kind,
};
use crate::lifecycle::{self, Fault, RunMap};

/// How long an idle core sleeps on its doorbell before it looks at DMB again (EXIT comes
/// through the register, which is not the watched word; the simulator's DMB write also ends the
/// wait, so there EXIT is seen at once). Short slices cost: on the simulator every idle core of
/// the board wakes that often (chain513 under the faithful model, one run each: sim-a2a3
/// release build 3.9 s with 1 ms slices, 0.6 s with 10 ms; sim-a5 debug build 11–13 s with
/// 10 ms, 3.1–3.8 s with 100 ms).
pub const IDLE_SLICE_US: u64 = 100_000;

/// Lanes of a cluster: the AIC, then the two AIVs.
pub const LANES: u32 = 3;

/// The cluster and lane of worker `w` among `clusters` clusters (workers `0..clusters` are
/// the AICs; AIV `clusters + 2c + i` is lane `1 + i` of cluster `c`).
pub const fn seat(w: u32, clusters: u32) -> (u32, u32) {
    if w < clusters { (w, 0) } else { ((w - clusters) / 2, 1 + (w - clusters) % 2) }
}

/// The worker sitting in lane `lane` of cluster `c` ([`seat`]'s inverse).
pub const fn worker(c: u32, lane: u32, clusters: u32) -> u32 {
    if lane == 0 { c } else { clusters + 2 * c + lane - 1 }
}

/// What [`take`] found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Take {
    /// This core owns the entry ([`entry_word`]).
    Task(u64),
    /// Nothing published past `head`: the inbox's tail was this.
    Empty(u64),
    /// An entry was reserved but not yet written: wait on its word.
    Unpublished(GmAddr),
}

/// Take the next entry of cluster `c`'s inbox of class `k`, if one is published. Each entry
/// goes to exactly one caller: `head` only moves forward, by compare-and-swap, past an entry
/// already published.
pub fn take<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32) -> Take {
    loop {
        let head = a.query(GmAddr(l.inbox_head(c, k)));
        let tail = a.query(GmAddr(l.inbox_tail(c, k)));
        if head >= tail || head >= a.query(GmAddr(l.inbox_capacity(c, k))) {
            return Take::Empty(tail);
        }
        let first = a.query(GmAddr(l.inbox_first(c, k))) as u32;
        let at = GmAddr(l.entry(first + head as u32));
        let e = a.query(at);
        if e == 0 && !crate::breakage::broken(crate::breakage::RESIDENT_TAKE_UNPUBLISHED) {
            return Take::Unpublished(at);
        }
        if a.compare_exchange(GmAddr(l.inbox_head(c, k)), head, head + 1) == head {
            a.fetch_add(GmAddr(l.pending(k)), u64::MAX);
            return Take::Task(e);
        }
        crate::sync::spin_hint();
    }
}

/// Take an entry of class `k` from cluster `c`'s inbox, else from the other clusters' in
/// order (`c + 1`, `c + 2`, …): the steal, tried only while the class's `pending` count is
/// non-zero. An inbox whose next entry is reserved but not yet written is passed over (its
/// pusher rings that cluster once it is written).
pub fn take_any<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32) -> Option<u64> {
    let one = |c: u32| match take(a, l, c, k) {
        Take::Task(e) => Some(e),
        Take::Empty(_) | Take::Unpublished(_) => None,
    };
    // The steal is a scan of every cluster: only while some entry of the class is pending.
    one(c).or_else(|| {
        if a.query(GmAddr(l.pending(k))) == 0 {
            return None;
        }
        (1..l.clusters).find_map(|i| one((c + i) % l.clusters))
    })
}

/// Append entry `e` to cluster `c`'s inbox of class `k`: reserve a place by advancing `tail`,
/// then publish the entry. `false` when the inbox is full (a task released twice: the image
/// is corrupt).
pub fn push<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32, e: u64) -> bool {
    let capacity = a.query(GmAddr(l.inbox_capacity(c, k)));
    // Counted before it can be taken, so `pending` never falls below the true count.
    a.fetch_add(GmAddr(l.pending(k)), 1);
    let i = a.fetch_add(GmAddr(l.inbox_tail(c, k)), 1);
    if i >= capacity {
        return false;
    }
    let first = a.query(GmAddr(l.inbox_first(c, k))) as u32;
    a.store_direct(GmAddr(l.entry(first + i as u32)), e);
    true
}

/// Ring cluster `c`'s doorbell: its sleeping cores look for work again.
pub fn ring<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32) {
    a.fetch_add(GmAddr(l.doorbell(c)), 1);
}

/// Mark cluster `c` idle (a lane with nothing to do) or busy in the idle mask; no store when
/// the bit already says so.
pub fn set_idle<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, idle: bool) {
    let at = GmAddr(l.idle(c / 64));
    let bit = 1u64 << (c % 64);
    let mut cur = a.query(at);
    while (cur & bit != 0) != idle {
        let want = if idle { cur | bit } else { cur & !bit };
        let seen = a.compare_exchange(at, cur, want);
        if seen == cur {
            return;
        }
        cur = seen;
    }
}

/// Ring the first idle cluster after `from` (in cluster order; never `from`, which its
/// releaser rings itself), if any:
/// new work in `from`'s inbox may be stolen by it.
pub fn wake_idle<G: GmAtomic>(a: &G, l: &ResidentLayout, from: u32) {
    let n = l.clusters;
    // One query per word of the mask, however many clusters it covers.
    let mut word: Option<(u32, u64)> = None;
    for i in 1..n {
        let c = (from + i) % n;
        let bits = match word {
            Some((at, bits)) if at == c / 64 => bits,
            _ => {
                let bits = a.query(GmAddr(l.idle(c / 64)));
                word = Some((c / 64, bits));
                bits
            }
        };
        if bits & (1 << (c % 64)) != 0 {
            ring(a, l, c);
            return;
        }
    }
}

/// Where [`push_ready`] put a task's blocks: from cluster `home`, one block per cluster in
/// turn, `blocks` of them, in inboxes of class `class`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pushed {
    /// Cluster of block 0.
    pub home: u32,
    /// Inbox class.
    pub class: u32,
    /// Blocks pushed.
    pub blocks: u32,
}

/// Push each block of task `t` (its fan-in reached zero) to its inbox, ringing nobody: the
/// caller owes the rings ([`ring_pushed`]). `Err` when the state is corrupt.
pub fn push_ready<G: GmAtomic>(a: &G, l: &ResidentLayout, t: u32) -> Result<Pushed, &'static str> {
    let (home, class, _, blocks) = home_fields(a.query(GmAddr(l.home(t))));
    if blocks == 0 || home >= l.clusters {
        return Err("a task's home word is corrupt");
    }
    let (k, flags) = match class {
        inbox_class::AIC => (inbox_class::AIC, 0),
        inbox_class::AIV => (inbox_class::AIV, 0),
        inbox_class::GANG => (inbox_class::GANG, ENTRY_GANG),
        HOME_DUMMY => (inbox_class::AIV, ENTRY_DUMMY),
        _ => return Err("a task's home word is corrupt"),
    };
    for b in 0..blocks {
        if !push(a, l, (home + b) % l.clusters, k, entry_word(t, b, flags)) {
            return Err("a ready inbox overflowed");
        }
    }
    Ok(Pushed { home, class: k, blocks })
}

/// The rings a [`push_ready`] owes: each cluster it pushed to whose inbox of that class still
/// holds an entry (`all`: every one of them, whatever their inboxes hold), then one idle
/// cluster. A cluster whose inbox is empty again had its entries taken already.
pub fn ring_pushed<G: GmAtomic>(a: &G, l: &ResidentLayout, p: Pushed, all: bool) {
    let mut rang = false;
    for b in 0..p.blocks.min(l.clusters) {
        let c = (p.home + b) % l.clusters;
        let waiting = all || a.query(GmAddr(l.inbox_head(c, p.class))) < a.query(GmAddr(l.inbox_tail(c, p.class)));
        if waiting {
            ring(a, l, c);
            rang = true;
        }
    }
    if rang {
        wake_idle(a, l, p.home);
    }
}

/// Publish task `t` (its fan-in reached zero): push each block to its inbox, then ring the
/// clusters it went to and one idle cluster. `Err` when the state is corrupt.
pub fn make_ready<G: GmAtomic>(a: &G, l: &ResidentLayout, t: u32) -> Result<(), &'static str> {
    let p = push_ready(a, l, t)?;
    ring_pushed(a, l, p, true);
    Ok(())
}

/// One producer of task `c` is done: decrement `c`'s fan-in count. `Ok(true)` for the caller
/// whose decrement took it to zero: that caller publishes `c`.
pub fn take_fanin<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32) -> Result<bool, &'static str> {
    let at = GmAddr(l.fanin(c));
    let before = if crate::breakage::broken(crate::breakage::RESIDENT_RELEASE_SPLIT) {
        // Broken on purpose: a load and a store instead of one read-modify-write.
        let v = a.query(at);
        a.store_direct(at, v.wrapping_sub(1));
        v
    } else {
        a.fetch_add(at, u64::MAX)
    };
    match before {
        0 => Err("a consumer was released more often than it has producers"),
        1 => Ok(true),
        _ => Ok(false),
    }
}

/// One producer of task `c` is done: decrement `c`'s fan-in count ([`take_fanin`]); the caller
/// whose decrement takes it to zero publishes `c` ([`make_ready`]). `Ok(true)` when this call
/// published `c`.
/// The caller's outputs must be in memory before (a store barrier), so whoever takes `c`
/// sees them.
pub fn release_consumer<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32) -> Result<bool, &'static str> {
    if take_fanin(a, l, c)? {
        make_ready(a, l, c)?;
        return Ok(true);
    }
    Ok(false)
}

/// One subtask of task `t` finished: `Ok(true)` when it was the task's last (the caller then
/// releases the consumers and counts the task completed).
pub fn finish<G: GmAtomic>(a: &G, l: &ResidentLayout, t: u32) -> Result<bool, &'static str> {
    match a.fetch_add(GmAddr(l.left(t)), u64::MAX) {
        0 => Err("a task finished more subtasks than it has"),
        1 => Ok(true),
        _ => Ok(false),
    }
}

/// Whether lane `lane` of cluster `c` completed everything published to it.
pub fn lane_free<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, lane: u32) -> bool {
    a.query(GmAddr(l.slot_completion(c, lane))) == a.query(GmAddr(l.slot_publication(c, lane)))
}

/// Publish entry `e` in lane `lane`'s slot of cluster `c` (token holder only, lane free):
/// the entry first, then the next publication generation.
pub fn publish_slot<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, lane: u32, e: u64) {
    let at = GmAddr(l.slot_publication(c, lane));
    let next = a.query(at) + 1;
    if crate::breakage::broken(crate::breakage::SLOT_GEN_BEFORE_ENTRY) {
        // Broken on purpose: the generation before the entry it announces.
        a.store_direct(at, next);
        a.store_direct(GmAddr(l.slot_entry(c, lane)), e);
        return;
    }
    a.store_direct(GmAddr(l.slot_entry(c, lane)), e);
    a.store_direct(at, next);
}

/// What a lane found in its slot: a new publication (generation and entry), or nothing past
/// the generation `done` it completed last.
pub fn poll_slot<G: GmAtomic + Barriers>(
    a: &G,
    l: &ResidentLayout,
    c: u32,
    lane: u32,
    done: u64,
) -> Option<(u64, u64)> {
    let g = a.query(GmAddr(l.slot_publication(c, lane)));
    if g == done {
        return None;
    }
    a.rmb();
    Some((g, a.query(GmAddr(l.slot_entry(c, lane)))))
}

/// Lane `lane` of cluster `c` completed generation `g`: post it (this lane's core is its
/// only writer).
pub fn post_completion<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, lane: u32, g: u64) {
    a.store_direct(GmAddr(l.slot_completion(c, lane)), g);
}

/// [`post_completion`], then ring the doorbell so a dispatcher sees the lane free. (A core that
/// takes its cluster's token right after posting needs no ring: its own pass sees the lane;
/// `serve` rings only when the token was taken.)
pub fn complete_slot<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, lane: u32, g: u64) {
    post_completion(a, l, c, lane, g);
    ring(a, l, c);
}

/// One dispatch pass over cluster `c` by the holder of its token: fill its free lanes until
/// nothing more can be placed (see the module documentation); `dummy` completes a dummy
/// entry taken on the way. Returns the lanes published, and leaves the cluster marked idle
/// when a lane it could fill found nothing.
pub fn dispatch<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, dummy: impl FnMut(u64)) -> u8 {
    dispatch_with(a, l, None, c, dummy)
}

/// Hand out the next occupancy of the rendezvous slot of the task about to be published to
/// lanes `lanes` of cluster `c` (its lowest lane's slot), and record it for each of those lanes
/// (token holder only, before the entries are published): the occupancy each participant
/// claims or joins at the task's boundaries.
pub fn occupy<G: GmAtomic>(a: &G, cap: &CaptureLayout, c: u32, lanes: u8) {
    let key = lanes.trailing_zeros();
    let at = GmAddr(cap.occupancy_issued(c, key));
    let n = a.query(at) + 1;
    a.store_direct(at, n);
    for i in (0..LANES).filter(|&i| lanes & (1 << i) != 0) {
        a.store_direct(GmAddr(cap.occupancy(c, i)), n);
    }
}

/// [`dispatch`], with the args dump's boundary capture on when `cap` is given: every
/// publication is given its rendezvous occupancy first ([`occupy`]).
pub fn dispatch_with<G: GmAtomic>(
    a: &G,
    l: &ResidentLayout,
    cap: Option<&CaptureLayout>,
    c: u32,
    mut dummy: impl FnMut(u64),
) -> u8 {
    let mut published = 0u8;
    loop {
        let mut progressed = false;
        let mut free = (0..LANES).filter(|&i| lane_free(a, l, c, i)).fold(0u8, |m, i| m | 1 << i);
        let mut held = a.query(GmAddr(l.held(c)));
        if held == 0
            && let Some(e) = take_any(a, l, c, inbox_class::GANG)
        {
            held = e;
            a.store_direct(GmAddr(l.held(c)), e);
            progressed = true;
        }
        let mut reserved = 0u8;
        if held != 0 {
            let (t, _) = entry_task_block(held);
            let (_, _, lanes, _) = home_fields(a.query(GmAddr(l.home(t))));
            let lanes = if lanes == 0 { 0b111 } else { lanes };
            if free & lanes == lanes {
                if let Some(cap) = cap {
                    occupy(a, cap, c, lanes);
                }
                for i in (0..LANES).filter(|&i| lanes & (1 << i) != 0) {
                    publish_slot(a, l, c, i, held);
                }
                a.store_direct(GmAddr(l.held(c)), 0);
                published |= lanes;
                free &= !lanes;
                progressed = true;
            } else {
                reserved = lanes;
            }
        }
        for i in 0..LANES {
            if free & (1 << i) == 0 || reserved & (1 << i) != 0 {
                continue;
            }
            let k = if i == 0 { inbox_class::AIC } else { inbox_class::AIV };
            while let Some(e) = take_any(a, l, c, k) {
                progressed = true;
                if e & ENTRY_DUMMY != 0 {
                    dummy(e);
                    continue;
                }
                if let Some(cap) = cap {
                    occupy(a, cap, c, 1 << i);
                }
                publish_slot(a, l, c, i, e);
                published |= 1 << i;
                free &= !(1 << i);
                break;
            }
        }
        if !progressed {
            set_idle(a, l, c, free & !reserved != 0);
            return published;
        }
    }
}

/// Why [`serve`] returned.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// DMB said EXIT.
    Exit,
    /// Nothing to do and no progress anywhere for the core's wait budget, and no EXIT: the
    /// fault is latched.
    IdleTimeout,
}

/// The graph image as a core reads it: each range observed (invalidated) before it is read,
/// since the host wrote it and this core's cache may hold a previous run's lines.
struct CoreImage<'a, A> {
    a: &'a A,
    base: GmAddr,
}

impl<A: AicoreAgent> ImageSource for CoreImage<'_, A> {
    fn read_at(&self, off: u64, buf: &mut [u8]) {
        let at = self.base.offset(off);
        self.a.observe_lines(at, buf.len() as u64);
        self.a.read(at, buf);
    }
}

/// The resident loop of one core (see the module documentation), from the open window to
/// EXIT.
pub fn serve<A: AicoreAgent>(
    a: &A,
    map: &RunMap,
    launch: &AicoreLaunch,
    trace: &mut Option<crate::trace::TraceRing>,
) -> Served {
    let cfg = &map.cfg;
    let w = launch.block_idx;
    let budget = cfg.core_wait_ticks;
    let Some(l) = ResidentLayout::of(cfg) else { return Served::Exit };
    let src = CoreImage { a, base: GmAddr(cfg.image) };
    let img = match ImageView::open(&src, cfg.image_len) {
        Ok(img) => img,
        Err(e) => {
            // The AICPU validated the image before it started the cores: this one reads
            // something else (a stale or clobbered line).
            let f = Fault {
                code: ErrorCode::Device(DeviceFault::BadImage),
                site: Site::Kernel,
                task: None,
                core: Some(w),
                detail: e.detail(),
            };
            lifecycle::latch(a, map.desc, f, "a core read a graph image the AICPU had not validated");
            return Served::IdleTimeout;
        }
    };
    let (c, lane) = seat(w, l.clusters);
    let none = Pushed { home: 0, class: 0, blocks: 0 };
    let core = Core {
        a,
        map,
        l: &l,
        img: &img,
        launch,
        w,
        owed: core::array::from_fn(|_| core::cell::Cell::new(none)),
        owed_len: core::cell::Cell::new(0),
        capture: CaptureLayout::of(cfg).and_then(|cap| {
            let level = DumpLevel::try_from(a.query(GmAddr(cap.header(crate::layout::capture_header::LEVEL))) as u32);
            Some((Boundary::new(a, cap, w, c, cfg.epoch), level.ok()?))
        }),
    };
    let served = core.capture.as_ref().map(|(b, _)| GmAddr(b.layout().header(crate::layout::capture_header::SERVED)));
    // The generation this lane completed last (the host starts every slot at 0).
    let mut done = 0u64;
    let mut deadline = a.now_ticks().saturating_add(budget);
    let mut seen = a.query(GmAddr(l.completed()));
    let late = crate::breakage::broken(crate::breakage::WAKE_SEEN_LATE);
    loop {
        if a.read_dmb() == regs::DMB_EXIT {
            return Served::Exit;
        }
        // Read before looking for work: a ring after this read ends the wait below at once.
        let mut bell = if late { 0 } else { a.query(GmAddr(l.doorbell(c))) };
        // The tick a trace records as this subtask's dispatch is read before the latch is
        // looked at: a subtask taken after the latch is never run, one traced was taken before.
        let taken = if trace.is_some() { a.now_ticks() } else { 0 };
        if !latch_seen(a, map) {
            if let Some((g, e)) = poll_slot(a, &l, c, lane, done) {
                core.run(lane, e, taken, trace);
                done = g;
                post_completion(a, &l, c, lane, g);
                // This core's own pass sees its lane free (and may take the consumers it just
                // published); when another core holds the token, ring so it looks again.
                if core.try_dispatch(c, lane).is_none() {
                    ring(a, &l, c);
                }
                core.settle();
                deadline = a.now_ticks().saturating_add(budget);
                continue;
            }
            let again = core.try_dispatch(c, lane);
            core.settle();
            if again == Some(true) {
                continue;
            }
        }
        if late {
            // Broken on purpose: a ring between the look for work and this read is lost.
            bell = a.query(GmAddr(l.doorbell(c)));
        }
        // Idle: the run is progressing elsewhere as long as `completed` (or a capture) moves.
        let n = a.query(GmAddr(l.completed())) + served.map_or(0, |at| a.query(at));
        let now = a.now_ticks();
        if n != seen {
            seen = n;
            deadline = now.saturating_add(budget);
        }
        if now >= deadline {
            lifecycle::latch(
                a,
                map.desc,
                Fault {
                    code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                    site: Site::CoreIdle,
                    task: None,
                    core: Some(w),
                    detail: n,
                },
                "",
            );
            return Served::IdleTimeout;
        }
        // In slices: EXIT arrives through a register, not through the watched word.
        let until = deadline.min(now.saturating_add(a.ticks_from_micros(IDLE_SLICE_US)));
        a.wait_for_word(GmAddr(l.doorbell(c)), bell, until);
    }
}

/// What one core's resident loop works with.
struct Core<'a, A: AicoreAgent> {
    a: &'a A,
    map: &'a RunMap,
    l: &'a ResidentLayout,
    img: &'a ImageView<'a, CoreImage<'a, A>>,
    launch: &'a AicoreLaunch,
    w: u32,
    /// Tasks published whose rings are owed ([`Core::settle`]).
    owed: [core::cell::Cell<Pushed>; 8],
    owed_len: core::cell::Cell<usize>,
    /// The args dump's boundary capture, when the run dumps.
    capture: Option<(Boundary, DumpLevel)>,
}

impl<A: AicoreAgent> Core<'_, A> {
    /// Latch a fault of task `t` at `site` on this core.
    fn fault(&self, code: ErrorCode, site: Site, t: u32, detail: u64, text: &str) {
        let f = Fault { code, site, task: Some(t), core: Some(self.w), detail };
        lifecycle::latch(self.a, self.map.desc, f, text);
    }

    /// Take cluster `c`'s token and run a dispatch pass, if no other core holds it (`None`
    /// when one does). `Some(true)` when this core should look again at once: its own lane
    /// got work, or something happened during the pass that it may not have seen.
    fn try_dispatch(&self, c: u32, lane: u32) -> Option<bool> {
        let (a, l) = (self.a, self.l);
        if a.compare_exchange(GmAddr(l.token(c)), 0, self.w as u64 + 1) != 0 {
            return None;
        }
        let at_lock = a.query(GmAddr(l.doorbell(c)));
        let published = dispatch_with(a, l, self.capture.as_ref().map(|(b, _)| b.layout()), c, |e| {
            let (t, _) = entry_task_block(e);
            if t >= l.tasks {
                self.fault(
                    ErrorCode::Device(DeviceFault::BadImage),
                    Site::Dispatch,
                    t,
                    e,
                    "an inbox named a task outside the graph",
                );
                return;
            }
            self.finish_subtask(t, None);
        });
        let now = a.query(GmAddr(l.doorbell(c)));
        a.store_direct(GmAddr(l.token(c)), 0);
        let changed = now != at_lock;
        if published & !(1 << lane) != 0 || changed {
            // Another lane got work, or a ring came while this core held the token (its
            // ringer may be asleep, having found the token taken): wake the cluster.
            ring(a, l, c);
        }
        Some(published & (1 << lane) != 0 || changed)
    }

    /// Ring for every task this core published since the last call ([`ring_pushed`]: only
    /// the clusters whose inboxes still hold its blocks, after this core's own pass had the
    /// chance to take them).
    fn settle(&self) {
        let n = self.owed_len.replace(0);
        for p in &self.owed[..n] {
            ring_pushed(self.a, self.l, p.get(), false);
        }
    }

    /// Publish task `t`, owing its rings until [`settle`](Self::settle); with no room left to
    /// remember it, ring at once.
    fn publish(&self, t: u32) -> Result<(), &'static str> {
        let p = push_ready(self.a, self.l, t)?;
        let n = self.owed_len.get();
        if n < self.owed.len() {
            self.owed[n].set(p);
            self.owed_len.set(n + 1);
        } else {
            ring_pushed(self.a, self.l, p, true);
        }
        Ok(())
    }

    /// One subtask of task `t` is done (`rec`: its record, when the caller has it): count it
    /// off; after the task's last, release its consumers and count the task completed.
    fn finish_subtask(&self, t: u32, rec: Option<&TaskRecord>) {
        let (a, l) = (self.a, self.l);
        match finish(a, l, t) {
            Err(why) => self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Completion, t, t as u64, why),
            Ok(false) => {}
            Ok(true) => {
                let rec = rec.copied().unwrap_or_else(|| self.img.task(t));
                self.release(&rec, t);
                a.fetch_add(GmAddr(l.completed()), 1);
                a.send_event();
            }
        }
    }

    /// Run slot entry `e` in this core's lane `lane`: one block of a task, or one lane of
    /// a gang's block (`taken`: the tick it was taken at, when tracing). A subtask whose
    /// kernel faults ends there: it is not counted off, so its task never completes and
    /// releases no consumer, and its output capture is never requested.
    fn run(&self, lane: u32, e: u64, taken: u64, trace: &mut Option<crate::trace::TraceRing>) {
        let (a, l, img) = (self.a, self.l, self.img);
        let (t, block) = entry_task_block(e);
        let bad = |detail: u64, text: &str| {
            self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Kernel, t, detail, text);
        };
        if t >= l.tasks {
            bad(e, "a dispatch slot named a task outside the graph");
            return;
        }
        // The slot was published after the task was released, which came after its
        // producers' outputs were written back: order this core's reads after it.
        a.rmb();
        let rec = img.task(t);
        // The kernel of this core's lane: a gang runs each lane's own; a single task its
        // core type's.
        let gang = e & ENTRY_GANG != 0;
        let func_lane = if gang {
            lane
        } else if self.launch.core_type == CoreType::Aic {
            0
        } else {
            1
        };
        let sub_block = if gang && lane > 0 { lane - 1 } else { 0 };
        if block >= rec.block_num || rec.funcs[func_lane as usize] == NO_FUNC {
            bad(e, "a dispatch slot named a block or lane the task does not have");
            return;
        }
        let args = GmAddr(self.map.cfg.image + img.args_offset(t, &rec));
        let mut h = ArgsHeader::new_zeroed();
        a.observe_lines(args, ARGS_HEAD);
        a.read(args, h.as_mut_bytes());
        let skip = h.predicate != 0 && !predicate_holds(a, h.predicate);
        // The boundaries this task has: a phase that records nothing is not entered.
        let boundary = self.capture.as_ref().map(|(b, level)| {
            let len =
                ARGS_HEAD + h.tensors.min(crate::layout::MAX_TENSOR_ARGS as u32) as u64 * 64 + h.scalars as u64 * 8;
            a.observe_lines(args, len);
            let has = |stage| next_capture(a, *level, t, args.0, stage, 0).is_some();
            let mask = if gang {
                match home_fields(a.query(GmAddr(l.home(t)))).2 {
                    0 => 0b111,
                    m => m as u64,
                }
            } else {
                1 << lane
            };
            let n = b.occupancy(a, lane);
            (
                b,
                mask,
                n,
                [has(crate::layout::dump_stage::BEFORE_DISPATCH), has(crate::layout::dump_stage::AFTER_COMPLETION)],
            )
        });
        // A task that records at either boundary crosses AFTER (possibly empty: the AICPU
        // seals it at once), so its occupancy always settles; it claims the slot at the first
        // phase it enters.
        let cross = |phase: u64| -> bool {
            let Some((b, mask, n, has)) = boundary else { return true };
            let enter = if phase == crate::layout::capture_phase::BEFORE { has[0] } else { has[0] || has[1] };
            if !enter {
                return true;
            }
            let key = mask.trailing_zeros();
            let claim = phase == crate::layout::capture_phase::BEFORE || !has[0];
            match b.cross(a, key, n, mask, 1 << lane, phase, t, claim) {
                Ok(()) => true,
                Err(Failure::Exit) | Err(Failure::Aborted(None)) => false,
                Err(Failure::Aborted(Some(code))) => {
                    let site = if phase == crate::layout::capture_phase::BEFORE {
                        Site::CaptureBefore
                    } else {
                        Site::CaptureAfter
                    };
                    self.fault(ErrorCode::Device(code), site, t, n, "the args dump did not seal this task boundary");
                    false
                }
            }
        };
        // No subtask executes before the task's input capture is sealed.
        if !cross(crate::layout::capture_phase::BEFORE) {
            return;
        }
        let mut traced: Option<TraceRecord> = None;
        if !skip {
            let f = img.func(rec.funcs[func_lane as usize]).unwrap_or_default();
            let bin = if func_lane == 0 { f.aic } else { f.aiv };
            let Some(kernel) = a.resolve_kernel(bin) else {
                self.fault(
                    ErrorCode::Device(DeviceFault::UnknownKernel),
                    Site::Kernel,
                    t,
                    bin,
                    "kernel binary not loaded for this core type",
                );
                return;
            };
            let p = DispatchPayload {
                bin,
                args: args.0,
                task_id: t,
                block_idx: block,
                block_num: rec.block_num,
                lane: sub_block,
                reg_task_id: 0,
                ..DispatchPayload::default()
            };
            let start = a.now_ticks();
            a.store_direct(GmAddr(l.running(self.w)), t as u64 + 1);
            let mut ctx = CoreCtx::load(a, &p, self.launch.core_type);
            if let Some(i) = ctx.malformed() {
                bad(i as u64, "malformed argument record (a stale or corrupt read of its tensor descriptors)");
                return;
            }
            ctx.observe_arguments(a);
            let ran = a.run_kernel(kernel, &mut ctx);
            let record = |end: u64| TraceRecord {
                kind: trace_kind::SUBTASK,
                lane: func_lane as u8,
                core: self.w,
                task: t,
                block,
                bin,
                start,
                end,
                dispatch: taken.max(1),
                ..TraceRecord::default()
            };
            if let Err(err) = ran {
                self.fault(ErrorCode::Device(DeviceFault::KernelFault), Site::Kernel, t, bin, err.as_str());
                if !crate::breakage::broken(crate::breakage::RELEASE_ON_FAULT) {
                    // The faulted subtask is traced (it ends after the latch), never completed.
                    if let Some(tr) = trace.as_mut() {
                        tr.push(a, &record(a.now_ticks()));
                    }
                    return;
                }
            }
            if crate::breakage::broken(crate::breakage::FIN_BEFORE_PUBLISH) {
                // Broken on purpose: the subtask is counted and the consumers released (and
                // rung for) before the outputs are written back.
                a.store_barrier();
                a.fetch_add(GmAddr(l.executed()), 1);
                self.finish_subtask(t, Some(&rec));
                self.settle();
                ctx.publish_outputs(a);
                a.store_direct(GmAddr(l.running(self.w)), 0);
                return;
            }
            ctx.publish_outputs(a);
            a.store_direct(GmAddr(l.running(self.w)), 0);
            a.fetch_add(GmAddr(l.executed()), 1);
            if trace.is_some() {
                traced = Some(record(a.now_ticks()));
            }
        }
        // The outputs are in memory before any consumer can be taken (and before the output
        // capture is requested).
        a.store_barrier();
        // No completion before the task's output capture is sealed.
        if !cross(crate::layout::capture_phase::AFTER) {
            return;
        }
        self.finish_subtask(t, Some(&rec));
        if let (Some(tr), Some(mut r)) = (trace.as_mut(), traced) {
            r.completion = a.now_ticks().max(1);
            tr.push(a, &r);
        }
    }

    /// Decrement every consumer's fan-in; publish those that reach zero.
    fn release(&self, rec: &TaskRecord, t: u32) {
        let (a, l, img) = (self.a, self.l, self.img);
        let mut chunk = [0u32; 16];
        let mut done = 0u32;
        while done < rec.fanout_count {
            let n = (rec.fanout_count - done).min(16) as usize;
            img.read_fanout(rec.fanout_start as u64 + done as u64, &mut chunk[..n]);
            for &c in &chunk[..n] {
                let why = if c >= l.tasks {
                    Err("a fan-out list named a task outside the graph")
                } else {
                    take_fanin(a, l, c).and_then(|last| if last { self.publish(c) } else { Ok(()) })
                };
                if let Err(why) = why {
                    self.fault(ErrorCode::Device(DeviceFault::BadImage), Site::Completion, t, c as u64, why);
                    return;
                }
            }
            done += n as u32;
        }
    }
}

/// Whether a fault is latched (never, with `breakage::RELEASE_ON_FAULT`: the broken variant
/// forces the interleaving in which nobody looks until the graph drained).
fn latch_seen<G: GmAtomic>(a: &G, map: &RunMap) -> bool {
    !crate::breakage::broken(crate::breakage::RELEASE_ON_FAULT) && lifecycle::latched(a, map.desc)
}

/// Read a producer-written 4-byte predicate device-direct (the producer wrote it back before
/// it released this task).
fn predicate_holds<G: GmAtomic>(a: &G, addr: u64) -> bool {
    let word = a.query(GmAddr(addr & !7));
    (word >> ((addr & 4) * 8)) as u32 != 0
}

/// The AICPU side of a resident run, on every scheduler thread: wait until every task of the
/// graph completed, a fault is latched or `stop` is raised, with a no-progress watchdog. A
/// watchdog expiry names the first core found running a kernel (`KernelHung`, with its task
/// and core) or, with none running, the stall itself. With the args dump on, the thread's
/// boundary-capture `service` takes a bounded step between every two looks (a step that
/// copied or committed counts as progress). Returns the tasks completed.
pub fn supervise<A: AicpuAgent>(
    a: &A,
    map: &RunMap,
    stop: &crate::sync::AtomicBool,
    mut service: Option<&mut crate::capture::service::Service<'_, A>>,
) -> u64 {
    let Some(l) = ResidentLayout::of(&map.cfg) else { return 0 };
    let total = l.tasks as u64;
    let watchdog = map.cfg.watchdog_ticks;
    let completed = GmAddr(l.completed());
    let mut seen = a.query(completed);
    let mut last_progress = a.now_ticks();
    loop {
        let c = a.query(completed);
        if c >= total || latch_seen(a, map) || stop.load(crate::sync::Ordering::Acquire) {
            if let Some(s) = service.as_deref_mut() {
                // A participant that gave up marked its slot aborted: acknowledge it before
                // the producer stops, so it leaves on the acknowledgement.
                s.answer_aborts();
            }
            return c;
        }
        let stepped = match service.as_deref_mut() {
            Some(s) => {
                let before = s.stats.steps;
                let answered = s.step();
                (answered, s.stats.steps != before)
            }
            None => (false, false),
        };
        let now = a.now_ticks();
        if c != seen || stepped.1 {
            seen = c;
            last_progress = now;
        } else if now.saturating_sub(last_progress) > watchdog {
            let running = (0..l.workers()).find_map(|w| match a.query(GmAddr(l.running(w))) {
                0 => None,
                v => Some((w, (v - 1) as u32)),
            });
            let f = match running {
                Some((w, t)) => Fault {
                    code: ErrorCode::Device(DeviceFault::KernelHung),
                    site: Site::Completion,
                    task: Some(t),
                    core: Some(w),
                    detail: c,
                },
                None => Fault {
                    code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                    site: Site::Stall,
                    task: None,
                    core: None,
                    detail: c,
                },
            };
            lifecycle::latch(a, map.desc, f, "");
            return c;
        }
        if stepped.0 {
            // Answered a request: its core asks again at once; look again without sleeping.
            continue;
        }
        let until = last_progress.saturating_add(watchdog + 1);
        if service.is_some() {
            // Requests and completions both send an event.
            a.wait_for_event(until.min(now.saturating_add(a.ticks_from_micros(1_000))));
        } else {
            a.wait_for_word(completed, c, until.min(now.saturating_add(a.ticks_from_micros(10_000))));
        }
    }
}

/// Add the kernels the cores ran to the run line's `dispatched` count (one AICPU thread calls
/// this, after [`supervise`]): on the resident executor, "dispatched" is "taken and run by a
/// core".
pub fn count_executed<A: AicpuAgent>(a: &A, map: &RunMap) {
    if let Some(l) = ResidentLayout::of(&map.cfg) {
        // Each core counts a kernel before the task's completion, which `supervise` saw.
        a.rmb();
        let n = a.query(GmAddr(l.executed()));
        a.fetch_add(map.desc.offset(crate::layout::offsets::RUN_DISPATCHED), n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_words::Words;

    /// The idle cluster rung is the first after `from` in cluster order, across mask words
    /// and wrapping past the last cluster; `from` itself is never rung.
    #[test]
    fn wake_idle_rings_the_first_idle_cluster_after_from_across_words() {
        let l = ResidentLayout { base: 0x1000, clusters: 70, tasks: 0, entries: 0 };
        let rung = |idle: &[u32], from: u32| {
            let a = Words::default();
            for &c in idle {
                set_idle(&a, &l, c, true);
            }
            wake_idle(&a, &l, from);
            (0..l.clusters).filter(|&c| a.query(GmAddr(l.doorbell(c))) != 0).collect::<alloc::vec::Vec<u32>>()
        };
        assert_eq!(rung(&[0], 65), [0], "wraps from the second word into the first");
        assert_eq!(rung(&[0], 60), [0], "passes an empty second word");
        assert_eq!(rung(&[3, 66], 10), [66]);
        assert_eq!(rung(&[3, 66], 67), [3]);
        assert_eq!(rung(&[5], 5), [0u32; 0], "never the releaser's own cluster");
        assert_eq!(rung(&[], 5), [0u32; 0]);
    }

    /// `set_idle` sets and clears one cluster's bit and leaves the others.
    #[test]
    fn set_idle_changes_one_bit() {
        let l = ResidentLayout { base: 0x1000, clusters: 70, tasks: 0, entries: 0 };
        let a = Words::default();
        set_idle(&a, &l, 65, true);
        set_idle(&a, &l, 1, true);
        set_idle(&a, &l, 1, false);
        assert_eq!(a.query(GmAddr(l.idle(0))), 0);
        assert_eq!(a.query(GmAddr(l.idle(1))), 1 << 1);
    }
}
