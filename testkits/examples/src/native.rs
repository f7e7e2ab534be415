//! The examples' native kernels: C++ in the native kernel ABI (`kernels/*.cpp`, built by
//! `build.rs` into one host shared object per kernel, each exporting `kernel_entry`), and which
//! of the kit's kernels each one stands in for ([`NATIVE_KERNELS`]).

use pto_hal::{CoreType, HostPlatform, KernelSource};
use pto_runtime::graph::FuncId;
use pto_runtime::host::Error;

use crate::Device;

/// Where `build.rs` put the native kernels' shared objects.
pub const NATIVE_DIR: &str = env!("PTO_TESTKIT_NATIVE_DIR");

/// The examples whose every kernel has a native version (`--kernels native` runs them).
pub const NATIVE_EXAMPLES: [&str; 6] = ["vector", "chain513", "mix", "bgemm", "manual_scope", "tiny_rings"];

/// The kit's kernels that have a native version: (registered name, core type, shared object's
/// kernel file). `tile_matmul` serves both the mix example's AIC half and bgemm's matmul;
/// `accumulate` both `accumulate` and bgemm's tile accumulate.
pub const NATIVE_KERNELS: [(&str, CoreType, &str); 11] = [
    ("add", CoreType::Aiv, "add"),
    ("mul", CoreType::Aiv, "mul"),
    ("add_scalar", CoreType::Aiv, "add_scalar"),
    ("inc0", CoreType::Aiv, "inc0"),
    ("fill1", CoreType::Aiv, "fill1"),
    ("accumulate", CoreType::Aiv, "accumulate"),
    ("add1", CoreType::Aiv, "add1"),
    ("mix_matmul", CoreType::Aic, "tile_matmul"),
    ("mix_vec_half", CoreType::Aiv, "mix_vec_half"),
    ("attn_tile_matmul", CoreType::Aic, "tile_matmul"),
    ("attn_tile_accumulate", CoreType::Aiv, "accumulate"),
];

/// Which kernels a run registers: the Rust ones, or the native ones where they exist.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum KernelChoice {
    /// The Rust kernels (`kernels.rs`, `attention.rs`).
    #[default]
    Rust,
    /// The C++ kernels (`kernels/*.cpp`) through the native kernel ABI.
    Native,
}

/// Path of the shared object built from `kernels/<file>.cpp`.
pub fn native_path(file: &str) -> String {
    format!("{NATIVE_DIR}/lib{file}.so")
}

/// Register the native kernel built from `kernels/<file>.cpp` as `name` for `core`.
pub fn register_native<P: HostPlatform>(
    dev: &Device<P>,
    name: &str,
    core: CoreType,
    file: &str,
) -> Result<FuncId, Error> {
    if file.contains(['/', '\\']) || file.starts_with('.') {
        return Err(Error::Kernel { name: name.to_string(), why: "a kit kernel's file name names no directory" });
    }
    let path = native_path(file);
    // SAFETY: `path` is in the kit's own build directory (`file` names no other directory):
    // the objects there are the kit's kernels, built by its build script from
    // `kernels/*.cpp` with `include/pto_kernel.h`, each touching only the views it is given; a
    // name that is not one of them does not load (an error, nothing is called).
    unsafe { dev.register_kernel_source(&KernelSource { name, core, function: None, binary: Some(&path) }) }
}

/// The native version of the kit's kernel `name`, registered under that name, if it has one.
pub fn register_native_named<P: HostPlatform>(dev: &Device<P>, name: &str) -> Option<Result<FuncId, Error>> {
    let &(n, core, file) = NATIVE_KERNELS.iter().find(|k| k.0 == name)?;
    Some(register_native(dev, n, core, file))
}
