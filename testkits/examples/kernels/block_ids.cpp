// block_ids (tests): element 16 (2 block_idx + sub_block_id) of out (each on its own 64-byte
// line, so no two cores write one line) = 100 block_num + block_idx + 1000 sub_block_id
// (args: x, not used; out, output).
#include "elementwise.h"

PTO_KERNEL void kernel_entry(int64_t *args) {
    const pto_tensor *out = pto_tensor_arg(args, 1);
    const int32_t b = pto_block_idx(args), n = pto_block_num(args), lane = pto_sub_block_id(args);
    const uint64_t at = 16 * (2 * (uint64_t)b + (uint64_t)lane);
    if (b < 0 || lane < 0 || at >= pto_numel(out)) {
        pto_fail(args, 9);
        return;
    }
    PTO_AT(float, out, at) = (float)(100 * n + b + 1000 * lane);
}
