//! The device log on target: the device half's defmt frames, from a GM log ring, decoded on
//! the host side.
//!
//! The runtime logs through its `fmt` shim; with `pto-runtime/defmt` that is defmt, and the
//! process's `#[defmt::global_logger]` is `pto_aarch64::devlog`, which commits each frame whole
//! into a [`LogRing`] in GM. Here the ring is a [`RING_BYTES`] region standing in for GM that
//! the host reserved for device logs (one per process: the logger is process-wide). The host
//! drains it ([`take`]) and decodes the frames with `defmt-decoder` against the `.defmt` table
//! of this very executable ([`std::env::current_exe`]; under qemu user mode that is the guest
//! binary), which is why the tests link with defmt's table (`INCLUDE defmt.x`, non-PIE: the
//! chip crates' `build.rs`).

use std::sync::OnceLock;

use pto_aarch64::devlog::LogRing;

use crate::mem::Arena;

/// Bytes of the GM log region (header line included).
pub const RING_BYTES: usize = 256 << 10;

/// The region and the ring over it: never freed, so the logger may hold it for `'static`.
static RING: OnceLock<(Arena, LogRing)> = OnceLock::new();

/// The process's device log ring, created and installed as the defmt logger's sink on first use.
pub fn ring() -> &'static LogRing {
    let (_, ring) = RING.get_or_init(|| {
        let gm = Arena::new(RING_BYTES, 64);
        // SAFETY: the arena is `RING_BYTES` of mapped, 64-aligned memory owned by this static
        // for the rest of the process (never dropped), reached only through this ring; nobody
        // logs into it before it is installed, below.
        let ring = unsafe { LogRing::init(gm.addr(), gm.len()) }.expect("log ring over the GM region");
        (gm, ring)
    });
    pto_aarch64::devlog::install(ring);
    ring
}

/// One decoded log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// `TRACE` … `ERROR` (defmt's level names).
    pub level: String,
    /// The formatted message.
    pub text: String,
}

impl core::fmt::Display for Line {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:<5} {}", self.level, self.text)
    }
}

/// What [`take`] found.
#[derive(Debug)]
pub struct DeviceLog {
    /// The decoded lines, in commit order.
    pub lines: Vec<Line>,
    /// Bytes drained.
    pub bytes: usize,
    /// Frames the ring dropped so far (did not fit).
    pub dropped: u64,
}

impl DeviceLog {
    /// The lines whose message starts with `prefix`.
    pub fn starting_with<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = &'a Line> + 'a {
        self.lines.iter().filter(move |l| l.text.starts_with(prefix))
    }
}

/// This executable's defmt table (parsed once).
fn table() -> Result<&'static defmt_decoder::Table, String> {
    static TABLE: OnceLock<Result<defmt_decoder::Table, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
            let elf = std::fs::read(&exe).map_err(|e| format!("read {}: {e}", exe.display()))?;
            defmt_decoder::Table::parse(&elf)
                .map_err(|e| format!("defmt table of {}: {e}", exe.display()))?
                .ok_or_else(|| format!("{} has no .defmt section (not linked with defmt.x?)", exe.display()))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Drain the ring and decode every frame in it. A malformed frame, or bytes left over that do
/// not end a frame, is an error (the ring commits whole frames only).
pub fn take() -> Result<DeviceLog, String> {
    let ring = ring();
    let mut bytes = Vec::new();
    ring.drain(|b| bytes.extend_from_slice(b));
    let table = table()?;
    let mut decoder = table.new_stream_decoder();
    decoder.received(&bytes);
    let mut lines = Vec::new();
    loop {
        match decoder.decode() {
            Ok(frame) => lines.push(Line {
                level: frame.level().map_or("-", |l| l.as_str()).to_uppercase(),
                text: frame.display_message().to_string(),
            }),
            Err(defmt_decoder::DecodeError::UnexpectedEof) => break,
            Err(defmt_decoder::DecodeError::Malformed) => {
                return Err(format!("malformed defmt frame after {} lines", lines.len()));
            }
        }
    }
    Ok(DeviceLog { lines, bytes: bytes.len(), dropped: ring.dropped() })
}

/// Check the device log of `runs` clean runs on a device of `workers` cores: every worker's
/// handshake was logged once per run, the retirements logged add up to every worker released
/// in every run with no silent core, and no fault was latched. The error names what is
/// missing.
pub fn check_clean_runs(log: &DeviceLog, workers: u32, runs: u32) -> Result<(), String> {
    let show = || log.lines.iter().map(|l| format!("\n  {l}")).collect::<String>();
    if log.dropped != 0 {
        return Err(format!("the ring dropped {} frames", log.dropped));
    }
    if let Some(l) = log.lines.iter().find(|l| l.text.starts_with("fault latched")) {
        return Err(format!("a fault was logged: {l}"));
    }
    for w in 0..workers {
        let n = log.starting_with(&format!("handshake: worker {w} reported")).count();
        if n != runs as usize {
            return Err(format!("worker {w}: {n} handshakes logged, want {runs}:{}", show()));
        }
    }
    let mut released = 0u64;
    for l in log.starting_with("retire: released ") {
        let mut words = l.text.split_whitespace();
        let r: u64 = words.nth(2).and_then(|r| r.parse().ok()).ok_or_else(|| format!("unreadable: {l}"))?;
        if !l.text.contains("first silent worker -1 ") {
            return Err(format!("a silent core: {l}"));
        }
        released += r;
    }
    if released != u64::from(workers) * u64::from(runs) {
        return Err(format!("{released} cores released in the log, want {} x {runs}:{}", workers, show()));
    }
    Ok(())
}
