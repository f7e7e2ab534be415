//! The orchestration API: the user code that submits tasks, written once for both runtimes.
//!
//! An orchestration is a function `fn(&mut Orch<'_>, &OrchArgs) -> Result<(), OrchFail>`
//! ([`OrchFn`]). The host-built-graph runtime runs it on the host, into a graph image; the
//! tensormap-and-ringbuffer runtime runs it on the device's highest AICPU thread while the
//! other threads already schedule. Both see the same [`Orch`]:
//!
//! * [`Orch::submit`] a [`Task`] (AIC, AIV, MIX, dummy; tensors in / out / inout /
//!   output-existing / no-dep; scalars; SPMD blocks; explicit dependencies; a predicate);
//! * [`Orch::alloc_tensor`] a runtime-allocated tensor of the current scope;
//! * open nested scopes as closures ([`Orch::scope`], [`Orch::manual_scope`]) or guards
//!   ([`Orch::guard`]). A tensor allocated in a scope is a [`Local`] that borrows the scope:
//!   the borrow checker refuses to let it escape, which is what the reference runtime can
//!   only document;
//! * [`Orch::read`] / [`Orch::write`] single elements of tensor data, after the producers are
//!   done (device-side runtime only; bounded by the tensor-wait budget).
//!
//! ```compile_fail
//! # use pto_runtime::orch::*; use pto_runtime::graph::*;
//! fn leak<'a>(o: &mut Orch<'a>) -> Result<(), OrchFail> {
//!     let escaped = o.scope(|s| s.alloc_tensor(DType::F32, &[4]))?; // a Local<'inner> cannot leave
//!     let _ = escaped;
//!     Ok(())
//! }
//! ```

use core::marker::PhantomData;

use crate::codes::OrchError;
use crate::graph::{DType, Element, GraphError, Task, TaskId, Tensor};

/// Which runtime runs an orchestration.
///
/// ```
/// use pto_runtime::orch::RuntimeKind;
/// assert_eq!("trb".parse::<RuntimeKind>(), Ok(RuntimeKind::TensormapRing));
/// assert_eq!(RuntimeKind::HostBuiltGraph.to_string(), "hbg");
/// assert!("xyz".parse::<RuntimeKind>().is_err());
/// ```
// Under `std` the host's documents (the trace's `otherData`, the args-dump manifest's `run`)
// name the runtime by its short name (`hbg` / `trb`, as [`RuntimeKind::name`]); derived under
// the feature for the reasons given at `graph::DType`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "std", derive(serde::Serialize, serde::Deserialize))]
pub enum RuntimeKind {
    /// Host-built graph: the host runs the orchestration and uploads one image.
    #[default]
    #[cfg_attr(feature = "std", serde(rename = "hbg"))]
    HostBuiltGraph,
    /// Tensormap and ring buffers: the device's highest AICPU thread runs it, overlapped with
    /// scheduling, in bounded memory.
    #[cfg_attr(feature = "std", serde(rename = "trb"))]
    TensormapRing,
}

impl core::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// A runtime name that is neither `hbg` nor `trb`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown runtime {0:?}: expected `hbg` (host-built graph) or `trb` (tensormap and ring buffers)")]
pub struct UnknownRuntime(pub alloc::string::String);

impl core::str::FromStr for RuntimeKind {
    type Err = UnknownRuntime;
    /// `hbg` / `host-built-graph` or `trb` / `tensormap-ring` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let l = s.to_ascii_lowercase();
        match l.as_str() {
            "hbg" | "host-built-graph" => Ok(RuntimeKind::HostBuiltGraph),
            "trb" | "tensormap-ring" => Ok(RuntimeKind::TensormapRing),
            _ => Err(UnknownRuntime(s.into())),
        }
    }
}

impl RuntimeKind {
    /// Short name (`hbg` / `trb`).
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::HostBuiltGraph => "hbg",
            RuntimeKind::TensormapRing => "trb",
        }
    }

    /// The runtime a launch descriptor's `runtime` code names:
    /// [`RUNTIME_HBG`](crate::layout::RUNTIME_HBG) is the host-built graph, any other the
    /// tensormap-and-ring runtime.
    pub fn of_launch(code: u32) -> RuntimeKind {
        if code == crate::layout::RUNTIME_HBG { RuntimeKind::HostBuiltGraph } else { RuntimeKind::TensormapRing }
    }
}

/// How a scope discovers dependencies.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ScopeMode {
    /// Through the tensor map (read-after-write, write-after-write), plus explicit ones.
    Auto,
    /// Explicit dependencies only ([`Task::after`]); no tensor-map lookup or insert.
    Manual,
}

/// Why an orchestration call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OrchFail {
    /// Bad input, named.
    Graph(GraphError),
    /// A runtime condition with its reference code (flow control, deadlock, budgets, misuse).
    /// On the device it is latched before the call returns.
    Code {
        /// The code.
        code: OrchError,
        /// Code-specific detail (e.g. the bytes or tasks asked for).
        detail: u64,
    },
    /// The run was stopped by a fault latched elsewhere; nothing more is accepted.
    Stopped,
}

impl From<GraphError> for OrchFail {
    fn from(e: GraphError) -> Self {
        OrchFail::Graph(e)
    }
}

impl core::fmt::Display for OrchFail {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            OrchFail::Graph(e) => write!(f, "{e}"),
            OrchFail::Code { code, detail } => {
                let c = crate::codes::ErrorCode::Orch(*code);
                write!(f, "{} (detail {detail}): {}. Hint: {}", c.name(), c.description(), c.hint())
            }
            OrchFail::Stopped => f.write_str("the run was stopped by a fault latched elsewhere"),
        }
    }
}

/// What a runtime implements for [`Orch`]: the object-safe core of the orchestration API.
/// Users call [`Orch`]; runtimes implement this.
pub trait Orchestrator {
    /// Which runtime this is.
    fn runtime(&self) -> RuntimeKind;
    /// Submit a task; dependencies are discovered (auto scope) or taken from the task.
    fn submit_task(&mut self, task: Task) -> Result<TaskId, OrchFail>;
    /// A runtime-allocated tensor owned by the current scope.
    fn alloc(&mut self, dtype: DType, shape: &[u32]) -> Result<Tensor, OrchFail>;
    /// Open a nested scope.
    fn scope_begin(&mut self, mode: ScopeMode) -> Result<(), OrchFail>;
    /// Close the innermost scope.
    fn scope_end(&mut self) -> Result<(), OrchFail>;
    /// Copy `out.len()` bytes of element `index` of `t` once its producers are done.
    fn read_element(&mut self, t: &Tensor, index: &[u32], out: &mut [u8]) -> Result<(), OrchFail>;
    /// Store `bytes` into element `index` of `t` once its producers are done.
    fn write_element(&mut self, t: &Tensor, index: &[u32], bytes: &[u8]) -> Result<(), OrchFail>;
    /// Stop the run with EXPLICIT_ORCH_FATAL and `message`.
    fn fatal(&mut self, message: &str) -> OrchFail;
    /// Clusters: the board's on the host-built graph (built before any run), the run's on
    /// the device-side runtime.
    fn clusters(&self) -> u32;
}

pub use crate::graph::AsTensor;
impl AsTensor for Local<'_> {}
impl crate::graph::sealed::Sealed for Local<'_> {
    fn raw(&self) -> Tensor {
        self.t
    }
}

/// A tensor allocated by a scope. It borrows the scope, so it cannot outlive it: the
/// runtime reclaims its memory once the scope and its readers are done.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Local<'s> {
    t: Tensor,
    _scope: PhantomData<&'s ()>,
}

impl<'s> Local<'s> {
    /// A sub-view (see [`Tensor::view`]), still owned by the scope.
    pub fn view(&self, offsets: &[u32], shape: &[u32]) -> Result<Local<'s>, GraphError> {
        Ok(Local { t: self.t.view(offsets, shape)?, _scope: PhantomData })
    }
    /// Element type.
    pub fn dtype(&self) -> DType {
        self.t.dtype()
    }
    /// Extents of the dimensions in use.
    pub fn shape(&self) -> &[u32] {
        &self.t.shape[..self.t.ndims as usize]
    }
    /// Number of elements.
    pub fn elem_count(&self) -> u64 {
        self.t.elem_count()
    }
}

/// The arguments the host hands an orchestration: tensors and scalars, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrchArgs {
    tensors: alloc::vec::Vec<Tensor>,
    scalars: alloc::vec::Vec<u64>,
}

impl OrchArgs {
    /// No arguments.
    pub fn new() -> OrchArgs {
        OrchArgs::default()
    }
    /// Append a tensor.
    pub fn tensor(mut self, t: Tensor) -> OrchArgs {
        self.tensors.push(t);
        self
    }
    /// Append a scalar.
    pub fn scalar(mut self, v: u64) -> OrchArgs {
        self.scalars.push(v);
        self
    }
    /// Append an `f32` scalar (its bits).
    pub fn scalar_f32(self, v: f32) -> OrchArgs {
        self.scalar(v.to_bits() as u64)
    }
    /// Tensor `i`, or a named error.
    pub fn t(&self, i: usize) -> Result<Tensor, OrchFail> {
        self.tensors.get(i).copied().ok_or(OrchFail::Code { code: OrchError::InvalidArgs, detail: i as u64 })
    }
    /// Scalar `i`, or a named error.
    pub fn s(&self, i: usize) -> Result<u64, OrchFail> {
        self.scalars.get(i).copied().ok_or(OrchFail::Code { code: OrchError::InvalidArgs, detail: 0x100 + i as u64 })
    }
    /// Scalar `i` read as an `f32` (the low 32 bits, as [`OrchArgs::scalar_f32`] wrote it).
    pub fn s_f32(&self, i: usize) -> Result<f32, OrchFail> {
        Ok(f32::from_bits(self.s(i)? as u32))
    }
    /// All tensors.
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }
    /// All scalars.
    pub fn scalars(&self) -> &[u64] {
        &self.scalars
    }
}

/// An orchestration function: the same code for both runtimes.
pub type OrchFn = fn(&mut Orch<'_>, &OrchArgs) -> Result<(), OrchFail>;

/// The orchestration API inside one scope (`'s`).
pub struct Orch<'s> {
    o: &'s mut dyn Orchestrator,
}

impl<'s> Orch<'s> {
    /// The API over a runtime's orchestrator (used by the runtimes).
    pub fn new(o: &'s mut dyn Orchestrator) -> Orch<'s> {
        Orch { o }
    }

    /// Which runtime runs this orchestration.
    pub fn runtime(&self) -> RuntimeKind {
        self.o.runtime()
    }

    /// Clusters: the board's on the host-built graph (built before any run), the run's on
    /// the device-side runtime.
    pub fn clusters(&self) -> u32 {
        self.o.clusters()
    }

    /// Submit `task`. Its dependencies on earlier tasks are discovered from its tensor
    /// arguments (auto scopes) and taken from [`Task::after`].
    pub fn submit(&mut self, task: Task) -> Result<TaskId, OrchFail> {
        self.o.submit_task(task)
    }

    /// A runtime-allocated tensor of this scope; undefined until a task writes it.
    pub fn alloc_tensor(&mut self, dtype: DType, shape: &[u32]) -> Result<Local<'s>, OrchFail> {
        Ok(Local { t: self.o.alloc(dtype, shape)?, _scope: PhantomData })
    }

    /// [`Orch::alloc_tensor`] for element type `T`.
    pub fn alloc<T: Element>(&mut self, shape: &[u32]) -> Result<Local<'s>, OrchFail> {
        self.alloc_tensor(T::DTYPE, shape)
    }

    /// Run `f` in a nested auto scope; tensors it allocates cannot leave it.
    pub fn scope<R>(&mut self, f: impl for<'i> FnOnce(&mut Orch<'i>) -> Result<R, OrchFail>) -> Result<R, OrchFail> {
        self.scoped(ScopeMode::Auto, f)
    }

    /// Run `f` in a nested manual scope: dependencies only from [`Task::after`].
    pub fn manual_scope<R>(
        &mut self,
        f: impl for<'i> FnOnce(&mut Orch<'i>) -> Result<R, OrchFail>,
    ) -> Result<R, OrchFail> {
        self.scoped(ScopeMode::Manual, f)
    }

    fn scoped<R>(
        &mut self,
        mode: ScopeMode,
        f: impl for<'i> FnOnce(&mut Orch<'i>) -> Result<R, OrchFail>,
    ) -> Result<R, OrchFail> {
        self.o.scope_begin(mode)?;
        let r = f(&mut Orch { o: &mut *self.o });
        let end = self.o.scope_end();
        let v = r?;
        end?;
        Ok(v)
    }

    /// Open a nested scope as a guard; it ends when the guard drops (or at [`ScopeGuard::end`]).
    pub fn guard(&mut self, mode: ScopeMode) -> Result<ScopeGuard<'_>, OrchFail> {
        self.o.scope_begin(mode)?;
        Ok(ScopeGuard { inner: Orch { o: &mut *self.o }, open: true })
    }

    /// Element `index` of `t`, once every task writing it is done (in a manual scope, where
    /// writers are not tracked: once every task submitted so far is done).
    pub fn read<T: Element>(&mut self, t: &impl AsTensor, index: &[u32]) -> Result<T, OrchFail> {
        let t = crate::graph::sealed::Sealed::raw(t);
        check_element::<T>(&t)?;
        let mut v = T::zeroed();
        self.o.read_element(&t, index, bytemuck::bytes_of_mut(&mut v))?;
        Ok(v)
    }

    /// Store `v` into element `index` of `t`, once every task writing it is done (in a
    /// manual scope: once every task submitted so far is done). Readers are not waited for:
    /// order a write after readers with the data flow, as for write-after-read.
    pub fn write<T: Element>(&mut self, t: &impl AsTensor, index: &[u32], v: T) -> Result<(), OrchFail> {
        let t = crate::graph::sealed::Sealed::raw(t);
        check_element::<T>(&t)?;
        self.o.write_element(&t, index, bytemuck::bytes_of(&v))
    }

    /// Stop the run with EXPLICIT_ORCH_FATAL; returns the error to propagate.
    pub fn fatal(&mut self, message: &str) -> OrchFail {
        self.o.fatal(message)
    }
}

fn check_element<T: Element>(t: &Tensor) -> Result<(), OrchFail> {
    if t.dtype() != T::DTYPE {
        return Err(GraphError::DtypeMismatch { view: T::DTYPE, buffer: t.dtype() }.into());
    }
    Ok(())
}

/// A nested scope held open by a value; dereferences to the scope's [`Orch`].
pub struct ScopeGuard<'a> {
    inner: Orch<'a>,
    open: bool,
}

impl ScopeGuard<'_> {
    /// End the scope now, reporting an error the drop would swallow.
    pub fn end(mut self) -> Result<(), OrchFail> {
        self.open = false;
        self.inner.o.scope_end()
    }
}

impl<'a> core::ops::Deref for ScopeGuard<'a> {
    type Target = Orch<'a>;
    fn deref(&self) -> &Orch<'a> {
        &self.inner
    }
}

impl<'a> core::ops::DerefMut for ScopeGuard<'a> {
    fn deref_mut(&mut self) -> &mut Orch<'a> {
        &mut self.inner
    }
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            // An error here is latched by the runtime and returned by its next call.
            let _ = self.inner.o.scope_end();
        }
    }
}

/// Element offset of `index` in `t`, or a named error.
pub fn element_offset(t: &Tensor, index: &[u32]) -> Result<u64, OrchFail> {
    if index.len() != t.ndims as usize {
        return Err(GraphError::RankMismatch { expected: t.ndims, got: index.len() as u32 }.into());
    }
    let mut off = t.offset;
    for (k, &i) in index.iter().enumerate() {
        if i >= t.shape[k] {
            return Err(GraphError::ViewOutOfBounds { dim: k as u32, offset: i, extent: 1, limit: t.shape[k] }.into());
        }
        off += i as u64 * t.strides[k] as u64;
    }
    Ok(off)
}
