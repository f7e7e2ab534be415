//! The device ABI as C: [`header`] writes `include/pto_abi.h` (the structures C code on the
//! device reads or writes, and their constants) and [`check`] `include/pto_abi_check.c` (a
//! static assertion of every size and offset), both from the Rust definitions, so the two
//! cannot drift. `tests/c_abi.rs` checks the committed files are current
//! (`PTO_BLESS=1` rewrites them).
//!
//! Each structure is described once, in [`structs`]: its C name, the Rust type, and its
//! fields with their C types. Sizes and offsets come from the compiler (`size_of`,
//! `offset_of!`); describing a field with a C type of another size, leaving a gap (a Rust
//! field missing from the description) or listing fields out of order is an error naming it.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use core::mem::{align_of, offset_of, size_of};

use pto_hal::native::{NativeBuffer, NativeGlobalContext, NativeLocalContext, NativeTensor};

use super::*;
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};

/// One field of a C structure.
#[derive(Clone, Debug)]
pub struct CField {
    /// Its name (the Rust field's).
    pub name: &'static str,
    /// The C type of one element (`uint32_t`, `struct pto_buffer`).
    pub cty: &'static str,
    /// Array length, 0 for a scalar.
    pub count: usize,
    /// Offset, from `offset_of!`.
    pub offset: usize,
    /// Size of the Rust field.
    pub size: usize,
}

/// One C structure: its name, the Rust type's size and alignment, and its fields.
#[derive(Clone, Debug)]
pub struct CStruct {
    /// The C name, without `struct`.
    pub name: &'static str,
    /// What it is, for the header's comment.
    pub doc: &'static str,
    /// `size_of` of the Rust type.
    pub size: usize,
    /// `align_of` of the Rust type.
    pub align: usize,
    /// The fields, in order.
    pub fields: Vec<CField>,
}

/// The size of the value `f` projects out of a `T`.
fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! c_struct {
    ($name:literal, $doc:literal, $ty:ty { $($field:ident : $cty:literal $([$n:expr])?),* $(,)? }) => {
        CStruct {
            name: $name,
            doc: $doc,
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: alloc::vec![$(CField {
                name: stringify!($field),
                cty: $cty,
                count: 0 $(+ $n)?,
                offset: offset_of!($ty, $field),
                size: field_size(|s: &$ty| &s.$field),
            }),*],
        }
    };
}

/// Every structure of the device ABI, each after the ones it contains.
pub fn structs() -> Vec<CStruct> {
    let mut all = launch_structs();
    all.extend(kernel_structs());
    all.extend(trace_structs());
    all
}

/// The launch descriptor's lines, the handshake report and the teardown gate.
fn launch_structs() -> Vec<CStruct> {
    alloc::vec![
        c_struct!(
            "pto_launch_config",
            "The launch descriptor's configuration line(s): written by the host.",
            LaunchConfig {
                magic: "uint32_t",
                version: "uint32_t",
                epoch: "uint64_t",
                clusters: "uint32_t",
                workers: "uint32_t",
                aicpu_threads: "uint32_t",
                task_count: "uint32_t",
                physical_cores: "uint32_t",
                runtime: "uint32_t",
                image: "uint64_t",
                image_len: "uint64_t",
                handshakes: "uint64_t",
                gates: "uint64_t",
                payloads: "uint64_t",
                watchdog_ticks: "uint64_t",
                exit_ticks: "uint64_t",
                core_wait_ticks: "uint64_t",
                trace: "uint64_t",
                trace_core_records: "uint32_t",
                trace_thread_records: "uint32_t",
                dump: "uint64_t",
                executor: "uint32_t",
                executor_reason: "uint32_t",
                executor_detail: "uint32_t",
                resident_entries: "uint32_t",
                resident: "uint64_t",
                capture: "uint64_t",
                reserved: "uint64_t"[4],
            }
        ),
        c_struct!(
            "pto_fatal_line",
            "The fatal latch: the first fault of a run.",
            FatalLine {
                claimed: "uint64_t",
                code: "uint64_t",
                site: "uint64_t",
                task: "uint64_t",
                core: "uint64_t",
                detail: "uint64_t",
                complete: "uint64_t",
                reserved: "uint64_t",
            }
        ),
        c_struct!(
            "pto_run_line",
            "The run's counters.",
            RunLine {
                completed: "uint64_t",
                dispatched: "uint64_t",
                cores_ready: "uint64_t",
                cores_released: "uint64_t",
                threads_done: "uint64_t",
                orch_ticks: "uint64_t",
                resident_ready: "uint64_t",
                orch_flow_ticks: "uint64_t",
            }
        ),
        c_struct!(
            "pto_fault_text",
            "The fault's text (UTF-8, NUL-padded).",
            FaultText { bytes: "uint8_t"[FAULT_TEXT_BYTES] }
        ),
        c_struct!(
            "pto_launch_desc",
            "The launch descriptor: the argument of both device programs.",
            LaunchDesc {
                config: "struct pto_launch_config",
                fatal: "struct pto_fatal_line",
                run: "struct pto_run_line",
                fault_text: "struct pto_fault_text",
            }
        ),
        c_struct!(
            "pto_handshake",
            "A worker's handshake line: written only by its AICore.",
            Handshake {
                aicore_done: "uint32_t",
                core_type: "uint32_t",
                physical_core_id: "uint32_t",
                reserved0: "uint32_t",
                report_epoch: "uint64_t",
                reserved: "uint64_t"[5],
            }
        ),
        c_struct!(
            "pto_teardown_gate",
            "A worker's teardown gate line.",
            TeardownGate { release: "uint64_t", reserved: "uint64_t"[7] }
        ),
    ]
}

/// What a kernel is handed: the dispatch payload, the argument record and its tensors, and
/// the local and global contexts.
fn kernel_structs() -> Vec<CStruct> {
    alloc::vec![
        c_struct!(
            "pto_dispatch_payload",
            "One of a worker's two dispatch payload lines.",
            DispatchPayload {
                bin: "uint64_t",
                args: "uint64_t",
                task_id: "uint32_t",
                block_idx: "uint32_t",
                block_num: "uint32_t",
                lane: "uint32_t",
                reg_task_id: "uint32_t",
                reserved0: "uint32_t",
                reserved: "uint64_t"[3],
            }
        ),
        c_struct!(
            "pto_args_header",
            "Head of a task's argument record; then tensor descriptors, then scalars.",
            ArgsHeader {
                tensors: "uint32_t",
                scalars: "uint32_t",
                predicate: "uint64_t",
                flags: "uint32_t",
                dump_scalars: "uint32_t",
                funcs: "uint16_t"[3],
                reserved: "uint16_t",
            }
        ),
        c_struct!(
            "pto_tensor_desc",
            "A tensor argument of an argument record.",
            TensorDesc {
                addr: "uint64_t",
                dtype: "uint32_t",
                elem_bytes: "uint32_t",
                ndims: "uint32_t",
                shape: "uint32_t"[5],
                strides: "uint32_t"[5],
                flags: "uint32_t",
            }
        ),
        c_struct!(
            "pto_buffer",
            "Native kernel ABI: the buffer a tensor descriptor views.",
            NativeBuffer { addr: "uint64_t", size: "uint64_t" }
        ),
        c_struct!(
            "pto_tensor",
            "Native kernel ABI: the kernel tensor descriptor (args[0..T)).",
            NativeTensor {
                buffer: "struct pto_buffer",
                owner_task_id: "uint64_t",
                start_offset: "uint64_t",
                version: "int32_t",
                ndims: "uint32_t",
                dtype: "uint8_t",
                manual_dep: "uint8_t",
                is_contiguous: "uint8_t",
                address_space: "uint8_t",
                shapes: "uint32_t"[5],
                extent_elem: "uint64_t",
                strides: "uint32_t"[5],
                reserved: "uint32_t"[9],
            }
        ),
        c_struct!(
            "pto_local_context",
            "Native kernel ABI: this dispatch's block (args[48]).",
            NativeLocalContext { block_idx: "int32_t", block_num: "int32_t", async_ctx: "uint64_t"[5] }
        ),
        c_struct!(
            "pto_global_context",
            "Native kernel ABI: the core's lane, and pto-rt's status word (args[49]).",
            NativeGlobalContext {
                sub_block_id: "int32_t",
                pad: "uint32_t",
                l2_cache_offset: "uint64_t",
                status: "int32_t",
                reserved: "uint32_t",
            }
        ),
    ]
}

/// The trace ring's header and records.
fn trace_structs() -> Vec<CStruct> {
    alloc::vec![
        c_struct!(
            "pto_trace_header",
            "Head line of an agent's trace ring: written by its owner when it is done with the run.",
            TraceHeader { epoch: "uint64_t", count: "uint64_t", dropped: "uint64_t", reserved: "uint64_t"[5] }
        ),
        c_struct!(
            "pto_trace_record",
            "One trace record (a subtask on a core, a scheduler event or a phase).",
            TraceRecord {
                kind: "uint8_t",
                lane: "uint8_t",
                reserved0: "uint16_t",
                core: "uint32_t",
                task: "uint32_t",
                block: "uint32_t",
                bin: "uint64_t",
                start: "uint64_t",
                end: "uint64_t",
                dispatch: "uint64_t",
                completion: "uint64_t",
                reserved: "uint64_t",
            }
        ),
    ]
}

/// The constants the header defines: (C name, value).
pub fn constants() -> Vec<(&'static str, u64)> {
    use pto_hal::native as n;
    alloc::vec![
        ("PTO_LAYOUT_VERSION", LAYOUT_VERSION as u64),
        ("PTO_NATIVE_ABI_VERSION", n::NATIVE_ABI_VERSION as u64),
        ("PTO_DESC_MAGIC", DESC_MAGIC as u64),
        ("PTO_RUNTIME_HBG", RUNTIME_HBG as u64),
        ("PTO_RUNTIME_TRB", RUNTIME_TRB as u64),
        ("PTO_DMB_IDLE", regs::DMB_IDLE as u64),
        ("PTO_DMB_EXIT", regs::DMB_EXIT as u64),
        ("PTO_COND_FIN", regs::COND_FIN as u64),
        ("PTO_COND_IDLE", regs::COND_IDLE as u64),
        ("PTO_COND_EXITED", regs::COND_EXITED as u64),
        ("PTO_COND_FAULTED", regs::COND_FAULTED as u64),
        ("PTO_MAX_TENSOR_ARGS", MAX_TENSOR_ARGS as u64),
        ("PTO_MAX_SCALAR_ARGS", MAX_SCALAR_ARGS as u64),
        ("PTO_TENSOR_WRITTEN", TENSOR_WRITTEN as u64),
        ("PTO_TENSOR_READ", TENSOR_READ as u64),
        ("PTO_TENSOR_DUMP", TENSOR_DUMP as u64),
        ("PTO_FAULT_TEXT_BYTES", FAULT_TEXT_BYTES as u64),
        ("PTO_MAX_TENSOR_DIMS", pto_hal::MAX_TENSOR_DIMS as u64),
        ("PTO_NATIVE_MAX_TENSORS", n::NATIVE_MAX_TENSORS as u64),
        ("PTO_NATIVE_MAX_SCALARS", n::NATIVE_MAX_SCALARS as u64),
        ("PTO_LOCAL_CONTEXT_SLOT", n::LOCAL_CONTEXT_SLOT as u64),
        ("PTO_GLOBAL_CONTEXT_SLOT", n::GLOBAL_CONTEXT_SLOT as u64),
        ("PTO_ARG_SLOTS", n::NATIVE_ARG_SLOTS as u64),
        // The AICore program's view of the launch: executor modes, its return statuses, the
        // fault codes and sites it latches, the trace record it writes.
        ("PTO_EXECUTOR_RESIDENT_PENDING", executor_mode::RESIDENT_PENDING as u64),
        ("PTO_EXECUTOR_LEGACY_GRAPH", executor_mode::LEGACY_GRAPH as u64),
        ("PTO_EXECUTOR_LEGACY_UNSUPPORTED_SHAPE", executor_mode::LEGACY_UNSUPPORTED_SHAPE as u64),
        // Negative statuses, as magnitudes (`-PTO_CORE_STATUS_NEG_BAD_DESC` is the status).
        ("PTO_CORE_STATUS_NEG_BAD_DESC", neg(core_status::BAD_DESC)),
        ("PTO_CORE_STATUS_NEG_WINDOW_TIMEOUT", neg(core_status::WINDOW_TIMEOUT)),
        ("PTO_CORE_STATUS_NEG_IDLE_TIMEOUT", neg(core_status::IDLE_TIMEOUT)),
        ("PTO_CORE_STATUS_NEG_NOT_RELEASED", neg(core_status::NOT_RELEASED)),
        ("PTO_ERR_SCHEDULER_TIMEOUT", code(ErrorCode::Sched(SchedError::SchedulerTimeout))),
        ("PTO_ERR_KERNEL_FAULT", code(ErrorCode::Device(DeviceFault::KernelFault))),
        ("PTO_ERR_UNKNOWN_KERNEL", code(ErrorCode::Device(DeviceFault::UnknownKernel))),
        ("PTO_ERR_BAD_IMAGE", code(ErrorCode::Device(DeviceFault::BadImage))),
        ("PTO_ERR_RELEASE_TIMEOUT", code(ErrorCode::Device(DeviceFault::ReleaseTimeout))),
        ("PTO_SITE_KERNEL", u32::from(Site::Kernel) as u64),
        ("PTO_SITE_WINDOW", u32::from(Site::Window) as u64),
        ("PTO_SITE_CORE_IDLE", u32::from(Site::CoreIdle) as u64),
        ("PTO_SITE_GATE", u32::from(Site::Gate) as u64),
        ("PTO_TRACE_SUBTASK", trace_kind::SUBTASK as u64),
        // The element types an argument record may name: one past the last code, and each
        // code's size in bytes (`PTO_DTYPE_SIZE_<code>`).
        ("PTO_DTYPE_COUNT", DTYPES.len() as u64),
        ("PTO_DTYPE_SIZE_0", DTYPES[0].size() as u64),
        ("PTO_DTYPE_SIZE_1", DTYPES[1].size() as u64),
        ("PTO_DTYPE_SIZE_2", DTYPES[2].size() as u64),
        ("PTO_DTYPE_SIZE_3", DTYPES[3].size() as u64),
        ("PTO_DTYPE_SIZE_4", DTYPES[4].size() as u64),
        ("PTO_DTYPE_SIZE_5", DTYPES[5].size() as u64),
        ("PTO_DTYPE_SIZE_6", DTYPES[6].size() as u64),
        ("PTO_DTYPE_SIZE_7", DTYPES[7].size() as u64),
        ("PTO_DTYPE_SIZE_8", DTYPES[8].size() as u64),
        ("PTO_DTYPE_SIZE_9", DTYPES[9].size() as u64),
        ("PTO_DTYPE_SIZE_10", DTYPES[10].size() as u64),
        ("PTO_DTYPE_SIZE_11", DTYPES[11].size() as u64),
        // The runtime's test-only breakage switches the AICore program honours
        // (`crate::breakage`); a chip build has them all off.
        ("PTO_BREAK_SKIP_REPORT_PUBLISH", crate::breakage::SKIP_REPORT_PUBLISH),
        ("PTO_BREAK_FIN_BEFORE_PUBLISH", crate::breakage::FIN_BEFORE_PUBLISH),
        ("PTO_BREAK_SKIP_PAYLOAD_OBSERVE", crate::breakage::SKIP_PAYLOAD_OBSERVE),
        ("PTO_BREAK_SKIP_ARGS_OBSERVE", crate::breakage::SKIP_ARGS_OBSERVE),
        ("PTO_BREAK_RELEASE_ON_FAULT", crate::breakage::RELEASE_ON_FAULT),
        ("PTO_BREAK_ERROR_EXIT_SKIPS_GATE", crate::breakage::ERROR_EXIT_SKIPS_GATE),
        ("PTO_BREAK_GATE_ANY_EPOCH", crate::breakage::GATE_ANY_EPOCH),
        ("PTO_BREAK_FAULT_EXIT_SKIPS_PUBLISH", crate::breakage::FAULT_EXIT_SKIPS_PUBLISH),
    ]
}

/// Every element type, by code (`DType` is numbered densely from 0).
const DTYPES: [crate::graph::DType; 12] = {
    use crate::graph::DType as D;
    [D::F32, D::F16, D::BF16, D::I32, D::I64, D::U32, D::U8, D::I8, D::F64, D::U64, D::I16, D::U16]
};
const _: () = {
    let mut i = 0;
    while i < DTYPES.len() {
        assert!(DTYPES[i] as usize == i);
        i += 1;
    }
};

/// A negative status as the header writes it: its magnitude (the C code negates it).
fn neg(v: i32) -> u64 {
    v.unsigned_abs() as u64
}

/// An error code's value (all of them are positive).
fn code(c: crate::codes::ErrorCode) -> u64 {
    c.value() as u32 as u64
}

fn c_size(cty: &str, known: &[CStruct]) -> Option<usize> {
    Some(match cty {
        "uint8_t" | "int8_t" => 1,
        "uint16_t" | "int16_t" => 2,
        "uint32_t" | "int32_t" => 4,
        "uint64_t" | "int64_t" => 8,
        s => known.iter().find(|k| s.strip_prefix("struct ") == Some(k.name))?.size,
    })
}

/// Check every description against its Rust type: C sizes, order, no gaps (the last field
/// may be followed by the type's alignment padding only).
pub fn validate(all: &[CStruct]) -> Result<(), String> {
    for (i, s) in all.iter().enumerate() {
        let mut end = 0;
        for f in &s.fields {
            let one = c_size(f.cty, &all[..i]).ok_or(format!("{}.{}: unknown C type {}", s.name, f.name, f.cty))?;
            if one * f.count.max(1) != f.size {
                return Err(format!(
                    "{}.{}: {} x{} is not the Rust field's {} bytes",
                    s.name, f.name, f.cty, f.count, f.size
                ));
            }
            if f.offset != end {
                return Err(format!(
                    "{}.{}: at offset {}, expected {end} (a field is missing or out of order)",
                    s.name, f.name, f.offset
                ));
            }
            end = f.offset + f.size;
        }
        if end.next_multiple_of(s.align) != s.size {
            return Err(format!("{}: fields end at {end}, the Rust type is {} bytes", s.name, s.size));
        }
    }
    Ok(())
}

const BANNER: &str = "/* Generated by pto-runtime (runtime/src/layout/c_abi.rs) from the Rust definitions: do not edit.\n * Regenerate with `PTO_BLESS=1 cargo test -p pto-runtime --features std --test c_abi`. */\n";

/// `include/pto_abi.h`.
pub fn header() -> Result<String, String> {
    let all = structs();
    validate(&all)?;
    let mut h = String::new();
    h.push_str(BANNER);
    h.push_str("#ifndef PTO_ABI_H\n#define PTO_ABI_H\n\n#include <stdint.h>\n\n");
    for (name, v) in constants() {
        let _ = match v {
            0..0x10000 => writeln!(h, "#define {name} {v}"),
            _ => writeln!(h, "#define {name} {v:#x}u"),
        };
    }
    for s in &all {
        let _ = write!(h, "\n/* {} */\nstruct __attribute__((aligned({}))) {} {{\n", s.doc, s.align, s.name);
        for f in &s.fields {
            match f.count {
                0 => writeln!(h, "    {} {};", f.cty, f.name),
                n => writeln!(h, "    {} {}[{n}];", f.cty, f.name),
            }
            .map_err(|e| format!("{e}"))?;
        }
        h.push_str("};\n");
    }
    h.push_str("\n#endif /* PTO_ABI_H */\n");
    Ok(h)
}

/// `include/pto_abi_check.c`: compiles only if every size and offset of `pto_abi.h` is the
/// Rust one.
pub fn check() -> Result<String, String> {
    let all = structs();
    validate(&all)?;
    let mut c = String::new();
    c.push_str(BANNER);
    c.push_str("#include <stddef.h>\n#include \"pto_abi.h\"\n\n");
    for s in &all {
        let _ = writeln!(c, "_Static_assert(sizeof(struct {0}) == {1}, \"size of {0}\");", s.name, s.size);
        let _ = writeln!(c, "_Static_assert(_Alignof(struct {0}) == {1}, \"alignment of {0}\");", s.name, s.align);
        for f in &s.fields {
            let _ = writeln!(
                c,
                "_Static_assert(offsetof(struct {0}, {1}) == {2} && sizeof(((struct {0} *)0)->{1}) == {3}, \
                 \"offset and size of {0}.{1}\");",
                s.name, f.name, f.offset, f.size
            );
        }
    }
    Ok(c)
}
