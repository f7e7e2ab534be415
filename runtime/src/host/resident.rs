//! Which executor runs a graph, and the resident executor's initial scheduler state.
//!
//! The host decides before the launch and writes its choice into the launch descriptor
//! ([`LaunchConfig::executor`](crate::layout::LaunchConfig::executor), with the reason when the
//! run is on the legacy executor). For the resident executor it also writes the scheduler
//! state ([`ResidentLayout`]): every task's fan-in count and the ready lists seeded with the
//! tasks that wait for nothing.

use std::fmt;
use std::vec::Vec;

use zerocopy::FromBytes;

use crate::layout::{
    ArgsHeader, ImageHeader, ResidentLayout, Shape, TaskRecord, args_flags, executor_mode, legacy_reason,
};

/// Which executor runs a host-built graph ([`RunConfig::executor`](super::RunConfig::executor)).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Executor {
    /// The resident executor where it can run the graph, else the legacy one (the reason is in
    /// [`RunReport::legacy_reason`](super::RunReport::legacy_reason)).
    #[default]
    Auto,
    /// The AICPU threads dispatch every subtask to the cores.
    Legacy,
    /// The cores schedule themselves: they take ready tasks from lists in GM, run them and
    /// release their consumers; the AICPU launches, supervises and tears down. A graph it
    /// cannot run is refused ([`Error::Config`](super::Error::Config) naming the task).
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
    /// The graph has a MIX task (one AIC and two AIVs of a cluster at once).
    MixTask {
        /// The first such task.
        task: u32,
    },
    /// The graph has an SPMD task (more than one block).
    SpmdTask {
        /// The first such task.
        task: u32,
    },
    /// The graph has a task whose blocks must start together.
    SyncStart {
        /// The first such task.
        task: u32,
    },
    /// The args dump is on: it is captured by the AICPU threads that dispatch and reap each
    /// task, which only the legacy executor has.
    ArgsDump,
}

impl LegacyReason {
    /// The reason and its task as the descriptor stores them.
    pub(crate) fn code(self) -> (u32, u32) {
        match self {
            LegacyReason::Requested => (legacy_reason::REQUESTED, u32::MAX),
            LegacyReason::DeviceSideRuntime => (legacy_reason::DEVICE_SIDE_RUNTIME, u32::MAX),
            LegacyReason::MixTask { task } => (legacy_reason::MIX_TASK, task),
            LegacyReason::SpmdTask { task } => (legacy_reason::SPMD_TASK, task),
            LegacyReason::SyncStart { task } => (legacy_reason::SYNC_START, task),
            LegacyReason::ArgsDump => (legacy_reason::ARGS_DUMP, u32::MAX),
        }
    }

    /// The reason a descriptor stores, `None` for "none" or an unknown value.
    pub(crate) fn from_code(code: u32, task: u32) -> Option<LegacyReason> {
        Some(match code {
            legacy_reason::REQUESTED => LegacyReason::Requested,
            legacy_reason::DEVICE_SIDE_RUNTIME => LegacyReason::DeviceSideRuntime,
            legacy_reason::MIX_TASK => LegacyReason::MixTask { task },
            legacy_reason::SPMD_TASK => LegacyReason::SpmdTask { task },
            legacy_reason::SYNC_START => LegacyReason::SyncStart { task },
            legacy_reason::ARGS_DUMP => LegacyReason::ArgsDump,
            _ => return None,
        })
    }
}

impl fmt::Display for LegacyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LegacyReason::Requested => f.write_str("the legacy executor was requested"),
            LegacyReason::DeviceSideRuntime => {
                f.write_str("the device-side runtime schedules on the AICPU (the resident executor runs host-built graphs)")
            }
            LegacyReason::MixTask { task } => {
                write!(f, "task {task} is a MIX task, which the resident executor does not run")
            }
            LegacyReason::SpmdTask { task } => {
                write!(f, "task {task} is an SPMD task (several blocks), which the resident executor does not run")
            }
            LegacyReason::SyncStart { task } => {
                write!(f, "task {task} needs its blocks to start together, which the resident executor does not do")
            }
            LegacyReason::ArgsDump => f.write_str(
                "the args dump is captured by the AICPU threads that dispatch tasks; on the resident executor it is not built (issue 12)",
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
    /// The resident state to write (bytes laid out from offset 0, and the AIC list's capacity).
    pub(crate) state: Option<(Vec<u8>, u32)>,
}

/// The first thing in a host-built graph `image` the resident executor cannot run, and the
/// AIC list's capacity when there is none. A malformed image (the host built it, so this
/// does not happen) is reported as unsupported at task `u32::MAX`.
fn scan(image: &[u8]) -> Result<(ImageHeader, Vec<TaskRecord>, u32), LegacyReason> {
    let broken = LegacyReason::MixTask { task: u32::MAX };
    let (h, _) = ImageHeader::read_from_prefix(image).map_err(|_| broken)?;
    let n = h.task_count as usize;
    let at = usize::try_from(h.tasks_off).map_err(|_| broken)?;
    let end = at.checked_add(n * 32).filter(|&e| e <= image.len()).ok_or(broken)?;
    let tasks: Vec<TaskRecord> = image[at..end]
        .chunks_exact(32)
        .map(|c| TaskRecord::read_from_bytes(c).map_err(|_| broken))
        .collect::<Result<_, _>>()?;
    let mut aic = 0u32;
    for (i, t) in tasks.iter().enumerate() {
        let task = i as u32;
        match Shape::try_from(t.shape) {
            Ok(Shape::Mix) => return Err(LegacyReason::MixTask { task }),
            Ok(Shape::Aic) => aic += 1,
            Ok(Shape::Aiv | Shape::Dummy) => {}
            Err(_) => return Err(broken),
        }
        if t.block_num != 1 {
            return Err(LegacyReason::SpmdTask { task });
        }
        let args = (at + i * 32) as i64 + t.args_rel as i64;
        let args = usize::try_from(args).map_err(|_| broken)?;
        let (ah, _) = image.get(args..).and_then(|b| ArgsHeader::read_from_prefix(b).ok()).ok_or(broken)?;
        if ah.flags & args_flags::SYNC_START != 0 {
            return Err(LegacyReason::SyncStart { task });
        }
    }
    Ok((h, tasks, aic))
}

/// Choose the executor of a host-built graph `image` under `asked`, with the args dump on or
/// off. `Err` is the reason an explicit [`Executor::Resident`] cannot be honoured.
pub(crate) fn choose(asked: Executor, image: &[u8], dump: bool, workers: u32) -> Result<Choice, LegacyReason> {
    let legacy = |reason: LegacyReason, mode: u32| Choice { mode, reason: Some(reason), state: None };
    if asked == Executor::Legacy {
        return Ok(legacy(LegacyReason::Requested, executor_mode::LEGACY_GRAPH));
    }
    let refuse = |reason: LegacyReason, mode: u32| {
        if asked == Executor::Resident { Err(reason) } else { Ok(legacy(reason, mode)) }
    };
    if dump {
        return refuse(LegacyReason::ArgsDump, executor_mode::LEGACY_GRAPH);
    }
    match scan(image) {
        Err(reason) => refuse(reason, executor_mode::LEGACY_UNSUPPORTED_SHAPE),
        Ok((_, tasks, aic)) => {
            let l = ResidentLayout { base: 0, workers, tasks: tasks.len() as u32, aic };
            Ok(Choice {
                mode: executor_mode::RESIDENT_PENDING,
                reason: None,
                state: Some((initial_state(&l, &tasks), aic)),
            })
        }
    }
}

/// The resident state at the start of a run (laid out from offset 0): nothing completed,
/// every fan-in count full, the ready lists holding the tasks that wait for nothing, in task
/// order.
fn initial_state(l: &ResidentLayout, tasks: &[TaskRecord]) -> Vec<u8> {
    let mut b = std::vec![0u8; l.bytes() as usize];
    let mut put = |at: u64, v: u64| b[at as usize..at as usize + 8].copy_from_slice(&v.to_le_bytes());
    let mut tails = [0u32; 2];
    for (i, t) in tasks.iter().enumerate() {
        put(l.fanin(i as u32), t.fanin as u64);
        if t.fanin == 0 {
            let q = u32::from(t.shape != Shape::Aic as u8);
            put(l.entry(q, tails[q as usize]), i as u64 + 1);
            tails[q as usize] += 1;
        }
    }
    put(l.tail(0), tails[0] as u64);
    put(l.tail(1), tails[1] as u64);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_regions_do_not_overlap() {
        let l = ResidentLayout { base: 0x1000, workers: 72, tasks: 10, aic: 3 };
        assert!(l.running(71) + 8 <= l.fanin(0));
        assert!(l.fanin(9) + 8 <= l.entry(0, 0));
        assert_eq!(l.entry(0, 3), l.entry(1, 0));
        assert_eq!(l.base + l.bytes(), l.entry(1, 7));
        assert!(l.tail(1) + 8 <= l.running(0));
    }

    #[test]
    fn reasons_round_trip_through_the_descriptor() {
        for r in [
            LegacyReason::Requested,
            LegacyReason::DeviceSideRuntime,
            LegacyReason::MixTask { task: 4 },
            LegacyReason::SpmdTask { task: 5 },
            LegacyReason::SyncStart { task: 6 },
            LegacyReason::ArgsDump,
        ] {
            let (c, t) = r.code();
            assert_eq!(LegacyReason::from_code(c, t), Some(r));
        }
        assert_eq!(LegacyReason::from_code(legacy_reason::NONE, 0), None);
    }
}
