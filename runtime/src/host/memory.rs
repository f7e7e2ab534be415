//! Device tensors and the table of a device's live allocations.
//!
//! Every allocation is named by `(device serial, allocation id)` ([`BufferRef`]); ids are
//! never reused. A run checks every external tensor it names against the table before
//! launch (a stale, foreign or forged tensor is refused, naming the task and argument) and
//! pins the allocations until its completion fence: dropping a [`DeviceTensor`] while a run
//! uses it is legal, and the free is deferred until the last pinning run has fenced.

use crate::sync::{AtomicU64, Ordering};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr, HostPlatform};

use super::error::platform;
use super::{Device, Error, Inner};
use crate::graph::{BufferRef, DType, Element, Placement, Tensor, TensorProblem};

/// Serial of the next device opened in this process (0 is "no device"). A process-wide
/// counter handing out unique ids, part of no protocol.
#[allow(clippy::disallowed_types, reason = "a process-wide static; loom atomics cannot be statics")]
static NEXT_DEVICE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A fresh device serial.
pub(crate) fn next_device_serial() -> u64 {
    NEXT_DEVICE.fetch_add(1, Ordering::Relaxed)
}

struct Alloc {
    addr: GmAddr,
    bytes: u64,
    dtype: DType,
    /// The user's `DeviceTensor` is alive.
    owned: bool,
    /// Runs that named it and have not fenced yet.
    pins: u32,
}

/// The live allocations of one device.
pub(crate) struct Allocations {
    device: u64,
    next_id: AtomicU64,
    live: Mutex<HashMap<u64, Alloc>>,
}

/// Allocations a prepared or launched run holds until its fence.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    ids: Vec<u64>,
}

impl Allocations {
    pub(crate) fn new(device: u64) -> Allocations {
        Allocations { device, next_id: AtomicU64::new(1), live: Mutex::new(HashMap::new()) }
    }

    /// The base address of the live allocation holding `addr`, if any.
    pub(crate) fn locate(&self, addr: u64) -> Option<u64> {
        self.lock().values().find(|a| a.addr.0 <= addr && addr < a.addr.0 + a.bytes).map(|a| a.addr.0)
    }

    pub(crate) fn device(&self) -> u64 {
        self.device
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, HashMap<u64, Alloc>> {
        self.live.lock()
    }

    fn add(&self, addr: GmAddr, bytes: u64, dtype: DType) -> BufferRef {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, Alloc { addr, bytes, dtype, owned: true, pins: 0 });
        BufferRef { device: self.device, id, placement: Placement::External(addr), bytes, dtype }
    }

    fn judge(&self, live: &HashMap<u64, Alloc>, b: &BufferRef) -> Result<(), TensorProblem> {
        if b.device != self.device {
            return Err(TensorProblem::Foreign { owner: b.device, device: self.device });
        }
        let Placement::External(addr) = b.placement else {
            return Err(TensorProblem::Forged);
        };
        match live.get(&b.id) {
            Some(a) if a.owned => {
                if a.addr == addr && a.bytes == b.bytes && a.dtype == b.dtype {
                    Ok(())
                } else {
                    Err(TensorProblem::Forged)
                }
            }
            _ => Err(TensorProblem::Stale),
        }
    }

    /// Whether `b` names a live allocation of this device, exactly.
    pub(crate) fn check(&self, b: &BufferRef) -> Result<(), TensorProblem> {
        self.judge(&self.lock(), b)
    }

    /// Check every buffer and pin them all, or pin none: `Err((index, problem))` names the
    /// first buffer refused.
    pub(crate) fn pin<'a>(
        &self,
        buffers: impl IntoIterator<Item = &'a BufferRef>,
    ) -> Result<Pins, (usize, TensorProblem)> {
        let mut live = self.lock();
        let mut ids = Vec::new();
        for (i, b) in buffers.into_iter().enumerate() {
            self.judge(&live, b).map_err(|p| (i, p))?;
            ids.push(b.id);
        }
        ids.sort_unstable();
        ids.dedup();
        for id in &ids {
            if let Some(a) = live.get_mut(id) {
                a.pins += 1;
            }
        }
        Ok(Pins { ids })
    }

    /// A run fenced: drop its pins; returns the allocations that are now free to release
    /// (their owners dropped them while the run held them).
    #[must_use]
    pub(crate) fn unpin(&self, pins: Pins) -> Vec<GmAddr> {
        let mut live = self.lock();
        let mut freed = Vec::new();
        for id in pins.ids {
            if let Some(a) = live.get_mut(&id) {
                a.pins = a.pins.saturating_sub(1);
                if a.pins == 0 && !a.owned {
                    freed.push(a.addr);
                    live.remove(&id);
                }
            }
        }
        freed
    }

    /// The owner dropped its tensor: `Some(addr)` when no run holds it (free it now).
    #[must_use]
    fn disown(&self, id: u64) -> Option<GmAddr> {
        let mut live = self.lock();
        let a = live.get_mut(&id)?;
        a.owned = false;
        if a.pins == 0 {
            let addr = a.addr;
            live.remove(&id);
            return Some(addr);
        }
        None
    }

    /// Allocations that are dropped by their owners but still held by a run.
    pub(crate) fn deferred(&self) -> usize {
        self.lock().values().filter(|a| !a.owned).count()
    }
}

impl<P: HostPlatform> Inner<P> {
    /// Give back allocations a fenced run no longer holds.
    pub(crate) fn release_pins(&self, pins: Pins) {
        for addr in self.allocs.unpin(pins) {
            let _ = self.dev.free(addr);
        }
    }
}

impl<P: HostPlatform> Device<P> {
    /// Allocate a zeroed device tensor of `shape` and element type `T`.
    pub fn alloc<T: Element>(&self, shape: &[u32]) -> Result<DeviceTensor<P>, Error> {
        self.alloc_dtype(T::DTYPE, shape)
    }

    /// Allocate a zeroed device tensor of `shape` and element type `dtype`. A shape whose
    /// byte size overflows is [`GraphError::ShapeTooLarge`](crate::graph::GraphError::ShapeTooLarge).
    pub fn alloc_dtype(&self, dtype: DType, shape: &[u32]) -> Result<DeviceTensor<P>, Error> {
        self.alloc_with(dtype, shape, true)
    }

    /// Allocate a device tensor of `shape` and element type `T` without clearing it: its
    /// contents are undefined until the host or a task writes them (on the simulator they read
    /// as zero), and with initcheck on ([`RunConfig::check`](super::RunConfig::check)) a kernel
    /// or a read-back that reads an element nothing wrote is reported.
    pub fn alloc_uninit<T: Element>(&self, shape: &[u32]) -> Result<DeviceTensor<P>, Error> {
        self.alloc_with(T::DTYPE, shape, false)
    }

    fn alloc_with(&self, dtype: DType, shape: &[u32], zero: bool) -> Result<DeviceTensor<P>, Error> {
        self.inner.check_usable()?;
        let bytes = crate::graph::shape_bytes(dtype, shape)?;
        // Check the shape (strides fit 32 bits) before any memory is taken.
        let probe = BufferRef { device: 0, id: 0, placement: Placement::Heap(0), bytes, dtype };
        Tensor::whole(probe, shape)?;
        let addr = self.inner.dev.alloc(bytes, 64).map_err(platform("tensor allocation"))?;
        if let Err(e) = if zero { self.inner.dev.memset(addr, 0, bytes) } else { Ok(()) } {
            let _ = self.inner.dev.free(addr);
            return Err(platform("tensor zeroing")(e));
        }
        let buffer = self.inner.allocs.add(addr, bytes, dtype);
        let tensor = match Tensor::whole(buffer, shape) {
            Ok(t) => t,
            Err(e) => {
                if let Some(a) = self.inner.allocs.disown(buffer.id) {
                    let _ = self.inner.dev.free(a);
                }
                return Err(e.into());
            }
        };
        Ok(DeviceTensor { dev: self.inner.clone(), tensor, addr })
    }

    /// Allocate a tensor of `shape` holding `data`.
    pub fn tensor_from<T: Element>(&self, shape: &[u32], data: &[T]) -> Result<DeviceTensor<P>, Error> {
        let t = self.alloc::<T>(shape)?;
        t.write(data)?;
        Ok(t)
    }

    /// This device's serial: the `device` of every [`BufferRef`] it allocates.
    pub fn serial(&self) -> u64 {
        self.inner.allocs.device()
    }

    /// Tensors dropped by their owners whose memory is still held by a run in flight (or by
    /// a run that never completed on an unusable device).
    pub fn deferred_frees(&self) -> usize {
        self.inner.allocs.deferred()
    }
}

/// A device tensor owned by the host. Dropping it is always legal: its memory is freed at
/// once, or when the last run that names it has fenced.
pub struct DeviceTensor<P: HostPlatform> {
    dev: Arc<Inner<P>>,
    tensor: Tensor,
    addr: GmAddr,
}

impl<P: HostPlatform> core::fmt::Debug for DeviceTensor<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeviceTensor").field("tensor", &self.tensor).finish_non_exhaustive()
    }
}

impl<P: HostPlatform> DeviceTensor<P> {
    /// The whole tensor, for task arguments (make views of it with [`Tensor::view`]).
    pub fn tensor(&self) -> Tensor {
        self.tensor
    }

    /// Device address of the first element.
    pub fn addr(&self) -> GmAddr {
        self.addr
    }

    /// Copy `data` (all elements) to the device. After [`Device::close`](super::Device::close)
    /// it is [`Error::Closed`], as every later call of the device is.
    pub fn write<T: Element>(&self, data: &[T]) -> Result<(), Error> {
        self.check::<T>(Some(data.len()))?;
        self.dev.dev.copy_h2d(self.addr, bytemuck::cast_slice(data)).map_err(platform("tensor upload"))
    }

    /// Copy all elements back from the device. With initcheck on
    /// ([`RunConfig::check`](super::RunConfig::check)), reading bytes that nothing wrote since
    /// the tensor was allocated is [`Error::Uninitialised`]. After
    /// [`Device::close`](super::Device::close) it is [`Error::Closed`].
    pub fn read<T: Element>(&self) -> Result<Vec<T>, Error> {
        self.check::<T>(None)?;
        let elements = self.tensor.elem_count();
        let n = usize::try_from(elements).map_err(|_| super::ConfigError::HostMemory { elements })?;
        let bytes = self.tensor.elem_count() * core::mem::size_of::<T>() as u64;
        if let Some(at) = P::first_unwritten(&self.dev.dev, self.addr, bytes) {
            let element = (at.0 - self.addr.0) / core::mem::size_of::<T>().max(1) as u64;
            return Err(Error::Uninitialised { addr: at.0, element });
        }
        let mut out = std::vec![T::zeroed(); n];
        self.dev.dev.copy_d2h(bytemuck::cast_slice_mut(&mut out), self.addr).map_err(platform("tensor download"))?;
        Ok(out)
    }

    /// The device is open, then the element type (a dtype error), then the element count of
    /// host data, if any.
    fn check<T: Element>(&self, len: Option<usize>) -> Result<(), Error> {
        if self.dev.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let have = self.tensor.dtype();
        if T::DTYPE != have {
            return Err(Error::Dtype { tensor: have.name(), host: T::DTYPE.name() });
        }
        let want = self.tensor.elem_count();
        match len {
            Some(n) if n as u64 != want => Err(Error::Size { expected: want, got: n as u64, dtype: have.name() }),
            _ => Ok(()),
        }
    }
}

impl<P: HostPlatform> Drop for DeviceTensor<P> {
    fn drop(&mut self) {
        if let Some(addr) = self.dev.allocs.disown(self.tensor.buffer.id) {
            let _ = self.dev.dev.free(addr);
        }
    }
}
