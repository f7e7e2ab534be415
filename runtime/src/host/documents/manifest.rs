//! An args-dump directory's manifest, `args_dump.json`: [`Manifest`].
//!
//! The host writes it when a dumping run ends (the collector of
//! `host::dump`), and `Dump::open` reads
//! it back through the same types, refusing another [`FORMAT_VERSION`] and any field it does not
//! know or misses. The payloads it points into are in the directory's `args.bin`.

use std::path::Path;
use std::string::String;
use std::vec::Vec;
use std::{format, string::ToString};

use serde::{Deserialize, Serialize};

use super::{DocumentError, Null};
use crate::dump::DumpLevel;
use crate::graph::DType;
use crate::orch::RuntimeKind;

/// The manifest's format version, in `format_version`: raised whenever a field is renamed,
/// removed, added or changes meaning (this reader refuses any field it does not know, so an
/// added field needs a new version too).
pub const FORMAT_VERSION: u32 = 2;

/// A whole `args_dump.json`.
///
/// Version 2 added `payload_crc32` to the tensor records (version 1 had no checksum).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The run the dump is of.
    pub run: RunInfo,
    /// The level it dumped at (`"partial"`, `"hybrid"`, `"full"`).
    pub level: DumpLevel,
    /// The payload file, beside the manifest (`"args.bin"`).
    pub bin_file: BinFile,
    /// How the payloads are laid out in it.
    pub bin_format: BinFormat,
    /// One entry per record collected, sorted by task, stage, argument (then lane, sequence).
    pub records: Vec<ManifestRecord>,
    /// How much of the dump was collected.
    pub accounting: Accounting,
}

impl Manifest {
    /// Read an `args_dump.json`: its `format_version` must be [`FORMAT_VERSION`], and every
    /// field one this version has. (`Dump::open` reads a
    /// whole directory: this, `args.bin`, and the payloads' places in it.)
    pub fn read(path: impl AsRef<Path>) -> Result<Manifest, DocumentError> {
        super::read_versioned(path.as_ref(), "format_version", FORMAT_VERSION)
    }

    /// Parse a manifest's text, as [`Manifest::read`] does; `path` names where the text came
    /// from, in errors.
    pub fn parse(path: impl AsRef<Path>, text: &str) -> Result<Manifest, DocumentError> {
        super::parse_versioned(path.as_ref(), text, "format_version", FORMAT_VERSION)
    }

    /// The manifest as compact JSON text (no indentation: a dump of many records is written
    /// at the end of every run, and the text is for tools), as the host writes it.
    pub fn to_json(&self) -> String {
        // Cannot fail: every map of the document is a struct with string keys, and the only
        // `Serialize` impls that could return an error (none do) are this module's.
        serde_json::to_string(self).expect("a manifest always serializes")
    }

    /// Write the manifest's JSON text ([`Manifest::to_json`]) to `out`, streamed (no text of
    /// the whole document is built first); an I/O error is returned as it came.
    pub fn write_json(&self, out: impl std::io::Write) -> std::io::Result<()> {
        serde_json::to_writer(out, self).map_err(std::io::Error::from)
    }
}

/// One record as the collector writes it: a [`TensorRecord`] or [`ScalarRecord`] borrowed
/// from the collector's own data, so writing the thousands of records of a run allocates
/// nothing per record.
pub(crate) struct RecordOut<'a> {
    pub(crate) task: u32,
    pub(crate) func_ids: &'a [u16],
    pub(crate) stage: Stage,
    pub(crate) arg: u32,
    pub(crate) direction: ArgDirection,
    pub(crate) lane: u32,
    pub(crate) seq: u64,
    pub(crate) body: BodyOut<'a>,
}

/// The fields of [`RecordOut`] that depend on its kind.
pub(crate) enum BodyOut<'a> {
    /// [`TensorRecord`]'s own fields.
    Tensor {
        dtype: Option<DType>,
        shape: &'a [u32],
        strides: &'a [u32],
        offset: Option<u64>,
        addr: u64,
        payload_offset: u64,
        payload_len: u64,
        payload_crc32: u32,
        view_bytes: u64,
        truncated: bool,
    },
    /// [`ScalarRecord`]'s value.
    Scalar { value: u64 },
}

/// The text of `args_dump.json` before its first record: the same bytes
/// [`Manifest::write_json`] writes there for a manifest of this `run` and `level`. The
/// collector writes the document in three parts, so that the records (each made by [`render`]
/// while the run is in flight, when the host thread would otherwise wait) can reach the file
/// before the run ends: this head, the records in the manifest's order joined by `,`, and
/// [`document_tail`]. The documents' tests compare the joined text with serde's on records of
/// every shape.
pub(crate) fn document_head(run: RunInfo, level: DumpLevel) -> Vec<u8> {
    let bin_format = BinFormat { layout: BinLayout::LogicalContiguous, byte_order: ByteOrder::LittleEndian };
    let mut out = Vec::with_capacity(192);
    out.extend_from_slice(b"{\"format_version\":");
    out.extend_from_slice(itoa::Buffer::new().format(FORMAT_VERSION).as_bytes());
    out.extend_from_slice(b",\"run\":");
    serde_value(&mut out, &run);
    out.extend_from_slice(b",\"level\":");
    serde_value(&mut out, &level);
    out.extend_from_slice(b",\"bin_file\":");
    serde_value(&mut out, &BinFile::ArgsBin);
    out.extend_from_slice(b",\"bin_format\":");
    serde_value(&mut out, &bin_format);
    out.extend_from_slice(b",\"records\":[");
    out
}

/// The text of `args_dump.json` after its last record, with its `accounting` (see
/// [`document_head`]).
pub(crate) fn document_tail(accounting: Accounting, out: &mut Vec<u8>) {
    out.extend_from_slice(b"],\"accounting\":");
    serde_value(out, &accounting);
    out.push(b'}');
}

/// Append serde's JSON text of `v`: these are plain structs and enums of integers, booleans
/// and names, whose serialization into memory does not fail.
fn serde_value(out: &mut Vec<u8>, v: &impl Serialize) {
    if let Err(e) = serde_json::to_writer(&mut *out, v) {
        unreachable!("serde_json failed on a manifest field: {e}");
    }
}

/// Append the JSON text of manifest record `r` to `b` (an element of `records`, without the
/// comma between elements): every name and enum value as serde spells it (the documents'
/// tests check each name against serde's), integers through `itoa`, as `serde_json` does.
pub(crate) fn render(r: &RecordOut<'_>, b: &mut Vec<u8>) {
    let kind: &[u8] = match r.body {
        BodyOut::Tensor { .. } => b"{\"kind\":\"tensor\"",
        BodyOut::Scalar { .. } => b"{\"kind\":\"scalar\"",
    };
    b.extend_from_slice(kind);
    int(b, b",\"task\":", r.task as u64);
    list(b, b",\"func_ids\":", r.func_ids.iter().map(|&f| f as u64));
    name(b, b",\"stage\":", r.stage.name());
    int(b, b",\"arg\":", r.arg as u64);
    name(b, b",\"direction\":", r.direction.name());
    int(b, b",\"lane\":", r.lane as u64);
    int(b, b",\"seq\":", r.seq);
    match r.body {
        BodyOut::Tensor {
            dtype,
            shape,
            strides,
            offset,
            addr,
            payload_offset,
            payload_len,
            payload_crc32,
            view_bytes,
            truncated,
        } => {
            match dtype {
                Some(d) => name(b, b",\"dtype\":", d.name()),
                None => b.extend_from_slice(b",\"dtype\":null"),
            }
            list(b, b",\"shape\":", shape.iter().map(|&v| v as u64));
            list(b, b",\"strides\":", strides.iter().map(|&v| v as u64));
            match offset {
                Some(o) => int(b, b",\"offset\":", o),
                None => b.extend_from_slice(b",\"offset\":null"),
            }
            b.extend_from_slice(b",\"addr\":\"0x");
            let mut hex = [0u8; 16];
            let digits = hex_digits(addr, &mut hex);
            b.extend_from_slice(digits);
            b.push(b'"');
            int(b, b",\"payload_offset\":", payload_offset);
            int(b, b",\"payload_len\":", payload_len);
            int(b, b",\"payload_crc32\":", payload_crc32.into());
            int(b, b",\"view_bytes\":", view_bytes);
            b.extend_from_slice(if truncated { b",\"truncated\":true}" } else { b",\"truncated\":false}" });
        }
        BodyOut::Scalar { value } => {
            int(b, b",\"value\":", value);
            b.extend_from_slice(b",\"dtype\":null}");
        }
    }
}

/// `key` then `v` in decimal.
fn int(b: &mut Vec<u8>, key: &[u8], v: u64) {
    b.extend_from_slice(key);
    b.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// `key` then a JSON array of `vs`.
fn list(b: &mut Vec<u8>, key: &[u8], vs: impl Iterator<Item = u64>) {
    b.extend_from_slice(key);
    b.push(b'[');
    for (i, v) in vs.enumerate() {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }
    b.push(b']');
}

/// `key` then `n` quoted (a name of this module's enums: no character needs escaping).
fn name(b: &mut Vec<u8>, key: &[u8], n: &str) {
    b.extend_from_slice(key);
    b.push(b'"');
    b.extend_from_slice(n.as_bytes());
    b.push(b'"');
}

/// `v` in lowercase hexadecimal without leading zeros (`0` for zero), as `{:x}` writes it.
fn hex_digits(v: u64, out: &mut [u8; 16]) -> &[u8] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut i = out.len();
    let mut v = v;
    loop {
        i -= 1;
        out[i] = DIGITS[(v & 15) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    &out[i..]
}

/// `run`: which run the dump is of.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunInfo {
    /// The run's epoch on its device.
    pub epoch: u64,
    /// The runtime it ran on (`"hbg"` / `"trb"`).
    pub runtime: RuntimeKind,
    /// Whether the run ended without a fault and its collection did not fail.
    pub complete: bool,
}

/// `bin_file`: the payload file's name.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinFile {
    /// `"args.bin"`.
    #[serde(rename = "args.bin")]
    ArgsBin,
}

impl BinFile {
    /// The file name.
    pub fn name(self) -> &'static str {
        match self {
            BinFile::ArgsBin => "args.bin",
        }
    }
}

/// `bin_format`: how `args.bin` holds the payloads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BinFormat {
    /// `type`: the layout of one payload.
    #[serde(rename = "type")]
    pub layout: BinLayout,
    /// The byte order of its elements.
    pub byte_order: ByteOrder,
}

/// `bin_format.type`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinLayout {
    /// `"logical_contiguous"`: the view's elements in row-major logical order, strides
    /// removed, one payload after the other with no padding.
    #[serde(rename = "logical_contiguous")]
    LogicalContiguous,
}

/// `bin_format.byte_order`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ByteOrder {
    /// `"little_endian"`.
    #[serde(rename = "little_endian")]
    LittleEndian,
}

/// Where a record was captured.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// `"before_dispatch"`: before the task's first dispatch.
    BeforeDispatch,
    /// `"after_completion"`: after the task completed.
    AfterCompletion,
}

impl Stage {
    /// The stage's name, as the manifest spells it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::BeforeDispatch => "before_dispatch",
            Stage::AfterCompletion => "after_completion",
        }
    }
}

/// How the task used a recorded argument, from its descriptor's flags (a scalar is an input).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgDirection {
    /// `"input"`: read only.
    Input,
    /// `"output"`: written only.
    Output,
    /// `"inout"`: read and written (recorded at both stages).
    InOut,
}

impl ArgDirection {
    /// The direction's name, as the manifest spells it.
    pub fn name(self) -> &'static str {
        match self {
            ArgDirection::Input => "input",
            ArgDirection::Output => "output",
            ArgDirection::InOut => "inout",
        }
    }
}

/// One record of the manifest, by its `kind`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ManifestRecord {
    /// `"tensor"`: a tensor argument's view and its payload's place in `args.bin`.
    Tensor(TensorRecord),
    /// `"scalar"`: a scalar argument's value (no payload).
    Scalar(ScalarRecord),
}

impl ManifestRecord {
    /// The task.
    pub fn task(&self) -> u32 {
        match self {
            ManifestRecord::Tensor(t) => t.task,
            ManifestRecord::Scalar(s) => s.task,
        }
    }

    /// The argument index.
    pub fn arg(&self) -> u32 {
        match self {
            ManifestRecord::Tensor(t) => t.arg,
            ManifestRecord::Scalar(s) => s.arg,
        }
    }
}

/// A tensor argument's record. Every field is present; `null` means unknown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorRecord {
    /// The task (its id in the graph, or the device-side id on the rings runtime).
    pub task: u32,
    /// Func ids of the task's lanes that are in use.
    pub func_ids: Vec<u16>,
    /// The stage.
    pub stage: Stage,
    /// Argument index (tensors first, then scalars).
    pub arg: u32,
    /// How the task used it.
    pub direction: ArgDirection,
    /// The lane (AICPU thread) that produced the record.
    pub lane: u32,
    /// The record's sequence number in its lane.
    pub seq: u64,
    /// Element type (`null` for a code this host does not know).
    #[serde(deserialize_with = "Option::deserialize")]
    pub dtype: Option<DType>,
    /// Extents, outermost first.
    pub shape: Vec<u32>,
    /// Strides in elements, one per extent.
    pub strides: Vec<u32>,
    /// Element offset of the view in its allocation (`null` when the host knew no allocation
    /// holding it: runtime-owned memory).
    #[serde(deserialize_with = "Option::deserialize")]
    pub offset: Option<u64>,
    /// The view's device address, as a `0x`-prefixed hexadecimal string.
    #[serde(with = "super::hex")]
    pub addr: u64,
    /// Offset of the payload in `args.bin`.
    pub payload_offset: u64,
    /// Payload bytes (0 for a record without data).
    pub payload_len: u64,
    /// The CRC-32 (IEEE, as `crc32fast` computes it) of the payload's bytes in `args.bin` (0
    /// for a record without data); the reader recomputes it.
    pub payload_crc32: u32,
    /// Bytes of the whole view (more than `payload_len` when truncated).
    pub view_bytes: u64,
    /// Whether the payload is a truncated prefix of the view.
    pub truncated: bool,
}

/// A scalar argument's record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalarRecord {
    /// The task.
    pub task: u32,
    /// Func ids of the task's lanes that are in use.
    pub func_ids: Vec<u16>,
    /// The stage (always `before_dispatch`).
    pub stage: Stage,
    /// Argument index (after the tensors).
    pub arg: u32,
    /// How the task used it (`input`).
    pub direction: ArgDirection,
    /// The lane (AICPU thread) that produced the record.
    pub lane: u32,
    /// The record's sequence number in its lane.
    pub seq: u64,
    /// The raw 64-bit argument (an f32 scalar appears as its bit pattern), a JSON integer.
    pub value: u64,
    /// Always `null` (a scalar has no element type).
    pub dtype: Null,
}

/// How much of a dump was collected. `total == collected + dropped` whenever it is known.
///
/// In the manifest: `{ "total", "collected", "dropped" }` when known, `{ "unknown": true,
/// "collected" }` when not; the reader refuses anything else, and known counts that do not add
/// up.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "AccountingDoc", into = "AccountingDoc")]
pub struct Accounting {
    /// Records the device produced (committed or dropped); `None` when unknown (the run did
    /// not complete, or a lane never closed).
    pub total: Option<u64>,
    /// Records in the manifest with their payloads.
    pub collected: u64,
    /// Records lost (refused, abandoned, given up under back-pressure, or lost on the host);
    /// `None` when unknown.
    pub dropped: Option<u64>,
}

impl Accounting {
    /// Whether the counts are known.
    pub fn known(&self) -> bool {
        self.total.is_some()
    }
}

/// `accounting` as the manifest spells it: one of its two shapes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountingDoc {
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u64>,
    collected: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unknown: Option<bool>,
}

impl From<Accounting> for AccountingDoc {
    fn from(a: Accounting) -> AccountingDoc {
        match (a.total, a.dropped) {
            (Some(total), Some(dropped)) => {
                AccountingDoc { total: Some(total), collected: a.collected, dropped: Some(dropped), unknown: None }
            }
            _ => AccountingDoc { total: None, collected: a.collected, dropped: None, unknown: Some(true) },
        }
    }
}

impl TryFrom<AccountingDoc> for Accounting {
    type Error = String;

    fn try_from(d: AccountingDoc) -> Result<Accounting, String> {
        match (d.total, d.dropped, d.unknown) {
            (Some(total), Some(dropped), None) => {
                if d.collected.checked_add(dropped) != Some(total) {
                    return Err(format!(
                        "accounting: total {total} is not collected {} + dropped {dropped}",
                        d.collected
                    ));
                }
                Ok(Accounting { total: Some(total), collected: d.collected, dropped: Some(dropped) })
            }
            (None, None, Some(true)) => Ok(Accounting { total: None, collected: d.collected, dropped: None }),
            (total, dropped, unknown) => Err(format!(
                "accounting: expected `total` and `dropped`, or `unknown: true`; found{}{}{}",
                if total.is_some() { " `total`" } else { "" },
                if dropped.is_some() { " `dropped`" } else { "" },
                match unknown {
                    Some(u) => format!(" `unknown: {u}`"),
                    None if total.is_none() && dropped.is_none() => " neither".to_string(),
                    None => String::new(),
                }
            )),
        }
    }
}
