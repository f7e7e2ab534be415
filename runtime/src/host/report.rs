//! What a run reports: the counters, executor and capture figures read back from the
//! descriptor after the fence, and the trace when it was on.

use std::string::ToString;
use std::time::Duration;

use pto_hal::{DeviceMemory, GmAddr};

use super::Error;
use super::error::platform;

/// What a completed run reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunReport {
    /// The run's epoch.
    pub epoch: u64,
    /// Tasks completed.
    pub tasks: u64,
    /// Subtasks dispatched to cores (on the resident executor: kernels the cores found in
    /// their dispatch slots and ran; dummy and skipped tasks are not counted).
    pub dispatched: u64,
    /// Cores that handshook.
    pub cores: u64,
    /// Cores released through their gates.
    pub released: u64,
    /// Host wall time from launch to the completion fence.
    pub wall: Duration,
    /// Device-side runtime: how long the orchestration function ran on the device (its
    /// submission time, overlapped with execution). `None` on the host-built graph, whose
    /// submission is the graph build ([`Graph::build_time`](super::Graph::build_time)).
    pub orchestration: Option<Duration>,
    /// Device-side runtime: how much of [`orchestration`](Self::orchestration) it waited in
    /// flow control, for room in a ring or in the tensor map. The rest is its own work, its
    /// waits for tensor data it reads, and the time other agents held the host's processors
    /// (on the simulator). `None` on the host-built graph.
    pub orchestration_flow_wait: Option<Duration>,
    /// Pipeline slot used.
    pub slot: usize,
    /// The run's swimlane trace, when [`RunConfig::trace`](super::RunConfig::trace) was on.
    pub trace: Option<super::Trace>,
    /// What the args dump wrote, when [`RunConfig::dump`](super::RunConfig::dump) was on.
    pub dump: Option<super::dump::DumpReport>,
    /// The executor that ran the graph: [`Executor::Legacy`](super::Executor::Legacy) or
    /// [`Executor::Resident`](super::Executor::Resident) (never `Auto`).
    pub executor: super::Executor,
    /// Why the run was on the legacy executor (`None` on the resident one).
    pub legacy_reason: Option<super::LegacyReason>,
    /// The resident route's boundary capture, when the run was resident with the dump on.
    pub capture: Option<CaptureReport>,
    /// The schedule-independent checks the device ran on this run (`docs/sanitizers.md`);
    /// a run they found something in fails instead of reporting.
    pub checks: pto_hal::check::Checks,
}

/// What the resident route's boundary capture did in one run (the counters of its control
/// region, read back after the run; `docs/args-dump.md`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaptureReport {
    /// Bytes of control storage the run reserved (slots, occupancies, request and
    /// acknowledgement lines).
    pub region_bytes: u64,
    /// Phases the cores requested (one per task boundary that records something). Each core
    /// adds its count when it leaves the run: a core that never left (stuck in a kernel) is
    /// not counted.
    pub requests: u64,
    /// Rendezvous slots claimed: one per task of several participants (a gang) that entered a
    /// boundary. A task of one participant meets no peer and claims no slot.
    pub claims: u64,
    /// Service steps that copied or committed something.
    pub steps: u64,
    /// WOULD_BLOCK answers (a full arena, no free buffer, or the lane's reservation open for
    /// another core); none of them is a dropped record.
    pub would_block: u64,
    /// Most payload bytes one service step copied.
    pub largest_step: u64,
    /// The bound on one step's payload bytes.
    pub max_step: u64,
    /// Records begun for a request while an earlier-observed request of the same AICPU thread
    /// was waiting: 0 when every thread serves in order of first observation (as it does).
    pub overtakes: u64,
    /// Answers (WOULD_BLOCK) given to other cores' requests while a reservation was open
    /// between two of its steps: the service goes on answering while it copies a large
    /// argument.
    pub answered_while_open: u64,
    /// Phases the AICPU threads answered ABORTED (a participant's budget ran out).
    pub aborts_answered: u64,
    /// Participants — the publisher and every peer — that took an ABORTED answer as the end of
    /// their phase (the others left unacknowledged, at the end of their own budgets).
    pub aborts_taken: u64,
    /// Rendezvous slots left neither FREE nor SETTLED at the end (0 after a completed run).
    pub unsettled_slots: u64,
}

pub(super) fn collect_error<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(
    e: super::dump::CollectError<E>,
) -> Error {
    match e {
        super::dump::CollectError::Io(e) => Error::DumpFiles { path: "args dump directory".into(), why: e.to_string() },
        super::dump::CollectError::Device(e) => Error::platform("args-dump collection", e),
    }
}

/// Read back the counters and slot states of a resident run's capture region.
pub(super) fn capture_report<D: DeviceMemory>(
    dev: &D,
    cfg: &crate::layout::LaunchConfig,
) -> Result<Option<CaptureReport>, Error>
where
    D::Error: std::error::Error + Send + Sync + 'static,
{
    use crate::layout::{CaptureLayout, capture_header as h, capture_slot};
    let Some(l) = CaptureLayout::of(cfg) else { return Ok(None) };
    let mut b = std::vec![0u8; l.bytes() as usize];
    dev.copy_d2h(&mut b, GmAddr(l.base)).map_err(platform("capture region read-back"))?;
    let word = |at: u64| {
        let o = (at - l.base) as usize;
        u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
    };
    let unsettled = (0..l.clusters)
        .flat_map(|c| (0..3).map(move |lane| (c, lane)))
        .filter(|&(c, lane)| {
            let (state, _) = capture_slot::fields(word(l.slot(c, lane)));
            state != capture_slot::FREE && state != capture_slot::SETTLED
        })
        .count() as u64;
    Ok(Some(CaptureReport {
        region_bytes: l.bytes(),
        requests: word(l.header(h::REQUESTS)),
        claims: word(l.header(h::CLAIMS)),
        steps: word(l.header(h::SERVED)),
        would_block: word(l.header(h::WOULD_BLOCK)),
        largest_step: word(l.header(h::LARGEST_STEP)),
        max_step: word(l.header(h::MAX_BYTES)),
        overtakes: word(l.header(h::OVERTAKES)),
        answered_while_open: word(l.header(h::ANSWERED_WHILE_OPEN)),
        aborts_answered: word(l.header(h::ABORTS_ANSWERED)),
        aborts_taken: word(l.header(h::ABORTS_TAKEN)),
        unsettled_slots: unsettled,
    }))
}
