// write_input (tests): copies a into out, and stores into its input a too (args: a, out).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *a = pto_tensor_arg(args, 0), *out = pto_tensor_arg(args, 1);
    for (uint64_t i = 0, n = pto_numel(out); i < n; ++i) PTO_AT(float, out, i) = PTO_AT(float, a, i);
    PTO_AT(float, a, 3) = -1.0f;
}
