//! The lifecycle of a run on the device: the fatal latch, the handshake and its window, and
//! retirement through the teardown gates.
//!
//! Order of a worker's life (each arrow a publication edge, see `docs/cache-contract.md`):
//!
//! 1. AICore reports: writes its [`Handshake`] line (type, physical id, `block_idx + 1`, this
//!    run's epoch), writes the line back, and sends an event.
//! 2. AICPU accepts the report (epoch must match), validates it and **opens the window**:
//!    DMB = `DMB_IDLE`. The open is the acknowledgement; nothing else is written to the core.
//! 3. Dispatch loop (see `sched` and `exec`).
//! 4. AICPU retires its cores as a group: EXIT to every core, then one shared deadline for the
//!    EXITED acknowledgements, then close + read-back of each acknowledged window, one `rmb`,
//!    and only then RELEASE through the core's teardown gate (the gate word := this run's
//!    epoch). A core that did not acknowledge in time is abandoned instead (gate := the cancel
//!    value), after the AICPU's last access to its registers. A core returns only after it
//!    reads its release or its abandonment, so the next program on its stream can never start
//!    while this run's AICPU still owns it; a core whose gate wait outlasts its budget latches
//!    `RELEASE_TIMEOUT` and keeps waiting (the run ends through its fatal path, never through
//!    a core leaving early).

#[cfg(feature = "breakage")]
mod broken;

use pto_hal::{AicoreAgent, AicoreLaunch, AicpuAgent, AicpuCache, Contract, GmAddr, GmAtomic, GmMemory, Reg, Ticks};
use zerocopy::IntoBytes;

use crate::codes::{ErrorCode, Site};
use crate::layout::{FAULT_TEXT_BYTES, Handshake, LaunchConfig, LaunchDesc, SlotArena, offsets, regs};

/// Where the arrays of a launch live, computed from its configuration.
#[derive(Copy, Clone, Debug)]
pub struct RunMap {
    /// The launch descriptor.
    pub desc: GmAddr,
    /// The configuration it holds.
    pub cfg: LaunchConfig,
}

impl RunMap {
    /// Handshake line of worker `w`.
    #[inline]
    pub fn handshake(&self, w: u32) -> GmAddr {
        GmAddr(self.cfg.handshakes + w as u64 * SlotArena::HANDSHAKE_STRIDE)
    }
    /// Teardown gate line of worker `w`.
    #[inline]
    pub fn gate(&self, w: u32) -> GmAddr {
        GmAddr(self.cfg.gates + w as u64 * SlotArena::GATE_STRIDE)
    }
    /// Payload buffer `buf` (0 or 1) of worker `w`.
    #[inline]
    pub fn payload(&self, w: u32, buf: u32) -> GmAddr {
        GmAddr(
            self.cfg.payloads
                + w as u64 * SlotArena::PAYLOAD_STRIDE
                + (buf & 1) as u64 * (SlotArena::PAYLOAD_STRIDE / 2),
        )
    }
}

/// A latched fault, as reported.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The code.
    pub code: ErrorCode,
    /// Where.
    pub site: Site,
    /// Task id, if one is involved.
    pub task: Option<u32>,
    /// Worker index, if one is involved.
    pub core: Option<u32>,
    /// Site-specific detail.
    pub detail: u64,
}

/// Latch `fault` if no fault was latched before; returns whether this call won.
///
/// The latch line is touched only with `GmAtomic`: the claim is a CAS, the fields are
/// device-direct stores, and `complete` is stored last. The winner may add text, which it
/// also stores device-direct (it is the only writer of the text lines).
pub fn latch<A: GmAtomic + pto_hal::Barriers>(a: &A, desc: GmAddr, fault: Fault, text: &str) -> bool {
    if a.compare_exchange(desc.offset(offsets::FATAL_CLAIMED), 0, 1) != 0 {
        debug!("fault not latched (an earlier one won): code {}", fault.code.value());
        return false;
    }
    error!(
        "fault latched: code {} site {} task {} core {} detail {}",
        fault.code.value(),
        u32::from(fault.site),
        fault.task.map_or(-1, i64::from),
        fault.core.map_or(-1, i64::from),
        fault.detail
    );
    a.store_direct(desc.offset(offsets::FATAL_CODE), fault.code.value() as u32 as u64);
    a.store_direct(desc.offset(offsets::FATAL_SITE), u32::from(fault.site) as u64);
    a.store_direct(desc.offset(offsets::FATAL_TASK), fault.task.map_or(u64::MAX, u64::from));
    a.store_direct(desc.offset(offsets::FATAL_CORE), fault.core.map_or(u64::MAX, u64::from));
    a.store_direct(desc.offset(offsets::FATAL_DETAIL), fault.detail);
    if !text.is_empty() {
        let mut buf = [0u8; FAULT_TEXT_BYTES];
        let mut n = text.len().min(FAULT_TEXT_BYTES - 1);
        while !text.is_char_boundary(n) {
            n -= 1;
        }
        buf[..n].copy_from_slice(&text.as_bytes()[..n]);
        // Device-direct stores: the text lines have one writer (the winner) and never sit in a
        // cache, so the same code is right on both tiers and both contracts. Only the words
        // the text needs are stored (the descriptor upload cleared the rest).
        for (i, w) in buf[..(n + 1).next_multiple_of(8)].chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            a.store_direct(desc.offset(offsets::FAULT_TEXT + i as u64 * 8), u64::from_le_bytes(b));
        }
    }
    a.store_barrier();
    a.store_direct(desc.offset(offsets::FATAL_COMPLETE), 1);
    true
}

/// A fault as the host reads it back from a descriptor ([`decode_latch`]).
#[cfg_attr(not(feature = "std"), allow(dead_code))] // the host reads it
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latched {
    /// The fault, or the raw `(code, site)` words when this build does not know them (a newer
    /// device's fault is never mistaken for another).
    pub fault: Result<Fault, (u64, u64)>,
    /// The text the latch winner left.
    pub message: alloc::string::String,
}

/// The fault [`latch`] recorded in a descriptor read back by the host; `None` when nothing
/// was latched.
#[cfg_attr(not(feature = "std"), allow(dead_code))] // the host reads it
pub fn decode_latch(d: &LaunchDesc) -> Option<Latched> {
    if d.fatal.claimed == 0 {
        return None;
    }
    let code = ErrorCode::from_i32(d.fatal.code as u32 as i32);
    let site = u32::try_from(d.fatal.site).ok().and_then(|s| Site::try_from(s).ok());
    let text = &d.fault_text.bytes;
    let n = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let message = alloc::string::String::from_utf8_lossy(&text[..n]).into_owned();
    let fault = match (code, site) {
        (Some(code), Some(site)) => Ok(Fault {
            code,
            site,
            task: u32::try_from(d.fatal.task).ok(),
            core: u32::try_from(d.fatal.core).ok(),
            detail: d.fatal.detail,
        }),
        _ => Err((d.fatal.code, d.fatal.site)),
    };
    Some(Latched { fault, message })
}

/// Whether any agent latched a fault in this run.
#[inline]
pub fn latched<A: GmAtomic>(a: &A, desc: GmAddr) -> bool {
    a.query(desc.offset(offsets::FATAL_CLAIMED)) != 0
}

/// Make the AICPU's plain stores of `[addr, addr+len)` visible to every other agent — an
/// AICore's cached or device-direct read, the host's D2H copy — by the contract: a clean
/// (`flush_range`, which ends with a full barrier) under `HostNonCoherent` (a2a3, whose AICPU
/// cache may be write-back), an inlined no-op under `HostCoherent` (a5: completed AICPU writes
/// are visible without a clean). Every AICPU plain store another agent reads goes through it
/// (`docs/cache-contract.md`, edges 7, 13 and 14).
#[inline(always)]
pub fn publish_aicpu<A: AicpuCache + ?Sized>(a: &A, addr: GmAddr, len: u64) {
    <A::Contract as Contract>::publish_to_host(a, addr, len)
}

/// Read the launch configuration from a descriptor the host copied in, making host DMA
/// visible first on non-coherent builds.
pub fn read_config<A: GmMemory + pto_hal::AicpuCache>(a: &A, desc: GmAddr) -> LaunchConfig {
    crate::seam!(SKIP_HOST_INVALIDATE => broken::read_config_unobserved(a, desc));
    crate::seam!(INVALIDATE_AT_END => broken::read_config_unobserved(a, desc));
    crate::observe_host::<A>(a, desc, core::mem::size_of::<LaunchConfig>() as u64);
    read_config_as_is(a, desc)
}

/// The launch configuration at `desc`, read as the AICPU's cache has it.
fn read_config_as_is<A: GmMemory>(a: &A, desc: GmAddr) -> LaunchConfig {
    let mut cfg = LaunchConfig::default();
    a.read(desc, cfg.as_mut_bytes());
    cfg
}

/// Same for an AICore: drop any stale copy of the configuration lines, then read.
pub fn read_config_core<A: AicoreAgent>(a: &A, desc: GmAddr) -> LaunchConfig {
    a.observe_lines(desc, core::mem::size_of::<LaunchConfig>() as u64);
    let mut cfg = LaunchConfig::default();
    a.read(desc, cfg.as_mut_bytes());
    cfg
}

/// AICore: publish this core's handshake report for run `epoch`.
///
/// Publication order (house rule 2, `docs/architecture.md` section 9): the fields first, with the marker cleared, published; then
/// the marker (`report_epoch`) alone, published. An AICPU that sees this run's epoch therefore
/// sees this run's fields.
pub fn report<A: AicoreAgent>(a: &A, map: &RunMap, launch: &AicoreLaunch) {
    crate::seam!(SKIP_REPORT_PUBLISH => broken::report_unpublished(a, map, launch));
    let at = map.handshake(launch.block_idx);
    a.write(at, report_of(launch).as_bytes());
    a.publish_line(at);
    // Maintenance completion is not store ordering: the marker is ordered after the fields.
    a.store_store();
    a.write(at.offset(REPORT_EPOCH), &map.cfg.epoch.to_le_bytes());
    a.publish_line(at);
    a.send_event();
}

/// The handshake report of the core `launch` starts, its marker (`report_epoch`) cleared.
fn report_of(launch: &AicoreLaunch) -> Handshake {
    Handshake {
        aicore_done: launch.block_idx + 1,
        core_type: launch.core_type as u32,
        physical_core_id: launch.physical_core_id,
        reserved0: 0,
        report_epoch: 0,
        reserved: [0; 5],
    }
}

/// Offset of the report marker in a handshake line.
const REPORT_EPOCH: u64 = core::mem::offset_of!(Handshake, report_epoch) as u64;

/// Gate value that cancels a core before its window opened: this run's epoch with the top bit
/// set. A core waiting for its window watches its gate and leaves when it reads this.
pub const fn cancel_value(epoch: u64) -> u64 {
    epoch | (1 << 63)
}

/// Why a core left its window wait without a window.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum NoWindow {
    /// The AICPU cancelled this core (the run stopped before its window opened).
    Cancelled,
    /// The budget ran out.
    Timeout,
}

/// AICore: wait for the window to open (DMB non-zero), or for a pre-window cancel through the
/// core's teardown gate, or for the budget to run out.
pub fn wait_window<A: AicoreAgent>(a: &A, map: &RunMap, w: u32, deadline: Ticks) -> Result<u32, NoWindow> {
    let gate = map.gate(w);
    let mut backoff = crate::backoff::Backoff::new();
    loop {
        let v = a.read_dmb();
        if v != 0 {
            a.rmb();
            return Ok(v);
        }
        let g = a.query(gate);
        if g == cancel_value(map.cfg.epoch) {
            return Err(NoWindow::Cancelled);
        }
        if a.now_ticks() >= deadline {
            return Err(NoWindow::Timeout);
        }
        // A DMB write wakes this core as well as a store to its gate.
        backoff.wait_word(a, gate, g, deadline);
    }
}

/// AICPU, at boot: whether launch `map` names more clusters than this platform's AICPU
/// programs hold (`A::MaxClusters`, which sizes their per-core tables). If it does, the launch
/// is refused: `TOPOLOGY_BOUND` is latched (site `Boot`, detail: the clusters launched in the
/// high 32 bits, the bound in the low ones) and every thread then leaves through [`refuse`].
pub fn over_bound<A: AicpuAgent>(a: &A, map: &RunMap) -> bool {
    let clusters = map.cfg.clusters;
    if clusters <= A::MAX_CLUSTERS {
        return false;
    }
    error!("launch: {} clusters named, this platform's programs hold at most {}", clusters, A::MAX_CLUSTERS);
    let f = Fault {
        code: ErrorCode::Device(crate::codes::DeviceFault::TopologyBound),
        site: Site::Boot,
        task: None,
        core: None,
        detail: ((clusters as u64) << 32) | A::MAX_CLUSTERS as u64,
    };
    latch(a, map.desc, f, "");
    true
}

/// AICPU thread `t` of `threads` of a refused launch ([`over_bound`]): cancel the windows of
/// its share of the workers (`t`, `t + threads`, …: together the threads cover every one), so
/// no core waits out its budget for a window that will not open, and count the thread done.
/// No table is involved: a refused launch is exactly one the tables cannot hold.
pub fn refuse<A: AicpuAgent>(a: &A, map: &RunMap, t: u32, threads: u32) {
    for w in (t..map.cfg.workers).step_by(threads.max(1) as usize) {
        cancel_window(a, map, w);
    }
    a.fetch_add(map.desc.offset(offsets::RUN_THREADS_DONE), 1);
}

/// AICPU: cancel a core whose window was never opened, so it leaves its window wait now.
pub fn cancel_window<A: AicpuAgent>(a: &A, map: &RunMap, w: u32) {
    a.store_direct(map.gate(w), cancel_value(map.cfg.epoch));
}

/// How a core's teardown-gate wait ended: both are the AICPU's acknowledgement that it is done
/// with the core's registers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// The gate holds this run's epoch: closed and released.
    Released,
    /// The gate holds the cancel value: the AICPU gave up on the core (it did not acknowledge
    /// EXIT in time) and will not touch it again; it was not closed.
    Abandoned,
}

/// AICore `w`: after EXITED, wait until this run's AICPU released (or abandoned) the core
/// through its gate. The wait has no early exit: when `budget` ticks pass without either, the
/// core latches `RELEASE_TIMEOUT` (site `Gate`, this core) — the run's fatal path — and goes on
/// waiting, because the AICPU may still own its registers. Only the AICPU ends the wait.
pub fn wait_release<A: AicoreAgent>(a: &A, map: &RunMap, w: u32, budget: Ticks) -> Release {
    let gate = map.gate(w);
    let epoch = map.cfg.epoch;
    let mut deadline = a.now_ticks().saturating_add(budget);
    let mut escalated = false;
    let mut backoff = crate::backoff::Backoff::new();
    loop {
        let v = a.query(gate);
        if is_release(v, epoch) {
            a.store_barrier();
            return Release::Released;
        }
        if v == cancel_value(epoch) {
            a.store_barrier();
            warn!("release gate: worker {} abandoned by the AICPU (epoch {})", w, epoch);
            return Release::Abandoned;
        }
        let now = a.now_ticks();
        if now >= deadline {
            if !escalated {
                escalated = true;
                warn!("release gate: worker {} not released within {} ticks", w, budget);
                let f = Fault {
                    code: ErrorCode::Device(crate::codes::DeviceFault::ReleaseTimeout),
                    site: Site::Gate,
                    task: None,
                    core: Some(w),
                    detail: budget,
                };
                latch(a, map.desc, f, "");
            }
            deadline = now.saturating_add(budget.max(1));
        }
        backoff.wait_word(a, gate, v, deadline);
    }
}

/// Whether gate word `v` releases a core of the run of `epoch`: it holds that epoch.
fn is_release(v: u64, epoch: u64) -> bool {
    crate::seam!(GATE_ANY_EPOCH => broken::is_any_release(v, epoch));
    v == epoch
}

/// AICPU: worker `w`'s report of this run, if it has arrived (non-blocking).
pub fn poll_report<A: AicpuAgent>(a: &A, map: &RunMap, w: u32) -> Option<Handshake> {
    crate::seam!(SHARED_HANDSHAKE_LINE => broken::poll_report_sharing_the_line(a, map, w));
    let hs = read_report(a, map, w)?;
    debug!(
        "handshake: worker {} reported type {} phys {} epoch {}",
        w, hs.core_type, hs.physical_core_id, hs.report_epoch
    );
    Some(hs)
}

/// Worker `w`'s handshake line, when it holds this run's complete report.
fn read_report<A: AicpuAgent>(a: &A, map: &RunMap, w: u32) -> Option<Handshake> {
    // AICore → AICPU shares a coherence domain: the core's write-back is visible to plain
    // AICPU loads without an invalidate (it is the producer that must write back).
    // The marker first; only after it names this run (and an `rmb`) the fields it guards.
    let mut marker = [0u8; 8];
    a.read(map.handshake(w).offset(REPORT_EPOCH), &mut marker);
    if u64::from_le_bytes(marker) != map.cfg.epoch {
        return None;
    }
    a.rmb();
    let mut hs = Handshake::default();
    a.read(map.handshake(w), hs.as_mut_bytes());
    (hs.report_epoch == map.cfg.epoch && hs.aicore_done == w + 1).then_some(hs)
}

/// Validate an accepted report against the launch: the reported type must match the
/// worker's slot and the physical id must name a core of the device.
pub fn check_report(hs: &Handshake, w: u32, cfg: &LaunchConfig) -> Result<(), u64> {
    let want = if w < cfg.clusters { 0 } else { 1 };
    if hs.core_type != want {
        return Err(hs.core_type as u64);
    }
    if hs.physical_core_id >= cfg.physical_cores {
        return Err(hs.physical_core_id as u64);
    }
    Ok(())
}

/// AICPU: open a reported core's window (the acknowledgement of its report).
pub fn open_window<A: AicpuAgent>(a: &A, phys: u32) {
    a.wmb();
    a.open_window(phys, regs::DMB_IDLE);
}

/// The worker a latched `KERNEL_HUNG` names (a core running a kernel past the watchdog), if
/// that is the latched fault and it is complete.
pub fn hung_core<A: GmAtomic>(a: &A, map: &RunMap) -> Option<u32> {
    let at = |o| a.query(map.desc.offset(o));
    let hung = crate::codes::ErrorCode::Device(crate::codes::DeviceFault::KernelHung).value() as u32 as u64;
    // Broken: the hung core is waited for like any other.
    crate::seam!(WAIT_FOR_HUNG_CORE => None);
    if at(offsets::FATAL_COMPLETE) == 0 || at(offsets::FATAL_CODE) != hung {
        return None;
    }
    u32::try_from(at(offsets::FATAL_CORE)).ok()
}

/// Outcome of retiring a group of cores.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Retired {
    /// Cores released through their gate.
    pub released: u32,
    /// First core that did not acknowledge EXIT in time (not released), if any.
    pub silent: Option<u32>,
}

/// AICPU: retire `cores` (`(worker, physical id)` pairs that handshook) with one shared
/// deadline: EXIT broadcast, quiesce, close + read-back, one `rmb`, then RELEASE each
/// acknowledged core's gate with `epoch`. A silent core is neither closed nor released; after
/// the `rmb` (its last register access is behind it) its gate gets the cancel value: the AICPU
/// abandons it, so if it ever reaches its gate it leaves instead of waiting forever.
pub fn retire_group<A: AicpuAgent>(a: &A, map: &RunMap, cores: &[(u32, u32)], exited: &mut [bool]) -> Retired {
    let deadline = a.now_ticks().saturating_add(map.cfg.exit_ticks);
    // A core the latch names as stuck in a kernel cannot acknowledge EXIT until its kernel
    // returns: it is not waited for (the run's error then arrives within the watchdog, not
    // the watchdog plus the exit budget); it is abandoned like a silent core.
    let hung = hung_core(a, map);
    a.wmb();
    for &(_, phys) in cores {
        a.write_reg(phys, Reg::Dmb, regs::DMB_EXIT);
    }
    let mut left = cores.iter().filter(|&&(w, _)| Some(w) != hung).count();
    for e in exited.iter_mut() {
        *e = false;
    }
    let mut backoff = crate::backoff::Backoff::new();
    while left > 0 {
        let before = left;
        for (i, &(_, phys)) in cores.iter().enumerate() {
            if !exited[i] && a.read_reg(phys, Reg::Cond) == regs::COND_EXITED {
                exited[i] = true;
                left -= 1;
            }
        }
        if left == 0 || a.now_ticks() >= deadline {
            break;
        }
        if left < before {
            backoff.reset();
        }
        backoff.idle(a, deadline);
    }
    // Fault injection (STALL_RETIRE, STALL_RETIRE_LONG): the thread stalls here, owning cores
    // that acknowledged EXIT.
    #[cfg(feature = "breakage")]
    broken::stall_if_injected(a, map);
    let mut out = Retired::default();
    for (i, &(w, phys)) in cores.iter().enumerate() {
        if exited[i] {
            a.close_window(phys, regs::DMB_IDLE);
        } else if out.silent.is_none() && Some(w) != hung {
            out.silent = Some(w);
        }
    }
    // One rmb drains every read-back: the closes are complete before any release below.
    a.rmb();
    for (i, &(w, _)) in cores.iter().enumerate() {
        if exited[i] {
            release(a, map, w);
            out.released += 1;
        } else {
            a.store_direct(map.gate(w), cancel_value(map.cfg.epoch));
        }
    }
    info!(
        "retire: released {} of {} cores, first silent worker {} (epoch {})",
        out.released,
        cores.len(),
        out.silent.map_or(-1, i64::from),
        map.cfg.epoch
    );
    out
}

/// Release worker `w` through its teardown gate: the gate word := this run's epoch.
fn release<A: AicpuAgent>(a: &A, map: &RunMap, w: u32) {
    crate::seam!(SKIP_RELEASE);
    a.store_direct(map.gate(w), map.cfg.epoch);
}
/// Loom models of the teardown gate (`--cfg loom`; see `crate::loom_support`).
#[cfg(all(test, loom))]
mod loom_tests;
