//! The tensormap-and-ringbuffer runtime: orchestration on the device.
//!
//! The highest AICPU thread boots the run and then runs the user's orchestration
//! (`orchestrator`); every other thread schedules (`crate::exec::legacy::run`) from the first
//! submitted task on, so orchestration and execution overlap. Dependencies are discovered by
//! the tensor map; tasks, edges and heap bytes live in `ring`s that are reclaimed as tasks
//! are consumed, so a run of any length needs bounded memory.

pub(crate) mod orchestrator;
pub(crate) mod ring;

/// Loom models of the rings (`ring`) (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;

use crate::sync::{AtomicBool, AtomicU64, Ordering};
use alloc::vec::Vec;

use pto_hal::{AicpuAgent, AicpuLaunch, GmAddr};
use zerocopy::{FromBytes, IntoBytes};

use crate::codes::{DeviceFault, ErrorCode, Site};
use crate::exec::aicpu::cores::ThreadCores;
use crate::exec::aicpu::shared_state;
use crate::exec::aicpu::source::{Base, TaskInfo, TaskSource};
use crate::layout::{
    DESC_MAGIC, FuncEntry, LAYOUT_VERSION, ORCH_MAGIC, OrchImage, OrchTensor, RINGS, TaskDesc, offsets,
};
use crate::lifecycle::{self, Fault, RunMap};
use ring::{Ring, unhandle};

pub use crate::exec::aicpu::shared_state::{STATUS_BAD_DESC, STATUS_NO_BOOT};

/// State shared by the AICPU threads of one run: the rings and the scheduler base.
pub struct Shared {
    base: Base,
    /// The rings.
    pub rings: Vec<Ring>,
    /// Kernel binaries by func id.
    pub funcs: Vec<FuncEntry>,
    /// The orchestration image header.
    pub image: OrchImage,
    /// Tensor arguments of the orchestration.
    pub tensors: Vec<OrchTensor>,
    /// Scalar arguments of the orchestration.
    pub scalars: Vec<u64>,
    /// Tasks submitted that complete through the scheduler (not allocation records).
    submitted: AtomicU64,
    /// Set once the orchestration returned and its outer scope ended.
    orch_done: AtomicBool,
}

impl Shared {
    fn slot(&self, h: u32) -> &ring::Slot {
        ring::slot(&self.rings, h)
    }
}

impl TaskSource for Shared {
    fn base(&self) -> &Base {
        &self.base
    }

    fn info(&self, t: u32) -> TaskInfo {
        let s = self.slot(t);
        let d = TaskDesc::unpack(s.desc.load(Ordering::Relaxed));
        let (r, _) = unhandle(t);
        TaskInfo {
            shape: d.shape,
            lanes: d.lanes,
            sync_start: d.sync_start,
            block_num: d.block_num,
            bins: [0, 1, 2].map(|i| s.bins[i].load(Ordering::Relaxed)),
            args: s.args.load(Ordering::Relaxed),
            predicate: s.predicate.load(Ordering::Relaxed),
            report_id: ring::task_id(r, s.local.load(Ordering::Relaxed)),
        }
    }

    fn next_block(&self, t: u32) -> &crate::sync::AtomicU32 {
        &self.slot(t).next_block
    }

    fn subtasks_done(&self, t: u32) -> &crate::sync::AtomicU32 {
        &self.slot(t).subtasks_done
    }

    fn finish<A: AicpuAgent>(&self, _a: &A, t: u32, ready: &mut Vec<u32>) {
        ring::complete(&self.rings, t, ready);
    }

    fn total(&self) -> Option<u64> {
        self.orch_done.load(Ordering::Acquire).then(|| self.submitted.load(Ordering::Acquire))
    }
}

/// The AICPU program entry point of the device-side runtime: the highest thread boots and
/// orchestrates, the others schedule.
pub fn aicpu_entry<A: AicpuAgent>(a: &A, launch: AicpuLaunch<'_>) -> i32 {
    let orch_thread = launch.thread_count.saturating_sub(1);
    // A launch over the platform's bound is refused here: no orchestration, no scheduler, the
    // cores cancelled.
    let shared = match shared_state::join(a, &launch, orch_thread, || boot(a, launch.args, launch.thread_count)) {
        Ok(s) => s,
        Err(status) => return status,
    };
    if launch.thread_idx == orch_thread {
        let mut trace = crate::trace::TraceRing::open(&shared.base().map.cfg, false, orch_thread);
        let started = if trace.is_some() { a.now_ticks() } else { 0 };
        orchestrator::run(a, &shared, trace.as_mut());
        if let Some(t) = &mut trace {
            t.phase(a, crate::layout::trace_kind::ORCHESTRATION, started, a.now_ticks());
            t.close(a);
        }
        // The orchestrator dispatches nothing, so its dump lane stays empty: close it, so the
        // host can trust the run's accounting.
        if let Some(mut d) = crate::dump::Dumper::open(a, &shared.base().map.cfg, orch_thread) {
            d.close();
        }
        a.fetch_add(shared.base().map.desc.offset(offsets::RUN_THREADS_DONE), 1);
    } else {
        let mut cores = ThreadCores::new(a, shared.base(), launch.thread_idx, orch_thread.max(1));
        cores.handshake();
        let dispatched = crate::exec::legacy::run(a, &*shared, &mut cores);
        let released = cores.retire();
        cores.publish_counters(released, dispatched);
    }
    shared.depart(a);
    0
}

/// Read and validate the descriptor and the orchestration image; `None` only when the
/// descriptor is unusable.
fn boot<A: AicpuAgent>(a: &A, desc: GmAddr, threads: u32) -> Option<Shared> {
    let cfg = lifecycle::read_config(a, desc);
    if cfg.magic != DESC_MAGIC
        || cfg.version != LAYOUT_VERSION
        || cfg.workers != cfg.clusters * 3
        || cfg.clusters == 0
        || cfg.executor != crate::layout::executor_mode::LEGACY_GRAPH
    {
        return None;
    }
    let map = RunMap { desc, cfg };
    if lifecycle::over_bound(a, &map) {
        // Refused: an empty state, so every thread learns it and leaves (`lifecycle::refuse`).
        let mut base = Base::new(a, map, [1; crate::layout::Shape::QUEUED]);
        base.refused = true;
        base.stop.store(true, Ordering::Release);
        return Some(Shared {
            base,
            rings: Vec::new(),
            funcs: Vec::new(),
            image: OrchImage::default(),
            tensors: Vec::new(),
            scalars: Vec::new(),
            submitted: AtomicU64::new(0),
            orch_done: AtomicBool::new(true),
        });
    }
    let (image, funcs, tensors, scalars, detail) = match load_image(a, &cfg) {
        Ok((i, f, t, s)) => (i, f, t, s, None),
        Err(d) => (OrchImage::default(), Vec::new(), Vec::new(), Vec::new(), Some(d)),
    };
    let detail = detail.or((threads < 2).then_some(0x900));
    let window_total: usize = image.rings.iter().map(|r| r.window as usize).sum();
    let q = window_total.max(1) + 1;
    let s = Shared {
        base: Base::new(a, map, [q; crate::layout::Shape::QUEUED]),
        rings: if detail.is_none() {
            image.rings.iter().map(|r| Ring::new(r.window, r.dep_pool)).collect()
        } else {
            Vec::new()
        },
        funcs,
        image,
        tensors,
        scalars,
        submitted: AtomicU64::new(0),
        orch_done: AtomicBool::new(detail.is_some()),
    };
    if let Some(detail) = detail {
        s.base.fail(
            a,
            Fault { code: ErrorCode::Device(DeviceFault::BadImage), site: Site::Boot, task: None, core: None, detail },
        );
    }
    Some(s)
}

type Loaded = (OrchImage, Vec<FuncEntry>, Vec<OrchTensor>, Vec<u64>);

fn load_image<A: AicpuAgent>(a: &A, cfg: &crate::layout::LaunchConfig) -> Result<Loaded, u64> {
    let img = GmAddr(cfg.image);
    crate::observe_host::<A>(a, img, cfg.image_len);
    let head = core::mem::size_of::<OrchImage>() as u64;
    if cfg.image_len < head {
        return Err(1);
    }
    let mut h = OrchImage::default();
    a.read(img, h.as_mut_bytes());
    if h.magic != ORCH_MAGIC || h.version != LAYOUT_VERSION || h.total_len != cfg.image_len {
        return Err(2);
    }
    if h.flags & !crate::layout::orch_flags::AIV_ONLY != 0 {
        return Err(5);
    }
    let need = head + h.func_count as u64 * 16 + h.tensor_count as u64 * 80 + h.scalar_count as u64 * 8;
    if need != h.total_len {
        return Err(3);
    }
    for r in &h.rings {
        let window_ok = r.window.is_power_of_two() && r.window <= 1 << ring::HANDLE_SLOT_BITS;
        let pool_ok = r.dep_pool != 0 && r.dep_pool < 1 << ring::HANDLE_SLOT_BITS;
        let budget_ok = ring::aicpu_bytes(r.window, r.dep_pool) <= ring::AICPU_RING_BUDGET;
        if !window_ok || !pool_ok || !budget_ok || r.heap % 64 != 0 || r.heap_base % 64 != 0 {
            return Err(4);
        }
    }
    let read_vec = |at: u64, n: usize, each: u64| -> Vec<u8> {
        let mut v = alloc::vec![0u8; n * each as usize];
        a.read(img.offset(at), &mut v);
        v
    };
    let mut at = head;
    let fb = read_vec(at, h.func_count as usize, 16);
    at += fb.len() as u64;
    let tb = read_vec(at, h.tensor_count as usize, 80);
    at += tb.len() as u64;
    let sb = read_vec(at, h.scalar_count as usize, 8);
    let funcs = fb.chunks_exact(16).map(|c| FuncEntry::read_from_bytes(c).unwrap_or_default()).collect();
    let tensors = tb.chunks_exact(80).map(|c| OrchTensor::read_from_bytes(c).unwrap_or_default()).collect();
    let scalars = sb.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
    Ok((h, funcs, tensors, scalars))
}

const _: () = assert!(RINGS == 4);
