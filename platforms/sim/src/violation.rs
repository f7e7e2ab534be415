//! What the faithful cache model reports: a coherence violation, the operation it shows was
//! missing, and the status of a launch it failed.
//!
//! Plain data, so that the error type, a launch's completion state and the model itself can all
//! carry a violation without depending on each other.

/// Status a launch reports when the faithful model found a violation during it.
pub const COHERENCE_STATUS: i32 = -77;

/// The maintenance or ordering operation a violation shows was missing.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Missing {
    /// The AICPU read host-DMA'd bytes from a stale line: invalidate before the first read.
    InvalidateAfterHostDma,
    /// The reader's cached copy predates a write that happened before the read: invalidate
    /// (`observe_line`) before reading.
    Invalidate,
    /// The writer's bytes never reached memory: write the line back (`publish_line`).
    WriteBack,
    /// A register hand-off (FIN/ACK/report) was published while the core held dirty lines:
    /// write back before signalling.
    WriteBackBeforeSignal,
    /// Write-backs were still in flight at a register hand-off: store barrier before signalling.
    StoreBarrierBeforeSignal,
    /// Two agents wrote one line through caches without ordering: one writer per line.
    WholeLineRule,
    /// An AICPU store (write-back AICPU cache) never reached memory before another agent read
    /// it: the AICPU must clean the range before the hand-off (`flush_range`, the contract's
    /// publication of AICPU stores).
    AicpuClean,
}

impl Missing {
    /// What to do about it.
    pub fn describe(self) -> &'static str {
        match self {
            Missing::InvalidateAfterHostDma => {
                "invalidate after host DMA (AICPU invalidate_range before the first read)"
            }
            Missing::Invalidate => "invalidate by the reader before reading (observe_line / invalidate_range)",
            Missing::WriteBack => "write-back by the writer (publish_line / writeback_line)",
            Missing::WriteBackBeforeSignal => {
                "write-back of every dirty line before the register hand-off (publish before FIN)"
            }
            Missing::StoreBarrierBeforeSignal => "store barrier between the write-back and the register hand-off",
            Missing::WholeLineRule => {
                "one writer per cache line (two agents wrote this line through caches without ordering)"
            }
            Missing::AicpuClean => {
                "clean by the AICPU writer before the hand-off (flush_range: publish AICPU stores under a write-back AICPU cache)"
            }
        }
    }
}

/// One coherence violation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Who found it ("core 37 (AIV)", "aicpu 1", "host").
    pub agent: String,
    /// What it was doing.
    pub op: &'static str,
    /// Byte address involved.
    pub addr: u64,
    /// Its cache line.
    pub line: u64,
    /// Last writer of the byte ("core 12 (AIV) @ 41": agent and its clock at the store).
    pub last_writer: String,
    /// The missing operation.
    pub missing: Missing,
    /// The eviction seed of the run.
    pub seed: u64,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} at {:#x} (line {:#x}, byte {}): last writer {}; missing: {} [faithful cache model, seed {}]",
            self.agent,
            self.op,
            self.addr,
            self.line,
            self.addr - self.line,
            self.last_writer,
            self.missing.describe(),
            self.seed
        )
    }
}
