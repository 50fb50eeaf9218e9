// How the forward pass spends its threads. Every matrix product is split between the engine's
// compute threads by output rows only (OpenMP, a fixed share per thread), and each output
// element is produced by exactly one kernel call, so results are bit-identical for any thread
// count (kernels.h: a row's reduction order depends only on the shapes). Nothing here
// allocates: per-thread scratch is sized once at load (Compute::reserve).
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace k3 {

struct RowRange {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
};

// Thread ith's share of `rows`, in blocks of `align` rows so SIMD kernels see whole blocks.
inline RowRange thread_rows(int64_t rows, int ith, int nth, int64_t align = 16) {
    const int64_t blocks = (rows + align - 1) / align;
    const int64_t b0 = blocks * ith / nth, b1 = blocks * (ith + 1) / nth;
    return {std::min(rows, b0 * align), std::min(rows, b1 * align)};
}

class Compute {
public:
    Compute(const Kernels& k, int n_threads) : k(k), nth(std::max(1, n_threads)) {}

    // Sizes the per-thread scratch for products of up to `max_tokens` tokens and `max_rows` rows.
    void reserve(int64_t max_tokens, int64_t max_rows);

    // Y[t][r] = sum_i W[r][i] X[t][i]: W bf16 [rows][cols], X [T][cols], Y [T][rows].
    void matmul_bf16(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T) const;

    // One thread's part of an MXFP4 product: rows [r.begin, r.end) of Y [T][rows]. Used from
    // inside a parallel region (the MoE expert phase schedules experts x row blocks itself).
    void mxfp4_rows(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                    int64_t cols, int64_t T, RowRange r) const;
    // Same for bf16 (used by matmul_bf16).
    void bf16_rows(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T,
                   RowRange r) const;

    const Kernels& k;
    const int nth;

private:
    // [nth][tmp_stride_]: a thread's rows of a multi-token product before they are scattered
    // into Y (the kernels write Y densely as [T][their rows]).
    mutable std::vector<float> tmp_;
    int64_t tmp_stride_ = 0;
};

}  // namespace k3
