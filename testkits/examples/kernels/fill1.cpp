// fill1: x[:] = 1 (args: x, output).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *x = pto_tensor_arg(args, 0);
    for (uint64_t i = 0, n = pto_numel(x); i < n; ++i) PTO_AT(float, x, i) = 1.0f;
}
