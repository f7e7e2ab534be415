// tile_matmul (AIC): C = A . B for 2-D tiles A [m, k], B [k, n], C [m, n], possibly inside
// higher-rank tensors whose leading extents are 1 (args: A, B, C, then anything). Also the
// AIC half of the mix example's MIX task.
#include "pto_kernel.h"

namespace {
struct Tile {
    const pto_tensor *t;
    uint32_t rows, cols;
    // Element (r, c) of the tile.
    float &at(uint32_t r, uint32_t c) const { return PTO_AT(float, t, (uint64_t)r * cols + c); }
};

bool tile(const pto_tensor *t, Tile &out) {
    if (t->ndims < 2) return false;
    for (uint32_t k = 0; k + 2 < t->ndims; ++k)
        if (t->shapes[k] != 1) return false;
    out = Tile{t, t->shapes[t->ndims - 2], t->shapes[t->ndims - 1]};
    return true;
}
}  // namespace

PTO_KERNEL void kernel_entry(int64_t *args) {
    Tile a, b, c;
    if (!tile(pto_tensor_arg(args, 0), a) || !tile(pto_tensor_arg(args, 1), b) || !tile(pto_tensor_arg(args, 2), c)) {
        pto_fail(args, 2);
        return;
    }
    if (a.cols != b.rows || a.rows != c.rows || b.cols != c.cols) {
        pto_fail(args, 3);
        return;
    }
    for (uint32_t i = 0; i < c.rows; ++i)
        for (uint32_t j = 0; j < c.cols; ++j) {
            float s = 0.0f;
            for (uint32_t p = 0; p < a.cols; ++p) s += a.at(i, p) * b.at(p, j);
            c.at(i, j) = s;
        }
}
