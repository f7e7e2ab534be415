//! The files the host writes for people and tools to read back: each is a serde-derived type,
//! the same one used to write it and to read it, with a format version.
//!
//! * [`chrome`]: a run's swimlane trace as Chrome trace-event JSON ([`chrome::ChromeTrace`],
//!   written by `Trace::to_chrome_json`, version
//!   [`chrome::FORMAT_VERSION`] in `otherData.format_version`);
//! * [`manifest`]: an args-dump directory's `args_dump.json` ([`manifest::Manifest`], written
//!   when a dumping run ends, read by `Dump::open`, version
//!   [`manifest::FORMAT_VERSION`] in `format_version`).
//!
//! Reading is strict. The version is checked first: a missing version or another one is
//! [`DocumentError::Version`], naming the file, the version found and the version expected.
//! Then the whole document is parsed into its types: an unknown field, a missing field, a value
//! of the wrong type or an unknown enum name is [`DocumentError::Format`] with serde's message,
//! which names the field or the value. No field has a default: a field whose value may be
//! unknown is written as `null` and must still be present.
//!
//! Integers are written as JSON integers, which `serde_json` writes and reads exactly over the
//! whole `u64` / `i64` range. A consumer that parses JSON numbers as doubles (JavaScript's
//! `JSON.parse`, for example) rounds integers beyond 2^53 — ticks of a long-running counter, a
//! 64-bit scalar argument — to the nearest double; parse with a 64-bit integer type, or a
//! big-integer option, to keep them exact.

pub mod chrome;
pub mod manifest;

use std::path::{Path, PathBuf};
use std::string::{String, ToString};

use serde::de::DeserializeOwned;

/// Why a document could not be read.
#[derive(Debug)]
pub enum DocumentError {
    /// A file could not be read.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The document carries no format version, or another one than this reader reads.
    Version {
        /// The file.
        path: PathBuf,
        /// Where the version belongs in the document (`format_version`,
        /// `otherData.format_version`).
        field: &'static str,
        /// The version found, as its JSON text (`None`: the field is missing).
        found: Option<String>,
        /// The version this reader reads.
        expected: u32,
    },
    /// The document is not what this reader understands: not JSON, an unknown or missing
    /// field, a value of the wrong type, or contents that contradict each other.
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong (serde's message names the field or the value).
        why: String,
    },
    /// A field's value disagrees with what the rest of the document (or the data it
    /// describes) says it must be: a record count that is not `accounting.collected`, a
    /// payload length that is not its view's, a checksum that is not its payload's.
    Mismatch {
        /// The file.
        path: PathBuf,
        /// The field, as a path into the document (`records`, `records[4].payload_len`), with
        /// the record's task and argument where it is a record's.
        field: String,
        /// The value it must have, and why.
        expected: String,
        /// The value found.
        found: String,
    },
}

impl core::fmt::Display for DocumentError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DocumentError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            DocumentError::Version { path, field, found: Some(v), expected } => {
                write!(f, "{}: {field} is {v}, this reader reads version {expected}", path.display())
            }
            DocumentError::Version { path, field, found: None, expected } => {
                write!(f, "{}: no {field} (this reader reads version {expected})", path.display())
            }
            DocumentError::Format { path, why } => write!(f, "{}: {why}", path.display()),
            DocumentError::Mismatch { path, field, expected, found } => {
                write!(f, "{}: {field} is {found}, expected {expected}", path.display())
            }
        }
    }
}

impl std::error::Error for DocumentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DocumentError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl DocumentError {
    /// A [`DocumentError::Format`] about `path`.
    pub(crate) fn format(path: &Path, why: impl ToString) -> DocumentError {
        DocumentError::Format { path: path.to_path_buf(), why: why.to_string() }
    }
}

/// Parse `text` (the contents of `path`) as a `T` whose format version sits at `field` (a
/// dotted path of object keys) and must be `expected`: the version first, so a document of
/// another version is refused as such rather than by the first field that changed, then the
/// whole document, strictly.
pub(crate) fn parse_versioned<T: DeserializeOwned>(
    path: &Path,
    text: &str,
    field: &'static str,
    expected: u32,
) -> Result<T, DocumentError> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| DocumentError::format(path, e))?;
    let found = field.split('.').try_fold(&v, |at, key| at.get(key));
    match found {
        Some(n) if n.as_u64() == Some(u64::from(expected)) => {}
        _ => {
            return Err(DocumentError::Version {
                path: path.to_path_buf(),
                field,
                found: found.map(|n| n.to_string()),
                expected,
            });
        }
    }
    serde_json::from_value(v).map_err(|e| DocumentError::format(path, e))
}

/// Read the file at `path` and [`parse_versioned`] it.
pub(crate) fn read_versioned<T: DeserializeOwned>(
    path: &Path,
    field: &'static str,
    expected: u32,
) -> Result<T, DocumentError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| DocumentError::Io { path: path.to_path_buf(), source })?;
    parse_versioned(path, &text, field, expected)
}

/// A field that is always JSON `null` (serde's unit struct): kept where a version's shape has
/// one, such as a scalar record's `dtype` in the args-dump manifest.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Null;

/// (De)serialize a `u64` as a `0x`-prefixed hexadecimal string (device addresses).
pub(crate) mod hex {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};
    use std::format;
    use std::string::String;

    pub(crate) fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:#x}"))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        s.strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| D::Error::custom(format!("{s:?} is not a 0x-prefixed hexadecimal address")))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::string::{String, ToString};
    use std::vec::Vec;
    use std::{format, vec};

    use super::chrome::Phase;
    use super::chrome::{self, ChromeTrace};
    use super::manifest::{self, Accounting, ArgDirection, Manifest, ManifestRecord, Stage};
    use super::{DocumentError, Null};
    use crate::dump::DumpLevel;
    use crate::graph::DType;
    use crate::orch::RuntimeKind;

    /// The JSON string an enum value serializes to.
    fn name<T: serde::Serialize>(v: T) -> String {
        match serde_json::to_value(v).unwrap() {
            serde_json::Value::String(s) => s,
            other => panic!("not a string: {other}"),
        }
    }

    fn back<T: serde::de::DeserializeOwned>(s: &str) -> T {
        serde_json::from_value(serde_json::Value::String(s.to_string())).unwrap()
    }

    #[test]
    fn enums_serialize_as_the_names_the_rest_of_the_runtime_spells() {
        for code in 0u32..12 {
            let d = DType::try_from(code).unwrap();
            assert_eq!(name(d), d.name(), "{d:?}");
            assert_eq!(back::<DType>(&name(d)), d);
        }
        for l in [DumpLevel::Partial, DumpLevel::Hybrid, DumpLevel::Full] {
            assert_eq!(name(l), l.name());
            assert_eq!(back::<DumpLevel>(l.name()), l);
        }
        for r in [RuntimeKind::HostBuiltGraph, RuntimeKind::TensormapRing] {
            assert_eq!(name(r), r.name());
            assert_eq!(back::<RuntimeKind>(r.name()), r);
        }
        for p in Phase::ALL {
            assert_eq!(name(p), p.name());
        }
        for s in [Stage::BeforeDispatch, Stage::AfterCompletion] {
            assert_eq!(name(s), s.name());
        }
        for d in [ArgDirection::Input, ArgDirection::Output, ArgDirection::InOut] {
            assert_eq!(name(d), d.name());
        }
        for f in [chrome::Flows::Unknown, chrome::Flows::Partial, chrome::Flows::FromImage, chrome::Flows::Recorded] {
            assert_eq!(name(f), f.describe());
        }
        let e = serde_json::from_str::<DType>("\"f8\"").unwrap_err().to_string();
        assert!(e.contains("unknown variant `f8`"), "{e}");
    }

    fn manifest() -> Manifest {
        Manifest {
            format_version: manifest::FORMAT_VERSION,
            run: manifest::RunInfo { epoch: 7, runtime: RuntimeKind::TensormapRing, complete: true },
            level: DumpLevel::Full,
            bin_file: manifest::BinFile::ArgsBin,
            bin_format: manifest::BinFormat {
                layout: manifest::BinLayout::LogicalContiguous,
                byte_order: manifest::ByteOrder::LittleEndian,
            },
            records: vec![
                ManifestRecord::Tensor(manifest::TensorRecord {
                    task: 1,
                    func_ids: vec![3],
                    stage: Stage::AfterCompletion,
                    arg: 0,
                    direction: ArgDirection::InOut,
                    lane: 2,
                    seq: 9,
                    dtype: Some(DType::BF16),
                    shape: vec![2, 8],
                    strides: vec![16, 1],
                    offset: None,
                    addr: 0x1234_5678_9abc,
                    payload_offset: 32,
                    payload_len: 32,
                    payload_crc32: 0xdead_beef,
                    view_bytes: 32,
                    truncated: false,
                }),
                ManifestRecord::Scalar(manifest::ScalarRecord {
                    task: 1,
                    func_ids: vec![3],
                    stage: Stage::BeforeDispatch,
                    arg: 1,
                    direction: ArgDirection::Input,
                    lane: 2,
                    seq: 10,
                    value: u64::MAX,
                    dtype: Null,
                }),
            ],
            accounting: Accounting { total: Some(5), collected: 2, dropped: Some(3) },
        }
    }

    fn parse_manifest(text: &str) -> Result<Manifest, DocumentError> {
        super::parse_versioned(Path::new("d/args_dump.json"), text, "format_version", manifest::FORMAT_VERSION)
    }

    #[test]
    fn a_manifest_round_trips_with_exact_integers_and_the_version_one_shape() {
        let m = manifest();
        let text = serde_json::to_string_pretty(&m).unwrap();
        // The shape version 1 has always had: a scalar's `dtype` is null, the address a hex
        // string, the kind a tag, 64-bit values integers.
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["records"][0]["kind"], "tensor");
        assert_eq!(v["records"][0]["addr"], "0x123456789abc");
        assert_eq!(v["records"][0]["dtype"], "bf16");
        assert_eq!(v["records"][0]["offset"], serde_json::Value::Null);
        assert_eq!(v["records"][1]["kind"], "scalar");
        assert_eq!(v["records"][1]["dtype"], serde_json::Value::Null);
        assert_eq!(v["records"][1]["value"].as_u64(), Some(u64::MAX));
        assert!(text.contains("18446744073709551615"), "written as an integer: {text}");
        assert_eq!(v["run"]["runtime"], "trb");
        assert_eq!(v["bin_format"]["type"], "logical_contiguous");
        assert_eq!(parse_manifest(&text).unwrap(), m);
        // The unknown accounting's shape.
        let mut u = m.clone();
        u.accounting = Accounting { total: None, collected: 2, dropped: None };
        let t = serde_json::to_string(&u).unwrap();
        assert!(t.contains(r#""accounting":{"collected":2,"unknown":true}"#), "{t}");
        assert_eq!(parse_manifest(&t).unwrap(), u);
    }

    /// `text` with `from` replaced by `to` (exactly once).
    fn edit(text: &str, from: &str, to: &str) -> String {
        assert_eq!(text.matches(from).count(), 1, "{from:?} in {text}");
        text.replacen(from, to, 1)
    }

    /// A version-2 tensor record without its checksum is refused by the field's name.
    fn refused_missing_crc(text: &str) {
        let e = parse_manifest(&edit(text, r#""payload_crc32":3735928559,"#, "")).unwrap_err();
        assert!(e.to_string().contains("missing field `payload_crc32`"), "{e}");
    }

    #[test]
    fn a_manifest_of_another_version_or_with_a_bad_field_is_refused_by_name() {
        let text = serde_json::to_string(&manifest()).unwrap();
        let e = parse_manifest(&edit(&text, r#""format_version":2"#, r#""format_version":1"#)).unwrap_err();
        assert!(matches!(&e, DocumentError::Version { found: Some(f), expected: 2, .. } if f == "1"), "{e:?}");
        assert_eq!(e.to_string(), "d/args_dump.json: format_version is 1, this reader reads version 2");
        let e = parse_manifest(&edit(&text, r#""format_version":2,"#, "")).unwrap_err();
        assert_eq!(e.to_string(), "d/args_dump.json: no format_version (this reader reads version 2)");
        let e = parse_manifest(&edit(&text, r#""format_version":2"#, r#""format_version":"2""#)).unwrap_err();
        assert!(e.to_string().contains(r#"format_version is "2""#), "{e}");
        refused_missing_crc(&text);

        let refused = |from: &str, to: &str, says: &str| {
            let e = parse_manifest(&edit(&text, from, to)).unwrap_err();
            assert!(matches!(e, DocumentError::Format { .. }), "{e:?}");
            let m = e.to_string();
            assert!(m.starts_with("d/args_dump.json: ") && m.contains(says), "{from} -> {to}: {m}");
        };
        refused(r#""seq":9,"#, "", "missing field `seq`");
        refused(r#""offset":null,"#, "", "missing field `offset`");
        refused(r#""seq":9,"#, r#""seq":9,"colour":"red","#, "unknown field `colour`");
        refused(r#""dtype":"bf16""#, r#""dtype":"f8""#, "unknown variant `f8`");
        refused(r#""level":"full""#, r#""level":"most""#, "unknown variant `most`");
        refused(r#""direction":"inout""#, r#""direction":"both""#, "unknown variant `both`");
        refused(r#""stage":"after_completion""#, r#""stage":"later""#, "unknown variant `later`");
        refused(r#""kind":"scalar""#, r#""kind":"vector""#, "unknown variant `vector`");
        refused(r#""runtime":"trb""#, r#""runtime":"xyz""#, "unknown variant `xyz`");
        refused(r#""value":18446744073709551615"#, r#""value":"18446744073709551615""#, "invalid type: string");
        refused(r#""addr":"0x123456789abc""#, r#""addr":"123""#, r#""123" is not a 0x-prefixed hexadecimal"#);
        refused(r#""dropped":3"#, r#""dropped":4"#, "accounting: total 5 is not collected 2 + dropped 4");
        refused(r#""total":5,"#, "", "expected `total` and `dropped`, or `unknown: true`; found `dropped`");
        refused(r#""bin_file":"args.bin""#, r#""bin_file":"../x""#, "unknown variant `../x`");
    }

    fn parse_trace(text: &str) -> Result<ChromeTrace, DocumentError> {
        ChromeTrace::parse("t.json", text)
    }

    /// A small trace document, written by hand from the types.
    fn trace() -> ChromeTrace {
        use chrome::*;
        ChromeTrace {
            trace_events: vec![
                Event::Metadata(Metadata::ThreadName(Named {
                    pid: AICORE_PID,
                    tid: 30,
                    args: NameArgs { name: "AIV 30 (cluster 3)".into() },
                })),
                Event::Slice(Slice::Task(TaskSlice {
                    name: "add".into(),
                    pid: AICORE_PID,
                    tid: 30,
                    ts: 1.5,
                    dur: 2.0,
                    args: TaskArgs {
                        task: 4,
                        block: 0,
                        lane: 1,
                        func: Some(2),
                        start_tick: u64::MAX - 1,
                        end_tick: u64::MAX,
                        dispatch_us: Some(1.0),
                        dispatch_tick: Some(u64::MAX - 2),
                        completion_us: None,
                        completion_tick: None,
                        aicpu_thread: None,
                    },
                })),
                Event::Slice(Slice::Phase(PhaseSlice {
                    name: Phase::Supervise,
                    pid: AICPU_PID,
                    tid: 0,
                    ts: 0.0,
                    dur: 4.0,
                })),
                Event::FlowStart(FlowStart { cat: Dep::Dep, name: Dep::Dep, id: 0, pid: 1, tid: 30, ts: 1.5 }),
                Event::FlowEnd(FlowEnd {
                    bp: BindingPoint::Enclosing,
                    cat: Dep::Dep,
                    name: Dep::Dep,
                    id: 0,
                    pid: 1,
                    tid: 31,
                    ts: 4.0,
                }),
                Event::Slice(Slice::Host(HostSlice {
                    name: HostPhase::DumpDrain,
                    pid: HOST_PID,
                    tid: 1,
                    ts: 0.5,
                    dur: 0.25,
                })),
            ],
            display_time_unit: TimeUnit::Nanoseconds,
            other_data: OtherData {
                format_version: chrome::FORMAT_VERSION,
                producer: Producer::PtoRt,
                runtime: RuntimeKind::HostBuiltGraph,
                counter_hz: 50_000_000,
                origin_tick: 12,
                clusters: 24,
                aicpu_threads: 4,
                dropped_records: 0,
                unclosed_rings: 0,
                flows: Flows::FromImage,
            },
        }
    }

    #[test]
    fn a_trace_document_round_trips_in_the_chrome_shape() {
        let t = trace();
        let text = t.to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ev = &v["traceEvents"];
        assert_eq!(ev[0]["ph"], "M");
        assert_eq!(ev[0]["name"], "thread_name");
        assert_eq!(ev[1]["ph"], "X");
        assert_eq!(ev[1]["cat"], "task");
        assert_eq!(ev[1]["args"]["completion_us"], serde_json::Value::Null);
        assert_eq!(ev[1]["args"]["end_tick"].as_u64(), Some(u64::MAX));
        assert_eq!(ev[2]["cat"], "aicpu");
        assert_eq!(ev[2]["name"], "supervise");
        assert_eq!(ev[4]["bp"], "e");
        assert_eq!((&ev[5]["cat"], &ev[5]["name"], &ev[5]["pid"]), (&"host".into(), &"dump_drain".into(), &3.into()));
        assert_eq!(v["displayTimeUnit"], "ns");
        assert_eq!(v["otherData"]["format_version"], 2);
        assert_eq!(v["otherData"]["flows"], "complete: from the host-built graph image");
        assert_eq!(parse_trace(&text).unwrap(), t);
        assert_eq!(t.tasks().count(), 1);
        assert_eq!(t.phases().count(), 1);
        assert_eq!(t.host_phases().count(), 1);
        // The span: the subtasks' first start to their last end (not the host's phase).
        assert_eq!(t.span(), Some((1.5, 3.5)));
        assert_eq!(t.track_names().collect::<Vec<_>>(), vec![(1, 30, "AIV 30 (cluster 3)")]);
    }

    #[test]
    fn a_trace_of_another_version_or_with_a_bad_field_is_refused_by_name() {
        let text = trace().to_json();
        let e = parse_trace(&edit(&text, r#""format_version":2"#, r#""format_version":0"#)).unwrap_err();
        assert_eq!(e.to_string(), "t.json: otherData.format_version is 0, this reader reads version 2");
        let e = parse_trace(&edit(&text, r#""format_version":2,"#, "")).unwrap_err();
        assert_eq!(e.to_string(), "t.json: no otherData.format_version (this reader reads version 2)");
        let e = parse_trace("[]").unwrap_err();
        assert!(matches!(e, DocumentError::Version { found: None, .. }), "{e:?}");
        let e = parse_trace("{").unwrap_err();
        assert!(matches!(e, DocumentError::Format { .. }), "{e:?}");

        let refused = |from: &str, to: &str, says: &str| {
            let m = parse_trace(&edit(&text, from, to)).unwrap_err().to_string();
            assert!(m.starts_with("t.json: ") && m.contains(says), "{from} -> {to}: {m}");
        };
        refused(r#""dur":2.0,"#, "", "missing field `dur`");
        refused(r#""completion_us":null,"#, "", "missing field `completion_us`");
        refused(r#""block":0,"#, r#""block":0,"core":1,"#, "unknown field `core`");
        refused(r#""ph":"X","cat":"task""#, r#""ph":"B","cat":"task""#, "unknown variant `B`");
        refused(r#""cat":"aicpu""#, r#""cat":"gpu""#, "unknown variant `gpu`");
        refused(r#""name":"supervise""#, r#""name":"nap""#, "unknown variant `nap`");
        refused(r#""name":"dump_drain""#, r#""name":"nap""#, "unknown variant `nap`");
        refused(r#""bp":"e""#, r#""bp":"s""#, "unknown variant `s`");
        refused(r#""counter_hz":50000000,"#, "", "missing field `counter_hz`");
        refused(r#""displayTimeUnit":"ns""#, r#""displayTimeUnit":"ms""#, "unknown variant `ms`");
        refused(r#""task":4"#, r#""task":-4"#, "invalid value: integer `-4`");
    }

    #[test]
    // Miri isolates the file system: opening a file is refused before the code under test runs.
    #[cfg_attr(miri, ignore = "opens a file")]
    fn a_missing_file_is_named() {
        let e = ChromeTrace::read("/nonexistent/pto-trace.json").unwrap_err();
        assert!(matches!(e, DocumentError::Io { .. }));
        assert!(e.to_string().starts_with("/nonexistent/pto-trace.json: "), "{e}");
        let _ = format!("{e:?}");
    }
}
