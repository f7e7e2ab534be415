/* The simulator's backend of the AICore intrinsics (include/pto_aicore_intrinsics.h): every
 * intrinsic calls a function of a table the simulator fills with callbacks bound to the
 * simulated core (`pto_aicore_c` in Rust), so the simulator's cache model sees every access.
 * The callbacks never unwind into C: a panic under one is caught, the call returns a neutral
 * value, and pto_ai_aborted() turns nonzero. */
#ifndef PTO_AICORE_SIM_H
#define PTO_AICORE_SIM_H

#include <stdint.h>

/* The callbacks; `env` is the table's own pointer to the simulated core. */
struct pto_ai_sim_table {
    uint64_t (*ld_dev)(void *env, uint64_t addr);
    void (*st_dev)(void *env, uint64_t addr, uint64_t v);
    uint64_t (*cas_dev)(void *env, uint64_t addr, uint64_t expected, uint64_t desired);
    void (*load)(void *env, uint64_t addr, void *dst, uint32_t len);
    void (*store)(void *env, uint64_t addr, const void *src, uint32_t len);
    void (*line_writeback)(void *env, uint64_t addr);
    void (*line_invalidate)(void *env, uint64_t addr);
    void (*cache_barrier)(void *env);
    void (*rmb)(void *env);
    void (*store_store)(void *env);
    void (*store_barrier)(void *env);
    uint32_t (*read_dmb)(void *env);
    void (*write_cond)(void *env, uint32_t v);
    uint64_t (*now)(void *env);
    void (*wait_event)(void *env, uint64_t deadline);
    void (*send_event)(void *env);
    void (*wait_word)(void *env, uint64_t addr, uint64_t seen, uint64_t deadline);
    void (*delay_ns)(void *env, uint32_t ns);
    int32_t (*kernel_known)(void *env, uint64_t bin);
    int32_t (*run_kernel)(void *env, struct pto_ai_kernel_call *call);
    int32_t (*aborted)(void *env);
};

/* The calling core, as the simulator hands it to the executor. */
struct pto_ai {
    const struct pto_ai_sim_table *t;
    void *env;
    uint32_t block_idx;
    uint32_t core_type;
    uint32_t physical_id;
    uint32_t reserved;
    uint64_t broken;
};

static inline uint64_t pto_ai_ld_dev(struct pto_ai *ai, uint64_t addr) { return ai->t->ld_dev(ai->env, addr); }
static inline void pto_ai_st_dev(struct pto_ai *ai, uint64_t addr, uint64_t v) { ai->t->st_dev(ai->env, addr, v); }
static inline uint64_t pto_ai_cas_dev(struct pto_ai *ai, uint64_t addr, uint64_t expected, uint64_t desired)
{
    return ai->t->cas_dev(ai->env, addr, expected, desired);
}
static inline void pto_ai_load(struct pto_ai *ai, uint64_t addr, void *dst, uint32_t len)
{
    ai->t->load(ai->env, addr, dst, len);
}
static inline void pto_ai_store(struct pto_ai *ai, uint64_t addr, const void *src, uint32_t len)
{
    ai->t->store(ai->env, addr, src, len);
}
static inline void pto_ai_line_writeback(struct pto_ai *ai, uint64_t addr) { ai->t->line_writeback(ai->env, addr); }
static inline void pto_ai_line_invalidate(struct pto_ai *ai, uint64_t addr) { ai->t->line_invalidate(ai->env, addr); }
static inline void pto_ai_cache_barrier(struct pto_ai *ai) { ai->t->cache_barrier(ai->env); }
static inline void pto_ai_rmb(struct pto_ai *ai) { ai->t->rmb(ai->env); }
static inline void pto_ai_store_store(struct pto_ai *ai) { ai->t->store_store(ai->env); }
static inline void pto_ai_store_barrier(struct pto_ai *ai) { ai->t->store_barrier(ai->env); }
static inline uint32_t pto_ai_read_dmb(struct pto_ai *ai) { return ai->t->read_dmb(ai->env); }
static inline void pto_ai_write_cond(struct pto_ai *ai, uint32_t v) { ai->t->write_cond(ai->env, v); }
static inline uint32_t pto_ai_block_idx(struct pto_ai *ai) { return ai->block_idx; }
static inline uint32_t pto_ai_core_type(struct pto_ai *ai) { return ai->core_type; }
static inline uint32_t pto_ai_physical_id(struct pto_ai *ai) { return ai->physical_id; }
static inline uint64_t pto_ai_now(struct pto_ai *ai) { return ai->t->now(ai->env); }
static inline void pto_ai_wait_event(struct pto_ai *ai, uint64_t deadline) { ai->t->wait_event(ai->env, deadline); }
static inline void pto_ai_send_event(struct pto_ai *ai) { ai->t->send_event(ai->env); }
static inline void pto_ai_wait_word(struct pto_ai *ai, uint64_t addr, uint64_t seen, uint64_t deadline)
{
    ai->t->wait_word(ai->env, addr, seen, deadline);
}
static inline void pto_ai_delay_ns(struct pto_ai *ai, uint32_t ns) { ai->t->delay_ns(ai->env, ns); }
static inline int pto_ai_kernel_known(struct pto_ai *ai, uint64_t bin) { return (int)ai->t->kernel_known(ai->env, bin); }
static inline int pto_ai_run_kernel(struct pto_ai *ai, struct pto_ai_kernel_call *call)
{
    return (int)ai->t->run_kernel(ai->env, call);
}
static inline uint64_t pto_ai_broken(struct pto_ai *ai) { return ai->broken; }
static inline int pto_ai_aborted(struct pto_ai *ai) { return (int)ai->t->aborted(ai->env); }

#endif /* PTO_AICORE_SIM_H */
