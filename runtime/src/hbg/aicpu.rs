//! The AICPU program of the host-built-graph runtime.
//!
//! Thread 0 boots: it reads the launch descriptor and the graph image (invalidating first on
//! host-non-coherent builds, before the **first** read of every run — including a pipeline
//! slot's first run), validates them, builds the shared scheduler state and publishes it in
//! the launch's scratch cell. Every thread then handshakes the cores of its clusters,
//! schedules until the graph completes or a fault stops the run, and retires its cores. The
//! last thread out frees the shared state.

use crate::sync::{AtomicU32, Ordering};
use alloc::vec::Vec;

use pto_hal::{AicpuAgent, AicpuLaunch, GmAddr, GmMemory};

use crate::codes::{DeviceFault, ErrorCode, Site};
use crate::layout::{
    DESC_MAGIC, FuncEntry, ImageError, ImageSource, ImageView, LAYOUT_VERSION, LaunchConfig, Shape, TaskRecord,
    args_flags, executor_mode, offsets,
};

use crate::exec::aicpu::cores::ThreadCores;
use crate::exec::aicpu::shared_state;
use crate::exec::aicpu::source::{Base, Completions, TaskInfo, TaskSource};
use crate::lifecycle::{self, Fault, RunMap};

pub use crate::exec::aicpu::shared_state::{STATUS_BAD_DESC, STATUS_NO_BOOT};

/// The AICPU program entry point of the host-built-graph runtime.
pub fn aicpu_entry<A: AicpuAgent>(a: &A, launch: AicpuLaunch<'_>) -> i32 {
    // A launch over the platform's bound is refused here: no scheduler, the cores cancelled.
    let shared = match shared_state::join(a, &launch, 0, || boot(a, launch.args)) {
        Ok(s) => s,
        Err(status) => return status,
    };

    let mut cores = ThreadCores::new(a, shared.base(), launch.thread_idx, launch.thread_count);
    cores.handshake();
    let dispatched = if shared.resident {
        // The cores schedule themselves: this thread only watches the run to its end.
        crate::exec::resident::run(
            a,
            shared.base(),
            &shared.g.args,
            &mut cores,
            launch.thread_idx,
            launch.thread_count,
        );
        0
    } else {
        crate::exec::legacy::run(a, &*shared, &mut cores)
    };
    let released = cores.retire();
    cores.publish_counters(released, dispatched);
    drop(cores);

    // Broken (INVALIDATE_AT_END): the reference's placement of the invalidate.
    #[cfg(feature = "breakage")]
    invalidate_at_end(a, launch.args);
    shared.depart(a);
    0
}

/// The graph as the AICPU holds it: task records, fan-out lists, func table, args records.
pub struct Graph {
    /// Task records.
    pub tasks: Vec<TaskRecord>,
    /// Fan-out ids.
    pub fanout: Vec<u32>,
    /// Func table.
    pub funcs: Vec<FuncEntry>,
    /// GM address of each task's args record.
    pub args: Vec<u64>,
    /// Predicate address (0 = none) and sync-start flag of each task.
    pub extra: Vec<(u64, bool)>,
}

/// The host-built graph as a scheduler task source: a task's handle is its index.
pub struct Shared {
    base: Base,
    /// The graph.
    pub g: Graph,
    fanin_left: Vec<AtomicU32>,
    next_block: Vec<AtomicU32>,
    subtasks_done: Vec<AtomicU32>,
    /// The run is on the resident executor: the cores schedule, the AICPU supervises.
    pub resident: bool,
}

impl Shared {
    /// Shared state for `g`, with every producer-free task queued or completed inline — or,
    /// on the resident executor (`map.cfg.resident` set), nothing queued: the cores take the
    /// ready tasks from the lists the host seeded.
    pub fn new<A: AicpuAgent>(a: &A, map: RunMap, g: Graph) -> Shared {
        let n = g.tasks.len();
        let mut per_shape = [1usize; Shape::QUEUED];
        for t in &g.tasks {
            if (t.shape as usize) < Shape::QUEUED {
                per_shape[t.shape as usize] += 1;
            }
        }
        let s = Shared {
            base: Base::new(a, map, per_shape),
            fanin_left: g.tasks.iter().map(|t| AtomicU32::new(t.fanin)).collect(),
            next_block: (0..n).map(|_| AtomicU32::new(0)).collect(),
            subtasks_done: (0..n).map(|_| AtomicU32::new(0)).collect(),
            g,
            resident: map.cfg.resident != 0,
        };
        if s.resident {
            return s;
        }
        let mut c = Completions::new();
        for (i, t) in s.g.tasks.iter().enumerate() {
            if t.fanin == 0 {
                c.became_ready(a, &s, i as u32, Site::Boot);
            }
        }
        s
    }

    /// An empty state for a launch whose image failed validation: threads still handshake
    /// and retire their cores.
    pub fn failed<A: AicpuAgent>(a: &A, map: RunMap) -> Shared {
        let s = Shared {
            base: Base::new(a, map, [1; Shape::QUEUED]),
            g: Graph { tasks: Vec::new(), fanout: Vec::new(), funcs: Vec::new(), args: Vec::new(), extra: Vec::new() },
            fanin_left: Vec::new(),
            next_block: Vec::new(),
            subtasks_done: Vec::new(),
            resident: false,
        };
        s.base.stop.store(true, Ordering::Release);
        s
    }
}

impl TaskSource for Shared {
    fn base(&self) -> &Base {
        &self.base
    }
    fn info(&self, t: u32) -> TaskInfo {
        let rec = &self.g.tasks[t as usize];
        let mut bins = [0u64; 3];
        for (lane, bin) in bins.iter_mut().enumerate() {
            if rec.lanes & (1 << lane) != 0 {
                // Validated at boot: every active lane has a binary for its core type.
                let f = self.g.funcs.get(rec.funcs[lane] as usize).copied().unwrap_or_default();
                *bin = if lane == 0 { f.aic } else { f.aiv };
            }
        }
        let (predicate, sync_start) = self.g.extra[t as usize];
        TaskInfo {
            shape: Shape::try_from(rec.shape).unwrap_or(Shape::Dummy),
            lanes: rec.lanes,
            bins,
            block_num: rec.block_num,
            args: self.g.args[t as usize],
            report_id: t,
            predicate,
            sync_start,
        }
    }
    fn next_block(&self, t: u32) -> &AtomicU32 {
        &self.next_block[t as usize]
    }
    fn subtasks_done(&self, t: u32) -> &AtomicU32 {
        &self.subtasks_done[t as usize]
    }
    fn finish<A: AicpuAgent>(&self, _a: &A, t: u32, ready: &mut Vec<u32>) {
        let rec = &self.g.tasks[t as usize];
        let fo = &self.g.fanout[rec.fanout_start as usize..(rec.fanout_start + rec.fanout_count) as usize];
        for &c in fo {
            if self.fanin_left[c as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                ready.push(c);
            }
        }
    }
    fn total(&self) -> Option<u64> {
        Some(self.g.tasks.len() as u64)
    }
}

/// Read and validate descriptor and image; `None` only when the descriptor is unusable.
fn boot<A: AicpuAgent>(a: &A, desc: GmAddr) -> Option<Shared> {
    let cfg = lifecycle::read_config(a, desc);
    if cfg.magic != DESC_MAGIC || cfg.version != LAYOUT_VERSION || cfg.workers != cfg.clusters * 3 || cfg.clusters == 0
    {
        return None;
    }
    let mode_ok = match cfg.executor {
        executor_mode::RESIDENT_PENDING => cfg.resident != 0 && cfg.resident.is_multiple_of(64),
        executor_mode::LEGACY_GRAPH | executor_mode::LEGACY_UNSUPPORTED_SHAPE => cfg.resident == 0,
        _ => false,
    };
    if !mode_ok {
        return None;
    }
    let map = RunMap { desc, cfg };
    if lifecycle::over_bound(a, &map) {
        let mut s = Shared::failed(a, map);
        s.base.refused = true;
        return Some(s);
    }
    match load_graph(a, &cfg).and_then(|g| check_resident(&cfg, g)) {
        Ok(g) => {
            let s = Shared::new(a, map, g);
            if s.resident {
                // The image is valid and the resident executor can run it: the cores may go.
                a.store_direct(desc.offset(offsets::RUN_RESIDENT_READY), crate::layout::resident_ready_word(cfg.epoch));
            }
            Some(s)
        }
        Err(detail) => {
            let s = Shared::failed(a, map);
            s.base().fail(
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

/// On the resident executor, every task must be one the cores can run without the AICPU (no
/// sync-start task, at most [`RESIDENT_MAX_ENTRIES`](crate::layout::RESIDENT_MAX_ENTRIES)
/// blocks in all) and the scheduler state must hold exactly one inbox entry per block; the error is
/// a detail word as [`load_graph`]'s.
fn check_resident(cfg: &LaunchConfig, g: Graph) -> Result<Graph, u64> {
    if cfg.executor != executor_mode::RESIDENT_PENDING {
        return Ok(g);
    }
    let mut entries = 0u64;
    for (i, t) in g.tasks.iter().enumerate() {
        if t.block_num == 0 || t.block_num > crate::layout::RESIDENT_MAX_BLOCKS || g.extra[i].1 {
            return Err(0x800 | ((i as u64) << 16));
        }
        entries += t.block_num as u64;
    }
    if entries != cfg.resident_entries as u64 || entries > crate::layout::RESIDENT_MAX_ENTRIES as u64 {
        return Err(0x900);
    }
    Ok(g)
}

/// Make the host's write of the graph image (`len` bytes at `img`) visible before its first
/// read of the run.
fn observe_image<A: AicpuAgent>(a: &A, img: GmAddr, len: u64) {
    // Broken: the image is read as the AICPU's cache has it (SKIP_HOST_INVALIDATE), or
    // invalidated only at the end of the run, for the next (INVALIDATE_AT_END).
    crate::seam!(SKIP_HOST_INVALIDATE);
    crate::seam!(INVALIDATE_AT_END);
    crate::observe_host::<A>(a, img, len);
}

/// `INVALIDATE_AT_END`'s other half: the reference invalidates the descriptor at the end of a
/// run, for the next one, instead of before its first read — a slot's first run is uncovered.
#[cfg(feature = "breakage")]
fn invalidate_at_end<A: AicpuAgent>(a: &A, desc: GmAddr) {
    if crate::breakage::broken(crate::breakage::INVALIDATE_AT_END) {
        crate::observe_host::<A>(a, desc, core::mem::size_of::<crate::layout::LaunchConfig>() as u64);
    }
}

/// The graph image in GM, as the AICPU reads it: plain reads, after the booting thread made
/// the host's write visible (`observe_host`).
struct GmImage<'a, A> {
    a: &'a A,
    base: GmAddr,
}

impl<A: GmMemory> ImageSource for GmImage<'_, A> {
    fn read_at(&self, off: u64, buf: &mut [u8]) {
        self.a.read(self.base.offset(off), buf);
    }
}

/// Copy the image's control part into AICPU memory and validate it ([`ImageView`]). The
/// error is the detail word naming the check that failed ([`ImageError::detail`]).
fn load_graph<A: AicpuAgent>(a: &A, cfg: &LaunchConfig) -> Result<Graph, u64> {
    let img = GmAddr(cfg.image);
    observe_image(a, img, cfg.image_len);
    let src = GmImage { a, base: img };
    let view = ImageView::open(&src, cfg.image_len).map_err(|e| e.detail())?;
    if view.task_count() != cfg.task_count {
        return Err(ImageError::Header.detail());
    }
    let c = view.validate().map_err(|e| e.detail())?;
    let args = c.args.iter().map(|(off, _)| img.0 + off).collect();
    let extra = c.args.iter().map(|(_, h)| (h.predicate, h.flags & args_flags::SYNC_START != 0)).collect();
    Ok(Graph { tasks: c.tasks, fanout: c.fanout, funcs: c.funcs, args, extra })
}

#[cfg(all(test, not(loom)))]
mod tests {
    extern crate std;

    use pto_hal::{AicpuAgent, GmAtomic};
    use zerocopy::{FromZeros, IntoBytes};

    use super::*;
    use crate::codes::ErrorCode;
    use crate::layout::{LaunchDesc, RUNTIME_HBG, RUNTIME_TRB, executor_mode};
    use crate::test_words::WordsAicpu;

    /// Run AICPU program `entry` on two threads over a descriptor naming `clusters` clusters;
    /// the agent's bound is two.
    fn launch(entry: fn(&WordsAicpu, AicpuLaunch<'_>) -> i32, runtime: u32, clusters: u32) -> (WordsAicpu, [i32; 2]) {
        let a = WordsAicpu::default();
        let desc = GmAddr(0x1_0000);
        let cfg = LaunchConfig {
            magic: DESC_MAGIC,
            version: LAYOUT_VERSION,
            epoch: 7,
            clusters,
            workers: 3 * clusters,
            aicpu_threads: 2,
            physical_cores: 3 * clusters,
            runtime,
            handshakes: 0x2_0000,
            gates: 0x3_0000,
            payloads: 0x4_0000,
            watchdog_ticks: 1 << 40,
            exit_ticks: 1 << 40,
            core_wait_ticks: 1 << 40,
            executor: executor_mode::LEGACY_GRAPH,
            ..LaunchConfig::default()
        };
        a.write(desc, cfg.as_bytes());
        #[allow(clippy::disallowed_types, reason = "the HAL's scratch cell")]
        let scratch = core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
        let status = std::thread::scope(|s| {
            let run = |t| {
                let (a, scratch) = (&a, &scratch);
                s.spawn(move || entry(a, AicpuLaunch { thread_idx: t, thread_count: 2, args: desc, scratch }))
            };
            let (t0, t1) = (run(0), run(1));
            [t0.join().unwrap(), t1.join().unwrap()]
        });
        assert!(scratch.into_inner().is_null(), "the launch left its scratch cell ready for the next");
        (a, status)
    }

    /// A descriptor naming more clusters than the agent's bound is refused on both runtimes:
    /// `TOPOLOGY_BOUND` latched at boot with the clusters and the bound, every core's window
    /// cancelled (none waits out its budget), both threads counted, and the descriptor status.
    #[test]
    fn a_launch_over_the_bound_is_refused_by_name() {
        assert_eq!(WordsAicpu::MAX_CLUSTERS, 2);
        for (entry, runtime) in [
            (aicpu_entry::<WordsAicpu> as fn(&WordsAicpu, AicpuLaunch<'_>) -> i32, RUNTIME_HBG),
            (crate::trb::aicpu_entry::<WordsAicpu>, RUNTIME_TRB),
        ] {
            let (a, status) = launch(entry, runtime, 3);
            assert_eq!(status, [STATUS_BAD_DESC; 2], "runtime {runtime}");
            let mut d = LaunchDesc::new_zeroed();
            a.read(GmAddr(0x1_0000), d.as_mut_bytes());
            let f = lifecycle::decode_latch(&d).expect("a latched fault").fault.expect("a known code");
            assert_eq!(f.code, ErrorCode::Device(DeviceFault::TopologyBound));
            assert_eq!(f.code.name(), "TOPOLOGY_BOUND");
            assert_eq!((f.site, f.task, f.core), (Site::Boot, None, None));
            assert_eq!(f.detail, (3 << 32) | 2, "clusters launched, then the bound");
            let map = RunMap { desc: GmAddr(0x1_0000), cfg: d.config };
            for w in 0..9 {
                assert_eq!(a.query(map.gate(w)), lifecycle::cancel_value(7), "worker {w}'s window cancelled");
            }
            assert_eq!(d.run.threads_done, 2);
            assert_eq!(d.run.cores_ready, 0);
        }
    }
}
