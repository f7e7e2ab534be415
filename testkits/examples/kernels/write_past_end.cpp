// write_past_end (tests): fills its output, then stores one element past the view's end
// (args: x, output).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *x = pto_tensor_arg(args, 0);
    const uint64_t n = pto_numel(x);
    for (uint64_t i = 0; i < n; ++i) PTO_AT(float, x, i) = 1.0f;
    ((float *)(uintptr_t)x->buffer.addr)[pto_elem_offset(x, n - 1) + 1] = 2.0f;
}
