//! `pto dump DIR`: read an args-dump directory back: its level, accounting, records per stage
//! and direction, and per task its arguments' shapes, payload sizes and first values (as text
//! or JSON); `--task N --arg K` prints one argument's whole tensor.

mod values;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Parser;
use pto::runtime::dump::DumpLevel;
use pto::runtime::graph::DType;
use pto::runtime::host::dump::{Accounting, ArgDirection, Dump, Record, RunInfo, Stage};

use crate::{Fail, emit};
use values::{Elem, first_values};

#[derive(Parser, Debug)]
pub(crate) struct DumpArgs {
    /// The dump directory (holding args_dump.json and args.bin).
    dir: PathBuf,
    /// Show only this task, with more of each payload's values.
    #[arg(long)]
    task: Option<u32>,
    /// With `--task N`: print this argument's whole tensor at each stage it was recorded.
    #[arg(long, requires = "task")]
    arg: Option<u32>,
    /// List every task (by default the first 16 are listed).
    #[arg(long, conflicts_with = "task")]
    all: bool,
    /// Print the summary as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// How many tasks `pto dump` lists without `--all`.
const DUMP_TASKS: usize = 16;

/// Append a line to a `String` (formatting into a `String` cannot fail).
macro_rules! say {
    ($out:expr) => {{
        $out.push('\n');
    }};
    ($out:expr, $($t:tt)*) => {{
        let _ = writeln!($out, $($t)*);
    }};
}

/// What a record is, for the counts per stage: a tensor by its direction, or a scalar.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Class {
    Input,
    Output,
    InOut,
    Scalar,
}

impl Class {
    fn of(r: &Record) -> Class {
        match r.direction {
            _ if r.is_scalar() => Class::Scalar,
            ArgDirection::Input => Class::Input,
            ArgDirection::Output => Class::Output,
            ArgDirection::InOut => Class::InOut,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Class::Input => "input",
            Class::Output => "output",
            Class::InOut => "inout",
            Class::Scalar => "scalar",
        }
    }
}

/// Version of `pto dump --json`'s documents (the summary and `--task N --arg K`): raised
/// whenever a field is renamed or removed or changes meaning; adding a field keeps it.
const DUMP_JSON_FORMAT_VERSION: u32 = 1;

/// `pto dump DIR --json`.
#[derive(serde::Serialize)]
struct DumpSummaryDoc<'a> {
    /// [`DUMP_JSON_FORMAT_VERSION`].
    format_version: u32,
    dir: String,
    level: DumpLevel,
    run: RunInfo,
    accounting: Accounting,
    payload_bytes: u64,
    tasks_recorded: usize,
    by_stage: Vec<StageRow>,
    tasks: Vec<TaskDoc<'a>>,
}

/// Records and payload bytes of one stage and class.
#[derive(serde::Serialize)]
struct StageRow {
    stage: Stage,
    direction: Class,
    records: u64,
    payload_bytes: u64,
}

/// One task's records.
#[derive(serde::Serialize)]
struct TaskDoc<'a> {
    task: u32,
    func_ids: &'a [u16],
    records: Vec<RecordDoc<'a>>,
}

/// One record, with its first values (numbers; `null` without data).
#[derive(serde::Serialize)]
struct RecordDoc<'a> {
    stage: Stage,
    arg: u32,
    direction: ArgDirection,
    dtype: Option<DType>,
    shape: &'a [u32],
    strides: &'a [u32],
    offset: Option<u64>,
    payload_len: u64,
    truncated: bool,
    value: Option<u64>,
    first_values: Option<Vec<Elem>>,
}

/// `pto dump DIR --task N --arg K --json`.
#[derive(serde::Serialize)]
struct TensorDoc<'a> {
    /// [`DUMP_JSON_FORMAT_VERSION`].
    format_version: u32,
    task: u32,
    arg: u32,
    records: Vec<TensorRecordDoc<'a>>,
}

/// One stage of the argument, with all its values (numbers; `null` without data).
#[derive(serde::Serialize)]
struct TensorRecordDoc<'a> {
    stage: Stage,
    direction: ArgDirection,
    dtype: Option<DType>,
    shape: &'a [u32],
    truncated: bool,
    value: Option<u64>,
    values: Option<Vec<Elem>>,
}

/// Pretty JSON of `doc`, and a newline.
fn json_text<T: serde::Serialize>(doc: &T) -> Result<String, Fail> {
    Ok(serde_json::to_string_pretty(doc)? + "\n")
}

pub(crate) fn dump(a: &DumpArgs) -> Result<(), Fail> {
    let d = Dump::open(&a.dir).map_err(|e| Fail(format!("cannot read the args dump: {e}"), 1))?;
    let by_task = d.by_task();
    if let Some(t) = a.task
        && !by_task.contains_key(&t)
    {
        let known: Vec<String> = by_task.keys().take(8).map(|t| t.to_string()).collect();
        return Err(Fail(
            format!(
                "{}: no records of task {t} ({} tasks recorded{}{})",
                a.dir.display(),
                by_task.len(),
                if known.is_empty() { "" } else { ": " },
                known.join(", ") + if by_task.len() > known.len() { ", ..." } else { "" }
            ),
            1,
        ));
    }
    if let (Some(t), Some(k)) = (a.task, a.arg) {
        return dump_tensor(a, &d, t, k, &by_task[&t]);
    }
    // Records per stage and class.
    let mut kinds: BTreeMap<(Stage, Class), (u64, u64)> = BTreeMap::new();
    for r in &d.records {
        let e = kinds.entry((r.stage, Class::of(r))).or_default();
        e.0 += 1;
        e.1 += r.payload_len;
    }
    let tasks: Vec<(&u32, &Vec<&Record>)> = match a.task {
        Some(t) => by_task.iter().filter(|(k, _)| **k == t).collect(),
        None if a.all => by_task.iter().collect(),
        None => by_task.iter().take(DUMP_TASKS).collect(),
    };
    let values = if a.task.is_some() { 16 } else { 4 };
    let acc = &d.accounting;
    let payload: u64 = d.records.iter().map(|r| r.payload_len).sum();
    if a.json {
        let doc = DumpSummaryDoc {
            format_version: DUMP_JSON_FORMAT_VERSION,
            dir: a.dir.display().to_string(),
            level: d.level,
            run: d.run,
            accounting: *acc,
            payload_bytes: payload,
            tasks_recorded: by_task.len(),
            by_stage: kinds
                .iter()
                .map(|(&(stage, direction), &(records, payload_bytes))| StageRow {
                    stage,
                    direction,
                    records,
                    payload_bytes,
                })
                .collect(),
            tasks: tasks
                .iter()
                .map(|(t, recs)| TaskDoc {
                    task: **t,
                    func_ids: recs.first().map_or(&[][..], |r| &r.func_ids[..]),
                    records: recs
                        .iter()
                        .map(|r| RecordDoc {
                            stage: r.stage,
                            arg: r.arg,
                            direction: r.direction,
                            dtype: r.dtype,
                            shape: &r.shape,
                            strides: &r.strides,
                            offset: r.offset,
                            payload_len: r.payload_len,
                            truncated: r.truncated,
                            value: r.value,
                            first_values: first_values(&d, r, values).map(|(v, _)| v),
                        })
                        .collect(),
                })
                .collect(),
        };
        return emit(&json_text(&doc)?);
    }
    let mut out = String::new();
    let run = &d.run;
    say!(
        out,
        "{}: level={} runtime={} epoch={} run {}",
        a.dir.display(),
        d.level,
        run.runtime,
        run.epoch,
        if run.complete { "complete" } else { "did not complete" }
    );
    match (acc.total, acc.dropped) {
        (Some(total), Some(dropped)) => {
            say!(out, "accounting: total={total} collected={} dropped={dropped}", acc.collected)
        }
        _ => say!(out, "accounting: unknown (the run failed or a lane did not close); collected={}", acc.collected),
    }
    say!(out, "{} records of {} tasks, {payload} payload bytes in args.bin", d.records.len(), by_task.len());
    say!(out, "\nrecords per stage and direction:");
    if kinds.is_empty() {
        say!(out, "  (none)");
    }
    for ((stage, class), (n, bytes)) in &kinds {
        say!(out, "  {:<17} {:<14} {n:>8} records {bytes:>12} bytes", stage.name(), class.name());
    }
    say!(out);
    for (t, recs) in &tasks {
        let funcs: Vec<String> =
            recs.first().map(|r| r.func_ids.iter().map(|f| f.to_string()).collect()).unwrap_or_default();
        say!(out, "task {t} (func {}):", funcs.join(","));
        for r in recs.iter() {
            let head = format!("  {:<16} arg {:<2} {:<6}", r.stage.name(), r.arg, r.direction.name());
            if let Some(v) = r.value {
                say!(out, "{head} scalar {v} ({v:#x})");
                continue;
            }
            let shape: Vec<String> = r.shape.iter().map(|x| x.to_string()).collect();
            let strides: Vec<String> = r.strides.iter().map(|x| x.to_string()).collect();
            let offset = r.offset.map_or_else(|| "?".to_string(), |o| o.to_string());
            let payload = if r.payload_len == 0 {
                "metadata only".to_string()
            } else {
                format!("payload {} bytes", r.payload_len)
            };
            let mut line = format!(
                "{head} {} [{}] strides [{}] offset {offset} {payload}",
                r.dtype.map_or("?", DType::name),
                shape.join(", "),
                strides.join(", "),
            );
            if r.truncated {
                line += " (truncated)";
            }
            if let Some((v, more)) = first_values(&d, r, values) {
                let v: Vec<String> = v.iter().map(Elem::to_string).collect();
                line += &format!(" = [{}{}]", v.join(", "), if more { ", ..." } else { "" });
            }
            say!(out, "{line}");
        }
    }
    if a.task.is_none() && !a.all && by_task.len() > tasks.len() {
        say!(out, "... {} more tasks (--all lists every task, --task N shows one)", by_task.len() - tasks.len());
    }
    emit(&out)
}

/// `pto dump DIR --task N --arg K`: every value of argument K of task N, at each stage it was
/// recorded, in rows of the innermost extent, each line prefixed by the flat index of its
/// first element (or the scalar's value).
fn dump_tensor(a: &DumpArgs, d: &Dump, t: u32, k: u32, recs: &[&Record]) -> Result<(), Fail> {
    let mine: Vec<&Record> = recs.iter().copied().filter(|r| r.arg == k).collect();
    if mine.is_empty() {
        let args: std::collections::BTreeSet<u32> = recs.iter().map(|r| r.arg).collect();
        let args: Vec<String> = args.iter().map(|x| x.to_string()).collect();
        return Err(Fail(
            format!(
                "{}: task {t} has no records of argument {k} (its arguments: {})",
                a.dir.display(),
                args.join(", ")
            ),
            1,
        ));
    }
    if a.json {
        let doc = TensorDoc {
            format_version: DUMP_JSON_FORMAT_VERSION,
            task: t,
            arg: k,
            records: mine
                .iter()
                .map(|r| TensorRecordDoc {
                    stage: r.stage,
                    direction: r.direction,
                    dtype: r.dtype,
                    shape: &r.shape,
                    truncated: r.truncated,
                    value: r.value,
                    values: first_values(d, r, usize::MAX).map(|(v, _)| v),
                })
                .collect(),
        };
        return emit(&json_text(&doc)?);
    }
    let mut out = String::new();
    for r in mine {
        let shape: Vec<String> = r.shape.iter().map(|x| x.to_string()).collect();
        say!(
            out,
            "task {t} arg {k} {} {} {} [{}]{}",
            r.stage.name(),
            r.direction.name(),
            if r.is_scalar() { "scalar" } else { r.dtype.map_or("?", DType::name) },
            shape.join(", "),
            if r.truncated { " (truncated)" } else { "" }
        );
        if let Some(v) = r.value {
            say!(out, "  {v} ({v:#x})");
            continue;
        }
        if r.payload_len == 0 {
            say!(out, "  (metadata only: the level recorded no data for this argument)");
            continue;
        }
        let Some((values, _)) = first_values(d, r, usize::MAX) else {
            say!(out, "  ({} bytes; no decoder for an unknown dtype code)", r.payload_len);
            continue;
        };
        let values: Vec<String> = values.iter().map(Elem::to_string).collect();
        // Rows of the innermost extent, at most 16 values to a line.
        let row = r.shape.last().map_or(16, |&x| (x as usize).clamp(1, 16));
        for (i, chunk) in values.chunks(row).enumerate() {
            say!(out, "  [{:>6}] {}", i * row, chunk.join(" "));
        }
    }
    emit(&out)
}
