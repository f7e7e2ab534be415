//! `pto-boards`: a board is a platform plus a topology, a counter frequency and budgets.
//!
//! One cargo feature per board (`board-sim-a2a3`, the default; `board-sim-a5`;
//! `board-sim-mini`; `board-a2a3` and `board-a5` for the chips) selects [`Selected`]: the build script resolves the features (a non-default
//! board wins over the default; two non-default boards, or none, fail the build naming them)
//! and emits `cfg(board = "…")`. Each feature enables only the platforms its board needs, and a
//! board is compiled only when its platforms are enabled, so a build for the a5 board does not
//! compile the a2a3 platform.

use pto_hal::{HostPlatform, Topology};
#[cfg(feature = "pto-sim")]
use pto_sim::{CacheModel, Sim, SimConfig, SimDevice, SimError};

/// The board selected by cargo feature (`board-sim-a2a3`, the default).
#[cfg(board = "sim-a2a3")]
pub type Selected = SimA2a3;

/// The board selected by cargo feature (`board-sim-a5`).
#[cfg(board = "sim-a5")]
pub type Selected = SimA5;

/// The board selected by cargo feature (`board-sim-mini`).
#[cfg(board = "sim-mini")]
pub type Selected = SimMini;

/// The board selected by cargo feature (`board-a2a3`).
#[cfg(board = "a2a3")]
pub type Selected = A2a3;

/// The board selected by cargo feature (`board-a5`).
#[cfg(board = "a5")]
pub type Selected = A5;

/// Whether the selected board runs its device half in this process (a simulated board) or on
/// a chip (a hardware board, whose device programs come from the library `PTO_DEVICE_LIBRARY`
/// names).
pub const SELECTED_IN_PROCESS: bool = !cfg!(any(board = "a2a3", board = "a5"));

/// Budgets of a board, in microseconds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BoardTimeouts {
    /// AICPU no-progress watchdog.
    pub watchdog_us: u64,
    /// Budget for the EXIT acknowledgement of a core group.
    pub exit_us: u64,
    /// Host budget for a run's completion.
    pub stream_us: u64,
}

/// A board.
pub trait Board: 'static {
    /// The platform the board runs (its host half is what a host opens; simulated boards also
    /// run the device half in process).
    type Platform: HostPlatform;
    /// Short name, as printed in summaries.
    const NAME: &'static str;
    /// The board's topology.
    const TOPOLOGY: Topology;
    /// Open the board's device.
    fn open() -> Result<<Self::Platform as HostPlatform>::Device, <Self::Platform as HostPlatform>::Error>;
    /// The board's budgets.
    fn timeouts() -> BoardTimeouts;
}

/// Budgets of simulated boards: the reference's 10 s watchdog, a 10 s exit budget (the
/// simulator's wider deinit window) and a 50 s host budget.
pub const SIM_TIMEOUTS: BoardTimeouts =
    BoardTimeouts { watchdog_us: 10_000_000, exit_us: 10_000_000, stream_us: 50_000_000 };

/// The a2a3 chip, simulated: 24 clusters (72 cores), 4 AICPU threads, 50 MHz counter,
/// host-non-coherent contract.
#[cfg(all(feature = "pto-sim", feature = "pto-a2a3"))]
#[derive(Debug)]
pub enum SimA2a3 {}

#[cfg(all(feature = "pto-sim", feature = "pto-a2a3"))]
impl Board for SimA2a3 {
    type Platform = Sim<pto_a2a3::Contract>;
    const NAME: &'static str = "sim-a2a3";
    const TOPOLOGY: Topology = pto_a2a3::TOPOLOGY;
    fn open() -> Result<SimDevice<pto_a2a3::Contract>, SimError> {
        SimDevice::open(Self::TOPOLOGY, SimConfig { freq_hz: pto_a2a3::COUNTER_HZ, ..SimConfig::default() })
    }
    fn timeouts() -> BoardTimeouts {
        SIM_TIMEOUTS
    }
}

/// The a5 chip, simulated: 36 clusters (108 cores), 5 AICPU threads, 1 GHz counter,
/// host-coherent contract.
#[cfg(all(feature = "pto-sim", feature = "pto-a5"))]
#[derive(Debug)]
pub enum SimA5 {}

#[cfg(all(feature = "pto-sim", feature = "pto-a5"))]
impl Board for SimA5 {
    type Platform = Sim<pto_a5::Contract>;
    const NAME: &'static str = "sim-a5";
    const TOPOLOGY: Topology = pto_a5::TOPOLOGY;
    fn open() -> Result<SimDevice<pto_a5::Contract>, SimError> {
        SimDevice::open(Self::TOPOLOGY, SimConfig { freq_hz: pto_a5::COUNTER_HZ, ..SimConfig::default() })
    }
    fn timeouts() -> BoardTimeouts {
        SIM_TIMEOUTS
    }
}

/// A small simulated board, the worked example of `docs/porting-a-board.md`: 2 clusters
/// (6 cores), 2 AICPU threads, a 100 MHz counter, the a2a3 (host-non-coherent) contract, and
/// the faithful cache model by default — so every run on it checks coherence.
#[cfg(feature = "pto-sim")]
#[derive(Debug)]
pub enum SimMini {}

#[cfg(feature = "pto-sim")]
impl SimMini {
    /// The board's cache model: faithful, with a fixed seed (override with `PTO_SIM_CACHE`).
    pub const CACHE: CacheModel = CacheModel::Faithful { seed: 0x6d69_6e69, evict_per_mille: 20 };
}

#[cfg(feature = "pto-sim")]
impl Board for SimMini {
    type Platform = Sim<pto_hal::HostNonCoherent>;
    const NAME: &'static str = "sim-mini";
    const TOPOLOGY: Topology = Topology { clusters: 2, aicpu_threads: 2 };
    fn open() -> Result<SimDevice<pto_hal::HostNonCoherent>, SimError> {
        SimDevice::open(
            Self::TOPOLOGY,
            SimConfig { freq_hz: 100_000_000, gm_bytes: 256 << 20, cache: Self::CACHE, ..SimConfig::default() },
        )
    }
    fn timeouts() -> BoardTimeouts {
        SIM_TIMEOUTS
    }
}

/// Budgets of hardware boards: the reference's 10 s watchdog, a 1 s exit budget and a 50 s host
/// budget.
#[cfg(any(feature = "a2a3-cann", feature = "a5-cann"))]
pub const CHIP_TIMEOUTS: BoardTimeouts =
    BoardTimeouts { watchdog_us: 10_000_000, exit_us: 1_000_000, stream_us: 50_000_000 };

/// The device images a hardware board loads, from the environment:
///
/// * `PTO_DEVICE_LIBRARY` — the AICPU library (`libpto_device.so` that `pto-device` builds for
///   the chip);
/// * `PTO_AICORE_BINARY` — the AICore binary holding the runtime's AICore program (the executor
///   compiled by the vendor toolchain);
/// * `PTO_DEVICE_PROGRAMS` — the orchestration programs of the AICPU image's program table, in
///   table order, separated by commas (empty or unset: none).
#[cfg(any(feature = "a2a3-cann", feature = "a5-cann"))]
fn device_images() -> Result<(std::ffi::CString, std::ffi::CString, Vec<String>), &'static str> {
    let path = |var: &str, missing: &'static str, nul: &'static str| {
        let p = std::env::var(var).map_err(|_| missing)?;
        std::ffi::CString::new(p).map_err(|_| nul)
    };
    let aicpu = path(
        "PTO_DEVICE_LIBRARY",
        "PTO_DEVICE_LIBRARY is not set: point it at libpto_device.so built for this chip",
        "PTO_DEVICE_LIBRARY contains a NUL byte",
    )?;
    let aicore = path(
        "PTO_AICORE_BINARY",
        "PTO_AICORE_BINARY is not set: point it at the AICore binary built by the vendor toolchain",
        "PTO_AICORE_BINARY contains a NUL byte",
    )?;
    let programs = std::env::var("PTO_DEVICE_PROGRAMS").unwrap_or_default();
    let programs = programs.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    Ok((aicpu, aicore, programs))
}

/// Device id the hardware boards open: `PTO_DEVICE_ID` (default 0).
#[cfg(any(feature = "a2a3-cann", feature = "a5-cann"))]
fn device_id() -> Result<i32, &'static str> {
    match std::env::var("PTO_DEVICE_ID") {
        Ok(v) => v.parse().map_err(|_| "PTO_DEVICE_ID is not a device number"),
        Err(_) => Ok(0),
    }
}

macro_rules! chip_board {
    ($(#[$doc:meta])* $board:ident, $feature:literal, $chip:ident, $name:literal) => {
        $(#[$doc])*
        #[cfg(feature = $feature)]
        #[derive(Debug)]
        pub enum $board {}

        #[cfg(feature = $feature)]
        impl Board for $board {
            type Platform = $chip::cann::CannHost;
            const NAME: &'static str = $name;
            const TOPOLOGY: Topology = $chip::TOPOLOGY;
            fn open() -> Result<$chip::cann::CannDevice, $chip::cann::CannError> {
                use $chip::cann::CannError;
                let (aicpu, aicore, programs) = device_images().map_err(CannError::InvalidArgument)?;
                let id = device_id().map_err(CannError::InvalidArgument)?;
                let programs: Vec<&str> = programs.iter().map(String::as_str).collect();
                let images = $chip::cann::DeviceImages {
                    aicpu_library: &aicpu,
                    aicore_binary: &aicore,
                    orchestrations: &programs,
                };
                $chip::cann::CannDevice::open(id, $chip::cann::CHIP, &images)
            }
            fn timeouts() -> BoardTimeouts {
                CHIP_TIMEOUTS
            }
        }
    };
}

chip_board!(
    /// A real a2a3 chip over the vendor runtime (`libascendcl.so`, or the library
    /// `PTO_ASCENDCL_LIBRARY` names): the host half is `pto_a2a3::cann::CannHost`, the device
    /// images come from `PTO_DEVICE_LIBRARY`, `PTO_AICORE_BINARY` and `PTO_DEVICE_PROGRAMS`,
    /// the device from `PTO_DEVICE_ID`. Run in this repository against a recording stand-in
    /// for the vendor library (`testkits/cann-stub`), never on a chip.
    A2a3, "a2a3-cann", pto_a2a3, "a2a3"
);
chip_board!(
    /// A real a5 chip over the vendor runtime (see [`A2a3`]).
    A5, "a5-cann", pto_a5, "a5"
);
