//! `args_dump.json` while its run is in flight: the records reach the file at every drain, so
//! the end of the run writes only the document's head, the last records and the tail.
//!
//! The manifest lists its records sorted (by task, stage, argument, lane, sequence) and a
//! drain may take records that sort before ones already written (a task that completed late),
//! so the file holds a *prefix* of the manifest's order at its final offsets: a drain that
//! places records inside the prefix shortens it to the first place that changed, and the next
//! write starts there. The head the records follow is the one a successful run writes
//! (`"complete":true`); a run that ends otherwise has a longer head, and its end writes the
//! whole document again. What the file holds before the end is not a document (no tail, and
//! possibly the old text past the prefix): only [`ManifestFile::finish`] makes it one.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::vec::Vec;

use super::{Overwritten, cut, overwrite};

/// The manifest's file and how much of the manifest's order is in it.
pub(super) struct ManifestFile {
    file: File,
    /// The file's length when it was opened (what [`cut`] may have to drop).
    old_len: u64,
    /// The head the written records follow: a successful run's.
    head: Vec<u8>,
    /// How many records of the manifest's order the file holds at their final offsets.
    written: usize,
    /// The offset past them (past the head when there are none).
    end: u64,
    /// The bytes of one write.
    buf: Vec<u8>,
}

impl ManifestFile {
    /// Open (or create) `path` for a document whose records follow `head` (see [`overwrite`]:
    /// the old text is replaced in place and cut at the end).
    pub(super) fn open(path: &Path, head: Vec<u8>, buf: Vec<u8>) -> std::io::Result<ManifestFile> {
        let Overwritten { file, old_len } = overwrite(path)?;
        let end = head.len() as u64;
        Ok(ManifestFile { file, old_len, head, written: 0, end, buf })
    }

    /// The manifest's order changed from position `at` on (a drain placed records there):
    /// records written from there are not in their places. `text(k)` is the text of the record
    /// now at position `k`.
    pub(super) fn reordered_from<'t>(&mut self, at: usize, text: impl Fn(usize) -> &'t [u8]) {
        if at < self.written {
            self.written = at;
            self.end = self.head.len() as u64 + (0..at).map(|k| text(k).len() as u64 + (k > 0) as u64).sum::<u64>();
        }
    }

    /// Write the records at positions `written..upto` of the manifest's order after those the
    /// file holds; `text(k)` is the text of the record at position `k`. A failed write leaves
    /// nothing counted as written (the end writes the whole document).
    pub(super) fn extend<'t>(&mut self, upto: usize, text: impl Fn(usize) -> &'t [u8]) -> std::io::Result<()> {
        if upto <= self.written {
            return Ok(());
        }
        self.buf.clear();
        join(&mut self.buf, self.written..upto, &text);
        let at = self.end;
        match write_at(&mut self.file, at, &self.buf) {
            Ok(()) => {
                self.written = upto;
                self.end += self.buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.forget();
                Err(e)
            }
        }
    }

    /// Make the file the document: `head` (the run's own), the records of the order's `n`
    /// positions not yet written, `tail`; then cut the old text past it. Returns the buffer
    /// for the next run.
    pub(super) fn finish<'t>(
        mut self,
        head: &[u8],
        n: usize,
        text: impl Fn(usize) -> &'t [u8],
        tail: &[u8],
    ) -> std::io::Result<Vec<u8>> {
        if head != self.head.as_slice() {
            // Another head moves every record: write them all after it.
            self.head.clear();
            self.head.extend_from_slice(head);
            self.forget();
        }
        self.buf.clear();
        let at = if self.written == 0 {
            self.buf.extend_from_slice(head);
            0
        } else {
            write_at(&mut self.file, 0, head)?;
            self.end
        };
        join(&mut self.buf, self.written..n, &text);
        self.buf.extend_from_slice(tail);
        write_at(&mut self.file, at, &self.buf)?;
        cut(&mut self.file, self.old_len)?;
        Ok(self.buf)
    }

    /// Count nothing as written.
    fn forget(&mut self) {
        self.written = 0;
        self.end = self.head.len() as u64;
    }
}

/// Append the records at `positions` to `out`, each but the manifest's first after a `,`.
fn join<'t>(out: &mut Vec<u8>, positions: core::ops::Range<usize>, text: &impl Fn(usize) -> &'t [u8]) {
    for k in positions {
        if k > 0 {
            out.push(b',');
        }
        out.extend_from_slice(text(k));
    }
}

/// Write all of `bytes` at offset `at`, leaving the file's position past them.
fn write_at(f: &mut File, at: u64, bytes: &[u8]) -> std::io::Result<()> {
    f.seek(SeekFrom::Start(at))?;
    f.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;
    use std::{format, vec};

    /// The document of `texts` in order, written at once.
    fn whole(head: &[u8], texts: &[Vec<u8>], tail: &[u8]) -> Vec<u8> {
        let mut out = head.to_vec();
        join(&mut out, 0..texts.len(), &|k| texts[k].as_slice());
        out.extend_from_slice(tail);
        out
    }

    /// Records placed over several drains, many of them before records already written (every
    /// third drain places one before all of them), into a file that held a longer old text:
    /// the finished file is the document written at once, whether the run ends with the head
    /// the records were written after or with another (longer) one, and the prefix written in
    /// flight is kept where nothing was placed inside it.
    #[test]
    #[cfg_attr(miri, ignore = "opens a file")]
    fn the_file_written_in_flight_is_the_document_written_at_once() {
        let dir = super::super::scratch_dir("manifest-file");
        let path = dir.join("args_dump.json");
        let expected_head = b"{\"head\":true,\"records\":[".to_vec();
        let failed_head = b"{\"head\":false,\"records\":[".to_vec();
        let tail = b"]}".to_vec();
        for head in [&expected_head, &failed_head] {
            std::fs::write(&path, vec![b'#'; 64 << 10]).unwrap();
            let mut m = ManifestFile::open(&path, expected_head.clone(), Vec::new()).unwrap();
            // The manifest's order, each record's text keyed by its sort key.
            let mut order: Vec<(u32, Vec<u8>)> = Vec::new();
            let mut key = 7u32;
            let mut kept = 0;
            for drain in 0..40u32 {
                let before = m.written;
                let mut moved = order.len();
                for r in 0..5u32 {
                    key = key.wrapping_mul(2_654_435_761).wrapping_add(drain * 5 + r);
                    let k = if drain % 3 == 2 && r == 0 { 0 } else { 1_000_000 + drain * 1000 + key % 900 };
                    let text = format!("{{\"k\":{k},\"pad\":\"{}\"}}", "x".repeat((key % 40) as usize)).into_bytes();
                    let at = order.partition_point(|(o, _)| *o <= k);
                    moved = moved.min(at);
                    order.insert(at, (k, text));
                }
                m.reordered_from(moved, |k| order[k].1.as_slice());
                assert_eq!(m.written, before.min(moved), "the prefix is cut at the first place that moved");
                kept += m.written;
                m.extend(order.len(), |k| order[k].1.as_slice()).unwrap();
                assert_eq!(m.written, order.len());
            }
            assert!(kept > 0, "some drains keep what was written");
            let texts: Vec<Vec<u8>> = order.iter().map(|(_, t)| t.clone()).collect();
            let buf = m.finish(head, texts.len(), |k| texts[k].as_slice(), &tail).unwrap();
            assert!(buf.capacity() > 0, "the write buffer comes back for the next run");
            let got = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
            let want = String::from_utf8(whole(head, &texts, &tail)).unwrap();
            assert_eq!(got, want);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A run whose records were never written in flight (no drain before the end), and one
    /// with no records: the end writes the document alone.
    #[test]
    #[cfg_attr(miri, ignore = "opens a file")]
    fn a_file_finished_without_drains_is_the_document() {
        let dir = super::super::scratch_dir("manifest-file-0");
        let path = dir.join("args_dump.json");
        let head = b"{\"records\":[".to_vec();
        for texts in [vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()], Vec::new()] {
            std::fs::write(&path, b"an older, longer text than the new one").unwrap();
            let m = ManifestFile::open(&path, head.clone(), Vec::new()).unwrap();
            m.finish(&head, texts.len(), |k| texts[k].as_slice(), b"]}").unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), whole(&head, &texts, b"]}"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
