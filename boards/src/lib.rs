//! `pto-boards`: a board is a platform plus a topology, a counter frequency and budgets.
//!
//! Every board here is always compiled; the facade's cargo features only choose which one is
//! `pto::board::Selected`.

use pto_hal::{HostPlatform, Topology};
use pto_sim::{CacheModel, Sim, SimConfig, SimDevice, SimError};

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
#[derive(Debug)]
pub enum SimA2a3 {}

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
#[derive(Debug)]
pub enum SimA5 {}

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
#[derive(Debug)]
pub enum SimMini {}

impl SimMini {
    /// The board's cache model: faithful, with a fixed seed (override with `PTO_SIM_CACHE`).
    pub const CACHE: CacheModel = CacheModel::Faithful { seed: 0x6d69_6e69, evict_per_mille: 20 };
}

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
