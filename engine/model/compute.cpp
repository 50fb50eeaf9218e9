// Block-scheduled products over the engine's threads (compute.h).
#include "model/compute.h"

#include <cstring>

#include "util/check.h"

namespace k3 {

void Compute::reserve(int64_t max_tokens) {
    tmp_stride_ = max_tokens * kMaxBlockRows;
    tmp_.assign(size_t(nth) * size_t(tmp_stride_), 0.0f);
}

namespace {

// The kernels write a row block densely as [T][n]; copy it into its columns of Y [T][rows].
void scatter_rows(const float* tmp, float* Y, int64_t rows, int64_t T, RowRange r) {
    for (int64_t t = 0; t < T; ++t)
        std::memcpy(Y + t * rows + r.begin, tmp + t * r.size(), sizeof(float) * size_t(r.size()));
}

}  // namespace

void Compute::bf16_rows(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T,
                        RowRange r, int thread) const {
    if (r.size() <= 0) return;
    const uint16_t* Wr = W + r.begin * cols;
    if (T == 1) {
        k.matvec_bf16(Wr, X, Y + r.begin, r.size(), cols);
    } else if (r.size() == rows) {
        k.matmul_bf16(Wr, X, Y, rows, cols, T);
    } else {
        K3_CHECK(T * r.size() <= tmp_stride_, "product scratch too small: %lld tokens x %lld rows", (long long)T,
                 (long long)r.size());
        float* tmp = thread_tmp(thread);
        k.matmul_bf16(Wr, X, tmp, r.size(), cols, T);
        scatter_rows(tmp, Y, rows, T, r);
    }
}

void Compute::mxfp4_rows(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                         int64_t cols, int64_t T, RowRange r, int thread) const {
    if (r.size() <= 0) return;
    const uint8_t* Pr = packed + r.begin * (cols / 2);
    const uint8_t* Sr = scales + r.begin * (cols / 32);
    if (T == 1) {
        k.matvec_mxfp4(Pr, Sr, X, Y + r.begin, r.size(), cols);
    } else if (r.size() == rows) {
        k.matmul_mxfp4(Pr, Sr, X, Y, rows, cols, T);
    } else {
        K3_CHECK(T * r.size() <= tmp_stride_, "product scratch too small: %lld tokens x %lld rows", (long long)T,
                 (long long)r.size());
        float* tmp = thread_tmp(thread);
        k.matmul_mxfp4(Pr, Sr, X, tmp, r.size(), cols, T);
        scatter_rows(tmp, Y, rows, T, r);
    }
}

void Compute::matmul_bf16_many(std::initializer_list<Bf16Product> products, int64_t T) const {
    constexpr int kMaxProducts = 8;
    K3_CHECK(products.size() <= kMaxProducts, "at most %d products per call", kMaxProducts);
    Bf16Product p[kMaxProducts];
    int64_t block[kMaxProducts], first_item[kMaxProducts + 1];
    int n = 0;
    first_item[0] = 0;
    for (const Bf16Product& q : products) {
        p[n] = q;
        block[n] = block_rows_for(q.rows, nth);
        first_item[n + 1] = first_item[n] + (q.rows + block[n] - 1) / block[n];
        ++n;
    }
    const int64_t n_items = first_item[n];
    auto run_item = [&](int64_t item, int thread) {
        int j = 0;
        while (item >= first_item[j + 1]) ++j;
        const int64_t r0 = (item - first_item[j]) * block[j];
        bf16_rows(p[j].W, p[j].X, p[j].Y, p[j].rows, p[j].cols, T, {r0, std::min(p[j].rows, r0 + block[j])},
                  thread);
    };
    if (nth == 1) {  // whole products: the kernels write Y directly
        for (int j = 0; j < n; ++j) bf16_rows(p[j].W, p[j].X, p[j].Y, p[j].rows, p[j].cols, T, {0, p[j].rows}, 0);
        return;
    }
    pool_.parallel_for(n_items, run_item);
}

}  // namespace k3
