//! The resident route's boundary-capture control region (the args dump on that route):
//! rendezvous slots, occupancy lines, request and acknowledgement lines.
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | header lines (epoch, budgets) | host (H2D before launch) | cores, AICPU |
//! | header counters | the AICPU capture service, atomics | host (after the fence) |
//! | rendezvous slots | cores and the service, 64-bit GM atomics only | cores, the service |
//! | occupancy line of a cluster | the holder of the cluster's dispatch token, device-direct | that cluster's cores |
//! | request line (1 per worker) | that worker's core, device-direct | the AICPU capture service |
//! | acknowledgement line (1 per worker) | the AICPU thread serving that core, device-direct, tick last | that core |

use super::LaunchConfig;

/// The resident executor's boundary-capture control region (the args dump on the resident
/// route: `docs/args-dump.md`), reserved only when the dump is on. Every line is 64 bytes and
/// every word of it is touched only by 64-bit GM atomics or device-direct stores and queries,
/// never as a cached line:
///
/// * lines 0–1, the header: the dump level, the service step bound `max_bytes` and the
///   participants' wait budget (host-written), then the counters the host reads back
///   ([`capture_header`]: service steps — progress for the watchdogs —, WOULD_BLOCK answers,
///   the largest step, phases requested, slots claimed; on line 1 the service's order
///   counters: overtakes, answers given while a reservation was open, ABORTED answers written
///   and taken);
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
    /// Service steps taken by the AICPU threads, added by each thread at every step that
    /// leaves its phase unsealed (progress for the idle cores' watchdog while a capture takes
    /// several steps) and, for the steps that sealed a phase, later: a sealed phase's progress
    /// shows in the task's completion. Exact once every thread has finished serving.
    pub const SERVED: u64 = 24;
    /// WOULD_BLOCK answers given (AICPU threads, fetch-add).
    pub const WOULD_BLOCK: u64 = 32;
    /// Most payload bytes one service step copied (AICPU threads, compare-and-swap maximum).
    pub const LARGEST_STEP: u64 = 40;
    /// Phases requested: each core counts the phases it published and adds its count
    /// (fetch-add) when it leaves the run.
    pub const REQUESTS: u64 = 48;
    /// Rendezvous slots claimed (each claim's winner, fetch-add; only gangs claim).
    pub const CLAIMS: u64 = 56;
    /// Records begun for a request while an earlier-observed request of the same AICPU thread
    /// was still in flight (AICPU threads, fetch-add): 0 when every thread serves in order of
    /// first observation.
    pub const OVERTAKES: u64 = 64;
    /// Answers given to other cores' requests while a reservation was open between its chunks
    /// (AICPU threads, fetch-add): the service goes on answering while it copies a large
    /// argument step by step.
    pub const ANSWERED_WHILE_OPEN: u64 = 72;
    /// ABORTED acknowledgements the AICPU threads wrote (one per aborted phase; fetch-add).
    pub const ABORTS_ANSWERED: u64 = 80;
    /// Participants (publishers and peers) that took an ABORTED acknowledgement as their
    /// phase's answer (cores, fetch-add).
    pub const ABORTS_TAKEN: u64 = 88;
    /// Requests written for AICPU thread `t` (`ASKED + 8 (t % ASKED_COUNTERS)`; the thread
    /// serving cluster `c` is `c % threads`), as an [`asked_word`]: each core, after it wrote
    /// a request (a new tick) on its line, adds 1 to the count and names itself, in one
    /// compare-and-swap. The serving thread reads its cores' request lines only when the word
    /// moved, and sleeps on it; when the count moved by exactly one it reads the named core's
    /// line alone. Threads `ASKED_COUNTERS` apart share one (a spurious scan, nothing missed).
    pub const ASKED: u64 = 96;
    /// Counters at [`ASKED`].
    pub const ASKED_COUNTERS: u32 = 4;
    /// The count's bits in an [`asked_word`] (above the worker field).
    pub const ASKED_COUNT_MASK: u64 = (1 << 48) - 1;

    /// An `ASKED` word: `count` (48 bits) above worker `w + 1` (16 bits; 0 when `w` does not
    /// fit: no core named, so the reader reads every line).
    pub const fn asked_word(count: u64, w: u32) -> u64 {
        let who = if w < 0xFFFF { w as u64 + 1 } else { 0 };
        ((count & ASKED_COUNT_MASK) << 16) | who
    }

    /// `(count, worker)` of an [`asked_word`].
    pub const fn asked_fields(word: u64) -> (u64, Option<u32>) {
        let who = word & 0xFFFF;
        (word >> 16, if who == 0 { None } else { Some(who as u32 - 1) })
    }
    /// Bytes of the header (two lines).
    pub const BYTES: u64 = 128;
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
///
/// What changes from one phase to the next is packed into as few words as it fits (the task,
/// phase and slot in [`WHICH`](capture_request::WHICH)), so a new request stores, and the
/// AICPU reads, fewer words.
pub mod capture_request {
    /// The run's full epoch.
    pub const EPOCH: u64 = 0;
    /// Which phase is asked for, as a [`which`] word: the task id, the phase
    /// ([`capture_phase`](super::capture_phase)) and the rendezvous slot.
    pub const WHICH: u64 = 8;
    /// The phase's identity, allocated once by its last arriver (32 bits).
    pub const PHASE_SEQ: u64 = 16;
    /// The argument the publisher expects next (echo of the last acknowledgement).
    pub const ARG_INDEX: u64 = 24;
    /// Payload bytes of that argument already copied (echo).
    pub const CURSOR: u64 = 32;
    /// Per-request counter, written last: a new value is a new request.
    pub const TICK: u64 = 56;

    /// A [`WHICH`] word: task `task` (bits 0–31), phase `phase` (bits 32–39) and the
    /// rendezvous slot `slot` = `cluster << 8 | lane` (bits 40–63).
    pub const fn which(task: u64, phase: u64, slot: u64) -> u64 {
        (task & 0xFFFF_FFFF) | (phase & 0xFF) << 32 | slot << 40
    }
    /// `(task, phase, slot)` of a [`which`] word.
    pub const fn which_fields(word: u64) -> (u64, u64, u64) {
        (word & 0xFFFF_FFFF, (word >> 32) & 0xFF, word >> 40)
    }
}

/// Words of an acknowledgement line. The AICPU writes `BEGIN` (the new answer's tick) first, a
/// store-store barrier, every other word, a store barrier, then `TICK` last: the tick is the line's
/// version (it changes with every answer), so it is the one word every waiter watches, and a
/// read that finds `BEGIN` equal to the `TICK` it started from is one answer.
///
/// The status and the next argument share a word ([`state`](capture_ack::state)), as do the
/// task and the phase identity ([`identity`](capture_ack::identity)): a reader reads four
/// words between the ticks.
pub mod capture_ack {
    /// What the AICPU did with the request and the next argument to capture, as a [`state`]
    /// word.
    pub const STATE: u64 = 0;
    /// Payload bytes of that argument copied so far.
    pub const CURSOR: u64 = 8;
    /// The run's epoch.
    pub const EPOCH: u64 = 16;
    /// The task id and the phase identity, as an [`identity`] word.
    pub const IDENTITY: u64 = 24;
    /// The request tick this answers (written last).
    pub const TICK: u64 = 32;
    /// The tick of the answer being written (written first): differs from `TICK` while the
    /// line is rewritten.
    pub const BEGIN: u64 = 56;

    /// A [`STATE`] word: status `status` ([`capture_status`](super::capture_status), bits
    /// 0–31) and the next argument `arg_index` (bits 32–63).
    pub const fn state(status: u64, arg_index: u64) -> u64 {
        (status & 0xFFFF_FFFF) | arg_index << 32
    }
    /// `(status, arg_index)` of a [`state`] word.
    pub const fn state_fields(word: u64) -> (u64, u64) {
        (word & 0xFFFF_FFFF, word >> 32)
    }
    /// An [`IDENTITY`] word: task `task` (bits 32–63) and the 32-bit phase identity
    /// `phase_seq` (bits 0–31).
    pub const fn identity(task: u64, phase_seq: u64) -> u64 {
        task << 32 | (phase_seq & 0xFFFF_FFFF)
    }
    /// `(task, phase_seq)` of an [`identity`] word.
    pub const fn identity_fields(word: u64) -> (u64, u64) {
        (word >> 32, word & 0xFFFF_FFFF)
    }
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
    /// GM address of the [`capture_header::ASKED`] counter of AICPU thread `t`.
    pub const fn asked(&self, t: u32) -> u64 {
        self.header(capture_header::ASKED + 8 * (t % capture_header::ASKED_COUNTERS) as u64)
    }
    /// GM address of the rendezvous slot of lane `lane` of cluster `c`.
    pub const fn slot(&self, c: u32, lane: u32) -> u64 {
        self.base + capture_header::BYTES + (c as u64 * 3 + lane as u64) * 64
    }
    /// GM address of the occupancy of the publication in lane `lane` of cluster `c`.
    pub const fn occupancy(&self, c: u32, lane: u32) -> u64 {
        self.base + capture_header::BYTES + self.clusters as u64 * 3 * 64 + c as u64 * 64 + lane as u64 * 8
    }
    /// GM address of the last occupancy handed out for slot `(c, lane)`.
    pub const fn occupancy_issued(&self, c: u32, lane: u32) -> u64 {
        self.occupancy(c, lane) + 24
    }
    /// GM address of worker `w`'s request line.
    pub const fn request(&self, w: u32) -> u64 {
        self.base + capture_header::BYTES + self.clusters as u64 * 4 * 64 + w as u64 * 64
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::capture_ack::{identity, identity_fields, state, state_fields};
    use super::capture_header::{ASKED_COUNT_MASK, asked_fields, asked_word};
    use super::capture_request::{which, which_fields};
    use super::{capture_phase, capture_status};

    /// An `ASKED` word gives back the count and the worker it was made of; a worker that does
    /// not fit in its field is named as no one (the reader then reads every line), and the
    /// count wraps within its own bits without touching the worker's.
    #[test]
    fn an_asked_word_names_the_count_and_the_asker() {
        for (count, w) in [(0, 0), (1, 0), (7, 107), (ASKED_COUNT_MASK, 3), (12, 0xFFFE)] {
            assert_eq!(asked_fields(asked_word(count, w)), (count, Some(w)));
        }
        assert_eq!(asked_fields(asked_word(5, 0xFFFF)), (5, None));
        assert_eq!(asked_fields(asked_word(5, u32::MAX)), (5, None));
        assert_eq!(asked_fields(asked_word(ASKED_COUNT_MASK + 1, 2)), (0, Some(2)));
    }

    /// The packed words of the request and acknowledgement lines give back what they were
    /// made of at the edges of each field's range, and no field spills into another.
    #[test]
    fn packed_request_and_acknowledgement_words_give_back_their_fields() {
        let max_slot = (0xFFFF << 8) | 2;
        for (task, phase, slot) in [
            (0, capture_phase::BEFORE, 0),
            (u32::MAX as u64, capture_phase::AFTER, max_slot),
            (12_345, capture_phase::AFTER, (35 << 8) | 1),
        ] {
            assert_eq!(which_fields(which(task, phase, slot)), (task, phase, slot));
        }
        // A phase outside the known ones reads back as itself (the service refuses it).
        assert_eq!(which_fields(which(7, 0xFF, 1)).1, 0xFF);
        for (status, arg) in [(capture_status::SEALED, 0), (capture_status::IN_PROGRESS, u32::MAX as u64)] {
            assert_eq!(state_fields(state(status, arg)), (status, arg));
        }
        for (task, seq) in [(0, 1), (u32::MAX as u64, 0xFFFF_FFFF), (5, 1)] {
            assert_eq!(identity_fields(identity(task, seq)), (task, seq));
        }
    }
}
