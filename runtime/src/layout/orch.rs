//! The device-side runtime's image: what the host hands the orchestrating AICPU thread
//! ([`OrchImage`], then the func table, the tensor and scalar arguments), and the packed task
//! description word of a ring slot ([`TaskDesc`]).
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | [`OrchImage`], [`RingSpec`]s, [`OrchTensor`]s | host (H2D before launch) | every AICPU thread (after `observe_host`) |
//! | a ring slot's [`TaskDesc`] word | the orchestrator, before the slot is published | the scheduling AICPU threads |

use core::mem::size_of;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::Shape;

/// Magic of an orchestration image ("PTOR").
pub const ORCH_MAGIC: u32 = 0x524f_5450;
/// Ring depths of the device-side runtime (scope depth `d` uses ring `min(d, RINGS - 1)`).
pub const RINGS: usize = 4;

/// Sizes and placement of one ring of the device-side runtime.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct RingSpec {
    /// Task-window slots (a power of two).
    pub window: u32,
    /// Dependency-list pool entries.
    pub dep_pool: u32,
    /// Heap bytes.
    pub heap: u64,
    /// GM address of the heap.
    pub heap_base: u64,
}

/// What the host hands the device-side orchestrator: the program, its arguments, the rings.
/// Followed by `FuncEntry[func_count]`, `OrchTensor[tensor_count]`, `u64[scalar_count]`.
#[derive(Copy, Clone, Debug, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct OrchImage {
    /// [`ORCH_MAGIC`].
    pub magic: u32,
    /// [`LAYOUT_VERSION`](super::LAYOUT_VERSION).
    pub version: u32,
    /// The orchestration program's handle.
    pub program: u64,
    /// Total length in bytes.
    pub total_len: u64,
    /// Entries of the func table.
    pub func_count: u32,
    /// Tensor arguments.
    pub tensor_count: u32,
    /// Scalar arguments.
    pub scalar_count: u32,
    /// Most live tensor-map entries.
    pub tensormap_entries: u32,
    /// Budget of an orchestrator wait (tensor data, flow control), in ticks.
    pub wait_ticks: u64,
    /// [`orch_flags`].
    pub flags: u32,
    /// Reserved, zero.
    pub reserved: u32,
    /// The rings.
    pub rings: [RingSpec; RINGS],
}

/// Bits of [`OrchImage::flags`].
pub mod orch_flags {
    /// The run may use AIV cores only: AIC and MIX tasks are refused at submission.
    pub const AIV_ONLY: u32 = 1;
}

/// A tensor argument of an orchestration.

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct OrchTensor {
    /// Buffer identity (for dependency discovery).
    pub buffer_id: u64,
    /// Buffer address.
    pub addr: u64,
    /// Buffer bytes.
    pub bytes: u64,
    /// Element offset of the view.
    pub offset: u64,
    /// `DType` code.
    pub dtype: u32,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; 5],
    /// Strides in elements.
    pub strides: [u32; 5],
}

const _: () = {
    assert!(size_of::<RingSpec>() == 24);
    assert!(size_of::<OrchImage>() == 56 + 24 * RINGS);
    assert!(size_of::<OrchTensor>() == 80);
};

/// A ring slot's task description, packed in one word that the orchestrator stores before
/// it publishes the slot and the scheduling threads load after they observed it: shape in
/// bits 0–7, lanes in 8–15, sync start in bit 16, block count in 32–63.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TaskDesc {
    /// The task's shape.
    pub shape: Shape,
    /// Its active lanes ([`lanes`](super::lanes)).
    pub lanes: u8,
    /// Whether its blocks start together.
    pub sync_start: bool,
    /// Its SPMD block count.
    pub block_num: u32,
}

impl TaskDesc {
    /// The packed word.
    pub const fn pack(&self) -> u64 {
        self.shape as u64 | (self.lanes as u64) << 8 | (self.sync_start as u64) << 16 | (self.block_num as u64) << 32
    }

    /// The description a packed word holds; an unknown shape reads as [`Shape::Dummy`] (the
    /// orchestrator never packs one, so it is only seen in a slot that was never written).
    pub fn unpack(word: u64) -> TaskDesc {
        TaskDesc {
            shape: Shape::try_from(word as u8).unwrap_or(Shape::Dummy),
            lanes: (word >> 8) as u8,
            sync_start: (word >> 16) & 1 != 0,
            block_num: (word >> 32) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_desc_round_trips() {
        for shape in [Shape::Aic, Shape::Aiv, Shape::Mix, Shape::Dummy] {
            for (lanes, sync_start, block_num) in [(0b001, false, 1), (0b111, true, u32::MAX), (0b110, false, 7)] {
                let d = TaskDesc { shape, lanes, sync_start, block_num };
                assert_eq!(TaskDesc::unpack(d.pack()), d);
            }
        }
    }
}
