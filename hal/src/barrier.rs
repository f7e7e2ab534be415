//! Memory ordering between an agent's own accesses.

/// Barriers. Coherence is not ordering: these are needed on coherent platforms too.
///
/// On aarch64 AICPU cores: `rmb` = `dsb ld`, `wmb` = `dsb st`, `store_store` = `dmb ishst`,
/// `full` = `dsb sy`. On the AICore, `store_barrier` is the barrier a core issues after a
/// kernel's output write-back and before it writes FIN.
pub trait Barriers {
    /// Load-load barrier. Tier: AICPU, AICore. Every load before it completes before any load
    /// after it; used after reading a hand-off register and before reading the data it guards.
    fn rmb(&self);
    /// Store-store barrier that also drains prior stores to their destination (`dsb st`).
    /// Tier: AICPU. Used before a register write that publishes plain-memory data.
    fn wmb(&self);
    /// Store-store ordering without draining (`dmb ishst`). Tier: AICPU, AICore.
    fn store_store(&self);
    /// Full barrier (`dsb sy`). Tier: AICPU, AICore.
    fn full(&self);
    /// AICore store barrier before FIN: every prior store and write-back has reached memory.
    /// Tier: AICore.
    fn store_barrier(&self);
}
