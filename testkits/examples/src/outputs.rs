//! What a run leaves behind and the lines that say so: its trace files (Chrome JSON, SVG) and
//! its args dump's summary.

use pto_runtime::host::RunReport;
use pto_runtime::orch::RuntimeKind;

/// One line on what a run's args dump wrote: records collected, dropped (or `unknown`),
/// payload bytes and the directory. An error when the run carries no dump report.
pub fn dump_summary(report: &RunReport) -> Result<String, String> {
    let d = report.dump.as_ref().ok_or_else(|| String::from("the run carries no args-dump report"))?;
    Ok(dump_line(d.level.name(), &d.accounting, d.payload_bytes, &d.dir))
}

/// The same line for a run that failed, read back from the dump directory it left: `None` when
/// there is no readable manifest there written at or after `since` (the run's start), so a
/// stale dump of an earlier run is never reported as this one's. Its accounting is unknown.
pub fn failed_dump_summary(dir: &std::path::Path, since: std::time::SystemTime) -> Option<String> {
    let written = std::fs::metadata(dir.join("args_dump.json")).and_then(|m| m.modified()).ok()?;
    if written < since {
        return None;
    }
    let d = pto_runtime::host::dump::Dump::open(dir).ok()?;
    let bytes = d.records.iter().map(|r| r.payload_len).sum();
    Some(dump_line(d.level.name(), &d.accounting, bytes, dir))
}

fn dump_line(
    level: &str,
    a: &pto_runtime::host::dump::Accounting,
    payload_bytes: u64,
    dir: &std::path::Path,
) -> String {
    let unknown = || String::from("unknown");
    format!(
        "dump: level={level} records={} dropped={} total={} payload={payload_bytes} bytes dir={}",
        a.collected,
        a.dropped.map_or_else(unknown, |n| n.to_string()),
        a.total.map_or_else(unknown, |n| n.to_string()),
        dir.display()
    )
}

/// `path` for runtime `rt`'s trace: `path` itself for the host-built graph or when one
/// runtime runs; the device-side runtime's run of a two-runtime invocation gets the runtime's
/// name before the extension (`t.json` → `t.trb.json`).
pub fn trace_path(path: &std::path::Path, rt: RuntimeKind, several: bool) -> std::path::PathBuf {
    if !several || rt == RuntimeKind::HostBuiltGraph {
        return path.to_path_buf();
    }
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(e) => format!("{stem}.{}.{}", rt.name(), e.to_string_lossy()),
        None => format!("{stem}.{}", rt.name()),
    };
    path.with_file_name(name)
}

/// Write `report`'s trace as Chrome JSON to `json` and as SVG to `svg` (each if given);
/// returns a line describing what was written.
pub fn write_trace(
    report: &RunReport,
    json: Option<&std::path::Path>,
    svg: Option<&std::path::Path>,
) -> Result<String, String> {
    let Some(t) = &report.trace else { return Err(String::from("the run carries no trace")) };
    let mut said = format!(
        "trace: {} subtasks, {} phases, {} records dropped, {} rings unclosed",
        t.subtasks.len(),
        t.phases.len(),
        t.dropped(),
        t.unclosed()
    );
    if let Some(p) = json {
        std::fs::write(p, t.to_chrome_json()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        said += &format!(", JSON {}", p.display());
    }
    if let Some(p) = svg {
        std::fs::write(p, t.to_svg()).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        said += &format!(", SVG {}", p.display());
    }
    Ok(said)
}
