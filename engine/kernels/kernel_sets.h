// Private to engine/kernels: how the kernel-set table (kernel_table.cpp) reaches the ISA
// tables, and the small format helpers the ISA files share. Model code includes kernels.h only.
//
// The reduction order is part of every kernel's definition (ref.cpp spells it out), and every
// ISA set reproduces it exactly, so all kernel sets give bit-identical results:
//  - a dot product of length n (bf16 row, dot_f32, attention score) keeps 16 fp32 lanes;
//    element i goes to lane i % 16 with a fused multiply-add, in increasing i; the lanes are
//    then summed by a halving tree: lane[k] += lane[k+8], then [k] += [k+4], [k] += [k+2],
//    [0] += [1]. That is the natural reduction of one 512-bit, two 256-bit or four 128-bit registers.
//  - an MXFP4 row keeps the same 16 lanes, but by packed byte: byte j of the row (elements
//    2j and 2j+1) goes to lane j % 16, low nibble first, then the same tree.
//  - sums over positions or key channels (attention values, KDA reads) are one fused
//    multiply-add chain per output element, in increasing position / channel.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "kernels/kernels.h"

namespace k3 {

inline constexpr int kReduceLanes = 16;

// E8M0 scale byte -> the bits of the fp32 multiplier 2^(s-127) (s = 255 -> 0.0f). s = 0 is the
// subnormal 2^-127, whose mantissa is 1 << 22. Same value as e8m0_to_float, usable in SIMD code.
constexpr uint32_t e8m0_bits(uint8_t s) {
    if (s == 255) return 0u;
    if (s == 0) return 1u << 22;
    return static_cast<uint32_t>(s) << 23;
}

// exp for the online softmax, defined by its operations so that every set (scalar or 16 lanes
// at once) gives the same bits, at the speed of a few fused multiply-adds instead of libm's
// call: n = round(x / ln 2) (by the 1.5 * 2^23 shift: x * log2e + shift - shift), r = x - n ln 2
// as fma(n, -ln2_hi, x) then fma(n, -ln2_lo, r), p = the degree-7 Taylor polynomial of e^r by
// Horner (fma, coefficients 1/k! in fp32), result p * 2^n (the exponent bits n + 127). Within
// 2 ulp of e^x on [kSoftmaxExpMin, kSoftmaxExpMax]; 0 below it (also for -inf), +inf above,
// NaN stays NaN. The fold only asks for x <= 0.
float softmax_exp(float x);
inline constexpr float kSoftmaxExpMin = -87.3365f;  // about ln 2^-126: 2^n stays a normal number
inline constexpr float kSoftmaxExpMax = 88.0f;
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23
inline constexpr float kLn2Hi = 0.693145751953125f;  // ln 2 in 16 significant bits, so n * kLn2Hi is exact
inline constexpr float kLn2Lo = 1.428606765330187e-06f;
inline constexpr float kExpPoly[8] = {1.0f,        1.0f,         0.5f,          1.0f / 6,
                                      1.0f / 24,   1.0f / 120,   1.0f / 720,    1.0f / 5040};

// One block of an online softmax (kernels.h, attend_block): scores[s] *= scale; the new max
// m' = max(*m, the scores); c = softmax_exp(*m - m'); scores[s] = softmax_exp(scores[s] - m');
// z = their sum over the 16 lanes of a dot (kernel_sets.h above: score s to lane s % 16 in
// increasing s, lanes start at +0, then the halving tree); *l = *l * c + z; *m = m'. Returns c,
// the factor the running values take. The scalar definition (format.cpp), which the AVX-512
// set computes 16 scores at a time with the same operations.
float fold_block_softmax(float* scores, int64_t n, float scale, float* m, float* l);

// Column j of one KDA step (kda_step in kernels.h), alone, with the operations of the reference:
// decay, u = k^T S as one fma chain in increasing i, the delta write, o[j] from the updated S.
// The SIMD sets use it for the D % width columns left after their vector tiles; compiled
// without ISA flags (format.cpp), so it is the same code, and so the same bits, everywhere.
void kda_step_column(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                     float* o, int D, int j);

// e8m0_to_float for every scale byte, as a table the SIMD files index per group.
inline constexpr std::array<float, 256> kE8M0 = [] {
    std::array<float, 256> t{};
    for (int s = 0; s < 256; ++s) t[s] = std::bit_cast<float>(e8m0_bits(static_cast<uint8_t>(s)));
    return t;
}();

// E2M1 value x scale for every (scale byte, code): one 64-byte row of 16 floats per scale, so a
// SIMD file can use a group's row directly as its decode table (one permute per 16 weights,
// no multiply). 16 KiB, built once (format.cpp); a checkpoint's groups use a few dozen distinct
// scales. Codes of magnitude >= 2 at scale 254 are +-inf, as in the reference.
struct alignas(64) ScaledE2M1Row {
    float v[16];
};
const ScaledE2M1Row* scaled_e2m1_table();  // [256]

// For 8-entry permutes (AVX2): the bits of the scaled magnitude of codes 0..7, XORed with
// (code << 28). A nibble c placed in bits 28..31 of a word, XORed onto entry c & 7, cancels
// those bits again and leaves exactly bit 31 = c's sign: the decoded weight in two operations.
struct alignas(32) MagnitudeXorCodeRow {
    uint32_t bits[8];
};
const MagnitudeXorCodeRow* magnitude_xor_code_table();  // [256]

// This core's L2 in bytes (sysconf, read once), or 256 KiB where the system does not say.
int64_t l2_cache_bytes();

// Tokens per pass of a matmul: the activations of one pass (tokens x cols fp32) should stay
// in L2 while every weight row streams past them once, so the weights come from DRAM once per
// pass. Three quarters of the L2 (the rest holds the weight rows of a tile and the outputs):
// on a 1 MiB L2 a 7168-wide matrix takes 24 tokens a pass, where a fixed 256 KiB gave 8 and
// left the matmul waiting on DRAM (docs/performance.md, "Prefill matmuls against the FMA
// peak"). A multiple of 12, so that 4- and 6-token tiles both divide it; 4 to 64 tokens.
// Each (row, token) keeps its own accumulator, so the pass never changes a result's bits.
inline int64_t matmul_token_tile(int64_t cols) {
    static const int64_t budget_bytes = std::max<int64_t>(256 * 1024, l2_cache_bytes() * 3 / 4);
    const int64_t tokens = budget_bytes / (cols * 4);
    if (tokens >= 64) return 64;
    if (tokens >= 12) return tokens / 12 * 12;
    return std::max<int64_t>(4, tokens & ~int64_t{3});
}

// Each ISA's table and SiTU-GLU, defined only in builds that compile the ISA's files (K3_HAVE_AVX2,
// K3_HAVE_AVX512, K3_HAVE_NEON; engine/CMakeLists.txt). kernel_table.cpp reaches a table only
// after its row's CPU probe.
const Kernels& avx2_table();    // avx2.cpp: AVX2, FMA and F16C
const Kernels& avx512_table();  // avx512.cpp: AVX-512 F/BW/VL/DQ
const Kernels& neon_table();    // neon.cpp: aarch64
void situ_glu_avx2(float* g, const float* u, int64_t n, float b1, float b2);    // avx2_situ.cpp
void situ_glu_avx512(float* g, const float* u, int64_t n, float b1, float b2);  // avx512_situ.cpp
void situ_glu_neon(float* g, const float* u, int64_t n, float b1, float b2);    // neon_situ.cpp

}  // namespace k3
