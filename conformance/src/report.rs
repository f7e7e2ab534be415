//! Check names, failures and the report of a run.

use core::fmt;

/// Every check of the suite.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Check {
    /// [`gm_atomic`](crate::gm_atomic): values returned and left by every `GmAtomic` operation.
    GmAtomic = 0,
    /// [`gm_atomic_writes`](crate::gm_atomic_writes): the platform's fetch_or / fetch_and /
    /// failing CAS do not store (counted by the platform).
    RmwNoIdleWrites = 1,
    /// [`hal_default_rmw_writes`](crate::hal_default_rmw_writes): the HAL's default fetch_or /
    /// fetch_and over the platform's primitives do not store (counted by [`CountingAtomic`](crate::CountingAtomic)).
    HalDefaultRmwWrites = 2,
    /// [`gm_memory`](crate::gm_memory): plain copies round-trip and keep neighbouring bytes.
    GmMemory = 3,
    /// [`gm_coherence_aicpu`](crate::gm_coherence_aicpu): AICPU range maintenance publishes plain
    /// stores to device-direct loads and makes device-direct stores visible to plain loads.
    GmCoherenceAicpu = 4,
    /// [`gm_coherence_aicore`](crate::gm_coherence_aicore): the same with AICore line composites.
    GmCoherenceAicore = 5,
    /// [`cache_ranges`](crate::cache_ranges): range maintenance preserves the agent's data
    /// (AICPU tier).
    CacheRanges = 6,
    /// [`cache_lines`](crate::cache_lines): line ops preserve data; the composites hit exactly
    /// the lines of `line_span` and end with one barrier (AICore tier).
    CacheLines = 7,
    /// [`cache_invalidate_all`](crate::cache_invalidate_all): whole-cache maintenance preserves
    /// the agent's data (AICore tier).
    CacheInvalidateAll = 8,
    /// [`range_lines`](crate::range_lines): the lines a range operation touches are exactly
    /// `line_span`'s.
    RangeLines = 9,
    /// [`barriers`](crate::barriers): every barrier executes and returns.
    Barriers = 10,
    /// [`registers`](crate::registers): DMB writes read back; open / close leave DMB idle.
    Registers = 11,
    /// [`core_registers_reset`](crate::core_registers_reset): a launch starts with DMB = 0.
    CoreRegistersReset = 12,
    /// [`clock`](crate::clock): monotonic, advancing, non-zero frequency, consistent conversions.
    Clock = 13,
    /// [`clock_rate`](crate::clock_rate): the frequency agrees with a host time source.
    ClockRate = 14,
    /// [`events`](crate::events): waits return by their deadline; a changed word returns at once.
    Events = 15,
    /// [`handoff`](crate::handoff) through a register (DMB): write, `wmb`, register; register,
    /// `rmb`, read.
    HandoffRegister = 16,
    /// [`handoff`](crate::handoff) through a GM flag word: write, `wmb`, flag; flag, `rmb`, read.
    HandoffGmFlag = 17,
}

impl Check {
    /// Every check, in report order.
    pub const ALL: [Check; 18] = [
        Check::GmAtomic,
        Check::RmwNoIdleWrites,
        Check::HalDefaultRmwWrites,
        Check::GmMemory,
        Check::GmCoherenceAicpu,
        Check::GmCoherenceAicore,
        Check::CacheRanges,
        Check::CacheLines,
        Check::CacheInvalidateAll,
        Check::RangeLines,
        Check::Barriers,
        Check::Registers,
        Check::CoreRegistersReset,
        Check::Clock,
        Check::ClockRate,
        Check::Events,
        Check::HandoffRegister,
        Check::HandoffGmFlag,
    ];

    /// The check's short name.
    pub const fn name(self) -> &'static str {
        match self {
            Check::GmAtomic => "gm_atomic",
            Check::RmwNoIdleWrites => "rmw_no_idle_writes",
            Check::HalDefaultRmwWrites => "hal_default_rmw_writes",
            Check::GmMemory => "gm_memory",
            Check::GmCoherenceAicpu => "gm_coherence_aicpu",
            Check::GmCoherenceAicore => "gm_coherence_aicore",
            Check::CacheRanges => "cache_ranges",
            Check::CacheLines => "cache_lines",
            Check::CacheInvalidateAll => "cache_invalidate_all",
            Check::RangeLines => "range_lines",
            Check::Barriers => "barriers",
            Check::Registers => "registers",
            Check::CoreRegistersReset => "core_registers_reset",
            Check::Clock => "clock",
            Check::ClockRate => "clock_rate",
            Check::Events => "events",
            Check::HandoffRegister => "handoff_register",
            Check::HandoffGmFlag => "handoff_gm_flag",
        }
    }

    /// Decode a check from its `repr(u8)` value.
    pub fn from_u8(v: u8) -> Option<Check> {
        Check::ALL.get(v as usize).copied()
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed check: which check, which assertion, and the values involved.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The check that failed.
    pub check: Check,
    /// The assertion that failed, in words.
    pub what: &'static str,
    /// The value the check expected.
    pub expected: u64,
    /// The value the platform produced.
    pub observed: u64,
}

/// The result of one check.
pub type Outcome = Result<(), Failure>;

impl Failure {
    /// A failure of `check` at assertion `what`.
    pub const fn new(check: Check, what: &'static str, expected: u64, observed: u64) -> Failure {
        Failure { check, what, expected, observed }
    }

    /// Bytes of an encoded failure ([`Failure::encode`]).
    pub const ENCODED_BYTES: usize = 128;

    /// Encode for transport through device memory: `[check, what_len, 6 × 0, expected (LE),
    /// observed (LE), what (≤ 104 bytes, truncated on a character boundary)]`. Decode with
    /// [`FailureRecord::decode`].
    pub fn encode(&self) -> [u8; Failure::ENCODED_BYTES] {
        let mut out = [0u8; Failure::ENCODED_BYTES];
        let mut n = self.what.len().min(Failure::ENCODED_BYTES - 24);
        while !self.what.is_char_boundary(n) {
            n -= 1;
        }
        out[0] = self.check as u8;
        out[1] = n as u8;
        out[8..16].copy_from_slice(&self.expected.to_le_bytes());
        out[16..24].copy_from_slice(&self.observed.to_le_bytes());
        out[24..24 + n].copy_from_slice(&self.what.as_bytes()[..n]);
        out
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: expected {:#x}, observed {:#x}", self.check, self.what, self.expected, self.observed)
    }
}

/// A [`Failure`] decoded from device memory (its text is owned, not `'static`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FailureRecord {
    /// The check that failed.
    pub check: Check,
    /// The expected value.
    pub expected: u64,
    /// The observed value.
    pub observed: u64,
    what: [u8; Failure::ENCODED_BYTES - 24],
    what_len: u8,
}

impl FailureRecord {
    /// Decode bytes written by [`Failure::encode`]; `None` when they are not a failure record.
    pub fn decode(b: &[u8; Failure::ENCODED_BYTES]) -> Option<FailureRecord> {
        let check = Check::from_u8(b[0])?;
        let what_len = b[1];
        if what_len as usize > Failure::ENCODED_BYTES - 24 {
            return None;
        }
        let mut what = [0u8; Failure::ENCODED_BYTES - 24];
        what.copy_from_slice(&b[24..]);
        core::str::from_utf8(&what[..what_len as usize]).ok()?;
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(w)
        };
        Some(FailureRecord { check, expected: word(8), observed: word(16), what, what_len })
    }

    /// The failed assertion, in words.
    pub fn what(&self) -> &str {
        core::str::from_utf8(&self.what[..self.what_len as usize]).unwrap_or("<invalid>")
    }
}

impl fmt::Display for FailureRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: expected {:#x}, observed {:#x}", self.check, self.what(), self.expected, self.observed)
    }
}

/// What happened to one check in a run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Not attempted (not part of this run).
    NotRun,
    /// Ran and passed.
    Passed,
    /// Deliberately not run, with the reason.
    Skipped(&'static str),
}

/// Which checks ran in a run, and which were skipped and why.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Report {
    status: [Status; Check::ALL.len()],
}

impl Default for Report {
    fn default() -> Self {
        Report { status: [Status::NotRun; Check::ALL.len()] }
    }
}

impl Report {
    /// An empty report: nothing run yet.
    pub fn new() -> Report {
        Report::default()
    }
    /// Record the outcome of `check` (runners use it for the two-party checks).
    pub fn record(&mut self, check: Check, status: Status) {
        self.status[check as usize] = status;
    }
    /// The status of `check`.
    pub fn status(&self, check: Check) -> Status {
        self.status[check as usize]
    }
    /// The checks that ran and passed.
    pub fn passed(&self) -> impl Iterator<Item = Check> + '_ {
        Check::ALL.into_iter().filter(|&c| self.status(c) == Status::Passed)
    }
    /// The checks skipped, with the reason.
    pub fn skipped(&self) -> impl Iterator<Item = (Check, &'static str)> + '_ {
        Check::ALL.into_iter().filter_map(|c| match self.status(c) {
            Status::Skipped(why) => Some((c, why)),
            _ => None,
        })
    }
    /// Merge another report into this one (a later `Passed` or `Skipped` wins over `NotRun`;
    /// `Passed` wins over `Skipped`).
    pub fn merge(&mut self, other: &Report) {
        for c in Check::ALL {
            match (self.status(c), other.status(c)) {
                (_, Status::NotRun) | (Status::Passed, _) => {}
                (_, s) => self.record(c, s),
            }
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in Check::ALL {
            match self.status(c) {
                Status::NotRun => writeln!(f, "  {:<24} not run", c.name())?,
                Status::Passed => writeln!(f, "  {:<24} passed", c.name())?,
                Status::Skipped(why) => writeln!(f, "  {:<24} skipped: {why}", c.name())?,
            }
        }
        Ok(())
    }
}
