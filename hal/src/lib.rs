//! `pto-hal`: the hardware abstraction layer of pto-rt.
//!
//! The runtime is written once against these traits. The simulator (`pto-sim`) implements all
//! of them; the a2a3 and a5 crates implement the AICPU agent's traits for aarch64 (tested under
//! qemu), and their vendor host side is type-checked only. The crate is `#![no_std]` and allocation-free: traits, small value types
//! and zero-sized marker types only. It depends on `generic-array` (type-level sizes: an AICPU
//! agent's topology bound) and `embedded-hal` (`DelayNs`, the agents' timed pauses), both
//! `no_std` and re-exported.
//!
//! Three tiers call into the HAL, and every method says which tier may call it:
//!
//! * **host** — the process that prepares work ([`DeviceMemory`], [`AicpuStream`],
//!   [`AicoreStream`], [`Loader`]) — a platform's [`HostPlatform`] half;
//! * **AICPU** — the device's control cores that orchestrate and schedule ([`AicpuAgent`]);
//! * **AICore** — the compute cores that run kernels ([`AicoreAgent`]) — together a
//!   platform's [`DevicePlatform`] half.
//!
//! Programs and kernels are launched by [`Handle`]: the host's [`Loader`] returns one for a
//! named program or kernel; the simulator maps it to a Rust function, hardware to a symbol of
//! a loaded binary.
//!
//! Device code reaches shared memory (GM) only through [`GmMemory`] (cached, plain accesses)
//! and [`GmAtomic`] (device-direct words and read-modify-write), orders its accesses with
//! [`Barriers`], and keeps caches honest with the maintenance of its tier: [`AicpuCache`]
//! (address ranges) or [`AicoreCache`] (lines). Whether host DMA writes are visible to AICPU
//! loads is the type [`AicpuCache::Contract`], chosen by the platform: [`HostCoherent`] or
//! [`HostNonCoherent`].
//!
//! Errors follow the embedded-hal 1.0 pattern: each fallible trait names its error type through
//! [`ErrorType`] (forwarded by `&T` and `&mut T`), every error maps onto a platform-independent
//! [`ErrorKind`] ([`Error`]; `Infallible` is one, for what cannot fail), and `ErrorKind` is a
//! `core::error::Error`.
//!
//! # Moved out
//!
//! * The args-dump producer — `DumpLane`, `DumpReservation`, `Begin`, `Blocked`, `Refusal` —
//!   is the runtime's now: import it from `pto_runtime::dump`. Its only implementation was
//!   ever the runtime's own lane; no platform implements it. The HAL cannot name the runtime,
//!   so no deprecated alias is left here.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]

/// embedded-hal's `DelayNs`, the delay an agent hands out ([`Pause`]).
pub use embedded_hal::delay::DelayNs;
/// `generic-array` (and its `typenum`), re-exported: the type of an AICPU agent's topology
/// bound ([`AicpuAgent::MaxClusters`]) is a `typenum` number, and the runtime sizes its
/// per-core tables with `GenericArray` by it.
pub use generic_array;
/// `typenum`, as `generic-array` re-exports it: the numbers a platform names its bound with
/// (`typenum::U<24>`).
pub use generic_array::typenum;

mod addr;
mod barrier;
mod cache;
pub mod check;
mod clock;
mod error;
mod event;
mod gm;
mod kernel;
mod memory;
pub mod native;
mod platform;
mod regs;
mod stream;

pub use addr::{GmAddr, LINE_BYTES, line_span};
pub use barrier::Barriers;
pub use cache::{AicoreCache, AicpuCache, Contract, HostCoherent, HostNonCoherent};
pub use clock::{Clock, Ticks};
pub use error::{Error, ErrorKind, ErrorType};
pub use event::{Events, Pause};
pub use gm::{GmAtomic, GmMemory, GmMemoryExt};
pub use kernel::{
    CoreType, Kernel, KernelContext, KernelContextExt, KernelFault, KernelFn, MAX_TENSOR_DIMS, TensorArg,
};
pub use memory::DeviceMemory;
pub use platform::{
    AicoreAgent, AicoreEntry, AicoreLaunch, AicpuAgent, AicpuEntry, AicpuLaunch, DevicePlatform, Handle, HostPlatform,
    KernelSource, Loader, OrchestrationSource, Platform, ProgramKind, Topology,
};
pub use regs::{CoreRegisters, Reg, Registers};
pub use stream::{AicoreStream, AicpuStream, Stream};
