// AVX2 + FMA kernels. This file alone is compiled with -mavx2 -mfma -mf16c; dispatch.cpp calls
// avx2_table() only on CPUs that have them. Every kernel reproduces ref.cpp bit for bit: the
// reference's 16 lanes are two 256-bit registers (lanes 0-7 and 8-15), and its tree starts by
// adding those two registers.
//
// Speed: as avx512.cpp, with half-width registers. bf16 matvec streams one row at a time;
// matmul takes 2 rows x 2 tokens per tile (the shared driver, tile_driver.h); MXFP4 is decoded
// in registers (8-entry permute of the group's scaled magnitudes, then the sign bit by one XOR).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx2_ops.h"
#include "kernels/kernel_sets.h"
#include "kernels/lane_kernels.h"
#include "kernels/tile_driver.h"
#include "kernels/trunk_words_x86.h"

namespace k3 {
namespace {

// ---- shared pieces ----

// 16 lanes as two registers.
struct Acc16 {
    __m256 lo = _mm256_setzero_ps();  // lanes 0-7
    __m256 hi = _mm256_setzero_ps();  // lanes 8-15
};

// The reference's tree: [k]+[k+8] (lo + hi), [k]+[k+4], [k]+[k+2], [0]+[1].
inline float reduce_lanes(const Acc16& a) {
    const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

// Lane mask for the first n (0..8) of 8 floats, for maskload.
inline __m256i first_lanes(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

// acc + w * x on the lanes of mask, acc elsewhere: a tail's lanes past the row's end keep their
// sums exactly (adding 0 * 0 would turn a -0.0 sum into +0.0, which the reference never does).
inline __m256 fmadd_lanes(__m256 w, __m256 x, __m256 acc, __m256i mask) {
    return _mm256_blendv_ps(acc, _mm256_fmadd_ps(w, x, acc), _mm256_castsi256_ps(mask));
}

// The shared tile driver's view of this file (tile_driver.h), and the tag its calls of
// bf16_tile, mxfp4_tile and split_even_odd below are found by: one token takes 2 MXFP4 rows a
// tile so two fma chains overlap; several tokens take 2 x 2 bf16 tiles (8 accumulator registers
// of the 16) and 1 row x 4 tokens of MXFP4.
struct Avx2Tiles {
    static constexpr int kBf16Rows = 2, kBf16Tokens = 2, kMxfp4RowsOneToken = 2, kMxfp4Rows = 1, kMxfp4Tokens = 4;
};

// ---- bf16 matvec / matmul ----

// Software prefetch distance along a weight row (see avx512.cpp).
constexpr int kPrefetchBytes = 4096;

// R rows of W . TB tokens of X into Y[t * y_stride + r]. The column tail goes through
// zero-padded copies, added only on the tail's lanes (fmadd_lanes).
template <int R, int TB>
void bf16_tile(Avx2Tiles, const uint16_t* W, int64_t cols, const float* X, int64_t x_stride, float* Y, int64_t y_stride) {
    Acc16 acc[R][TB];
    const int64_t full = cols & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) {
        if ((i & 31) == 0)
            for (int r = 0; r < R; ++r)
                _mm_prefetch(reinterpret_cast<const char*>(W + r * cols + i) + kPrefetchBytes, _MM_HINT_T0);
        __m256 w_lo[R], w_hi[R];
        for (int r = 0; r < R; ++r) {
            w_lo[r] = Avx2Ops::load_bf16(W + r * cols + i);
            w_hi[r] = Avx2Ops::load_bf16(W + r * cols + i + 8);
        }
        for (int t = 0; t < TB; ++t) {
            const __m256 x_lo = _mm256_loadu_ps(X + t * x_stride + i), x_hi = _mm256_loadu_ps(X + t * x_stride + i + 8);
            for (int r = 0; r < R; ++r) {
                acc[r][t].lo = _mm256_fmadd_ps(w_lo[r], x_lo, acc[r][t].lo);
                acc[r][t].hi = _mm256_fmadd_ps(w_hi[r], x_hi, acc[r][t].hi);
            }
        }
    }
    if (full < cols) {
        const int64_t rem = cols - full;
        const __m256i m_lo = first_lanes(std::min<int64_t>(rem, 8)), m_hi = first_lanes(std::max<int64_t>(rem - 8, 0));
        for (int r = 0; r < R; ++r) {
            alignas(32) uint16_t w_pad[16] = {};
            std::memcpy(w_pad, W + r * cols + full, rem * sizeof(uint16_t));
            const __m256 w_lo = Avx2Ops::load_bf16(w_pad), w_hi = Avx2Ops::load_bf16(w_pad + 8);
            for (int t = 0; t < TB; ++t) {
                const float* x = X + t * x_stride + full;
                acc[r][t].lo = fmadd_lanes(w_lo, _mm256_maskload_ps(x, m_lo), acc[r][t].lo, m_lo);
                acc[r][t].hi = fmadd_lanes(w_hi, _mm256_maskload_ps(x + 8, m_hi), acc[r][t].hi, m_hi);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < TB; ++t) Y[t * y_stride + r] = reduce_lanes(acc[r][t]);
}

// ---- MXFP4 matvec / matmul ----

// x for MXFP4: per 32-element group, the 16 even elements then the 16 odd ones (see avx512.cpp).
void split_even_odd(Avx2Tiles, const float* x, float* out, int64_t cols) {
    for (int64_t g = 0; g < cols; g += 32) {
        for (int half = 0; half < 2; ++half) {  // elements 16*half .. 16*half+15
            const __m256 a = _mm256_loadu_ps(x + g + 16 * half), b = _mm256_loadu_ps(x + g + 16 * half + 8);
            // shuffle picks per 128-bit lane; permute4x64 (0,2,1,3) puts the 64-bit pairs in order.
            const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
            const __m256 odd = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
            _mm256_storeu_ps(out + g + 8 * half,
                             _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0))));
            _mm256_storeu_ps(out + g + 16 + 8 * half,
                             _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), _MM_SHUFFLE(3, 1, 2, 0))));
        }
    }
}

// Eight packed bytes (one per lane) -> the fp32 weights of their low and high nibbles.
// permutevar8x32 reads only the low 3 bits of each index (the magnitude code); the nibble
// shifted into bits 28..31 and XORed on turns the table entry into the signed weight
// (magnitude_xor_code_table in kernel_sets.h).
struct Decoded8 {
    __m256 lo, hi;
};
inline Decoded8 decode8(const uint8_t* bytes8, __m256 magnitude_xor_code) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(bytes8)));
    const __m256i h = _mm256_srli_epi32(b, 4);
    const __m256 lo = _mm256_xor_ps(_mm256_permutevar8x32_ps(magnitude_xor_code, b),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(b, 28)));
    const __m256 hi = _mm256_xor_ps(_mm256_permutevar8x32_ps(magnitude_xor_code, h),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(h, 28)));
    return {lo, hi};
}

// R rows x TB tokens; Xs holds split_even_odd x. Lanes 0-7 are the group's bytes 0-7, lanes
// 8-15 its bytes 8-15; low nibble first, then high, as the reference.
template <int R, int TB>
void mxfp4_tile(Avx2Tiles, const uint8_t* P, const uint8_t* Sc, int64_t cols, const float* Xs, int64_t x_stride, float* Y,
                int64_t y_stride) {
    const MagnitudeXorCodeRow* table = magnitude_xor_code_table();
    const int64_t row_bytes = cols / 2, groups = cols / 32;
    Acc16 acc[R][TB];
    for (int64_t g = 0; g < groups; ++g) {
        Decoded8 first[R], second[R];
        if ((g & 3) == 0)
            for (int r = 0; r < R; ++r)
                _mm_prefetch(reinterpret_cast<const char*>(P + r * row_bytes + g * 16) + kPrefetchBytes / 2,
                             _MM_HINT_T0);
        for (int r = 0; r < R; ++r) {
            const __m256 magnitude_xor_code =
                _mm256_load_ps(reinterpret_cast<const float*>(table[Sc[r * groups + g]].bits));
            first[r] = decode8(P + r * row_bytes + g * 16, magnitude_xor_code);
            second[r] = decode8(P + r * row_bytes + g * 16 + 8, magnitude_xor_code);
        }
        for (int t = 0; t < TB; ++t) {
            const float* xs = Xs + t * x_stride + g * 32;
            const __m256 even_lo = _mm256_loadu_ps(xs), even_hi = _mm256_loadu_ps(xs + 8);
            const __m256 odd_lo = _mm256_loadu_ps(xs + 16), odd_hi = _mm256_loadu_ps(xs + 24);
            for (int r = 0; r < R; ++r) {
                acc[r][t].lo = _mm256_fmadd_ps(first[r].lo, even_lo, acc[r][t].lo);
                acc[r][t].lo = _mm256_fmadd_ps(first[r].hi, odd_lo, acc[r][t].lo);
                acc[r][t].hi = _mm256_fmadd_ps(second[r].lo, even_hi, acc[r][t].hi);
                acc[r][t].hi = _mm256_fmadd_ps(second[r].hi, odd_hi, acc[r][t].hi);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < TB; ++t) Y[t * y_stride + r] = reduce_lanes(acc[r][t]);
}

// ---- dot products ----

// Accumulates a[0..n) . b[0..n) into 16 lanes (element i -> lane i % 16).
inline void dot_lanes(const float* a, const float* b, int64_t n, Acc16& acc) {
    const int64_t full = n & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) {
        acc.lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc.lo);
        acc.hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc.hi);
    }
    if (full < n) {
        const int64_t rem = n - full;
        const __m256i m_lo = first_lanes(std::min<int64_t>(rem, 8)), m_hi = first_lanes(std::max<int64_t>(rem - 8, 0));
        acc.lo = fmadd_lanes(_mm256_maskload_ps(a + full, m_lo), _mm256_maskload_ps(b + full, m_lo), acc.lo, m_lo);
        acc.hi = fmadd_lanes(_mm256_maskload_ps(a + full + 8, m_hi), _mm256_maskload_ps(b + full + 8, m_hi), acc.hi, m_hi);
    }
}

float dot_f32_avx2(const float* a, const float* b, int64_t n) {
    Acc16 acc;
    dot_lanes(a, b, n, acc);
    return reduce_lanes(acc);
}

// ---- KDA recurrence ----

// ---- attention over cached positions ----

// Scores of NQ queries against NK keys at once (each dot in the reference's 16 lanes): every
// load of a query or key chunk feeds NK or NQ multiply-adds instead of one.
template <int NQ, int NK>
void dot_tile(const float* Q, int64_t q_stride, const float* K, int64_t key_stride, int64_t n, float* out,
              int64_t out_stride) {
    Acc16 acc[NQ][NK];
    // Elements [i, i + 8) into the lo or hi half of every accumulator, masked to the first `len`.
    auto step = [&](int64_t i, bool hi, int64_t len) {
        const __m256i m = first_lanes(len);
        __m256 q[NQ];
        for (int a = 0; a < NQ; ++a)
            q[a] = len == 8 ? _mm256_loadu_ps(Q + a * q_stride + i) : _mm256_maskload_ps(Q + a * q_stride + i, m);
        for (int b = 0; b < NK; ++b) {
            const __m256 k =
                len == 8 ? _mm256_loadu_ps(K + b * key_stride + i) : _mm256_maskload_ps(K + b * key_stride + i, m);
            for (int a = 0; a < NQ; ++a) {
                __m256& r = hi ? acc[a][b].hi : acc[a][b].lo;
                r = len == 8 ? _mm256_fmadd_ps(q[a], k, r) : fmadd_lanes(q[a], k, r, m);
            }
        }
    };
    const int64_t full = n & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) {
        step(i, false, 8);
        step(i + 8, true, 8);
    }
    if (full < n) {
        const int64_t rem = n - full;
        step(full, false, std::min<int64_t>(rem, 8));
        if (rem > 8) step(full + 8, true, rem - 8);
    }
    for (int a = 0; a < NQ; ++a)
        for (int b = 0; b < NK; ++b) out[a * out_stride + b] = reduce_lanes(acc[a][b]);
}

// Scores of queries [i0, i0 + NQ) over the first n keys of the block (n is the largest of their
// n_valid; a query's scores past its own n_valid are computed and never read).
template <int NQ>
void score_queries(const float* Q, int64_t q_stride, const float* keys, int64_t key_stride, int64_t n, int dk,
                   float* scores) {
    int64_t s = 0;
    for (; s + 2 <= n; s += 2) dot_tile<NQ, 2>(Q, q_stride, keys + s * key_stride, key_stride, dk, scores + s, kAttendBlock);
    for (; s < n; ++s) dot_tile<NQ, 1>(Q, q_stride, keys + s * key_stride, key_stride, dk, scores + s, kAttendBlock);
}

void attend_block_avx2(const float* Q, int64_t q_stride, int nq, const int32_t* n_valid, const float* keys,
                       int64_t key_stride, const float* vals, int64_t val_stride, int dk, int dv, float scale,
                       float* m, float* l, float* acc, int64_t acc_stride, float* scratch) {
    int i = 0;
    for (; i + 2 <= nq; i += 2)
        score_queries<2>(Q + i * q_stride, q_stride, keys, key_stride, std::max(n_valid[i], n_valid[i + 1]), dk,
                         scratch + int64_t(i) * kAttendBlock);
    for (; i < nq; ++i)
        score_queries<1>(Q + i * q_stride, q_stride, keys, key_stride, n_valid[i], dk, scratch + int64_t(i) * kAttendBlock);
    for (i = 0; i < nq; ++i) {
        float* p = scratch + int64_t(i) * kAttendBlock;
        const float c = fold_block_softmax(p, n_valid[i], scale, &m[i], &l[i]);
        lanes::add_block_values<Avx2Ops>(p, n_valid[i], vals, val_stride, dv, c, acc + i * acc_stride);
    }
}

}  // namespace

const Kernels& avx2_table() {
    static const Kernels table = {
        .name = "avx2",
        .matvec_bf16 = tiles::matvec_bf16<Avx2Tiles>,
        .matmul_bf16 = tiles::matmul_bf16<Avx2Tiles>,
        .matvec_mxfp4 = tiles::matvec_mxfp4<Avx2Tiles>,
        .matmul_mxfp4 = tiles::matmul_mxfp4<Avx2Tiles>,
        .dot_f32 = dot_f32_avx2,
        .kda_step = lanes::kda_step<Avx2Ops>,
        .attend_block = attend_block_avx2,
        .situ_glu = situ_glu_avx2,
        .matvec_transposed_bf16 = lanes::matvec_transposed_bf16<Avx2Ops>,
        .trunk_words = trunk_words_x86,
    };
    return table;
}

}  // namespace k3
