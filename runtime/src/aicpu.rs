//! The AICPU program of the host-built-graph runtime.
//!
//! Thread 0 boots: it reads the launch descriptor and the graph image (invalidating first on
//! host-non-coherent builds, before the **first** read of every run — including a pipeline
//! slot's first run), validates them, builds the shared scheduler state and publishes it in
//! the launch's scratch cell. Every thread then handshakes the cores of its clusters,
//! schedules until the graph completes or a fault stops the run, and retires its cores. The
//! last thread out frees the shared state.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use pto_hal::{AicpuAgent, AicpuLaunch, GmAddr, GmMemory};
use zerocopy::{FromBytes, IntoBytes};

use crate::codes::{DeviceFault, ErrorCode, Site};
use crate::layout::{
    ArgsHeader, DESC_MAGIC, FuncEntry, IMAGE_MAGIC, ImageHeader, LAYOUT_VERSION, LaunchConfig, Shape, TaskRecord,
    offsets,
};
use crate::lifecycle::{self, Fault, RunMap};
use crate::sched::{Graph, Scheduler, Shared, lanes_match};

/// Status when the descriptor cannot be used at all.
pub const STATUS_BAD_DESC: i32 = -202;
/// Status when a thread never received the shared state from thread 0.
pub const STATUS_NO_BOOT: i32 = -201;

/// The AICPU program entry point of the host-built-graph runtime.
pub fn aicpu_entry<A: AicpuAgent>(a: &A, launch: AicpuLaunch<'_>) -> i32 {
    let shared: &Shared = if launch.thread_idx == 0 {
        let Some(state) = boot(a, launch.args) else {
            return STATUS_BAD_DESC;
        };
        let ptr = Box::into_raw(Box::new(state));
        launch.scratch.store(ptr.cast(), Ordering::Release);
        a.send_event();
        // SAFETY: `ptr` came from `Box::into_raw` just above and is freed only by the last
        // thread to depart (below), which cannot happen before this thread departs.
        unsafe { &*ptr }
    } else {
        match wait_shared(a, &launch) {
            Some(s) => s,
            None => return STATUS_NO_BOOT,
        }
    };

    let mut sched = Scheduler::new(a, shared, launch.thread_idx, launch.thread_count);
    sched.handshake();
    sched.run();
    let released = sched.retire();
    sched.publish_counters(released);
    drop(sched);

    if crate::breakage::broken(crate::breakage::INVALIDATE_AT_END) {
        // The reference's placement: invalidate for the next run, at the end of this one.
        crate::observe_host::<A>(a, launch.args, core::mem::size_of::<crate::layout::LaunchConfig>() as u64);
    }
    if shared.departed.fetch_add(1, Ordering::AcqRel) + 1 == launch.thread_count {
        // Last out: every completion of the run has happened; record the total.
        a.store_direct(shared.map.desc.offset(offsets::RUN_COMPLETED), shared.completed() as u64);
        let ptr = launch.scratch.swap(core::ptr::null_mut(), Ordering::AcqRel) as *mut Shared;
        // SAFETY: every thread of the launch has departed (the counter reached the thread
        // count), so no reference to the state remains; `ptr` came from `Box::into_raw` in
        // thread 0 and is freed exactly once because the scratch cell was swapped to null.
        drop(unsafe { Box::from_raw(ptr) });
    }
    0
}

fn wait_shared<'l, A: AicpuAgent>(a: &A, launch: &AicpuLaunch<'l>) -> Option<&'l Shared> {
    // Thread 0 boots within the watchdog of this run (read here, not trusted from thread 0).
    let cfg = lifecycle::read_config(a, launch.args);
    let deadline = a.now_ticks().saturating_add(cfg.watchdog_ticks.max(a.ticks_from_micros(1_000)));
    loop {
        let p = launch.scratch.load(Ordering::Acquire) as *const Shared;
        if !p.is_null() {
            // SAFETY: thread 0 published a pointer from `Box::into_raw`; it stays valid until
            // every thread, this one included, has departed.
            return Some(unsafe { &*p });
        }
        if a.now_ticks() >= deadline {
            return None;
        }
        a.wait_for_event(deadline);
    }
}

/// Read and validate descriptor and image; `None` only when the descriptor is unusable.
fn boot<A: AicpuAgent>(a: &A, desc: GmAddr) -> Option<Shared> {
    let cfg = lifecycle::read_config(a, desc);
    if cfg.magic != DESC_MAGIC || cfg.version != LAYOUT_VERSION || cfg.workers != cfg.clusters * 3 || cfg.clusters == 0
    {
        return None;
    }
    let map = RunMap { desc, cfg };
    match load_graph(a, &cfg) {
        Ok(g) => Some(Shared::new(a, map, g)),
        Err(detail) => {
            let s = Shared::failed(map);
            s.fail(
                a,
                Fault {
                    code: ErrorCode::Device(DeviceFault::BadImage),
                    site: Site::Boot,
                    task: None,
                    core: None,
                    detail,
                },
            );
            Some(s)
        }
    }
}

fn read_vec<T: FromBytes + IntoBytes + Clone, A: GmMemory>(a: &A, at: GmAddr, n: usize, zero: T) -> Vec<T> {
    let mut v = alloc::vec![zero; n];
    a.read(at, v.as_mut_bytes());
    v
}

/// Copy the image's control part into AICPU memory and validate it. The error is a detail
/// word naming the check that failed.
fn load_graph<A: AicpuAgent>(a: &A, cfg: &LaunchConfig) -> Result<Graph, u64> {
    let img = GmAddr(cfg.image);
    if !crate::breakage::broken(crate::breakage::SKIP_HOST_INVALIDATE | crate::breakage::INVALIDATE_AT_END) {
        crate::observe_host::<A>(a, img, cfg.image_len);
    }
    let mut h = ImageHeader::default();
    if cfg.image_len < core::mem::size_of::<ImageHeader>() as u64 {
        return Err(1);
    }
    a.read(img, h.as_mut_bytes());
    if h.magic != IMAGE_MAGIC
        || h.version != LAYOUT_VERSION
        || h.total_len != cfg.image_len
        || h.task_count != cfg.task_count
    {
        return Err(2);
    }
    let n = h.task_count as usize;
    let within = |off: u64, len: u64| off.checked_add(len).is_some_and(|e| e <= h.total_len);
    if !within(h.tasks_off, n as u64 * 32)
        || !within(h.fanout_off, h.fanout_len * 4)
        || !within(h.funcs_off, h.func_count as u64 * 16)
    {
        return Err(3);
    }
    let tasks: Vec<TaskRecord> = read_vec(a, img.offset(h.tasks_off), n, TaskRecord::default());
    let fanout: Vec<u32> = read_vec(a, img.offset(h.fanout_off), h.fanout_len as usize, 0u32);
    let funcs: Vec<FuncEntry> = read_vec(a, img.offset(h.funcs_off), h.func_count as usize, FuncEntry::default());
    let mut args = Vec::with_capacity(n);
    let mut fanin_total = 0u64;
    for (i, t) in tasks.iter().enumerate() {
        let rec_off = h.tasks_off + i as u64 * 32;
        let args_off = rec_off as i64 + t.args_rel as i64;
        if args_off < 0 || !within(args_off as u64, t.args_len as u64) || t.args_len < 8 {
            return Err(0x100 | ((i as u64) << 16));
        }
        if !lanes_match(t) || t.block_num == 0 || (t.shape == Shape::Dummy as u8 && t.block_num != 1) {
            return Err(0x200 | ((i as u64) << 16));
        }
        if (t.fanout_start as u64 + t.fanout_count as u64) > h.fanout_len {
            return Err(0x300 | ((i as u64) << 16));
        }
        // Every active lane names a func with a binary for the lane's core type.
        for lane in 0..3u8 {
            if t.lanes & (1 << lane) == 0 {
                continue;
            }
            let f = funcs.get(t.funcs[lane as usize] as usize).copied().unwrap_or_default();
            if (if lane == 0 { f.aic } else { f.aiv }) == 0 {
                return Err(0x600 | ((i as u64) << 16) | lane as u64);
            }
        }
        let mut ah = ArgsHeader::default();
        a.read(img.offset(args_off as u64), ah.as_mut_bytes());
        if 8 + ah.tensors as u64 * 64 + ah.scalars as u64 * 8 != t.args_len as u64 {
            return Err(0x400 | ((i as u64) << 16));
        }
        fanin_total += t.fanin as u64;
        args.push(img.0 + args_off as u64);
    }
    if fanin_total != h.fanout_len || fanout.iter().any(|&c| c as usize >= n) {
        return Err(5);
    }
    Ok(Graph { tasks, fanout, funcs, args })
}
