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

    /// Read the 8-byte device word at `addr` (8-aligned) while the device runs: an **acquire**
    /// of a word the device stores device-direct (`GmAtomic::store_direct` after a store
    /// barrier), so device writes published before that store are visible to later reads.
    /// The default is a D2H copy of the word; a platform whose copies do not order (or a model
    /// that tracks ordering, like the simulator's faithful cache model) overrides it.
    fn load_word(&self, addr: GmAddr) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.copy_d2h(&mut b, addr)?;
        Ok(u64::from_le_bytes(b))
    }
    /// Write the 8-byte device word at `addr` (8-aligned) while the device runs: a **release**
    /// that the device observes with a device-direct load (`GmAtomic::query`). The default is
    /// an H2D copy of the word.
    fn store_word(&self, addr: GmAddr, value: u64) -> Result<(), Self::Error> {
        self.copy_h2d(addr, &value.to_le_bytes())
    }
}
