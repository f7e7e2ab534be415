//! The orchestration API on the host: a host-built graph is built by running the user's
//! orchestration against the [`GraphBuilder`](super::GraphBuilder).

use alloc::string::String;

use super::GraphBuilder;
use crate::codes::OrchError;
use crate::graph::{DType, Task, TaskId, Tensor};
use crate::orch::{OrchFail, Orchestrator, RuntimeKind, ScopeMode};

/// The host-built graph runs the orchestration API on the host: scopes only select the
/// discovery mode (the graph heap lives as long as the graph), and tensor data cannot be read
/// or written while the graph is being built (nothing has run yet).
impl Orchestrator for GraphBuilder<'_> {
    fn runtime(&self) -> RuntimeKind {
        RuntimeKind::HostBuiltGraph
    }
    fn submit_task(&mut self, task: Task) -> Result<TaskId, OrchFail> {
        Ok(self.submit(task)?)
    }
    fn alloc(&mut self, dtype: DType, shape: &[u32]) -> Result<Tensor, OrchFail> {
        Ok(self.alloc_tensor(dtype, shape)?)
    }
    fn scope_begin(&mut self, mode: ScopeMode) -> Result<(), OrchFail> {
        if mode == ScopeMode::Auto && self.scopes.last() == Some(&ScopeMode::Manual) {
            return Err(self.refuse("an auto scope inside a manual scope"));
        }
        if self.scopes.len() >= crate::trb::orchestrator::MAX_SCOPE_DEPTH {
            self.fatal.get_or_insert_with(|| String::from("scopes nested too deep"));
            return Err(OrchFail::Code { code: OrchError::ScopeTasksOverflow, detail: self.scopes.len() as u64 });
        }

        self.scopes.push(mode);
        self.scope_serials.push(self.next_scope);
        self.next_scope += 1;
        Ok(())
    }
    fn scope_end(&mut self) -> Result<(), OrchFail> {
        match self.scopes.pop() {
            Some(_) => {
                self.scope_serials.pop();
                Ok(())
            }
            None => Err(self.refuse("scope_end without a matching scope_begin")),
        }
    }
    fn read_element(&mut self, _t: &Tensor, _index: &[u32], _out: &mut [u8]) -> Result<(), OrchFail> {
        Err(self
            .refuse("tensor data cannot be read while a host-built graph is being built (use the device-side runtime)"))
    }
    fn write_element(&mut self, _t: &Tensor, _index: &[u32], _bytes: &[u8]) -> Result<(), OrchFail> {
        Err(self.refuse(
            "tensor data cannot be written while a host-built graph is being built (use the device-side runtime)",
        ))
    }
    fn fatal(&mut self, message: &str) -> OrchFail {
        self.fatal.get_or_insert_with(|| String::from(message));
        OrchFail::Code { code: OrchError::ExplicitOrchFatal, detail: 0 }
    }
    fn clusters(&self) -> u32 {
        self.clusters
    }
}
