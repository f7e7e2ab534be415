//! A graph whose one task reads a tensor of every [`DType`], with values at the edges of each
//! range: what the args-dump tests record at `Full`.

use pto_hal::{CoreType, HostPlatform, KernelContext};
use pto_runtime::graph::{DType, Task};

use crate::{Device, DeviceTensor, Graph};

/// A kernel that does nothing (its task only has its arguments recorded).
pub fn k_nothing(_k: &mut dyn KernelContext) {}

/// One tensor per [`DType`], holding values at the edges of its range, all read by one task of
/// [`k_nothing`] that also takes the scalar [`EveryDtype::SCALAR`]: a dump of it at `Full`
/// records a payload of every dtype (64-bit integers beyond 2^53, f16 and bf16 bit patterns,
/// infinities and NaN among them) and a 64-bit scalar.
pub struct EveryDtype<P: HostPlatform> {
    /// The tensors, in argument order (they live as long as the graph needs them).
    pub tensors: Vec<DeviceTensor<P>>,
    /// The graph: one task.
    pub graph: Graph<P>,
    /// Argument `i`'s dtype and its bytes (little-endian, as the dump's payload holds them).
    pub expected: Vec<(DType, Vec<u8>)>,
}

impl<P: HostPlatform> EveryDtype<P> {
    /// The task's scalar argument (index `expected.len()`): beyond 2^53.
    pub const SCALAR: u64 = u64::MAX - 1;
}

/// The little-endian bytes of an array of numbers.
macro_rules! le_bytes {
    ($v:expr) => {
        $v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()
    };
}

/// Build [`EveryDtype`] on `dev` (registers [`k_nothing`] as `nothing` if it is not yet).
pub fn every_dtype<P: HostPlatform>(dev: &Device<P>) -> Result<EveryDtype<P>, String> {
    use pto_hal::DeviceMemory;
    let f = match dev.func("nothing") {
        Some(f) => f,
        None => dev.register_kernel("nothing", CoreType::Aiv, k_nothing).map_err(|e| e.to_string())?,
    };
    let half: [u16; 5] = [0x3c00, 0xc100, 0x7bff, 0x0001, 0x7c00]; // 1, -2.5, 65504, 2^-24, inf
    let bhalf: [u16; 4] = [0x3f80, 0xc040, 0x3e20, 0x7f7f]; // 1, -3, 0.15625, the largest
    let expected: Vec<(DType, Vec<u8>)> = vec![
        (DType::F32, le_bytes!([0.1f32, -2.5, f32::MAX, f32::INFINITY, f32::NAN])),
        (DType::F16, le_bytes!(half)),
        (DType::BF16, le_bytes!(bhalf)),
        (DType::I32, le_bytes!([i32::MIN, -1, 0, i32::MAX])),
        (DType::I64, le_bytes!([i64::MIN, -(1i64 << 53) - 1, (1i64 << 53) + 1, i64::MAX])),
        (DType::U32, le_bytes!([0u32, u32::MAX])),
        (DType::U8, le_bytes!([0u8, 255])),
        (DType::I8, le_bytes!([-128i8, 127])),
        (DType::F64, le_bytes!([0.1f64, -1e300, f64::MIN_POSITIVE])),
        (DType::U64, le_bytes!([u64::MAX, (1u64 << 53) + 1, 0])),
        (DType::I16, le_bytes!([i16::MIN, i16::MAX])),
        (DType::U16, le_bytes!([0u16, u16::MAX])),
    ];
    let mut tensors = Vec::new();
    for (dtype, bytes) in &expected {
        let n = (bytes.len() / dtype.size() as usize) as u32;
        let t = dev.alloc_dtype(*dtype, &[n]).map_err(|e| e.to_string())?;
        dev.platform().copy_h2d(t.addr(), bytes).map_err(|e| format!("upload of the {dtype:?} tensor: {e:?}"))?;
        tensors.push(t);
    }
    let graph = dev
        .build(|g| {
            let task = tensors.iter().fold(Task::aiv(f), |task, t| task.input(&t.tensor()));
            g.submit(task.scalar(EveryDtype::<P>::SCALAR))?;
            Ok(())
        })
        .map_err(|e| e.to_string())?;
    Ok(EveryDtype { tensors, graph, expected })
}
