// add1: y += 1 (args: y, in-out).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *y = pto_tensor_arg(args, 0);
    for (uint64_t i = 0, n = pto_numel(y); i < n; ++i) PTO_AT(float, y, i) += 1.0f;
}
