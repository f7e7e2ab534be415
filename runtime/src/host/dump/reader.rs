//! The args dump's reader: [`Dump::open`] reads a dump directory back (the manifest and
//! `args.bin`) and checks it; [`Record`] is one record of it, seen as one flat struct.

use std::collections::BTreeMap;
use std::format;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::string::{String, ToString};
use std::vec::Vec;

use super::{Accounting, ArgDirection, DocumentError, Manifest, ManifestRecord, RunInfo, Stage, TensorRecord};
use crate::dump::DumpLevel;
use crate::graph::DType;

/// One record of a dump, as read back from its manifest: a [`ManifestRecord`] of either kind
/// seen as one flat struct (a scalar has no payload, shape or address; a tensor no value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The task (its id in the graph, or the device-side id on the rings runtime).
    pub task: u32,
    /// Func ids of the task's lanes.
    pub func_ids: Vec<u16>,
    /// The stage.
    pub stage: Stage,
    /// Argument index (tensors first, then scalars).
    pub arg: u32,
    /// How the task used the argument.
    pub direction: ArgDirection,
    /// Element type (`None` for a scalar, or a tensor of a dtype code this host does not know).
    pub dtype: Option<DType>,
    /// Extents (empty for a scalar).
    pub shape: Vec<u32>,
    /// Strides in elements (empty for a scalar).
    pub strides: Vec<u32>,
    /// Element offset of the view in its allocation, when the host knew the allocation.
    pub offset: Option<u64>,
    /// The view's device address (`None` for a scalar).
    pub addr: Option<u64>,
    /// Offset of the payload in `args.bin` (0 for a scalar).
    pub payload_offset: u64,
    /// Payload bytes (0 for a scalar, or a record without data).
    pub payload_len: u64,
    /// Whether the payload is a truncated prefix.
    pub truncated: bool,
    /// Bytes of the whole view (more than `payload_len` when truncated; 0 for a scalar).
    pub view_bytes: u64,
    /// A scalar's value (`None` for a tensor).
    pub value: Option<u64>,
    /// The lane (AICPU thread) that produced the record.
    pub lane: u32,
    /// The record's sequence number in its lane.
    pub seq: u64,
}

impl Record {
    /// Whether the record is a scalar's.
    pub fn is_scalar(&self) -> bool {
        self.value.is_some()
    }
}

impl From<&ManifestRecord> for Record {
    fn from(r: &ManifestRecord) -> Record {
        match r {
            ManifestRecord::Tensor(t) => Record {
                task: t.task,
                func_ids: t.func_ids.clone(),
                stage: t.stage,
                arg: t.arg,
                direction: t.direction,
                dtype: t.dtype,
                shape: t.shape.clone(),
                strides: t.strides.clone(),
                offset: t.offset,
                addr: Some(t.addr),
                payload_offset: t.payload_offset,
                payload_len: t.payload_len,
                truncated: t.truncated,
                view_bytes: t.view_bytes,
                value: None,
                lane: t.lane,
                seq: t.seq,
            },
            ManifestRecord::Scalar(s) => Record {
                task: s.task,
                func_ids: s.func_ids.clone(),
                stage: s.stage,
                arg: s.arg,
                direction: s.direction,
                dtype: None,
                shape: Vec::new(),
                strides: Vec::new(),
                offset: None,
                addr: None,
                payload_offset: 0,
                payload_len: 0,
                truncated: false,
                view_bytes: 0,
                value: Some(s.value),
                lane: s.lane,
                seq: s.seq,
            },
        }
    }
}

/// A dump directory, read back.
#[derive(Debug)]
pub struct Dump {
    /// The records, in manifest order (task, stage, argument).
    pub records: Vec<Record>,
    /// The counts.
    pub accounting: Accounting,
    /// The level.
    pub level: DumpLevel,
    /// The run the dump is of.
    pub run: RunInfo,
    bin: Vec<u8>,
}

/// Why a dump directory could not be read: a [`DocumentError`] naming the file.
pub type DumpError = DocumentError;

impl Dump {
    /// Read `dir/args_dump.json` (its `format_version` must be [`FORMAT_VERSION`](super::FORMAT_VERSION), and every
    /// field one this version has) and `dir/args.bin`, and check the one against the other:
    ///
    /// * the manifest lists `accounting.collected` records;
    /// * every tensor record's shape and strides agree, its `view_bytes` is its dtype's size
    ///   times its extents (when the dtype is known), and its `payload_len` is the whole view,
    ///   0 (a record without data) or, when `truncated`, a shorter prefix of whole elements;
    /// * its payload lies inside `args.bin` and has the CRC-32 the manifest gives it.
    ///
    /// A disagreement is [`DocumentError::Mismatch`], naming the field, the value found and
    /// the value expected.
    pub fn open(dir: impl AsRef<Path>) -> Result<Dump, DumpError> {
        let dir = dir.as_ref();
        let mpath = dir.join("args_dump.json");
        let m = Manifest::read(&mpath)?;
        let bpath = dir.join(m.bin_file.name());
        let mut bin = Vec::new();
        File::open(&bpath)
            .and_then(|mut f| f.read_to_end(&mut bin))
            .map_err(|source| DumpError::Io { path: bpath.clone(), source })?;
        if m.records.len() as u64 != m.accounting.collected {
            return Err(DumpError::Mismatch {
                path: mpath,
                field: "records".into(),
                expected: format!("{} records (accounting.collected)", m.accounting.collected),
                found: format!("{} records", m.records.len()),
            });
        }
        let mut records = Vec::with_capacity(m.records.len());
        for (i, r) in m.records.iter().enumerate() {
            if let ManifestRecord::Tensor(t) = r {
                check_tensor(i, t, &bin, m.bin_file.name()).map_err(|c| c.at(&mpath))?;
            }
            records.push(Record::from(r));
        }
        Ok(Dump { records, accounting: m.accounting, level: m.level, run: m.run, bin })
    }

    /// The payload bytes of `r`.
    pub fn bytes(&self, r: &Record) -> &[u8] {
        &self.bin[r.payload_offset as usize..(r.payload_offset + r.payload_len) as usize]
    }

    /// The payload of `r` as elements of `T`: `None` when the record's dtype is not `T`'s (a
    /// payload is never reinterpreted as another element type) or its length is not a whole
    /// number of `T`s.
    pub fn data<T: crate::graph::Element>(&self, r: &Record) -> Option<Vec<T>> {
        if r.dtype != Some(T::DTYPE) {
            return None;
        }
        let b = self.bytes(r);
        if !b.len().is_multiple_of(core::mem::size_of::<T>()) {
            return None;
        }
        Some(b.chunks_exact(core::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned).collect())
    }

    /// The record of task `task`, argument `arg`, at `stage`.
    pub fn find(&self, task: u32, arg: u32, stage: Stage) -> Option<&Record> {
        self.records.iter().find(|r| r.task == task && r.arg == arg && r.stage == stage)
    }

    /// Records per task.
    pub fn by_task(&self) -> BTreeMap<u32, Vec<&Record>> {
        let mut m: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
        for r in &self.records {
            m.entry(r.task).or_default().push(r);
        }
        m
    }
}

/// What [`check_tensor`] found wrong, before the manifest's path is added.
enum Wrong {
    /// A [`DocumentError::Format`]'s `why`.
    Format(String),
    /// A [`DocumentError::Mismatch`]'s field, expected and found values.
    Mismatch(String, String, String),
}

impl Wrong {
    fn at(self, path: &Path) -> DumpError {
        match self {
            Wrong::Format(why) => DumpError::Format { path: path.to_path_buf(), why },
            Wrong::Mismatch(field, expected, found) => {
                DumpError::Mismatch { path: path.to_path_buf(), field, expected, found }
            }
        }
    }
}

/// Check tensor record `i` of a manifest against itself and against `bin` (the payload file,
/// named `bin_name`): see [`Dump::open`].
fn check_tensor(i: usize, t: &TensorRecord, bin: &[u8], bin_name: &str) -> Result<(), Wrong> {
    let field = |name: &str| format!("records[{i}].{name} (task {} arg {} {})", t.task, t.arg, t.stage.name());
    if t.shape.len() != t.strides.len() {
        return Err(Wrong::Format(format!(
            "task {} arg {}: {} extents but {} strides",
            t.task,
            t.arg,
            t.shape.len(),
            t.strides.len()
        )));
    }
    // The element size, when the dtype is known: the view's bytes follow from it.
    let elem = t.dtype.map(|d| u64::from(d.size()));
    if let (Some(d), Some(e)) = (t.dtype, elem) {
        let view = t.shape.iter().try_fold(e, |acc, &x| acc.checked_mul(u64::from(x)));
        if view != Some(t.view_bytes) {
            return Err(Wrong::Mismatch(
                field("view_bytes"),
                match view {
                    Some(v) => format!("{v} ({} × {:?})", d.name(), t.shape),
                    None => format!("{} × {:?}, which overflows", d.name(), t.shape),
                },
                t.view_bytes.to_string(),
            ));
        }
    }
    let whole_elements = elem.is_none_or(|e| t.payload_len.is_multiple_of(e));
    let len_ok = if t.truncated {
        // A prefix cut at the clamp: some whole elements, fewer than the view's.
        t.payload_len > 0 && t.payload_len < t.view_bytes && whole_elements
    } else {
        t.payload_len == t.view_bytes || t.payload_len == 0
    };
    if !len_ok {
        let expected = if t.truncated {
            format!(
                "a truncated prefix: more than 0 and fewer than view_bytes {}{}",
                t.view_bytes,
                elem.map(|e| format!(", a multiple of {e}")).unwrap_or_default()
            )
        } else {
            format!("view_bytes {} (the whole view) or 0 (no data)", t.view_bytes)
        };
        return Err(Wrong::Mismatch(field("payload_len"), expected, t.payload_len.to_string()));
    }
    let end = t.payload_offset.checked_add(t.payload_len);
    if end.is_none_or(|e| e > bin.len() as u64) {
        return Err(Wrong::Format(format!(
            "task {} arg {}: payload [{}, +{}) is outside {} ({} bytes)",
            t.task,
            t.arg,
            t.payload_offset,
            t.payload_len,
            bin_name,
            bin.len()
        )));
    }
    let payload = &bin[t.payload_offset as usize..(t.payload_offset + t.payload_len) as usize];
    let crc = crc32fast::hash(payload);
    if crc != t.payload_crc32 {
        return Err(Wrong::Mismatch(
            field("payload_crc32"),
            format!("{} (the CRC-32 of its {} bytes in {bin_name}, as written)", t.payload_crc32, t.payload_len),
            format!("{crc}: the payload was changed after it was written"),
        ));
    }
    Ok(())
}
