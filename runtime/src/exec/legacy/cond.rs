//! The completion decision: what a core's COND value says about its running and pending
//! dispatches.

use crate::layout::regs;

/// One subtask on a core: a block of one lane of one task, under a dispatch id.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Sub {
    /// Task id.
    pub task: u32,
    /// SPMD block.
    pub block: u32,
    /// Lane index: 0 = AIC, 1 = AIV lane 0, 2 = AIV lane 1.
    pub lane: u8,
    /// Dispatch id written to DMB.
    pub reg: u32,
}

/// What a COND value means for a core's two slots.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// The running subtask finished.
    pub running_done: bool,
    /// The pending subtask finished too.
    pub pending_done: bool,
    /// The pending subtask is now the running one.
    pub promote: bool,
    /// The running subtask was acknowledged.
    pub running_acked: bool,
}

/// Decide slot transitions from a COND value, given the dispatch ids in the running and
/// pending slots. The four cases:
///
/// 1. COND names the pending id: the core finished the running one and moved on. FIN → both
///    done (idle); ACK → running done, pending promoted (and acknowledged).
/// 2. COND names the running id with FIN: running done; a pending one is promoted.
/// 3. COND names the running id with ACK: running acknowledged (the pending slot may be used).
/// 4. Anything else (IDLE, a stale id): nothing changed.
pub fn decide(cond: u32, running: Option<u32>, pending: Option<u32>) -> Decision {
    let id = cond & 0x7FFF_FFFF;
    let fin = cond & regs::COND_FIN != 0;
    let mut d = Decision::default();
    if pending == Some(id) {
        d.running_done = running.is_some();
        if fin {
            d.pending_done = true;
        } else {
            d.promote = true;
            d.running_acked = true;
        }
    } else if running == Some(id) {
        if fin {
            d.running_done = true;
            d.promote = pending.is_some();
        } else {
            d.running_acked = true;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::regs::{ack, fin};

    #[test]
    fn the_four_completion_cases() {
        // Case 1: pending id seen with FIN: both done.
        assert_eq!(
            decide(fin(6), Some(5), Some(6)),
            Decision { running_done: true, pending_done: true, promote: false, running_acked: false }
        );
        // Case 1': pending id seen with ACK: running done, pending promoted and acknowledged.
        assert_eq!(
            decide(ack(6), Some(5), Some(6)),
            Decision { running_done: true, pending_done: false, promote: true, running_acked: true }
        );
        // Case 2: running FIN with a pending: running done, pending promoted (not yet acked).
        assert_eq!(
            decide(fin(5), Some(5), Some(6)),
            Decision { running_done: true, pending_done: false, promote: true, running_acked: false }
        );
        // Case 2': running FIN, nothing pending: core idle.
        assert_eq!(decide(fin(5), Some(5), None), Decision { running_done: true, ..Decision::default() });
        // Case 3: running ACK: only the acknowledgement.
        assert_eq!(decide(ack(5), Some(5), None), Decision { running_acked: true, ..Decision::default() });
        // Case 4: idle or stale values change nothing.
        assert_eq!(decide(regs::COND_IDLE, Some(5), None), Decision::default());
        assert_eq!(decide(fin(3), Some(5), Some(6)), Decision::default());
    }
}
