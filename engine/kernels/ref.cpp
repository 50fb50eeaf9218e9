// The scalar reference kernels: the definition of every kernel's arithmetic, and the portable
// fallback on CPUs without a SIMD set. The reduction orders written here (16 fp32 lanes and a
// halving tree; see kernel_sets.h) are part of the definition: every other set of kernel_sets()
// reproduces them exactly, so every kernel set gives the same bits. std::fma is one correctly
// rounded operation on every target, whether it compiles to an instruction or a libm call.
#include <cmath>

#include "kernels/kernel_sets.h"
#include "kernels/situ_lanes.h"
#include "util/check.h"

namespace k3 {
namespace {

// 16 fp32 partial sums and the fixed tree that combines them.
struct Lanes {
    float v[kReduceLanes] = {};

    void add_product(int lane, float w, float x) { v[lane] = std::fma(w, x, v[lane]); }

    float reduce() {
        for (int half = kReduceLanes / 2; half >= 1; half /= 2)
            for (int k = 0; k < half; ++k) v[k] = v[k] + v[k + half];
        return v[0];
    }
};

float dot_f32_ref(const float* a, const float* b, int64_t n) {
    Lanes acc;
    for (int64_t i = 0; i < n; ++i) acc.add_product(static_cast<int>(i % kReduceLanes), a[i], b[i]);
    return acc.reduce();
}

float dot_bf16_row(const uint16_t* w, const float* x, int64_t cols) {
    Lanes acc;
    for (int64_t i = 0; i < cols; ++i) acc.add_product(static_cast<int>(i % kReduceLanes), bf16_to_f32(w[i]), x[i]);
    return acc.reduce();
}

// One MXFP4 row: byte j holds elements 2j (low nibble) and 2j+1 (high nibble) and goes to
// lane j % 16; every 16 bytes (32 elements) share one E8M0 scale. E2M1 x 2^k is exact in fp32.
float dot_mxfp4_row(const uint8_t* packed, const uint8_t* scales, const float* x, int64_t cols) {
    Lanes acc;
    float scale = 0.0f;
    for (int64_t j = 0; j < cols / 2; ++j) {
        if (j % 16 == 0) scale = e8m0_to_float(scales[j / 16]);
        const uint8_t byte = packed[j];
        const int lane = static_cast<int>(j % kReduceLanes);
        acc.add_product(lane, kE2M1[byte & 0x0f] * scale, x[2 * j]);
        acc.add_product(lane, kE2M1[byte >> 4] * scale, x[2 * j + 1]);
    }
    return acc.reduce();
}

void matvec_bf16_ref(const uint16_t* W, const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) y[r] = dot_bf16_row(W + r * cols, x, cols);
}

void matmul_bf16_ref(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T) {
    for (int64_t t = 0; t < T; ++t) matvec_bf16_ref(W, X + t * cols, Y + t * rows, rows, cols);
}

void matvec_mxfp4_ref(const uint8_t* packed, const uint8_t* scales, const float* x, float* y, int64_t rows,
                      int64_t cols) {
    K3_CHECK(cols % 32 == 0, "MXFP4 width %lld is not a multiple of the 32-element group", (long long)cols);
    for (int64_t r = 0; r < rows; ++r)
        y[r] = dot_mxfp4_row(packed + r * (cols / 2), scales + r * (cols / 32), x, cols);
}

void matmul_mxfp4_ref(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                      int64_t cols, int64_t T) {
    for (int64_t t = 0; t < T; ++t) matvec_mxfp4_ref(packed, scales, X + t * cols, Y + t * rows, rows, cols);
}

// docs/model.md "Kimi Delta Attention", steps 1-4 in this order: decay rows; u = k^T S read from
// the decayed S; delta write S[i][j] += (k[i] beta) (v[j] - u[j]) as one fused multiply-add; o =
// qs^T S from the updated S. Sums over the key channel i are one fma chain per j, in increasing i.
void kda_step_ref(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                  float* o, int D) {
    K3_CHECK(D > 0 && D <= kKdaMaxHeadDim, "KDA head dimension %d outside 1..%d", D, kKdaMaxHeadDim);
    float u[kKdaMaxHeadDim];
    for (int j = 0; j < D; ++j) u[j] = 0.0f;
    for (int i = 0; i < D; ++i) {
        float* row = S + static_cast<int64_t>(i) * D;
        for (int j = 0; j < D; ++j) {
            row[j] = row[j] * alpha[i];
            u[j] = std::fma(k[i], row[j], u[j]);
        }
    }
    for (int j = 0; j < D; ++j) {
        u[j] = v[j] - u[j];  // u now holds the delta v - u
        o[j] = 0.0f;
    }
    for (int i = 0; i < D; ++i) {
        float* row = S + static_cast<int64_t>(i) * D;
        const float kb = k[i] * beta;
        for (int j = 0; j < D; ++j) {
            row[j] = std::fma(kb, u[j], row[j]);
            o[j] = std::fma(qs[i], row[j], o[j]);
        }
    }
}

// Per query: 16-lane dots times scale, the shared softmax fold, then acc[j] * c followed by
// one fma chain over the block's positions of p_s * vals[s][j].
void attend_block_ref(const float* Q, int64_t q_stride, int nq, const int32_t* n_valid, const float* keys,
                      int64_t key_stride, const float* vals, int64_t val_stride, int dk, int dv, float scale,
                      float* m, float* l, float* acc, int64_t acc_stride, float* scratch) {
    for (int i = 0; i < nq; ++i) {
        const float* q = Q + i * q_stride;
        float* p = scratch + int64_t(i) * kAttendBlock;
        const int64_t n = n_valid[i];
        for (int64_t s = 0; s < n; ++s) p[s] = dot_f32_ref(q, keys + s * key_stride, dk);
        const float c = fold_block_softmax(p, n, scale, &m[i], &l[i]);
        float* out = acc + i * acc_stride;
        for (int j = 0; j < dv; ++j) {
            float a = out[j] * c;
            for (int64_t s = 0; s < n; ++s) a = std::fma(p[s], vals[s * val_stride + j], a);
            out[j] = a;
        }
    }
}

// Per output, from +0: the product of each term rounded, then added, in increasing d.
void matvec_transposed_bf16_ref(const uint16_t* W, const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t j = 0; j < cols; ++j) y[j] = 0.0f;
    for (int64_t d = 0; d < rows; ++d) {
        const float f = x[d];
        const uint16_t* row = W + d * cols;
        for (int64_t j = 0; j < cols; ++j) y[j] = y[j] + f * bf16_to_f32(row[j]);
    }
}

// Whole escape-free groups of 32 words, one word at a time.
size_t trunk_words_ref(const uint8_t* table, const uint8_t* nibbles, const uint8_t* low, size_t begin, size_t words,
                       uint8_t* dst) {
    size_t i = begin;
    for (; i + 32 <= words; i += 32) {
        bool escape = false;
        for (size_t w = i; w < i + 32; ++w) escape |= ((nibbles[w / 2] >> ((w & 1) * 4)) & 15) == 15;
        if (escape) break;
        for (size_t w = i; w < i + 32; ++w) {
            dst[2 * w] = low[w];
            dst[2 * w + 1] = table[(nibbles[w / 2] >> ((w & 1) * 4)) & 15];
        }
    }
    return i;
}

// SiTU-GLU one element at a time: situ_lanes.h's definition on a single lane.
void situ_glu_ref(float* g, const float* u, int64_t n, float b1, float b2) {
    situ::situ_glu_span<situ::ScalarOps, 1>(g, u, n, b1, b2);
}

}  // namespace

const Kernels& scalar_kernels() {
    static const Kernels table = {
        .name = "scalar",
        .matvec_bf16 = matvec_bf16_ref,
        .matmul_bf16 = matmul_bf16_ref,
        .matvec_mxfp4 = matvec_mxfp4_ref,
        .matmul_mxfp4 = matmul_mxfp4_ref,
        .dot_f32 = dot_f32_ref,
        .kda_step = kda_step_ref,
        .attend_block = attend_block_ref,
        .situ_glu = situ_glu_ref,
        .matvec_transposed_bf16 = matvec_transposed_bf16_ref,
        .trunk_words = trunk_words_ref,
    };
    return table;
}

}  // namespace k3
