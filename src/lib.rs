//! # pto-rt
//!
//! Task-graph runtimes for Ascend-style NPUs, written once against a small HAL. Open the
//! board this build selected, register kernels, move tensors, build a graph of tasks and run
//! it:
//!
//! ```no_run
//! use pto::prelude::*;
//!
//! fn add(k: &mut dyn KernelContext) {
//!     let a = k.load::<f32>(0);
//!     let b = k.load::<f32>(1);
//!     k.store(2, &a.iter().zip(&b).map(|(x, y)| x + y).collect::<Vec<f32>>());
//! }
//!
//! # fn main() -> Result<(), pto::Error> {
//! let dev = pto::open()?;
//! let f = dev.register_kernel("add", CoreType::Aiv, add)?;
//! let a = dev.tensor_from(&[4], &[1.0f32, 2.0, 3.0, 4.0])?;
//! let b = dev.tensor_from(&[4], &[10.0f32; 4])?;
//! let c = dev.alloc::<f32>(&[4])?;
//! let graph = dev.build(|g| {
//!     g.submit(Task::aiv(f).input(&a.tensor()).input(&b.tensor()).output(&c.tensor()))?;
//!     Ok(())
//! })?;
//! let report = dev.run(&graph)?;
//! assert_eq!(c.read::<f32>()?, vec![11.0, 12.0, 13.0, 14.0]);
//! # let _ = report;
//! # Ok(()) }
//! ```
//!
//! ## The types a user touches
//!
//! | to | use |
//! |---|---|
//! | open the device | [`open`] → [`Device`] (the selected board's, [`board::Selected`]) |
//! | register a kernel | [`Device::register_kernel`], a `fn(&mut dyn` [`KernelContext`]`)` on a [`CoreType`]; [`KernelIo`] for tensor I/O by view |
//! | hold data on the device | [`DeviceTensor`] ([`Device::tensor_from`], [`Device::alloc`]), of a [`DType`] (including [`half::f16`], [`half::bf16`]) |
//! | describe work | [`Task`]s over [`Tensor`] views ([`DeviceTensor::tensor`]), each naming a registered kernel ([`FuncId`]) |
//! | build a graph | [`Device::build`], a closure that submits tasks to a [`GraphBuilder`] → [`Graph`]; or an orchestration function ([`OrchFn`] over an [`Orch`], with [`OrchArgs`]) registered as a [`Program`], which either runtime ([`RuntimeKind`]) runs |
//! | run it | [`Device::run`], or [`Device::run_with`] and a [`RunConfig`] ([`Executor`], [`RingConfig`], the args dump's [`dump::DumpLevel`]) → [`RunReport`] |
//! | handle errors | [`Error`] (with [`ConfigError`] for a configuration the run refused, [`DeviceError`] for a fault the device reported, its [`ErrorCode`]), [`GraphError`], [`OrchError`] |
//!
//! [`prelude`] brings the usual ones in with one `use`. The args dump's reader is [`dump`];
//! the boards are [`board`].
//!
//! ## The rest
//!
//! [`runtime`] is the runtime crate (`pto-runtime`) whole: the device layouts, the program
//! table, the AICPU and AICore entry points and the host runner's every part — the full API
//! for board porters and tools. [`hal`] is the HAL a board implements. The simulator runs the
//! device half in this process (the hardware platforms' AICPU primitives exist and are tested
//! under qemu, with the runtime's AICPU programs run over them; their host half over the vendor
//! runtime has run only against a recording stand-in for the vendor library, never on a chip).

pub use pto_hal as hal;
pub use pto_runtime as runtime;
/// Half-precision element types: `pto::half::f16` and `pto::half::bf16` are tensor elements.
pub use pto_runtime::half;
pub use pto_runtime::host::{
    AicoreProgram, ConfigError, DeviceError, Error, Executor, LegacyReason, Program, RingConfig, RunConfig, RunReport,
    Timeouts, Trace,
};

// The user's API at the top level: the task model, orchestration, kernels and error codes.
pub use pto_hal::{CoreType, KernelContext, KernelContextExt};
pub use pto_runtime::codes::{ErrorCode, OrchError};
pub use pto_runtime::graph::{DType, Direction, Element, FuncId, GraphError, Kind, Task, TaskId, Tensor};
pub use pto_runtime::hbg::GraphBuilder;
pub use pto_runtime::kernel::KernelIo;
pub use pto_runtime::orch::{Local, Orch, OrchArgs, OrchFail, OrchFn, RuntimeKind, ScopeMode};

/// The args dump: the level a run records at, its report, and the reader of a dump directory.
///
/// ```no_run
/// let d = pto::dump::Dump::open("/tmp/d/hbg")?; // args_dump.json + args.bin
/// for r in d.records.iter().filter(|r| r.stage == pto::dump::Stage::AfterCompletion) {
///     println!("task {} arg {}: {} bytes", r.task, r.arg, d.bytes(r).len());
/// }
/// # Ok::<(), pto::dump::DumpError>(())
/// ```
pub mod dump {
    pub use pto_runtime::dump::DumpLevel;
    pub use pto_runtime::host::dump::{
        Accounting, ArgDirection, DocumentError, Dump, DumpError, DumpReport, Manifest, Record, RunInfo, Stage,
    };
}

/// Boards, and the one this build selected.
///
/// The `board-*` features of this package are pto-boards' own: its build script resolves them
/// to [`board::Selected`] (a non-default board wins over the default; two non-default boards,
/// or none, fail the build naming the features), and only the boards whose platforms are
/// enabled are compiled — so this module holds the selected board and whichever others this
/// build enabled.
pub mod board {
    pub use pto_boards::*;
}

use board::Board;

/// The platform of the selected board.
pub type SelectedPlatform = <board::Selected as Board>::Platform;
/// A device of the selected board.
pub type Device = pto_runtime::host::Device<SelectedPlatform>;
/// A device tensor of the selected board.
pub type DeviceTensor = pto_runtime::host::DeviceTensor<SelectedPlatform>;
/// A built graph of the selected board.
pub type Graph = pto_runtime::host::Graph<SelectedPlatform>;

/// Open the selected board's device.
#[cfg(not(any(feature = "board-a2a3", feature = "board-a5")))]
pub fn open() -> Result<Device, Error> {
    open_board::<board::Selected>()
}

/// Open the selected board's device: a hardware board, whose runtime device programs come
/// from its device library (see `pto_boards::A2a3`).
#[cfg(any(feature = "board-a2a3", feature = "board-a5"))]
pub fn open() -> Result<Device, Error> {
    open_chip_board::<board::Selected>()
}

/// Open the device of a hardware board: the runtime's device programs are loaded by name from
/// the platform's device library.
pub fn open_chip_board<B: Board>() -> Result<pto_runtime::host::Device<B::Platform>, Error> {
    let t = B::timeouts();
    let dev = B::open().map_err(|e| Error::platform("device open", e))?;
    pto_runtime::host::Device::new(dev, pto_runtime::host::Timeouts::new(t.watchdog_us, t.exit_us, t.stream_us))
}

/// Open the device of any board whose device half runs in this process (every simulated
/// board): the runtime's device programs are installed into it, and the C AICore program
/// (`pto_aicore_c`, selected per run by [`RunConfig::aicore`]).
pub fn open_board<B: Board>() -> Result<pto_runtime::host::Device<B::Platform>, Error>
where
    B::Platform: pto_hal::Platform,
{
    let t = B::timeouts();
    let dev = B::open().map_err(|e| Error::platform("device open", e))?;
    // The C AICore program too (`RunConfig::aicore`, `--aicore native`).
    pto_aicore_c::install::<B::Platform>(&dev).map_err(|e| Error::platform("C AICore program install", e))?;
    pto_runtime::host::Device::new_in_process(
        dev,
        pto_runtime::host::Timeouts::new(t.watchdog_us, t.exit_us, t.stream_us),
    )
}

/// Everything an example or test usually needs.
pub mod prelude {
    pub use crate::board::{Board, Selected};
    pub use crate::hal::{CoreType, KernelContext, KernelContextExt, Topology};
    pub use crate::runtime::codes::{ErrorCode, OrchError};
    pub use crate::runtime::graph::{DType, Direction, FuncId, GraphError, Kind, Task, TaskId, Tensor};
    pub use crate::runtime::hbg::GraphBuilder;
    pub use crate::runtime::kernel::KernelIo;
    pub use crate::runtime::orch::{Local, Orch, OrchArgs, OrchFail, OrchFn, RuntimeKind, ScopeMode};
    pub use crate::{
        AicoreProgram, ConfigError, Device, DeviceTensor, Error, Executor, Graph, Program, RingConfig, RunConfig,
        RunReport,
    };
}

/// The README's code blocks are compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
