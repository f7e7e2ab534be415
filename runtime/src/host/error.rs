//! Host-side errors: one enum, each variant naming what was wrong.

use std::boxed::Box;
use std::string::{String, ToString};
use std::sync::Arc;

use pto_hal::ErrorKind;

use crate::codes::{ErrorCode, Site};
use crate::graph::GraphError;

pub use super::config::ConfigError;

/// A platform error kept whole: its kind, its text and the error itself as
/// [`source`](std::error::Error::source).
#[derive(Clone)]
pub struct PlatformError {
    /// What the host was doing.
    pub op: &'static str,
    /// The platform's error kind.
    pub kind: ErrorKind,
    error: Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl PlatformError {
    /// Wrap `error`, raised while the host did `op`.
    pub fn new<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(op: &'static str, error: E) -> Self {
        PlatformError { op, kind: error.kind(), error: Arc::new(error) }
    }
    /// The platform's error.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }
    /// The platform's error as its own type `E`, if it is one (for example the simulator's
    /// `SimError`, whose `Coherence` variant carries the faithful model's violation).
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.error.downcast_ref::<E>()
    }
}

impl core::fmt::Debug for PlatformError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PlatformError")
            .field("op", &self.op)
            .field("kind", &self.kind)
            .field("error", &self.error)
            .finish()
    }
}

impl core::fmt::Display for PlatformError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "platform error during {}: {}", self.op, self.error)
    }
}

/// Two platform errors are equal when they say the same thing about the same operation.
impl PartialEq for PlatformError {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op && self.kind == other.kind && self.error.to_string() == other.error.to_string()
    }
}

impl std::error::Error for PlatformError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

/// A fault the device latched during a run.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    /// Text the latching agent left (e.g. a kernel's panic message and location).
    pub message: String,
    /// What the host learned besides the latched fault: the platform's own failure of the
    /// program (its [`source`](std::error::Error::source)), or that the run never ended.
    pub also: Option<Box<Error>>,
    /// The run's swimlane trace as far as the device recorded it, when the run traced
    /// ([`RunConfig::with_trace`](super::RunConfig::with_trace)) and both programs ended: what
    /// ran and was dispatched up to the fault and after it.
    pub trace: Option<Box<super::Trace>>,
    /// The boundary capture's counters as the failed run left them, when the run dumped on the
    /// resident route: what was requested, served and aborted up to the fault.
    pub capture: Option<Box<super::CaptureReport>>,
    /// The name of the kernel involved, when the fault names one the host registered (a
    /// kernel fault or hang names the kernel's binary in its detail word).
    pub kernel: Option<String>,
}

impl DeviceError {
    /// A fault with nothing attached.
    pub fn new(
        code: ErrorCode,
        site: Site,
        task: Option<u32>,
        core: Option<u32>,
        detail: u64,
        message: String,
    ) -> DeviceError {
        DeviceError { code, site, task, core, detail, message, also: None, trace: None, capture: None, kernel: None }
    }
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
        if let Some(k) = &self.kernel {
            write!(f, ", kernel `{k}`")?;
        }
        if self.detail != 0 {
            write!(f, " (detail {:#x})", self.detail)?;
        }
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        write!(f, " — {}. Hint: {}", self.code.description(), self.code.hint())
    }
}

impl std::error::Error for DeviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.also.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Everything the host API can fail with.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad graph input. Its text is part of this error's message (it is not repeated as a
    /// `source`).
    #[error("invalid graph: {0} (INVALID_ARGS). Hint: fix the task, tensor or dependency it names")]
    Graph(GraphError),
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
        /// The platform's error.
        #[source]
        source: PlatformError,
    },
    /// [`Device::try_prepare`](super::Device::try_prepare) found both pipeline slots taken,
    /// or the other run not yet launched.
    #[error("cannot prepare a run now: {0}")]
    Busy(&'static str),
    /// A prepared run waited longer than its device's turn budget for a pipeline slot.
    #[error("no pipeline slot became free within {micros} us (other threads hold the device)")]
    NoTurn {
        /// The budget.
        micros: u64,
    },
    /// A prepared run was not launched within its lease and another run reclaimed its slot.
    #[error("the prepared run was not launched within {micros} us and its slot was given to another run")]
    Expired {
        /// The lease.
        micros: u64,
    },
    /// The device was closed.
    #[error("the device is closed")]
    Closed,
    /// The args dump could not write its files.
    #[error("args dump: cannot write {path}: {why}")]
    DumpFiles {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The I/O error, as text.
        why: String,
    },
    /// A handle (a graph or a program) made by another device: handles name their device, and
    /// a device runs only its own.
    #[error("{what} {name:?} belongs to device {owner}, not to device {device}")]
    ForeignHandle {
        /// What the handle is: "graph" or "program".
        what: &'static str,
        /// Its name (a program's registered name; a graph's task count).
        name: String,
        /// The device that made it.
        owner: u64,
        /// The device it was given to.
        device: u64,
    },
    /// The run was fenced by its device for a handle that had let it be past its lease (so
    /// that others could have its slot), and the outcome kept for the handle was dropped since
    /// (a device keeps the last 16).
    #[error("run {epoch} was fenced by the device while its handle let it be, and its outcome is no longer kept")]
    ReportDropped {
        /// The run's epoch.
        epoch: u64,
    },
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
    /// Host data of the wrong size for a tensor.
    #[error("tensor holds {expected} elements of {dtype}, got {got}")]
    Size {
        /// Elements of the tensor.
        expected: u64,
        /// Elements given.
        got: u64,
        /// Element type name.
        dtype: &'static str,
    },
    /// Host data of the wrong element type for a tensor.
    #[error("tensor holds {tensor} elements, the host data is {host}")]
    Dtype {
        /// The tensor's element type.
        tensor: &'static str,
        /// The host data's element type.
        host: &'static str,
    },
    /// initcheck: the host read a tensor back whose bytes nothing wrote since it was
    /// allocated (neither the host nor a task).
    #[error(
        "uninitialised read-back: element {element} (byte {addr:#x}) of the tensor was never written since it was allocated [initcheck]"
    )]
    Uninitialised {
        /// The first unwritten byte.
        addr: u64,
        /// Its element's index in the tensor.
        element: u64,
    },
    /// A run configuration the board cannot satisfy: the variant says what was wrong, its
    /// text names the field, the value and the limit. Its text is part of this error's message
    /// (it is not repeated as a `source`).
    #[error("bad run configuration: {0}")]
    Config(ConfigError),
}

impl From<GraphError> for Error {
    fn from(e: GraphError) -> Self {
        Error::Graph(e)
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl Error {
    /// The platform's own error of type `E` behind this error, or behind the latched fault it
    /// came with (`DeviceError::also`). On the simulator, `platform_error::<SimError>()` gives
    /// a faithful-model violation as data (`SimError::Coherence(Violation)`: agent, address,
    /// line, last writer, the missing operation, the seed).
    pub fn platform_error<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Error::Platform { source, .. } => source.downcast_ref::<E>(),
            Error::Device(d) => d.also.as_deref().and_then(|e| e.platform_error::<E>()),
            _ => None,
        }
    }
    /// The runtime code of this error, when it has one: a latched device fault's code, and
    /// INVALID_ARGS for bad graph input (what the device-side runtime latches for it).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Device(d) => Some(d.code),
            Error::Graph(_) => Some(ErrorCode::Orch(crate::codes::OrchError::InvalidArgs)),
            _ => None,
        }
    }

    /// A platform error raised while the host did `op`.
    pub fn platform<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(op: &'static str, e: E) -> Error {
        let message = e.to_string();
        let source = PlatformError::new(op, e);
        Error::Platform { op, kind: source.kind, message, source }
    }
}

/// Convert a platform error.
pub(crate) fn platform<E: pto_hal::Error + std::error::Error + Send + Sync + 'static>(
    op: &'static str,
) -> impl FnOnce(E) -> Error {
    move |e| Error::platform(op, e)
}
