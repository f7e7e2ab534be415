//! Host-side device memory.

use crate::{ErrorType, GmAddr};

/// Device memory as the host manages it: allocation and synchronous copies.
///
/// Tier: host. Copies are synchronous DMA: they write memory, never a device agent's cache
/// (on host-non-coherent platforms the AICPU must invalidate before reading such bytes).
pub trait DeviceMemory: ErrorType {
    /// Allocate `size` bytes aligned to `align` (a power of two, at least 64).
    fn alloc(&self, size: u64, align: u64) -> Result<GmAddr, Self::Error>;
    /// Free an allocation returned by [`DeviceMemory::alloc`].
    fn free(&self, addr: GmAddr) -> Result<(), Self::Error>;
    /// Copy host bytes to device memory.
    fn copy_h2d(&self, dst: GmAddr, src: &[u8]) -> Result<(), Self::Error>;
    /// Copy device memory to host bytes.
    fn copy_d2h(&self, dst: &mut [u8], src: GmAddr) -> Result<(), Self::Error>;
    /// Fill `len` device bytes with `byte`.
    fn memset(&self, dst: GmAddr, byte: u8, len: u64) -> Result<(), Self::Error>;
}
