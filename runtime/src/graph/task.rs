//! Tasks: their arguments and directions, scalars, func ids, shapes and SPMD block counts,
//! and the validation of all of it.

use alloc::vec::Vec;

use pto_hal::{CoreType, MAX_TENSOR_DIMS};

use crate::layout::{MAX_SCALAR_ARGS, MAX_TENSOR_ARGS, Shape, lanes};

use super::error::GraphError;
use super::ids::{FuncId, TaskId};
use super::tensor::{AsTensor, Tensor, sealed::Sealed};

/// How a task uses a tensor argument; this decides the dependencies it gets.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Read: waits for earlier writers of overlapping bytes (read-after-write).
    In,
    /// Written whole: waits for earlier writers of overlapping bytes (write-after-write).
    Out,
    /// Read and written.
    InOut,
    /// Written into an existing buffer without an overlap lookup; later readers still wait
    /// for it.
    OutputExisting,
    /// Passed to the kernel; no dependency tracking at all.
    NoDep,
}

impl Direction {
    /// Whether the task reads through the argument (for dependency discovery).
    pub const fn reads(self) -> bool {
        matches!(self, Direction::In | Direction::InOut)
    }
    /// Whether the task writes through the argument.
    pub const fn writes(self) -> bool {
        matches!(self, Direction::Out | Direction::InOut | Direction::OutputExisting)
    }
}

/// What a task runs and where: the shape plus the kernel of each lane.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One AIC core.
    Aic(FuncId),
    /// One AIV core.
    Aiv(FuncId),
    /// A whole cluster (1C2V): the AIC kernel and one kernel per AIV lane.
    Mix {
        /// AIC kernel.
        aic: FuncId,
        /// AIV lane 0 kernel.
        aiv0: FuncId,
        /// AIV lane 1 kernel.
        aiv1: FuncId,
    },
    /// No kernel: completed by the scheduler as soon as its producers are done.
    Dummy,
}

impl Kind {
    /// The task's shape.
    pub fn shape(&self) -> Shape {
        match self {
            Kind::Aic(_) => Shape::Aic,
            Kind::Aiv(_) => Shape::Aiv,
            Kind::Mix { .. } => Shape::Mix,
            Kind::Dummy => Shape::Dummy,
        }
    }
    /// Active lanes.
    pub fn lanes(&self) -> u8 {
        match self {
            Kind::Aic(_) => lanes::AIC,
            Kind::Aiv(_) => lanes::AIV0,
            Kind::Mix { .. } => lanes::MIX,
            Kind::Dummy => 0,
        }
    }
    /// `(func, core type)` of every active lane.
    pub fn lane_funcs(&self) -> [Option<(FuncId, CoreType)>; 3] {
        match *self {
            Kind::Aic(f) => [Some((f, CoreType::Aic)), None, None],
            Kind::Aiv(f) => [None, Some((f, CoreType::Aiv)), None],
            Kind::Mix { aic, aiv0, aiv1 } => {
                [Some((aic, CoreType::Aic)), Some((aiv0, CoreType::Aiv)), Some((aiv1, CoreType::Aiv))]
            }
            Kind::Dummy => [None, None, None],
        }
    }
}

/// One argument of a task.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The view passed.
    pub tensor: Tensor,
    /// How the task uses it.
    pub dir: Direction,
}

/// A task as the user describes it: built with chained calls, then submitted to a graph.
///
/// ```
/// # use pto_runtime::graph::*;
/// # use pto_hal::GmAddr;
/// # let buf = BufferRef { device: 0, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes: 64, dtype: DType::F32 };
/// # let (a, out) = (Tensor::whole(buf, &[16]).unwrap(), Tensor::whole(buf, &[16]).unwrap());
/// let t = Task::aiv(FuncId(3)).input(&a).output(&out).scalar_f32(1.0).blocks(4);
/// assert_eq!(t.args().len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Task {
    kind: Kind,
    args: Vec<Arg>,
    scalars: Vec<u64>,
    block_num: u32,
    after: Vec<TaskId>,
    predicate: Option<Tensor>,
    sync_start: bool,
    allow_alias: bool,
    dump: u64,
}

impl Task {
    /// A task of `kind`.
    pub fn new(kind: Kind) -> Task {
        Task {
            kind,
            args: Vec::new(),
            scalars: Vec::new(),
            block_num: 1,
            after: Vec::new(),
            predicate: None,
            sync_start: false,
            allow_alias: false,
            dump: 0,
        }
    }
    /// An AIC task.
    pub fn aic(f: FuncId) -> Task {
        Task::new(Kind::Aic(f))
    }
    /// An AIV task.
    pub fn aiv(f: FuncId) -> Task {
        Task::new(Kind::Aiv(f))
    }
    /// A MIX (1C2V) task: one cluster, AIC kernel `aic`, the same AIV kernel on both lanes.
    pub fn mix(aic: FuncId, aiv: FuncId) -> Task {
        Task::new(Kind::Mix { aic, aiv0: aiv, aiv1: aiv })
    }
    /// A dummy task (dependencies only, no kernel).
    pub fn dummy() -> Task {
        Task::new(Kind::Dummy)
    }
    /// Add an argument with an explicit direction.
    pub fn arg(mut self, tensor: &impl AsTensor, dir: Direction) -> Task {
        self.args.push(Arg { tensor: Sealed::raw(tensor), dir });
        self
    }
    /// Add an input.
    pub fn input(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::In)
    }
    /// Add an output.
    pub fn output(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::Out)
    }
    /// Add an input-output.
    pub fn inout(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::InOut)
    }
    /// Add an output into an existing buffer, without an overlap lookup.
    pub fn output_existing(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::OutputExisting)
    }
    /// Add an untracked argument.
    pub fn no_dep(self, t: &impl AsTensor) -> Task {
        self.arg(t, Direction::NoDep)
    }
    /// Predicate: run only if the first element of `t` (a 4-byte integer, written by an
    /// earlier task) is non-zero; otherwise the task is skipped — it still completes and
    /// releases its consumers. `t` is read like an input (the task waits for its writers).
    pub fn when(mut self, t: &impl AsTensor) -> Task {
        self.predicate = Some(Sealed::raw(t));
        self
    }
    /// Sync-start: all SPMD blocks must start together, as one cohort (the cohort must fit
    /// the run's cores of the task's shape).
    pub fn sync_start(mut self) -> Task {
        self.sync_start = true;
        self
    }
    /// Let this task name overlapping views of one buffer where at least one of them is
    /// written (for example an in-place kernel given the same bytes as input and output).
    ///
    /// Without it such a task is refused with [`GraphError::AliasedArgs`]. With it the
    /// runtime orders the task against others by each argument as usual; inside the task the
    /// kernel alone decides the order of its reads and writes of the shared bytes (it must
    /// read an element before it overwrites it), and every core of an SPMD task sees the
    /// same bytes.
    pub fn allow_alias(mut self) -> Task {
        self.allow_alias = true;
        self
    }
    /// Whether the task opted in to aliased arguments ([`Task::allow_alias`]).
    pub fn allows_alias(&self) -> bool {
        self.allow_alias
    }
    /// Mark arguments for the args dump: bit `i` of `mask` marks argument `i`, counting the
    /// tensor arguments first (in the order they were added), then the scalars. Marks add up
    /// over calls; `u64::MAX` marks everything the task has. What a mark means depends on the
    /// run's dump level (`RunConfig::dump`): at `Partial` only marked arguments are recorded,
    /// at `Hybrid` every argument is recorded and marked ones carry their data, at `Full`
    /// marks do not matter. A mark beyond the task's arguments is refused by validation
    /// ([`GraphError::BadDumpMask`]), except for `u64::MAX`.
    ///
    /// ```
    /// # use pto_runtime::graph::*;
    /// # use pto_hal::GmAddr;
    /// # let buf = BufferRef { device: 0, id: 1, placement: Placement::External(GmAddr(0x1000)), bytes: 64, dtype: DType::F32 };
    /// # let (a, out) = (Tensor::whole(buf, &[16]).unwrap(), Tensor::whole(buf, &[16]).unwrap());
    /// // Capture the output (argument 1) and the scalar (argument 2).
    /// let t = Task::aiv(FuncId(3)).input(&a).output(&out).scalar(7).dump(0b110).allow_alias();
    /// assert_eq!(t.dump_mask(), 0b110);
    /// assert!(t.validate(0).is_ok());
    /// ```
    pub fn dump(mut self, mask: u64) -> Task {
        self.dump |= mask;
        self
    }
    /// The arguments marked for the args dump ([`Task::dump`]), as marked.
    pub fn dump_mask(&self) -> u64 {
        self.dump
    }
    /// The scalars marked for the args dump: bit `i` = scalar `i`.
    pub fn dump_scalars(&self) -> u32 {
        let n = self.args.len() as u32;
        let shifted = if n >= 64 { 0 } else { self.dump >> n };
        (shifted & ((1u64 << self.scalars.len().min(32)) - 1)) as u32
    }
    /// Add a raw 64-bit scalar.
    pub fn scalar(mut self, v: u64) -> Task {
        self.scalars.push(v);
        self
    }
    /// Add an `f32` scalar (its bits, zero-extended).
    pub fn scalar_f32(self, v: f32) -> Task {
        self.scalar(v.to_bits() as u64)
    }
    /// SPMD: run the kernel as `n` blocks.
    pub fn blocks(mut self, n: u32) -> Task {
        self.block_num = n;
        self
    }
    /// Explicit dependency: run after `t` (the write-after-read case discovery cannot see).
    pub fn after(mut self, t: TaskId) -> Task {
        self.after.push(t);
        self
    }
    /// The task's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }
    /// Tensor arguments.
    pub fn args(&self) -> &[Arg] {
        &self.args
    }
    /// Scalar arguments.
    pub fn scalars(&self) -> &[u64] {
        &self.scalars
    }
    /// SPMD block count.
    pub fn block_num(&self) -> u32 {
        self.block_num
    }
    /// Explicit dependencies.
    pub fn explicit_deps(&self) -> &[TaskId] {
        &self.after
    }
    /// The predicate tensor, if any.
    pub fn predicate(&self) -> Option<&Tensor> {
        self.predicate.as_ref()
    }
    /// Whether the blocks must start together.
    pub fn is_sync_start(&self) -> bool {
        self.sync_start
    }

    /// Check the task on its own (argument counts, block count, views).
    pub fn validate(&self, task: u32) -> Result<(), GraphError> {
        if self.args.len() > MAX_TENSOR_ARGS {
            return Err(GraphError::TooManyTensorArgs { task, count: self.args.len() });
        }
        if self.scalars.len() > MAX_SCALAR_ARGS {
            return Err(GraphError::TooManyScalarArgs { task, count: self.scalars.len() });
        }
        if self.block_num == 0 || self.block_num > MAX_BLOCKS {
            return Err(GraphError::BadBlockNum { task, block_num: self.block_num });
        }
        if self.kind == Kind::Dummy && self.block_num != 1 {
            return Err(GraphError::BadBlockNum { task, block_num: self.block_num });
        }
        for (i, a) in self.args.iter().enumerate() {
            let t = &a.tensor;
            let arg = i as u32;
            if t.ndims == 0 || t.ndims as usize > MAX_TENSOR_DIMS {
                return Err(GraphError::BadArgRank { task, arg, ndims: t.ndims });
            }
            if let Some(dim) = t.shape[..t.ndims as usize].iter().position(|&d| d == 0) {
                return Err(GraphError::ZeroExtentArg { task, arg, dim: dim as u32 });
            }
            match t.checked_byte_range() {
                Some((_, end)) if end <= t.buffer.bytes => {}
                Some((_, end)) => return Err(GraphError::ArgOutsideBuffer { task, arg, end, bytes: t.buffer.bytes }),
                None => return Err(GraphError::ArgOverflows { task, arg }),
            }
        }
        if let Some(p) = &self.predicate {
            let in_buffer = p.checked_byte_range().is_some_and(|(_, e)| e <= p.buffer.bytes);
            let (s, _) = p.byte_range();
            if !in_buffer || p.ndims == 0 || p.ndims as usize > MAX_TENSOR_DIMS || p.dtype().size() != 4 || s % 4 != 0 {
                return Err(GraphError::BadPredicate { task });
            }
        }
        if !self.allow_alias {
            self.check_aliasing(task)?;
        }
        if self.sync_start && self.kind == Kind::Dummy {
            return Err(GraphError::BadBlockNum { task, block_num: self.block_num });
        }
        let args = self.args.len() + self.scalars.len();
        if self.dump != u64::MAX && args < 64 && self.dump >> args != 0 {
            return Err(GraphError::BadDumpMask { task, mask: self.dump, args: args as u32 });
        }
        Ok(())
    }
}

impl Task {
    /// Refuse two arguments of one buffer that share a byte when at least one of them is
    /// written (untracked arguments are the user's business and are not compared).
    fn check_aliasing(&self, task: u32) -> Result<(), GraphError> {
        use crate::region::{Overlap, classify};
        let tracked = |d: Direction| d != Direction::NoDep;
        for (i, a) in self.args.iter().enumerate() {
            if !tracked(a.dir) {
                continue;
            }
            for (j, b) in self.args.iter().enumerate().skip(i + 1) {
                if !tracked(b.dir) || !(a.dir.writes() || b.dir.writes()) {
                    continue;
                }
                if a.tensor.buffer.id != b.tensor.buffer.id || a.tensor.buffer.placement != b.tensor.buffer.placement {
                    continue;
                }
                if classify(&a.tensor.region(), &b.tensor.region()) != Overlap::None {
                    return Err(GraphError::AliasedArgs { task, first: i as u32, second: j as u32 });
                }
            }
        }
        Ok(())
    }
}

/// Most SPMD blocks of one task.
pub const MAX_BLOCKS: u32 = 1 << 16;
