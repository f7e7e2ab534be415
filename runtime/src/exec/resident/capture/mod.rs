//! Boundary capture on the resident executor (the args dump's resident route,
//! `docs/args-dump.md`): no AICPU thread dispatches or reaps a task there, so the cores stop at
//! each task's two boundaries and the AICPU captures the arguments while they wait.
//!
//! * [`slot`]: the rendezvous slot of a dispatch slot, its claim-to-abort state machine
//!   (claim, arrival, publisher, departure, abort), one attempt per step.
//! * [`lines`]: the request and acknowledgement lines, the codec both sides use.
//! * [`boundary`]: the core side — [`Boundary::cross`](boundary::Boundary::cross), one core's
//!   walk through one phase over the slot and the lines.
//! * [`service`]: the AICPU side — [`Service`](service::Service) reads the requests of the
//!   cores its thread serves and answers each in bounded steps through the thread's dump lane,
//!   in first-observation order, one open reservation per lane.
//!
//! The broken twins of the slot's and the lines' steps (the breakage suites' variants) sit
//! beside them, in each file's `broken` module, built with the `breakage` feature only.
//!
//! With the dump off the launch carries no capture region (`LaunchConfig::capture == 0`): no
//! slot, no request, no rendezvous.

pub mod boundary;
pub mod lines;
pub mod service;
pub mod slot;

/// Loom models of the capture rendezvous (`slot`, `lines`) (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;
