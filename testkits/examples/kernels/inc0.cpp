// inc0: x[0] += 1 (args: x, in-out).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *x = pto_tensor_arg(args, 0);
    PTO_AT(float, x, 0) += 1.0f;
}
