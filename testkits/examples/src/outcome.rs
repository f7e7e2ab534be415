//! What a workload run reports ([`Outcome`]) or why it failed ([`Failure`]), and the
//! comparison of a result with its golden.

use std::time::Duration;

use pto_runtime::graph::GraphError;
use pto_runtime::host::{Error, RunReport};
use pto_runtime::orch::RuntimeKind;

/// What a workload run reports.
#[derive(Debug)]
pub struct Outcome {
    /// The workload's name.
    pub name: String,
    /// The runtime it ran on.
    pub runtime: RuntimeKind,
    /// The run's report.
    pub report: RunReport,
    /// The host graph build time (host-built graph; zero on the device-side runtime).
    pub build: Duration,
    /// How many output values matched the golden.
    pub checked: usize,
}

impl Outcome {
    /// One line: the submission figure is the host graph build (hbg) or the orchestration
    /// time on the device (trb, overlapped with execution).
    /// `board` is the name printed (`pto::board::Selected::NAME` for the selected board).
    pub fn summary(&self, board: &str) -> String {
        let submit = match self.report.orchestration {
            Some(d) => format!("orch={:.3} ms", d.as_secs_f64() * 1e3),
            None => format!("build={:.3} ms", self.build.as_secs_f64() * 1e3),
        };
        format!(
            "{:<22} board={} runtime={} executor={} tasks={} cores={} {submit} run={:.3} ms checked={} values PASS",
            self.name,
            board,
            self.runtime.name(),
            self.report.executor,
            self.report.tasks,
            self.report.cores,
            self.report.wall.as_secs_f64() * 1e3,
            self.checked
        )
    }
}

pub(crate) fn check_close(name: &str, got: &[f32], want: &[f32]) -> Result<usize, String> {
    if got.len() != want.len() {
        return Err(format!("{name}: {} values, golden has {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g.is_nan() || (g - w).abs() > 1e-5 * w.abs().max(1.0) {
            return Err(format!("{name}: value {i} is {g}, golden {w}"));
        }
    }
    Ok(got.len())
}

/// A workload failure: the run failed, or its result differs from the golden.
#[derive(Debug)]
pub enum Failure {
    /// The run failed.
    Run(Error),
    /// The result differs from the golden.
    Golden(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Run(e)
    }
}

impl From<GraphError> for Failure {
    fn from(e: GraphError) -> Self {
        Failure::Run(e.into())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Run(e) => write!(f, "{e}"),
            Failure::Golden(s) => write!(f, "golden mismatch: {s}"),
        }
    }
}
