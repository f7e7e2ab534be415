//! The ids a graph names things by: kernels and tasks.

/// A registered kernel id (`0..1024`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(pub u16);

/// A task id inside one graph: its submission index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(pub u32);
