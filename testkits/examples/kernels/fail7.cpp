// fail7 (tests): reports failure code 7 after writing its output (args: x, output).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *x = pto_tensor_arg(args, 0);
    PTO_AT(float, x, 0) = 7.0f;
    pto_fail(args, 7);
}
