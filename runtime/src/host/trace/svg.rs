//! The SVG swimlane of a [`Trace`](super::Trace), which a browser opens: one lane per busy core
//! and per busy AICPU thread (the idle ones folded into one summary line unless
//! [`SvgOptions::all_lanes`] is set), dependency arrows, a time axis and a legend.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use super::{Phase, SubtaskTrace, Trace};

/// How [`Trace::to_svg_with`] draws the swimlane.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SvgOptions {
    /// Draw a lane for every core and AICPU thread launched, idle ones too. Off by default:
    /// the lanes with no subtask (cores) or no phase (threads) are folded into one summary
    /// line (`67 idle cores`), whose tooltip names them.
    pub all_lanes: bool,
}

impl SvgOptions {
    /// Draw every lane (`true`), or fold the idle ones (`false`, the default).
    pub fn with_all_lanes(mut self, all: bool) -> Self {
        self.all_lanes = all;
        self
    }
}

/// One row of the swimlane.
enum Lane {
    Core(u32),
    Thread(u32),
    /// The idle cores and threads, folded.
    Idle {
        cores: Vec<u32>,
        threads: Vec<u32>,
    },
}

impl Trace {
    /// [`Trace::to_svg_with`] with the default options: idle lanes folded.
    pub fn to_svg(&self) -> String {
        self.to_svg_with(&SvgOptions::default())
    }

    /// An SVG swimlane: a lane per core (then per AICPU thread, its phases hatched in greys),
    /// subtasks in saturated colours by func, an arrow per dependency between subtasks that
    /// ran (from the producer's last end to the consumer's first start), a time axis in
    /// microseconds over the device's records ([`Trace::device_window`]), a legend naming
    /// every func and every AICPU phase drawn, and a tooltip (`<title>`) per box and arrow.
    /// The title line's "span" is [`Trace::span`]: first subtask start to last subtask end.
    ///
    /// Elements carry classes for tools and tests: `lane` (a lane's label; `lane idle` the
    /// folded line), `task`, `phase`, `dep` (an arrow), `legend-func`, `legend-phase`.
    pub fn to_svg_with(&self, opts: &SvgOptions) -> String {
        let sheet = Sheet::new(self, opts);
        let legend_items = self.funcs.len() + sheet.phases.len() + 1;
        let h = TOP + sheet.lanes.len() as f64 * LANE + 40.0 + 16.0 * legend_items.div_ceil(4) as f64;
        let mut s = String::new();
        let _ = write!(
            s,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h:.0}\" viewBox=\"0 0 {W} {h:.0}\" font-family=\"monospace\" font-size=\"10\">\n"
        );
        s.push_str(&defs());
        let span = self.span().map_or(0.0, |(a, b)| self.us(a, b));
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"14\" font-size=\"12\">{} run, {} subtasks on {} of {} cores, span {:.3} us (first subtask start to last subtask end), counter {} Hz, {} records dropped</text>",
            self.runtime.name(),
            self.subtasks.len(),
            sheet.busy_cores,
            self.workers(),
            span,
            self.freq_hz,
            self.dropped()
        );
        sheet.lane_labels(&mut s);
        sheet.phase_boxes(&mut s);
        sheet.subtask_boxes(&mut s);
        sheet.arrows(&mut s);
        let ay = sheet.axis(&mut s);
        sheet.legend(&mut s, ay);
        s.push_str("</svg>\n");
        s
    }
}

/// The drawing's width, its left margin (lane labels), a lane's height and the top margin.
const W: f64 = 1200.0;
const LEFT: f64 = 150.0;
const LANE: f64 = 14.0;
const TOP: f64 = 30.0;

/// One swimlane as it is laid out: the trace, its time window and its rows.
struct Sheet<'t> {
    t: &'t Trace,
    /// The first device tick drawn, and the window's length in microseconds.
    origin: u64,
    window: f64,
    lanes: Vec<Lane>,
    row_of_core: HashMap<u32, usize>,
    row_of_thread: HashMap<u32, usize>,
    /// The cores that ran a subtask (how many).
    busy_cores: usize,
    /// The AICPU phases the trace holds, in legend order.
    phases: Vec<Phase>,
}

impl<'t> Sheet<'t> {
    fn new(t: &'t Trace, opts: &SvgOptions) -> Self {
        let (origin, last) = t.device_window();
        let busy_cores: BTreeSet<u32> = t.subtasks.iter().map(|s| s.core).collect();
        let busy_threads: BTreeSet<u32> = t.phases.iter().map(|p| p.thread).collect();
        let mut lanes = Vec::new();
        let mut idle = (Vec::new(), Vec::new());
        for w in 0..t.workers() {
            if opts.all_lanes || busy_cores.contains(&w) { lanes.push(Lane::Core(w)) } else { idle.0.push(w) }
        }
        for th in 0..t.threads {
            if opts.all_lanes || busy_threads.contains(&th) { lanes.push(Lane::Thread(th)) } else { idle.1.push(th) }
        }
        if !idle.0.is_empty() || !idle.1.is_empty() {
            lanes.push(Lane::Idle { cores: idle.0, threads: idle.1 });
        }
        let mut row_of_core = HashMap::new();
        let mut row_of_thread = HashMap::new();
        for (i, l) in lanes.iter().enumerate() {
            match l {
                Lane::Core(w) => drop(row_of_core.insert(*w, i)),
                Lane::Thread(th) => drop(row_of_thread.insert(*th, i)),
                Lane::Idle { .. } => {}
            }
        }
        let phases = Phase::ALL.into_iter().filter(|&p| t.phases.iter().any(|q| q.phase == p)).collect();
        Sheet {
            t,
            origin,
            window: t.us(origin, last).max(1e-3),
            lanes,
            row_of_core,
            row_of_thread,
            busy_cores: busy_cores.len(),
            phases,
        }
    }

    /// The x coordinate of device tick `tick`.
    fn x(&self, tick: u64) -> f64 {
        LEFT + self.t.us(self.origin, tick) / self.window * (W - LEFT - 10.0)
    }

    /// Each lane's background and label (the folded idle line with a tooltip naming them).
    fn lane_labels(&self, s: &mut String) {
        let tr = self.t;
        let lanes = &self.lanes;
        for (i, lane) in lanes.iter().enumerate() {
            let y = TOP + i as f64 * LANE;
            let fill = if i % 2 == 0 { "#f4f4f4" } else { "#ffffff" };
            let _ = writeln!(s, "<rect x=\"0\" y=\"{y}\" width=\"{W}\" height=\"{LANE}\" fill=\"{fill}\"/>");
            let ty = y + LANE - 3.0;
            match lane {
                Lane::Core(w) => {
                    let _ = writeln!(
                        s,
                        "<text class=\"lane\" x=\"4\" y=\"{ty:.1}\">{}</text>",
                        xml_escape(&tr.core_name(*w))
                    );
                }
                Lane::Thread(t) => {
                    let _ = writeln!(
                        s,
                        "<text class=\"lane\" x=\"4\" y=\"{ty:.1}\">{}</text>",
                        xml_escape(&tr.thread_name(*t))
                    );
                }
                Lane::Idle { cores, threads } => {
                    let mut label = Vec::new();
                    let mut names = Vec::new();
                    if !cores.is_empty() {
                        label.push(format!("{} idle core{}", cores.len(), plural(cores.len())));
                        names.extend(cores.iter().map(|&w| tr.core_name(w)));
                    }
                    if !threads.is_empty() {
                        label.push(format!("{} idle AICPU thread{}", threads.len(), plural(threads.len())));
                        names.extend(threads.iter().map(|&t| tr.thread_name(t)));
                    }
                    let _ = writeln!(
                        s,
                        "<text class=\"lane idle\" x=\"4\" y=\"{ty:.1}\" font-style=\"italic\">{}<title>{}</title></text>",
                        label.join(", "),
                        xml_escape(&names.join(", "))
                    );
                }
            }
        }
    }

    /// The AICPU threads' phases, hatched.
    fn phase_boxes(&self, s: &mut String) {
        let (t, origin, row_of_thread) = (self.t, self.origin, &self.row_of_thread);
        let x = |tick| self.x(tick);
        for p in &t.phases {
            let Some(&row) = row_of_thread.get(&p.thread) else { continue };
            let y = TOP + row as f64 * LANE + 2.0;
            let (x0, x1) = (x(p.start), x(p.end));
            let _ = writeln!(
                s,
                "<rect class=\"phase\" x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"url(#phase-{})\" stroke=\"{}\" stroke-width=\"0.6\"><title>{} {:.2}..{:.2} us</title></rect>",
                (x1 - x0).max(0.5),
                LANE - 4.0,
                p.phase.name(),
                phase_grey(p.phase).1,
                p.phase.name(),
                t.us(origin, p.start),
                t.us(origin, p.end)
            );
        }
    }

    /// The subtasks, coloured by func.
    fn subtask_boxes(&self, s: &mut String) {
        let (tr, origin, row_of_core) = (self.t, self.origin, &self.row_of_core);
        let x = |tick| self.x(tick);
        for t in &tr.subtasks {
            let Some(&row) = row_of_core.get(&t.core) else { continue };
            let y = TOP + row as f64 * LANE + 1.0;
            let (x0, x1) = (x(t.start), x(t.end));
            let _ = writeln!(
                s,
                "<rect class=\"task\" x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\" stroke=\"#222\" stroke-width=\"0.3\"><title>task {} block {} {} on {}: {:.2}..{:.2} us</title></rect>",
                (x1 - x0).max(0.5),
                LANE - 2.0,
                color(t.func),
                t.task,
                t.block,
                xml_escape(&tr.func_name(t)),
                xml_escape(&tr.core_name(t.core)),
                tr.us(origin, t.start),
                tr.us(origin, t.end)
            );
        }
    }

    /// Dependency arrows: producer's last end -> consumer's first start.
    fn arrows(&self, s: &mut String) {
        let (tr, row_of_core) = (self.t, &self.row_of_core);
        let x = |tick| self.x(tick);
        let mut first: HashMap<u32, &SubtaskTrace> = HashMap::new();
        let mut latest: HashMap<u32, &SubtaskTrace> = HashMap::new();
        for t in &tr.subtasks {
            first
                .entry(t.task)
                .and_modify(|f| {
                    if t.start < f.start {
                        *f = t
                    }
                })
                .or_insert(t);
            latest
                .entry(t.task)
                .and_modify(|f| {
                    if t.end > f.end {
                        *f = t
                    }
                })
                .or_insert(t);
        }
        let mid = |core: u32| row_of_core.get(&core).map(|&r| TOP + r as f64 * LANE + LANE / 2.0);
        for &(p, c) in tr.edges.iter().flatten() {
            let (Some(ps), Some(cs)) = (latest.get(&p), first.get(&c)) else { continue };
            let (Some(y0), Some(y1)) = (mid(ps.core), mid(cs.core)) else { continue };
            let _ = writeln!(
                s,
                "<line class=\"dep\" x1=\"{:.2}\" y1=\"{y0:.1}\" x2=\"{:.2}\" y2=\"{y1:.1}\" stroke=\"#222\" stroke-opacity=\"0.55\" stroke-width=\"0.8\" marker-end=\"url(#arrow)\"><title>task {p} -> task {c}</title></line>",
                x(ps.end),
                x(cs.start)
            );
        }
    }

    /// The time axis in microseconds; returns its y coordinate.
    fn axis(&self, s: &mut String) -> f64 {
        let (lanes, window) = (&self.lanes, self.window);
        let ay = TOP + lanes.len() as f64 * LANE + 4.0;
        let _ = writeln!(s, "<line x1=\"{LEFT}\" y1=\"{ay}\" x2=\"{:.1}\" y2=\"{ay}\" stroke=\"black\"/>", W - 10.0);
        let step = nice_step(window / 8.0);
        let mut t = 0.0;
        while t <= window + 1e-9 {
            let xx = LEFT + t / window * (W - LEFT - 10.0);
            let _ = writeln!(
                s,
                "<line x1=\"{xx:.2}\" y1=\"{ay}\" x2=\"{xx:.2}\" y2=\"{:.1}\" stroke=\"black\"/><text x=\"{xx:.2}\" y=\"{:.1}\" text-anchor=\"middle\">{} us</text>",
                ay + 4.0,
                ay + 14.0,
                trim_float(t)
            );
            t += step;
        }
        ay
    }

    /// The legend below the axis (at `ay`): funcs (solid), AICPU phases (hatched), the arrow.
    fn legend(&self, s: &mut String, ay: f64) {
        let (t, phases) = (self.t, &self.phases[..]);
        let at = |i: usize| (4.0 + (i % 4) as f64 * 300.0, ay + 22.0 + (i / 4) as f64 * 16.0);
        let mut i = 0;
        for (id, name) in &t.funcs {
            let (lx, ly) = at(i);
            let _ = writeln!(
                s,
                "<g class=\"legend-func\"><rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{}\" stroke=\"#222\" stroke-width=\"0.3\"/><text x=\"{:.0}\" y=\"{:.0}\">{} (func {id})</text></g>",
                color(Some(*id)),
                lx + 14.0,
                ly + 9.0,
                xml_escape(name)
            );
            i += 1;
        }
        for p in phases {
            let (lx, ly) = at(i);
            let _ = writeln!(
                s,
                "<g class=\"legend-phase\"><rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"url(#phase-{})\" stroke=\"{}\" stroke-width=\"0.6\"/><text x=\"{:.0}\" y=\"{:.0}\">AICPU {}</text></g>",
                p.name(),
                phase_grey(*p).1,
                lx + 14.0,
                ly + 9.0,
                p.name()
            );
            i += 1;
        }
        let (lx, ly) = at(i);
        let _ = writeln!(
            s,
            "<g class=\"legend-dep\"><line x1=\"{lx}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\" marker-end=\"url(#arrow)\"/><text x=\"{:.0}\" y=\"{:.0}\">dependency (producer end to consumer start)</text></g>",
            ly + 5.0,
            lx + 12.0,
            ly + 5.0,
            lx + 16.0,
            ly + 9.0
        );
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The arrow head and one hatch pattern per AICPU phase (its grey: light background, darker
/// stripes).
fn defs() -> String {
    let mut s = String::from(
        "<defs>\n<marker id=\"arrow\" viewBox=\"0 0 6 6\" refX=\"6\" refY=\"3\" markerWidth=\"5\" markerHeight=\"5\" orient=\"auto\"><path d=\"M0,0 L6,3 L0,6 z\" fill=\"#222\"/></marker>\n",
    );
    for p in Phase::ALL {
        let (bg, fg) = phase_grey(p);
        let _ = writeln!(
            s,
            "<pattern id=\"phase-{}\" patternUnits=\"userSpaceOnUse\" width=\"4\" height=\"4\" patternTransform=\"rotate(45)\"><rect width=\"4\" height=\"4\" fill=\"{bg}\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"4\" stroke=\"{fg}\" stroke-width=\"1.5\"/></pattern>",
            p.name()
        );
    }
    s.push_str("</defs>\n");
    s
}

/// A phase's greys: (background, stripes and outline). Greys only: no task colour is grey.
fn phase_grey(p: Phase) -> (&'static str, &'static str) {
    match p {
        Phase::Orchestration => ("#d0d0d0", "#404040"),
        Phase::Dispatch => ("#e0e0e0", "#606060"),
        Phase::Completion => ("#e8e8e8", "#808080"),
        Phase::Idle => ("#f4f4f4", "#c0c0c0"),
        Phase::Handshake => ("#dcdcdc", "#505050"),
        Phase::Retire => ("#e4e4e4", "#707070"),
        Phase::Supervise => ("#ececec", "#909090"),
    }
}

/// Saturated task colours (HSL saturation at least 0.6, so none reads as a phase's grey).
const PALETTE: [&str; 12] = [
    "#e6194b", "#22aa22", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#bfef45", "#ffe119", "#9a6324",
    "#800000", "#000075",
];

fn color(func: Option<u16>) -> &'static str {
    func.map_or("#000000", |f| PALETTE[f as usize % PALETTE.len()])
}

fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1e-6);
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HSL saturation of `#rrggbb`.
    fn saturation(c: &str) -> f64 {
        let v: Vec<f64> =
            (0..3).map(|i| u8::from_str_radix(&c[1 + 2 * i..3 + 2 * i], 16).unwrap() as f64 / 255.0).collect();
        let (max, min) = (v.iter().cloned().fold(0.0, f64::max), v.iter().cloned().fold(1.0, f64::min));
        let l = (max + min) / 2.0;
        if max == min { 0.0 } else { (max - min) / (1.0 - (2.0 * l - 1.0).abs()) }
    }

    #[test]
    fn task_colours_are_saturated_and_phase_colours_grey() {
        for c in PALETTE {
            assert!(saturation(c) >= 0.6, "{c}: {}", saturation(c));
        }
        for p in Phase::ALL {
            let (bg, fg) = phase_grey(p);
            assert_eq!((saturation(bg), saturation(fg)), (0.0, 0.0), "{p:?}");
        }
        let names: BTreeSet<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), Phase::ALL.len(), "one pattern per phase");
    }
}
