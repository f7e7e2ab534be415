//! Violations: whether a byte an agent reads is stale in a way that matters, which operation
//! was missing, and how a violation is named, kept and reported to the launch it fails.

use super::line::{LINE, LineMeta, NONE, Stamp};
use super::model::{AgentState, Faithful, HOST, is_aicpu, is_core, lock};
use crate::violation::{Missing, Violation};

impl Faithful {
    /// How agent `a` is named in a report.
    pub(super) fn name(&self, a: u16) -> String {
        if a == HOST {
            "host".into()
        } else if a == NONE {
            "nobody (initial contents)".into()
        } else if a <= self.n_aicpu {
            format!("aicpu {}", a - 1)
        } else {
            format!("core {}", a - 1 - self.n_aicpu)
        }
    }

    /// Fails the launch the agent is running with `v`, and keeps `v` (the first 256) for
    /// [`Faithful::take_violations`].
    pub(super) fn report(&self, st: &AgentState, v: Violation) {
        if let Some(l) = &st.current {
            l.fail_with_violation(v.clone());
        }
        let mut vs = lock(&self.violations);
        if vs.len() < 256 {
            vs.push(v);
        }
    }

    /// Every violation found so far (kept until [`Faithful::take_violations`]).
    pub fn take_violations(&self) -> Vec<Violation> {
        std::mem::take(&mut *lock(&self.violations))
    }

    /// The violation agent `a` found doing `op` at `addr`, after the store `writer` (agent,
    /// clock).
    pub(super) fn violation(
        &self,
        a: u16,
        op: &'static str,
        addr: u64,
        writer: (u16, u32),
        missing: Missing,
    ) -> Violation {
        Violation {
            agent: self.name(a),
            op,
            addr,
            line: addr & !(LINE - 1),
            last_writer: format!("{} @ {}", self.name(writer.0), writer.1),
            missing,
            seed: self.seed(),
        }
    }

    /// Whether byte `b` as seen (`origin`) by the reader is stale in a way that matters: the
    /// latest write happened before the read and the reader does not see it.
    pub(super) fn stale(
        &self,
        reader: u16,
        st: &AgentState,
        m: &LineMeta,
        b: usize,
        origin: Stamp,
        hit: bool,
    ) -> Option<Missing> {
        let last = m.last.get(b);
        let (w, t) = last.pair();
        if origin == last || w == NONE || st.vc[w as usize] < t {
            return None;
        }
        let in_memory = m.mem.get(b) == last;
        Some(if hit && in_memory {
            let reader_aicpu = reader != HOST && !is_core(self.n_aicpu, reader);
            if reader_aicpu && w == HOST { Missing::InvalidateAfterHostDma } else { Missing::Invalidate }
        } else if m.dirty_by & (1u128 << w) != 0 {
            if is_aicpu(self.n_aicpu, w) { Missing::AicpuClean } else { Missing::WriteBack }
        } else if !in_memory && m.mby.get(b) != w {
            Missing::WholeLineRule
        } else if is_aicpu(self.n_aicpu, w) {
            Missing::AicpuClean
        } else {
            Missing::WriteBack
        })
    }
}
