//! The resident executor's scheduler state in GM: counters, the idle mask, per-cluster
//! dispatch slots, tokens, doorbells and ready inboxes, per-task fan-in and home words, and
//! the inbox entries; plus the word that starts a run's resident cores.
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | initial state (counters zero, `fanin`, `home`, inbox bounds, root entries) | host (H2D before launch) | cores, AICPU |
//! | every word during the run | cores and AICPU, 64-bit GM atomics and device-direct stores only | cores, AICPU (device-direct) |
//! | [`RunLine::resident_ready`](super::RunLine::resident_ready) ([`resident_ready_word`]) | the booting AICPU thread, device-direct | cores, device-direct |

use super::{LaunchConfig, executor_mode};

/// The [`RunLine::resident_ready`](super::RunLine::resident_ready) word that starts run `epoch`'s resident cores: the epoch
/// with [`executor_mode::RESIDENT_READY`] in its low byte.
pub const fn resident_ready_word(epoch: u64) -> u64 {
    (epoch << 8) | executor_mode::RESIDENT_READY as u64
}

/// Where the resident executor's scheduler state sits in GM. Every word is touched only
/// through `GmAtomic` (device-direct loads, stores and read-modify-writes), by the cores and
/// the AICPU alike, so no line of it is ever cached and no maintenance is needed on either
/// tier. The host writes the initial state before the launch.
///
/// * line 0: `completed` (tasks done), `executed` (kernels run), `classes` (the inbox classes
///   the graph uses, host-written);
/// * from line 1, the stocked masks, one per class: bit `c` of word `c / 64` set while
///   cluster `c`'s inbox of that class may hold an entry not yet taken (the list a core scans
///   to steal);
/// * the idle mask: bit `c` of word `c / 64` set while cluster `c` had nothing to run (the
///   wake list a releaser reads to hand new work to an idle cluster);
/// * `running[workers]`: `task + 1` while a core runs a kernel, 0 otherwise (its one writer
///   is that core; the AICPU's watchdog reads it to name a stuck core and its task);
/// * one [`CLUSTER_BYTES`](Self::CLUSTER_BYTES) block per cluster: line 0 the dispatch
///   `token` (0, or the worker holding it + 1), the `doorbell` (rung by every event the
///   cluster's cores may wait for) and `held` (a gang entry waiting for its lanes); lines 1–3
///   the dispatch slot of each lane (AIC, AIV0, AIV1: `entry`, then its `publication`
///   generation); lines 4–6 each lane's `completion` generation (written only by that lane's
///   core); lines 7–9 the ready inboxes of the three classes ([`inbox_class`]: `head`,
///   `tail`, `capacity`, `first`);
/// * per task: `fanin` (producers not finished yet), `left` (subtasks not finished yet) and
///   `home` ([`home_word`]: home cluster, class, lanes, blocks);
/// * the inbox entries: inbox `(c, k)` owns `capacity` entries from index `first`; entry `i`
///   is an [`entry_word`] once published, 0 before. Each block of each task enters one inbox
///   once, so an inbox never wraps and an entry is written once per run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ResidentLayout {
    /// GM address of the region (64-byte aligned).
    pub base: u64,
    /// Clusters launched (workers = 3 × clusters).
    pub clusters: u32,
    /// Tasks of the graph.
    pub tasks: u32,
    /// Inbox entries of all clusters together (the graph's blocks).
    pub entries: u32,
}

/// The three classes of ready work, one inbox each per cluster.
pub mod inbox_class {
    /// Single-core AIC tasks.
    pub const AIC: u32 = 0;
    /// Single-core AIV tasks and dummies.
    pub const AIV: u32 = 1;
    /// Gangs: MIX tasks, which take lanes of one cluster at once.
    pub const GANG: u32 = 2;
}

/// Entry flag: a dummy task (completed by the dispatcher, on no core).
pub const ENTRY_DUMMY: u64 = 1 << 62;
/// Entry flag: a gang subtask (the lane runs its own lane's kernel of a MIX task).
pub const ENTRY_GANG: u64 = 1 << 63;
/// Largest block count a resident task may have (the entry's block field).
pub const RESIDENT_MAX_BLOCKS: u32 = 1 << 30;
/// Most inbox entries (blocks of the whole graph) a resident scheduler state holds: 4 Mi, so
/// the state stays within tens of MiB; a larger graph runs on the legacy executor.
pub const RESIDENT_MAX_ENTRIES: u32 = 1 << 22;

/// An inbox or slot entry: block `block` of task `task`, with its flags.
pub const fn entry_word(task: u32, block: u32, flags: u64) -> u64 {
    (task as u64 + 1) | ((block as u64) << 32) | flags
}

/// `(task, block)` of an entry word.
pub const fn entry_task_block(e: u64) -> (u32, u32) {
    ((e as u32).wrapping_sub(1), ((e >> 32) as u32) & (RESIDENT_MAX_BLOCKS - 1))
}

/// A task's `home` word: the cluster its first block goes to, its [`inbox_class`] (3 for a
/// dummy, which waits in the AIV inbox), its lanes ([`lanes`](super::lanes)) and its block count.
pub const fn home_word(cluster: u32, class: u32, lanes: u8, blocks: u32) -> u64 {
    (cluster as u64 & 0xFFFF) | ((class as u64 & 3) << 16) | (((lanes & 7) as u64) << 18) | ((blocks as u64) << 32)
}

/// Class of a dummy task in its [`home_word`].
pub const HOME_DUMMY: u32 = 3;

/// The fields of a [`home_word`]: `(cluster, class, lanes, blocks)`.
pub const fn home_fields(h: u64) -> (u32, u32, u8, u32) {
    ((h & 0xFFFF) as u32, ((h >> 16) & 3) as u32, ((h >> 18) & 7) as u8, (h >> 32) as u32)
}

const fn lines(bytes: u64) -> u64 {
    bytes.next_multiple_of(64)
}

impl ResidentLayout {
    /// Offset of `completed`.
    pub const COMPLETED: u64 = 0;
    /// Offset of `executed`.
    pub const EXECUTED: u64 = 8;
    /// Offset of `classes`: bit `k` set when the graph has a block of [`inbox_class`] `k`
    /// (written by the host; a dispatch pass never looks for a class the graph lacks).
    pub const CLASSES: u64 = 16;
    /// Bytes of one cluster's block (ten lines).
    pub const CLUSTER_BYTES: u64 = 10 * 64;
    /// The layout a launch configuration names, `None` on the legacy executor.
    pub const fn of(cfg: &LaunchConfig) -> Option<ResidentLayout> {
        if cfg.resident == 0 {
            return None;
        }
        Some(ResidentLayout {
            base: cfg.resident,
            clusters: cfg.clusters,
            tasks: cfg.task_count,
            entries: cfg.resident_entries,
        })
    }
    /// Workers (three per cluster).
    pub const fn workers(&self) -> u32 {
        self.clusters * 3
    }
    /// GM address of `completed`.
    pub const fn completed(&self) -> u64 {
        self.base + Self::COMPLETED
    }
    /// GM address of `executed`.
    pub const fn executed(&self) -> u64 {
        self.base + Self::EXECUTED
    }
    /// GM address of `classes`.
    pub const fn classes(&self) -> u64 {
        self.base + Self::CLASSES
    }
    /// Words of the idle mask.
    pub const fn idle_words(&self) -> u32 {
        self.clusters.div_ceil(64)
    }
    /// GM address of word `i` of the stocked mask of class `k`: bit `c % 64` of word `c / 64`
    /// is set while cluster `c`'s inbox of class `k` may hold an entry not yet taken. A pusher
    /// sets its cluster's bit after it reserved its place; a taker that found the inbox empty
    /// (or emptied it) clears the bit and sets it again if the inbox filled meanwhile, so a
    /// non-empty inbox never stays unmarked. Cores steal only from the clusters it marks.
    pub const fn stocked(&self, k: u32, i: u32) -> u64 {
        self.base + 64 + (k * self.idle_words() + i) as u64 * 8
    }
    /// GM address of word `i` of the idle mask.
    pub const fn idle(&self, i: u32) -> u64 {
        self.base + 64 + lines(3 * self.idle_words() as u64 * 8) + i as u64 * 8
    }
    const fn running_base(&self) -> u64 {
        self.idle(0) + lines(self.idle_words() as u64 * 8)
    }
    /// GM address of worker `w`'s `running` word.
    pub const fn running(&self, w: u32) -> u64 {
        self.running_base() + w as u64 * 8
    }
    const fn cluster(&self, c: u32) -> u64 {
        self.running_base() + lines(self.workers() as u64 * 8) + c as u64 * Self::CLUSTER_BYTES
    }
    /// GM address of cluster `c`'s dispatch token.
    pub const fn token(&self, c: u32) -> u64 {
        self.cluster(c)
    }
    /// GM address of cluster `c`'s doorbell.
    pub const fn doorbell(&self, c: u32) -> u64 {
        self.cluster(c) + 8
    }
    /// GM address of cluster `c`'s held gang entry.
    pub const fn held(&self, c: u32) -> u64 {
        self.cluster(c) + 16
    }
    /// GM address of the entry in lane `lane`'s dispatch slot of cluster `c`.
    pub const fn slot_entry(&self, c: u32, lane: u32) -> u64 {
        self.cluster(c) + 64 * (1 + lane as u64)
    }
    /// GM address of the publication generation of lane `lane`'s slot of cluster `c`.
    pub const fn slot_publication(&self, c: u32, lane: u32) -> u64 {
        self.slot_entry(c, lane) + 8
    }
    /// GM address of the completion generation of lane `lane` of cluster `c`.
    pub const fn slot_completion(&self, c: u32, lane: u32) -> u64 {
        self.cluster(c) + 64 * (4 + lane as u64)
    }
    /// GM address of the head of cluster `c`'s inbox of class `k`.
    pub const fn inbox_head(&self, c: u32, k: u32) -> u64 {
        self.cluster(c) + 64 * (7 + k as u64)
    }
    /// GM address of its tail.
    pub const fn inbox_tail(&self, c: u32, k: u32) -> u64 {
        self.inbox_head(c, k) + 8
    }
    /// GM address of its capacity.
    pub const fn inbox_capacity(&self, c: u32, k: u32) -> u64 {
        self.inbox_head(c, k) + 16
    }
    /// GM address of the index of its first entry.
    pub const fn inbox_first(&self, c: u32, k: u32) -> u64 {
        self.inbox_head(c, k) + 24
    }
    const fn tasks_base(&self) -> u64 {
        self.cluster(self.clusters)
    }
    /// GM address of task `t`'s fan-in counter.
    pub const fn fanin(&self, t: u32) -> u64 {
        self.tasks_base() + t as u64 * 8
    }
    /// GM address of task `t`'s count of subtasks not yet finished.
    pub const fn left(&self, t: u32) -> u64 {
        self.tasks_base() + lines(self.tasks as u64 * 8) + t as u64 * 8
    }
    /// GM address of task `t`'s [`home_word`].
    pub const fn home(&self, t: u32) -> u64 {
        self.tasks_base() + 2 * lines(self.tasks as u64 * 8) + t as u64 * 8
    }
    /// GM address of inbox entry `i` (of all clusters' entries).
    pub const fn entry(&self, i: u32) -> u64 {
        self.tasks_base() + 3 * lines(self.tasks as u64 * 8) + i as u64 * 8
    }
    /// Bytes of the whole region.
    pub const fn bytes(&self) -> u64 {
        lines(self.entry(self.entries) - self.base)
    }
}
