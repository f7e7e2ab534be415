//! The platform bundle: which agents, streams and memory a platform provides.

use core::sync::atomic::AtomicPtr;

use generic_array::ArrayLength;
use generic_array::typenum::Unsigned;

use crate::check::{Checks, GraphNotes};
use crate::{
    AicoreCache, AicoreStream, AicpuCache, AicpuStream, Barriers, Clock, Contract, CoreRegisters, CoreType,
    DeviceMemory, ErrorType, Events, GmAddr, GmAtomic, GmMemory, Kernel, KernelContext, KernelFault, KernelFn, Pause,
    Registers,
};

/// The shape of a device: clusters of 1 AIC + 2 AIV, and AICPU threads.
///
/// Worker numbering (the reference's flat layout): AIC workers `0..clusters`, AIV workers
/// `clusters..3*clusters`; cluster `c` is `{c, clusters + 2c, clusters + 2c + 1}`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Number of clusters.
    pub clusters: u32,
    /// Number of AICPU threads a run launches.
    pub aicpu_threads: u32,
}

impl Topology {
    /// Total AICore workers (`3 * clusters`).
    pub const fn workers(&self) -> u32 {
        self.clusters * 3
    }
    /// Worker index of the AIC of cluster `c`.
    pub const fn aic(&self, c: u32) -> u32 {
        c
    }
    /// Worker index of AIV lane `lane` (0 or 1) of cluster `c`.
    pub const fn aiv(&self, c: u32, lane: u32) -> u32 {
        self.clusters + 2 * c + lane
    }
    /// Core type of worker `w`.
    pub const fn core_type(&self, w: u32) -> CoreType {
        if w < self.clusters { CoreType::Aic } else { CoreType::Aiv }
    }
    /// Cluster of worker `w`.
    pub const fn cluster_of(&self, w: u32) -> u32 {
        if w < self.clusters { w } else { (w - self.clusters) / 2 }
    }
}

/// What an AICPU thread can do: GM, caches, barriers, registers of the cores, time, events and
/// timed pauses, and run orchestration programs.
pub trait AicpuAgent: GmAtomic + GmMemory + AicpuCache + Barriers + Registers + Clock + Events + Pause {
    /// The most clusters any launch on this agent's platform has, as a type (`typenum`): a
    /// chip's own cluster count, the simulator's largest device. The runtime's AICPU programs
    /// size their per-cluster and per-core tables by it (`GenericArray`, three cores per
    /// cluster), so they are fixed at compile time instead of grown per run, and refuse a
    /// launch descriptor that names more clusters.
    type MaxClusters: ArrayLength;
    /// [`AicpuAgent::MaxClusters`] as a number.
    const MAX_CLUSTERS: u32 = <Self::MaxClusters as Unsigned>::U32;
    /// The most AICore workers of a launch on this platform (`3 *` [`AicpuAgent::MAX_CLUSTERS`]).
    const MAX_WORKERS: u32 = 3 * Self::MAX_CLUSTERS;

    /// The orchestration loaded as `handle` by [`Loader::load_orchestration`], if it exists
    /// and is of type `F`. The type is checked: a handle of another program type resolves to
    /// `None`.
    fn resolve_program<F: Copy + 'static>(&self, handle: u64) -> Option<F>;
    /// Run `body` (a call into a user program) on this thread. A program that panics
    /// (simulator) is reported as a [`KernelFault`] carrying its message; the thread goes on.
    /// A platform may give the call a host thread of its own meanwhile (the simulator's
    /// coroutine engine does, as a chip gives the orchestration an AICPU core).
    // A fault is the rare path and the HAL has no allocator: its text travels inline.
    #[allow(clippy::result_large_err)]
    fn run_program(&self, body: &mut dyn FnMut()) -> Result<(), KernelFault>;

    /// Checks ([`crate::check`]): the device-side runtime submitted `task`, which depends on
    /// every task in `producers` (discovered through the tensor map, given explicitly, or
    /// implied by a scope), in submission order. Ignored unless the platform checks.
    fn note_task(&self, task: u32, producers: &mut dyn Iterator<Item = u32>) {
        let _ = (task, producers);
    }
    /// Checks: the device-side runtime retired `task` (completed, and its slot reclaimed): it
    /// forgets the task's writes, so every task submitted from now on counts as ordered after
    /// it. Ignored unless the platform checks.
    fn note_retired(&self, task: u32) {
        let _ = task;
    }
    /// Checks: the device-side runtime handed out `len` bytes at `addr` as a fresh tensor
    /// owned by `owner`; they are uninitialised until written, and what earlier tasks did to
    /// that memory no longer concerns the tasks that use the new tensor. Ignored unless the
    /// platform checks.
    fn note_allocation(&self, owner: u32, addr: GmAddr, len: u64) {
        let _ = (owner, addr, len);
    }
    /// Checks: the orchestration itself read (`write == false`) or wrote `len` bytes at
    /// `addr` (an element access), at this point of its submission order. Ignored unless the
    /// platform checks.
    fn note_orchestration_access(&self, addr: GmAddr, len: u64, write: bool) {
        let _ = (addr, len, write);
    }
}

/// What an AICore can do: GM, its cache, barriers, its own registers, time, events and timed
/// pauses, and run kernels.
pub trait AicoreAgent: GmAtomic + GmMemory + AicoreCache + Barriers + CoreRegisters + Clock + Events + Pause {
    /// The kernel loaded as `bin` by [`Loader::load_kernel`], if any.
    fn resolve_kernel(&self, bin: u64) -> Option<Kernel>;
    /// Run `kernel` on this core. A kernel that panics (simulator), traps, or (native) reports
    /// a failure code is reported as a [`KernelFault`]; the core stays usable.
    // A fault is the rare path and the HAL has no allocator: its text travels inline.
    #[allow(clippy::result_large_err)]
    fn run_kernel(&self, kernel: Kernel, ctx: &mut dyn KernelContext) -> Result<(), KernelFault>;
    /// GM as this core's load/store unit sees it, for kernels.
    fn as_gm(&self) -> &dyn GmMemory;
}

/// Where an AICPU thread starts: its place in the launch and the launch argument.
#[derive(Debug)]
pub struct AicpuLaunch<'a> {
    /// This thread's index, `0..thread_count`.
    pub thread_idx: u32,
    /// Number of threads of the launch.
    pub thread_count: u32,
    /// The launch argument (the runtime's launch descriptor).
    pub args: GmAddr,
    /// One pointer-sized cell shared by the threads of this launch, null at start (the
    /// AICPU program's static storage). The runtime's AICPU side publishes its shared state
    /// here.
    pub scratch: &'a AtomicPtr<()>,
}

/// Where an AICore starts.
#[derive(Copy, Clone, Debug)]
pub struct AicoreLaunch {
    /// The worker index of this core in the launch (see [`Topology`]).
    pub block_idx: u32,
    /// The core's type.
    pub core_type: CoreType,
    /// The physical core id (indexes the AICPU's register windows).
    pub physical_core_id: u32,
    /// The launch argument (the runtime's launch descriptor).
    pub args: GmAddr,
}

/// An AICPU program entry point. Returns 0 on success, a non-zero status otherwise.
pub type AicpuEntry<A> = fn(&A, AicpuLaunch<'_>) -> i32;
/// An AICore program entry point. Returns 0 on success, a non-zero status otherwise.
pub type AicoreEntry<A> = fn(&A, AicoreLaunch) -> i32;

/// A loaded device program (an AICPU or AICore program, or an orchestration) or kernel.
///
/// Returned by a [`Loader`]; the simulator maps it to a Rust function, hardware to a symbol of
/// a loaded binary. Only meaningful on the device it was loaded on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Handle(pub u64);

/// The two kinds of device program a run launches.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProgramKind {
    /// Runs on AICPU threads ([`AicpuEntry`]).
    Aicpu,
    /// Runs on AICores ([`AicoreEntry`]).
    Aicore,
}

/// A kernel as the loader sees it: a name, the core type it runs on, and the forms a platform
/// can load — a Rust function (the simulator, the on-target harness) and a binary compiled by
/// the vendor toolchain (hardware). One source serves every platform.
#[derive(Copy, Clone, Debug)]
pub struct KernelSource<'a> {
    /// The kernel's name (the symbol in its binary).
    pub name: &'a str,
    /// The core type it runs on.
    pub core: CoreType,
    /// The Rust body, for platforms that run kernels as functions.
    pub function: Option<KernelFn>,
    /// Path of the compiled kernel: a device binary for hardware; on the simulator, a host
    /// shared object whose entry (the symbol `name`, else `kernel_entry`) follows the native
    /// kernel ABI ([`crate::native`]). The simulator prefers it over `function`.
    pub binary: Option<&'a str>,
}

/// An orchestration program as the loader sees it (see [`KernelSource`]).
#[derive(Copy, Clone, Debug)]
pub struct OrchestrationSource<'a, F> {
    /// The program's name (the symbol in its binary).
    pub name: &'a str,
    /// The Rust function, for platforms that run the device half in process.
    pub function: Option<F>,
    /// Path of the device library holding the program, for hardware.
    pub binary: Option<&'a str>,
}

/// Host side: placing device programs, kernels and orchestrations where the device can call
/// them, and naming them by [`Handle`].
pub trait Loader: ErrorType {
    /// The device program `name` of `kind` (the runtime's AICPU and AICore programs), as
    /// installed in process ([`Platform::install_aicpu_program`]) or found in the platform's
    /// device library. An unknown name is an error naming it.
    fn load_program(&self, kind: ProgramKind, name: &str) -> Result<Handle, Self::Error>;
    /// Load a kernel; an AICore resolves the handle with [`AicoreAgent::resolve_kernel`].
    /// A source without the form this platform loads is an error naming the kernel.
    fn load_kernel(&self, kernel: &KernelSource<'_>) -> Result<Handle, Self::Error>;
    /// Load an orchestration; an AICPU thread resolves it with
    /// [`AicpuAgent::resolve_program`]. Loading the same program twice may return the same
    /// handle.
    fn load_orchestration<F: Copy + Send + Sync + PartialEq + 'static>(
        &self,
        program: &OrchestrationSource<'_, F>,
    ) -> Result<Handle, Self::Error>;
}

/// The host half of a platform: device memory, streams and the loader. Builds for the host
/// with no device code in it.
pub trait HostPlatform: 'static {
    /// The error every host-side operation of this platform returns: a HAL error that is also
    /// a standard error, so hosts can keep it as a `source`.
    type Error: crate::Error + core::error::Error + Send + Sync + 'static;
    /// The host's handle on an opened device.
    type Device: ErrorType<Error = Self::Error> + DeviceMemory + Loader + Clock;
    /// The stream that carries AICPU programs.
    type AicpuStream: AicpuStream<Error = Self::Error>;
    /// The stream that carries AICore programs.
    type AicoreStream: AicoreStream<Error = Self::Error>;

    /// The device's topology.
    fn topology(device: &Self::Device) -> Topology;
    /// Create the two distinct streams of a run. The types make "both programs on one stream"
    /// (which deadlocks: the AICPU program waits for the AICore program) unrepresentable.
    fn create_streams(device: &Self::Device) -> Result<(Self::AicpuStream, Self::AicoreStream), Self::Error>;

    /// Whether the device's cores run on the same host processors as its AICPU threads (a
    /// simulator): work moved from the AICPU threads onto the cores is then shared out of one
    /// budget, not saved. A runtime may choose its scheduling route by it. The default is
    /// `false`: a chip's cores are processors of their own.
    fn cores_share_host(device: &Self::Device) -> bool {
        let _ = device;
        false
    }
    /// Switch the checks ([`crate::check`]) a device runs from the next launch on; `false`
    /// when the platform cannot check (the default: only the simulator can), so that asking
    /// for a check is never silently ignored. Switching every check off always succeeds.
    fn set_checks(device: &Self::Device, checks: Checks) -> bool {
        let _ = device;
        !checks.any()
    }
    /// The checks a device runs now.
    fn checks(device: &Self::Device) -> Checks {
        let _ = device;
        Checks::OFF
    }
    /// Checks: the run whose launch descriptor is at `launch` is of a host-built graph; its
    /// tasks, edges and fresh memory. Called once the run's AICore program is submitted and
    /// before its AICPU program is (so before the run can end). Ignored unless the platform
    /// checks.
    fn note_graph(device: &Self::Device, launch: GmAddr, graph: &GraphNotes<'_>) {
        let _ = (device, launch, graph);
    }
    /// Checks (initcheck): the first byte of `[addr, addr + len)` nothing wrote since it was
    /// handed out, when the device tracks that; `None` when every byte was written or the
    /// device does not track it. The runtime asks before it reads a tensor back.
    fn first_unwritten(device: &Self::Device, addr: GmAddr, len: u64) -> Option<GmAddr> {
        let _ = (device, addr, len);
        None
    }
}

/// The device half of a platform: what its AICPU threads and AICores are, and its coherence
/// contract. Builds for the device (aarch64 for the AICPU) with no host code in it.
pub trait DevicePlatform: 'static {
    /// Host-DMA coherence contract (see [`Contract`]).
    type Contract: Contract;
    /// What an AICPU thread is.
    type Aicpu: AicpuAgent + AicpuCache<Contract = Self::Contract>;
    /// What an AICore is.
    type Aicore: AicoreAgent + AicoreCache<Contract = Self::Contract>;
}

/// A platform whose two halves run in one process (the simulator, the on-target harness): the
/// runtime's device programs are installed as Rust functions under their names, and the
/// loader finds them there.
///
/// Runtime device code is generic over [`DevicePlatform`], host code over [`HostPlatform`].
pub trait Platform: HostPlatform + DevicePlatform {
    /// Install the AICPU program `name`.
    fn install_aicpu_program(
        device: &Self::Device,
        name: &'static str,
        entry: AicpuEntry<Self::Aicpu>,
    ) -> Result<(), Self::Error>;
    /// Install the AICore program `name`.
    fn install_aicore_program(
        device: &Self::Device,
        name: &'static str,
        entry: AicoreEntry<Self::Aicore>,
    ) -> Result<(), Self::Error>;
}
