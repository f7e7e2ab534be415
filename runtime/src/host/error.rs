//! Host-side errors: one enum, each variant naming what was wrong.

use std::string::String;

use pto_hal::ErrorKind;

use crate::codes::{ErrorCode, Site};
use crate::graph::GraphError;

/// A fault the device latched during a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceError {
    /// The code.
    pub code: ErrorCode,
    /// Where it was latched.
    pub site: Site,
    /// The task involved, if any.
    pub task: Option<u32>,
    /// The worker involved, if any.
    pub core: Option<u32>,
    /// Site-specific detail word.
    pub detail: u64,
    /// Text the latching agent left (e.g. a kernel's panic message).
    pub message: String,
}

impl core::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} at {}", self.code, self.site.name())?;
        if let Some(t) = self.task {
            write!(f, ", task {t}")?;
        }
        if let Some(c) = self.core {
            write!(f, ", core {c}")?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        write!(f, " — {}. Hint: {}", self.code.description(), self.code.hint())
    }
}

/// Everything the host API can fail with.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// Bad graph input.
    #[error("invalid graph: {0} (INVALID_ARGS). Hint: fix the task, tensor or dependency it names")]
    Graph(#[from] GraphError),
    /// The device latched a fault during the run. The device stays usable unless
    /// [`Error::Unusable`] is returned by later calls.
    #[error("run failed: {0}")]
    Device(DeviceError),
    /// A platform operation failed.
    #[error("platform error during {op}: {message}")]
    Platform {
        /// What the host was doing.
        op: &'static str,
        /// The platform's error kind.
        kind: ErrorKind,
        /// The platform's error text.
        message: String,
    },
    /// Both pipeline slots are taken, or the other run has not been launched.
    #[error("cannot prepare a run: {0}")]
    Busy(&'static str),
    /// The device was closed.
    #[error("the device is closed")]
    Closed,
    /// An earlier failure left the device unusable; reopen it.
    #[error("the device is unusable: {0}")]
    Unusable(String),
    /// A bounded host wait ran out.
    #[error("timed out after {micros} us waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// The budget.
        micros: u64,
    },
    /// A kernel could not be registered.
    #[error("cannot register kernel {name:?}: {why}")]
    Kernel {
        /// The kernel name.
        name: String,
        /// Why not.
        why: &'static str,
    },
    /// Host data of the wrong size or type for a tensor.
    #[error("tensor holds {expected} elements of {dtype}, got {got}")]
    Size {
        /// Elements of the tensor.
        expected: u64,
        /// Elements given.
        got: u64,
        /// Element type name.
        dtype: &'static str,
    },
    /// A run configuration the board cannot satisfy.
    #[error("bad run configuration: {0}")]
    Config(String),
}

impl Error {
    /// The runtime code of this error, when it has one: a latched device fault's code, and
    /// INVALID_ARGS for bad graph input (what the device-side runtime latches for it).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Device(d) => Some(d.code),
            Error::Graph(_) => Some(ErrorCode::Orch(crate::codes::OrchError::InvalidArgs)),
            _ => None,
        }
    }
}

/// Convert a platform error.
pub(crate) fn platform<E: pto_hal::Error + core::fmt::Display>(op: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Platform { op, kind: e.kind(), message: std::format!("{e}") }
}
