// How the forward pass spends its threads. Every weight product is cut into blocks of output
// rows that the engine's threads take dynamically (thread_pool.h); each output element is produced by
// exactly one kernel call, whose reduction order depends only on the shapes (kernels.h), so the
// bits never depend on the thread count or on which thread took which block. Dynamic blocks
// also keep a busy machine from stalling every product on one descheduled thread. Several
// independent products are run in one parallel region (one fork/join instead of several).
// Nothing here allocates: per-thread scratch is sized once at load (Compute::reserve).
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/kernels.h"
#include "util/thread_pool.h"

namespace k3 {

struct RowRange {
    int64_t begin = 0, end = 0;
    int64_t size() const { return end - begin; }
};

// One product Y [T][rows] = X [T][cols] W^T with W bf16 [rows][cols].
struct Bf16Product {
    const uint16_t* W;
    const float* X;
    float* Y;
    int64_t rows, cols;
};

// Rows per work block: about four blocks per thread, whole multiples of 16, at most kMaxBlockRows.
inline constexpr int64_t kMaxBlockRows = 512;
inline int64_t block_rows_for(int64_t rows, int nth) {
    const int64_t want = (rows + 4 * nth - 1) / (4 * nth);
    return std::clamp<int64_t>((want + 15) / 16 * 16, 16, kMaxBlockRows);
}

class Compute {
public:
    Compute(const Kernels& k, int n_threads) : k(k), nth(std::max(1, n_threads)), pool_(nth) {}

    // Sizes the per-thread scratch for products of up to `max_tokens` tokens.
    void reserve(int64_t max_tokens);

    // Y[t][r] = sum_i W[r][i] X[t][i]: W bf16 [rows][cols], X [T][cols], Y [T][rows].
    void matmul_bf16(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T) const {
        matmul_bf16_many({Bf16Product{W, X, Y, rows, cols}}, T);
    }
    // Several independent products over the same T tokens, in one parallel region.
    void matmul_bf16_many(std::initializer_list<Bf16Product> products, int64_t T) const;

    // One work block of a product, run by pool thread `thread`: rows [r.begin, r.end) of
    // Y [T][rows] (r.size() <= kMaxBlockRows unless r is all rows).
    void bf16_rows(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T, RowRange r,
                   int thread) const;
    void mxfp4_rows(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                    int64_t cols, int64_t T, RowRange r, int thread) const;

    // fn(item, thread) for item in [0, n), on the engine's threads.
    template <class F>
    void parallel_for(int64_t n, F&& fn) const {
        pool_.parallel_for(n, std::forward<F>(fn));
    }

    const Kernels& k;
    const int nth;

private:
    float* thread_tmp(int thread) const { return tmp_.data() + size_t(thread) * size_t(tmp_stride_); }
    mutable ThreadPool pool_;
    // [nth][max_tokens * kMaxBlockRows]: a block's rows of a multi-token product before they are
    // scattered into Y (the kernels write their output densely as [T][their rows]).
    mutable std::vector<float> tmp_;
    int64_t tmp_stride_ = 0;
};

// fn(i) for i in [0, n), in chunks of 1024 elements on the engine's threads.
template <class F>
void parallel_elementwise(const Compute& cp, int64_t n, F&& fn) {
    constexpr int64_t kChunk = 1024;
    cp.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk, int) {
        const int64_t end = std::min(n, (chunk + 1) * kChunk);
        for (int64_t i = chunk * kChunk; i < end; ++i) fn(i);
    });
}

// SiTU-GLU in place, g[i] = situ_glu(g[i], u[i]) for i < n (the kernels' situ_glu, whose bits do
// not depend on how the elements are cut), in chunks of 1024 on the engine's threads.
inline void parallel_situ_glu(const Compute& cp, float* g, const float* u, int64_t n, float b1, float b2) {
    constexpr int64_t kChunk = 1024;
    cp.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk, int) {
        const int64_t i0 = chunk * kChunk;
        cp.k.situ_glu(g + i0, u + i0, std::min(n, i0 + kChunk) - i0, b1, b2);
    });
}

}  // namespace k3
