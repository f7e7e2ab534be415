// accumulate: y += x (args: x, y in-out). Also the tile accumulate of bgemm.
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *x = pto_tensor_arg(args, 0), *y = pto_tensor_arg(args, 1);
    PTO_SAME_NUMEL(args, x, y);
    for (uint64_t i = 0, n = pto_numel(y); i < n; ++i) PTO_AT(float, y, i) += PTO_AT(float, x, i);
}
