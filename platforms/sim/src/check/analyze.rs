//! The analysis of one ended run: every task's recorded accesses, taken in submission order
//! (a linearisation of the dependency graph: a task can depend only on tasks submitted before
//! it), against shadow state of the memory they touched.
//!
//! - Data races: per byte range, the last writer and the readers since; an access conflicts
//!   with a recorded one of another task when one of them writes and no dependency path leads
//!   from the recorded task to this one. This finds at least one racing pair on every range
//!   with a race, whatever order the tasks ran in: the result depends on the graph and the
//!   accesses, not on the schedule.
//! - Line races: per 64-byte line, the last writer; a write by another task that no path
//!   orders after it is a race on the line even when the bytes differ.
//! - Uninitialised reads: the device's set of bytes handed out and not yet written; fresh
//!   memory joins it at its place in submission order, writes leave it.
//!
//! A dependency path is searched backwards from the later task through its producers, never
//! below the earlier task's submission position; answers are memoised per pair.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use rangemap::{RangeMap, RangeSet};

use super::finding::{Finding, Reader, TaskAccess};
use super::log::{Access, Event, RunLog, TaskRuns};
use pto_hal::check::Checks;

/// A recorded access, as the shadow keeps it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Who {
    task: u32,
    arg: u32,
}

/// Shadow of a byte range: its last writer and the readers since.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
struct Cell {
    writer: Option<Who>,
    readers: Vec<Who>,
}

/// What the analysis found.
pub(crate) struct Outcome {
    pub first: Option<Finding>,
    pub findings: u64,
}

struct Analysis<'a> {
    log: &'a RunLog,
    checks: Checks,
    line_hazard: bool,
    names: &'a dyn Fn(usize) -> String,
    /// Submission position of each task.
    pos: HashMap<u32, usize>,
    /// Position at which a task retired (device-side runtime).
    retired: HashMap<u32, usize>,
    memo: HashMap<(u32, u32), bool>,
    bytes: RangeMap<u64, Cell>,
    lines: RangeMap<u64, Who>,
    first: Option<Finding>,
    findings: u64,
}

/// Analyse `log` with `checks`; `uninit` is the device's set of unwritten bytes, updated by
/// the run's fresh memory and writes. `names` names a kernel by its function address.
pub(crate) fn analyse(
    log: &RunLog,
    checks: Checks,
    line_hazard: bool,
    uninit: &mut RangeSet<u64>,
    names: &dyn Fn(usize) -> String,
) -> Outcome {
    let mut order: Vec<Event> = log.order.clone();
    // Tasks that ran with no submission note (none should) go last, by id. (A set of the noted
    // ones: a search of the order per task made the analysis quadratic in the tasks.)
    let noted: HashSet<u32> =
        log.order.iter().filter_map(|e| if let Event::Task(t) = e { Some(*t) } else { None }).collect();
    let mut unnoted: Vec<u32> = log.runs.keys().copied().filter(|t| !noted.contains(t)).collect();
    unnoted.sort_unstable();
    order.extend(unnoted.into_iter().map(Event::Task));
    let pos = order.iter().enumerate().filter_map(|(i, e)| if let Event::Task(t) = e { Some((*t, i)) } else { None });
    let retired =
        order.iter().enumerate().filter_map(|(i, e)| if let Event::Retired(t) = e { Some((*t, i)) } else { None });
    let mut a = Analysis {
        log,
        checks,
        line_hazard,
        names,
        pos: pos.collect(),
        retired: retired.collect(),
        memo: HashMap::new(),
        bytes: RangeMap::new(),
        lines: RangeMap::new(),
        first: None,
        findings: 0,
    };
    for e in &order {
        match *e {
            Event::Fresh { lo, hi } if lo < hi => {
                if checks.init {
                    uninit.insert(lo..hi);
                }
                // A new tensor: what earlier tasks did to this memory was to another one.
                a.bytes.remove(lo..hi);
                a.lines.remove(lo / 64..hi.div_ceil(64));
            }
            Event::Fresh { .. } | Event::Retired(_) => {}
            Event::Orchestration { lo, hi, write } if lo < hi => {
                if !checks.init {
                    continue;
                }
                if write {
                    uninit.remove(lo..hi);
                } else if let Some(g) = uninit.overlapping(lo..hi).next() {
                    a.found(Finding::Uninitialised { reader: Reader::Orchestration, addr: g.start.max(lo) });
                }
            }
            Event::Orchestration { .. } => {}
            Event::Task(t) => {
                if let Some(runs) = log.runs.get(&t) {
                    a.task(t, runs, uninit);
                }
            }
        }
    }
    Outcome { first: a.first, findings: a.findings }
}

impl Analysis<'_> {
    fn found(&mut self, f: Finding) {
        self.findings += 1;
        if self.first.is_none() {
            self.first = Some(f);
        }
    }

    fn access(&self, who: Who, write: bool, range: (u64, u64)) -> TaskAccess {
        let kernel = self.log.runs.get(&who.task).map_or_else(|| "?".to_string(), |r| (self.names)(r.kernel));
        TaskAccess { task: who.task, kernel, arg: who.arg, write, range }
    }

    fn task(&mut self, t: u32, runs: &TaskRuns, uninit: &mut RangeSet<u64>) {
        for block in &runs.blocks {
            for &acc in &block.accesses {
                if self.checks.init {
                    self.init(t, acc, block.views.get(acc.arg as usize).copied(), uninit);
                }
                if self.checks.race {
                    let raced = self.data(t, acc);
                    if acc.write && self.line_hazard {
                        self.line(t, acc, &raced);
                    }
                }
            }
        }
    }

    fn init(&mut self, t: u32, acc: Access, view: Option<(u64, u32, bool)>, uninit: &mut RangeSet<u64>) {
        let r = acc.lo..acc.hi;
        if acc.write {
            uninit.remove(r);
            return;
        }
        let Some(g) = uninit.overlapping(&r).next() else { return };
        let addr = g.start.max(acc.lo);
        let element = view.and_then(|(base, elem, dense)| (dense && elem > 0).then(|| (addr - base) / elem as u64));
        let access = self.access(Who { task: t, arg: acc.arg }, false, (acc.lo, acc.hi));
        self.found(Finding::Uninitialised { reader: Reader::Kernel { access, element }, addr });
    }

    /// Whether a dependency path leads from `from` to `to` (`from` submitted earlier).
    fn ordered(&mut self, from: u32, to: u32) -> bool {
        if let Some(&k) = self.memo.get(&(from, to)) {
            return k;
        }
        let floor = self.pos.get(&from).copied().unwrap_or(0);
        // Retired before `n` was submitted: ordered before `n` (and so before `to`).
        let gone = self.retired.get(&from).copied();
        let retired_before =
            |n: u32, pos: &HashMap<u32, usize>| gone.is_some_and(|g| pos.get(&n).is_some_and(|&q| g < q));
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![to];
        let mut found = false;
        while let Some(n) = stack.pop() {
            if retired_before(n, &self.pos) {
                found = true;
                break;
            }
            let Some(ps) = self.log.preds.get(&n) else { continue };
            if ps.contains(&from) {
                found = true;
                break;
            }
            for &p in ps {
                let above = self.pos.get(&p).is_some_and(|&q| q > floor);
                if above && seen.insert(p) {
                    stack.push(p);
                }
            }
        }
        self.memo.insert((from, to), found);
        found
    }

    /// Check and record a data access; returns the tasks it raced with.
    fn data(&mut self, t: u32, acc: Access) -> Vec<u32> {
        let me = Who { task: t, arg: acc.arg };
        let r = acc.lo..acc.hi;
        let mut conflicts: Vec<(Who, bool, Range<u64>)> = Vec::new();
        for (seg, cell) in self.bytes.overlapping(&r) {
            let clip = seg.start.max(r.start)..seg.end.min(r.end);
            if let Some(w) = cell.writer.filter(|w| w.task != t) {
                conflicts.push((w, true, clip.clone()));
            }
            if acc.write {
                conflicts.extend(cell.readers.iter().filter(|x| x.task != t).map(|&x| (x, false, clip.clone())));
            }
        }
        let mut raced = Vec::new();
        for (other, wrote, clip) in conflicts {
            if !self.ordered(other.task, t) {
                raced.push(other.task);
                let first = self.access(other, wrote, (clip.start, clip.end));
                let second = self.access(me, acc.write, (acc.lo, acc.hi));
                self.found(Finding::DataRace { first, second, range: (clip.start, clip.end) });
            }
        }
        if acc.write {
            self.bytes.insert(r, Cell { writer: Some(me), readers: Vec::new() });
            return raced;
        }
        let mut pieces: Vec<(Range<u64>, Cell)> = Vec::new();
        for (seg, cell) in self.bytes.overlapping(&r) {
            if cell.readers.iter().any(|x| x.task == t) {
                continue;
            }
            let mut c = cell.clone();
            c.readers.push(me);
            pieces.push((seg.start.max(r.start)..seg.end.min(r.end), c));
        }
        for gap in self.bytes.gaps(&r) {
            pieces.push((gap, Cell { writer: None, readers: vec![me] }));
        }
        for (range, cell) in pieces {
            self.bytes.insert(range, cell);
        }
        raced
    }

    /// Check and record a write's lines; `raced`: the tasks its bytes already raced with
    /// (reported as data races, not again as line races).
    fn line(&mut self, t: u32, acc: Access, raced: &[u32]) {
        let me = Who { task: t, arg: acc.arg };
        let lines = acc.lo / 64..acc.hi.div_ceil(64);
        let others: Vec<(Who, u64)> = self
            .lines
            .overlapping(&lines)
            .filter(|(_, w)| w.task != t && !raced.contains(&w.task))
            .map(|(seg, w)| (*w, seg.start.max(lines.start)))
            .collect();
        for (other, line) in others {
            if self.ordered(other.task, t) {
                continue;
            }
            let lo = (line * 64).max(acc.lo);
            // The other task's bytes in the line, as the byte shadow still records them
            // (before this write is recorded there), else the whole line.
            let (l0, l1) = (line * 64, line * 64 + 64);
            let theirs = self.bytes.overlapping(l0..l1).filter(|(_, c)| c.writer == Some(other)).fold(
                None,
                |acc: Option<(u64, u64)>, (seg, _)| {
                    let (a, b) = (seg.start.max(l0), seg.end.min(l1));
                    Some(acc.map_or((a, b), |(x, y)| (x.min(a), y.max(b))))
                },
            );
            let first = self.access(other, true, theirs.unwrap_or((l0, l1)));
            let second = self.access(me, true, (lo, acc.hi.min(line * 64 + 64)));
            self.found(Finding::LineRace { first, second, line: line * 64 });
        }
        self.lines.insert(lines, me);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::log::BlockLog;

    /// A run of tasks `0..n` in order with `edges`, each task's accesses given as
    /// `(task, write, lo, hi)` through argument 0.
    fn run(n: u32, edges: &[(u32, u32)], accesses: &[(u32, bool, u64, u64)]) -> RunLog {
        let mut log = RunLog::default();
        for t in 0..n {
            let mut ps = edges.iter().filter(|e| e.1 == t).map(|e| e.0);
            log.note_task(t, &mut ps);
        }
        for &(t, write, lo, hi) in accesses {
            let mut b = BlockLog { views: vec![(lo & !63, 4, true)], ..BlockLog::default() };
            b.push(0, write, lo, hi - lo);
            log.kernel_ran(t, 0, b);
        }
        log
    }

    fn check(log: &RunLog, checks: Checks, line_hazard: bool) -> Outcome {
        analyse(log, checks, line_hazard, &mut RangeSet::new(), &|_| "k".to_string())
    }

    const RACE: Checks = Checks { race: true, init: false };

    #[test]
    fn a_path_through_other_tasks_orders_two_writers() {
        // 0 -> 1 -> 2, and 0 and 2 write the same bytes: ordered through 1.
        let log = run(3, &[(0, 1), (1, 2)], &[(0, true, 0, 64), (2, true, 0, 64)]);
        assert!(check(&log, RACE, true).first.is_none());
        // Without the edge 1 -> 2 they race.
        let log = run(3, &[(0, 1)], &[(0, true, 0, 64), (2, true, 0, 64)]);
        let out = check(&log, RACE, true);
        assert!(
            matches!(&out.first, Some(Finding::DataRace { first, second, range: (0, 64) })
            if first.task == 0 && second.task == 2),
            "{:?}",
            out.first
        );
    }

    #[test]
    fn readers_race_with_a_later_unordered_writer_only() {
        // Two readers of one range (no race), then a writer ordered after one of them only.
        let log = run(3, &[(0, 2)], &[(0, false, 0, 8), (1, false, 0, 8), (2, true, 4, 12)]);
        let out = check(&log, RACE, false);
        assert_eq!(out.findings, 1);
        assert!(matches!(&out.first, Some(Finding::DataRace { first, range: (4, 8), .. }) if first.task == 1));
    }

    #[test]
    fn different_bytes_of_one_line_race_only_under_the_hazard() {
        let log = run(2, &[], &[(0, true, 0, 32), (1, true, 32, 64)]);
        assert!(check(&log, RACE, false).first.is_none());
        let out = check(&log, RACE, true);
        assert!(matches!(&out.first, Some(Finding::LineRace { first, line: 0, .. }) if first.range == (0, 32)));
        // Overlapping bytes are one data race, not a line race too.
        let log = run(2, &[], &[(0, true, 0, 32), (1, true, 16, 48)]);
        let out = check(&log, RACE, true);
        assert_eq!(out.findings, 1);
        assert!(matches!(out.first, Some(Finding::DataRace { .. })));
    }

    #[test]
    fn a_retired_task_orders_every_later_submission() {
        let mut log = run(1, &[], &[(0, true, 0, 64)]);
        log.order.push(Event::Retired(0));
        log.note_task(1, &mut core::iter::empty());
        let mut b = BlockLog::default();
        b.push(0, true, 0, 64);
        log.kernel_ran(1, 0, b);
        assert!(check(&log, RACE, true).first.is_none());
    }

    #[test]
    fn fresh_memory_is_uninitialised_until_written_and_forgets_earlier_tasks() {
        let init = Checks { race: true, init: true };
        // Task 0 reads [0,64) before anything wrote it.
        let mut log = RunLog::default();
        log.order.push(Event::Fresh { lo: 0, hi: 128 });
        log.note_task(0, &mut core::iter::empty());
        let mut b = BlockLog { views: vec![(0, 4, true)], ..BlockLog::default() };
        b.push(0, true, 0, 16);
        b.push(0, false, 0, 64);
        log.kernel_ran(0, 0, b);
        let mut uninit = RangeSet::new();
        let out = analyse(&log, init, true, &mut uninit, &|_| "k".to_string());
        assert!(
            matches!(
                &out.first,
                Some(Finding::Uninitialised { reader: Reader::Kernel { element: Some(4), .. }, addr: 16 })
            ),
            "{:?}",
            out.first
        );
        assert_eq!(uninit.iter().cloned().collect::<Vec<_>>(), vec![16..128]);
        // Fresh memory handed out again: an unordered task writing it later is not a race with
        // the earlier task, which used the memory as another tensor.
        let mut log = run(1, &[], &[(0, true, 0, 64)]);
        log.order.push(Event::Fresh { lo: 0, hi: 64 });
        log.note_task(1, &mut core::iter::empty());
        let mut b = BlockLog::default();
        b.push(0, true, 0, 64);
        log.kernel_ran(1, 0, b);
        assert!(check(&log, RACE, true).first.is_none());
    }
}
