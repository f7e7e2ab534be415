// mix_vec_half (AIV lane of a MIX task): this lane's half of E = 2 D + 1, in row-major element
// order (args: A, B, C, D, E; the lane is get_sub_block_id).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *d = pto_tensor_arg(args, 3), *e = pto_tensor_arg(args, 4);
    PTO_SAME_NUMEL(args, d, e);
    const uint64_t half = pto_numel(d) / 2;
    const uint64_t lane = (uint64_t)pto_sub_block_id(args);
    for (uint64_t i = lane * half; i < (lane + 1) * half; ++i) PTO_AT(float, e, i) = 2.0f * PTO_AT(float, d, i) + 1.0f;
}
