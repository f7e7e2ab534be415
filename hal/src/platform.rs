//! The platform bundle: which agents, streams and memory a platform provides.

use core::sync::atomic::AtomicPtr;

use crate::{
    AicoreStream, AicpuStream, Barriers, CacheMaintenance, Clock, Contract, CoreRegisters, CoreType, DeviceMemory,
    ErrorType, Events, GmAddr, GmAtomic, GmMemory, KernelContext, KernelFault, KernelFn, Registers,
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

/// What an AICPU thread can do: GM, caches, barriers, registers of the cores, time, events,
/// and run orchestration programs.
pub trait AicpuAgent: GmAtomic + GmMemory + CacheMaintenance + Barriers + Registers + Clock + Events {
    /// The program loaded as `handle` by [`ProgramLoader::load_program`], if it exists and is
    /// of type `F`. The type is checked: a handle of another program type resolves to `None`.
    fn resolve_program<F: Copy + 'static>(&self, handle: u64) -> Option<F>;
    /// Run `body` (a call into a user program) on this thread. A program that panics
    /// (simulator) is reported as a [`KernelFault`] carrying its message; the thread goes on.
    // A fault is the rare path and the HAL has no allocator: its text travels inline.
    #[allow(clippy::result_large_err)]
    fn run_program(&self, body: &mut dyn FnMut()) -> Result<(), KernelFault>;
}

/// What an AICore can do: GM, its cache, barriers, its own registers, time, and run kernels.
pub trait AicoreAgent: GmAtomic + GmMemory + CacheMaintenance + Barriers + CoreRegisters + Clock + Events {
    /// The kernel loaded at `bin` by [`KernelLoader::load_kernel`], if any.
    fn resolve_kernel(&self, bin: u64) -> Option<KernelFn>;
    /// Run `kernel` on this core. A kernel that panics (simulator) or traps is reported as a
    /// [`KernelFault`]; the core stays usable.
    // A fault is the rare path and the HAL has no allocator: its text travels inline.
    #[allow(clippy::result_large_err)]
    fn run_kernel(&self, kernel: KernelFn, ctx: &mut dyn KernelContext) -> Result<(), KernelFault>;
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

/// Host side: placing kernels where AICores can call them.
pub trait KernelLoader: ErrorType {
    /// Load `kernel` for cores of type `core`; returns its binary address, which an AICore
    /// resolves with [`AicoreAgent::resolve_kernel`].
    fn load_kernel(&self, kernel: KernelFn, core: CoreType) -> Result<u64, Self::Error>;
}

/// Host side: placing orchestration programs where AICPU threads can call them.
///
/// A program is any `Copy + 'static` value (the runtime uses a function pointer); the HAL
/// only carries it from the host to [`AicpuAgent::resolve_program`] and checks its type.
pub trait ProgramLoader: ErrorType {
    /// Load `program`; returns its handle. Loading the same program twice may return the same
    /// handle.
    fn load_program<F: Copy + Send + Sync + PartialEq + 'static>(&self, program: F) -> Result<u64, Self::Error>;
}

/// A platform: the agents its device code runs as and the host handles that drive it.
///
/// Runtime code is generic over `P: Platform` and names nothing else of the machine.
pub trait Platform: 'static {
    /// Host-DMA coherence contract (see [`Contract`]).
    type Contract: Contract;
    /// The error every host-side operation of this platform returns: a HAL error that is also
    /// a standard error, so hosts can keep it as a `source`.
    type Error: crate::Error + core::error::Error + Send + Sync + 'static;
    /// The host's handle on an opened device.
    type Device: ErrorType<Error = Self::Error> + DeviceMemory + KernelLoader + ProgramLoader + Clock;

    /// What an AICPU thread is.
    type Aicpu: AicpuAgent + CacheMaintenance<Contract = Self::Contract>;
    /// What an AICore is.
    type Aicore: AicoreAgent + CacheMaintenance<Contract = Self::Contract>;
    /// The stream that carries AICPU programs.
    type AicpuStream: AicpuStream<Agent = Self::Aicpu, Error = Self::Error>;
    /// The stream that carries AICore programs.
    type AicoreStream: AicoreStream<Agent = Self::Aicore, Error = Self::Error>;

    /// The device's topology.
    fn topology(device: &Self::Device) -> Topology;
    /// Create the two distinct streams of a run. The types make "both programs on one stream"
    /// (which deadlocks: the AICPU program waits for the AICore program) unrepresentable.
    fn create_streams(device: &Self::Device) -> Result<(Self::AicpuStream, Self::AicoreStream), Self::Error>;
}
