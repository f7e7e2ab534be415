/* The chip's backend of the AICore intrinsics (include/pto_aicore_intrinsics.h): the vendor's
 * AICore intrinsics, compiled only by the vendor toolchain (C++: the vendor's enumerations are
 * scoped), with PTO_AICORE_CHIP defined.
 *
 * Nothing here has run. The vendor names and their signatures are the ones this header assumes;
 * runtime/aicore-c/csrc/chip_stub/pto_vendor_stub.h declares them so, and the crate's build
 * script compiles the executor against it with the host's C++ compiler on every build: that
 * checks this file's own types and its calls against those assumptions, not against the
 * vendor's headers (docs/aicore-in-c.md lists what the first day with the toolchain checks). */
#ifndef PTO_AICORE_CHIP_H
#define PTO_AICORE_CHIP_H

#include <stdint.h>

#if defined(PTO_AICORE_CHIP_STUB)
#include "pto_vendor_stub.h"
#else
#include "kernel_operator.h"
#endif

/* The calling core: its identity, read once from the vendor's registers at entry. */
struct pto_ai {
    uint32_t block_idx;
    uint32_t core_type;
    uint32_t physical_id;
    uint32_t reserved;
};

#define PTO_AI_GM64(addr) ((__gm__ volatile uint64_t *)(uintptr_t)(addr))

/* Device-direct word accesses: the vendor's uncached load and store. */
static inline uint64_t pto_ai_ld_dev(struct pto_ai *ai, uint64_t addr)
{
    (void)ai;
    return ld_dev(PTO_AI_GM64(addr));
}
static inline void pto_ai_st_dev(struct pto_ai *ai, uint64_t addr, uint64_t v)
{
    (void)ai;
    st_dev(PTO_AI_GM64(addr), v);
    dsb(DSB_DDR);
}
static inline uint64_t pto_ai_cas_dev(struct pto_ai *ai, uint64_t addr, uint64_t expected, uint64_t desired)
{
    (void)ai;
    return atomic_cas_dev(PTO_AI_GM64(addr), expected, desired);
}
/* Plain loads and stores through the core's data cache. */
static inline void pto_ai_load(struct pto_ai *ai, uint64_t addr, void *dst, uint32_t len)
{
    (void)ai;
    __gm__ const volatile uint8_t *s = (__gm__ const volatile uint8_t *)(uintptr_t)addr;
    uint8_t *d = (uint8_t *)dst;
    for (uint32_t i = 0; i < len; i++) {
        d[i] = s[i];
    }
}
static inline void pto_ai_store(struct pto_ai *ai, uint64_t addr, const void *src, uint32_t len)
{
    (void)ai;
    __gm__ volatile uint8_t *d = (__gm__ volatile uint8_t *)(uintptr_t)addr;
    const uint8_t *s = (const uint8_t *)src;
    for (uint32_t i = 0; i < len; i++) {
        d[i] = s[i];
    }
}
/* Line maintenance: dcci of one line, written back (CACHELINE_OUT) or dropped. */
static inline void pto_ai_line_writeback(struct pto_ai *ai, uint64_t addr)
{
    (void)ai;
    dcci((__gm__ void *)(uintptr_t)addr, cache_line_t::SINGLE_CACHE_LINE, dcci_dst_t::CACHELINE_OUT);
}
static inline void pto_ai_line_invalidate(struct pto_ai *ai, uint64_t addr)
{
    (void)ai;
    dcci((__gm__ void *)(uintptr_t)addr, cache_line_t::SINGLE_CACHE_LINE);
}
static inline void pto_ai_cache_barrier(struct pto_ai *ai)
{
    (void)ai;
    dsb(DSB_DDR);
}
static inline void pto_ai_rmb(struct pto_ai *ai)
{
    (void)ai;
    dsb(DSB_DDR);
}
static inline void pto_ai_store_store(struct pto_ai *ai)
{
    (void)ai;
    dsb(DSB_DDR);
}
static inline void pto_ai_store_barrier(struct pto_ai *ai)
{
    (void)ai;
    pipe_barrier(PIPE_ALL);
    dsb(DSB_DDR);
}
/* The core's special registers. */
static inline uint32_t pto_ai_read_dmb(struct pto_ai *ai)
{
    (void)ai;
    return (uint32_t)read_data_main_base();
}
static inline void pto_ai_write_cond(struct pto_ai *ai, uint32_t v)
{
    (void)ai;
    set_cond((uint64_t)v);
}
static inline uint32_t pto_ai_block_idx(struct pto_ai *ai) { return ai->block_idx; }
static inline uint32_t pto_ai_core_type(struct pto_ai *ai) { return ai->core_type; }
static inline uint32_t pto_ai_physical_id(struct pto_ai *ai) { return ai->physical_id; }
static inline uint64_t pto_ai_now(struct pto_ai *ai)
{
    (void)ai;
    return (uint64_t)get_sys_cnt();
}
/* No event unit an AICPU store ends a wait on: the waits are polls, paced by the counter. */
static inline void pto_ai_wait_event(struct pto_ai *ai, uint64_t deadline)
{
    (void)ai;
    (void)deadline;
}
static inline void pto_ai_send_event(struct pto_ai *ai) { (void)ai; }
static inline void pto_ai_wait_word(struct pto_ai *ai, uint64_t addr, uint64_t seen, uint64_t deadline)
{
    (void)ai;
    (void)addr;
    (void)seen;
    (void)deadline;
}
static inline void pto_ai_delay_ns(struct pto_ai *ai, uint32_t ns)
{
    (void)ai;
    /* The counter's frequency is the board's (a2a3 50 MHz, a5 1 GHz): wait at least `ns` at
     * the faster one's resolution, never more than a microsecond more at the slower. */
    uint64_t until = (uint64_t)get_sys_cnt() + ns / 20u + 1u;
    while ((uint64_t)get_sys_cnt() < until) {
    }
}
/* The kernel call through the kernel ABI: `bin` is the kernel's entry address in this core's
 * loaded binary (the host's launch by binary handle resolves it). */
typedef void (*pto_ai_kernel_entry)(__gm__ int64_t *args);

static inline int pto_ai_kernel_known(struct pto_ai *ai, uint64_t bin)
{
    (void)ai;
    return bin != 0;
}

static inline int pto_ai_run_kernel(struct pto_ai *ai, struct pto_ai_kernel_call *call)
{
    if (call->bin == 0) {
        return PTO_AI_KERNEL_UNKNOWN;
    }
    struct pto_tensor tensors[PTO_MAX_TENSOR_ARGS];
    struct pto_local_context local;
    struct pto_global_context global;
    int64_t args[PTO_ARG_SLOTS];
    for (uint32_t i = 0; i < PTO_ARG_SLOTS; i++) {
        args[i] = 0;
    }
    uint32_t nt = call->tensor_count < PTO_MAX_TENSOR_ARGS ? call->tensor_count : PTO_MAX_TENSOR_ARGS;
    for (uint32_t i = 0; i < nt; i++) {
        const struct pto_tensor_desc *d = &call->tensors[i];
        struct pto_tensor *t = &tensors[i];
        uint8_t *raw = (uint8_t *)t;
        for (uint32_t b = 0; b < sizeof(*t); b++) {
            raw[b] = 0;
        }
        uint64_t extent = 1;
        for (uint32_t k = 0; k < d->ndims && k < PTO_MAX_TENSOR_DIMS; k++) {
            t->shapes[k] = d->shape[k];
            t->strides[k] = d->strides[k];
            extent += (uint64_t)(d->shape[k] ? d->shape[k] - 1 : 0) * d->strides[k];
        }
        t->buffer.addr = d->addr;
        t->buffer.size = extent * d->elem_bytes;
        t->ndims = d->ndims;
        t->dtype = (uint8_t)d->dtype;
        t->extent_elem = extent;
        t->owner_task_id = call->payload->task_id;
        args[i] = (int64_t)(uintptr_t)t;
    }
    uint32_t ns = call->scalar_count;
    for (uint32_t i = 0; i < ns && nt + i < PTO_LOCAL_CONTEXT_SLOT; i++) {
        args[nt + i] = (int64_t)call->scalars[i];
    }
    local.block_idx = (int32_t)call->payload->block_idx;
    local.block_num = (int32_t)call->payload->block_num;
    for (uint32_t i = 0; i < 5; i++) {
        local.async_ctx[i] = 0;
    }
    global.sub_block_id = (int32_t)call->payload->lane;
    global.pad = 0;
    global.l2_cache_offset = 0;
    global.status = 0;
    global.reserved = 0;
    args[PTO_LOCAL_CONTEXT_SLOT] = (int64_t)(uintptr_t)&local;
    args[PTO_GLOBAL_CONTEXT_SLOT] = (int64_t)(uintptr_t)&global;
    (void)ai;
    ((pto_ai_kernel_entry)(uintptr_t)call->bin)((__gm__ int64_t *)args);
    if (global.status != 0) {
        if (call->fault_text_cap > 0) {
            call->fault_text[0] = 0;
        }
        return PTO_AI_KERNEL_FAULT;
    }
    return PTO_AI_KERNEL_OK;
}
/* Test-only breakage never exists on a chip; nothing under the executor can abort it. */
static inline uint64_t pto_ai_broken(struct pto_ai *ai)
{
    (void)ai;
    return 0;
}
static inline int pto_ai_aborted(struct pto_ai *ai)
{
    (void)ai;
    return 0;
}

#endif /* PTO_AICORE_CHIP_H */
