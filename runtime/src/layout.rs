//! Device structures: the ABI between host, AICPU and AICore.
//!
//! Every structure is `#[repr(C)]` with compile-time size and offset assertions. Each cache
//! line has exactly one writer through caches, or is touched only through
//! [`GmAtomic`](pto_hal::GmAtomic) (see `docs/cache-contract.md`):
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | [`LaunchConfig`] (2 lines) | host (H2D before launch) | AICPU, AICore |
//! | [`FatalLine`], [`FaultText`] | the agent (AICPU or AICore) that wins the latch, atomics only | host (D2H after the run) |
//! | [`RunLine`] | AICPU threads, atomics only | host (D2H after the run) |
//! | [`Handshake`] (1 line per worker) | that worker's AICore only | AICPU |
//! | [`TeardownGate`] (1 line per worker) | AICPU, atomics only | AICore, device-direct loads |
//! | [`DispatchPayload`] (2 lines per worker) | AICPU only | that worker's AICore |
//! | graph image | host (H2D before launch) | AICPU, AICore |
//! | trace rings ([`TraceLayout`], only when tracing) | one ring per core / AICPU thread, its owner only, device-direct stores | host (D2H after the run) |
//!
//! Unlike the reference runtime, the AICPU never writes a handshake line: a core's payload
//! addresses are computed from its worker index, so the line has one writer. Handshakes and
//! gates carry the run's epoch, so a stale report or release of an earlier run is never taken
//! for this run's and nothing has to be cleared between runs.

use core::mem::{offset_of, size_of};

use num_enum::{IntoPrimitive, TryFromPrimitive};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Magic of a launch descriptor ("PTO1").
pub const DESC_MAGIC: u32 = 0x314F_5450;
/// Magic of a graph image ("PTOG").
pub const IMAGE_MAGIC: u32 = 0x474f_5450;
/// Layout version of descriptor and image.
pub const LAYOUT_VERSION: u32 = 2;

/// Register values of the dispatch (DMB) / status (COND) protocol.
pub mod regs {
    /// DMB: window open, core idle. The open itself acknowledges the core's report.
    pub const DMB_IDLE: u32 = 0x7FFF_FFFD;
    /// DMB: leave the dispatch loop.
    pub const DMB_EXIT: u32 = 0x7FFF_FFF0;
    /// Task ids at or above this value are reserved.
    pub const RESERVED_MIN: u32 = 0x7FFF_FFF0;
    /// COND state bit: set = FIN, clear = ACK.
    pub const COND_FIN: u32 = 1 << 31;
    /// COND: core idle after its window opened.
    pub const COND_IDLE: u32 = COND_FIN | 0x7FFF_FFFF;
    /// COND: exit acknowledged.
    pub const COND_EXITED: u32 = COND_FIN | 0x7FFF_FFFE;
    /// COND value acknowledging dispatch `id`.
    pub const fn ack(id: u32) -> u32 {
        id & 0x7FFF_FFFF
    }
    /// COND value reporting that dispatch `id` finished.
    pub const fn fin(id: u32) -> u32 {
        COND_FIN | (id & 0x7FFF_FFFF)
    }
    /// The next per-core dispatch id after `id`: never 0, never reserved. Parity alternates,
    /// which is what selects a core's payload buffer.
    pub const fn next_id(id: u32) -> u32 {
        let n = id + 1;
        if n >= RESERVED_MIN { 1 + (id & 1) } else { n }
    }
}

/// Host-written run configuration: the first three lines of the launch descriptor.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct LaunchConfig {
    /// [`DESC_MAGIC`].
    pub magic: u32,
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// This run's epoch: non-zero, different for every run of the device.
    pub epoch: u64,
    /// Clusters launched.
    pub clusters: u32,
    /// Workers launched (`3 * clusters`).
    pub workers: u32,
    /// AICPU threads launched.
    pub aicpu_threads: u32,
    /// Tasks in the graph image.
    pub task_count: u32,
    /// Physical cores of the device (bound on a reported physical core id).
    pub physical_cores: u32,
    /// Which runtime the AICPU program runs: [`RUNTIME_HBG`] or [`RUNTIME_TRB`].
    pub runtime: u32,
    /// GM address of the graph image (host-built graph) or the [`OrchImage`] (rings).
    pub image: u64,
    /// Length of the graph image in bytes.
    pub image_len: u64,
    /// GM address of `Handshake[workers]`.
    pub handshakes: u64,
    /// GM address of `TeardownGate[workers]`.
    pub gates: u64,
    /// GM address of `DispatchPayload[workers][2]`.
    pub payloads: u64,
    /// AICPU no-progress watchdog budget, in device ticks.
    pub watchdog_ticks: u64,
    /// Budget for the EXIT acknowledgement of a core group, in ticks.
    pub exit_ticks: u64,
    /// AICore budget for any single wait (window, dispatch, gate), in ticks.
    pub core_wait_ticks: u64,
    /// GM address of the run's trace rings ([`TraceLayout`]); 0 = tracing off (nothing is
    /// recorded and no ring storage exists).
    pub trace: u64,
    /// Records per AICore trace ring (one ring per worker).
    pub trace_core_records: u32,
    /// Records per AICPU-thread trace ring (one ring per launched thread).
    pub trace_thread_records: u32,
    /// GM address of the run's args-dump region (a [`DumpHeader`] line, then the lanes:
    /// [`DumpLayout`]); 0 = the dump is off (no lane storage exists).
    pub dump: u64,
    /// Which executor runs the graph ([`executor_mode`]); 0 is not a choice and is refused.
    pub executor: u32,
    /// Why the run is on the legacy executor ([`legacy_reason`]), 0 on the resident one.
    pub executor_reason: u32,
    /// The task the reason names (a sync-start task, or one with too many blocks), `u32::MAX`
    /// if none.
    pub executor_detail: u32,
    /// Resident executor: inbox entries of the scheduler state ([`ResidentLayout::entries`]).
    pub resident_entries: u32,
    /// Resident executor: GM address of the scheduler state ([`ResidentLayout`]); 0 on the
    /// legacy executor.
    pub resident: u64,
    /// Resident executor with the args dump on: GM address of the boundary-capture control
    /// region ([`CaptureLayout`]); 0 when either is off (no control storage exists).
    pub capture: u64,
    /// Reserved, zero.
    pub reserved: [u64; 4],
}

/// [`LaunchConfig::executor`] values (the reference's numbering; 0 is not a mode).
pub mod executor_mode {
    /// Resident executor, its scheduler state not yet checked by the AICPU: cores wait for
    /// [`RunLine::resident_ready`](super::RunLine::resident_ready) to say [`RESIDENT_READY`].
    pub const RESIDENT_PENDING: u32 = 1;
    /// Resident executor, the AICPU validated the image: the cores schedule themselves.
    pub const RESIDENT_READY: u32 = 2;
    /// Legacy executor: the AICPU dispatches every subtask.
    pub const LEGACY_GRAPH: u32 = 3;
    /// Legacy executor because the graph has a shape the resident executor does not run.
    pub const LEGACY_UNSUPPORTED_SHAPE: u32 = 4;
}

/// [`LaunchConfig::executor_reason`] values: why a run is on the legacy executor.
pub mod legacy_reason {
    /// The run is on the resident executor.
    pub const NONE: u32 = 0;
    /// `Executor::Legacy` was asked for.
    pub const REQUESTED: u32 = 1;
    /// The device-side runtime schedules from its rings on the AICPU.
    pub const DEVICE_SIDE_RUNTIME: u32 = 2;
    // 3 and 4 named MIX and SPMD tasks, which the resident executor runs now.
    /// A task with more blocks than a resident entry holds.
    pub const TOO_MANY_BLOCKS: u32 = 7;
    /// The host could not read its own image back.
    pub const UNREADABLE: u32 = 8;
    /// A task whose blocks must start together.
    pub const SYNC_START: u32 = 5;
    /// The args dump is on and a task has more than one block (its boundaries are captured
    /// by the AICPU threads that dispatch it).
    pub const ARGS_DUMP_BLOCKS: u32 = 6;
}

/// The [`RunLine::resident_ready`] word that starts run `epoch`'s resident cores: the epoch
/// with [`executor_mode::RESIDENT_READY`] in its low byte.
pub const fn resident_ready_word(epoch: u64) -> u64 {
    (epoch << 8) | executor_mode::RESIDENT_READY as u64
}

/// Where the resident executor's scheduler state sits in GM. Every word is touched only
/// through `GmAtomic` (device-direct loads, stores and read-modify-writes), by the cores and
/// the AICPU alike, so no line of it is ever cached and no maintenance is needed on either
/// tier. The host writes the initial state before the launch.
///
/// * line 0: `completed` (tasks done), `executed` (kernels run);
/// * line 1: `pending[3]`, entries of each class pushed and not yet taken;
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
/// dummy, which waits in the AIV inbox), its lanes ([`lanes`]) and its block count.
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
    /// Words of the idle mask.
    pub const fn idle_words(&self) -> u32 {
        self.clusters.div_ceil(64)
    }
    /// GM address of the count of entries of class `k` pushed and not yet taken, over every
    /// cluster (raised before an entry is reserved, lowered after it was taken: never below
    /// the true count). A core steals from other clusters only while it is non-zero.
    pub const fn pending(&self, k: u32) -> u64 {
        self.base + 64 + k as u64 * 8
    }
    /// GM address of word `i` of the idle mask.
    pub const fn idle(&self, i: u32) -> u64 {
        self.base + 128 + i as u64 * 8
    }
    const fn running_base(&self) -> u64 {
        self.base + 128 + lines(self.idle_words() as u64 * 8)
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

/// The resident executor's boundary-capture control region (the args dump on the resident
/// route: `docs/args-dump.md`), reserved only when the dump is on. Every line is 64 bytes and
/// every word of it is touched only by 64-bit GM atomics or device-direct stores and queries,
/// never as a cached line:
///
/// * line 0, the header: the dump level, the service step bound `max_bytes` and the
///   participants' wait budget (host-written), then the counters the host reads back
///   ([`capture_header`]: service steps — progress for the watchdogs —, WOULD_BLOCK answers,
///   the largest step, phases requested, slots claimed);
/// * one [rendezvous slot](capture_slot) per dispatch slot (cluster × lane): the claim word,
///   the arrival and released masks of both phases, both publisher words and the aborted
///   word. A task uses the slot of the lowest lane it occupies;
/// * one occupancy line per cluster, written only by the holder of the cluster's dispatch
///   token: words 0–2 the occupancy of the publication in each lane, words 3–5 the last
///   occupancy handed out per slot;
/// * one [request](capture_request) line per worker (the core is its only writer) and one
///   [acknowledgement](capture_ack) line per worker (only the AICPU thread serving it writes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CaptureLayout {
    /// GM address of the region (64-byte aligned).
    pub base: u64,
    /// Clusters launched (workers = 3 × clusters).
    pub clusters: u32,
}

/// Words of the [`CaptureLayout`] header line.
pub mod capture_header {
    /// The dump level ([`DumpLevel`](crate::dump::DumpLevel) code).
    pub const LEVEL: u64 = 0;
    /// Most payload bytes one service step copies.
    pub const MAX_BYTES: u64 = 8;
    /// A participant's wait budget at a boundary, in ticks.
    pub const BUDGET: u64 = 16;
    /// Service steps taken by the AICPU threads (progress for the watchdogs).
    pub const SERVED: u64 = 24;
    /// WOULD_BLOCK answers given (AICPU threads, fetch-add).
    pub const WOULD_BLOCK: u64 = 32;
    /// Most payload bytes one service step copied (AICPU threads, compare-and-swap maximum).
    pub const LARGEST_STEP: u64 = 40;
    /// Phases requested (each phase's publisher, fetch-add, once per phase).
    pub const REQUESTS: u64 = 48;
    /// Rendezvous slots claimed (each claim's winner, fetch-add).
    pub const CLAIMS: u64 = 56;
}

/// A rendezvous slot's words (offsets in its line) and its claim word's states.
pub mod capture_slot {
    /// `(state << 62) | occupancy`.
    pub const CLAIM: u64 = 0;
    /// Arrival mask of phase `p` (0 = BEFORE, 1 = AFTER): `ARRIVED + 8 p`.
    pub const ARRIVED: u64 = 8;
    /// Released mask of phase `p`: `RELEASED + 8 p`.
    pub const RELEASED: u64 = 24;
    /// Publisher word of phase `p`, `(core + 1) << 32 | phase_seq`: `PUBLISHER + 8 p`.
    pub const PUBLISHER: u64 = 40;
    /// `0`, or `1 | (site << 8)` once a participant gave up waiting.
    pub const ABORTED: u64 = 56;
    /// Nobody has claimed the slot this run.
    pub const FREE: u64 = 0;
    /// The claimer is initialising the slot; nobody else touches it.
    pub const CLAIMING: u64 = 1;
    /// Initialised: the participants of this occupancy join and capture.
    pub const READY: u64 = 2;
    /// Every participant of this occupancy left the AFTER phase: the next may claim.
    pub const SETTLED: u64 = 3;
    /// Occupancy bits of the claim word.
    pub const OCCUPANCY: u64 = (1 << 62) - 1;
    /// The claim word of `state` and `occupancy`.
    pub const fn claim(state: u64, occupancy: u64) -> u64 {
        (state << 62) | (occupancy & OCCUPANCY)
    }
    /// `(state, occupancy)` of a claim word.
    pub const fn fields(claim: u64) -> (u64, u64) {
        (claim >> 62, claim & OCCUPANCY)
    }
}

/// The two capture phases of a task boundary.
pub mod capture_phase {
    /// Inputs (and in-outs) before any subtask executes.
    pub const BEFORE: u64 = 0;
    /// Outputs (and in-outs) after every subtask wrote them back, before completion.
    pub const AFTER: u64 = 1;
}

/// Words of a core's request line (the core writes them, `TICK` last).
pub mod capture_request {
    /// The run's full epoch.
    pub const EPOCH: u64 = 0;
    /// The task id.
    pub const TASK: u64 = 8;
    /// The phase ([`capture_phase`](super::capture_phase)).
    pub const PHASE: u64 = 16;
    /// The phase's identity, allocated once by its last arriver.
    pub const PHASE_SEQ: u64 = 24;
    /// The argument the publisher expects next (echo of the last acknowledgement).
    pub const ARG_INDEX: u64 = 32;
    /// Payload bytes of that argument already copied (echo).
    pub const CURSOR: u64 = 40;
    /// The rendezvous slot: `cluster << 8 | lane`.
    pub const SLOT: u64 = 48;
    /// Per-request counter, written last: a new value is a new request.
    pub const TICK: u64 = 56;
}

/// Words of an acknowledgement line. The AICPU writes every other word, a store barrier, then
/// `TICK` last: the tick is the line's version (it changes with every answer), so it is the
/// one word every waiter watches, and a read bracketed by two equal ticks is one answer.
pub mod capture_ack {
    /// What the AICPU did with the request ([`capture_status`](super::capture_status)).
    pub const STATUS: u64 = 0;
    /// The next argument to capture.
    pub const ARG_INDEX: u64 = 8;
    /// Payload bytes of it copied so far.
    pub const CURSOR: u64 = 16;
    /// The request tick this answers (written last).
    pub const TICK: u64 = 24;
    /// The run's epoch.
    pub const EPOCH: u64 = 32;
    /// The task id.
    pub const TASK: u64 = 40;
    /// The phase identity.
    pub const PHASE_SEQ: u64 = 48;
}

/// Acknowledgement statuses.
pub mod capture_status {
    /// The request is being served: the publisher asks again (a new tick) for the next step.
    pub const IN_PROGRESS: u64 = 1;
    /// The lane cannot take the record now (no buffer, arena full, or another core's
    /// reservation open): nothing reserved, nothing counted; ask again.
    pub const WOULD_BLOCK: u64 = 2;
    /// Terminal: every record of the phase is committed.
    pub const SEALED: u64 = 3;
    /// Terminal: the phase was aborted; the participants go to the run's fatal path.
    pub const ABORTED: u64 = 4;
}

impl CaptureLayout {
    /// The layout a launch configuration names, `None` unless the run is resident and dumps.
    pub const fn of(cfg: &LaunchConfig) -> Option<CaptureLayout> {
        if cfg.capture == 0 || cfg.resident == 0 {
            return None;
        }
        Some(CaptureLayout { base: cfg.capture, clusters: cfg.clusters })
    }
    /// Workers (three per cluster).
    pub const fn workers(&self) -> u32 {
        self.clusters * 3
    }
    /// GM address of header word `w` ([`capture_header`]).
    pub const fn header(&self, w: u64) -> u64 {
        self.base + w
    }
    /// GM address of the rendezvous slot of lane `lane` of cluster `c`.
    pub const fn slot(&self, c: u32, lane: u32) -> u64 {
        self.base + 64 + (c as u64 * 3 + lane as u64) * 64
    }
    /// GM address of the occupancy of the publication in lane `lane` of cluster `c`.
    pub const fn occupancy(&self, c: u32, lane: u32) -> u64 {
        self.base + 64 + self.clusters as u64 * 3 * 64 + c as u64 * 64 + lane as u64 * 8
    }
    /// GM address of the last occupancy handed out for slot `(c, lane)`.
    pub const fn occupancy_issued(&self, c: u32, lane: u32) -> u64 {
        self.occupancy(c, lane) + 24
    }
    /// GM address of worker `w`'s request line.
    pub const fn request(&self, w: u32) -> u64 {
        self.base + 64 + self.clusters as u64 * 4 * 64 + w as u64 * 64
    }
    /// GM address of worker `w`'s acknowledgement line.
    pub const fn ack(&self, w: u32) -> u64 {
        self.request(self.workers()) + w as u64 * 64
    }
    /// Bytes of the whole region.
    pub const fn bytes(&self) -> u64 {
        self.ack(self.workers()) - self.base
    }
}

/// Where a run's trace rings sit: one ring per worker (AICore), then one per AICPU thread.
/// A ring is a [`TraceHeader`] line followed by its records ([`TraceRecord`]); each ring has
/// exactly one writer (its core or its thread), which stores every word device-direct
/// (`GmAtomic::store_direct`), so no line of a ring is ever in a cache and no maintenance is
/// needed on either tier. The host reads the rings after the run's fence.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TraceLayout {
    /// GM address of the first ring (64-byte aligned).
    pub base: u64,
    /// Workers (AICore rings).
    pub workers: u32,
    /// AICPU threads (thread rings).
    pub threads: u32,
    /// Records per core ring.
    pub core_records: u32,
    /// Records per thread ring.
    pub thread_records: u32,
}

impl TraceLayout {
    /// Bytes of one ring of `records` records, rounded up to whole lines.
    pub const fn ring_bytes(records: u32) -> u64 {
        (size_of::<TraceHeader>() as u64 + records as u64 * size_of::<TraceRecord>() as u64).next_multiple_of(64)
    }
    /// The layout a launch configuration names, `None` when tracing is off.
    pub const fn of(cfg: &LaunchConfig) -> Option<TraceLayout> {
        if cfg.trace == 0 {
            return None;
        }
        Some(TraceLayout {
            base: cfg.trace,
            workers: cfg.workers,
            threads: cfg.aicpu_threads,
            core_records: cfg.trace_core_records,
            thread_records: cfg.trace_thread_records,
        })
    }
    /// GM address of worker `w`'s ring.
    pub const fn core_ring(&self, w: u32) -> u64 {
        self.base + w as u64 * Self::ring_bytes(self.core_records)
    }
    /// GM address of AICPU thread `t`'s ring.
    pub const fn thread_ring(&self, t: u32) -> u64 {
        self.core_ring(self.workers) + t as u64 * Self::ring_bytes(self.thread_records)
    }
    /// Bytes of every ring.
    pub const fn bytes(&self) -> u64 {
        self.thread_ring(self.threads) - self.base
    }
}

/// Head line of a trace ring, written by the ring's owner when it is done with the run.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct TraceHeader {
    /// The run's epoch, stored last: a header with another epoch was not written by this run
    /// (its owner never finished), and the ring's records are unknown.
    pub epoch: u64,
    /// Records stored (at most the ring's capacity).
    pub count: u64,
    /// Records that did not fit (counted, never silently lost).
    pub dropped: u64,
    /// Reserved.
    pub reserved: [u64; 5],
}

/// Kinds of [`TraceRecord`].
pub mod trace_kind {
    /// AICore: one subtask ran (`start`..`end` on the core).
    pub const SUBTASK: u8 = 1;
    /// AICPU: a subtask was dispatched (DMB written) at `start`.
    pub const DISPATCH: u8 = 2;
    /// AICPU: a subtask's FIN was seen at `start`.
    pub const COMPLETE: u8 = 3;
    /// AICPU phase: the orchestration function ran (device-side runtime).
    pub const ORCHESTRATION: u8 = 4;
    /// AICPU phase: a dispatch pass that placed work.
    pub const DISPATCHING: u8 = 5;
    /// AICPU phase: a completion poll that retired work.
    pub const COMPLETING: u8 = 6;
    /// AICPU phase: waiting for an event.
    pub const IDLE: u8 = 7;
    /// AICPU phase: handshaking its cores.
    pub const HANDSHAKE: u8 = 8;
    /// AICPU phase: retiring its cores.
    pub const RETIRE: u8 = 9;
    /// AICPU, the device-side runtime's orchestrator: a dependency found at submission, at
    /// `start`: `task` is the consumer, `block` the producer (both task ids as kernels see
    /// them). Producers include allocation records (`Orch::alloc`), which never run.
    pub const EDGE: u8 = 10;
    /// AICPU phase: watching a resident run until it completes.
    pub const SUPERVISE: u8 = 11;
}

/// One trace record: a subtask on a core, a scheduler event or a phase of an AICPU thread.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TraceRecord {
    /// [`trace_kind`].
    pub kind: u8,
    /// Lane (0 = AIC, 1 = AIV lane 0, 2 = AIV lane 1) of a subtask record.
    pub lane: u8,
    /// Reserved.
    pub reserved0: u16,
    /// Worker index the record is about (its own for a core ring).
    pub core: u32,
    /// Task id (as kernels see it).
    pub task: u32,
    /// SPMD block.
    pub block: u32,
    /// Kernel binary handle (maps to a func id on the host).
    pub bin: u64,
    /// Start tick (the event's tick for an instant).
    pub start: u64,
    /// End tick (= `start` for an instant).
    pub end: u64,
    /// Subtask on the resident executor: when the core found the subtask published in its
    /// lane's dispatch slot (0 on the legacy executor, where the dispatching AICPU thread
    /// records it).
    pub dispatch: u64,
    /// Subtask on the resident executor: when the core had released the task's consumers
    /// (0 on the legacy executor, where the AICPU thread that saw its FIN records it).
    pub completion: u64,
    /// Reserved.
    pub reserved: u64,
}

/// The first-wins fatal latch: one line, touched only through `GmAtomic`.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct FatalLine {
    /// 0 = free; the first agent to CAS it to 1 owns the remaining words.
    pub claimed: u64,
    /// The [`ErrorCode`](crate::codes::ErrorCode) value.
    pub code: u64,
    /// The [`Site`](crate::codes::Site) value.
    pub site: u64,
    /// Task id involved, or `u64::MAX`.
    pub task: u64,
    /// Worker index involved, or `u64::MAX`.
    pub core: u64,
    /// Site-specific detail (e.g. the raw register value).
    pub detail: u64,
    /// Set to 1 after the words above are stored.
    pub complete: u64,
    /// Reserved.
    pub reserved: u64,
}

/// Run counters, touched only through `GmAtomic`; read by the host after the run.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct RunLine {
    /// Tasks completed.
    pub completed: u64,
    /// Subtasks dispatched to cores.
    pub dispatched: u64,
    /// Cores that handshook.
    pub cores_ready: u64,
    /// Cores released through their teardown gate.
    pub cores_released: u64,
    /// AICPU threads that finished.
    pub threads_done: u64,
    /// Device-side runtime: ticks the orchestration function's whole call took (its waits
    /// for ring space and tensor data included).
    pub orch_ticks: u64,
    /// Resident executor: [`resident_ready_word`] of this run's epoch once the AICPU validated
    /// the image (stored device-direct by the booting thread); cores read it device-direct,
    /// never from their cached copy of the configuration, and accept only their own run's
    /// word, so a value a previous run left cannot start them.
    pub resident_ready: u64,
    /// Reserved.
    pub reserved: u64,
}

/// The launch descriptor head: configuration, fatal latch, counters.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct LaunchDesc {
    /// Host-written configuration.
    pub config: LaunchConfig,
    /// Fatal latch.
    pub fatal: FatalLine,
    /// Counters.
    pub run: RunLine,
    /// Text of the latched fault (UTF-8, NUL-padded): written only by the latch winner.
    pub fault_text: FaultText,
}

/// Text of the latched fault: six lines ([`FAULT_TEXT_BYTES`]), enough for a kernel's
/// message and its location, written only by the agent that won the latch, with
/// device-direct stores (so no cache maintenance is involved in either tier).
#[derive(Copy, Clone, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct FaultText {
    /// UTF-8 bytes, NUL-padded.
    pub bytes: [u8; FAULT_TEXT_BYTES],
}

/// Bytes of [`FaultText`].
pub const FAULT_TEXT_BYTES: usize = 384;

impl Default for FaultText {
    fn default() -> Self {
        FaultText { bytes: [0; FAULT_TEXT_BYTES] }
    }
}

/// Where one pipeline slot's per-run structures sit in its device allocation (the arena):
/// the [`LaunchDesc`], then per worker a [`Handshake`] line, a [`TeardownGate`] line and two
/// [`DispatchPayload`] lines. The host lays the arena out with it and publishes the addresses
/// in [`LaunchConfig`]; the device finds each worker's lines with the same strides.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SlotArena {
    /// Workers the arena has lines for.
    pub workers: u32,
}

impl SlotArena {
    /// Bytes per worker of each array.
    pub const HANDSHAKE_STRIDE: u64 = size_of::<Handshake>() as u64;
    /// Bytes per worker of the gate array.
    pub const GATE_STRIDE: u64 = size_of::<TeardownGate>() as u64;
    /// Bytes per worker of the payload array (two buffers).
    pub const PAYLOAD_STRIDE: u64 = 2 * size_of::<DispatchPayload>() as u64;

    /// Offset of the handshake array from the arena's start.
    pub const fn handshakes(&self) -> u64 {
        size_of::<LaunchDesc>() as u64
    }
    /// Offset of the gate array.
    pub const fn gates(&self) -> u64 {
        self.handshakes() + self.workers as u64 * Self::HANDSHAKE_STRIDE
    }
    /// Offset of the payload array.
    pub const fn payloads(&self) -> u64 {
        self.gates() + self.workers as u64 * Self::GATE_STRIDE
    }
    /// Bytes of the whole arena.
    pub const fn bytes(&self) -> u64 {
        self.payloads() + self.workers as u64 * Self::PAYLOAD_STRIDE
    }
}

/// A worker's handshake report: one line, written only by that worker's AICore.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct Handshake {
    /// `block_idx + 1` once reported.
    pub aicore_done: u32,
    /// `CoreType` as u32.
    pub core_type: u32,
    /// The core's physical id (indexes the register windows).
    pub physical_core_id: u32,
    /// Reserved.
    pub reserved0: u32,
    /// The run epoch the report belongs to; the AICPU accepts only its own run's.
    pub report_epoch: u64,
    /// Reserved.
    pub reserved: [u64; 5],
}

/// A worker's post-close teardown gate: one line, atomics only.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct TeardownGate {
    /// Epoch of the run whose AICPU released this worker (after EXITED, close, read-back, rmb).
    pub release: u64,
    /// Reserved: nothing else may live on this line.
    pub reserved: [u64; 7],
}

/// [`LaunchConfig::runtime`]: the host-built graph.
pub const RUNTIME_HBG: u32 = 0;
/// [`LaunchConfig::runtime`]: device-side orchestration over the tensor map and rings.
pub const RUNTIME_TRB: u32 = 1;
/// Magic of an orchestration image ("PTOR").
pub const ORCH_MAGIC: u32 = 0x524f_5450;
/// Ring depths of the device-side runtime (scope depth `d` uses ring `min(d, RINGS - 1)`).
pub const RINGS: usize = 4;

/// Sizes and placement of one ring of the device-side runtime.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RingSpec {
    /// Task-window slots (a power of two).
    pub window: u32,
    /// Dependency-list pool entries.
    pub dep_pool: u32,
    /// Heap bytes.
    pub heap: u64,
    /// GM address of the heap.
    pub heap_base: u64,
}

/// What the host hands the device-side orchestrator: the program, its arguments, the rings.
/// Followed by `FuncEntry[func_count]`, `OrchTensor[tensor_count]`, `u64[scalar_count]`.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct OrchImage {
    /// [`ORCH_MAGIC`].
    pub magic: u32,
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// The orchestration program's handle.
    pub program: u64,
    /// Total length in bytes.
    pub total_len: u64,
    /// Entries of the func table.
    pub func_count: u32,
    /// Tensor arguments.
    pub tensor_count: u32,
    /// Scalar arguments.
    pub scalar_count: u32,
    /// Most live tensor-map entries.
    pub tensormap_entries: u32,
    /// Budget of an orchestrator wait (tensor data, flow control), in ticks.
    pub wait_ticks: u64,
    /// [`orch_flags`].
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// The rings.
    pub rings: [RingSpec; RINGS],
}

/// Bits of [`OrchImage::flags`].
pub mod orch_flags {
    /// The run may use AIV cores only: AIC and MIX tasks are refused at submission.
    pub const AIV_ONLY: u32 = 1;
}

/// A tensor argument of an orchestration.

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct OrchTensor {
    /// Buffer identity (for dependency discovery).
    pub buffer_id: u64,
    /// Buffer address.
    pub addr: u64,
    /// Buffer bytes.
    pub bytes: u64,
    /// Element offset of the view.
    pub offset: u64,
    /// `DType` code.
    pub dtype: u32,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; 5],
    /// Strides in elements.
    pub strides: [u32; 5],
}

/// One dispatch: what a core runs for one per-core dispatch id. Two per worker.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DispatchPayload {
    /// Kernel binary address.
    pub bin: u64,
    /// GM address of the task's [`ArgsHeader`] in the image.
    pub args: u64,
    /// Graph task id.
    pub task_id: u32,
    /// SPMD block index.
    pub block_idx: u32,
    /// SPMD block count.
    pub block_num: u32,
    /// AIV lane inside a MIX task (0 or 1); 0 otherwise.
    pub lane: u32,
    /// The dispatch id this payload belongs to.
    pub reg_task_id: u32,
    /// Reserved.
    pub reserved0: u32,
    /// Reserved.
    pub reserved: [u64; 3],
}

/// Head of a graph image.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(8))]
pub struct ImageHeader {
    /// [`IMAGE_MAGIC`].
    pub magic: u32,
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// Number of tasks.
    pub task_count: u32,
    /// Entries of the func table.
    pub func_count: u32,
    /// Total image length in bytes.
    pub total_len: u64,
    /// Offset of `TaskRecord[task_count]` from the image start.
    pub tasks_off: u64,
    /// Offset of the fan-out id array (`u32`s).
    pub fanout_off: u64,
    /// Entries of the fan-out array.
    pub fanout_len: u64,
    /// Offset of `FuncEntry[func_count]`.
    pub funcs_off: u64,
    /// Offset of the args region.
    pub args_off: u64,
}

/// Task shapes: which cores a task occupies.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[repr(u8)]
pub enum Shape {
    /// One AIC.
    Aic = 0,
    /// One AIV.
    Aiv = 1,
    /// A whole cluster: AIC + both AIVs (1C2V), placed together.
    Mix = 2,
    /// No core: completed by the scheduler.
    Dummy = 3,
}

impl Shape {
    /// Number of shapes with a ready queue (all but dummy).
    pub const QUEUED: usize = 3;
}

/// Lane bits of a task's active mask.
pub mod lanes {
    /// The AIC lane.
    pub const AIC: u8 = 0b001;
    /// AIV lane 0.
    pub const AIV0: u8 = 0b010;
    /// AIV lane 1.
    pub const AIV1: u8 = 0b100;
    /// Every lane of a MIX task.
    pub const MIX: u8 = AIC | AIV0 | AIV1;
}

/// One task of the image.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TaskRecord {
    /// Func id per lane (AIC, AIV0, AIV1); `NO_FUNC` where the lane is unused.
    pub funcs: [u16; 3],
    /// [`Shape`] value.
    pub shape: u8,
    /// Active lanes ([`lanes`]).
    pub lanes: u8,
    /// SPMD block count (≥ 1).
    pub block_num: u32,
    /// Producers this task waits for.
    pub fanin: u32,
    /// First consumer in the fan-out array.
    pub fanout_start: u32,
    /// Number of consumers.
    pub fanout_count: u32,
    /// Offset of this task's [`ArgsHeader`] relative to this record (self-relative).
    pub args_rel: i32,
    /// Length of the args record in bytes.
    pub args_len: u32,
}

/// "No kernel on this lane."
pub const NO_FUNC: u16 = u16::MAX;

/// Kernel binaries of one func id, per core type (0 = not loaded for that type).
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FuncEntry {
    /// Binary address for AIC cores.
    pub aic: u64,
    /// Binary address for AIV cores.
    pub aiv: u64,
}

/// Head of one task's argument record; followed by `TensorDesc[tensors]` then `u64[scalars]`.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct ArgsHeader {
    /// Tensor arguments.
    pub tensors: u32,
    /// Scalar arguments.
    pub scalars: u32,
    /// GM address of the task's 4-byte predicate, 0 when it has none.
    pub predicate: u64,
    /// [`args_flags`].
    pub flags: u32,
    /// Scalars marked for the args dump: bit `i` = scalar `i`.
    pub dump_scalars: u32,
    /// Func id per lane (AIC, AIV0, AIV1), [`NO_FUNC`] where unused: what the args dump
    /// stamps on the task's records.
    pub funcs: [u16; 3],
    /// Reserved, zero.
    pub reserved: u16,
}

/// Bytes of an [`ArgsHeader`]: where the tensor descriptors of an argument record start.
pub const ARGS_HEAD: u64 = size_of::<ArgsHeader>() as u64;

/// Bits of [`ArgsHeader::flags`].
pub mod args_flags {
    /// All SPMD blocks start together.
    pub const SYNC_START: u32 = 1;
    /// Every defined bit.
    pub const ALL: u32 = SYNC_START;
}

/// A tensor argument as stored in the image.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TensorDesc {
    /// Address of the view's first element.
    pub addr: u64,
    /// `DType` code.
    pub dtype: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; 5],
    /// Strides in elements.
    pub strides: [u32; 5],
    /// [`TENSOR_WRITTEN`] when the task writes through this argument.
    pub flags: u32,
}

/// [`TensorDesc::flags`]: the task writes through this argument, so the executor publishes
/// its lines before FIN.
pub const TENSOR_WRITTEN: u32 = 1;
/// [`TensorDesc::flags`]: the task reads through this argument (the args dump captures it
/// before dispatch).
pub const TENSOR_READ: u32 = 2;
/// [`TensorDesc::flags`]: the argument is marked for the args dump (`Task::dump`).
pub const TENSOR_DUMP: u32 = 4;

impl TensorDesc {
    /// As the HAL's kernel-facing value.
    pub fn to_arg(&self) -> pto_hal::TensorArg {
        pto_hal::TensorArg {
            addr: pto_hal::GmAddr(self.addr),
            dtype: self.dtype,
            elem_bytes: self.elem_bytes,
            ndims: self.ndims,
            shape: self.shape,
            strides: self.strides,
        }
    }
}

/// Most tensor arguments of one task.
pub const MAX_TENSOR_ARGS: usize = 32;
/// Most scalar arguments of one task.
pub const MAX_SCALAR_ARGS: usize = 16;
/// Most func ids.
pub const MAX_FUNC_ID: u32 = 1024;

// ------------------------------------------------------------------------------- args dump

/// [`DumpHeader::magic`]: "DUMP".
pub const DUMP_MAGIC: u32 = 0x504d_5544;

/// Head line of a run's args-dump region, written by the host before launch (the AICPU reads
/// it after making host DMA visible). The lanes follow it ([`DumpLayout`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpHeader {
    /// [`DUMP_MAGIC`].
    pub magic: u32,
    /// The dump level's code (`DumpLevel`: 1 partial, 2 full, 3 hybrid).
    pub level: u32,
    /// Lanes (one per AICPU thread of the launch).
    pub lanes: u32,
    /// Metadata buffers per lane.
    pub buffers: u32,
    /// Records per metadata buffer.
    pub records: u32,
    /// Reserved, zero.
    pub reserved0: u32,
    /// Payload arena bytes per lane (a multiple of 64).
    pub arena: u64,
    /// How long a blocking capture waits for the host to free room, in device ticks; then
    /// the record is dropped (and counted).
    pub wait_ticks: u64,
    /// The run's epoch (a closed lane stores it as its last word).
    pub epoch: u64,
    /// Reserved, zero.
    pub reserved: [u64; 2],
}

/// A lane's AICPU-written line: every word stored device-direct by the lane's thread, the
/// ready tail last (after a store barrier) when a buffer is published.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpLaneState {
    /// Ready-queue entries published (monotonic).
    pub ready_tail: u64,
    /// Logical arena offset up to which payload bytes belong to published buffers (monotonic;
    /// the physical offset is this modulo the arena size).
    pub published: u64,
    /// Records committed and published.
    pub committed: u64,
    /// Records dropped (refused, abandoned, or given up after the wait budget).
    pub dropped: u64,
    /// The run's epoch, stored last when the lane is closed: until then the lane's counters
    /// are not final.
    pub closed: u64,
    /// Reserved, zero.
    pub reserved: [u64; 3],
}

/// A lane's host-written line: every word stored with `DeviceMemory::store_word` and read by
/// the AICPU device-direct.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpLaneAck {
    /// Ready-queue entries the host consumed.
    pub ready_head: u64,
    /// Logical arena offset up to which the host took the payload bytes (back-pressure: the
    /// producer never writes a byte `arena` or more past it).
    pub completed: u64,
    /// Free-queue entries the host pushed (monotonic).
    pub free_tail: u64,
    /// Reserved, zero.
    pub reserved: [u64; 5],
}

/// One ready-queue entry: a metadata buffer the AICPU published.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DumpReady {
    /// The buffer's index in the lane.
    pub buffer: u32,
    /// Records in it.
    pub count: u32,
    /// Logical arena offset at the end of its payloads (what the host acknowledges).
    pub end: u64,
}

/// [`DumpRecord::stage`] values.
pub mod dump_stage {
    /// Inputs and in-outs as the task will read them, before its first dispatch.
    pub const BEFORE_DISPATCH: u8 = 0;
    /// Outputs and in-outs as written, after its completion.
    pub const AFTER_COMPLETION: u8 = 1;
}

/// [`DumpRecord::direction`] values.
pub mod dump_direction {
    /// Read only.
    pub const INPUT: u8 = 0;
    /// Written only.
    pub const OUTPUT: u8 = 1;
    /// Read and written.
    pub const INOUT: u8 = 2;
}

/// [`DumpRecord::flags`] bits.
pub mod dump_flags {
    /// The payload is a prefix: the view was larger than the arena clamp (arena / 2).
    pub const TRUNCATED: u8 = 1;
    /// The argument is a scalar (its value is in the record; no payload).
    pub const SCALAR: u8 = 2;
}

/// One captured argument: two lines, written by the lane's thread into a metadata buffer.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpRecord {
    /// The task (its report id).
    pub task: u32,
    /// Argument index: tensors first, then scalars.
    pub arg: u16,
    /// [`dump_stage`].
    pub stage: u8,
    /// [`dump_direction`].
    pub direction: u8,
    /// Func ids of the task's lanes (AIC, AIV0, AIV1); [`NO_FUNC`] where unused.
    pub func_ids: [u16; 3],
    /// Func ids in use.
    pub func_count: u8,
    /// [`dump_flags`].
    pub flags: u8,
    /// `DType` code.
    pub dtype: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Device address of the view's first element.
    pub addr: u64,
    /// Logical arena offset of the payload.
    pub payload_offset: u64,
    /// Payload bytes copied (the view's logical bytes, or the clamp when truncated; 0 for a
    /// record without payload).
    pub payload_len: u64,
    /// Bytes of the whole view (elements × element size).
    pub view_bytes: u64,
    /// A scalar's value.
    pub scalar: u64,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; 5],
    /// Strides in elements.
    pub strides: [u32; 5],
    /// Reserved, zero.
    pub reserved0: u32,
    /// The record's sequence number in its lane (commit order).
    pub seq: u64,
    /// Reserved, zero.
    pub reserved: u64,
}

/// Where one run's dump lanes sit: the [`DumpHeader`] line, then per lane its state line, its
/// ack line, its ready ring (`buffers` entries), its free ring (`buffers` words), its metadata
/// buffers and its payload arena — each part 64-byte aligned, so every line has one writer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DumpLayout {
    /// GM address of the header.
    pub base: u64,
    /// The header.
    pub header: DumpHeader,
}

impl DumpLayout {
    const fn ring_bytes(buffers: u32) -> u64 {
        (buffers as u64 * size_of::<DumpReady>() as u64).next_multiple_of(64)
    }
    const fn free_bytes(buffers: u32) -> u64 {
        (buffers as u64 * 8).next_multiple_of(64)
    }
    /// Bytes of one metadata buffer.
    pub const fn buffer_bytes(&self) -> u64 {
        self.header.records as u64 * size_of::<DumpRecord>() as u64
    }
    /// Bytes of one lane (checked: `None` when the sizes overflow).
    pub const fn lane_bytes(h: &DumpHeader) -> Option<u64> {
        let fixed = 128 + Self::ring_bytes(h.buffers) + Self::free_bytes(h.buffers);
        let Some(meta) = (h.buffers as u64).checked_mul(h.records as u64 * size_of::<DumpRecord>() as u64) else {
            return None;
        };
        let Some(x) = fixed.checked_add(meta) else { return None };
        x.checked_add(h.arena.next_multiple_of(64))
    }
    /// Bytes of the whole region (checked).
    pub const fn region_bytes(h: &DumpHeader) -> Option<u64> {
        let Some(l) = Self::lane_bytes(h) else { return None };
        let Some(all) = l.checked_mul(h.lanes as u64) else { return None };
        all.checked_add(64)
    }
    /// GM address of lane `t`'s state line.
    pub const fn lane(&self, t: u32) -> u64 {
        // The region was sized with checked arithmetic before it was allocated.
        match Self::lane_bytes(&self.header) {
            Some(l) => self.base + 64 + t as u64 * l,
            None => 0,
        }
    }
    /// GM address of lane `t`'s ack line.
    pub const fn ack(&self, t: u32) -> u64 {
        self.lane(t) + 64
    }
    /// GM address of lane `t`'s ready-queue entry `i` (modulo the ring).
    pub const fn ready(&self, t: u32, i: u64) -> u64 {
        self.lane(t) + 128 + (i % self.header.buffers as u64) * size_of::<DumpReady>() as u64
    }
    /// GM address of lane `t`'s free-queue word `i` (modulo the ring).
    pub const fn free(&self, t: u32, i: u64) -> u64 {
        self.lane(t) + 128 + Self::ring_bytes(self.header.buffers) + (i % self.header.buffers as u64) * 8
    }
    /// GM address of lane `t`'s metadata buffer `b`.
    pub const fn buffer(&self, t: u32, b: u32) -> u64 {
        self.lane(t)
            + 128
            + Self::ring_bytes(self.header.buffers)
            + Self::free_bytes(self.header.buffers)
            + b as u64 * self.buffer_bytes()
    }
    /// GM address of lane `t`'s payload arena.
    pub const fn arena(&self, t: u32) -> u64 {
        self.buffer(t, self.header.buffers)
    }
}

const _: () = {
    assert!(size_of::<LaunchConfig>() == 192);
    assert!(offset_of!(LaunchConfig, executor) == 128);
    assert!(offset_of!(LaunchConfig, resident) == 144);
    assert!(offset_of!(LaunchConfig, core_wait_ticks) == 96);
    assert!(offset_of!(LaunchConfig, trace) == 104);
    assert!(offset_of!(LaunchConfig, trace_core_records) == 112);
    assert!(offset_of!(LaunchConfig, trace_thread_records) == 116);
    assert!(offset_of!(LaunchConfig, dump) == 120);
    assert!(offset_of!(LaunchConfig, capture) == 152);
    assert!(size_of::<TraceHeader>() == 64);
    assert!(size_of::<TraceRecord>() == 64);
    assert!(offset_of!(TraceRecord, bin) == 16);
    assert!(offset_of!(TraceRecord, start) == 24);
    assert!(size_of::<FatalLine>() == 64);
    assert!(size_of::<RunLine>() == 64);
    assert!(size_of::<LaunchDesc>() == 320 + FAULT_TEXT_BYTES);
    assert!(offset_of!(LaunchDesc, fault_text) == 320);
    assert!(offset_of!(LaunchDesc, fatal) == 192);
    assert!(offset_of!(LaunchDesc, run) == 256);
    assert!(size_of::<Handshake>() == 64);
    assert!(offset_of!(Handshake, aicore_done) == 0);
    assert!(offset_of!(Handshake, physical_core_id) == 8);
    assert!(offset_of!(Handshake, report_epoch) == 16);
    assert!(size_of::<TeardownGate>() == 64);
    assert!(size_of::<DispatchPayload>() == 64);
    assert!(size_of::<ImageHeader>() == 64);
    assert!(size_of::<TaskRecord>() == 32);
    assert!(size_of::<FuncEntry>() == 16);
    assert!(size_of::<ArgsHeader>() == 32);

    assert!(size_of::<TensorDesc>() == 64);
    assert!(size_of::<DumpHeader>() == 64);
    assert!(size_of::<DumpLaneState>() == 64);
    assert!(size_of::<DumpLaneAck>() == 64);
    assert!(size_of::<DumpReady>() == 16);
    assert!(size_of::<DumpRecord>() == 128);
    assert!(offset_of!(DumpRecord, payload_offset) == 32);
    assert!(offset_of!(DumpRecord, ndims) == 64);
    assert!(offset_of!(DumpRecord, seq) == 112);
    assert!(size_of::<RingSpec>() == 24);
    assert!(size_of::<OrchImage>() == 56 + 24 * RINGS);
    assert!(size_of::<OrchTensor>() == 80);

    assert!(offset_of!(TensorDesc, shape) == 20);
};

/// Byte offsets of words the device touches with `GmAtomic`, relative to the descriptor.
pub mod offsets {
    use super::*;
    /// [`FatalLine::claimed`].
    pub const FATAL_CLAIMED: u64 = offset_of!(LaunchDesc, fatal) as u64;
    /// [`FatalLine::code`].
    pub const FATAL_CODE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, code) as u64;
    /// [`FatalLine::site`].
    pub const FATAL_SITE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, site) as u64;
    /// [`FatalLine::task`].
    pub const FATAL_TASK: u64 = FATAL_CLAIMED + offset_of!(FatalLine, task) as u64;
    /// [`FatalLine::core`].
    pub const FATAL_CORE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, core) as u64;
    /// [`FatalLine::detail`].
    pub const FATAL_DETAIL: u64 = FATAL_CLAIMED + offset_of!(FatalLine, detail) as u64;
    /// [`FatalLine::complete`].
    pub const FATAL_COMPLETE: u64 = FATAL_CLAIMED + offset_of!(FatalLine, complete) as u64;
    /// [`RunLine::completed`].
    pub const RUN_COMPLETED: u64 = offset_of!(LaunchDesc, run) as u64;
    /// [`RunLine::dispatched`].
    pub const RUN_DISPATCHED: u64 = RUN_COMPLETED + offset_of!(RunLine, dispatched) as u64;
    /// [`RunLine::cores_ready`].
    pub const RUN_CORES_READY: u64 = RUN_COMPLETED + offset_of!(RunLine, cores_ready) as u64;
    /// [`RunLine::cores_released`].
    pub const RUN_CORES_RELEASED: u64 = RUN_COMPLETED + offset_of!(RunLine, cores_released) as u64;
    /// [`RunLine::threads_done`].
    pub const RUN_THREADS_DONE: u64 = RUN_COMPLETED + offset_of!(RunLine, threads_done) as u64;
    /// [`RunLine::orch_ticks`].
    pub const RUN_ORCH_TICKS: u64 = RUN_COMPLETED + offset_of!(RunLine, orch_ticks) as u64;
    /// [`RunLine::resident_ready`].
    pub const RUN_RESIDENT_READY: u64 = RUN_COMPLETED + offset_of!(RunLine, resident_ready) as u64;

    /// [`LaunchDesc::fault_text`].
    pub const FAULT_TEXT: u64 = offset_of!(LaunchDesc, fault_text) as u64;
}

#[cfg(test)]
mod tests {
    use super::regs::*;

    #[test]
    fn dispatch_ids_alternate_parity_and_skip_reserved() {
        let mut id = 0;
        for _ in 0..10 {
            let n = next_id(id);
            assert_ne!(n, 0);
            assert_ne!(n & 1, id & 1);
            id = n;
        }
        let near = RESERVED_MIN - 1;
        let n = next_id(near);
        assert!(n < RESERVED_MIN && n != 0);
        assert_ne!(n & 1, near & 1, "wrap keeps parity alternating");
        assert_eq!(fin(5) & COND_FIN, COND_FIN);
        assert_eq!(ack(5), 5);
    }
}
