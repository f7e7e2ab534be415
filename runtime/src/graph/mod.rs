//! The task model: tensors and views, argument directions, scalars, func ids, task shapes,
//! SPMD block counts — and the validation of all of it.
//!
//! One file per idea: [`dtype`] (element types), [`ids`] (kernel and task ids), [`tensor`] (buffers, views, regions),
//! [`task`] (tasks and their validation), [`error`] (what bad input is called).

pub mod dtype;
pub mod error;
pub mod ids;
pub mod task;
pub mod tensor;

pub use dtype::{DType, Element};
pub use error::{GraphError, TensorProblem};
pub use ids::{FuncId, TaskId};
pub use task::*;
pub use tensor::*;
