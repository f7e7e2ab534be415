//! The broken twins of the core-ownership protocol's steps, for the breakage suites and the
//! loom models' reproducers: each is a whole step with one bug (or one injected fault),
//! entered from the first line of the correct step when its switch is active
//! ([`seam!`](crate::seam)). Compiled with the `breakage` feature only.

use pto_hal::{AicoreAgent, AicoreLaunch, AicpuAgent, GmAddr, GmMemory};
use zerocopy::IntoBytes;

use super::{REPORT_EPOCH, RunMap, read_config_as_is, read_report, report_of};
use crate::layout::{Handshake, LaunchConfig, offsets};

/// `SKIP_HOST_INVALIDATE` and `INVALIDATE_AT_END`: [`read_config`](super::read_config)
/// without making the host's write visible first (the first read of a slot may see a stale
/// configuration on a host-non-coherent chip).
pub(super) fn read_config_unobserved<A: GmMemory>(a: &A, desc: GmAddr) -> LaunchConfig {
    read_config_as_is(a, desc)
}

/// `SKIP_REPORT_PUBLISH`: [`report`](super::report) that never writes its handshake line back,
/// so an AICPU on a non-coherent path never sees the report.
pub(super) fn report_unpublished<A: AicoreAgent>(a: &A, map: &RunMap, launch: &AicoreLaunch) {
    let at = map.handshake(launch.block_idx);
    a.write(at, report_of(launch).as_bytes());
    a.store_store();
    a.write(at.offset(REPORT_EPOCH), &map.cfg.epoch.to_le_bytes());
    a.send_event();
}

/// `GATE_ANY_EPOCH`: a core leaves its gate on any release value, not only its own run's epoch
/// (a RELEASE an earlier run left lets it return before this run's AICPU closed it).
pub(super) fn is_any_release(v: u64, epoch: u64) -> bool {
    v == epoch || (v != 0 && v & (1 << 63) == 0)
}

/// `SHARED_HANDSHAKE_LINE`: [`poll_report`](super::poll_report) as the reference lays the line
/// out: after accepting a report the AICPU writes a word of the core's handshake line (two
/// writers of one cached line).
pub(super) fn poll_report_sharing_the_line<A: AicpuAgent>(a: &A, map: &RunMap, w: u32) -> Option<Handshake> {
    let hs = read_report(a, map, w)?;
    let task = map.handshake(w).offset(core::mem::offset_of!(Handshake, reserved) as u64);
    a.write(task, &map.payload(w, 0).0.to_le_bytes());
    a.flush_range(task, 8);
    Some(hs)
}

/// Fault injection (`STALL_RETIRE`, `STALL_RETIRE_LONG`): the AICPU thread stalls while it
/// owns cores that acknowledged EXIT — until a fault is latched (`STALL_RETIRE`), or for four
/// core wait budgets (`STALL_RETIRE_LONG`; also the bound of the former). Nothing when neither
/// switch is on.
pub(super) fn stall_if_injected<A: AicpuAgent>(a: &A, map: &RunMap) {
    if !crate::breakage::broken(crate::breakage::STALL_RETIRE | crate::breakage::STALL_RETIRE_LONG) {
        return;
    }
    let until = a.now_ticks().saturating_add(map.cfg.core_wait_ticks.saturating_mul(4));
    let claimed = map.desc.offset(offsets::FATAL_CLAIMED);
    let long = crate::breakage::broken(crate::breakage::STALL_RETIRE_LONG);
    let mut backoff = crate::backoff::Backoff::new();
    loop {
        let now = a.now_ticks();
        let seen = a.query(claimed);
        if now >= until || (seen != 0 && !long) {
            return;
        }
        backoff.wait_word(a, claimed, seen, until);
    }
}
