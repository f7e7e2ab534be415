//! What the checks report: the first finding of a run, and how many there were.

use std::fmt;

/// One kernel access as a finding names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskAccess {
    /// The task id the runtime assigned.
    pub task: u32,
    /// The kernel's name (as it was loaded), or `?` when the simulator does not know it.
    pub kernel: String,
    /// The tensor argument the access went through (its index in the task's arguments).
    pub arg: u32,
    /// Whether it wrote.
    pub write: bool,
    /// The bytes it touched, `[lo, hi)` (coalesced: consecutive accesses through one argument
    /// in one direction are one range).
    pub range: (u64, u64),
}

impl fmt::Display for TaskAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.write { "write" } else { "read" };
        write!(
            f,
            "task {} ({}) arg {} {op} [{:#x},{:#x})",
            self.task, self.kernel, self.arg, self.range.0, self.range.1
        )
    }
}

/// Who read uninitialised bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reader {
    /// A kernel, through a tensor argument.
    Kernel {
        /// Its access (the range is the whole coalesced read).
        access: TaskAccess,
        /// Index (row-major, in elements of the argument's view) of the first element holding
        /// an uninitialised byte; `None` when the view is not dense and the byte lies between
        /// the view's elements.
        element: Option<u64>,
    },
    /// The orchestration, through an element read.
    Orchestration,
    /// The host, reading a tensor back.
    Host,
}

/// What a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// racecheck (data): two tasks no dependency path orders touched `range` and at least one
    /// of them wrote it.
    DataRace {
        /// The access processed first (submission order).
        first: TaskAccess,
        /// The conflicting access of the other task.
        second: TaskAccess,
        /// The overlapping bytes, `[lo, hi)`.
        range: (u64, u64),
    },
    /// racecheck (line): two tasks no dependency path orders wrote different bytes of one
    /// 64-byte line through their caches: whichever line is written back last clobbers the
    /// other's bytes (the a2a3 contract's one-writer-per-line rule).
    LineRace {
        /// The earlier writer (submission order).
        first: TaskAccess,
        /// The later writer.
        second: TaskAccess,
        /// The line's address.
        line: u64,
    },
    /// initcheck: bytes read that nothing wrote since they were handed out.
    Uninitialised {
        /// Who read them.
        reader: Reader,
        /// The first uninitialised byte read.
        addr: u64,
    },
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::DataRace { first, second, range } => write!(
                f,
                "data race on [{:#x},{:#x}): {first} and {second}, and no dependency orders the two tasks",
                range.0, range.1
            ),
            Finding::LineRace { first, second, line } => write!(
                f,
                "line race on line {line:#x}: {first} and {second} write different bytes of one cache line, \
                 and no dependency orders the two tasks (one writer per line)"
            ),
            Finding::Uninitialised { reader, addr } => match reader {
                Reader::Kernel { access, element } => {
                    write!(f, "uninitialised read: {access} reads byte {addr:#x}")?;
                    if let Some(e) = element {
                        write!(f, " (element {e})")?;
                    }
                    write!(f, ", which nothing wrote since it was handed out")
                }
                Reader::Orchestration => write!(
                    f,
                    "uninitialised read: the orchestration reads byte {addr:#x}, which nothing wrote since it was handed out"
                ),
                Reader::Host => write!(
                    f,
                    "uninitialised read: the host reads byte {addr:#x} back, which nothing wrote since it was allocated"
                ),
            },
        }
    }
}

/// What the checks found in one run: the first finding in submission order, and how many
/// there were in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// The first finding.
    pub first: Finding,
    /// Findings in all (a data race counts once per conflicting pair of accesses).
    pub findings: u64,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.first)?;
        if self.findings > 1 {
            write!(f, " (and {} more)", self.findings - 1)?;
        }
        write!(f, " [schedule-independent check]")
    }
}
