//! The broken twins of the args-dump lane's steps, for the breakage suites and the loom models'
//! reproducers: each is a whole step with one bug, entered from the first line of the correct
//! step when its switch is active ([`seam!`](crate::seam)). Compiled with the `breakage`
//! feature only.

use pto_hal::AicpuAgent;

use super::lane::GmLane;

/// `SKIP_DUMP_CLEAN`: publish buffer `b` without writing back its payload bytes and record
/// lines (the host reads memory, so on a2a3 it would read stale bytes). To force the
/// interleaving in which the host reads them dirty, the lane then waits, up to a second,
/// until the host gave a buffer back.
pub(super) fn publish_unclean<A: AicpuAgent>(lane: &mut GmLane<'_, A>, b: u32) -> bool {
    lane.write_entry(b);
    lane.retire_buffer();
    lane.store_ready_tail(lane.ready_tail());
    if crate::breakage::forcing() {
        lane.wait_for_a_freed_buffer(1_000_000);
    }
    true
}

/// `DUMP_TAIL_FIRST`: publish buffer `b` storing the lane's ready tail before the ready entry
/// it hands over (the host may take the entry before it is written: a stale buffer index,
/// count and end).
pub(super) fn publish_tail_first<A: AicpuAgent>(lane: &mut GmLane<'_, A>, b: u32) -> bool {
    lane.clean(b);
    lane.store_ready_tail(lane.ready_tail() + 1);
    lane.write_entry(b);
    lane.retire_buffer();
    true
}
