/* The AICore intrinsics the C executor (runtime/aicore-c/csrc/pto_aicore_exec.c) is written
 * against: device-direct GM words, plain (cached) GM loads and stores, line write-back and
 * invalidate, barriers, the core's own registers (read DMB, write COND), its identity (block
 * index, core type, physical id), the counter, event waits, and the kernel call.
 *
 * Two backends provide them, each as `static inline` functions of the same signatures over an
 * opaque `struct pto_ai` (the calling core):
 *
 * - the simulator's (default, include/pto_aicore_sim.h): every intrinsic calls through a table
 *   of function pointers bound to the simulated core, so the simulator's cache model sees every
 *   access and maintenance operation;
 * - the chip's (with PTO_AICORE_CHIP defined, include/pto_aicore_chip.h): the vendor's AICore
 *   intrinsics, compiled only by the vendor toolchain.
 *
 * C11 and C++17 both compile this header and its backends. */
#ifndef PTO_AICORE_INTRINSICS_H
#define PTO_AICORE_INTRINSICS_H

#include <stddef.h>
#include <stdint.h>

#include "pto_abi.h"

/* pto_ai_run_kernel's results. */
#define PTO_AI_KERNEL_OK 0
/* No kernel is loaded as `bin` for this core's type. */
#define PTO_AI_KERNEL_UNKNOWN 1
/* The kernel faulted; `fault_text` holds why (NUL-terminated, possibly empty). */
#define PTO_AI_KERNEL_FAULT 2

/* Core types, as the handshake reports them. */
#define PTO_AI_CORE_AIC 0u
#define PTO_AI_CORE_AIV 1u

/* One kernel call: the dispatch it serves and the arguments read from its record. */
struct pto_ai_kernel_call {
    /* The kernel binary handle of the payload. */
    uint64_t bin;
    /* The payload (task, block, lane). */
    const struct pto_dispatch_payload *payload;
    /* The tensor descriptors of the argument record, `tensor_count` of them. */
    const struct pto_tensor_desc *tensors;
    uint32_t tensor_count;
    /* The scalars of the argument record, `scalar_count` of them. */
    uint32_t scalar_count;
    const uint64_t *scalars;
    /* Out: why the kernel faulted (PTO_AI_KERNEL_FAULT), `fault_text_cap` bytes. */
    char *fault_text;
    uint32_t fault_text_cap;
    uint32_t reserved;
};

#if defined(PTO_AICORE_CHIP)
#include "pto_aicore_chip.h"
#else
#include "pto_aicore_sim.h"
#endif

/* Every backend defines, for `struct pto_ai *ai` (the calling core):
 *
 *   uint64_t pto_ai_ld_dev(ai, addr)              device-direct 64-bit load (bypasses the cache)
 *   void     pto_ai_st_dev(ai, addr, v)           device-direct 64-bit store
 *   uint64_t pto_ai_cas_dev(ai, addr, exp, des)   device-direct compare-and-swap; the old value
 *   void     pto_ai_load(ai, addr, dst, len)      plain (cached) load of `len` bytes
 *   void     pto_ai_store(ai, addr, src, len)     plain (cached) store of `len` bytes
 *   void     pto_ai_line_writeback(ai, addr)      write the line holding addr back, whole
 *   void     pto_ai_line_invalidate(ai, addr)     drop the line holding addr
 *   void     pto_ai_cache_barrier(ai)             prior maintenance complete
 *   void     pto_ai_rmb(ai)                       load-load barrier
 *   void     pto_ai_store_store(ai)               store-store ordering
 *   void     pto_ai_store_barrier(ai)             every prior store and write-back reached memory
 *   uint32_t pto_ai_read_dmb(ai)                  this core's dispatch register
 *   void     pto_ai_write_cond(ai, v)             this core's status register
 *   uint32_t pto_ai_block_idx(ai)                 worker index in the launch
 *   uint32_t pto_ai_core_type(ai)                 PTO_AI_CORE_AIC or PTO_AI_CORE_AIV
 *   uint32_t pto_ai_physical_id(ai)               physical core id
 *   uint64_t pto_ai_now(ai)                       the device counter, in ticks
 *   void     pto_ai_wait_event(ai, deadline)      until an event may have arrived or deadline
 *   void     pto_ai_send_event(ai)                wake the AICPU threads waiting for an event
 *   void     pto_ai_wait_word(ai, addr, seen, dl) until the word may no longer hold `seen`
 *   void     pto_ai_delay_ns(ai, ns)              let `ns` nanoseconds pass
 *   int      pto_ai_kernel_known(ai, bin)         nonzero when a kernel is loaded as `bin` for
 *                                                 this core's type
 *   int      pto_ai_run_kernel(ai, call)          PTO_AI_KERNEL_OK, _UNKNOWN or _FAULT
 *   uint64_t pto_ai_broken(ai)                    the test-only PTO_BREAK_* switches in force
 *   int      pto_ai_aborted(ai)                   nonzero once the backend failed under the
 *                                                 executor (the simulator caught a panic): the
 *                                                 executor returns at its next wait
 */

#endif /* PTO_AICORE_INTRINSICS_H */
