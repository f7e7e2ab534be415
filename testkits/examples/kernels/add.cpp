// add: out = a + b (args: a, b, out).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *a = pto_tensor_arg(args, 0), *b = pto_tensor_arg(args, 1), *out = pto_tensor_arg(args, 2);
    PTO_SAME_NUMEL(args, a, out);
    PTO_SAME_NUMEL(args, b, out);
    for (uint64_t i = 0, n = pto_numel(out); i < n; ++i) PTO_AT(float, out, i) = PTO_AT(float, a, i) + PTO_AT(float, b, i);
}
