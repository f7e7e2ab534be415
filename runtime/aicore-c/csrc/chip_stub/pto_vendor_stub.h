/* A stand-in for the vendor's AICore header, for the host's C++ compiler only: it declares the
 * vendor names include/pto_aicore_chip.h uses, with the types that header assumes, so the chip
 * backend and the executor over it are compiled (never linked, never run) on every build.
 * It is not the vendor's header and checks nothing against it. */
#ifndef PTO_VENDOR_STUB_H
#define PTO_VENDOR_STUB_H

#include <stdint.h>

#define __gm__
#define __aicore__
#define __global__

enum class cache_line_t { SINGLE_CACHE_LINE, ENTIRE_DATA_CACHE };
enum class dcci_dst_t { CACHELINE_ALL, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
enum mem_dsb_t { DSB_ALL, DSB_DDR, DSB_UB, DSB_SEQ };
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };

void dcci(__gm__ void *addr, cache_line_t entire);
void dcci(__gm__ void *addr, cache_line_t entire, dcci_dst_t dst);
void dsb(mem_dsb_t kind);
void pipe_barrier(pipe_t pipe);
uint64_t ld_dev(__gm__ volatile uint64_t *addr);
void st_dev(__gm__ volatile uint64_t *addr, uint64_t value);
uint64_t atomic_cas_dev(__gm__ volatile uint64_t *addr, uint64_t expected, uint64_t desired);
int64_t get_block_idx(void);
int64_t get_coreid(void);
uint64_t get_sys_cnt(void);
/* The reference reads DATA_MAIN_BASE with `MOV %0, DATA_MAIN_BASE`; the chip build wraps
 * that instruction under this name. */
uint64_t read_data_main_base(void);
void set_cond(uint64_t value);

#endif /* PTO_VENDOR_STUB_H */
