//! The SVG swimlane of a [`Trace`](super::Trace), which a browser opens: one lane per core and
//! per AICPU thread, a time axis and a legend.

use std::fmt::Write as _;
use std::format;
use std::string::{String, ToString};
use std::vec::Vec;

use super::{Phase, Trace};

impl Trace {
    /// An SVG swimlane: one lane per core (then one per AICPU thread, its phases in grey),
    /// subtasks coloured by func, a time axis in microseconds, a legend, and a tooltip
    /// (`<title>`) per box.
    pub fn to_svg(&self) -> String {
        const W: f64 = 1200.0;
        const LEFT: f64 = 150.0;
        const LANE: f64 = 14.0;
        const TOP: f64 = 30.0;
        let origin = self.origin();
        let span = self.us(origin, self.last()).max(1e-3);
        let x = |t: u64| LEFT + self.us(origin, t) / span * (W - LEFT - 10.0);
        let lanes = self.workers() + self.threads;
        let legend: Vec<(u16, &String)> = self.funcs.iter().map(|(k, v)| (*k, v)).collect();
        let h = TOP + lanes as f64 * LANE + 40.0 + 16.0 * legend.len().div_ceil(4) as f64;
        let mut s = String::new();
        let _ = write!(
            s,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{h:.0}\" viewBox=\"0 0 {W} {h:.0}\" font-family=\"monospace\" font-size=\"10\">\n"
        );
        let _ = writeln!(
            s,
            "<text x=\"4\" y=\"14\" font-size=\"12\">{} run, {} subtasks, {:.1} us, counter {} Hz, {} records dropped</text>",
            self.runtime.name(),
            self.subtasks.len(),
            span,
            self.freq_hz,
            self.dropped()
        );
        for lane in 0..lanes {
            let y = TOP + lane as f64 * LANE;
            let name =
                if lane < self.workers() { self.core_name(lane) } else { self.thread_name(lane - self.workers()) };
            let fill = if lane % 2 == 0 { "#f4f4f4" } else { "#ffffff" };
            let _ = writeln!(s, "<rect x=\"0\" y=\"{y}\" width=\"{W}\" height=\"{LANE}\" fill=\"{fill}\"/>");
            let _ = writeln!(s, "<text x=\"4\" y=\"{:.1}\">{}</text>", y + LANE - 3.0, xml_escape(&name));
        }
        for p in &self.phases {
            let y = TOP + (self.workers() + p.thread) as f64 * LANE + 2.0;
            let (x0, x1) = (x(p.start), x(p.end));
            let fill = match p.phase {
                Phase::Idle => "#dddddd",
                Phase::Orchestration => "#888888",
                _ => "#aaaaaa",
            };
            let _ = writeln!(
                s,
                "<rect x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{fill}\"><title>{} {:.2}..{:.2} us</title></rect>",
                (x1 - x0).max(0.5),
                LANE - 4.0,
                p.phase.name(),
                self.us(origin, p.start),
                self.us(origin, p.end)
            );
        }
        for t in &self.subtasks {
            let y = TOP + t.core as f64 * LANE + 1.0;
            let (x0, x1) = (x(t.start), x(t.end));
            let _ = writeln!(
                s,
                "<rect x=\"{x0:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\" stroke=\"#333\" stroke-width=\"0.3\"><title>task {} block {} {} on {}: {:.2}..{:.2} us</title></rect>",
                (x1 - x0).max(0.5),
                LANE - 2.0,
                color(t.func),
                t.task,
                t.block,
                xml_escape(&self.func_name(t)),
                xml_escape(&self.core_name(t.core)),
                self.us(origin, t.start),
                self.us(origin, t.end)
            );
        }
        // Time axis.
        let ay = TOP + lanes as f64 * LANE + 4.0;
        let _ = writeln!(s, "<line x1=\"{LEFT}\" y1=\"{ay}\" x2=\"{:.1}\" y2=\"{ay}\" stroke=\"black\"/>", W - 10.0);
        let step = nice_step(span / 8.0);
        let mut t = 0.0;
        while t <= span + 1e-9 {
            let xx = LEFT + t / span * (W - LEFT - 10.0);
            let _ = writeln!(
                s,
                "<line x1=\"{xx:.2}\" y1=\"{ay}\" x2=\"{xx:.2}\" y2=\"{:.1}\" stroke=\"black\"/><text x=\"{xx:.2}\" y=\"{:.1}\" text-anchor=\"middle\">{} us</text>",
                ay + 4.0,
                ay + 14.0,
                trim_float(t)
            );
            t += step;
        }
        for (i, (id, name)) in legend.iter().enumerate() {
            let lx = 4.0 + (i % 4) as f64 * 300.0;
            let ly = ay + 22.0 + (i / 4) as f64 * 16.0;
            let _ = writeln!(
                s,
                "<rect x=\"{lx}\" y=\"{ly}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0}\" y=\"{:.0}\">{} (func {id})</text>",
                color(Some(*id)),
                lx + 14.0,
                ly + 9.0,
                xml_escape(name)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}

fn color(func: Option<u16>) -> &'static str {
    const PALETTE: [&str; 12] = [
        "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
        "#1f77b4", "#17becf",
    ];
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
