//! The faithful cache model: the simulator as the silicon behaves, so coherence bugs fail here.
//!
//! * Every AICore has a **write-back** cache of 64-byte lines over GM: a store dirties the
//!   core's copy; a load is served from the copy when present (stale or not) and fills it from
//!   memory otherwise; a write-back emits the **whole** line, bytes the core never wrote
//!   included; invalidate drops the copy (writing it back first when dirty, like `dcci`).
//! * Every AICPU thread has a cache too. What an AICPU store does is the board's
//!   [`AicpuWritePolicy`](crate::AicpuWritePolicy) (an open question of the a2a3 contract,
//!   `docs/cache-contract.md`: "is GM cacheable for
//!   the AICPU, and under what write policy?"):
//!   * **write-through**: the store reaches memory at once (an AICore fill and a device-direct
//!     load see it);
//!   * **write-back** (the a2a3 default, the conservative answer): the store dirties the AICPU
//!     cluster's copy of the line and memory keeps the old bytes until that line is written back
//!     — by a range clean or invalidate (`flush_range` / `invalidate_range`) issued by **any**
//!     AICPU thread (`dc cvac` / `dc civac` act on the whole inner-shareable cluster), by a
//!     random eviction, or never (a program that ends with it is a violation). The write-back
//!     emits the whole line, as an AICore's does. The AICPU threads are one coherent SMP
//!     cluster: a line one thread dirtied is what every AICPU thread reads (the model keeps
//!     AICPU-dirty lines in one cluster-level cache of 16 sets, a line's set chosen by its
//!     address, and a line there has no copy in any thread's own cache). Another agent's
//!     cached or device-direct read, and a host D2H read, see memory. Under the host-coherent
//!     contract (a5) the contract's premise — completed AICPU GM writes are visible to every
//!     consumer without a clean — makes `back` behave as `through`.
//!
//!   Either way an AICore write-back drops the AICPU threads' copies of the line (one coherence
//!   domain on the read side), and host DMA writes memory, not caches: with the
//!   host-non-coherent contract (a2a3) AICPU caches keep stale lines across it; with the
//!   host-coherent contract (a5) host DMA drops them.
//! * Device-direct loads/stores and atomics act on memory and bypass every cache.
//! * Lines are evicted at seeded random points (and when a cache is full), so a run is
//!   reproducible for a seed, and every report prints the seed.
//!
//! Happens-before is tracked with vector clocks over the synchronisation the device really has:
//! register hand-offs (DMB/COND), GM atomics, and kernel launch/completion on the streams; the
//! AICPU threads, which also synchronise through their own private memory (the device-side
//! runtime's ring slots), share what they know at every HAL event and GM access. A
//! load that misses a write which happened before it is a **violation**, reported with the
//! agent, address, line, last writer and the maintenance operation that was missing. So are
//! a write-back that overwrote another agent's bytes, a line written through caches by two
//! agents whose writes are not ordered (the whole-line rule), a register write (FIN, ACK, a
//! report marker) issued while the core still holds dirty or unfenced lines, and a program that
//! ends with dirty lines. Violations fail the launch that found them.
//!
//! Locks: an agent's state, then (AICPU threads only) one set of the cluster's dirty lines at
//! a time, then a line shard; the shared AICPU clock and the word clocks are taken under an
//! agent's state only. An AICPU thread never holds two agent locks (it drops other threads'
//! copies after releasing its own); an AICore holds its own and then one AICPU thread's at a
//! time; nobody takes an agent lock or a cluster set's lock while holding a shard. So no
//! cycle, hence no deadlock.
//! A line's record and its memory change together, under the line's shard, which a fill
//! also reads both under: no fill takes origins from a record ahead of memory
//! (`a_fill_never_sees_a_line_record_ahead_of_memory`), nor memory ahead of its record (host
//! DMA writes each line's piece under its shard too:
//! `a_fill_never_sees_host_dma_bytes_under_their_old_origins`). Each cluster set's count of dirty lines,
//! which lets a clean skip an empty set without locking it, falls only after a
//! write-back's bytes are in memory, and a clean reads it with an acquire: a clean never passes
//! a write-back of its lines that another AICPU thread has under way
//! (`a_clean_waits_for_a_write_back_another_thread_has_in_flight`). An AICPU thread holds the
//! line's set of the cluster from its look there until it has its own copy, so no store falls
//! between them (`an_aicpu_fill_never_outlives_a_store_to_its_line_by_another_thread`), and it
//! never reads a copy whose drop another agent's change has under way
//! (`an_aicpu_copy_a_store_is_about_to_drop_is_never_read`).
//! Two paths take fewer: a register read that finds the register unwritten since the reader
//! last acquired it takes no lock at all (per-register write counts and per-agent seen counts,
//! atomics; tested by `a_register_read_acquires_each_new_write_and_nothing_else`), and a host
//! DMA range takes a shard once per page of lines (the records of 16 neighbouring lines are
//! kept together, in one shard; `a_host_read_reports_its_lowest_stale_byte`). A write that
//! must drop the AICPU threads' copies of a line (a core's write-back, an AICPU store, host DMA
//! under the host-coherent contract) locks only the threads the line's record marks as holders
//! (`every_aicpu_copy_is_dropped_when_its_line_changes`).
//!
//! The model's parts, each a file that depends only on the ones before it: `line` (the records
//! of one cache line, line arithmetic), `model` (the state: agents, clocks, shards, settings,
//! reset), `report` (stale reads, and how a violation is named and reported), `evict` (lines
//! into and out of a cache: fills, write-backs, seeded eviction), `access` (cached loads and
//! stores, range maintenance, barriers), `sync` (happens-before: launches, register hand-offs,
//! device-direct words, host DMA).

mod access;
mod evict;
mod line;
mod model;
mod report;
mod spin;
mod sync;
#[cfg(test)]
mod tests;

pub use model::{CLOCK_LIMIT, Faithful, HOST};
