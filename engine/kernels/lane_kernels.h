// Private to engine/kernels: kernels (or their parts) written once over an ISA's lane operations
// O (avx2_ops.h, avx512_ops.h, neon_ops.h; the same as situ_lanes.h's), so the SIMD sets share one
// text and differ only in their lane width. Each output element gets the operations of ref.cpp
// in ref.cpp's order, whatever the width: a set's bits are the scalar set's.
//
// O provides V, kWidth, load, load_bf16, store, set1, add, sub, mul and fma (fused). Every
// template here takes O, which each ISA header declares in an anonymous namespace, so every
// instantiation is that file's own, compiled with that file's ISA flags only.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/kernel_sets.h"
#include "util/check.h"

namespace k3::lanes {

// ---- KDA recurrence (kernels.h, kda_step) ----

// Every column j of S evolves on its own (u[j], the delta and o[j] involve column j only), so
// the step runs block of columns by block of columns, each kept in registers through both
// passes, in exactly the reference's per-element order. NV vectors of columns from column j0.
template <class O, int NV>
void kda_columns(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta, float* o,
                 int D, int j0) {
    using V = typename O::V;
    constexpr int W = O::kWidth;
    V u[NV];
    for (int b = 0; b < NV; ++b) u[b] = O::set1(0.0f);
    for (int i = 0; i < D; ++i) {  // 1. decay rows, 2. u = k^T S from the decayed rows
        float* row = S + static_cast<int64_t>(i) * D + j0;
        const V a = O::set1(alpha[i]), ki = O::set1(k[i]);
        for (int b = 0; b < NV; ++b) {
            const V s = O::mul(O::load(row + W * b), a);
            O::store(row + W * b, s);
            u[b] = O::fma(ki, s, u[b]);
        }
    }
    V out[NV];
    for (int b = 0; b < NV; ++b) {
        u[b] = O::sub(O::load(v + j0 + W * b), u[b]);  // the delta v - u
        out[b] = O::set1(0.0f);
    }
    for (int i = 0; i < D; ++i) {  // 3. delta write, 4. o = qs^T S from the updated rows
        float* row = S + static_cast<int64_t>(i) * D + j0;
        const V kb = O::set1(k[i] * beta), qi = O::set1(qs[i]);
        for (int b = 0; b < NV; ++b) {
            const V s = O::fma(kb, u[b], O::load(row + W * b));
            O::store(row + W * b, s);
            out[b] = O::fma(qi, s, out[b]);
        }
    }
    for (int b = 0; b < NV; ++b) O::store(o + j0 + W * b, out[b]);
}

// Blocks of 32 columns, then one vector at a time, then the last D % width columns one by one
// (kda_step_column, compiled without ISA flags).
template <class O>
void kda_step(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta, float* o,
              int D) {
    K3_CHECK(D > 0 && D <= kKdaMaxHeadDim, "KDA head dimension %d outside 1..%d", D, kKdaMaxHeadDim);
    constexpr int W = O::kWidth, kBlock = 32 / W;
    int j = 0;
    for (; j + 32 <= D; j += 32) kda_columns<O, kBlock>(S, qs, k, v, alpha, beta, o, D, j);
    for (; j + W <= D; j += W) kda_columns<O, 1>(S, qs, k, v, alpha, beta, o, D, j);
    for (; j < D; ++j) kda_step_column(S, qs, k, v, alpha, beta, o, D, j);
}

// ---- attention (kernels.h, attend_block) ----

// A query's running values after its block's fold: out[j] = out[j] * c, then one fma chain over
// the block's n positions of p[s] * vals[s][j]. Four vectors of columns at a time, then one, then
// the last columns one by one.
template <class O>
void add_block_values(const float* p, int64_t n, const float* vals, int64_t val_stride, int dv, float c, float* out) {
    using V = typename O::V;
    constexpr int W = O::kWidth;
    const V cv = O::set1(c);
    int j = 0;
    for (; j + 4 * W <= dv; j += 4 * W) {
        V a[4];
        for (int b = 0; b < 4; ++b) a[b] = O::mul(O::load(out + j + W * b), cv);
        for (int64_t s = 0; s < n; ++s) {
            const V ps = O::set1(p[s]);
            const float* val = vals + s * val_stride + j;
            for (int b = 0; b < 4; ++b) a[b] = O::fma(ps, O::load(val + W * b), a[b]);
        }
        for (int b = 0; b < 4; ++b) O::store(out + j + W * b, a[b]);
    }
    for (; j + W <= dv; j += W) {
        V a = O::mul(O::load(out + j), cv);
        for (int64_t s = 0; s < n; ++s) a = O::fma(O::set1(p[s]), O::load(vals + s * val_stride + j), a);
        O::store(out + j, a);
    }
    for (; j < dv; ++j) {
        float a = out[j] * c;
        for (int64_t s = 0; s < n; ++s) a = std::fma(p[s], vals[s * val_stride + j], a);
        out[j] = a;
    }
}

// ---- transposed bf16 product (kernels.h, matvec_transposed_bf16) ----

// y[j] = sum over d of x[d] * W[d][j], from +0, a product then a sum per term, in increasing d.
// Four vectors of columns stay in registers while the rows go by, then one, then the last
// columns one by one.
template <class O>
void matvec_transposed_bf16(const uint16_t* Wt, const float* x, float* y, int64_t rows, int64_t cols) {
    using V = typename O::V;
    constexpr int W = O::kWidth;
    int64_t j = 0;
    for (; j + 4 * W <= cols; j += 4 * W) {
        V a[4];
        for (int b = 0; b < 4; ++b) a[b] = O::set1(0.0f);
        for (int64_t d = 0; d < rows; ++d) {
            const V xd = O::set1(x[d]);
            const uint16_t* row = Wt + d * cols + j;
            for (int b = 0; b < 4; ++b) a[b] = O::add(a[b], O::mul(xd, O::load_bf16(row + W * b)));
        }
        for (int b = 0; b < 4; ++b) O::store(y + j + W * b, a[b]);
    }
    for (; j + W <= cols; j += W) {
        V a = O::set1(0.0f);
        for (int64_t d = 0; d < rows; ++d) a = O::add(a, O::mul(O::set1(x[d]), O::load_bf16(Wt + d * cols + j)));
        O::store(y + j, a);
    }
    for (; j < cols; ++j) {
        float a = 0.0f;
        for (int64_t d = 0; d < rows; ++d) a = a + x[d] * bf16_to_f32(Wt[d * cols + j]);
        y[j] = a;
    }
}

}  // namespace k3::lanes
