// Row-split products over the engine's threads (compute.h).
#include "compute.h"

#include <cstring>

#include "util/check.h"

namespace k3 {

void Compute::reserve(int64_t max_tokens, int64_t max_rows) {
    // A thread's share is at most ceil(rows / nth) rounded up to the 16-row blocks, plus one.
    const int64_t share = (max_rows + nth - 1) / nth + 32;
    tmp_stride_ = std::max(tmp_stride_, max_tokens * share);
    tmp_.assign(size_t(nth) * size_t(tmp_stride_), 0.0f);
}

namespace {

// The kernels write a row range densely as [T][n]; copy it into its columns of Y [T][rows].
void scatter_rows(const float* tmp, float* Y, int64_t rows, int64_t T, RowRange r) {
    for (int64_t t = 0; t < T; ++t)
        std::memcpy(Y + t * rows + r.begin, tmp + t * r.size(), sizeof(float) * size_t(r.size()));
}

}  // namespace

void Compute::bf16_rows(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T,
                        RowRange r) const {
    if (r.size() <= 0) return;
    const uint16_t* Wr = W + r.begin * cols;
    if (T == 1) {
        k.matvec_bf16(Wr, X, Y + r.begin, r.size(), cols);
    } else if (r.size() == rows) {
        k.matmul_bf16(Wr, X, Y, rows, cols, T);
    } else {
        float* tmp = tmp_.data() + size_t(omp_get_thread_num()) * size_t(tmp_stride_);
        K3_CHECK(T * r.size() <= tmp_stride_, "matmul scratch too small: %lld tokens x %lld rows",
                 (long long)T, (long long)r.size());
        k.matmul_bf16(Wr, X, tmp, r.size(), cols, T);
        scatter_rows(tmp, Y, rows, T, r);
    }
}

void Compute::mxfp4_rows(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                         int64_t cols, int64_t T, RowRange r) const {
    if (r.size() <= 0) return;
    const uint8_t* Pr = packed + r.begin * (cols / 2);
    const uint8_t* Sr = scales + r.begin * (cols / 32);
    if (T == 1) {
        k.matvec_mxfp4(Pr, Sr, X, Y + r.begin, r.size(), cols);
    } else if (r.size() == rows) {
        k.matmul_mxfp4(Pr, Sr, X, Y, rows, cols, T);
    } else {
        float* tmp = tmp_.data() + size_t(omp_get_thread_num()) * size_t(tmp_stride_);
        K3_CHECK(T * r.size() <= tmp_stride_, "matmul scratch too small: %lld tokens x %lld rows",
                 (long long)T, (long long)r.size());
        k.matmul_mxfp4(Pr, Sr, X, tmp, r.size(), cols, T);
        scatter_rows(tmp, Y, rows, T, r);
    }
}

void Compute::matmul_bf16(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols,
                          int64_t T) const {
    if (nth == 1) {
        bf16_rows(W, X, Y, rows, cols, T, {0, rows});
        return;
    }
#pragma omp parallel num_threads(nth)
    bf16_rows(W, X, Y, rows, cols, T, thread_rows(rows, omp_get_thread_num(), omp_get_num_threads()));
}

}  // namespace k3
