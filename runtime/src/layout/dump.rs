//! The args-dump region: a header line, then per AICPU thread a lane (state line, ack line,
//! ready ring, free ring, metadata buffers, payload arena).
//!
//! | structure | writer | reader |
//! |---|---|---|
//! | [`DumpHeader`] | host (H2D before launch) | AICPU (after `observe_host`) |
//! | [`DumpLaneState`], ready ring ([`DumpReady`]), metadata buffers ([`DumpRecord`]), arena | the lane's AICPU thread, device-direct stores | host (drain) |
//! | [`DumpLaneAck`], free ring | host (`store_word`) | the lane's AICPU thread, device-direct |

use core::mem::{offset_of, size_of};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// [`DumpHeader::magic`]: "DUMP".
pub const DUMP_MAGIC: u32 = 0x504d_5544;

/// Head line of a run's args-dump region, written by the host before launch (the AICPU reads
/// it after making host DMA visible). The lanes follow it ([`DumpLayout`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpHeader {
    /// [`DUMP_MAGIC`].
    pub magic: u32,
    /// The dump level's code (`DumpLevel`: 1 partial, 2 full, 3 hybrid).
    pub level: u32,
    /// Lanes (one per AICPU thread of the launch).
    pub lanes: u32,
    /// Metadata buffers per lane.
    pub buffers: u32,
    /// Records per metadata buffer.
    pub records: u32,
    /// Reserved, zero.
    pub reserved0: u32,
    /// Payload arena bytes per lane (a multiple of 64).
    pub arena: u64,
    /// How long a blocking capture waits for the host to free room, in device ticks; then
    /// the record is dropped (and counted).
    pub wait_ticks: u64,
    /// The run's epoch (a closed lane stores it as its last word).
    pub epoch: u64,
    /// Reserved, zero.
    pub reserved: [u64; 2],
}

/// A lane's AICPU-written line: every word stored device-direct by the lane's thread, the
/// ready tail last (after a store barrier) when a buffer is published.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpLaneState {
    /// Ready-queue entries published (monotonic).
    pub ready_tail: u64,
    /// Logical arena offset up to which payload bytes belong to published buffers (monotonic;
    /// the physical offset is this modulo the arena size).
    pub published: u64,
    /// Records committed and published.
    pub committed: u64,
    /// Records dropped (refused, abandoned, or given up after the wait budget).
    pub dropped: u64,
    /// The run's epoch, stored last when the lane is closed: until then the lane's counters
    /// are not final.
    pub closed: u64,
    /// Reserved, zero.
    pub reserved: [u64; 3],
}

/// A lane's host-written line: every word stored with `DeviceMemory::store_word` and read by
/// the AICPU device-direct.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpLaneAck {
    /// Ready-queue entries the host consumed.
    pub ready_head: u64,
    /// Logical arena offset up to which the host took the payload bytes (back-pressure: the
    /// producer never writes a byte `arena` or more past it).
    pub completed: u64,
    /// Free-queue entries the host pushed (monotonic).
    pub free_tail: u64,
    /// Reserved, zero.
    pub reserved: [u64; 5],
}

/// One ready-queue entry: a metadata buffer the AICPU published.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct DumpReady {
    /// The buffer's index in the lane.
    pub buffer: u32,
    /// Records in it.
    pub count: u32,
    /// Logical arena offset at the end of its payloads (what the host acknowledges).
    pub end: u64,
}

/// [`DumpRecord::stage`] values.
pub mod dump_stage {
    /// Inputs and in-outs as the task will read them, before its first dispatch.
    pub const BEFORE_DISPATCH: u8 = 0;
    /// Outputs and in-outs as written, after its completion.
    pub const AFTER_COMPLETION: u8 = 1;
}

/// [`DumpRecord::direction`] values.
pub mod dump_direction {
    /// Read only.
    pub const INPUT: u8 = 0;
    /// Written only.
    pub const OUTPUT: u8 = 1;
    /// Read and written.
    pub const INOUT: u8 = 2;
}

/// [`DumpRecord::flags`] bits.
pub mod dump_flags {
    /// The payload is a prefix: the view was larger than the arena clamp (arena / 2).
    pub const TRUNCATED: u8 = 1;
    /// The argument is a scalar (its value is in the record; no payload).
    pub const SCALAR: u8 = 2;
}

/// One captured argument: two lines, written by the lane's thread into a metadata buffer.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C, align(64))]
pub struct DumpRecord {
    /// The task (its report id).
    pub task: u32,
    /// Argument index: tensors first, then scalars.
    pub arg: u16,
    /// [`dump_stage`].
    pub stage: u8,
    /// [`dump_direction`].
    pub direction: u8,
    /// Func ids of the task's lanes (AIC, AIV0, AIV1); [`NO_FUNC`](super::NO_FUNC) where unused.
    pub func_ids: [u16; 3],
    /// Func ids in use.
    pub func_count: u8,
    /// [`dump_flags`].
    pub flags: u8,
    /// `DType` code.
    pub dtype: u32,
    /// Bytes per element.
    pub elem_bytes: u32,
    /// Device address of the view's first element.
    pub addr: u64,
    /// Logical arena offset of the payload.
    pub payload_offset: u64,
    /// Payload bytes copied (the view's logical bytes, or the clamp when truncated; 0 for a
    /// record without payload).
    pub payload_len: u64,
    /// Bytes of the whole view (elements × element size).
    pub view_bytes: u64,
    /// A scalar's value.
    pub scalar: u64,
    /// Dimensions in use.
    pub ndims: u32,
    /// Extents.
    pub shape: [u32; 5],
    /// Strides in elements.
    pub strides: [u32; 5],
    /// Reserved, zero.
    pub reserved0: u32,
    /// The record's sequence number in its lane (commit order).
    pub seq: u64,
    /// Reserved, zero.
    pub reserved: u64,
}

/// Where one run's dump lanes sit: the [`DumpHeader`] line, then per lane its state line, its
/// ack line, its ready ring (`buffers` entries), its free ring (`buffers` words), its metadata
/// buffers and its payload arena — each part 64-byte aligned, so every line has one writer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DumpLayout {
    /// GM address of the header.
    pub base: u64,
    /// The header.
    pub header: DumpHeader,
}

impl DumpLayout {
    const fn ring_bytes(buffers: u32) -> u64 {
        (buffers as u64 * size_of::<DumpReady>() as u64).next_multiple_of(64)
    }
    const fn free_bytes(buffers: u32) -> u64 {
        (buffers as u64 * 8).next_multiple_of(64)
    }
    /// Bytes of one metadata buffer.
    pub const fn buffer_bytes(&self) -> u64 {
        self.header.records as u64 * size_of::<DumpRecord>() as u64
    }
    /// Bytes of one lane (checked: `None` when the sizes overflow).
    pub const fn lane_bytes(h: &DumpHeader) -> Option<u64> {
        let fixed = 128 + Self::ring_bytes(h.buffers) + Self::free_bytes(h.buffers);
        let Some(meta) = (h.buffers as u64).checked_mul(h.records as u64 * size_of::<DumpRecord>() as u64) else {
            return None;
        };
        let Some(x) = fixed.checked_add(meta) else { return None };
        x.checked_add(h.arena.next_multiple_of(64))
    }
    /// Bytes of the whole region (checked).
    pub const fn region_bytes(h: &DumpHeader) -> Option<u64> {
        let Some(l) = Self::lane_bytes(h) else { return None };
        let Some(all) = l.checked_mul(h.lanes as u64) else { return None };
        all.checked_add(64)
    }
    /// GM address of lane `t`'s state line.
    pub const fn lane(&self, t: u32) -> u64 {
        // The region was sized with checked arithmetic before it was allocated.
        match Self::lane_bytes(&self.header) {
            Some(l) => self.base + 64 + t as u64 * l,
            None => 0,
        }
    }
    /// GM address of lane `t`'s ack line.
    pub const fn ack(&self, t: u32) -> u64 {
        self.lane(t) + 64
    }
    /// GM address of lane `t`'s ready-queue entry `i` (modulo the ring).
    pub const fn ready(&self, t: u32, i: u64) -> u64 {
        self.lane(t) + 128 + (i % self.header.buffers as u64) * size_of::<DumpReady>() as u64
    }
    /// GM address of lane `t`'s free-queue word `i` (modulo the ring).
    pub const fn free(&self, t: u32, i: u64) -> u64 {
        self.lane(t) + 128 + Self::ring_bytes(self.header.buffers) + (i % self.header.buffers as u64) * 8
    }
    /// GM address of lane `t`'s metadata buffer `b`.
    pub const fn buffer(&self, t: u32, b: u32) -> u64 {
        self.lane(t)
            + 128
            + Self::ring_bytes(self.header.buffers)
            + Self::free_bytes(self.header.buffers)
            + b as u64 * self.buffer_bytes()
    }
    /// GM address of lane `t`'s payload arena.
    pub const fn arena(&self, t: u32) -> u64 {
        self.buffer(t, self.header.buffers)
    }
}

const _: () = {
    assert!(size_of::<DumpHeader>() == 64);
    assert!(size_of::<DumpLaneState>() == 64);
    assert!(size_of::<DumpLaneAck>() == 64);
    assert!(size_of::<DumpReady>() == 16);
    assert!(size_of::<DumpRecord>() == 128);
    assert!(offset_of!(DumpRecord, payload_offset) == 32);
    assert!(offset_of!(DumpRecord, ndims) == 64);
    assert!(offset_of!(DumpRecord, seq) == 112);
};
