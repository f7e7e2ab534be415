// Shared helpers of the example kernels: element-wise loops over any views (strided or not).
#pragma once
#include "pto_kernel.h"

// Fails the task with code 1 when two views disagree in element count.
#define PTO_SAME_NUMEL(args, x, y)                 \
    do {                                           \
        if (pto_numel(x) != pto_numel(y)) {        \
            pto_fail((args), 1);                   \
            return;                                \
        }                                          \
    } while (0)
