// Shared by every kernel set: E8M0 scales, bf16 narrowing, and the scalar softmax fold and block
// loop of blocked attention.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <unistd.h>

#include "kernels/kernel_sets.h"

namespace k3 {

float e8m0_to_float(uint8_t s) {
    if (s == 255) return 0.0f;  // E8M0 NaN: the whole group decodes to zero (docs/model.md "Numerics")
    return std::ldexp(1.0f, static_cast<int>(s) - 127);
}

int64_t l2_cache_bytes() {
#ifdef _SC_LEVEL2_CACHE_SIZE
    const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);  // glibc: from cpuid on x86, 0 or -1 if unknown
    if (bytes > 0) return bytes;
#endif
    return 256 * 1024;
}

float softmax_exp(float x) {
    if (std::isnan(x)) return x;
    if (x < kSoftmaxExpMin) return 0.0f;  // also -inf: the first block's c
    if (x > kSoftmaxExpMax) return INFINITY;
    // n = x / ln 2 rounded to nearest (the 1.5 * 2^23 shift), r = x - n ln 2 in two steps
    const float n = (x * kLog2e + kRoundShift) - kRoundShift;
    float r = std::fma(n, -kLn2Hi, x);
    r = std::fma(n, -kLn2Lo, r);
    float p = kExpPoly[7];
    for (int k = 6; k >= 0; --k) p = std::fma(p, r, kExpPoly[k]);
    return p * std::bit_cast<float>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
}

float fold_block_softmax(float* scores, int64_t n, float scale, float* m, float* l) {
    float max_score = *m;
    for (int64_t s = 0; s < n; ++s) {
        scores[s] = scores[s] * scale;
        if (scores[s] > max_score) max_score = scores[s];
    }
    const float c = softmax_exp(*m - max_score);  // 0 on the first block (*m = -inf), 1 when the max holds
    float lanes[kReduceLanes] = {};
    for (int64_t s = 0; s < n; ++s) {
        scores[s] = softmax_exp(scores[s] - max_score);
        lanes[s % kReduceLanes] = lanes[s % kReduceLanes] + scores[s];
    }
    for (int half = kReduceLanes / 2; half >= 1; half /= 2)
        for (int k = 0; k < half; ++k) lanes[k] = lanes[k] + lanes[k + half];
    *m = max_score;
    *l = *l * c + lanes[0];
    return c;
}

void attend_head(const Kernels& k, const float* q, const float* keys, int64_t key_stride, const float* vals,
                 int64_t val_stride, int64_t n_pos, int dk, int dv, float scale, float* out, float* scratch) {
    for (int j = 0; j < dv; ++j) out[j] = 0.0f;
    if (n_pos <= 0) return;
    float m = -INFINITY, l = 0.0f;
    for (int64_t b0 = 0; b0 < n_pos; b0 += kAttendBlock) {
        const int32_t n = static_cast<int32_t>(std::min<int64_t>(kAttendBlock, n_pos - b0));
        k.attend_block(q, 0, 1, &n, keys + b0 * key_stride, key_stride, vals + b0 * val_stride, val_stride, dk, dv,
                       scale, &m, &l, out, 0, scratch);
    }
    for (int j = 0; j < dv; ++j) out[j] = out[j] / l;
}

void kda_step_column(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                     float* o, int D, int j) {
    float u = 0.0f;
    for (int i = 0; i < D; ++i) {
        float& s = S[static_cast<int64_t>(i) * D + j];
        s = s * alpha[i];
        u = std::fma(k[i], s, u);
    }
    const float delta = v[j] - u;
    float out = 0.0f;
    for (int i = 0; i < D; ++i) {
        float& s = S[static_cast<int64_t>(i) * D + j];
        s = std::fma(k[i] * beta, delta, s);
        out = std::fma(qs[i], s, out);
    }
    o[j] = out;
}

uint16_t f32_to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    return static_cast<uint16_t>(u >> 16);
}

const ScaledE2M1Row* scaled_e2m1_table() {
    static const auto table = [] {
        std::array<ScaledE2M1Row, 256> t{};
        for (int s = 0; s < 256; ++s)
            for (int c = 0; c < 16; ++c) t[s].v[c] = kE2M1[c] * e8m0_to_float(static_cast<uint8_t>(s));
        return t;
    }();
    return table.data();
}

const MagnitudeXorCodeRow* magnitude_xor_code_table() {
    static const auto table = [] {
        std::array<MagnitudeXorCodeRow, 256> t{};
        const ScaledE2M1Row* scaled = scaled_e2m1_table();
        for (int s = 0; s < 256; ++s)
            for (uint32_t c = 0; c < 8; ++c) {
                uint32_t bits;
                std::memcpy(&bits, &scaled[s].v[c], 4);
                t[s].bits[c] = bits ^ (c << 28);
            }
        return t;
    }();
    return table.data();
}

}  // namespace k3
