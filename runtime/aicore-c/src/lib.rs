//! The legacy executor's AICore program in C, and its Rust glue for in-process platforms.
//!
//! `csrc/pto_aicore_exec.c` does what the runtime's Rust AICore program does on the legacy
//! executor (`pto_runtime::exec::entry::aicore_entry` with `exec::legacy::core`): read the
//! launch descriptor, report through the handshake line, wait for the window, run every
//! dispatch (payload read, ACK, argument record, kernel call through the kernel ABI, output
//! write-back, store barrier, FIN or `COND_FAULTED`), and leave through one exit path (trace
//! close, EXITED, the teardown gate). It is written against `include/pto_aicore_intrinsics.h`
//! and the generated `include/pto_abi.h`.
//!
//! On the simulator (and any platform whose device half runs in this process) the
//! intrinsics are the simulator backend's: a table of `extern "C"` callbacks bound to the
//! calling core `A: AicoreAgent` ([`aicore_entry`]), so every GM access and every cache
//! operation goes through the HAL — the faithful cache model sees them all — and kernels run
//! through [`AicoreAgent::run_kernel`] (Rust and native kernels alike, faults contained).
//! No callback unwinds into C: a panic under one is caught, the callback returns a neutral
//! value, the executor returns at its next wait, and the panic resumes in Rust once the C
//! code has returned (the simulator reports it as the core's fault).
//!
//! [`install`] installs the program under [`NATIVE_AICORE`]; a run selects it with
//! `RunConfig::aicore` (`pto_runtime::host::AicoreProgram::Native`, `--aicore native`). The C
//! program serves the legacy executor only: it refuses a resident launch descriptor.

use core::ffi::{c_char, c_void};
use std::any::Any;
use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pto_hal::{AicoreAgent, AicoreLaunch, CoreType, DelayNs, GmAddr, GmMemory, KernelContext, Platform, TensorArg};
use pto_runtime::breakage;
use pto_runtime::layout::{DispatchPayload, MAX_SCALAR_ARGS, MAX_TENSOR_ARGS, TENSOR_READ, TENSOR_WRITTEN, TensorDesc};

pub use pto_runtime::programs::NATIVE_AICORE;

/// `pto_ai_run_kernel`: the kernel ran.
const KERNEL_OK: i32 = 0;
/// `pto_ai_run_kernel`: no kernel is loaded as the payload's binary handle.
const KERNEL_UNKNOWN: i32 = 1;
/// `pto_ai_run_kernel`: the kernel faulted (its text in the call's buffer).
const KERNEL_FAULT: i32 = 2;

/// The breakage switches the C executor honours (`PTO_BREAK_*` in `pto_abi.h`).
const AICORE_BREAKAGE: [u64; 8] = [
    breakage::SKIP_REPORT_PUBLISH,
    breakage::FIN_BEFORE_PUBLISH,
    breakage::SKIP_PAYLOAD_OBSERVE,
    breakage::SKIP_ARGS_OBSERVE,
    breakage::RELEASE_ON_FAULT,
    breakage::ERROR_EXIT_SKIPS_GATE,
    breakage::GATE_ANY_EPOCH,
    breakage::FAULT_EXIT_SKIPS_PUBLISH,
];

/// `struct pto_ai_sim_table` (`include/pto_aicore_sim.h`).
#[repr(C)]
struct SimTable {
    ld_dev: extern "C" fn(*mut c_void, u64) -> u64,
    st_dev: extern "C" fn(*mut c_void, u64, u64),
    cas_dev: extern "C" fn(*mut c_void, u64, u64, u64) -> u64,
    load: extern "C" fn(*mut c_void, u64, *mut c_void, u32),
    store: extern "C" fn(*mut c_void, u64, *const c_void, u32),
    line_writeback: extern "C" fn(*mut c_void, u64),
    line_invalidate: extern "C" fn(*mut c_void, u64),
    cache_barrier: extern "C" fn(*mut c_void),
    rmb: extern "C" fn(*mut c_void),
    store_store: extern "C" fn(*mut c_void),
    store_barrier: extern "C" fn(*mut c_void),
    read_dmb: extern "C" fn(*mut c_void) -> u32,
    write_cond: extern "C" fn(*mut c_void, u32),
    now: extern "C" fn(*mut c_void) -> u64,
    wait_event: extern "C" fn(*mut c_void, u64),
    send_event: extern "C" fn(*mut c_void),
    wait_word: extern "C" fn(*mut c_void, u64, u64, u64),
    delay_ns: extern "C" fn(*mut c_void, u32),
    kernel_known: extern "C" fn(*mut c_void, u64) -> i32,
    run_kernel: extern "C" fn(*mut c_void, *mut KernelCall) -> i32,
    aborted: extern "C" fn(*mut c_void) -> i32,
}

/// `struct pto_ai` of the simulator backend: the calling core.
#[repr(C)]
struct Ai {
    t: *const SimTable,
    env: *mut c_void,
    block_idx: u32,
    core_type: u32,
    physical_id: u32,
    reserved: u32,
    broken: u64,
}

/// `struct pto_ai_kernel_call` (`include/pto_aicore_intrinsics.h`).
#[repr(C)]
struct KernelCall {
    bin: u64,
    payload: *const DispatchPayload,
    tensors: *const TensorDesc,
    tensor_count: u32,
    scalar_count: u32,
    scalars: *const u64,
    fault_text: *mut c_char,
    fault_text_cap: u32,
    reserved: u32,
}

unsafe extern "C" {
    /// `pto_aicore_main` (`include/pto_aicore_exec.h`).
    fn pto_aicore_main(ai: *mut Ai, desc: u64) -> i32;
}

/// What the callbacks of one `pto_aicore_main` call reach through their `env` pointer.
struct Env<'a, A> {
    a: &'a A,
    core_type: CoreType,
    /// The first panic a callback caught; from then on every callback returns its neutral
    /// value and the executor is told to return.
    panic: RefCell<Option<Box<dyn Any + Send>>>,
}

impl SimTable {
    /// The callbacks bound to agent type `A`.
    fn of<A: AicoreAgent>() -> SimTable {
        SimTable {
            ld_dev: ld_dev::<A>,
            st_dev: st_dev::<A>,
            cas_dev: cas_dev::<A>,
            load: load::<A>,
            store: store::<A>,
            line_writeback: line_writeback::<A>,
            line_invalidate: line_invalidate::<A>,
            cache_barrier: cache_barrier::<A>,
            rmb: rmb::<A>,
            store_store: store_store::<A>,
            store_barrier: store_barrier::<A>,
            read_dmb: read_dmb::<A>,
            write_cond: write_cond::<A>,
            now: now::<A>,
            wait_event: wait_event::<A>,
            send_event: send_event::<A>,
            wait_word: wait_word::<A>,
            delay_ns: delay_ns::<A>,
            kernel_known: kernel_known::<A>,
            run_kernel: run_kernel::<A>,
            aborted: aborted::<A>,
        }
    }
}

/// Run `f` on the agent behind `env`, never unwinding: a panic is kept in the environment and
/// `neutral` returned (also for every call after the first panic).
fn guarded<A: AicoreAgent, R>(env: *mut c_void, neutral: R, f: impl FnOnce(&Env<'_, A>) -> R) -> R {
    // SAFETY: `env` is the `Env<A>` that `aicore_entry::<A>` put in the `struct pto_ai` it
    // passed to `pto_aicore_main`; the C code calls back only during that call, on this
    // thread, while the `Env` lives on `aicore_entry`'s stack, and only reads through it.
    let env = unsafe { &*(env as *const Env<'_, A>) };
    if env.panic.borrow().is_some() {
        return neutral;
    }
    match catch_unwind(AssertUnwindSafe(|| f(env))) {
        Ok(r) => r,
        Err(p) => {
            *env.panic.borrow_mut() = Some(p);
            neutral
        }
    }
}

extern "C" fn ld_dev<A: AicoreAgent>(env: *mut c_void, addr: u64) -> u64 {
    guarded::<A, _>(env, 0, |e| e.a.query(GmAddr(addr)))
}

extern "C" fn st_dev<A: AicoreAgent>(env: *mut c_void, addr: u64, v: u64) {
    guarded::<A, _>(env, (), |e| e.a.store_direct(GmAddr(addr), v))
}

extern "C" fn cas_dev<A: AicoreAgent>(env: *mut c_void, addr: u64, expected: u64, desired: u64) -> u64 {
    // Neutral: a value other than `expected` (the CAS failed).
    guarded::<A, _>(env, !expected, |e| e.a.compare_exchange(GmAddr(addr), expected, desired))
}

extern "C" fn load<A: AicoreAgent>(env: *mut c_void, addr: u64, dst: *mut c_void, len: u32) {
    if len == 0 || dst.is_null() {
        return;
    }
    // SAFETY: the executor passes a buffer of its own of at least `len` bytes (a structure or
    // array on its stack), not aliased while the call runs.
    let dst = unsafe { core::slice::from_raw_parts_mut(dst as *mut u8, len as usize) };
    guarded::<A, _>(env, (), |e| e.a.read(GmAddr(addr), dst))
}

extern "C" fn store<A: AicoreAgent>(env: *mut c_void, addr: u64, src: *const c_void, len: u32) {
    if len == 0 || src.is_null() {
        return;
    }
    // SAFETY: the executor passes a buffer of its own of at least `len` readable bytes.
    let src = unsafe { core::slice::from_raw_parts(src as *const u8, len as usize) };
    guarded::<A, _>(env, (), |e| e.a.write(GmAddr(addr), src))
}

extern "C" fn line_writeback<A: AicoreAgent>(env: *mut c_void, addr: u64) {
    guarded::<A, _>(env, (), |e| e.a.writeback_line(GmAddr(addr)))
}

extern "C" fn line_invalidate<A: AicoreAgent>(env: *mut c_void, addr: u64) {
    guarded::<A, _>(env, (), |e| e.a.invalidate_line(GmAddr(addr)))
}

extern "C" fn cache_barrier<A: AicoreAgent>(env: *mut c_void) {
    guarded::<A, _>(env, (), |e| e.a.cache_barrier())
}

extern "C" fn rmb<A: AicoreAgent>(env: *mut c_void) {
    guarded::<A, _>(env, (), |e| e.a.rmb())
}

extern "C" fn store_store<A: AicoreAgent>(env: *mut c_void) {
    guarded::<A, _>(env, (), |e| e.a.store_store())
}

extern "C" fn store_barrier<A: AicoreAgent>(env: *mut c_void) {
    guarded::<A, _>(env, (), |e| e.a.store_barrier())
}

extern "C" fn read_dmb<A: AicoreAgent>(env: *mut c_void) -> u32 {
    // Neutral: EXIT, so a dispatch loop ends.
    guarded::<A, _>(env, pto_runtime::layout::regs::DMB_EXIT, |e| e.a.read_dmb())
}

extern "C" fn write_cond<A: AicoreAgent>(env: *mut c_void, v: u32) {
    guarded::<A, _>(env, (), |e| e.a.write_cond(v))
}

extern "C" fn now<A: AicoreAgent>(env: *mut c_void) -> u64 {
    // Neutral: the end of time, so every deadline has passed.
    guarded::<A, _>(env, u64::MAX, |e| e.a.now_ticks())
}

extern "C" fn wait_event<A: AicoreAgent>(env: *mut c_void, deadline: u64) {
    guarded::<A, _>(env, (), |e| e.a.wait_for_event(deadline))
}

extern "C" fn send_event<A: AicoreAgent>(env: *mut c_void) {
    guarded::<A, _>(env, (), |e| e.a.send_event())
}

extern "C" fn wait_word<A: AicoreAgent>(env: *mut c_void, addr: u64, seen: u64, deadline: u64) {
    guarded::<A, _>(env, (), |e| e.a.wait_for_word(GmAddr(addr), seen, deadline))
}

extern "C" fn delay_ns<A: AicoreAgent>(env: *mut c_void, ns: u32) {
    guarded::<A, _>(env, (), |e| e.a.delay().delay_ns(ns))
}

extern "C" fn kernel_known<A: AicoreAgent>(env: *mut c_void, bin: u64) -> i32 {
    guarded::<A, _>(env, 0, |e| e.a.resolve_kernel(bin).is_some() as i32)
}

extern "C" fn aborted<A: AicoreAgent>(env: *mut c_void) -> i32 {
    // SAFETY: as in `guarded`: the live `Env<A>` of this `pto_aicore_main` call.
    let env = unsafe { &*(env as *const Env<'_, A>) };
    env.panic.borrow().is_some() as i32
}

extern "C" fn run_kernel<A: AicoreAgent>(env: *mut c_void, call: *mut KernelCall) -> i32 {
    guarded::<A, _>(env, KERNEL_FAULT, |e| {
        // SAFETY: the executor passes its own call structure, whose payload, descriptors
        // (`tensor_count` of them, at most MAX_TENSOR_ARGS), scalars (`scalar_count`, at most
        // MAX_SCALAR_ARGS) and text buffer (`fault_text_cap` bytes) live on its stack for the
        // whole call and are not touched by it meanwhile.
        let call = unsafe { &mut *call };
        // SAFETY: see above.
        let p = unsafe { *call.payload };
        let nt = (call.tensor_count as usize).min(MAX_TENSOR_ARGS);
        let ns = (call.scalar_count as usize).min(MAX_SCALAR_ARGS);
        // SAFETY: see above (`nt` descriptors, `ns` scalars, both arrays of the executor).
        let tensors = unsafe { core::slice::from_raw_parts(call.tensors, nt) };
        // SAFETY: see above.
        let scalars = unsafe { core::slice::from_raw_parts(call.scalars, ns) };
        let Some(kernel) = e.a.resolve_kernel(call.bin) else {
            return KERNEL_UNKNOWN;
        };
        let mut ctx = Ctx { gm: e.a.as_gm(), tensors, scalars, p, core_type: e.core_type };
        match e.a.run_kernel(kernel, &mut ctx) {
            Ok(()) => KERNEL_OK,
            Err(fault) => {
                if call.fault_text_cap > 0 && !call.fault_text.is_null() {
                    // SAFETY: see above (`fault_text_cap` writable bytes).
                    let buf = unsafe {
                        core::slice::from_raw_parts_mut(call.fault_text as *mut u8, call.fault_text_cap as usize)
                    };
                    let text = fault.as_str().as_bytes();
                    let n = text.len().min(buf.len() - 1);
                    buf[..n].copy_from_slice(&text[..n]);
                    buf[n] = 0;
                }
                KERNEL_FAULT
            }
        }
    })
}

/// What a kernel sees of a dispatch of the C executor: the arguments it read from the record.
struct Ctx<'a> {
    gm: &'a dyn GmMemory,
    tensors: &'a [TensorDesc],
    scalars: &'a [u64],
    p: DispatchPayload,
    core_type: CoreType,
}

impl KernelContext for Ctx<'_> {
    fn tensor(&self, i: usize) -> Option<TensorArg> {
        self.tensors.get(i).map(TensorDesc::to_arg)
    }
    fn tensor_count(&self) -> usize {
        self.tensors.len()
    }
    fn scalar(&self, i: usize) -> Option<u64> {
        self.scalars.get(i).copied()
    }
    fn scalar_count(&self) -> usize {
        self.scalars.len()
    }
    fn block_idx(&self) -> u32 {
        self.p.block_idx
    }
    fn block_num(&self) -> u32 {
        self.p.block_num
    }
    fn sub_block_id(&self) -> u32 {
        self.p.lane
    }
    fn core_type(&self) -> CoreType {
        self.core_type
    }
    fn task_id(&self) -> u32 {
        self.p.task_id
    }
    fn writable(&self, i: usize) -> bool {
        self.tensors.get(i).is_some_and(|t| t.flags & TENSOR_WRITTEN != 0)
    }
    fn readable(&self, i: usize) -> bool {
        self.tensors.get(i).is_some_and(|t| t.flags & TENSOR_READ != 0)
    }
    fn gm(&self) -> &dyn GmMemory {
        self.gm
    }
}

/// The C executor as an AICore program of agent type `A` (an [`pto_hal::AicoreEntry`]): binds
/// the simulator backend's callbacks to `a` and runs `pto_aicore_main`. Returns its status
/// (0, or the runtime's negative core statuses); a panic under a callback resumes here once
/// the C code has returned.
pub fn aicore_entry<A: AicoreAgent>(a: &A, launch: AicoreLaunch) -> i32 {
    let env = Env { a, core_type: launch.core_type, panic: RefCell::new(None) };
    let table = SimTable::of::<A>();
    let broken = AICORE_BREAKAGE.iter().filter(|&&b| breakage::broken(b)).fold(0, |m, b| m | b);
    let mut ai = Ai {
        t: &table,
        env: &env as *const Env<'_, A> as *mut c_void,
        block_idx: launch.block_idx,
        core_type: launch.core_type as u32,
        physical_id: launch.physical_core_id,
        reserved: 0,
        broken,
    };
    // SAFETY: `ai` points to a callback table and an environment that outlive the call; the
    // C code keeps neither pointer after it returns and calls back only on this thread. No
    // callback unwinds (`guarded`).
    let status = unsafe { pto_aicore_main(&mut ai, launch.args.0) };
    if let Some(p) = env.panic.into_inner() {
        std::panic::resume_unwind(p);
    }
    status
}

/// Install the C executor into an in-process platform's device under [`NATIVE_AICORE`], next
/// to the runtime's own programs (`pto_runtime::programs::install`).
pub fn install<P: Platform>(device: &P::Device) -> Result<(), P::Error> {
    P::install_aicore_program(device, NATIVE_AICORE, aicore_entry::<P::Aicore>)
}
