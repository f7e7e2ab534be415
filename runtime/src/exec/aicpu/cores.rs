//! One AICPU thread's share of a launch's cores, whatever the executor: the cores it owns
//! (cluster by cluster, `cluster % threads == thread`, never split, so one thread alone writes
//! a core's registers), the handshake that opens their windows, their retirement through the
//! teardown gates, and the thread's counters, trace ring and dump lane.

use alloc::boxed::Box;

use pto_hal::{AicpuAgent, CoreType};

use super::source::Base;
use crate::codes::{DeviceFault, ErrorCode, SchedError, Site};
use crate::dump::Dumper;
use crate::fixed::PerCore;
use crate::layout::{offsets, trace_kind};
use crate::lifecycle::{self, Fault};
use crate::sync::Ordering;
use crate::trace::TraceRing;

/// One owned core: which worker it is, its physical id once it reported, and whether its
/// window is open.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Seat {
    /// The worker index (`block_idx` of the AICore launch).
    pub w: u32,
    /// Its physical core id, from its handshake report.
    pub phys: u32,
    /// AIC or AIV.
    pub ty: CoreType,
    /// It reported, its report was valid, and its window is open.
    pub up: bool,
}

/// An empty table entry: a core not handshaken.
impl Default for Seat {
    fn default() -> Self {
        Seat { w: 0, phys: 0, ty: CoreType::Aic, up: false }
    }
}

/// The cores one AICPU thread owns, from its handshake to its retirement, with the thread's
/// trace ring and dump lane.
pub struct ThreadCores<'s, A: AicpuAgent> {
    a: &'s A,
    b: &'s Base,
    /// The owned cores, cluster by cluster (AIC, AIV0, AIV1). Sized by the platform's bound
    /// (`A::MaxClusters`), on the heap: boot refused a launch of more clusters than the bound.
    seats: Box<PerCore<Seat, A::MaxClusters>>,
    /// The seats whose windows opened, in the order they opened.
    opened: Box<PerCore<usize, A::MaxClusters>>,
    /// This thread's trace ring, when the run traces.
    pub trace: Option<TraceRing>,
    /// This thread's args-dump lane, when the run dumps (taken by a caller that serves it
    /// itself: [`ThreadCores::take_dump`]).
    pub dump: Option<Dumper<'s, A>>,
}

impl<'s, A: AicpuAgent> ThreadCores<'s, A> {
    /// The cores of thread `t` of `threads` in the run of `b`, none handshaken yet, with the
    /// thread's trace ring and dump lane opened.
    pub fn new(a: &'s A, b: &'s Base, t: u32, threads: u32) -> Self {
        let clusters = b.map.cfg.clusters;
        let mut seats = Box::new(PerCore::<Seat, A::MaxClusters>::new());
        // Boot refused a launch of more clusters than the bound, so every owned cluster fits;
        // were one not to, its cores would be left out, never indexed past the table.
        let mut c = t;
        'clusters: while c < clusters {
            for (w, ty) in
                [(c, CoreType::Aic), (clusters + 2 * c, CoreType::Aiv), (clusters + 2 * c + 1, CoreType::Aiv)]
            {
                if seats.push(Seat { w, phys: 0, ty, up: false }).is_err() {
                    break 'clusters;
                }
            }
            c += threads.max(1);
        }
        ThreadCores {
            a,
            b,
            seats,
            opened: Box::new(PerCore::new()),
            trace: TraceRing::open(&b.map.cfg, false, t),
            dump: Dumper::open(a, &b.map.cfg, t),
        }
    }

    /// The owned cores, in table order.
    pub fn seats(&self) -> &[Seat] {
        &self.seats[..]
    }

    /// The indices (into [`seats`](Self::seats)) of the cores whose windows opened, in the
    /// order they opened.
    pub fn opened(&self) -> &[usize] {
        &self.opened[..]
    }

    /// Handshake every owned core: sweep the reports as they arrive, validate each, open its
    /// window. Bounded by the watchdog; a core that never reports is a scheduler timeout, one
    /// whose report is wrong BAD_REPORT (its window is cancelled, never opened).
    pub fn handshake(&mut self) {
        let (a, s) = (self.a, self.b);
        let map = &s.map;
        let started = a.now_ticks();
        let deadline = started.saturating_add(map.cfg.watchdog_ticks);
        let mut waiting = PerCore::<usize, A::MaxClusters>::new();
        for i in 0..self.seats.len() {
            // As many places as the table has cores.
            let _ = waiting.push(i);
        }
        let mut backoff = crate::backoff::Backoff::new();
        loop {
            let before = waiting.len();
            waiting.retain(|&i| {
                let w = self.seats[i].w;
                let Some(hs) = lifecycle::poll_report(a, map, w) else {
                    return true;
                };
                match lifecycle::check_report(&hs, w, &map.cfg) {
                    Ok(()) => {
                        let c = &mut self.seats[i];
                        c.phys = hs.physical_core_id;
                        c.up = true;
                        lifecycle::open_window(a, c.phys);
                        // As many places as the table has cores, and each opens once.
                        let _ = self.opened.push(i);
                    }
                    Err(detail) => {
                        let f = Fault {
                            code: ErrorCode::Device(DeviceFault::BadReport),
                            site: Site::Handshake,
                            task: None,
                            core: Some(w),
                            detail,
                        };
                        s.fail(a, f);
                        // Never opened: it must not wait out its budget for a window.
                        lifecycle::cancel_window(a, map, w);
                    }
                }
                false
            });
            if waiting.is_empty() {
                break;
            }
            if waiting.len() == before {
                if s.stop.load(Ordering::Acquire) {
                    break;
                }
                if a.now_ticks() >= deadline {
                    let f = Fault {
                        code: ErrorCode::Sched(SchedError::SchedulerTimeout),
                        site: Site::Handshake,
                        task: None,
                        core: Some(self.seats[waiting[0]].w),
                        detail: waiting.len() as u64,
                    };
                    s.fail(a, f);
                    break;
                }
                backoff.idle(a, deadline);
            } else {
                backoff.reset();
            }
        }
        // Cores never opened (the run stopped first, or they never reported): cancel them so
        // none waits out its budget for a window that will not open.
        for &i in &waiting {
            lifecycle::cancel_window(a, map, self.seats[i].w);
        }
        if let Some(t) = &mut self.trace {
            t.phase(a, trace_kind::HANDSHAKE, started, a.now_ticks());
        }
    }

    /// Retire every core that handshook; returns how many were released. A core that does
    /// not acknowledge EXIT in time is EXIT_TIMEOUT (and abandoned, not released).
    pub fn retire(&mut self) -> u32 {
        let a = self.a;
        let started = if self.trace.is_some() { a.now_ticks() } else { 0 };
        let mut ups = PerCore::<(u32, u32), A::MaxClusters>::new();
        let mut exited = PerCore::<bool, A::MaxClusters>::new();
        for c in self.seats.iter().filter(|c| c.up) {
            // As many places as the table has cores.
            let _ = ups.push((c.w, c.phys));
            let _ = exited.push(false);
        }
        let r = lifecycle::retire_group(a, &self.b.map, &ups, &mut exited);
        if let Some(w) = r.silent {
            let f = Fault {
                code: ErrorCode::Device(DeviceFault::ExitTimeout),
                site: Site::Exit,
                task: None,
                core: Some(w),
                detail: 0,
            };
            self.b.fail(a, f);
        }
        if let Some(t) = &mut self.trace {
            t.phase(a, trace_kind::RETIRE, started, a.now_ticks());
        }
        r.released
    }

    /// Take this thread's dump lane, for a caller that serves it itself (the resident route's
    /// capture service); the thread then no longer closes it.
    pub fn take_dump(&mut self) -> Option<Dumper<'s, A>> {
        self.dump.take()
    }

    /// Publish this thread's counters to the run line — `dispatched` subtasks, its cores
    /// handshaken and `released` — and close its trace ring and its dump lane.
    pub fn publish_counters(&mut self, released: u32, dispatched: u64) {
        let a = self.a;
        if let Some(t) = &self.trace {
            t.close(a);
        }
        if let Some(d) = &mut self.dump {
            d.close();
        }
        let d = self.b.map.desc;
        a.fetch_add(d.offset(offsets::RUN_DISPATCHED), dispatched);
        a.fetch_add(d.offset(offsets::RUN_CORES_READY), self.seats.iter().filter(|c| c.up).count() as u64);
        a.fetch_add(d.offset(offsets::RUN_CORES_RELEASED), released as u64);
        a.fetch_add(d.offset(offsets::RUN_THREADS_DONE), 1);
    }
}
