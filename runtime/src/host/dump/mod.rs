//! The args dump, host side: the lanes' storage, the collector that drains them while the run
//! is in flight, the files it writes, and [`Dump::open`], the reader.
//!
//! A dump directory holds two files:
//!
//! * `args.bin` — the payloads, appended in the order they were collected, each the view's
//!   elements in row-major logical order (little-endian, strides removed);
//! * `args_dump.json` — the manifest, a [`Manifest`] (its types, which write it and read it
//!   back, are [`super::documents::manifest`]): `format_version`, `run`, `level`, `bin_file`,
//!   `bin_format`, `records` (one per record, sorted by task, stage, argument) and
//!   `accounting`.
//!
//! The collector runs in the host thread that waits for the run ([`super::RunHandle::wait`],
//! [`super::Device::run`]), and on every [`super::RunHandle::is_done`] poll: between short
//! waits on the streams it drains every lane's ready queue, appends the payloads to
//! `args.bin`, returns the buffers to the free queue and acknowledges the payload bytes (which
//! releases the producer's back-pressure), then writes the records it placed into
//! `args_dump.json` (`manifest_file.rs`). A run launched and left alone is not drained: its
//! producer waits up to half the watchdog for room, per record, then drops the record and
//! counts it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::vec;
use std::vec::Vec;

use pto_hal::{DeviceMemory, GmAddr};
use zerocopy::{FromZeros, IntoBytes};

#[cfg(test)]
use super::documents::Null;
use super::documents::manifest::{BodyOut, RecordOut, document_head, document_tail};
use crate::dump::DumpLevel;
use crate::graph::DType;
use crate::layout::{
    DUMP_MAGIC, DumpHeader, DumpLaneState, DumpLayout, DumpReady, DumpRecord, dump_direction, dump_flags, dump_stage,
};

mod manifest_file;
mod reader;
use manifest_file::ManifestFile;
pub use reader::{Dump, DumpError, Record};

pub use super::documents::DocumentError;
pub use super::documents::manifest::{
    Accounting, ArgDirection, BinFile, BinFormat, BinLayout, ByteOrder, FORMAT_VERSION, Manifest, ManifestRecord,
    RunInfo, ScalarRecord, Stage, TensorRecord,
};

/// Default payload arena per lane (bytes).
pub const DEFAULT_ARENA: u64 = 16 << 20;
/// Metadata buffers per lane.
pub const BUFFERS: u32 = 8;
/// Records per metadata buffer.
pub const RECORDS: u32 = 64;
/// Smallest arena a run may ask for.
pub const MIN_ARENA: u64 = 4096;
/// Largest arena a run may ask for (per lane).
pub const MAX_ARENA: u64 = 1 << 36;

/// The header of a run's dump region (the host writes it before launch).
pub(crate) fn header(level: DumpLevel, lanes: u32, arena: u64, wait_ticks: u64, epoch: u64) -> DumpHeader {
    DumpHeader {
        magic: DUMP_MAGIC,
        level: level.into(),
        lanes,
        buffers: BUFFERS,
        records: RECORDS,
        reserved0: 0,
        arena,
        wait_ticks,
        epoch,
        reserved: [0; 2],
    }
}

/// Write the region's initial state: the header, zeroed lanes, and every lane's free queue
/// holding all its buffers.
pub(crate) fn initialize<D: DeviceMemory>(dev: &D, l: &DumpLayout) -> Result<(), D::Error> {
    let h = &l.header;
    for t in 0..h.lanes {
        // State, ack and the two rings: the metadata buffers and the arena need no clearing
        // (nothing is read there before it is written).
        dev.memset(GmAddr(l.lane(t)), 0, l.buffer(t, 0) - l.lane(t))?;
        let free: Vec<u8> = (0..h.buffers as u64).flat_map(|b| b.to_le_bytes()).collect();
        dev.copy_h2d(GmAddr(l.free(t, 0)), &free)?;
        dev.copy_h2d(GmAddr(l.ack(t) + 16), &(h.buffers as u64).to_le_bytes())?;
    }
    dev.copy_h2d(GmAddr(l.base), h.as_bytes())
}

/// What a run's args dump produced (in [`super::RunReport::dump`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpReport {
    /// The directory holding `args_dump.json` and `args.bin`.
    pub dir: PathBuf,
    /// The level the run dumped at.
    pub level: DumpLevel,
    /// The counts.
    pub accounting: Accounting,
    /// Payload bytes written to `args.bin`.
    pub payload_bytes: u64,
}

/// One record the collector took: its lane, the record, where its payload went in `args.bin`
/// and where its manifest text is in the collector's text.
struct Collected {
    lane: u32,
    rec: DumpRecord,
    /// Offset in `args.bin`.
    bin: u64,
    /// The payload's CRC-32 (0 for a record without data).
    crc: u32,
    /// Its manifest record's text, in [`Collector::text`].
    text: std::ops::Range<usize>,
}

#[derive(Clone, Default)]
struct LaneCursor {
    ready_head: u64,
    free_tail: u64,
}

/// The host memory a collector fills, kept by its pipeline slot for the slot's next dumping
/// run: a run's record list and manifest text reach hundreds of kilobytes, and fresh memory
/// every run cost a page fault per page and a copy per doubling while the run was in flight.
#[derive(Default)]
pub(crate) struct CollectorBuffers {
    records: Vec<Collected>,
    text: Vec<u8>,
    scratch: Vec<u8>,
    order: Vec<(SortKey, u32)>,
    /// The bytes of one write of the manifest's file.
    writes: Vec<u8>,
}

/// The most bytes one of a slot's kept buffers may hold between runs: one very large dump
/// does not pin its memory for the device's lifetime (a full dump of 100 000 tasks writes
/// about 50 MiB of manifest text; 1000 tasks, half a megabyte).
pub(crate) const KEPT_BUFFER_BYTES: usize = 16 << 20;

impl CollectorBuffers {
    /// These buffers, less any that holds more than [`KEPT_BUFFER_BYTES`] (freed).
    fn bounded(self) -> CollectorBuffers {
        fn keep<T>(v: Vec<T>) -> Vec<T> {
            if v.capacity() * core::mem::size_of::<T>() > KEPT_BUFFER_BYTES { Vec::new() } else { v }
        }
        CollectorBuffers {
            records: keep(self.records),
            text: keep(self.text),
            scratch: keep(self.scratch),
            order: keep(self.order),
            writes: keep(self.writes),
        }
    }
}

/// Drains a run's lanes into its dump directory.
pub(crate) struct Collector {
    l: DumpLayout,
    level: DumpLevel,
    /// The run as its success records it (`complete`): the head the manifest's records follow
    /// while the run is in flight.
    run: RunInfo,
    dir: PathBuf,
    bin: BufWriter<File>,
    bin_len: u64,
    /// `args.bin`'s length when it was opened ([`cut`]).
    bin_old_len: u64,
    /// `args_dump.json`, opened at the first drain (while the run is in flight) or at the end;
    /// every drain writes the records it placed.
    manifest: Option<ManifestFile>,
    /// The manifest file's write buffer until the file is opened.
    writes: Vec<u8>,
    /// How many of `records` have their place in `order`.
    sorted: usize,
    records: Vec<Collected>,
    /// The manifest's order of the first `sorted` of `records`: kept sorted at every drain,
    /// while the run is in flight, so the end has only the last drain's records to place.
    order: Vec<(SortKey, u32)>,
    lanes: Vec<LaneCursor>,
    /// Records whose payload could not be taken (corrupt entry or record).
    host_dropped: u64,
    scratch: Vec<u8>,
    /// The manifest text of every collected record, made as it is collected (while the run is
    /// in flight and this thread would otherwise wait), in collection order; the manifest's
    /// file takes them in the manifest's order, at every drain and at the end.
    text: Vec<u8>,
    /// How many of `records` have their text made.
    rendered: usize,
}

/// A collector failure: a file that could not be written or a device read that failed.
#[derive(Debug)]
pub(crate) enum CollectError<E> {
    Io(std::io::Error),
    Device(E),
}

impl Collector {
    /// Create the directory and `args.bin`; the collector fills `reuse` (emptied first). `run`
    /// is the run as its success records it (`complete: true`).
    pub(crate) fn create(
        l: DumpLayout,
        level: DumpLevel,
        run: RunInfo,
        dir: &Path,
        reuse: CollectorBuffers,
    ) -> std::io::Result<Collector> {
        std::fs::create_dir_all(dir)?;
        let Overwritten { file, old_len: bin_old_len } = overwrite(&dir.join("args.bin"))?;
        hold(&file)?;
        let bin = BufWriter::new(file);
        let CollectorBuffers { mut records, mut text, mut scratch, mut order, writes } = reuse;
        records.clear();
        text.clear();
        scratch.clear();
        order.clear();
        Ok(Collector {
            lanes: vec![LaneCursor { ready_head: 0, free_tail: l.header.buffers as u64 }; l.header.lanes as usize],
            l,
            level,
            run,
            dir: dir.to_path_buf(),
            bin,
            bin_len: 0,
            bin_old_len,
            manifest: None,
            writes,
            sorted: 0,
            records,
            order,
            host_dropped: 0,
            scratch,
            text,
            rendered: 0,
        })
    }

    /// The memory this collector filled, for the next one (a buffer larger than
    /// [`KEPT_BUFFER_BYTES`] is freed instead).
    pub(crate) fn into_buffers(self) -> CollectorBuffers {
        CollectorBuffers {
            records: self.records,
            text: self.text,
            scratch: self.scratch,
            order: self.order,
            writes: self.writes,
        }
        .bounded()
    }

    /// Take every buffer the lanes published so far; returns how many. `locate` gives the base
    /// of the allocation holding an address (the manifest's element offsets).
    pub(crate) fn drain<D: DeviceMemory>(
        &mut self,
        dev: &D,
        locate: Locate<'_>,
    ) -> Result<usize, CollectError<D::Error>> {
        let mut n = 0;
        for t in 0..self.l.header.lanes {
            let tail = dev.load_word(GmAddr(self.l.lane(t))).map_err(CollectError::Device)?;
            while self.lanes[t as usize].ready_head < tail {
                self.take(dev, t, locate)?;
                n += 1;
            }
        }
        // The host would otherwise wait: the manifest's file, its order and its records are
        // written now.
        if self.manifest.is_none() {
            let head = document_head(self.run, self.level);
            let path = self.dir.join("args_dump.json");
            let m = ManifestFile::open(&path, head, core::mem::take(&mut self.writes)).map_err(CollectError::Io)?;
            self.manifest = Some(m);
        }
        let moved = self.place();
        let (order, records, text) = (&self.order, &self.records, &self.text);
        if let Some(m) = &mut self.manifest {
            let text_at = |k: usize| &text[records[order[k].1 as usize].text.clone()];
            m.reordered_from(moved, text_at);
            m.extend(order.len(), text_at).map_err(CollectError::Io)?;
        }
        Ok(n)
    }

    fn take<D: DeviceMemory>(&mut self, dev: &D, t: u32, locate: Locate<'_>) -> Result<(), CollectError<D::Error>> {
        let h = self.l.header;
        let head = self.lanes[t as usize].ready_head;
        let mut e = DumpReady::new_zeroed();
        dev.copy_d2h(e.as_mut_bytes(), GmAddr(self.l.ready(t, head))).map_err(CollectError::Device)?;
        if e.buffer < h.buffers && e.count <= h.records {
            let mut recs = vec![DumpRecord::new_zeroed(); e.count as usize];
            dev.copy_d2h(recs.as_mut_slice().as_mut_bytes(), GmAddr(self.l.buffer(t, e.buffer)))
                .map_err(CollectError::Device)?;
            for rec in recs {
                self.record(dev, t, rec)?;
            }
        } else {
            // A corrupt entry: its records are unknown; nothing of it is read.
            self.host_dropped += e.count.min(h.records) as u64;
        }
        // Give the buffer back, then the payload bytes, then the entry.
        let c = &mut self.lanes[t as usize];
        if e.buffer < h.buffers {
            dev.store_word(GmAddr(self.l.free(t, c.free_tail)), e.buffer as u64).map_err(CollectError::Device)?;
            c.free_tail += 1;
            dev.store_word(GmAddr(self.l.ack(t) + 16), c.free_tail).map_err(CollectError::Device)?;
        }
        dev.store_word(GmAddr(self.l.ack(t) + 8), e.end).map_err(CollectError::Device)?;
        c.ready_head += 1;
        dev.store_word(GmAddr(self.l.ack(t)), c.ready_head).map_err(CollectError::Device)?;
        // The manifest text last, once the producer has its buffer and bytes back.
        self.render(locate);
        Ok(())
    }

    /// Give the records collected since the last call their place in the manifest's order,
    /// sorted by key and index (a lane's sequence numbers are unique, so the order is total:
    /// what a stable sort of the records gives). The order so far is one sorted run and the
    /// new records another: the stable sort merges them. Returns the first position of the
    /// order that changed (its length when nothing did).
    fn place(&mut self) -> usize {
        if self.sorted == self.records.len() {
            return self.order.len();
        }
        let from = self.order.len();
        self.order.extend(self.records[self.sorted..].iter().zip(self.sorted..).map(|(c, i)| (sort_key(c), i as u32)));
        self.order[from..].sort_unstable();
        // Everything before the first new record stays in place.
        let lowest = self.order[from];
        let moved = self.order[..from].partition_point(|e| *e < lowest);
        // Records taken in order (a chain's) need no merge.
        if moved < from {
            self.order.sort();
        }
        self.sorted = self.records.len();
        moved
    }

    /// Make the manifest text of the records collected since the last call.
    fn render(&mut self, locate: Locate<'_>) {
        for c in &mut self.records[self.rendered..] {
            let start = self.text.len();
            render_record(c, locate, &mut self.text);
            c.text = start..self.text.len();
        }
        self.rendered = self.records.len();
    }

    fn record<D: DeviceMemory>(&mut self, dev: &D, t: u32, rec: DumpRecord) -> Result<(), CollectError<D::Error>> {
        let size = self.l.header.arena;
        let len = rec.payload_len;
        let sound = len <= size / 2 && rec.ndims <= 5 && (rec.payload_offset % size) + len <= size;
        if !sound {
            self.host_dropped += 1;
            return Ok(());
        }
        let bin = self.bin_len;
        let mut crc = 0;
        if len > 0 {
            self.scratch.resize(len as usize, 0);
            let at = GmAddr(self.l.arena(t) + rec.payload_offset % size);
            dev.copy_d2h(&mut self.scratch, at).map_err(CollectError::Device)?;
            self.bin.write_all(&self.scratch).map_err(CollectError::Io)?;
            self.bin_len += len;
            crc = crc32fast::hash(&self.scratch);
        }
        self.records.push(Collected { lane: t, rec, bin, crc, text: 0..0 });
        Ok(())
    }

    /// Final drain (when the run completed), then the lanes' counters, then the manifest.
    /// `complete` is whether the run ended without a fault; a run that did not complete
    /// reports its accounting as unknown.
    pub(crate) fn finish<D: DeviceMemory>(
        &mut self,
        dev: &D,
        complete: bool,
        run: RunInfo,
        locate: Locate<'_>,
    ) -> Result<DumpReport, CollectError<D::Error>> {
        let mut totals = Some((0u64, 0u64));
        if complete {
            self.drain(dev, locate)?;
            for t in 0..self.l.header.lanes {
                let mut s = DumpLaneState::new_zeroed();
                dev.copy_d2h(s.as_mut_bytes(), GmAddr(self.l.lane(t))).map_err(CollectError::Device)?;
                totals = match totals {
                    Some((c, d))
                        if s.closed == self.l.header.epoch && s.ready_tail == self.lanes[t as usize].ready_head =>
                    {
                        Some((c + s.committed, d + s.dropped))
                    }
                    _ => None,
                };
            }
        } else {
            totals = None;
        }
        let bin_old_len = self.bin_old_len;
        self.bin.flush().and_then(|()| cut(self.bin.get_mut(), bin_old_len)).map_err(CollectError::Io)?;
        let collected = self.records.len() as u64;
        let accounting = match totals {
            Some((committed, dropped)) if committed == collected + self.host_dropped => {
                Accounting { total: Some(committed + dropped), collected, dropped: Some(dropped + self.host_dropped) }
            }
            _ => Accounting { total: None, collected, dropped: None },
        };
        // Any record a failed drain left without its text (it stopped between the two).
        self.render(locate);
        let moved = self.place();
        let head = document_head(run, self.level);
        let mut tail = Vec::with_capacity(96);
        document_tail(accounting, &mut tail);
        let mut m = match self.manifest.take() {
            Some(m) => m,
            None => {
                ManifestFile::open(&self.dir.join("args_dump.json"), head.clone(), core::mem::take(&mut self.writes))
                    .map_err(CollectError::Io)?
            }
        };
        let (order, records, text) = (&self.order, &self.records, &self.text);
        let text_at = |k: usize| &text[records[order[k].1 as usize].text.clone()];
        m.reordered_from(moved, text_at);
        self.writes = m.finish(&head, order.len(), text_at, &tail).map_err(CollectError::Io)?;
        Ok(DumpReport { dir: self.dir.clone(), level: self.level, accounting, payload_bytes: self.bin_len })
    }
}

/// The stage of a device record's stage code.
fn stage_of(s: u8) -> Stage {
    if s == dump_stage::AFTER_COMPLETION { Stage::AfterCompletion } else { Stage::BeforeDispatch }
}

/// The direction of a device record's direction code.
fn direction_of(d: u8) -> ArgDirection {
    match d {
        dump_direction::OUTPUT => ArgDirection::Output,
        dump_direction::INOUT => ArgDirection::InOut,
        _ => ArgDirection::Input,
    }
}

/// A file opened by [`overwrite`]: the file, and its length when it was opened.
struct Overwritten {
    file: File,
    old_len: u64,
}

/// Open `path` for writing from its start, creating it if needed but not truncating it: a
/// dumping run that writes the same directory again rewrites the previous file's pages in
/// place (the host keeps them cached) instead of freeing them and allocating new ones; [`cut`]
/// drops what is left of the old text past the new.
fn overwrite(path: &Path) -> std::io::Result<Overwritten> {
    let file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path)?;
    let old_len = file.metadata()?.len();
    Ok(Overwritten { file, old_len })
}

/// Hold a dump directory for one collector: an exclusive lock on its open `args.bin`, taken
/// before anything is written and released when the collector (and so the file) is dropped.
/// Two runs writing one directory at once would interleave both files (pipelined runs of one
/// device given the same `dump_dir`, two devices, or two processes): the second is refused,
/// and the first's files are untouched. A file system without locks holds nothing.
fn hold(f: &File) -> std::io::Result<()> {
    match f.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(std::io::Error::new(
            std::io::ErrorKind::ResourceBusy,
            "another run is writing its args dump into this directory (its args.bin is locked)",
        )),
        Err(std::fs::TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => Ok(()),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// End a file written through [`overwrite`] where the writing ended (`old_len`: its length
/// when it was opened). Only a shorter text is cut: a truncation is a file-system transaction
/// (tens of microseconds on the host's ext4), and a text at least as long as the old one has
/// replaced all of it.
fn cut(f: &mut File, old_len: u64) -> std::io::Result<()> {
    use std::io::Seek;
    let len = f.stream_position()?;
    if len < old_len { f.set_len(len) } else { Ok(()) }
}

/// Where a record goes in the manifest: by task, stage, argument, then lane and sequence.
type SortKey = (u32, u8, u16, u32, u64);

fn sort_key(c: &Collected) -> SortKey {
    (c.rec.task, c.rec.stage, c.rec.arg, c.lane, c.rec.seq)
}

/// The base address of the allocation holding an address, if any.
pub(crate) type Locate<'a> = &'a dyn Fn(u64) -> Option<u64>;

/// Append `c`'s manifest record to `out`: the text of the [`ManifestRecord`] that
/// `manifest_record` (the unit tests') makes of it, without building it.
fn render_record(c: &Collected, locate: Locate<'_>, out: &mut Vec<u8>) {
    let r = &c.rec;
    let n = (r.ndims as usize).min(5);
    let mut ids = r.func_ids;
    let mut k = 0;
    for i in 0..ids.len() {
        if ids[i] != crate::layout::NO_FUNC {
            ids[k] = ids[i];
            k += 1;
        }
    }
    let body = if r.flags & dump_flags::SCALAR != 0 {
        BodyOut::Scalar { value: r.scalar }
    } else {
        let elem = r.elem_bytes.max(1) as u64;
        BodyOut::Tensor {
            dtype: DType::try_from(r.dtype).ok(),
            shape: &r.shape[..n],
            strides: &r.strides[..n],
            offset: locate(r.addr).map(|base| (r.addr - base) / elem),
            addr: r.addr,
            payload_offset: c.bin,
            payload_len: r.payload_len,
            payload_crc32: c.crc,
            view_bytes: r.view_bytes,
            truncated: r.flags & dump_flags::TRUNCATED != 0,
        }
    };
    let r = RecordOut {
        task: r.task,
        func_ids: &ids[..k],
        stage: stage_of(r.stage),
        arg: r.arg.into(),
        direction: direction_of(r.direction),
        lane: c.lane,
        seq: r.seq,
        body,
    };
    super::documents::manifest::render(&r, out)
}

/// `c` as the manifest's owned record (what [`write_record`] writes; the tests compare them).
#[cfg(test)]
fn manifest_record(c: &Collected, locate: &dyn Fn(u64) -> Option<u64>) -> ManifestRecord {
    let r = &c.rec;
    let n = (r.ndims as usize).min(5);
    let func_ids: Vec<u16> = r.func_ids.iter().copied().filter(|&f| f != crate::layout::NO_FUNC).collect();
    if r.flags & dump_flags::SCALAR != 0 {
        return ManifestRecord::Scalar(ScalarRecord {
            task: r.task,
            func_ids,
            stage: stage_of(r.stage),
            arg: r.arg.into(),
            direction: direction_of(r.direction),
            lane: c.lane,
            seq: r.seq,
            value: r.scalar,
            dtype: Null,
        });
    }
    let elem = r.elem_bytes.max(1) as u64;
    ManifestRecord::Tensor(TensorRecord {
        task: r.task,
        func_ids,
        stage: stage_of(r.stage),
        arg: r.arg.into(),
        direction: direction_of(r.direction),
        lane: c.lane,
        seq: r.seq,
        dtype: DType::try_from(r.dtype).ok(),
        shape: r.shape[..n].to_vec(),
        strides: r.strides[..n].to_vec(),
        offset: locate(r.addr).map(|base| (r.addr - base) / elem),
        addr: r.addr,
        payload_offset: c.bin,
        payload_len: r.payload_len,
        payload_crc32: c.crc,
        view_bytes: r.view_bytes,
        truncated: r.flags & dump_flags::TRUNCATED != 0,
    })
}

/// A fresh directory `<temp>/pto-<name>-<process>` for a unit test's files.
#[cfg(test)]
fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(std::format!("pto-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of every shape the collector meets: tensors of each rank with and without a
    /// known allocation, an unknown element type, truncated, with one to three func ids and
    /// none; scalars; at both stages and every direction, in an order the sort must fix.
    fn samples() -> Vec<Collected> {
        let mut out = Vec::new();
        for i in 0..24u32 {
            let mut r = DumpRecord::new_zeroed();
            r.task = 40 - (i * 7) % 23;
            r.arg = (i % 4) as u16;
            r.stage = if i % 3 == 0 { dump_stage::AFTER_COMPLETION } else { 0 };
            r.direction = [dump_direction::OUTPUT, dump_direction::INOUT, 0][i as usize % 3];
            r.func_ids = [crate::layout::NO_FUNC; 3];
            for k in 0..(i % 4) as usize {
                r.func_ids[(k + i as usize) % 3] = (k as u16) * 1000 + i as u16;
            }
            r.seq = (i as u64) * 0x1_0000_0001 % 97;
            if i % 5 == 4 {
                r.flags = dump_flags::SCALAR;
                r.scalar = u64::MAX - i as u64 * 12345;
            } else {
                r.flags = if i % 6 == 1 { dump_flags::TRUNCATED } else { 0 };
                r.dtype = if i % 7 == 6 { 0xdead } else { [0u32, 1, 2, 3][i as usize % 4] };
                r.elem_bytes = 4;
                r.addr = if i == 0 { 0 } else { 0x1_0000_0000 + i as u64 * 0x1234_5678 };
                r.ndims = i % 6;
                for d in 0..5 {
                    r.shape[d] = i * 3 + d as u32;
                    r.strides[d] = if i % 2 == 0 { u32::MAX - d as u32 } else { d as u32 };
                }
                r.payload_len = i as u64 * 64;
                r.view_bytes = i as u64 * 100;
            }
            out.push(Collected {
                lane: i % 3,
                rec: r,
                bin: i as u64 * 4096,
                crc: i.wrapping_mul(0x9e37_79b9),
                text: 0..0,
            });
        }
        out
    }

    /// A slot keeps a collector's buffers for its next run only up to a bound each: a buffer
    /// past it is freed, one within it is kept with its memory.
    #[test]
    fn a_slot_keeps_no_buffer_past_the_bound() {
        let big = Vec::<u8>::with_capacity(KEPT_BUFFER_BYTES + 1);
        let small = Vec::<u8>::with_capacity(4096);
        let order = Vec::<(SortKey, u32)>::with_capacity(KEPT_BUFFER_BYTES / 24 + 1);
        let b =
            CollectorBuffers { records: Vec::new(), text: big, scratch: small, order, writes: Vec::new() }.bounded();
        assert_eq!(b.text.capacity(), 0, "a text buffer past the bound is freed");
        assert_eq!(b.order.capacity(), 0, "the bound counts bytes, not elements");
        assert!(b.scratch.capacity() >= 4096, "a buffer within the bound is kept");
    }

    /// A file rewritten through `overwrite` and `cut` holds the new text alone, whether the
    /// old one was longer or shorter (a dumping run into a directory an earlier, larger dump
    /// wrote leaves no stale tail).
    #[test]
    #[cfg_attr(miri, ignore = "opens a file")]
    fn an_overwritten_file_holds_only_the_new_text() {
        let dir = scratch_dir("overwrite");
        let path = dir.join("f");
        // Shorter (cut), empty, longer (nothing to cut), as long (nothing to cut), shorter again.
        for text in ["a long first text", "short", "", "longer than the one before", "as long as the one before!", "x"]
        {
            let Overwritten { mut file, old_len } = overwrite(&path).unwrap();
            file.write_all(text.as_bytes()).unwrap();
            cut(&mut file, old_len).unwrap();
            drop(file);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The collector's record-by-record text is the text of the `Manifest` of the same
    /// records, byte for byte (so the reader, which parses `Manifest`, reads what the collector
    /// writes), for both accounting shapes.
    #[test]
    fn the_streamed_manifest_is_the_serde_manifest() {
        let recs = samples();
        let locate = |a: u64| (!a.is_multiple_of(3) && a != 0).then_some(a - (a % 0x1000));
        let run = RunInfo { epoch: 7, runtime: crate::orch::RuntimeKind::TensormapRing, complete: true };
        for accounting in [
            Accounting { total: Some(30), collected: 24, dropped: Some(6) },
            Accounting { total: None, collected: 24, dropped: None },
        ] {
            // As the collector does: each record's text made in collection order, then the
            // texts written in the manifest's order.
            let (mut text, mut at) = (Vec::new(), Vec::new());
            for c in &recs {
                let start = text.len();
                render_record(c, &locate, &mut text);
                at.push(start..text.len());
            }
            let mut order: Vec<(SortKey, u32)> =
                recs.iter().enumerate().map(|(i, c)| (sort_key(c), i as u32)).collect();
            order.sort_unstable();
            let mut doc = document_head(run, DumpLevel::Full);
            for (k, &(_, i)) in order.iter().enumerate() {
                if k > 0 {
                    doc.push(b',');
                }
                doc.extend_from_slice(&text[at[i as usize].clone()]);
            }
            document_tail(accounting, &mut doc);
            let streamed = std::string::String::from_utf8(doc).unwrap();

            let mut sorted: Vec<&Collected> = recs.iter().collect();
            sorted.sort_by_key(|c| (c.rec.task, c.rec.stage, c.rec.arg, c.lane, c.rec.seq));
            let m = Manifest {
                format_version: FORMAT_VERSION,
                run,
                level: DumpLevel::Full,
                bin_file: BinFile::ArgsBin,
                bin_format: BinFormat { layout: BinLayout::LogicalContiguous, byte_order: ByteOrder::LittleEndian },
                records: sorted.iter().map(|c| manifest_record(c, &locate)).collect(),
                accounting,
            };
            assert_eq!(streamed, m.to_json());
            assert_eq!(Manifest::parse("streamed", &streamed).unwrap(), m);
        }
    }
}
