// add_scalar: out = a + s (args: a, out; scalar s, an f32, in slot 2).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *a = pto_tensor_arg(args, 0), *out = pto_tensor_arg(args, 1);
    const float s = pto_scalar_f32(args, 2);
    PTO_SAME_NUMEL(args, a, out);
    for (uint64_t i = 0, n = pto_numel(out); i < n; ++i) PTO_AT(float, out, i) = PTO_AT(float, a, i) + s;
}
