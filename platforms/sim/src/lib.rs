//! `pto-sim`: the simulated device.
//!
//! The device runs as threads on this machine: one per AICPU thread and one per AICore of the
//! board's topology, started when the device is opened and reused by every run. GM is an arena
//! owned by the device; registers are per-core words whose writes wake the agent waiting on
//! them, so idle agents park instead of spinning and 100+ threads behave on a two-core host.
//!
//! The simulator implements every HAL trait; which coherence contract it obeys is the type
//! parameter `C` ([`pto_hal::HostNonCoherent`] for a simulated a2a3, [`pto_hal::HostCoherent`]
//! for a simulated a5). It has two cache models: under the coherent one (the default) every
//! maintenance operation does nothing but a cheap check of which model is on; under the
//! faithful one (`faithful/`) each agent has its own cache and the operations act on it.
//!
//! ```
//! use pto_hal::{DeviceMemory, HostCoherent, Topology};
//! use pto_sim::{SimConfig, SimDevice};
//!
//! let dev = SimDevice::<HostCoherent>::open(
//!     Topology { clusters: 2, aicpu_threads: 2 },
//!     SimConfig::default(),
//! ).unwrap();
//! let a = dev.alloc(256, 64).unwrap();
//! dev.copy_h2d(a, &[7u8; 256]).unwrap();
//! let mut back = [0u8; 256];
//! dev.copy_d2h(&mut back, a).unwrap();
//! assert_eq!(back, [7u8; 256]);
//! ```

mod agent;
pub mod check;
mod config;
mod device;
mod engine;
mod error;
mod faithful;
mod gm;
mod launch;
mod monitor;
pub mod native;
mod panics;
mod park;
mod platform;
mod protect;
mod shared;
mod stream;
mod violation;

pub use agent::{MAX_CLUSTERS, SimAicpu, SimCore, SimDelay};
pub use config::{AicpuWritePolicy, CacheModel, SimConfig, with_engine};
pub use device::{DROP_JOIN_BUDGET, SimDevice, detached_threads};
pub use engine::{EXPLORE_SEEDS, Schedule, ScheduleReport, SimEngine, Strategy, SwitchPoint};
pub use error::SimError;
pub use faithful::CLOCK_LIMIT;
pub use gm::GM_BASE;
pub use launch::MODEL_LIMIT_STATUS;
pub use panics::AGENT_PANIC_STATUS;
pub use platform::Sim;
pub use stream::{SimAicoreStream, SimAicpuStream, SimEvent};
pub use violation::{COHERENCE_STATUS, Missing, Violation};
