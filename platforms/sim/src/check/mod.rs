//! The simulator's schedule-independent checks (`PTO_SIM_CHECK=race,init`): racecheck and
//! initcheck of task graphs.
//!
//! While a run goes on, the checker records what its judgement needs and nothing else: each
//! kernel run's element-precise accesses as memory protection sees them (coalesced per
//! argument and direction), the run's tasks in submission order with their producers (from the
//! host for a host-built graph, from the AICPU for the device-side runtime), the memory handed
//! out fresh, and the orchestration's element accesses. When the run's last launch ends, the
//! record is analysed (`analyze.rs`) and a finding fails that launch like a coherence violation
//! does: the host's error carries it as data ([`SimError::Check`](crate::SimError::Check)).
//!
//! The device keeps, across runs, the set of bytes handed out and not yet written (initcheck):
//! a host allocation joins it, a host copy or fill leaves it, and a run's writes leave it when
//! the run is analysed. Memory allocated while initcheck was off is taken as written.

mod analyze;
mod finding;
mod log;

use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use pto_hal::check::{Checks, GraphNotes};
use rangemap::RangeSet;

pub use finding::{CheckReport, Finding, Reader, TaskAccess};
pub(crate) use log::BlockLog;
use log::{Event, RunLog};

/// The key the checks name a loaded kernel by: a Rust body's address, or a native kernel's
/// loader index with the top bit set.
pub(crate) fn kernel_key(k: &pto_hal::Kernel) -> usize {
    match *k {
        pto_hal::Kernel::Rust(f) => f as usize,
        pto_hal::Kernel::Native { id, .. } => (1 << (usize::BITS - 1)) | id as usize,
    }
}

/// The checks of one simulated device.
pub(crate) struct Checker {
    race: AtomicBool,
    init: AtomicBool,
    /// Whether two writers of one line are a hazard (the host-non-coherent contract).
    line_hazard: bool,
    /// Runs being recorded, by launch descriptor address.
    runs: Mutex<HashMap<u64, RunLog>>,
    /// Bytes handed out and not yet written.
    uninit: Mutex<RangeSet<u64>>,
    /// Kernel names by function address.
    names: RwLock<HashMap<usize, String>>,
}

impl Checker {
    pub fn new(checks: Checks, line_hazard: bool) -> Checker {
        Checker {
            race: AtomicBool::new(checks.race),
            init: AtomicBool::new(checks.init),
            line_hazard,
            runs: Mutex::new(HashMap::new()),
            uninit: Mutex::new(RangeSet::new()),
            names: RwLock::new(HashMap::new()),
        }
    }

    /// The checks on now.
    #[inline]
    pub fn checks(&self) -> Checks {
        Checks { race: self.race.load(Ordering::Relaxed), init: self.init.load(Ordering::Relaxed) }
    }

    /// Whether any check is on.
    #[inline]
    pub fn on(&self) -> bool {
        self.checks().any()
    }

    /// Switch the checks (between runs).
    pub fn set(&self, checks: Checks) {
        self.race.store(checks.race, Ordering::Relaxed);
        self.init.store(checks.init, Ordering::Relaxed);
        if !checks.init {
            self.uninit.lock().clear();
        }
    }

    /// A kernel was loaded under `name`.
    pub fn name_kernel(&self, f: usize, name: &str) {
        self.names.write().entry(f).or_insert_with(|| name.to_string());
    }

    fn name_of(&self, f: usize) -> String {
        self.names.read().get(&f).cloned().unwrap_or_else(|| "?".to_string())
    }

    fn with_run(&self, launch: u64, f: impl FnOnce(&mut RunLog)) {
        f(self.runs.lock().entry(launch).or_default());
    }

    /// A launch of the run at `launch` was submitted.
    pub fn launch_submitted(&self, launch: u64) {
        self.with_run(launch, |r| r.pending += 1);
    }

    /// A launch of the run at `launch` ended: when it was the run's last, analyse the run.
    pub fn launch_finished(&self, launch: u64) -> Option<CheckReport> {
        let log = {
            let mut runs = self.runs.lock();
            let r = runs.get_mut(&launch)?;
            r.pending = r.pending.saturating_sub(1);
            if r.pending > 0 {
                return None;
            }
            runs.remove(&launch)?
        };
        let checks = self.checks();
        if !checks.any() {
            return None;
        }
        let mut uninit = self.uninit.lock();
        let names = |f: usize| self.name_of(f);
        let out = analyze::analyse(&log, checks, self.line_hazard, &mut uninit, &names);
        out.first.map(|first| CheckReport { first, findings: out.findings })
    }

    /// The host-built graph of the run at `launch`.
    pub fn note_graph(&self, launch: u64, g: &GraphNotes<'_>) {
        let mut preds: HashMap<u32, Vec<u32>> = HashMap::new();
        for &(p, c) in g.edges {
            preds.entry(c).or_default().push(p);
        }
        self.with_run(launch, |r| {
            for &(addr, len) in g.fresh {
                r.order.push(Event::Fresh { lo: addr.0, hi: addr.0.saturating_add(len) });
            }
            for t in 0..g.tasks {
                let ps = preds.remove(&t).unwrap_or_default();
                r.note_task(t, &mut ps.into_iter());
            }
        });
    }

    /// The device-side runtime submitted `task` after `producers`.
    pub fn note_task(&self, launch: u64, task: u32, producers: &mut dyn Iterator<Item = u32>) {
        self.with_run(launch, |r| r.note_task(task, producers));
    }

    /// The device-side runtime retired `task`.
    pub fn note_retired(&self, launch: u64, task: u32) {
        self.with_run(launch, |r| r.order.push(Event::Retired(task)));
    }

    /// The device-side runtime handed out `[lo, hi)` fresh.
    pub fn note_fresh(&self, launch: u64, lo: u64, hi: u64) {
        self.with_run(launch, |r| r.order.push(Event::Fresh { lo, hi }));
    }

    /// The orchestration read or wrote `[lo, hi)`.
    pub fn note_orchestration(&self, launch: u64, lo: u64, hi: u64, write: bool) {
        self.with_run(launch, |r| r.order.push(Event::Orchestration { lo, hi, write }));
    }

    /// A kernel run (one block of `task`) ended with `block` recorded.
    pub fn kernel_ran(&self, launch: u64, task: u32, kernel: usize, block: BlockLog) {
        self.with_run(launch, |r| r.kernel_ran(task, kernel, block));
    }

    /// The host allocated `[lo, hi)`: unwritten (initcheck on).
    pub fn host_alloc(&self, lo: u64, hi: u64) {
        if self.init.load(Ordering::Relaxed) && lo < hi {
            self.uninit.lock().insert(lo..hi);
        }
    }

    /// The host wrote, filled or freed `[lo, hi)`.
    pub fn host_wrote(&self, lo: u64, hi: u64) {
        if self.init.load(Ordering::Relaxed) && lo < hi {
            self.uninit.lock().remove(lo..hi);
        }
    }

    /// The first byte of `[lo, hi)` nothing wrote since it was handed out (initcheck on).
    pub fn first_unwritten(&self, lo: u64, hi: u64) -> Option<u64> {
        if !self.init.load(Ordering::Relaxed) || lo >= hi {
            return None;
        }
        self.uninit.lock().overlapping(lo..hi).next().map(|g| g.start.max(lo))
    }
}
