//! Device addresses.

/// Size of one cache line of every agent's cache, in bytes.
///
/// A write-back always emits a whole line; see the whole-line rule in `docs/cache-contract.md`.
pub const LINE_BYTES: u64 = 64;

/// An address in device global memory (GM).
///
/// On hardware this is the device virtual address; on the simulator it is an address inside the
/// simulated device's GM arena. Zero is never a valid GM address ([`GmAddr::NULL`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct GmAddr(pub u64);

impl GmAddr {
    /// The null address: never allocated, never dereferenced.
    pub const NULL: GmAddr = GmAddr(0);

    /// This address moved forward by `bytes`.
    ///
    /// ```
    /// # use pto_hal::GmAddr;
    /// assert_eq!(GmAddr(0x1000).offset(64), GmAddr(0x1040));
    /// ```
    #[inline(always)]
    #[must_use]
    pub const fn offset(self, bytes: u64) -> GmAddr {
        GmAddr(self.0 + bytes)
    }

    /// Whether this is [`GmAddr::NULL`].
    #[inline(always)]
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }

    /// The address of the cache line holding this byte.
    #[inline(always)]
    #[must_use]
    pub const fn line(self) -> GmAddr {
        GmAddr(self.0 & !(LINE_BYTES - 1))
    }

    /// Whether this address is aligned to `align` (a power of two).
    #[inline(always)]
    pub const fn is_aligned(self, align: u64) -> bool {
        self.0 & (align - 1) == 0
    }
}

/// The whole lines covering `[addr, addr + len)`: `(first_line, line_count)`.
///
/// Range maintenance always rounds out to whole lines; an empty range covers no line.
///
/// ```
/// # use pto_hal::{GmAddr, line_span};
/// assert_eq!(line_span(GmAddr(0x1030), 0x20), (GmAddr(0x1000), 2));
/// assert_eq!(line_span(GmAddr(0x1000), 0), (GmAddr(0x1000), 0));
/// // A range reaching the top of the address space does not overflow.
/// assert_eq!(line_span(GmAddr(u64::MAX - 63), u64::MAX), (GmAddr(u64::MAX - 63), 1));
/// ```
pub const fn line_span(addr: GmAddr, len: u64) -> (GmAddr, u64) {
    let first = addr.line();
    if len == 0 {
        return (first, 0);
    }
    // Last byte of the range (saturating at the top of the address space), then its line.
    let last = match addr.0.checked_add(len - 1) {
        Some(l) => l,
        None => u64::MAX,
    };
    let last_line = last & !(LINE_BYTES - 1);
    (first, (last_line - first.0) / LINE_BYTES + 1)
}
