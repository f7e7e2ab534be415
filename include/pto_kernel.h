/*
 * pto_kernel.h: the native kernel ABI of pto-rt, for kernels written in C or C++.
 *
 * A kernel is `PTO_KERNEL void kernel_entry(int64_t *args)` (or any exported name given to the
 * loader). args[0..T) hold the addresses of the task's T tensor descriptors (struct
 * pto_tensor, 128 bytes), args[T..T+S) its S scalars (64 bits each; an f32 scalar is in the
 * low 32 bits), args[48] the address of a struct pto_local_context (this dispatch's block) and
 * args[49] the address of a struct pto_global_context (the AIV lane in a MIX task). The layout
 * is the reference runtime's; the structures come from include/pto_abi.h, generated from
 * pto-rt's Rust definitions (pto_hal::native), whose sizes and offsets the generated
 * include/pto_abi_check.c asserts.
 *
 * No vendor header is needed. See docs/kernels-in-c.md.
 */
#ifndef PTO_KERNEL_H
#define PTO_KERNEL_H

#include <stdint.h>
#include <string.h>

/* The structures (struct pto_tensor, pto_local_context, pto_global_context) and the slots. */
#include "pto_abi.h"

#ifdef __cplusplus
#define PTO_KERNEL extern "C" __attribute__((visibility("default")))
#else
#define PTO_KERNEL __attribute__((visibility("default")))
#endif

/* The ABI marker: every object built with this header defines `pto_abi_version` (weak, so
 * several translation units of one object may), and the loader refuses an object that does not
 * define it, or defines another version, before it calls anything in it. */
#ifdef __cplusplus
/* `extern` keeps the C++ constant external (a namespace-scope const is internal otherwise). */
extern "C" {
__attribute__((weak, used, visibility("default"))) extern const uint32_t pto_abi_version = PTO_NATIVE_ABI_VERSION;
}
#else
__attribute__((weak, used, visibility("default"))) const uint32_t pto_abi_version = PTO_NATIVE_ABI_VERSION;
#endif

/* Element types, in the reference's numbering (pto_tensor.dtype). */
enum { PTO_FLOAT32 = 0, PTO_FLOAT16 = 1, PTO_INT32 = 2, PTO_INT16 = 3, PTO_INT8 = 4, PTO_UINT8 = 5,
       PTO_BFLOAT16 = 6, PTO_INT64 = 7, PTO_UINT64 = 8, PTO_DTYPE_OTHER = 255 };

static inline const struct pto_tensor *pto_tensor_arg(const int64_t *args, int i) {
    return (const struct pto_tensor *)(uintptr_t)args[i];
}
static inline int32_t pto_block_idx(const int64_t *args) {
    return ((const struct pto_local_context *)(uintptr_t)args[PTO_LOCAL_CONTEXT_SLOT])->block_idx;
}
static inline int32_t pto_block_num(const int64_t *args) {
    return ((const struct pto_local_context *)(uintptr_t)args[PTO_LOCAL_CONTEXT_SLOT])->block_num;
}
static inline int32_t pto_sub_block_id(const int64_t *args) {
    return ((const struct pto_global_context *)(uintptr_t)args[PTO_GLOBAL_CONTEXT_SLOT])->sub_block_id;
}
/* Report failure `code` (nonzero): the task faults with a message naming the kernel and code. */
static inline void pto_fail(int64_t *args, int32_t code) {
    ((struct pto_global_context *)(uintptr_t)args[PTO_GLOBAL_CONTEXT_SLOT])->status = code;
}
/* Scalar `slot` (its index in args, after the tensors) as raw bits, or as the f32 in its low half. */
static inline uint64_t pto_scalar_u64(const int64_t *args, int slot) { return (uint64_t)args[slot]; }
static inline float pto_scalar_f32(const int64_t *args, int slot) {
    uint32_t bits = (uint32_t)(uint64_t)args[slot];
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}
/* Elements of the view. */
static inline uint64_t pto_numel(const struct pto_tensor *t) {
    uint64_t n = 1;
    for (uint32_t k = 0; k < t->ndims; ++k) n *= t->shapes[k];
    return n;
}
/* Offset from buffer.addr, in elements, of the view's element number `lin` in row-major order. */
static inline uint64_t pto_elem_offset(const struct pto_tensor *t, uint64_t lin) {
    uint64_t off = t->start_offset;
    for (int k = (int)t->ndims - 1; k >= 0; --k) {
        off += (lin % t->shapes[k]) * t->strides[k];
        lin /= t->shapes[k];
    }
    return off;
}
/* The view's element number `lin` (row-major), as an lvalue of type T. */
#define PTO_AT(T, t, lin) (((T *)(uintptr_t)(t)->buffer.addr)[pto_elem_offset((t), (lin))])

#endif /* PTO_KERNEL_H */
