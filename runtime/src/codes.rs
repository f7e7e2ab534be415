//! Error codes of the device side, with the reference runtime's numeric values.
//!
//! Orchestrator codes are 1–11, scheduler codes 100–104; pto-rt adds device-fault codes from
//! 200 for faults the reference reports only as opaque stream errors. Every code has a name, a
//! description and a hint saying what to change.

use num_enum::{IntoPrimitive, TryFromPrimitive};

/// Orchestrator error codes (1–11).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[repr(i32)]
pub enum OrchError {
    /// One scope holds at least as many tasks as the task window.
    ScopeDeadlock = 1,
    /// The output heap cannot hold the bytes asked for.
    HeapRingDeadlock = 2,
    /// No task-window slot (host-built graph: graph larger than capacity).
    FlowControlDeadlock = 3,
    /// The fan-in representation of one task is exhausted.
    DepPoolOverflow = 4,
    /// Orchestration API misuse.
    InvalidArgs = 5,
    /// Retired code, reported as 4 today.
    DependencyOverflow = 6,
    /// A sync-start cohort is larger than the cores that can host it.
    RequireSyncStartInvalid = 7,
    /// An orchestrator read of tensor data waited past its budget.
    TensorWaitTimeout = 8,
    /// The orchestration reported a fatal error itself.
    ExplicitOrchFatal = 9,
    /// A scope's task list overflowed.
    ScopeTasksOverflow = 10,
    /// The tensor map's entry pool is wedged.
    TensormapOverflow = 11,
}

/// Scheduler error codes (100–104).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[repr(i32)]
pub enum SchedError {
    /// No progress within the watchdog budget.
    SchedulerTimeout = 100,
    /// A malformed asynchronous completion.
    AsyncCompletionInvalid = 101,
    /// The asynchronous wait list is full.
    AsyncWaitOverflow = 102,
    /// An asynchronous completion could not be registered.
    AsyncRegistrationFailed = 103,
    /// A ready queue overflowed.
    ReadyQueueOverflow = 104,
}

/// Device faults pto-rt reports with a code of its own (200+).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[repr(i32)]
pub enum DeviceFault {
    /// A kernel panicked or trapped on its core.
    KernelFault = 200,
    /// A dispatched task names a kernel binary its core cannot resolve.
    UnknownKernel = 201,
    /// The launch descriptor or graph image failed validation on the device.
    BadImage = 202,
    /// A core's handshake report is malformed (wrong type or physical id).
    BadReport = 203,
    /// A core did not acknowledge EXIT within the exit budget.
    ExitTimeout = 204,
    /// A kernel started (its core acknowledged the dispatch) and did not finish within the
    /// watchdog.
    KernelHung = 205,
    /// A core acknowledged EXIT and its AICPU thread neither released nor abandoned it within
    /// the core's wait budget. The core does not leave (the AICPU may still own it): it keeps
    /// waiting at its gate, and the run ends through its fatal path.
    ReleaseTimeout = 206,
    /// Resident args capture: a participant of a task boundary waited past its budget for
    /// the phase to be sealed (the capture is abandoned, the run ends, the dump's accounting
    /// is unknown).
    ArgsCaptureTimeout = 207,
    /// Resident args capture: a participant waited past its budget while the boundary's
    /// rendezvous slot was still being initialised by its claimer (nothing was written to the
    /// slot; the run ends).
    ArgsCaptureInitLost = 208,
    /// The launch descriptor names more clusters than this platform's AICPU programs hold
    /// (their per-core tables are sized by the platform's bound, `AicpuAgent::MaxClusters`):
    /// the launch is refused, every core's window cancelled, nothing run.
    TopologyBound = 209,
}

/// Any device-side error code.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// An orchestrator code.
    Orch(OrchError),
    /// A scheduler code.
    Sched(SchedError),
    /// A pto-rt device-fault code.
    Device(DeviceFault),
}

impl ErrorCode {
    /// Decode a numeric code.
    pub fn from_i32(v: i32) -> Option<ErrorCode> {
        OrchError::try_from(v)
            .map(ErrorCode::Orch)
            .or_else(|_| SchedError::try_from(v).map(ErrorCode::Sched))
            .or_else(|_| DeviceFault::try_from(v).map(ErrorCode::Device))
            .ok()
    }

    /// The numeric value.
    pub fn value(self) -> i32 {
        match self {
            ErrorCode::Orch(e) => e.into(),
            ErrorCode::Sched(e) => e.into(),
            ErrorCode::Device(e) => e.into(),
        }
    }

    /// The upper-case name the reference runtime prints.
    pub fn name(self) -> &'static str {
        self.info().0
    }
    /// What the code means.
    pub fn description(self) -> &'static str {
        self.info().1
    }
    /// What to change.
    pub fn hint(self) -> &'static str {
        self.info().2
    }

    fn info(self) -> (&'static str, &'static str, &'static str) {
        match self {
            ErrorCode::Orch(e) => e.info(),
            ErrorCode::Sched(e) => e.info(),
            ErrorCode::Device(e) => e.info(),
        }
    }
}

impl OrchError {
    /// Name, meaning and what to change (the tables behind [`ErrorCode::name`],
    /// [`ErrorCode::description`] and [`ErrorCode::hint`]).
    fn info(self) -> (&'static str, &'static str, &'static str) {
        use OrchError as O;
        match self {
            O::ScopeDeadlock => (
                "SCOPE_DEADLOCK",
                "a scope holds at least as many tasks as the task window, so its own references block reclamation",
                "enlarge the task window for this ring depth or split the scope",
            ),
            O::HeapRingDeadlock => (
                "HEAP_RING_DEADLOCK",
                "the output heap cannot hold the bytes requested even after every reclaimable task retired",
                "enlarge the heap ring or shrink the largest runtime-allocated output",
            ),
            O::FlowControlDeadlock => (
                "FLOW_CONTROL_DEADLOCK",
                "no task-window slot can be freed: the ring is held by tasks of enclosing scopes that are still open, or nothing was reclaimed within the orchestrator's wait budget",
                "enlarge the task window of that ring depth (RingConfig::window), move work into inner scopes, or raise RingConfig::wait_us",
            ),
            O::DepPoolOverflow => (
                "DEP_POOL_OVERFLOW",
                "the fan-in of one task exceeds the dependency pool",
                "enlarge the dependency pool or reduce the producers of one task",
            ),
            O::InvalidArgs => (
                "INVALID_ARGS",
                "the orchestration API was misused",
                "check the arguments of the task named in the detail",
            ),
            O::DependencyOverflow => (
                "DEPENDENCY_OVERFLOW",
                "retired: fan-in overflow, now reported as DEP_POOL_OVERFLOW",
                "see DEP_POOL_OVERFLOW",
            ),
            O::RequireSyncStartInvalid => (
                "REQUIRE_SYNC_START_INVALID",
                "a sync-start cohort needs more cores than the device has",
                "lower block_num of the sync-start task",
            ),
            O::TensorWaitTimeout => (
                "TENSOR_WAIT_TIMEOUT",
                "an orchestrator read of tensor data waited past its budget for the producer",
                "check the producer kernel for a hang, or raise the tensor wait budget",
            ),
            O::ExplicitOrchFatal => (
                "EXPLICIT_ORCH_FATAL",
                "the orchestration reported a fatal error",
                "read the orchestration's own message",
            ),
            O::ScopeTasksOverflow => (
                "SCOPE_TASKS_OVERFLOW",
                "scopes are nested deeper than the runtime tracks (64 levels)",
                "flatten the scope nesting",
            ),
            O::TensormapOverflow => (
                "TENSORMAP_OVERFLOW",
                "the tensor map's entry pool could not be reclaimed",
                "enlarge the tensor map or retire tasks sooner",
            ),
        }
    }
}

impl SchedError {
    /// Name, meaning and what to change (the tables behind [`ErrorCode::name`],
    /// [`ErrorCode::description`] and [`ErrorCode::hint`]).
    fn info(self) -> (&'static str, &'static str, &'static str) {
        use SchedError as S;
        match self {
            S::SchedulerTimeout => (
                "SCHEDULER_TIMEOUT",
                "the scheduler saw no progress within its watchdog budget (a core never reported, a kernel never finished, or a dependency can never resolve)",
                "check the site: a hung kernel or a silent core; raise the watchdog budget only for genuinely long kernels",
            ),
            S::AsyncCompletionInvalid => (
                "ASYNC_COMPLETION_INVALID",
                "a malformed asynchronous completion",
                "check the asynchronous completion producer",
            ),
            S::AsyncWaitOverflow => {
                ("ASYNC_WAIT_OVERFLOW", "the asynchronous wait list is full", "reduce outstanding asynchronous waits")
            }
            S::AsyncRegistrationFailed => (
                "ASYNC_REGISTRATION_FAILED",
                "an asynchronous completion could not be registered",
                "internal error: report it",
            ),
            S::ReadyQueueOverflow => (
                "READY_QUEUE_OVERFLOW",
                "a ready queue overflowed",
                "internal error: ready queues are sized from the graph; report it",
            ),
        }
    }
}

impl DeviceFault {
    /// Name, meaning and what to change (the tables behind [`ErrorCode::name`],
    /// [`ErrorCode::description`] and [`ErrorCode::hint`]).
    fn info(self) -> (&'static str, &'static str, &'static str) {
        use DeviceFault as D;
        match self {
            D::KernelFault => (
                "KERNEL_FAULT",
                "a kernel panicked or trapped on its core",
                "fix the kernel named by the task's func id; the message says why it failed",
            ),
            D::UnknownKernel => (
                "UNKNOWN_KERNEL",
                "a task's kernel binary is not loaded for the core type it was dispatched to",
                "register the kernel for that core type",
            ),
            D::BadImage => (
                "BAD_IMAGE",
                "the launch descriptor or graph image failed validation on the device",
                "internal error: the host built an image the device rejects; report it",
            ),
            D::BadReport => (
                "BAD_REPORT",
                "a core's handshake report named the wrong core type or a physical id outside the device",
                "check the board's topology against the device",
            ),
            D::ExitTimeout => (
                "EXIT_TIMEOUT",
                "a core did not acknowledge EXIT within the exit budget; it was not released",
                "the device is unusable until reopened; check for a kernel that never returns",
            ),
            D::ReleaseTimeout => (
                "RELEASE_TIMEOUT",
                "a core acknowledged EXIT but its AICPU thread did not release it through the teardown gate within the core's wait budget; the core keeps waiting (it never leaves while the AICPU may still own it)",
                "an AICPU thread is stuck in retirement: if the run never completes the device is unusable until reopened; otherwise raise the exit budget",
            ),
            D::KernelHung => (
                "KERNEL_HUNG",
                "a kernel started on its core and did not return within the scheduler's watchdog",
                "fix the kernel named by the task (a loop that never ends, a wait on data nobody writes); raise the watchdog only for genuinely long kernels. The device is unusable until reopened while the core stays stuck",
            ),
            D::ArgsCaptureTimeout => (
                "ARGS_CAPTURE_TIMEOUT",
                "a core waited at a task boundary past its budget for the args dump to seal the boundary's capture; nothing was sealed and the dump's accounting is unknown",
                "the host did not drain the dump (raise DumpConfig's arena or wait budget) or an AICPU thread stopped serving; the site says which boundary",
            ),
            D::TopologyBound => (
                "TOPOLOGY_BOUND",
                "the launch names more clusters than this platform's AICPU programs are built for (their per-core tables are sized at compile time by the platform's bound); nothing ran. The detail is the clusters launched (high 32 bits) and the bound (low 32 bits)",
                "launch at most the bound's clusters (RunConfig::clusters), or use the device library built for this chip: the board's topology exceeds its platform's bound",
            ),
            D::ArgsCaptureInitLost => (
                "ARGS_CAPTURE_INIT_LOST",
                "a core waited at a task boundary past its budget while the boundary's rendezvous slot was still being initialised by the core that claimed it",
                "the claiming core stalled or died inside the claim; check the core named in the fault",
            ),
        }
    }
}

impl core::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.value())
    }
}

/// Where on the device a fault was latched.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[repr(u32)]
pub enum Site {
    /// AICPU boot: reading the descriptor and the graph image.
    Boot = 1,
    /// AICPU: waiting for a core's handshake report.
    Handshake = 2,
    /// AICPU: dispatching a task.
    Dispatch = 3,
    /// AICPU: waiting for a running core to finish.
    Completion = 4,
    /// AICPU: no thread made progress and tasks remain.
    Stall = 5,
    /// AICPU: retiring cores (EXIT broadcast and quiesce).
    Exit = 6,
    /// AICore: running a kernel.
    Kernel = 7,
    /// AICore: waiting for its window to open.
    Window = 8,
    /// AICore: waiting for the next dispatch.
    CoreIdle = 9,
    /// The orchestration (on the host for the host-built graph, on the highest AICPU thread
    /// for the device-side runtime).
    Orchestrator = 10,
    /// AICore: waiting at its teardown gate for the AICPU's release.
    Gate = 11,
    /// AICore: at a task's input boundary (the args dump's BEFORE capture).
    CaptureBefore = 12,
    /// AICore: at a task's output boundary (the args dump's AFTER capture).
    CaptureAfter = 13,
}

impl Site {
    /// Human-readable site name.
    pub fn name(self) -> &'static str {
        match self {
            Site::Boot => "aicpu boot",
            Site::Handshake => "aicpu handshake",
            Site::Dispatch => "aicpu dispatch",
            Site::Completion => "aicpu completion wait",
            Site::Stall => "scheduler stall",
            Site::Exit => "core retirement",
            Site::Kernel => "aicore kernel",
            Site::Window => "aicore window wait",
            Site::CoreIdle => "aicore dispatch wait",
            Site::Orchestrator => "orchestrator",
            Site::Gate => "aicore teardown-gate wait",
            Site::CaptureBefore => "aicore input-capture boundary",
            Site::CaptureAfter => "aicore output-capture boundary",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_has_text() {
        for v in (0..=12).chain(99..=105).chain(199..=209) {
            if let Some(c) = ErrorCode::from_i32(v) {
                assert_eq!(c.value(), v);
                assert!(!c.name().is_empty() && !c.description().is_empty() && !c.hint().is_empty());
            }
        }
        assert_eq!(ErrorCode::from_i32(7).unwrap().name(), "REQUIRE_SYNC_START_INVALID");
        assert_eq!(ErrorCode::from_i32(104).unwrap().name(), "READY_QUEUE_OVERFLOW");
        assert!(ErrorCode::from_i32(0).is_none());
        assert!(ErrorCode::from_i32(12).is_none());
    }
}
