//! The error pattern shared by every fallible HAL trait, as embedded-hal 1.0 has it: a
//! fallible trait names its error through [`ErrorType`] (also through `&T` and `&mut T`, so a
//! function generic over a device can be handed a borrow of one); every error says its
//! platform-independent [`ErrorKind`] ([`Error::kind`]); an implementation that cannot fail
//! names [`Infallible`](core::convert::Infallible); and [`ErrorKind`] is a
//! [`core::error::Error`], so it boxes into `Box<dyn Error>` and takes part in `?` chains.

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

impl core::error::Error for ErrorKind {}

impl Error for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

/// The error of an implementation that cannot fail: no value exists, so no kind is ever asked.
impl Error for core::convert::Infallible {
    fn kind(&self) -> ErrorKind {
        match *self {}
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

impl<T: ErrorType + ?Sized> ErrorType for &mut T {
    type Error = T::Error;
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::boxed::Box;
    use std::string::ToString;

    use super::*;

    /// A device whose operations fail with a plain [`ErrorKind`].
    struct TimesOut;

    impl ErrorType for TimesOut {
        type Error = ErrorKind;
    }

    impl TimesOut {
        fn poll(&mut self) -> Result<u32, ErrorKind> {
            Err(ErrorKind::Timeout)
        }
    }

    /// A device that cannot fail.
    struct Never;

    impl ErrorType for Never {
        type Error = core::convert::Infallible;
    }

    /// What a driver generic over its device does with an error: ask its kind.
    fn kind_of<D: ErrorType>(_device: D, e: D::Error) -> ErrorKind {
        e.kind()
    }

    #[test]
    fn a_borrowed_device_names_its_devices_error() {
        let mut dev = TimesOut;
        let e = dev.poll().unwrap_err();
        assert_eq!(kind_of(&dev, e), ErrorKind::Timeout);
        // Handed on as `&mut D` (a driver that keeps using the device), the error type is D's.
        let e = dev.poll().unwrap_err();
        assert_eq!(kind_of(&mut dev, e), ErrorKind::Timeout);
        assert_eq!(kind_of::<&mut &mut TimesOut>(&mut &mut dev, ErrorKind::Closed), ErrorKind::Closed);
    }

    #[test]
    fn an_infallible_device_has_an_error_type() {
        fn kinds<D: ErrorType>(r: Result<u32, D::Error>) -> Result<u32, ErrorKind> {
            r.map_err(|e| e.kind())
        }
        assert_eq!(kinds::<Never>(Ok(7)), Ok(7));
        assert_eq!(kinds::<&mut Never>(Ok(8)), Ok(8));
    }

    #[test]
    fn an_error_kind_is_a_core_error() {
        let e: &dyn core::error::Error = &ErrorKind::DeviceFault;
        assert_eq!(e.to_string(), "device reported a fault");
        assert!(e.source().is_none());
        fn boxed() -> Result<(), Box<dyn core::error::Error>> {
            Err(ErrorKind::OutOfMemory)?;
            Ok(())
        }
        let b = boxed().unwrap_err();
        assert_eq!(b.to_string(), "device memory exhausted");
        assert_eq!(b.downcast_ref::<ErrorKind>(), Some(&ErrorKind::OutOfMemory));
    }
}
