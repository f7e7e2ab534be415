/*
 * pto_kernel.h: the native kernel ABI of pto-rt, for kernels written in C or C++.
 *
 * A kernel is `PTO_KERNEL void kernel_entry(int64_t *args)` (or any exported name given to the
 * loader). args[0..T) hold the addresses of the task's T tensor descriptors (struct
 * pto_tensor, 128 bytes), args[T..T+S) its S scalars (64 bits each; an f32 scalar is in the
 * low 32 bits), args[48] the address of a struct pto_local_context (this dispatch's block) and
 * args[49] the address of a struct pto_global_context (the AIV lane in a MIX task). The layout
 * is the reference runtime's; the sizes and offsets are checked against pto-rt's Rust
 * definitions (pto_hal::native) by the generated include/pto_abi_check.c.
 *
 * No vendor header is needed. See docs/kernels-in-c.md.
 */
#ifndef PTO_KERNEL_H
#define PTO_KERNEL_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
#define PTO_KERNEL extern "C" __attribute__((visibility("default")))
#else
#define PTO_KERNEL __attribute__((visibility("default")))
#endif

#define PTO_MAX_TENSOR_DIMS 5
#define PTO_LOCAL_CONTEXT_SLOT 48
#define PTO_GLOBAL_CONTEXT_SLOT 49
#define PTO_ARG_SLOTS 50

/* Element types, in the reference's numbering (pto_tensor.dtype). */
enum { PTO_FLOAT32 = 0, PTO_FLOAT16 = 1, PTO_INT32 = 2, PTO_INT16 = 3, PTO_INT8 = 4, PTO_UINT8 = 5,
       PTO_BFLOAT16 = 6, PTO_INT64 = 7, PTO_UINT64 = 8, PTO_DTYPE_OTHER = 255 };

struct pto_buffer {
    uint64_t addr; /* the buffer's first byte, as the kernel dereferences it */
    uint64_t size; /* bytes */
};

/* A tensor view: element (i0..in) is at buffer.addr + (start_offset + sum ik*strides[k]) * size. */
struct __attribute__((aligned(64))) pto_tensor {
    struct pto_buffer buffer;
    uint64_t owner_task_id;
    uint64_t start_offset; /* elements */
    int32_t version;
    uint32_t ndims;
    uint8_t dtype;
    uint8_t manual_dep;
    uint8_t is_contiguous;
    uint8_t address_space;
    uint32_t shapes[PTO_MAX_TENSOR_DIMS];
    uint64_t extent_elem;
    uint32_t strides[PTO_MAX_TENSOR_DIMS]; /* elements */
    uint32_t reserved[9];
};

struct pto_local_context {
    int32_t block_idx;
    int32_t block_num;
    uint64_t async_ctx[5]; /* the reference's deferred-completion context: zero on pto-rt */
};

struct pto_global_context {
    int32_t sub_block_id;
    uint32_t pad;
    uint64_t l2_cache_offset; /* 0: no uncached alias */
    int32_t status;           /* pto-rt: nonzero when the kernel has failed (pto_fail) */
    uint32_t reserved;
};

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
