//! Registering every kernel and orchestration on one device ([`Kernels`], [`Programs`]), and
//! opening a device with them registered ([`setup`]).

use pto_hal::{CoreType, HostPlatform, KernelFn};
use pto_runtime::graph::FuncId;
use pto_runtime::host::{ConfigError, Error, Program};

use crate::Device;
use crate::kernels::{
    f, k_accumulate, k_add, k_add_scalar, k_add1, k_fill1, k_inc0, k_mix_matmul, k_mix_vec_half, k_mul,
};
use crate::native::{KernelChoice, register_native_named};
use crate::orchestrations::{orch_chain513, orch_manual_scope, orch_mix, orch_shape, orch_tiny_rings, orch_vector};

/// Every kernel and orchestration the workloads use, registered on one device.
pub struct Kernels {
    /// [`k_add`]
    pub add: FuncId,
    /// [`k_mul`]
    pub mul: FuncId,
    /// [`k_add_scalar`]
    pub add_scalar: FuncId,
    /// [`k_inc0`]
    pub inc0: FuncId,
    /// [`k_fill1`]
    pub fill1: FuncId,
    /// [`k_accumulate`]
    pub accumulate: FuncId,
    /// [`k_add1`]
    pub add1: FuncId,
    /// [`k_mix_matmul`] (AIC half of the MIX task).
    pub matmul: FuncId,
    /// [`k_mix_vec_half`] (AIV lanes of the MIX task).
    pub vec_half: FuncId,
    /// The orchestrations.
    pub programs: Programs,
}

/// The orchestration programs of the workloads.
pub struct Programs {
    /// [`orch_vector`]
    pub vector: Program,
    /// [`orch_chain513`]
    pub chain513: Program,
    /// [`orch_mix`]
    pub mix: Program,
    /// [`orch_shape`] (every dispatch shape).
    pub shape: Program,
    /// [`orch_tiny_rings`]
    pub tiny_rings: Program,
    /// [`orch_manual_scope`]
    pub manual_scope: Program,
}

impl Kernels {
    /// Register every kernel and orchestration on `dev`; fails if the func ids differ from [`f`].
    pub fn register<P: HostPlatform>(dev: &Device<P>) -> Result<Kernels, Error> {
        Self::register_with(dev, KernelChoice::Rust)
    }

    /// [`Kernels::register`] with the kernels of `choice`: with [`KernelChoice::Native`], each
    /// kernel that has a native version is registered as it (and so are bgemm's tile kernels,
    /// which [`crate::attention::AttnKernels::register`] then finds by name).
    pub fn register_with<P: HostPlatform>(dev: &Device<P>, choice: KernelChoice) -> Result<Kernels, Error> {
        let reg = |name: &str, core: CoreType, kernel: KernelFn| match choice {
            KernelChoice::Native => {
                register_native_named(dev, name).unwrap_or_else(|| dev.register_kernel(name, core, kernel))
            }
            KernelChoice::Rust => dev.register_kernel(name, core, kernel),
        };
        let k = Kernels {
            add: reg("add", CoreType::Aiv, k_add)?,
            mul: reg("mul", CoreType::Aiv, k_mul)?,
            add_scalar: reg("add_scalar", CoreType::Aiv, k_add_scalar)?,
            inc0: reg("inc0", CoreType::Aiv, k_inc0)?,
            fill1: reg("fill1", CoreType::Aiv, k_fill1)?,
            accumulate: reg("accumulate", CoreType::Aiv, k_accumulate)?,
            add1: reg("add1", CoreType::Aiv, k_add1)?,
            matmul: reg("mix_matmul", CoreType::Aic, k_mix_matmul)?,
            vec_half: reg("mix_vec_half", CoreType::Aiv, k_mix_vec_half)?,
            programs: Programs {
                vector: dev.register_orchestration("vector", orch_vector)?,
                chain513: dev.register_orchestration("chain513", orch_chain513)?,
                mix: dev.register_orchestration("mix", orch_mix)?,
                shape: dev.register_orchestration("dispatch_shape", orch_shape)?,
                tiny_rings: dev.register_orchestration("tiny_rings", orch_tiny_rings)?,
                manual_scope: dev.register_orchestration("manual_scope", orch_manual_scope)?,
            },
        };
        let ids = [k.add, k.mul, k.add_scalar, k.inc0, k.fill1, k.accumulate, k.add1, k.matmul, k.vec_half];
        let fixed = [f::ADD, f::MUL, f::ADD_SCALAR, f::INC0, f::FILL1, f::ACCUMULATE, f::ADD1, f::MATMUL, f::VEC_HALF];
        if ids != fixed {
            return Err(ConfigError::FuncIds { registered: ids.to_vec(), expected: fixed.to_vec() }.into());
        }
        if choice == KernelChoice::Native {
            for name in ["attn_tile_matmul", "attn_tile_accumulate"] {
                if dev.func(name).is_none() {
                    register_native_named(dev, name).transpose()?;
                }
            }
        }
        Ok(k)
    }
}

/// Open a device with `open` (`pto::open` for the selected board) and register the kernels.
pub fn setup<P: HostPlatform>(open: impl FnOnce() -> Result<Device<P>, Error>) -> Result<(Device<P>, Kernels), Error> {
    setup_with(open, KernelChoice::Rust)
}

/// [`setup`] with the kernels of `choice` ([`Kernels::register_with`]).
pub fn setup_with<P: HostPlatform>(
    open: impl FnOnce() -> Result<Device<P>, Error>,
    choice: KernelChoice,
) -> Result<(Device<P>, Kernels), Error> {
    let dev = open()?;
    let k = Kernels::register_with(&dev, choice)?;
    Ok((dev, k))
}
