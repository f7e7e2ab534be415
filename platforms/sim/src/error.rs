//! The simulator's error type.

use pto_hal::{ErrorKind, GmAddr};

use crate::violation::Violation;

/// Errors of the simulated device's host-side operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// No free range of GM is large enough.
    #[error("device memory exhausted: no free range of {requested} bytes")]
    OutOfMemory {
        /// Bytes asked for (rounded up to whole lines).
        requested: u64,
    },
    /// A host copy names bytes outside device memory.
    #[error("device range {addr:#x}+{len} lies outside device memory")]
    InvalidAddress {
        /// Start of the range.
        addr: u64,
        /// Length of the range.
        len: u64,
    },
    /// `free` of an address that is not a live allocation.
    #[error("free of {0:?}, which is not a live device allocation")]
    BadFree(GmAddr),
    /// A malformed request.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// An environment variable the simulator reads holds a value outside its syntax.
    #[error("environment variable {var}={value:?} is not one of: {expected}")]
    Environment {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What it accepts.
        expected: &'static str,
    },
    /// A bounded wait ran out.
    #[error("stream wait timed out after {0} us")]
    Timeout(u64),
    /// A device program returned a non-zero status or panicked.
    #[error("device program failed with status {status}{}", message.as_ref().map(|m| format!(": {m}")).unwrap_or_default())]
    DeviceFault {
        /// The first non-zero status of the program's agents.
        status: i32,
        /// The first panic message of an agent, if one panicked.
        message: Option<String>,
    },
    /// The faithful cache model found a coherence violation the host would have observed.
    #[error("coherence violation: {0}")]
    Coherence(Violation),
    /// A schedule-independent check (`PTO_SIM_CHECK`) found a race or an uninitialised read in
    /// the run: the first finding, and how many there were.
    #[error("check failed: {0}")]
    Check(Box<crate::check::CheckReport>),
    /// The device was closed.
    #[error("the simulated device is closed")]
    Closed,
    /// A program or kernel the simulator cannot load: no device program is installed under
    /// the name, or the source has no Rust form.
    #[error(
        "not loadable on the simulator: {0} (install the runtime's device programs, or give the source a Rust function)"
    )]
    NotInstalled(String),
}

impl pto_hal::Error for SimError {
    fn kind(&self) -> ErrorKind {
        match self {
            SimError::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            SimError::InvalidAddress { .. } | SimError::BadFree(_) => ErrorKind::InvalidAddress,
            SimError::InvalidArgument(_) | SimError::Environment { .. } => ErrorKind::Other,
            SimError::Timeout(_) => ErrorKind::Timeout,
            SimError::DeviceFault { .. } | SimError::Coherence(_) | SimError::Check(_) => ErrorKind::DeviceFault,
            SimError::Closed => ErrorKind::Closed,
            SimError::NotInstalled(_) => ErrorKind::Unsupported,
        }
    }
}
