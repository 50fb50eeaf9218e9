// AVX-512 (F, BW, VL, DQ) kernels. This file alone is compiled with those flags; dispatch.cpp
// calls avx512_table() only on CPUs that have them. Every kernel reproduces ref.cpp bit for
// bit: one 512-bit register is exactly the reference's 16 lanes (lane l = element i % 16, or
// packed byte j % 16 for MXFP4), combined by the same halving tree.
//
// Speed: a one-token matvec streams each weight row once with a software prefetch ahead (bf16
// one row at a time, MXFP4 eight rows so the decode work overlaps); matmul computes tiles of
// rows x tokens so a weight line is loaded once for several tokens, and a pass of tokens keeps
// its activations in L2 while the weights stream once. MXFP4 is decoded in registers (nibbles
// -> permute of the 16-entry table already multiplied by the group's scale, kernel_sets.h),
// never into memory.

// GCC 12's AVX-512 headers build some intrinsics on _mm512_undefined_*(), which its
// uninitialised-use analysis reports after inlining (a known false positive).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/avx512_ops.h"
#include "kernels/kernel_sets.h"
#include "kernels/lane_kernels.h"
#include "kernels/tile_driver.h"
#include "kernels/trunk_words_x86.h"
#include "util/check.h"

namespace k3 {
namespace {

// ---- shared pieces ----

// The reference's tree over 16 lanes: [k]+[k+8], [k]+[k+4], [k]+[k+2], [0]+[1].
inline float reduce_lanes(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

// reduce_lanes of 16 registers at once, the same tree step by step, each step adding pairs of
// half-registers gathered from two registers (so 15 adds in place of 60): element k of the
// result is the sum of v[k]. Addition is commutative, so the bits are reduce_lanes' bits.
inline __m512 reduce_lanes_16(const __m512 (&v)[16]) {
    __m512 s8[8], s4[4], s2[2];
    for (int k = 0; k < 8; ++k)  // [k] + [k+8]: sum 2k in elements 0-7, sum 2k+1 in 8-15
        s8[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int k = 0; k < 4; ++k)  // [k] + [k+4]: 128-bit lane L holds sum 4k + L
        s4[k] = _mm512_add_ps(_mm512_shuffle_f32x4(s8[2 * k], s8[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(s8[2 * k], s8[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int k = 0; k < 2; ++k)  // [k] + [k+2]: lane L holds sums 8k + L (elements 0-1), 8k + 4 + L (2-3)
        s2[k] = _mm512_add_ps(_mm512_shuffle_ps(s4[2 * k], s4[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(s4[2 * k], s4[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    // [0] + [1]: element 4L + e holds sum 4e + L; permuted to element k = sum k
    const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                      _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0), sums);
}

// out[a * out_stride + b] = the sum of acc[a][b], by reduce_lanes_16.
inline void reduce_lanes_4x4(const __m512 (&acc)[4][4], float* out, int64_t out_stride) {
    __m512 v[16];
    for (int k = 0; k < 16; ++k) v[k] = acc[k / 4][k % 4];
    const __m512 rows = reduce_lanes_16(v);
    // The lane index is an immediate: written out, so that builds without optimisation (the
    // sanitizer preset) compile it too.
    _mm_storeu_ps(out + 0 * out_stride, _mm512_extractf32x4_ps(rows, 0));
    _mm_storeu_ps(out + 1 * out_stride, _mm512_extractf32x4_ps(rows, 1));
    _mm_storeu_ps(out + 2 * out_stride, _mm512_extractf32x4_ps(rows, 2));
    _mm_storeu_ps(out + 3 * out_stride, _mm512_extractf32x4_ps(rows, 3));
}

// A matmul tile's R x TB sums into Y[t * y_stride + r]: with 4 rows, tokens 0-3 by one shared
// tree for their 16 sums, the others one reduce_lanes each (the same bits either way).
template <int R, int TB>
inline void store_tile_sums(const __m512 (&acc)[R][TB], float* Y, int64_t y_stride) {
    int first_single = 0;
    if constexpr (R == 4 && TB >= 4) {
        __m512 by_token[4][4];
        for (int r = 0; r < 4; ++r)
            for (int t = 0; t < 4; ++t) by_token[t][r] = acc[r][t];
        reduce_lanes_4x4(by_token, Y, y_stride);
        first_single = 4;
    }
    for (int r = 0; r < R; ++r)
        for (int t = first_single; t < TB; ++t) Y[t * y_stride + r] = reduce_lanes(acc[r][t]);
}

inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// bf16 -> fp32 is exact: the 16 bits become the top half of the fp32 word.
inline __m512 widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load_bf16(const uint16_t* p) {
    return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_bf16_masked(const uint16_t* p, __mmask16 m) { return widen_bf16(_mm256_maskz_loadu_epi16(m, p)); }

// The shared tile driver's view of this file (tile_driver.h), and the tag its calls of
// bf16_tile, mxfp4_tile and split_even_odd below are found by.
// One token (decode): one row per tile. A single sequential stream reads DRAM faster here than
// 2 or 4 rows interleaved (measured: 0.9 against 0.6-0.7 of the streaming bandwidth for rows
// up to 4096 wide), and one fma chain per 16 columns still computes about twice as fast as one
// core's share of memory bandwidth.
// Several tokens (prefill, MoE batches): 4 rows x 6 tokens per tile, 24 accumulators, so each
// weight load (and its widening) feeds 6 fmas and each activation load 4; the activations of a
// pass of tokens stay in L2 and every weight row is read from DRAM once per pass. 4 x 6 against
// 4 x 4: 0.86 against 0.75-0.79 of the FMA peak for a 7168-wide matrix, one thread, 24-48
// tokens a pass (docs/performance.md, "Prefill matmuls against the FMA peak").
// MXFP4: decoding costs more instructions per byte than bf16, so one token takes 8 rows at once
// (eight independent fma chains); several tokens take 4 rows x 4 tokens (16 accumulators).
struct Avx512Tiles {
    static constexpr int kBf16Rows = 4, kBf16Tokens = 6, kMxfp4RowsOneToken = 8, kMxfp4Rows = 4, kMxfp4Tokens = 4;
};

// ---- bf16 matvec / matmul ----

// Software prefetch distance along a weight row. The hardware prefetcher alone leaves the core
// waiting on DRAM between bursts of compute; asking for the line 4 KiB ahead overlaps the two
// (bench_kernels: about 0.75 -> 0.9 of the streaming bandwidth on this machine).
constexpr int kBf16PrefetchBytes = 4096;

// Y[t * y_stride + r] = row r of W . token t of X, for R rows and TB tokens. Each (row, token)
// keeps its own 16-lane accumulator, so the tile shape never changes a result's bits.
template <int R, int TB>
void bf16_tile(Avx512Tiles, const uint16_t* W, int64_t cols, const float* X, int64_t x_stride, float* Y, int64_t y_stride) {
    __m512 acc[R][TB];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_setzero_ps();
    const int64_t full = cols & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) {
        if ((i & 31) == 0)  // once per 64-byte line of each row
            for (int r = 0; r < R; ++r)
                _mm_prefetch(reinterpret_cast<const char*>(W + r * cols + i) + kBf16PrefetchBytes, _MM_HINT_T0);
        __m512 x[TB];
        for (int t = 0; t < TB; ++t) x[t] = _mm512_loadu_ps(X + t * x_stride + i);
        for (int r = 0; r < R; ++r) {
            const __m512 w = load_bf16(W + r * cols + i);
            for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_fmadd_ps(w, x[t], acc[r][t]);
        }
    }
    if (full < cols) {  // lanes past the tail keep their sums (mask3): adding 0 * 0 would turn -0.0 into +0.0
        const __mmask16 m = tail_mask(cols - full);
        __m512 x[TB];
        for (int t = 0; t < TB; ++t) x[t] = _mm512_maskz_loadu_ps(m, X + t * x_stride + full);
        for (int r = 0; r < R; ++r) {
            const __m512 w = load_bf16_masked(W + r * cols + full, m);
            for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_mask3_fmadd_ps(w, x[t], acc[r][t], m);
        }
    }
    store_tile_sums<R, TB>(acc, Y, y_stride);
}


// ---- MXFP4 matvec / matmul ----

// x for MXFP4: per 32-element group, the 16 even elements then the 16 odd ones, so that lane l
// of a group (packed byte l: elements 2l and 2l+1) meets its x values with plain loads.
void split_even_odd(Avx512Tiles, const float* x, float* out, int64_t cols) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t g = 0; g < cols; g += 32) {
        const __m512 a = _mm512_loadu_ps(x + g), b = _mm512_loadu_ps(x + g + 16);
        _mm512_storeu_ps(out + g, _mm512_permutex2var_ps(a, even, b));
        _mm512_storeu_ps(out + g + 16, _mm512_permutex2var_ps(a, odd, b));
    }
}

// As for bf16: prefetching 2 KiB ahead of each row overlaps DRAM waits with decoding.
constexpr int kMxfp4PrefetchBytes = 2048;

// R rows x TB tokens; Xs holds the tokens' x already split by split_even_odd. Per group, the
// low nibbles meet the even x values and then the high nibbles the odd ones: the reference's
// order (low nibble first) in every lane.
template <int R, int TB>
void mxfp4_tile(Avx512Tiles, const uint8_t* P, const uint8_t* Sc, int64_t cols, const float* Xs, int64_t x_stride, float* Y,
                int64_t y_stride) {
    const ScaledE2M1Row* scaled_table = scaled_e2m1_table();
    const int64_t row_bytes = cols / 2, groups = cols / 32;
    __m512 acc[R][TB];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < TB; ++t) acc[r][t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
        __m512 w_lo[R], w_hi[R];
        if ((g & 3) == 0)  // once per 64-byte line of each row
            for (int r = 0; r < R; ++r)
                _mm_prefetch(reinterpret_cast<const char*>(P + r * row_bytes + g * 16) + kMxfp4PrefetchBytes,
                             _MM_HINT_T0);
        for (int r = 0; r < R; ++r) {
            const __m512i bytes = _mm512_cvtepu8_epi32(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(P + r * row_bytes + g * 16)));
            const __m512 scaled = _mm512_load_ps(scaled_table[Sc[r * groups + g]].v);
            // permutexvar reads only the low 4 bits of each index: the low nibble as it stands.
            w_lo[r] = _mm512_permutexvar_ps(bytes, scaled);
            w_hi[r] = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), scaled);
        }
        for (int t = 0; t < TB; ++t) {
            const __m512 x_even = _mm512_loadu_ps(Xs + t * x_stride + g * 32);
            const __m512 x_odd = _mm512_loadu_ps(Xs + t * x_stride + g * 32 + 16);
            for (int r = 0; r < R; ++r) {
                acc[r][t] = _mm512_fmadd_ps(w_lo[r], x_even, acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(w_hi[r], x_odd, acc[r][t]);
            }
        }
    }
    store_tile_sums<R, TB>(acc, Y, y_stride);
}


// ---- dot products ----

float dot_f32_avx512(const float* a, const float* b, int64_t n) {
    __m512 acc = _mm512_setzero_ps();
    const int64_t full = n & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
    if (full < n) {
        const __mmask16 m = tail_mask(n - full);
        acc = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, a + full), _mm512_maskz_loadu_ps(m, b + full), acc, m);
    }
    return reduce_lanes(acc);
}

// ---- KDA recurrence ----

// D <= 16 * NV: u and o live in NV registers, the last one masked to D.
template <int NV>
void kda_step_regs(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                   float* o, int D) {
    __mmask16 mask[NV];
    for (int b = 0; b < NV; ++b) {
        const int n = std::clamp(D - 16 * b, 0, 16);
        mask[b] = tail_mask(n);
    }
    __m512 u[NV];
    for (int b = 0; b < NV; ++b) u[b] = _mm512_setzero_ps();
    // 1. decay rows and 2. read u = k^T S from the decayed rows
    for (int i = 0; i < D; ++i) {
        float* row = S + static_cast<int64_t>(i) * D;
        const __m512 a = _mm512_set1_ps(alpha[i]), ki = _mm512_set1_ps(k[i]);
        for (int b = 0; b < NV; ++b) {
            const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask[b], row + 16 * b), a);
            _mm512_mask_storeu_ps(row + 16 * b, mask[b], s);
            u[b] = _mm512_fmadd_ps(ki, s, u[b]);
        }
    }
    // 3. delta write S += (k beta) (v - u) and 4. read o = qs^T S from the updated rows
    __m512 delta[NV], out[NV];
    for (int b = 0; b < NV; ++b) {
        delta[b] = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask[b], v + 16 * b), u[b]);
        out[b] = _mm512_setzero_ps();
    }
    for (int i = 0; i < D; ++i) {
        float* row = S + static_cast<int64_t>(i) * D;
        const __m512 kb = _mm512_set1_ps(k[i] * beta), qi = _mm512_set1_ps(qs[i]);
        for (int b = 0; b < NV; ++b) {
            const __m512 s = _mm512_fmadd_ps(kb, delta[b], _mm512_maskz_loadu_ps(mask[b], row + 16 * b));
            _mm512_mask_storeu_ps(row + 16 * b, mask[b], s);
            out[b] = _mm512_fmadd_ps(qi, s, out[b]);
        }
    }
    for (int b = 0; b < NV; ++b) _mm512_mask_storeu_ps(o + 16 * b, mask[b], out[b]);
}

// Any D up to kKdaMaxHeadDim: the same arithmetic with u and the delta kept in memory.
void kda_step_wide(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                   float* o, int D) {
    alignas(64) float u[kKdaMaxHeadDim];
    const int nv = (D + 15) / 16;
    for (int b = 0; b < nv; ++b) _mm512_storeu_ps(u + 16 * b, _mm512_setzero_ps());
    for (int i = 0; i < D; ++i) {
        float* row = S + static_cast<int64_t>(i) * D;
        const __m512 a = _mm512_set1_ps(alpha[i]), ki = _mm512_set1_ps(k[i]);
        for (int b = 0; b < nv; ++b) {
            const __mmask16 m = tail_mask(std::min(16, D - 16 * b));
            const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + 16 * b), a);
            _mm512_mask_storeu_ps(row + 16 * b, m, s);
            _mm512_storeu_ps(u + 16 * b, _mm512_fmadd_ps(ki, s, _mm512_loadu_ps(u + 16 * b)));
        }
    }
    for (int b = 0; b < nv; ++b) {
        const __mmask16 m = tail_mask(std::min(16, D - 16 * b));
        _mm512_storeu_ps(u + 16 * b, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, v + 16 * b), _mm512_loadu_ps(u + 16 * b)));
        _mm512_mask_storeu_ps(o + 16 * b, m, _mm512_setzero_ps());
    }
    for (int i = 0; i < D; ++i) {
        float* row = S + static_cast<int64_t>(i) * D;
        const __m512 kb = _mm512_set1_ps(k[i] * beta), qi = _mm512_set1_ps(qs[i]);
        for (int b = 0; b < nv; ++b) {
            const __mmask16 m = tail_mask(std::min(16, D - 16 * b));
            const __m512 s = _mm512_fmadd_ps(kb, _mm512_loadu_ps(u + 16 * b), _mm512_maskz_loadu_ps(m, row + 16 * b));
            _mm512_mask_storeu_ps(row + 16 * b, m, s);
            _mm512_mask_storeu_ps(o + 16 * b, m, _mm512_fmadd_ps(qi, s, _mm512_maskz_loadu_ps(m, o + 16 * b)));
        }
    }
}

void kda_step_avx512(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                     float* o, int D) {
    K3_CHECK(D > 0 && D <= kKdaMaxHeadDim, "KDA head dimension %d outside 1..%d", D, kKdaMaxHeadDim);
    switch ((D + 15) / 16) {
        case 1: return kda_step_regs<1>(S, qs, k, v, alpha, beta, o, D);
        case 2: return kda_step_regs<2>(S, qs, k, v, alpha, beta, o, D);
        case 3: return kda_step_regs<3>(S, qs, k, v, alpha, beta, o, D);
        case 4: return kda_step_regs<4>(S, qs, k, v, alpha, beta, o, D);
        case 5: return kda_step_regs<5>(S, qs, k, v, alpha, beta, o, D);
        case 6: return kda_step_regs<6>(S, qs, k, v, alpha, beta, o, D);
        case 7: return kda_step_regs<7>(S, qs, k, v, alpha, beta, o, D);
        case 8: return kda_step_regs<8>(S, qs, k, v, alpha, beta, o, D);
        default: return kda_step_wide(S, qs, k, v, alpha, beta, o, D);
    }
}

// ---- attention over cached positions ----


// softmax_exp (kernel_sets.h) of 16 lanes, the same operations as the scalar definition.
inline __m512 softmax_exp16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kSoftmaxExpMin)), _mm512_set1_ps(kSoftmaxExpMax));
    const __m512 shift = _mm512_set1_ps(kRoundShift);
    const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)), shift), shift);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Hi), xc);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-kLn2Lo), r);
    __m512 p = _mm512_set1_ps(kExpPoly[7]);
    for (int k = 6; k >= 0; --k) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[k]));
    const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kSoftmaxExpMin), _CMP_LT_OQ), _mm512_setzero_ps());
    e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, _mm512_set1_ps(kSoftmaxExpMax), _CMP_GT_OQ),
                           _mm512_set1_ps(INFINITY));
    return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// fold_block_softmax (kernel_sets.h) 16 scores at a time: the max does not depend on the order,
// the exponentials are softmax_exp's bits, and one register is the sum's 16 lanes.
float fold_block_softmax16(float* scores, int64_t n, float scale, float* m, float* l) {
    __m512 v[kAttendBlock / 16];
    __m512 vmax = _mm512_set1_ps(*m);
    const int nb = int((n + 15) / 16);
    for (int b = 0; b < nb; ++b) {
        const __mmask16 mk = tail_mask(std::min<int64_t>(16, n - 16 * b));
        v[b] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, scores + 16 * b), _mm512_set1_ps(scale));
        vmax = _mm512_mask_max_ps(vmax, mk, vmax, v[b]);
    }
    const float max_score = _mm512_reduce_max_ps(vmax);
    const float c = softmax_exp(*m - max_score);
    const __m512 mv = _mm512_set1_ps(max_score);
    __m512 lanes = _mm512_setzero_ps();
    for (int b = 0; b < nb; ++b) {
        const __mmask16 mk = tail_mask(std::min<int64_t>(16, n - 16 * b));
        const __m512 e = softmax_exp16(_mm512_sub_ps(v[b], mv));
        _mm512_mask_storeu_ps(scores + 16 * b, mk, e);
        lanes = _mm512_mask_add_ps(lanes, mk, lanes, e);
    }
    *m = max_score;
    *l = *l * c + reduce_lanes(lanes);
    return c;
}

// The dots d0 .. d0 + 15 of a tile (flat index a * NK + b; past the last one, the last again) by
// the shared tree, indexed by constants so that the accumulators stay in registers. Always
// inlined: GCC otherwise merges the 8 x 3 and 4 x 4 copies (the same first 16 dots) and then
// reports the merged one's subscripts against the other's array.
template <int NQ, int NK, int D0, size_t... E>
__attribute__((always_inline)) inline __m512 reduce_tile_dots(const __m512 (&acc)[NQ][NK], std::index_sequence<E...>) {
    constexpr int kLast = NQ * NK - 1;
    const __m512 v[16] = {acc[std::min<int>(D0 + int(E), kLast) / NK][std::min<int>(D0 + int(E), kLast) % NK]...};
    return reduce_lanes_16(v);
}

template <int NQ, int NK, int D0>
__attribute__((always_inline)) inline void store_tile_dots(const __m512 (&acc)[NQ][NK], float* out, int64_t out_stride) {
    if constexpr (D0 < NQ * NK) {
        alignas(64) float sums[16];
        _mm512_store_ps(sums, reduce_tile_dots<NQ, NK, D0>(acc, std::make_index_sequence<16>{}));
        for (int e = 0; e < 16 && D0 + e < NQ * NK; ++e) out[(D0 + e) / NK * out_stride + (D0 + e) % NK] = sums[e];
        store_tile_dots<NQ, NK, D0 + 16>(acc, out, out_stride);
    }
}

// Scores of NQ queries against NK keys at once (each dot is one 16-lane register, the
// reference's lanes). The NK key chunks stay in registers while each query's chunk is loaded
// and feeds NK multiply-adds: 8 x 3 is 24 accumulators, 3 keys and a query of the 32 registers,
// 11 loads for 24 fmas, and a tile of 8 queries reads each key row once.
template <int NQ, int NK>
void dot_tile(const float* Q, int64_t q_stride, const float* K, int64_t key_stride, int64_t n, float* out,
              int64_t out_stride) {
    __m512 acc[NQ][NK];
    for (int a = 0; a < NQ; ++a)
        for (int b = 0; b < NK; ++b) acc[a][b] = _mm512_setzero_ps();
    const int64_t full = n & ~int64_t{15};
    for (int64_t i = 0; i < full; i += 16) {
        __m512 k[NK];
        for (int b = 0; b < NK; ++b) k[b] = _mm512_loadu_ps(K + b * key_stride + i);
        // The next tile's keys (the next NK rows of the block, or past it the next block's, which
        // mla.cpp keeps right after it): the rows come from L2 (or memory) in time for their tile.
        // (About 3-5% at 1k-32k keys. By address, since the rows past the block may not exist: a
        // prefetch never faults.)
        for (int b = 0; b < NK; ++b)
            _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(K + i) +
                                                       uintptr_t((b + NK) * key_stride) * sizeof(float)),
                         _MM_HINT_T0);
        for (int a = 0; a < NQ; ++a) {
            __m512 q = _mm512_loadu_ps(Q + a * q_stride + i);
            // In a register: left alone, GCC folds the load into each of the NK fmas, and the
            // tile then waits on loads (27 of them for 24 fmas) instead of on the fmas.
            __asm__("" : "+v"(q));
            for (int b = 0; b < NK; ++b) acc[a][b] = _mm512_fmadd_ps(q, k[b], acc[a][b]);
        }
    }
    if (full < n) {
        const __mmask16 m = tail_mask(n - full);
        __m512 k[NK];
        for (int b = 0; b < NK; ++b) k[b] = _mm512_maskz_loadu_ps(m, K + b * key_stride + full);
        // lanes past the tail keep their sums (mask3): adding 0 * 0 would turn -0.0 into +0.0
        for (int a = 0; a < NQ; ++a) {
            const __m512 q = _mm512_maskz_loadu_ps(m, Q + a * q_stride + full);
            for (int b = 0; b < NK; ++b) acc[a][b] = _mm512_mask3_fmadd_ps(q, k[b], acc[a][b], m);
        }
    }
    if constexpr (NQ * NK >= 16) {
        // 16 dots at a time by the shared tree; the last group repeats the last dot to fill it
        store_tile_dots<NQ, NK, 0>(acc, out, out_stride);
    } else {
        for (int a = 0; a < NQ; ++a)
            for (int b = 0; b < NK; ++b) out[a * out_stride + b] = reduce_lanes(acc[a][b]);
    }
}

// Scores of queries [i0, i0 + NQ) over the first n keys of the block (n is the largest of their
// n_valid; a query's scores past its own n_valid are computed and never read).
template <int NQ, int NK>
void score_queries(const float* Q, int64_t q_stride, const float* keys, int64_t key_stride, int64_t n, int dk,
                   float* scores) {
    int64_t s = 0;
    for (; s + NK <= n; s += NK)
        dot_tile<NQ, NK>(Q, q_stride, keys + s * key_stride, key_stride, dk, scores + s, kAttendBlock);
    for (; s < n; ++s) dot_tile<NQ, 1>(Q, q_stride, keys + s * key_stride, key_stride, dk, scores + s, kAttendBlock);
}

// Queries whose softmax factors are kept at once in attend_block: the values of that many
// queries are added 64 columns at a time, so each 64 x 64 slice of the block's values (16 KiB)
// is loaded from L2 once and then read from L1 by all of them.
constexpr int kMaxFoldedQueries = 16;
// Queries of a value tile: 4 x 4 registers of 16 columns, 16 independent fma chains (6 x 4 was
// no faster).
constexpr int kValueQueries = 4;

// out[j] = out[j] * c, then one fma chain over the block's positions of p_s * vals[s][j]
// (kernels.h); 16 columns per register, four registers at a time. Used for a block's last
// dv % 64 columns.
void add_values(const float* p, int64_t n, const float* vals, int64_t val_stride, int dv, float c, float* out) {
    const __m512 cv = _mm512_set1_ps(c);
    int j = 0;
    for (; j + 64 <= dv; j += 64) {
        __m512 a[4];
        for (int r = 0; r < 4; ++r) a[r] = _mm512_mul_ps(_mm512_loadu_ps(out + j + 16 * r), cv);
        for (int64_t s = 0; s < n; ++s) {
            const __m512 ps = _mm512_set1_ps(p[s]);
            const float* val = vals + s * val_stride + j;
            for (int r = 0; r < 4; ++r) a[r] = _mm512_fmadd_ps(ps, _mm512_loadu_ps(val + 16 * r), a[r]);
        }
        for (int r = 0; r < 4; ++r) _mm512_storeu_ps(out + j + 16 * r, a[r]);
    }
    for (; j < dv; j += 16) {
        const __mmask16 mk = tail_mask(std::min(16, dv - j));
        __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, out + j), cv);
        for (int64_t s = 0; s < n; ++s)
            a = _mm512_fmadd_ps(_mm512_set1_ps(p[s]), _mm512_maskz_loadu_ps(mk, vals + s * val_stride + j), a);
        _mm512_mask_storeu_ps(out + j, mk, a);
    }
}

// 64 columns of NQ queries' running values (query a: probabilities p + a * kAttendBlock, its
// n_valid[a] positions, factor c[a], values out + a * out_stride): out * c, then each element's
// fma chain in increasing position, as add_values. The queries share each load of a value row
// over the positions all of them see (NQ x 4 accumulators, independent chains for both FMA
// ports); a query that sees more positions then continues its own chains alone.
template <int NQ>
void value_tile(const float* p, const int32_t* n_valid, const float* c, const float* vals, int64_t val_stride,
                float* out, int64_t out_stride) {
    __m512 acc[NQ][4];
    int64_t n_all = n_valid[0];
    for (int a = 0; a < NQ; ++a) {
        const __m512 cv = _mm512_set1_ps(c[a]);
        for (int r = 0; r < 4; ++r) acc[a][r] = _mm512_mul_ps(_mm512_loadu_ps(out + a * out_stride + 16 * r), cv);
        n_all = std::min<int64_t>(n_all, n_valid[a]);
    }
    for (int64_t s = 0; s < n_all; ++s) {
        const float* val = vals + s * val_stride;
        __m512 v[4];
        for (int r = 0; r < 4; ++r) v[r] = _mm512_loadu_ps(val + 16 * r);
        for (int a = 0; a < NQ; ++a) {
            const __m512 ps = _mm512_set1_ps(p[a * kAttendBlock + s]);
            for (int r = 0; r < 4; ++r) acc[a][r] = _mm512_fmadd_ps(ps, v[r], acc[a][r]);
        }
    }
    for (int a = 0; a < NQ; ++a)
        for (int64_t s = n_all; s < n_valid[a]; ++s) {
            const __m512 ps = _mm512_set1_ps(p[a * kAttendBlock + s]);
            for (int r = 0; r < 4; ++r)
                acc[a][r] = _mm512_fmadd_ps(ps, _mm512_loadu_ps(vals + s * val_stride + 16 * r), acc[a][r]);
        }
    for (int a = 0; a < NQ; ++a)
        for (int r = 0; r < 4; ++r) _mm512_storeu_ps(out + a * out_stride + 16 * r, acc[a][r]);
}

// value_tile over n queries: NQ at a time, then the rest by a smaller tile.
template <int NQ>
void value_tiles(const float* p, const int32_t* n_valid, const float* c, const float* vals, int64_t val_stride,
                 float* out, int64_t out_stride, int n) {
    int a = 0;
    for (; a + NQ <= n; a += NQ)
        value_tile<NQ>(p + a * kAttendBlock, n_valid + a, c + a, vals, val_stride, out + a * out_stride, out_stride);
    if constexpr (NQ > 1)
        if (a < n)
            value_tiles<NQ - 1>(p + a * kAttendBlock, n_valid + a, c + a, vals, val_stride, out + a * out_stride,
                                out_stride, n - a);
}

// Every query's operations are the reference's (kernels.h); only the order in which the
// queries' independent work is done differs. Scores: 8 queries at a time against 3 keys, so a
// block's key rows come from L2 once per 8 queries. Values: 64 columns at a time for all the
// folded queries, 4 by 4, so each slice of value rows comes from L2 once per fold.
void attend_block_avx512(const float* Q, int64_t q_stride, int nq, const int32_t* n_valid, const float* keys,
                         int64_t key_stride, const float* vals, int64_t val_stride, int dk, int dv, float scale,
                         float* m, float* l, float* acc, int64_t acc_stride, float* scratch) {
    int i = 0;
    for (; i + 8 <= nq; i += 8)
        score_queries<8, 3>(Q + i * q_stride, q_stride, keys, key_stride, *std::max_element(n_valid + i, n_valid + i + 8),
                            dk, scratch + int64_t(i) * kAttendBlock);
    for (; i + 4 <= nq; i += 4)
        score_queries<4, 4>(Q + i * q_stride, q_stride, keys, key_stride, *std::max_element(n_valid + i, n_valid + i + 4),
                            dk, scratch + int64_t(i) * kAttendBlock);
    for (; i < nq; ++i)
        score_queries<1, 4>(Q + i * q_stride, q_stride, keys, key_stride, n_valid[i], dk,
                            scratch + int64_t(i) * kAttendBlock);
    float c[kMaxFoldedQueries];
    for (int i0 = 0; i0 < nq; i0 += kMaxFoldedQueries) {
        const int ni = std::min(kMaxFoldedQueries, nq - i0);
        for (i = i0; i < i0 + ni; ++i)
            c[i - i0] = fold_block_softmax16(scratch + int64_t(i) * kAttendBlock, n_valid[i], scale, &m[i], &l[i]);
        const float* p = scratch + int64_t(i0) * kAttendBlock;
        const int32_t* nv = n_valid + i0;
        float* out = acc + i0 * acc_stride;
        int j = 0;
        for (; j + 64 <= dv; j += 64)
            value_tiles<kValueQueries>(p, nv, c, vals + j, val_stride, out + j, acc_stride, ni);
        if (j < dv)
            for (int a = 0; a < ni; ++a)
                add_values(p + a * kAttendBlock, nv[a], vals + j, val_stride, dv - j, c[a], out + a * acc_stride + j);
    }
}
}  // namespace

const Kernels& avx512_table() {
    static const Kernels table = {
        .name = "avx512",
        .matvec_bf16 = tiles::matvec_bf16<Avx512Tiles>,
        .matmul_bf16 = tiles::matmul_bf16<Avx512Tiles>,
        .matvec_mxfp4 = tiles::matvec_mxfp4<Avx512Tiles>,
        .matmul_mxfp4 = tiles::matmul_mxfp4<Avx512Tiles>,
        .dot_f32 = dot_f32_avx512,
        .kda_step = kda_step_avx512,
        .attend_block = attend_block_avx512,
        .situ_glu = situ_glu_avx512,
        .matvec_transposed_bf16 = lanes::matvec_transposed_bf16<Avx512Ops>,
        .trunk_words = trunk_words_x86,
    };
    return table;
}

}  // namespace k3
