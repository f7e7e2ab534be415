//! The faithful model's unit tests: each hand-off, publication and violation on a small model.

use pto_hal::GmAddr;

use super::Faithful;
use crate::config::AicpuWritePolicy;
use crate::gm::Gm;
use crate::launch::LaunchState;
use crate::violation::Missing;

// Agents: host 0, AICPU thread 0 = 1, cores 0 and 1 = 2 and 3.
const CPU: u16 = 1;
const C0: u16 = 2;
const C1: u16 = 3;

fn setup(host_coherent: bool) -> (Gm, Faithful, u64, u64) {
    let gm = Gm::new(1 << 20);
    let a = gm.alloc(4096, 64).unwrap();
    let off = gm.offset_of(a, 4096).unwrap();
    (gm, Faithful::new(9, 0, host_coherent, 1, 2), a.0, off)
}

fn missing(f: &Faithful) -> Vec<Missing> {
    f.take_violations().into_iter().map(|v| v.missing).collect()
}

/// A model of two AICPU threads (agents 1, 2) and two cores (3, 4) over a fresh 4 KiB
/// buffer: the GM, the model, the buffer's address and its arena offset.
fn two_threads_two_cores() -> (Gm, Faithful, u64, u64) {
    let gm = Gm::new(1 << 20);
    let a = gm.alloc(4096, 64).unwrap().0;
    let off = gm.offset_of(GmAddr(a), 64).unwrap();
    (gm, Faithful::new(9, 0, false, 2, 2), a, off)
}

/// Core 0 hands off to core 1 through the AICPU: COND of core 0, then DMB of core 1.
fn handoff(f: &Faithful) {
    f.reg_write(C0, 0, 1);
    f.reg_read(CPU, 0, 1);
    f.reg_write(CPU, 1, 0);
    f.reg_read(C1, 1, 0);
}

#[test]
fn unpublished_store_is_a_missing_write_back() {
    let (gm, f, a, off) = setup(false);
    f.store(C0, a, off, &[7; 8], &gm);
    handoff(&f);
    let mut b = [0u8; 8];
    f.load(C1, a, off, &mut b, &gm);
    assert_eq!(b, [0; 8], "the bytes never reached memory");
    assert_eq!(missing(&f), [Missing::WriteBackBeforeSignal, Missing::WriteBack]);
}

#[test]
fn published_store_is_seen() {
    let (gm, f, a, off) = setup(false);
    f.store(C0, a, off, &[7; 8], &gm);
    f.clean(C0, a, 8, &gm);
    f.fence(C0);
    handoff(&f);
    let mut b = [0u8; 8];
    f.load(C1, a, off, &mut b, &gm);
    assert_eq!(b, [7; 8]);
    assert_eq!(missing(&f), []);
}

#[test]
fn write_back_without_barrier_before_signal_is_caught() {
    let (gm, f, a, off) = setup(false);
    f.store(C0, a, off, &[7; 8], &gm);
    f.clean(C0, a, 8, &gm);
    handoff(&f);
    assert_eq!(missing(&f), [Missing::StoreBarrierBeforeSignal]);
}

#[test]
fn stale_copy_needs_an_invalidate() {
    for invalidate in [false, true] {
        let (gm, f, a, off) = setup(false);
        let mut b = [0u8; 8];
        f.load(C1, a, off, &mut b, &gm); // core 1 caches the line
        f.store(C0, a, off, &[7; 8], &gm);
        f.clean(C0, a, 8, &gm);
        f.fence(C0);
        handoff(&f);
        if invalidate {
            f.invalidate(C1, a, 8, &gm);
        }
        f.load(C1, a, off, &mut b, &gm);
        if invalidate {
            assert_eq!((b, missing(&f)), ([7; 8], vec![]));
        } else {
            assert_eq!((b, missing(&f)), ([0; 8], vec![Missing::Invalidate]));
        }
    }
}

#[test]
fn host_dma_is_visible_to_the_aicpu_only_under_the_coherent_contract() {
    for coherent in [false, true] {
        let (gm, f, a, off) = setup(coherent);
        let mut b = [0u8; 8];
        f.load(CPU, a, off, &mut b, &gm); // the AICPU caches the line
        f.host_write(a, 8, |at, n| gm.write_bytes(off + at - a, &[5; 8][..n as usize]));
        let launch = LaunchState::new(1, 4, None);
        f.job_start(CPU, &f.host_release(), &launch);
        f.load(CPU, a, off, &mut b, &gm);
        if coherent {
            assert_eq!((b, missing(&f)), ([5; 8], vec![]));
        } else {
            assert_eq!((b, missing(&f)), ([0; 8], vec![Missing::InvalidateAfterHostDma]));
        }
    }
}

#[test]
fn two_unordered_writers_of_one_line_break_the_whole_line_rule() {
    let (gm, f, a, off) = setup(false);
    f.store(C0, a, off, &[1; 8], &gm);
    f.store(C1, a + 32, off + 32, &[2; 8], &gm);
    assert_eq!(missing(&f), [Missing::WholeLineRule]);
    // Both write back: the second whole-line write-back clobbers the first one's bytes.
    f.clean(C0, a, 64, &gm);
    f.clean(C1, a, 64, &gm);
    assert_eq!(missing(&f), [Missing::WholeLineRule]);
    let mut b = [9u8; 8];
    gm.read_bytes(off, &mut b);
    assert_eq!(b, [0; 8], "core 0's bytes were overwritten by core 1's stale copy");
}

#[test]
fn ordered_writers_may_share_a_line() {
    let (gm, f, a, off) = setup(false);
    f.store(C0, a, off, &[1; 8], &gm);
    f.clean(C0, a, 64, &gm);
    f.fence(C0);
    handoff(&f);
    f.invalidate(C1, a, 64, &gm);
    f.store(C1, a + 32, off + 32, &[2; 8], &gm);
    f.clean(C1, a, 64, &gm);
    assert_eq!(missing(&f), []);
    let mut b = [0u8; 64];
    gm.read_bytes(off, &mut b);
    assert_eq!((&b[..8], &b[32..40]), (&[1u8; 8][..], &[2u8; 8][..]));
}

#[test]
fn aicpu_threads_hand_work_to_each_other() {
    // Thread 1 sees core 3 finish, thread 2 (which learnt of it through the AICPU's own
    // memory) dispatches the consumer to core 4.
    let (gm, f, a, off) = two_threads_two_cores();
    f.store(3, a, off, &[4; 8], &gm);
    f.clean(3, a, 64, &gm);
    f.fence(3);
    f.reg_write(3, 0, 1);
    f.reg_read(1, 0, 1);
    f.reg_write(2, 1, 0);
    f.reg_read(4, 1, 0);
    // Core 4 takes the line over (a WAW consumer): ordered after core 3's write-back.
    f.store(4, a + 8, off + 8, &[5; 8], &gm);
    f.clean(4, a, 64, &gm);
    assert_eq!(missing(&f), []);
    let mut b = [0u8; 16];
    gm.read_bytes(off, &mut b);
    assert_eq!(b, [4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5]);
}

/// The AICPU dispatches to core 0: DMB of core 0.
fn dispatch(f: &Faithful) {
    f.reg_write(CPU, 0, 0);
    f.reg_read(C0, 0, 0);
}

#[test]
fn write_back_aicpu_store_is_invisible_until_cleaned() {
    for clean in [false, true] {
        let (gm, f, a, off) = setup(false);
        assert_eq!(f.set_aicpu_writes(AicpuWritePolicy::WriteBack), AicpuWritePolicy::WriteBack);
        f.store(CPU, a, off, &[7; 8], &gm);
        let mut mem = [9u8; 8];
        gm.read_bytes(off, &mut mem);
        assert_eq!(mem, [0; 8], "a write-back AICPU store does not reach memory");
        if clean {
            f.clean(CPU, a, 8, &gm);
            f.fence(CPU);
        }
        dispatch(&f);
        f.invalidate(C0, a, 8, &gm);
        let mut b = [0u8; 8];
        f.load(C0, a, off, &mut b, &gm);
        if clean {
            assert_eq!((b, missing(&f)), ([7; 8], vec![]));
        } else {
            assert_eq!((b, missing(&f)), ([0; 8], vec![Missing::AicpuClean]));
        }
        // A device-direct load sees memory too.
        f.word_load(C0, off, a);
        assert_eq!(missing(&f), if clean { vec![] } else { vec![Missing::AicpuClean] });
    }
}

#[test]
fn write_through_aicpu_store_needs_no_clean() {
    let (gm, f, a, off) = setup(false);
    f.store(CPU, a, off, &[7; 8], &gm);
    dispatch(&f);
    f.invalidate(C0, a, 8, &gm);
    let mut b = [0u8; 8];
    f.load(C0, a, off, &mut b, &gm);
    assert_eq!((b, missing(&f)), ([7; 8], vec![]));
}

#[test]
fn the_aicpu_cluster_reads_its_own_dirty_lines_and_any_thread_may_clean_them() {
    // Two AICPU threads (1, 2), one core (3).
    let gm = Gm::new(1 << 20);
    let a = gm.alloc(4096, 64).unwrap().0;
    let off = gm.offset_of(GmAddr(a), 64).unwrap();
    let f = Faithful::new(9, 0, false, 2, 1);
    f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
    let mut b = [0u8; 8];
    f.load(2, a, off, &mut b, &gm); // thread 2 caches the line (stale soon)
    f.store(1, a, off, &[4; 8], &gm);
    f.load(2, a, off, &mut b, &gm);
    assert_eq!((b, missing(&f)), ([4; 8], vec![]), "one SMP cluster: thread 2 reads thread 1's dirty line");
    f.store(2, a + 8, off + 8, &[5; 8], &gm);
    f.clean(2, a, 64, &gm); // thread 2's clean writes back thread 1's bytes too
    f.fence(2);
    f.reg_write(2, 0, 0);
    f.reg_read(3, 0, 0);
    let mut c = [0u8; 16];
    f.load(3, a, off, &mut c, &gm);
    assert_eq!((c, missing(&f)), ([4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5], vec![]));
}

#[test]
fn write_back_dirty_aicpu_line_outlives_the_program_and_a_host_read_of_it_is_caught() {
    let (gm, f, a, off) = setup(false);
    f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
    f.store(CPU, a, off, &[3; 8], &gm);
    let end = f.job_end(CPU, &gm);
    assert_eq!(missing(&f), []);
    f.host_acquire(&end);
    assert_eq!(f.host_read(a, 8).map_err(|v| v.missing), Err(Missing::AicpuClean));
}

#[test]
fn write_back_acts_as_write_through_under_the_host_coherent_contract() {
    let (gm, f, a, off) = setup(true);
    assert_eq!(f.set_aicpu_writes(AicpuWritePolicy::WriteBack), AicpuWritePolicy::WriteThrough);
    f.store(CPU, a, off, &[7; 8], &gm);
    let mut mem = [0u8; 8];
    gm.read_bytes(off, &mut mem);
    assert_eq!(mem, [7; 8]);
}

#[test]
fn dirty_lines_at_program_end_are_reported_and_lost() {
    let (gm, f, a, off) = setup(false);
    f.store(C0, a, off, &[3; 8], &gm);
    f.job_end(C0, &gm);
    assert_eq!(missing(&f), [Missing::WriteBack]);
    let mut b = [9u8; 8];
    gm.read_bytes(off, &mut b);
    assert_eq!(b, [0; 8]);
}

/// An AICPU thread that publishes only through the cluster (the device-side orchestrator
/// rewriting an argument record in reused heap bytes, another AICPU thread dispatching it):
/// the rewrite is a store the core has not seen, so the core's read through the line it
/// cached for the first record is a missing invalidate, and with the invalidate it reads the
/// rewrite. Checked under both AICPU write policies.
#[test]
fn a_rewrite_published_through_the_cluster_is_a_new_store() {
    // Agents: host 0, AICPU threads 1 (orchestrator) and 2 (scheduler), core 0 = 3.
    const ORCH: u16 = 1;
    const SCHED: u16 = 2;
    const CORE: u16 = 3;
    for policy in [AicpuWritePolicy::WriteThrough, AicpuWritePolicy::WriteBack] {
        for invalidate in [false, true] {
            let gm = Gm::new(1 << 20);
            let a = gm.alloc(4096, 64).unwrap();
            let off = gm.offset_of(a, 4096).unwrap();
            let f = Faithful::new(9, 0, false, 2, 1);
            f.set_aicpu_writes(policy);
            let mut b = [0u8; 8];
            for record in [1u8, 2] {
                f.store(ORCH, a.0, off, &[record; 8], &gm);
                f.clean(ORCH, a.0, 8, &gm);
                // The scheduler dispatches (the core's DMB register), the core acquires.
                f.reg_write(SCHED, 0, 0);
                f.reg_read(CORE, 0, 0);
                if record == 2 && invalidate {
                    f.invalidate(CORE, a.0, 8, &gm);
                }
                f.load(CORE, a.0, off, &mut b, &gm);
                if record == 1 {
                    assert_eq!((b, missing(&f)), ([1; 8], vec![]), "{policy:?}: the first record");
                }
            }
            let expected = if invalidate { ([2; 8], vec![]) } else { ([1; 8], vec![Missing::Invalidate]) };
            assert_eq!((b, missing(&f)), expected, "{policy:?}, invalidate {invalidate}");
        }
    }
}

/// What one AICPU thread learns from outside the cluster (the host's launch, with the DMA
/// before it) reaches the other threads at their next exchange: the other thread's read through
/// its stale copy of the line the host wrote is then a missing invalidate. Without the launch,
/// nothing orders the host's write before that read, and nothing is reported.
#[test]
fn what_one_aicpu_thread_learns_reaches_the_others() {
    // Agents: host 0, AICPU threads 1 (the one launched) and 2 (another), core 0 = 3.
    const FIRST: u16 = 1;
    const OTHER: u16 = 2;
    for launched in [true, false] {
        let gm = Gm::new(1 << 20);
        let a = gm.alloc(4096, 64).unwrap();
        let off = gm.offset_of(a, 4096).unwrap();
        let f = Faithful::new(9, 0, false, 2, 1);
        let mut b = [0u8; 8];
        // Both threads exchange a few times first (nothing learned from outside).
        for _ in 0..3 {
            f.load(FIRST, a.0 + 64, off + 64, &mut b, &gm);
            f.load(OTHER, a.0 + 128, off + 128, &mut b, &gm);
        }
        f.load(OTHER, a.0, off, &mut b, &gm); // the other thread caches the line
        f.host_write(a.0, 8, |at, n| gm.write_bytes(off + at - a.0, &[5; 8][..n as usize]));
        if launched {
            let launch = LaunchState::new(1, 4, None);
            f.job_start(FIRST, &f.host_release(), &launch);
        }
        f.load(FIRST, a.0 + 64, off + 64, &mut b, &gm); // the first thread exchanges
        f.load(OTHER, a.0, off, &mut b, &gm);
        let expected = if launched { vec![Missing::InvalidateAfterHostDma] } else { vec![] };
        assert_eq!((b, missing(&f)), ([0; 8], expected), "launched {launched}");
    }
}

/// A reset forgets every line record but not the clocks a finished launch carries: the next
/// launch on its stream starts from the previous one's end clock. A core's first store after
/// the reset must carry a stamp that clock does not name; otherwise an AICPU that polls the
/// line before the core wrote it back (a handshake report's marker) is told the store was
/// published to it. Once written back and handed off, the store is seen.
#[test]
fn a_clock_from_before_a_reset_names_no_store_after_it() {
    let (gm, f, a, off) = setup(false);
    // A run before the reset: core 0 releases three times, then its program ends.
    let launch = LaunchState::new(1, 4, None);
    f.job_start(C0, &f.host_release(), &launch);
    for _ in 0..3 {
        f.reg_write(C0, 0, 1);
    }
    let end = f.job_end(C0, &gm);
    f.reset(9, 0);
    // The next launch on the stream starts from the host's clock joined with that end clock.
    let mut start = f.host_release();
    for (x, y) in start.iter_mut().zip(&end) {
        *x = (*x).max(*y);
    }
    let next = LaunchState::new(2, 4, None);
    f.job_start(C0, &start, &next);
    f.job_start(CPU, &start, &next);
    f.store(C0, a, off, &[7; 8], &gm);
    let mut b = [0u8; 8];
    f.load(CPU, a, off, &mut b, &gm);
    assert_eq!((b, missing(&f)), ([0; 8], vec![]), "a poll before the write-back reads the old bytes, unblamed");
    f.clean(C0, a, 8, &gm);
    f.fence(C0);
    f.reg_write(C0, 0, 1);
    f.reg_read(CPU, 0, 1);
    f.load(CPU, a, off, &mut b, &gm);
    assert_eq!((b, missing(&f)), ([7; 8], vec![]), "published and handed off");
}

/// A register read that finds no write since the reader's last look acquires nothing (the
/// lock-free path), and one that finds a new write acquires it, also after a reset (which
/// starts every register's write count again, and every reader's last look). Core 1 caches a
/// line, core 0 publishes a new store to it: only when a register write follows is core 1's
/// cached copy a missing invalidate.
#[test]
fn a_register_read_acquires_each_new_write_and_nothing_else() {
    let (gm, f, a, off) = setup(false);
    // Each case: whether core 1's last look at the register was before the reset (in a run
    // of its own) rather than in this run, and whether core 0 writes the register again after
    // its publication.
    for (looked_before, write_again) in [(false, false), (false, true), (true, true)] {
        // A previous run in which core 1 saw the register's first write.
        f.reset(9, 0);
        f.reg_write(C0, 0, 1);
        f.reg_read(C1, 0, 1);
        f.reset(9, 0);
        if !looked_before {
            f.reg_write(C0, 0, 1);
            f.reg_read(C1, 0, 1);
        }
        let mut b = [0u8; 8];
        f.load(C1, a, off, &mut b, &gm);
        f.store(C0, a, off, &[7; 8], &gm);
        f.clean(C0, a, 8, &gm);
        f.fence(C0);
        if write_again {
            f.reg_write(C0, 0, 1);
        }
        f.reg_read(C1, 0, 1);
        f.load(C1, a, off, &mut b, &gm);
        let want: &[Missing] = if write_again { &[Missing::Invalidate] } else { &[] };
        assert_eq!(missing(&f), want, "looked before: {looked_before}, write again: {write_again}");
    }
}

/// A host read over several pages of line records reports the stale byte at the lowest
/// address, whichever page holds it.
#[test]
fn a_host_read_reports_its_lowest_stale_byte() {
    let (gm, f, a, off) = setup(false);
    f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
    // Two lines three pages apart (a page keeps 16 lines), the higher one stored first.
    f.store(CPU, a + 3 * 1024 + 16, off + 3 * 1024 + 16, &[3; 8], &gm);
    f.store(CPU, a + 40, off + 40, &[4; 8], &gm);
    let end = f.job_end(CPU, &gm);
    f.host_acquire(&end);
    let v = f.host_read(a, 4096).expect_err("two stale bytes");
    assert_eq!((v.addr, v.missing), (a + 40, Missing::AicpuClean));
    assert_eq!(f.host_read(a + 1024, 3072).map_err(|v| v.addr), Err(a + 3 * 1024 + 16));
}

/// The AICPU cluster reuses a dropped dirty copy for its next fill: the reused copy holds the
/// new line's memory and nothing of the old line (its bytes, dirty mask or origins).
#[test]
fn a_reused_cluster_copy_holds_only_its_own_line() {
    let (gm, f, a, off) = setup(false);
    f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
    f.host_write(a + 128, 64, |at, n| gm.write_bytes(off + at - a, &[6; 64][..n as usize]));
    let launch = LaunchState::new(1, 4, None);
    f.job_start(CPU, &f.host_release(), &launch);
    f.store(CPU, a, off, &[1; 64], &gm);
    f.clean(CPU, a, 64, &gm);
    f.fence(CPU);
    // The second line's copy is the first one's record, reused.
    f.store(CPU, a + 128, off + 128, &[2; 8], &gm);
    f.clean(CPU, a + 128, 64, &gm);
    f.fence(CPU);
    let mut line = [0u8; 64];
    gm.read_bytes(off + 128, &mut line);
    let mut want = [6u8; 64];
    want[..8].fill(2);
    assert_eq!(line, want, "the write-back carries the line's own bytes only");
    assert_eq!(missing(&f), []);
    let end = f.job_end(CPU, &gm);
    f.host_acquire(&end);
    assert_eq!(f.host_read(a, 256).map_err(|v| v.missing), Ok(()));
}

/// Every AICPU thread's copy of a line is dropped when the line changes under it — a core's
/// write-back, another AICPU thread's store — also a copy filled again after an earlier drop
/// (the line's record marks each fill's thread as a holder; a drop clears the mark). The
/// threads then read the new bytes, not their old copies.
#[test]
fn every_aicpu_copy_is_dropped_when_its_line_changes() {
    let (gm, f, a, off) = two_threads_two_cores();
    let mut b = [0u8; 8];
    for round in 1..=3u8 {
        // Both threads cache the line (again, after the last round dropped it).
        f.load(1, a, off, &mut b, &gm);
        f.load(2, a, off, &mut b, &gm);
        // Core 3 writes it back.
        f.store(3, a, off, &[round; 8], &gm);
        f.clean(3, a, 64, &gm);
        f.fence(3);
        f.reg_write(3, 0, 1);
        f.reg_read(1, 0, 1);
        f.reg_read(2, 0, 1);
        for t in [1, 2] {
            f.load(t, a, off, &mut b, &gm);
            assert_eq!(b, [round; 8], "round {round}: thread {t} reads the core's bytes");
        }
        // Thread 1 writes through; thread 2's copy goes.
        f.store(1, a, off, &[round + 10; 8], &gm);
        f.load(2, a, off, &mut b, &gm);
        assert_eq!(b, [round + 10; 8], "round {round}: thread 2 reads thread 1's store");
        // Core 3's next store is ordered after thread 1's.
        f.reg_write(1, 0, 0);
        f.reg_read(3, 0, 0);
        f.invalidate(3, a, 64, &gm);
    }
    assert_eq!(missing(&f), []);
}

#[test]
fn a_full_set_of_the_aicpu_cluster_makes_room_in_that_set_alone() {
    // One AICPU thread (1), one core; no random eviction. Lines 16 apart share a set of the
    // cluster's cache (`CLUSTER_SETS` sets of `capacity / CLUSTER_SETS` lines).
    let sets = super::model::CLUSTER_SETS as u64;
    let gm = Gm::new(1 << 20);
    let a = gm.alloc(64 * 1024, 1024).unwrap().0;
    let off = gm.offset_of(GmAddr(a), 64).unwrap();
    let f = Faithful::new(9, 0, false, 1, 1);
    f.set_aicpu_writes(AicpuWritePolicy::WriteBack);
    let per_set = (f.capacity / super::model::CLUSTER_SETS) as u64;
    let stride = 64 * sets;
    let in_memory = |k: u64| {
        let mut b = [0u8; 8];
        gm.read_bytes(off + k * stride, &mut b);
        b
    };
    // The set fills up, and a line of the next set is dirtied: nothing reaches memory.
    for k in 0..per_set {
        f.store(CPU, a + k * stride, off + k * stride, &[k as u8 + 1; 8], &gm);
    }
    f.store(CPU, a + 64, off + 64, &[99; 8], &gm);
    assert!((0..per_set).all(|k| in_memory(k) == [0; 8]), "a set below its capacity writes nothing back");
    // One more line of the full set: exactly one of that set's lines is written back.
    f.store(CPU, a + per_set * stride, off + per_set * stride, &[0xEE; 8], &gm);
    let back: Vec<u64> = (0..per_set).filter(|&k| in_memory(k) == [k as u8 + 1; 8]).collect();
    assert_eq!(back.len(), 1, "the full set made room by writing back one of its own lines: {back:?}");
    let mut other = [0u8; 8];
    gm.read_bytes(off + 64, &mut other);
    assert_eq!(other, [0; 8], "the other set's dirty line stays in the cluster");
    assert_eq!(missing(&f), vec![]);
}

/// A join of two vector clocks is their entrywise maximum as unsigned numbers, at every length
/// (whole vectors of eight and four entries and the rest after them) and for entries on both
/// sides of 2^31 (a signed comparison would take 2^31 for the smaller): whichever instruction
/// set the host's processor offers the join.
#[test]
fn a_join_is_the_entrywise_unsigned_maximum_at_every_length() {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Small clocks, clocks past 2^31 and the extremes.
        match x % 4 {
            0 => (x >> 40) as u32 % 100,
            1 => 0x8000_0000 + (x >> 40) as u32 % 100,
            2 => u32::MAX - (x >> 40) as u32 % 3,
            _ => (x >> 32) as u32,
        }
    };
    for n in 0..=80 {
        let a: Vec<u32> = (0..n).map(|_| next()).collect();
        let b: Vec<u32> = (0..n).map(|_| next()).collect();
        let mut joined = a.clone();
        super::model::join(&mut joined, &b);
        let want: Vec<u32> = a.iter().zip(&b).map(|(p, q)| *p.max(q)).collect();
        assert_eq!(joined, want, "length {n}");
    }
}

/// Two AICPU threads (agents 1 and 2: a scheduler and the device-side orchestrator) and one
/// core (agent 3), AICPU stores under `policy`, and a 4 KiB buffer: the GM, the model, the
/// buffer's address and its arena offset.
fn two_threads_one_core(policy: AicpuWritePolicy) -> (Gm, Faithful, u64, u64) {
    let gm = Gm::new(1 << 20);
    let a = gm.alloc(4096, 64).unwrap().0;
    let off = gm.offset_of(GmAddr(a), 64).unwrap();
    let f = Faithful::new(9, 0, false, 2, 1);
    assert_eq!(f.set_aicpu_writes(policy), policy);
    (gm, f, a, off)
}

/// Runs `held` on one thread, which the model holds at `point` when agent `agent` gets there,
/// and, once it is held, `during` on another. Lets the held thread go as soon as `during`
/// returned, or after 300 ms when `during` waits for it (`during` then returns after it). Both
/// are done when this returns `during`'s result. Whatever the machine's load, `during` runs
/// with the held thread stopped at `point` until it returns or blocks.
fn while_held<T: Send>(
    f: &Faithful,
    agent: u16,
    point: super::model::PausePoint,
    held: impl FnOnce() + Send,
    during: impl FnOnce() -> T + Send,
) -> T {
    f.held.arm(agent, point);
    std::thread::scope(|s| {
        let h = s.spawn(held);
        assert!(f.held.wait_reached(), "agent {agent} reached {point:?}");
        let (tx, rx) = std::sync::mpsc::channel();
        s.spawn(move || tx.send(during()).unwrap());
        let early = rx.recv_timeout(std::time::Duration::from_millis(300));
        f.held.release();
        let v = early.or_else(|_| rx.recv()).unwrap();
        h.join().unwrap();
        v
    })
}

/// Invariant: an AICPU clean returns only once every dirty byte of its range the cluster held
/// is in memory, even when another AICPU thread took the line out of the cluster to write it
/// back and is not done (on the device-side runtime the orchestrator's random eviction of a
/// scheduler's payload line, on another host thread). The interleaving is forced: thread 2 is
/// held inside its write-back of the line, after taking it out of its set, while thread 1
/// cleans the line and dispatches the core that reads it. A clean that passes then (the
/// cluster's line count fell before the bytes reached memory) lets the core read the bytes of
/// before the store, as the C AICore program once read the payload of two dispatches before.
#[test]
fn a_clean_waits_for_a_write_back_another_thread_has_in_flight() {
    let (gm, f, a, off) = two_threads_one_core(AicpuWritePolicy::WriteBack);
    let (f, gm) = (&f, &gm);
    f.store(1, a, off, &[7; 8], gm);
    // Thread 2 writes the line back (a clean here, as its random eviction would).
    let b = while_held(
        f,
        2,
        super::model::PausePoint::LineTaken,
        || f.clean(2, a, 64, gm),
        || {
            f.clean(1, a, 64, gm);
            f.fence(1);
            dispatch_from(f, 1);
            f.invalidate(3, a, 64, gm);
            let mut b = [0u8; 8];
            f.load(3, a, off, &mut b, gm);
            b
        },
    );
    assert_eq!((b, missing(f)), ([7; 8], vec![]), "the core read the payload as cleaned");
}

/// Invariant: a line's record and memory change together, so a fill never takes its bytes'
/// origins from a record that is ahead of memory. Forced: thread 2 is held inside its
/// write-back of thread 1's line after the record says memory holds the store, while the core
/// (not ordered after the store: either value is allowed) fills the line. Whatever it reads,
/// the bytes must be what the origins its copy was given say.
#[test]
fn a_fill_never_sees_a_line_record_ahead_of_memory() {
    let (gm, f, a, off) = two_threads_one_core(AicpuWritePolicy::WriteBack);
    let (f, gm) = (&f, &gm);
    f.store(1, a, off, &[7; 8], gm);
    let (b, writer) = while_held(
        f,
        2,
        super::model::PausePoint::RecordWritten,
        || f.clean(2, a, 64, gm),
        || {
            let mut b = [0u8; 8];
            f.load(3, a, off, &mut b, gm);
            let origin = super::model::lock(&f.agents[3]).cache[&a].origin.get(0);
            (b, origin.agent())
        },
    );
    let said = if writer == 1 { [7; 8] } else { [0; 8] };
    assert_eq!(b, said, "the core's copy holds the bytes its origins name (writer {writer})");
    assert_eq!(missing(f), vec![]);
}

/// Invariant: an AICPU thread's own copy of a line never outlives another AICPU thread's store
/// to that line (one coherent cluster: no AICPU thread ever needs to invalidate for another's
/// stores). Forced: thread 2 is held in its load of the line's second word, after it found the
/// line not in the cluster and before it fills its own copy, while thread 1 stores the line's
/// first word (false sharing). A store that passes then drops no copy (there is none yet), the
/// copy filled after it holds the line of before it, and once thread 1's clean has taken the
/// cluster's line to memory, thread 2 would read its stale copy.
#[test]
fn an_aicpu_fill_never_outlives_a_store_to_its_line_by_another_thread() {
    let (gm, f, a, off) = two_threads_one_core(AicpuWritePolicy::WriteBack);
    let (f, gm) = (&f, &gm);
    while_held(
        f,
        2,
        super::model::PausePoint::ClusterMissed,
        || f.load(2, a + 8, off + 8, &mut [0u8; 8], gm),
        || f.store(1, a, off, &[7; 8], gm),
    );
    f.clean(1, a, 64, gm);
    f.fence(1);
    let mut b = [0u8; 8];
    f.load(2, a, off, &mut b, gm);
    assert_eq!((b, missing(f)), ([7; 8], vec![]), "thread 2 reads thread 1's store");
}

/// Invariant: what an AICPU thread reads through its own copy is never older than another
/// AICPU thread's store that is already in memory (write-through policy: one coherent
/// cluster, whose stores drop the other threads' copies). Forced: thread 1's store is held
/// after it reached memory and the line's record, before it drops thread 2's copy, while
/// thread 2 reads the stored bytes through the copy it filled before. The model's AICPU threads
/// share what they know at every access, so thread 2 counts as ordered after the store; its
/// copy is the one about to be dropped, and reading it would be a stale read no program could
/// prevent (no AICPU thread invalidates for another's stores).
#[test]
fn an_aicpu_copy_a_store_is_about_to_drop_is_never_read() {
    let (gm, f, a, off) = two_threads_one_core(AicpuWritePolicy::WriteThrough);
    let (f, gm) = (&f, &gm);
    let mut b = [0u8; 8];
    f.load(2, a, off, &mut b, gm);
    let b = while_held(
        f,
        1,
        super::model::PausePoint::StoreLanded,
        || f.store(1, a, off, &[7; 8], gm),
        || {
            let mut b = [0u8; 8];
            f.load(2, a, off, &mut b, gm);
            b
        },
    );
    assert_eq!((b, missing(f)), ([7; 8], vec![]), "thread 2 reads the store in memory");
}

/// AICPU thread `t` dispatches to core 0 (agent 3 in a model of two threads): DMB of core 0.
fn dispatch_from(f: &Faithful, t: u16) {
    f.reg_write(t, 0, 0);
    f.reg_read(3, 0, 0);
}

/// Invariant: host DMA changes a line's memory and its record together, so a fill never takes
/// the host's new bytes under the line's old origins (the dual of
/// [`a_fill_never_sees_a_line_record_ahead_of_memory`]). Forced: the host is held inside its
/// DMA of a line, after writing the line's memory, while a core (not ordered after the DMA:
/// either value is allowed) fills the line. Whatever it reads, the bytes must be what the
/// origins its copy was given say: a copy of the new bytes under the old origins would be
/// judged as the line of before the DMA.
#[test]
fn a_fill_never_sees_host_dma_bytes_under_their_old_origins() {
    let (gm, f, a, off) = two_threads_one_core(AicpuWritePolicy::WriteBack);
    let (f, gm) = (&f, &gm);
    let (b, writer) = while_held(
        f,
        super::HOST,
        super::model::PausePoint::HostWrote,
        || f.host_write(a, 64, |at, n| gm.write_bytes(off + at - a, &[5; 64][..n as usize])),
        || {
            let mut b = [0u8; 8];
            f.load(3, a, off, &mut b, gm);
            let origin = super::model::lock(&f.agents[3]).cache[&a].origin.get(0);
            (b, origin.agent())
        },
    );
    let said = if writer == super::HOST { [5; 8] } else { [0; 8] };
    assert_eq!(b, said, "the core's copy holds the bytes its origins name (writer {writer})");
    assert_eq!(missing(f), vec![]);
}

/// An agent whose own clock entry reached the limit of its 32 bits fails the launch it starts
/// by name, with the model's status, instead of letting the entry wrap during the run (a wrap
/// would make old stores look unpublished and unpublished ones look published); one below
/// the limit starts as usual.
#[test]
fn a_clock_at_its_limit_fails_the_launch_by_name() {
    use crate::launch::MODEL_LIMIT_STATUS;
    use crate::{CLOCK_LIMIT, SimError};
    use pto_inproc::Launch;
    for (own, fails) in [(CLOCK_LIMIT - 1, false), (CLOCK_LIMIT, true), (u32::MAX - 5, true)] {
        let (_gm, f, _, _) = setup(false);
        super::model::lock(&f.agents[C0 as usize]).vc[C0 as usize] = own;
        let launch = LaunchState::new(1, 4, None);
        f.job_start(C0, &f.host_release(), &launch);
        match launch.failure() {
            Some(SimError::DeviceFault { status, message: Some(m) }) if fails => {
                assert_eq!(status, MODEL_LIMIT_STATUS);
                assert!(m.contains("clocks are exhausted") && m.contains(&own.to_string()), "{m}");
            }
            None if !fails => {}
            other => panic!("entry {own}: {other:?}"),
        }
    }
}
