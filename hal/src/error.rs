//! The error pattern shared by every fallible HAL trait (modelled on embedded-hal).

/// What went wrong, independent of the platform.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Device memory could not be allocated.
    OutOfMemory,
    /// An address or length lies outside every allocation the device knows.
    InvalidAddress,
    /// A bounded wait ran out of budget.
    Timeout,
    /// A kernel on the device reported a fault (the device-side status is non-zero).
    DeviceFault,
    /// The device or stream was closed or marked unusable.
    Closed,
    /// The platform does not implement this operation.
    Unsupported,
    /// Anything else; see the platform's error for detail.
    Other,
}

impl core::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ErrorKind::OutOfMemory => "device memory exhausted",
            ErrorKind::InvalidAddress => "address outside device memory",
            ErrorKind::Timeout => "wait budget exhausted",
            ErrorKind::DeviceFault => "device reported a fault",
            ErrorKind::Closed => "device closed or unusable",
            ErrorKind::Unsupported => "operation not supported by this platform",
            ErrorKind::Other => "platform error",
        })
    }
}

/// A platform error: anything that can say which [`ErrorKind`] it is.
pub trait Error: core::fmt::Debug {
    /// The platform-independent kind of this error.
    fn kind(&self) -> ErrorKind;
}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

/// Names the error type of a fallible HAL trait.
pub trait ErrorType {
    /// The error this implementation returns.
    type Error: Error;
}

impl<T: ErrorType + ?Sized> ErrorType for &T {
    type Error = T::Error;
}
