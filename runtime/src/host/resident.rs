//! Which executor runs a graph, and the resident executor's initial scheduler state.
//!
//! The host decides before the launch and writes its choice into the launch descriptor
//! ([`LaunchConfig::executor`](crate::layout::LaunchConfig::executor), with the reason when the
//! run is on the legacy executor). For the resident executor it also writes the scheduler
//! state ([`ResidentLayout`]): every task's fan-in, subtask and home words, the clusters'
//! inboxes sized exactly and seeded with the blocks of the tasks that wait for nothing.

use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;
use std::vec::Vec;

use crate::layout::{
    CaptureLayout, ENTRY_DUMMY, ENTRY_GANG, HOME_DUMMY, ImageError, ImageView, RESIDENT_MAX_ENTRIES, ResidentLayout,
    Shape, TaskRecord, args_flags, capture_header, entry_word, executor_mode, home_fields, home_word, inbox_class,
    lanes, legacy_reason,
};

/// Which executor runs a host-built graph ([`RunConfig::executor`](super::RunConfig::executor)).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Executor {
    /// The faster executor that can run the graph: the resident one on a chip; the legacy one
    /// on a platform whose cores share the host's processors with the AICPU threads (the
    /// simulator: [`LegacyReason::SharedHost`]), or when the resident one cannot run the graph.
    /// [`RunReport::legacy_reason`](super::RunReport::legacy_reason) says why a run is legacy.
    #[default]
    Auto,
    /// The AICPU threads dispatch every subtask to the cores.
    Legacy,
    /// The cores schedule themselves: they take ready tasks from lists in GM, run them and
    /// release their consumers; the AICPU launches, supervises and tears down. A graph it
    /// cannot run is refused ([`ConfigError::ResidentRefused`](super::ConfigError::ResidentRefused) naming the task).
    Resident,
}

impl Executor {
    /// The name the command lines use: `auto`, `legacy` or `resident`.
    pub fn name(self) -> &'static str {
        match self {
            Executor::Auto => "auto",
            Executor::Legacy => "legacy",
            Executor::Resident => "resident",
        }
    }
}

impl fmt::Display for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a run is on the legacy executor.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LegacyReason {
    /// [`Executor::Legacy`] was asked for.
    Requested,
    /// The device-side runtime schedules from its rings on the AICPU.
    DeviceSideRuntime,
    /// The graph has more blocks than the resident executor's scheduler state holds
    /// ([`RESIDENT_MAX_ENTRIES`](crate::layout::RESIDENT_MAX_ENTRIES) over the whole graph).
    TooManyBlocks {
        /// The task whose blocks passed the limit.
        task: u32,
    },
    /// The graph has a task whose blocks must start together.
    SyncStart {
        /// The first such task.
        task: u32,
    },
    /// The host could not read its own graph image back. The host now checks the image it
    /// emits when it builds the graph (a failed check fails the build), so it no longer
    /// reports this; the variant decodes descriptors of hosts that did.
    Unreadable,
    /// The args dump is on and a task has more than one block: the resident route captures
    /// a task's boundaries at one dispatch (one block on one cluster), and a task spread over
    /// several clusters has no such dispatch.
    ArgsDumpBlocks {
        /// The first such task.
        task: u32,
    },
    /// [`Executor::Auto`] on a platform whose cores run on the host's processors beside its
    /// AICPU threads (the simulator). There the resident executor's scheduling work, which
    /// it moves onto the cores, is not saved but shared with the kernels, and the legacy
    /// executor is measured the faster (`docs/runtimes.md` §9).
    SharedHost,
}

impl LegacyReason {
    /// The reason and its task as the descriptor stores them.
    pub(crate) fn code(self) -> (u32, u32) {
        match self {
            LegacyReason::Requested => (legacy_reason::REQUESTED, u32::MAX),
            LegacyReason::DeviceSideRuntime => (legacy_reason::DEVICE_SIDE_RUNTIME, u32::MAX),
            LegacyReason::TooManyBlocks { task } => (legacy_reason::TOO_MANY_BLOCKS, task),
            LegacyReason::SyncStart { task } => (legacy_reason::SYNC_START, task),
            LegacyReason::ArgsDumpBlocks { task } => (legacy_reason::ARGS_DUMP_BLOCKS, task),
            LegacyReason::Unreadable => (legacy_reason::UNREADABLE, u32::MAX),
            LegacyReason::SharedHost => (legacy_reason::SHARED_HOST, u32::MAX),
        }
    }

    /// The reason a descriptor stores, `None` for "none" or an unknown value.
    pub(crate) fn from_code(code: u32, task: u32) -> Option<LegacyReason> {
        Some(match code {
            legacy_reason::REQUESTED => LegacyReason::Requested,
            legacy_reason::DEVICE_SIDE_RUNTIME => LegacyReason::DeviceSideRuntime,
            legacy_reason::TOO_MANY_BLOCKS => LegacyReason::TooManyBlocks { task },
            legacy_reason::SYNC_START => LegacyReason::SyncStart { task },
            legacy_reason::ARGS_DUMP_BLOCKS => LegacyReason::ArgsDumpBlocks { task },
            legacy_reason::UNREADABLE => LegacyReason::Unreadable,
            legacy_reason::SHARED_HOST => LegacyReason::SharedHost,
            _ => return None,
        })
    }
}

impl fmt::Display for LegacyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LegacyReason::Requested => f.write_str("the legacy executor was requested"),
            LegacyReason::DeviceSideRuntime => f.write_str(
                "the device-side runtime schedules on the AICPU (the resident executor runs host-built graphs)",
            ),
            LegacyReason::TooManyBlocks { task } => write!(
                f,
                "the graph's blocks pass {} at task {task}, more than the resident executor's scheduler state holds",
                crate::layout::RESIDENT_MAX_ENTRIES
            ),
            LegacyReason::SyncStart { task } => {
                write!(f, "task {task} needs its blocks to start together, which the resident executor does not do")
            }
            LegacyReason::Unreadable => f.write_str("the host could not read its own graph image back"),
            LegacyReason::ArgsDumpBlocks { task } => write!(
                f,
                "the args dump is on and task {task} has more than one block: the resident executor captures a task's boundaries at a single dispatch, not across clusters",
            ),
            LegacyReason::SharedHost => f.write_str(
                "auto: this platform's cores share the host's processors with its AICPU threads, where the legacy executor is the faster",
            ),
        }
    }
}

/// The executor chosen for one run, as the descriptor will say it.
pub(crate) struct Choice {
    /// [`executor_mode`] value.
    pub(crate) mode: u32,
    /// Why the legacy executor, if it is.
    pub(crate) reason: Option<LegacyReason>,
    /// The resident state to write.
    pub(crate) state: Option<Arc<InitialState>>,
    /// The boundary-capture control region's initial bytes (laid out from offset 0), when
    /// the dump is on; it follows the state in GM.
    pub(crate) capture: Option<Vec<u8>>,
}

/// What the resident route's boundary capture needs from the run's dump configuration.
#[derive(Copy, Clone, Debug)]
pub(crate) struct CaptureParams {
    /// The dump level.
    pub(crate) level: crate::dump::DumpLevel,
    /// Most payload bytes per service step.
    pub(crate) max_bytes: u64,
    /// A participant's wait budget at a boundary, in ticks.
    pub(crate) budget: u64,
}

/// What the host decides about a host-built graph once, when it builds it, from the image it
/// emitted (read through [`ImageView`], the reader the device uses too): the edges (for traces
/// and the checks), whether the resident executor can run it, and the resident executor's
/// initial state for each cluster count a run has asked for (built from the image's task
/// records, which the plan does not copy).
pub(crate) struct Plan {
    /// Why the resident executor cannot run the graph, if it cannot.
    resident: Result<(), LegacyReason>,
    /// The first task with more than one block (the resident route's dump refuses it).
    first_multi_block: Option<u32>,
    /// Initial states built so far, by cluster count (a graph is usually run with one).
    states: Mutex<Vec<(u32, Arc<InitialState>)>>,
}

/// The resident executor's scheduler state at the start of a run, laid out from offset 0.
pub(crate) struct InitialState {
    pub(crate) bytes: Vec<u8>,
    /// Inbox entries ([`ResidentLayout::entries`]).
    pub(crate) entries: u32,
}

impl Plan {
    /// The plan of the host-built graph `image`; `Err` when the image fails the device's own
    /// checks (a defect of the host's emitter, reported rather than uploaded).
    pub(crate) fn of(image: &[u8]) -> Result<Plan, ImageError> {
        let checked = ImageView::open(image, image.len() as u64)?.validate()?;
        let mut blocks = 0u64;
        let mut resident = Ok(());
        for (i, (t, (_, args))) in checked.tasks.iter().zip(&checked.args).enumerate() {
            let task = i as u32;
            blocks += t.block_num as u64;
            if blocks > RESIDENT_MAX_ENTRIES as u64 {
                resident = Err(LegacyReason::TooManyBlocks { task });
                break;
            }
            if args.flags & args_flags::SYNC_START != 0 {
                resident = Err(LegacyReason::SyncStart { task });
                break;
            }
        }
        let first_multi_block = checked.tasks.iter().position(|t| t.block_num > 1).map(|t| t as u32);
        // Neither the task records nor the edges are kept: the image has them, the resident
        // initial state reads the records from it and [`Plan::edges`] the edges.
        Ok(Plan { resident, first_multi_block, states: Mutex::new(Vec::new()) })
    }

    /// The producer → consumer edges of the graph whose image is `image` (the one the plan
    /// was made of), in task order, read from its fan-out lists: for a traced or checked run.
    pub(crate) fn edges(image: &[u8]) -> Vec<(u32, u32)> {
        let checked = ImageView::open(image, image.len() as u64).and_then(|v| v.validate());
        debug_assert!(checked.is_ok(), "the image the plan was made of opens");
        checked.map(|c| c.edges().collect()).unwrap_or_default()
    }

    /// Host bytes the plan holds: the resident initial states built so far (capacities, not
    /// lengths).
    pub(crate) fn host_bytes(&self) -> usize {
        let states = self.states.lock();
        states.capacity() * core::mem::size_of::<(u32, Arc<InitialState>)>()
            + states.iter().map(|(_, s)| s.bytes.capacity() + core::mem::size_of::<InitialState>() + 16).sum::<usize>()
    }

    /// The initial state over `clusters` clusters of the graph whose image is `image` (the one
    /// the plan was made of), built on the first run that asks for it.
    fn state(&self, image: &[u8], clusters: u32) -> Arc<InitialState> {
        let mut states = self.states.lock();
        if let Some((_, s)) = states.iter().find(|(c, _)| *c == clusters) {
            return s.clone();
        }
        // The image was checked when the plan was made of it.
        let tasks = ImageView::open(image, image.len() as u64).map(|v| v.tasks());
        debug_assert!(tasks.is_ok(), "the image the plan was made of opens");
        let tasks = tasks.unwrap_or_default();
        let (bytes, entries) = initial_state(&tasks, clusters);
        let s = Arc::new(InitialState { bytes, entries });
        states.push((clusters, s.clone()));
        s
    }
}

/// What the configuration's checker decided about a run's executor (before any state is
/// built): the legacy executor and why, or the resident one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The legacy executor, in `mode`, for `reason`.
    Legacy {
        /// Why.
        reason: LegacyReason,
        /// The descriptor's executor mode.
        mode: u32,
    },
    /// The resident executor.
    Resident,
}

/// Decide the executor of the host-built graph `plan` describes under `asked`, with the args
/// dump on or off (`dump`), on a platform whose cores share the host's processors
/// (`shared_host`) or not. `Err` is the reason an explicit [`Executor::Resident`] cannot be
/// honoured. Under [`Executor::Auto`] a reason of the graph's own comes before the platform's.
pub(crate) fn decide(asked: Executor, plan: &Plan, dump: bool, shared_host: bool) -> Result<Decision, LegacyReason> {
    let legacy = |reason: LegacyReason, mode: u32| Decision::Legacy { reason, mode };
    if asked == Executor::Legacy {
        return Ok(legacy(LegacyReason::Requested, executor_mode::LEGACY_GRAPH));
    }
    let refuse = |reason: LegacyReason, mode: u32| {
        if asked == Executor::Resident { Err(reason) } else { Ok(legacy(reason, mode)) }
    };
    if let Err(reason) = plan.resident {
        return refuse(reason, executor_mode::LEGACY_UNSUPPORTED_SHAPE);
    }
    if dump && let Some(task) = plan.first_multi_block {
        return refuse(LegacyReason::ArgsDumpBlocks { task }, executor_mode::LEGACY_GRAPH);
    }
    if asked == Executor::Auto && shared_host {
        return Ok(legacy(LegacyReason::SharedHost, executor_mode::LEGACY_GRAPH));
    }
    Ok(Decision::Resident)
}

impl Choice {
    /// The choice `decision` made for the host-built graph `plan` describes (whose image is
    /// `image`), over `clusters` clusters, with the boundary capture `dump` when the dump is on.
    pub(crate) fn of(
        decision: Decision,
        plan: &Plan,
        image: &[u8],
        dump: Option<CaptureParams>,
        clusters: u32,
    ) -> Choice {
        match decision {
            Decision::Legacy { reason, mode } => Choice::legacy(reason, mode),
            Decision::Resident => Choice::resident(plan, image, dump, clusters),
        }
    }

    /// The legacy executor in `mode`, for `reason`: nothing to write.
    pub(crate) fn legacy(reason: LegacyReason, mode: u32) -> Choice {
        Choice { mode, reason: Some(reason), state: None, capture: None }
    }

    /// The resident executor for the host-built graph `plan` describes (whose image is
    /// `image`) over `clusters` clusters, with its boundary capture when the dump is on: its
    /// initial state (built on the first run over `clusters`) and capture region.
    fn resident(plan: &Plan, image: &[u8], dump: Option<CaptureParams>, clusters: u32) -> Choice {
        let capture = dump.map(|p| {
            let l = CaptureLayout { base: 0, clusters };
            let mut bytes = std::vec![0u8; l.bytes() as usize];
            let mut put = |w: u64, v: u64| {
                let o = l.header(w) as usize;
                bytes[o..o + 8].copy_from_slice(&v.to_le_bytes())
            };
            put(capture_header::LEVEL, u32::from(p.level) as u64);
            put(capture_header::MAX_BYTES, p.max_bytes);
            put(capture_header::BUDGET, p.budget);
            bytes
        });
        Choice {
            mode: executor_mode::RESIDENT_PENDING,
            reason: None,
            state: Some(plan.state(image, clusters)),
            capture,
        }
    }
}

/// The inbox class of a task and the class its home word records.
fn class_of(t: &TaskRecord) -> (u32, u32) {
    if t.shape == Shape::Mix as u8 {
        (inbox_class::GANG, inbox_class::GANG)
    } else if t.shape == Shape::Aic as u8 {
        (inbox_class::AIC, inbox_class::AIC)
    } else if t.shape == Shape::Dummy as u8 {
        (inbox_class::AIV, HOME_DUMMY)
    } else {
        (inbox_class::AIV, inbox_class::AIV)
    }
}

/// Subtasks of one block of `t`: one per active lane of a MIX task, else one.
pub(crate) fn subtasks_per_block(t: &TaskRecord) -> u32 {
    if t.shape == Shape::Mix as u8 { (t.lanes & lanes::MIX).count_ones().max(1) } else { 1 }
}

/// The resident state at the start of a run over `clusters` clusters (laid out from offset
/// 0), and its entry count. Each class's blocks are dealt to the clusters in turn (a task's
/// block `b` is homed one cluster after block `b - 1`), which sizes every inbox exactly; the
/// tasks that wait for nothing are in their home inboxes, in task order; every fan-in and
/// subtask count is full; nothing is completed, no slot is published, no cluster is idle; the
/// stocked masks mark the inboxes that hold a root.
fn initial_state(tasks: &[TaskRecord], clusters: u32) -> (Vec<u8>, u32) {
    let k_n = 3usize;
    let mut rr = [0u64; 3];
    let mut homes = Vec::with_capacity(tasks.len());
    let mut cap = std::vec![0u32; clusters as usize * k_n];
    for t in tasks {
        let (k, home_class) = class_of(t);
        let home = (rr[k as usize] % clusters as u64) as u32;
        rr[k as usize] += t.block_num as u64;
        for b in 0..t.block_num.min(clusters) {
            // Blocks past the first `clusters` wrap onto the same clusters again.
            let n = t.block_num / clusters + u32::from(b < t.block_num % clusters);
            cap[((home + b) % clusters) as usize * k_n + k as usize] += n;
        }
        homes.push(home_word(home, home_class, t.lanes, t.block_num));
    }
    let entries: u32 = cap.iter().sum();
    let l = ResidentLayout { base: 0, clusters, tasks: tasks.len() as u32, entries };
    let mut b = std::vec![0u8; l.bytes() as usize];
    let mut put = |at: u64, v: u64| b[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
    let mut first = std::vec![0u32; cap.len()];
    let mut next = 0u32;
    let mut classes = 0u64;
    for c in 0..clusters {
        for k in 0..k_n as u32 {
            let i = c as usize * k_n + k as usize;
            first[i] = next;
            next += cap[i];
            put(l.inbox_capacity(c, k), cap[i] as u64);
            if cap[i] > 0 {
                classes |= 1 << k;
            }
            put(l.inbox_first(c, k), first[i] as u64);
        }
    }
    put(l.classes(), classes);
    let mut tails = std::vec![0u32; cap.len()];
    for (i, t) in tasks.iter().enumerate() {
        let task = i as u32;
        put(l.fanin(task), t.fanin as u64);
        put(l.left(task), t.block_num as u64 * subtasks_per_block(t) as u64);
        put(l.home(task), homes[i]);
        if t.fanin == 0 {
            let (home, class, _, blocks) = home_fields(homes[i]);
            let (k, _) = class_of(t);
            let flags = match class {
                HOME_DUMMY => ENTRY_DUMMY,
                inbox_class::GANG => ENTRY_GANG,
                _ => 0,
            };
            for blk in 0..blocks {
                let q = ((home + blk) % clusters) as usize * k_n + k as usize;
                put(l.entry(first[q] + tails[q]), entry_word(task, blk, flags));
                tails[q] += 1;
            }
        }
    }
    let mut stocked = std::vec![0u64; k_n * l.idle_words() as usize];
    for c in 0..clusters {
        for k in 0..k_n as u32 {
            let n = tails[c as usize * k_n + k as usize];
            put(l.inbox_tail(c, k), n as u64);
            if n > 0 {
                stocked[(k * l.idle_words() + c / 64) as usize] |= 1 << (c % 64);
            }
        }
    }
    for (k, words) in stocked.chunks(l.idle_words() as usize).enumerate() {
        for (i, w) in words.iter().enumerate() {
            put(l.stocked(k as u32, i as u32), *w);
        }
    }
    (b, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_regions_do_not_overlap() {
        let l = ResidentLayout { base: 0x1000, clusters: 65, tasks: 10, entries: 12 };
        assert_eq!(l.idle_words(), 2);
        assert!(l.stocked(inbox_class::GANG, 1) + 8 <= l.idle(0));
        assert!(l.stocked(inbox_class::AIV, 0) >= l.stocked(inbox_class::AIC, 1) + 8);
        assert!(l.idle(1) + 8 <= l.running(0));
        assert!(l.running(l.workers() - 1) + 8 <= l.token(0));
        assert!(l.inbox_first(64, inbox_class::GANG) + 8 <= l.fanin(0));
        assert!(l.fanin(9) + 8 <= l.left(0));
        assert!(l.left(9) + 8 <= l.home(0));
        assert!(l.home(9) + 8 <= l.entry(0));
        assert_eq!(l.base + l.bytes(), (l.entry(12) - 0x1000).next_multiple_of(64) + 0x1000);
        // One writer per line: a slot's publication and its lane's completion never share one.
        assert_ne!(l.slot_publication(3, 1) / 64, l.slot_completion(3, 1) / 64);
        assert_eq!(l.token(1) - l.token(0), ResidentLayout::CLUSTER_BYTES);
    }

    fn record(shape: Shape, blocks: u32, fanin: u32) -> TaskRecord {
        TaskRecord {
            funcs: [0; 3],
            shape: shape as u8,
            lanes: if shape == Shape::Mix { lanes::MIX } else { 0 },
            block_num: blocks,
            fanin,
            fanout_start: 0,
            fanout_count: 0,
            args_rel: 0,
            args_len: 0,
        }
    }

    #[test]
    fn the_initial_state_sizes_every_inbox_exactly_and_seeds_the_roots() {
        let tasks =
            [record(Shape::Aiv, 5, 0), record(Shape::Mix, 1, 0), record(Shape::Aic, 1, 1), record(Shape::Dummy, 1, 0)];
        let (bytes, entries) = initial_state(&tasks, 2);
        assert_eq!(entries, 5 + 1 + 1 + 1);
        let l = ResidentLayout { base: 0, clusters: 2, tasks: 4, entries };
        let word = |at: u64| u64::from_le_bytes(bytes[at as usize..at as usize + 8].try_into().unwrap());
        // Task 0's five blocks: 3 on cluster 0, 2 on cluster 1; the dummy after them on
        // cluster 1 (AIV class, dealt in turn).
        assert_eq!(word(l.inbox_capacity(0, inbox_class::AIV)), 3);
        assert_eq!(word(l.inbox_capacity(1, inbox_class::AIV)), 3);
        assert_eq!(word(l.inbox_tail(1, inbox_class::AIV)), 3);
        let first = word(l.inbox_first(1, inbox_class::AIV)) as u32;
        assert_eq!(word(l.entry(first)), entry_word(0, 1, 0));
        assert_eq!(word(l.entry(first + 2)), entry_word(3, 0, ENTRY_DUMMY));
        // The MIX task waits in cluster 0's gang inbox with all three lanes left.
        let g = word(l.inbox_first(0, inbox_class::GANG)) as u32;
        assert_eq!(word(l.entry(g)), entry_word(1, 0, ENTRY_GANG));
        assert_eq!(word(l.left(1)), 3);
        assert_eq!(word(l.classes()), 0b111, "the graph has blocks of every class");
        // Stocked: both AIV inboxes, cluster 0's gang inbox, no AIC inbox.
        assert_eq!(word(l.stocked(inbox_class::AIV, 0)), 0b11);
        assert_eq!(word(l.stocked(inbox_class::GANG, 0)), 0b01);
        assert_eq!(word(l.stocked(inbox_class::AIC, 0)), 0);
        // Task 2 waits for a producer: room in its inbox, nothing published.
        assert_eq!(word(l.inbox_capacity(0, inbox_class::AIC)), 1);
        assert_eq!(word(l.inbox_tail(0, inbox_class::AIC)), 0);
        assert_eq!(word(l.fanin(2)), 1);
        let capacity: u64 =
            (0..2).flat_map(|c| (0..3).map(move |k| (c, k))).map(|(c, k)| word(l.inbox_capacity(c, k))).sum();
        assert_eq!(capacity, entries as u64);
    }

    #[test]
    fn reasons_round_trip_through_the_descriptor() {
        for r in [
            LegacyReason::Requested,
            LegacyReason::DeviceSideRuntime,
            LegacyReason::TooManyBlocks { task: 5 },
            LegacyReason::SyncStart { task: 6 },
            LegacyReason::ArgsDumpBlocks { task: 7 },
            LegacyReason::Unreadable,
        ] {
            let (c, t) = r.code();
            assert_eq!(LegacyReason::from_code(c, t), Some(r));
        }
        assert_eq!(LegacyReason::from_code(legacy_reason::NONE, 0), None);
    }
}
