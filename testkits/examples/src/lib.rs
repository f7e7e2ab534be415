//! `pto-testkit`: shared by the examples, the integration tests and the benchmark of `pto` —
//! kernels, orchestrations, workloads and their goldens. Each orchestration is written once and
//! runs on both runtimes (host-built graph and device-side tensormap-and-ringbuffer); each
//! workload checks the result against a golden computed on the host.
//!
//! The kit does not depend on the `pto` facade (it is one of its dev-dependencies): it is
//! generic over the platform, and the caller opens the board and passes the device (or the
//! opener) in:
//!
//! ```ignore
//! let (dev, k) = pto_testkit::setup(pto::open)?; // the selected board, kernels registered
//! let outcome = pto_testkit::vector(&dev, &k, RuntimeKind::TensormapRing)?;
//! println!("{}", outcome.summary(<pto::board::Selected as Board>::NAME));
//! ```

pub mod attention;
mod cli;
mod every_dtype;
mod example;
mod kernels;
pub mod native;
mod orchestrations;
mod outcome;
mod outputs;
mod registry;
mod run;
mod scratch;
mod shapes;
mod workloads;

use std::time::{Duration, Instant};

pub use cli::{
    ExampleArgs, RuntimeChoice, check_dump_dir, example_usage, parse_aicore, parse_dump_level, parse_executor,
    runtimes_from_args,
};
pub use every_dtype::{EveryDtype, every_dtype, k_nothing};
pub use example::{example_main, init_logging, log_color};
pub use kernels::{
    add1_chain, f, k_accumulate, k_add, k_add_scalar, k_add1, k_fill1, k_inc0, k_mix_matmul, k_mix_vec_half, k_mul,
    k_panic,
};
pub use native::KernelChoice;
pub use orchestrations::{
    ShapeKind, orch_chain513, orch_manual_scope, orch_mix, orch_shape, orch_tiny_rings, orch_vector,
};
pub use outcome::{Failure, Outcome};
pub use outputs::{dump_summary, failed_dump_summary, trace_path, write_trace};
pub use registry::{Kernels, Programs, setup, setup_with};
pub use run::{RUNTIMES, aicored, dumped, dumped_with_arena, executed, run_on, traced};
pub use scratch::ScratchDir;
pub use shapes::{Prepared, build_shape};
pub use workloads::{
    CHAIN_N, MANUAL_N, MIX_TILE, MIX_TILES, TINY_ITERS, TINY_N, VECTOR_N, Workload, chain513, check_chain513_dump,
    examples, manual_scope, mix, tiny_ring_config, tiny_rings, vector,
};

/// A device of platform `P` (`pto::Device` is `Device<pto::SelectedPlatform>`).
pub type Device<P> = pto_runtime::host::Device<P>;
/// A device tensor of platform `P`.
pub type DeviceTensor<P> = pto_runtime::host::DeviceTensor<P>;
/// A built graph of platform `P`.
pub type Graph<P> = pto_runtime::host::Graph<P>;

/// Time `f`.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let s = Instant::now();
    let v = f();
    (v, s.elapsed())
}
