//! Host-side streams: ordered queues of device programs.

use crate::{ErrorType, GmAddr, Handle};

/// An ordered queue of device programs with completion events.
///
/// Tier: host. Programs on one stream run in submission order; two streams are independent.
pub trait Stream: ErrorType {
    /// A completion event recorded on this stream.
    type Event: Copy + core::fmt::Debug;
    /// Record an event that completes when every program submitted before it has finished.
    fn record_event(&mut self) -> Result<Self::Event, Self::Error>;
    /// Non-blocking: has `event` completed?
    fn query_event(&self, event: Self::Event) -> Result<bool, Self::Error>;
    /// Wait for `event` for at most `timeout_us` microseconds (`ErrorKind::Timeout` after).
    /// When a program before the event completed with a failure, the wait reports it
    /// (`ErrorKind::DeviceFault`) once that program is done.
    fn wait_event(&self, event: Self::Event, timeout_us: u64) -> Result<(), Self::Error>;
    /// Wait for everything submitted, for at most `timeout_us`; this is the call that surfaces
    /// a device program's non-zero status as an error (`ErrorKind::DeviceFault`). The error is
    /// reported once, then cleared.
    fn synchronize(&mut self, timeout_us: u64) -> Result<(), Self::Error>;
}

/// The stream that carries AICPU programs.
pub trait AicpuStream: Stream {
    /// Launch the AICPU program `program` (a [`Loader::load_program`](crate::Loader::load_program)
    /// handle of kind [`ProgramKind::Aicpu`](crate::ProgramKind::Aicpu)) on `threads` AICPU
    /// threads with argument `args`. A launch that returns an error submitted nothing.
    fn launch_aicpu(&mut self, program: Handle, args: GmAddr, threads: u32) -> Result<(), Self::Error>;
}

/// The stream that carries AICore programs.
pub trait AicoreStream: Stream {
    /// Launch the AICore program `program` (of kind [`ProgramKind::Aicore`](crate::ProgramKind::Aicore))
    /// on the cores of `clusters` clusters (`3 * clusters` workers). A launch that returns an
    /// error submitted nothing.
    fn launch_aicore(&mut self, program: Handle, args: GmAddr, clusters: u32) -> Result<(), Self::Error>;
}
