//! `pto-inproc`: the host half of a device that lives in this process, written once for the
//! simulator (`pto-sim`) and the on-target test harness (`pto-target-harness`).
//!
//! Both platforms keep the device's global memory in a buffer of this process and run its
//! programs on threads of this process. What the host side of such a device needs is the same
//! for both, and lives here:
//!
//! * [`heap`]: the first-fit GM allocator ([`Heap`]) over an address range, coalescing on free,
//!   with checked arithmetic on every size, offset and alignment — a hostile request is an
//!   error ([`HeapError`]), never a wrapped value or a panic.
//! * [`stream`]: the ordered launch queue behind a HAL stream ([`StreamQueue`]): launches start
//!   one after the other, events are sequence numbers, `query`, a bounded `wait` and a
//!   `synchronize` that reports a failure once. A launch is anything with a [`Completion`]
//!   (the [`Launch`] trait); [`WorkerStream`] adds a worker thread for platforms whose launches
//!   are blocking jobs.
//! * [`handles`]: tables mapping a [`pto_hal::Handle`] to an entry ([`HandleTable`]) and
//!   registries of named device programs ([`Registry`]); an unknown handle is refused with an
//!   error naming what was looked up ([`UnknownHandle`]).
//!
//! The crate knows neither platform: a platform supplies its launch type, its error mapping and
//! its handle numbering.
//!
//! ```
//! use pto_inproc::{Heap, HeapError, Registry, Waited, WorkerStream};
//!
//! // GM at 0x1_0000_0000, 1 MiB: whole lines, first fit, checked.
//! let mut gm = Heap::new(0x1_0000_0000, 1 << 20).unwrap();
//! let a = gm.alloc(100, 64).unwrap();
//! assert_eq!(gm.allocation(a), Some(128));
//! assert_eq!(gm.alloc(u64::MAX, 64), Err(HeapError::TooLarge { size: u64::MAX, align: 64 }));
//! gm.free(a).unwrap();
//!
//! // Device programs by name; a handle resolves only in the registry that issued it.
//! let mut programs: Registry<fn() -> i32> = Registry::new("AICPU program", 0x4400_0000, 16);
//! let h = programs.install("hello", || 0).unwrap();
//! assert_eq!(programs.handle("hello"), Some(h));
//!
//! // A stream whose launches are blocking jobs on a worker thread.
//! let s = WorkerStream::spawn("doc-stream", |f| format!("{f:?}")).unwrap();
//! let (name, entry) = programs.entry(h).unwrap();
//! s.submit(move || if entry() == 0 { Ok(()) } else { Err(format!("{name} failed")) }).unwrap();
//! s.submit(|| Err("the second launch failed".to_string())).unwrap();
//! let done = s.record();
//! assert_eq!(s.wait(done, 10_000_000), Err(Waited::Failed("the second launch failed".to_string())));
//! // `synchronize` reports it once more, then it is cleared.
//! assert!(s.synchronize(10_000_000).is_err());
//! assert_eq!(s.synchronize(10_000_000), Ok(()));
//! ```

pub mod handles;
pub mod heap;
pub mod stream;

pub use handles::{HandleTable, Registry, TableFull, UnknownHandle};
pub use heap::{Heap, HeapError};
pub use stream::{Completion, Launch, StreamQueue, Waited, WorkerFault, WorkerStream, panic_message};
