//! The resident executor's scheduler state in GM, as its step functions touch it: inboxes
//! (take, push, steal), the idle mask and doorbells, fan-in release, dispatch slots and their
//! generations, the token-serialised dispatch pass. Every word through `GmAtomic`; these are
//! the functions the loom models (`exec::resident`'s `loom_tests`) drive.

use pto_hal::{Barriers, GmAddr, GmAtomic};

use crate::layout::{
    CaptureLayout, ENTRY_DUMMY, ENTRY_GANG, HOME_DUMMY, ResidentLayout, entry_task_block, entry_word, home_fields,
    inbox_class,
};
use crate::lifecycle::{self, RunMap};

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

/// Whether lane `lane` of a cluster may be given work in a graph whose inbox classes are
/// `classes` (bit `k` for [`inbox_class`] `k`, as [`ResidentLayout::classes`] holds them): the
/// graph has tasks of the lane's class (AIC for lane 0, AIV for the others; dummies are AIV
/// work) or gangs, which may take every lane. A lane that may not has nothing to run, and
/// needs not dispatch for the others either: a lane that has work dispatches for itself when
/// it is free, and nothing can be placed in it while it is not.
pub const fn lane_has_work(classes: u8, lane: u32) -> bool {
    working_lanes(classes) & (1 << lane) != 0
}

/// The lanes that may be given work in a graph of inbox classes `classes` ([`lane_has_work`]),
/// bit `i` for lane `i`: those that can run an entry of a class the graph has.
pub const fn working_lanes(classes: u8) -> u8 {
    let mut lanes = 0;
    let mut k = 0;
    while k <= inbox_class::GANG {
        if classes & (1 << k) != 0 {
            lanes |= class_lanes(k);
        }
        k += 1;
    }
    lanes
}

/// The lanes that can run an entry of inbox class `k` (bit `i` for lane `i`): the AIC lane,
/// the AIV lanes, or, for a gang, all three.
pub const fn class_lanes(k: u32) -> u8 {
    match k {
        inbox_class::AIC => 0b001,
        inbox_class::AIV => 0b110,
        _ => 0b111,
    }
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
        if e == 0 && !takes_unpublished() {
            return Take::Unpublished(at);
        }
        if a.compare_exchange(GmAddr(l.inbox_head(c, k)), head, head + 1) == head {
            if head + 1 >= tail {
                // Taken the last entry it saw: the inbox is no longer worth a steal.
                unstock(a, l, c, k);
            }
            return Take::Task(e);
        }
        crate::sync::spin_hint();
    }
}

/// Mark cluster `c`'s inbox of class `k` as stocked ([`ResidentLayout::stocked`]), after a
/// place in it was reserved. Always a read-modify-write, never a look first: the mark and a
/// taker's clear ([`unstock`]) are then ordered on the mask word, and if the clear comes
/// second it acquires the reservation made before the mark.
pub fn stock<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32) {
    let (at, bit) = (GmAddr(l.stocked(k, c / 64)), 1u64 << (c % 64));
    // Not `GmAtomic::fetch_or`, which does not write when the bit is already set.
    let mut cur = a.query(at);
    loop {
        let seen = a.compare_exchange(at, cur, cur | bit);
        if seen == cur {
            return;
        }
        cur = seen;
    }
}

/// Clear cluster `c`'s stocked bit of class `k` (its inbox was found or left empty), then look
/// again: a place reserved meanwhile sets it again. Either the pusher's mark ([`stock`])
/// comes after this clear on the mask word and stands, or it comes before, and this clear
/// (a read-modify-write that reads it) sees the reservation the pusher made before its mark:
/// a non-empty inbox is never left unmarked.
pub fn unstock<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32) {
    crate::seam!(UNSTOCK_NO_SECOND_LOOK => broken::unstock_without_a_second_look(a, l, c, k));
    let (at, bit) = (GmAddr(l.stocked(k, c / 64)), 1u64 << (c % 64));
    a.fetch_and(at, !bit);
    if a.query(GmAddr(l.inbox_head(c, k))) < a.query(GmAddr(l.inbox_tail(c, k))) {
        a.fetch_or(at, bit);
    }
}

/// Take an entry of class `k` from cluster `c`'s inbox, else steal one from the other
/// clusters' in order (`c + 1`, `c + 2`, …), looking only at the inboxes the class's stocked
/// mask marks (one read per 64 clusters instead of two per cluster). The own inbox is read
/// directly, whatever its mark. An inbox whose next entry is reserved but not yet written is
/// passed over (its pusher rings that cluster once it is written); a marked inbox found empty
/// is unmarked ([`unstock`]).
pub fn take_any<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32) -> Option<u64> {
    if let Take::Task(e) = take(a, l, c, k) {
        return Some(e);
    }
    find_marked(
        a,
        l.clusters,
        (c, false),
        |i| GmAddr(l.stocked(k, i)),
        |x| match take(a, l, x, k) {
            Take::Task(e) => Some(e),
            Take::Empty(_) => {
                unstock(a, l, x, k);
                None
            }
            Take::Unpublished(_) => None,
        },
    )
}

/// Visit the clusters a mask marks (bit `c % 64` of the word at `word(c / 64)`) in cluster
/// order from `from.0` — `from.0` itself first when `from.1` says so, then `from.0 + 1`, …,
/// wrapping — until `f` returns something. One query per mask word (the first word's is read
/// once and serves both ends of the order), and no division per cluster.
pub fn find_marked<G: GmAtomic, T>(
    a: &G,
    clusters: u32,
    (from, itself): (u32, bool),
    word: impl Fn(u32) -> GmAddr,
    mut f: impl FnMut(u32) -> Option<T>,
) -> Option<T> {
    let words = clusters.div_ceil(64);
    let valid = |w: u32| {
        let tail = clusters - 64 * w;
        if tail >= 64 { u64::MAX } else { (1u64 << tail) - 1 }
    };
    let mut each = |w: u32, mut bits: u64| {
        while bits != 0 {
            let x = 64 * w + bits.trailing_zeros();
            bits &= bits - 1;
            if let Some(t) = f(x) {
                return Some(t);
            }
        }
        None
    };
    let (w0, b0) = (from / 64, from % 64);
    let first = a.query(word(w0)) & valid(w0);
    let own = if itself { 1u64 << b0 } else { 0 };
    let above = if b0 == 63 { 0 } else { u64::MAX << (b0 + 1) };
    let below = (1u64 << b0) - 1;
    if let Some(t) = each(w0, first & own).or_else(|| each(w0, first & above)) {
        return Some(t);
    }
    for w in (w0 + 1..words).chain(0..w0) {
        if let Some(t) = each(w, a.query(word(w)) & valid(w)) {
            return Some(t);
        }
    }
    each(w0, first & below)
}

/// Append entry `e` to cluster `c`'s inbox of class `k`: reserve a place by advancing `tail`,
/// publish the entry, then mark the inbox stocked ([`stock`]). `false` when the inbox is full
/// (a task released twice: the image is corrupt).
pub fn push<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32, e: u64) -> bool {
    let capacity = a.query(GmAddr(l.inbox_capacity(c, k)));
    let i = a.fetch_add(GmAddr(l.inbox_tail(c, k)), 1);
    if i >= capacity {
        return false;
    }
    let first = a.query(GmAddr(l.inbox_first(c, k))) as u32;
    a.store_direct(GmAddr(l.entry(first + i as u32)), e);
    stock(a, l, c, k);
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

/// Ring the first idle cluster after `from` (in cluster order), if any: new work in `from`'s
/// inbox may be stolen by it. With `home_serves` (an idle mark of `from` means a lane of
/// `from` that can run the work is waiting for it), nothing is rung when `from` itself is
/// idle: the ring its releaser owes `from` wakes that lane. (`from` is never rung here.)
pub fn wake_idle<G: GmAtomic>(a: &G, l: &ResidentLayout, from: u32, home_serves: bool) {
    find_marked(
        a,
        l.clusters,
        (from, home_serves),
        |i| GmAddr(l.idle(i)),
        |c| {
            if c != from {
                ring(a, l, c);
            }
            Some(())
        },
    );
}

/// Whether an idle mark of a cluster, in a graph of inbox classes `classes`, says that a lane
/// of it can run an entry of class `k` now: the graph gives work only to lanes of `k`'s kind
/// (an idle mark is made by a free lane that may be given work, [`working_lanes`]), and `k`
/// is not a gang (which needs every lane it names free, not one).
pub const fn idle_serves(classes: u8, k: u32) -> bool {
    k != inbox_class::GANG && working_lanes(classes) & !class_lanes(k) == 0
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

/// The rings a [`push_ready`] owes in a graph of inbox classes `classes`: each cluster it
/// pushed to whose inbox of that class still holds an entry (`all`: every one of them,
/// whatever their inboxes hold), then one idle cluster ([`wake_idle`]: none when the home
/// cluster is idle itself and its idle mark says a lane of it can run the work,
/// [`idle_serves`]). A cluster whose inbox is empty again had its entries taken already.
pub fn ring_pushed<G: GmAtomic>(a: &G, l: &ResidentLayout, p: Pushed, all: bool, classes: u8) {
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
        wake_idle(a, l, p.home, idle_serves(classes, p.class));
    }
}

/// Publish task `t` (its fan-in reached zero): push each block to its inbox, then ring the
/// clusters it went to and one idle cluster. `Err` when the state is corrupt.
#[cfg_attr(not(all(test, loom)), allow(dead_code))] // the loom models drive it
pub fn make_ready<G: GmAtomic>(a: &G, l: &ResidentLayout, t: u32) -> Result<(), &'static str> {
    let p = push_ready(a, l, t)?;
    ring_pushed(a, l, p, true, ALL_CLASSES);
    Ok(())
}

/// One producer of task `c` is done: decrement `c`'s fan-in count. `Ok(true)` for the caller
/// whose decrement took it to zero: that caller publishes `c`.
pub fn take_fanin<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32) -> Result<bool, &'static str> {
    crate::seam!(RESIDENT_RELEASE_SPLIT => broken::take_fanin_split(a, l, c));
    fanin_taken(a.fetch_add(GmAddr(l.fanin(c)), u64::MAX))
}

/// What a consumer's fan-in count held before one producer's decrement says.
fn fanin_taken(before: u64) -> Result<bool, &'static str> {
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
#[cfg_attr(not(all(test, loom)), allow(dead_code))] // the loom models drive it
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
    crate::seam!(SLOT_GEN_BEFORE_ENTRY => broken::publish_slot_generation_first(a, l, c, lane, e));
    let at = GmAddr(l.slot_publication(c, lane));
    let next = a.query(at) + 1;
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
#[cfg_attr(not(all(test, loom)), allow(dead_code))] // the loom models drive it
pub fn complete_slot<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, lane: u32, g: u64) {
    post_completion(a, l, c, lane, g);
    ring(a, l, c);
}

/// One dispatch pass over cluster `c` by the holder of its token: fill its free lanes until
/// nothing more can be placed (see the module documentation); `dummy` completes a dummy
/// entry taken on the way. Returns the lanes published, and leaves the cluster marked idle
/// when a lane it could fill found nothing.
#[cfg_attr(not(all(test, loom)), allow(dead_code))] // the loom models drive it
pub fn dispatch<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, dummy: impl FnMut(u64)) -> u8 {
    dispatch_with(a, l, (None, ALL_CLASSES), c, dummy)
}

/// Every inbox class: the `classes` argument of [`dispatch_with`] that never skips one.
pub const ALL_CLASSES: u8 = (1 << inbox_class::AIC) | (1 << inbox_class::AIV) | (1 << inbox_class::GANG);

/// Hand out the next occupancy of the rendezvous slot of the gang about to be published to
/// lanes `lanes` of cluster `c` (its lowest lane's slot), and record it for each of those lanes
/// (token holder only, before the entries are published): the occupancy each participant
/// claims or joins at the task's boundaries. A task of one lane has no peer to meet and is
/// given none.
pub fn occupy<G: GmAtomic>(a: &G, cap: &CaptureLayout, c: u32, lanes: u8) {
    let key = lanes.trailing_zeros();
    let at = GmAddr(cap.occupancy_issued(c, key));
    let n = a.query(at) + 1;
    a.store_direct(at, n);
    for i in (0..LANES).filter(|&i| lanes & (1 << i) != 0) {
        a.store_direct(GmAddr(cap.occupancy(c, i)), n);
    }
}

/// [`dispatch`], with the args dump's boundary capture on when `cap` is given (every
/// gang's publication is given its rendezvous occupancy first, [`occupy`]), looking only for the
/// inbox classes set in `classes` (bit `k` for [`inbox_class`] `k`; the graph's own
/// [`ResidentLayout::classes`]: a class the graph lacks has no entry to find).
pub fn dispatch_with<G: GmAtomic>(
    a: &G,
    l: &ResidentLayout,
    (cap, classes): (Option<&CaptureLayout>, u8),
    c: u32,
    mut dummy: impl FnMut(u64),
) -> u8 {
    let mut published = 0u8;
    loop {
        // Another round only after a dummy completed here: its consumers may be new work.
        // Otherwise a lane that found nothing would find nothing again (work pushed during the
        // pass rings the doorbell, which the token holder looks at when it gives the token
        // back).
        let mut again = false;
        let mut free = (0..LANES).filter(|&i| lane_free(a, l, c, i)).fold(0u8, |m, i| m | 1 << i);
        let gangs = classes & (1 << inbox_class::GANG) != 0;
        let mut held = if gangs { a.query(GmAddr(l.held(c))) } else { 0 };
        if gangs
            && held == 0
            && let Some(e) = take_any(a, l, c, inbox_class::GANG)
        {
            held = e;
            a.store_direct(GmAddr(l.held(c)), e);
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
            } else {
                reserved = lanes;
            }
        }
        // Classes found empty in this round (or absent from the graph): the next lane of the
        // class does not look again.
        let mut dry = !classes;
        for i in 0..LANES {
            let k = if i == 0 { inbox_class::AIC } else { inbox_class::AIV };
            if free & (1 << i) == 0 || reserved & (1 << i) != 0 || dry & (1 << k) != 0 {
                continue;
            }
            loop {
                let Some(e) = take_any(a, l, c, k) else {
                    dry |= 1 << k;
                    break;
                };
                if e & ENTRY_DUMMY != 0 {
                    dummy(e);
                    again = true;
                    continue;
                }
                // A single-lane task has one participant: it claims no rendezvous slot, so it is
                // given no occupancy.
                publish_slot(a, l, c, i, e);
                published |= 1 << i;
                free &= !(1 << i);
                break;
            }
        }
        if !again {
            // Idle: a lane that may be given work is free and found nothing. (A lane the graph
            // gives no work is always free, and says nothing about the cluster's load.)
            set_idle(a, l, c, free & !reserved & working_lanes(classes) != 0);
            return published;
        }
    }
}

/// Whether a fault is latched.
pub fn latch_seen<G: GmAtomic>(a: &G, map: &RunMap) -> bool {
    // Broken (RELEASE_ON_FAULT): never, which forces the interleaving in which nobody looks
    // until the graph drained.
    crate::seam!(RELEASE_ON_FAULT => false);
    lifecycle::latched(a, map.desc)
}

/// Whether a taker takes an inbox entry that was reserved but not written yet (never).
fn takes_unpublished() -> bool {
    // Broken (RESIDENT_TAKE_UNPUBLISHED): it does, without waiting for the entry.
    crate::seam!(RESIDENT_TAKE_UNPUBLISHED => true);
    false
}

/// The broken twins of the resident state's steps (the breakage suites' variants and the loom
/// models' reproducers): each is a whole step with one bug, entered from the first line of the
/// correct step when its switch is active ([`seam!`](crate::seam)). Compiled with the
/// `breakage` feature only.
#[cfg(feature = "breakage")]
mod broken {
    use pto_hal::{GmAddr, GmAtomic};

    use super::fanin_taken;
    use crate::layout::ResidentLayout;

    /// `UNSTOCK_NO_SECOND_LOOK`: [`unstock`](super::unstock) that clears the stocked bit with
    /// no second look at the inbox (a place reserved meanwhile is left unmarked: no core
    /// steals it).
    pub(super) fn unstock_without_a_second_look<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, k: u32) {
        a.fetch_and(GmAddr(l.stocked(k, c / 64)), !(1u64 << (c % 64)));
    }

    /// `RESIDENT_RELEASE_SPLIT`: [`take_fanin`](super::take_fanin) as a load and a store
    /// instead of one read-modify-write (two producers finishing together lose a decrement or
    /// publish the consumer twice).
    pub(super) fn take_fanin_split<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32) -> Result<bool, &'static str> {
        let at = GmAddr(l.fanin(c));
        let v = a.query(at);
        a.store_direct(at, v.wrapping_sub(1));
        fanin_taken(v)
    }

    /// `SLOT_GEN_BEFORE_ENTRY`: [`publish_slot`](super::publish_slot) that stores the new
    /// publication generation before the entry it announces (the lane may run the slot's
    /// previous entry again).
    pub(super) fn publish_slot_generation_first<G: GmAtomic>(a: &G, l: &ResidentLayout, c: u32, lane: u32, e: u64) {
        let at = GmAddr(l.slot_publication(c, lane));
        let next = a.query(at) + 1;
        a.store_direct(at, next);
        a.store_direct(GmAddr(l.slot_entry(c, lane)), e);
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
        let rung = |idle: &[u32], from: u32, serves: bool| {
            let a = Words::default();
            for &c in idle {
                set_idle(&a, &l, c, true);
            }
            wake_idle(&a, &l, from, serves);
            (0..l.clusters).filter(|&c| a.query(GmAddr(l.doorbell(c))) != 0).collect::<alloc::vec::Vec<u32>>()
        };
        for serves in [false, true] {
            assert_eq!(rung(&[0], 65, serves), [0], "wraps from the second word into the first");
            assert_eq!(rung(&[0], 60, serves), [0], "passes an empty second word");
            assert_eq!(rung(&[3, 66], 10, serves), [66]);
            assert_eq!(rung(&[3, 66], 67, serves), [3]);
            assert_eq!(rung(&[5], 5, serves), [0u32; 0], "never the releaser's own cluster");
            assert_eq!(rung(&[1, 6], 5, serves), [6]);
            assert_eq!(rung(&[], 5, serves), [0u32; 0]);
        }
        assert_eq!(rung(&[5, 6], 5, false), [6], "the home's idle mark does not say it can run the work");
        assert_eq!(rung(&[5, 6], 5, true), [0u32; 0], "the home's own idle lane runs the work");
        assert_eq!(rung(&[65, 66], 65, true), [0u32; 0], "the home's mark in the second word");
    }

    /// A dispatch pass marks its cluster idle only for a free lane the graph may give work:
    /// with both AIV lanes busy and the AIC lane free, a pass in an AIV-only graph leaves the
    /// cluster busy (its AIC lane sits out and says nothing of its load); in a graph that has
    /// AIC tasks, the same pass (finding no AIC entry) marks it idle.
    #[test]
    fn a_pass_marks_idle_only_for_a_free_lane_that_may_be_given_work() {
        let l = ResidentLayout { base: 0x1000, clusters: 2, tasks: 0, entries: 0 };
        let idle_after_pass = |classes: u8| {
            let a = Words::default();
            for lane in 1..LANES {
                publish_slot(&a, &l, 1, lane, entry_word(0, 0, 0));
            }
            dispatch_with(&a, &l, (None, classes), 1, |e| panic!("no dummy here: {e:#x}"));
            a.query(GmAddr(l.idle(0))) & (1 << 1) != 0
        };
        let (aic, aiv) = (1u8 << inbox_class::AIC, 1u8 << inbox_class::AIV);
        assert!(!idle_after_pass(aiv), "AIV-only graph: the free AIC lane marks nothing");
        assert!(idle_after_pass(aic | aiv), "the free AIC lane found no AIC entry");
    }

    /// A home's idle mark serves a pushed entry exactly when every lane the graph gives work
    /// can run it, and never for a gang: in an AIV-only graph for AIV entries (dummies
    /// included), in an AIC-only graph for AIC entries, in a graph of both for neither.
    #[test]
    fn an_idle_mark_serves_the_class_only_when_the_graph_works_no_other_lane() {
        let (aic, aiv, gang) = (1u8 << inbox_class::AIC, 1u8 << inbox_class::AIV, 1u8 << inbox_class::GANG);
        assert!(idle_serves(aiv, inbox_class::AIV));
        assert!(idle_serves(aic, inbox_class::AIC));
        assert!(!idle_serves(aic | aiv, inbox_class::AIV));
        assert!(!idle_serves(aic | aiv, inbox_class::AIC));
        assert!(!idle_serves(aiv | gang, inbox_class::AIV));
        assert!(!idle_serves(gang, inbox_class::GANG));
        assert!(!idle_serves(aiv | gang, inbox_class::GANG));
    }

    /// A lane may be given work exactly when the graph has tasks of its class or gangs: the
    /// AIC lane for AIC tasks, both AIV lanes for AIV tasks (and dummies), every lane for
    /// gangs; with no task at all, none.
    #[test]
    fn a_lane_has_work_when_the_graph_has_its_class_or_gangs() {
        let (aic, aiv, gang) = (1u8 << inbox_class::AIC, 1u8 << inbox_class::AIV, 1u8 << inbox_class::GANG);
        let lanes = |classes: u8| [0, 1, 2].map(|lane| lane_has_work(classes, lane));
        assert_eq!(lanes(0), [false; 3]);
        assert_eq!(lanes(aic), [true, false, false]);
        assert_eq!(lanes(aiv), [false, true, true]);
        assert_eq!(lanes(gang), [true; 3]);
        assert_eq!(lanes(aic | aiv), [true; 3]);
        assert_eq!(lanes(aiv | gang), [true; 3]);
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
