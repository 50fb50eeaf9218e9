// The only kernel header model code includes. A Kernels table of function pointers is filled
// once at start-up by select_kernels() (scalar reference, AVX2+FMA or AVX-512 by CPU detection
// on x86-64, NEON on aarch64); model code calls k.matvec_bf16(...) and never an intrinsic.
//
// Contracts every implementation keeps (tests/kernels checks them against ref.cpp):
//  - Kernels are single-threaded over the rows they are given; callers split rows between
//    threads. Each output element's reduction order depends only on the inputs' shape, never
//    on how rows were split, so results are bit-identical across thread counts.
//  - matmul_*(W, X, Y, rows, cols, T) gives, for every token t, exactly the bits of
//    matvec_*(W, X + t*cols, Y + t*rows, rows, cols): prefill and one-token decode agree.
//  - Activations are fp32; bf16 weights are widened exactly (<<16); MXFP4 weights are decoded
//    straight from the packed nibbles (E2M1 value x 2^(scale-127), scale 255 decodes to 0),
//    which is exact in fp32. No kernel dequantises a whole matrix into memory.
//  - The reduction order is part of each kernel's definition (kernel_sets.h, ref.cpp) and every
//    set reproduces it, so scalar, avx2, avx512 and neon give bit-identical results.
//  - Kernels are thread-safe. matmul_mxfp4/matvec_mxfp4 keep a per-thread activation buffer
//    (cols x up to 64 tokens floats) that grows on first use and is then reused.
#pragma once
#include <cstdint>

namespace k3 {

struct Kernels {
    const char* name;  // "scalar", "avx2", "avx512", "neon"

    // y[r] = sum_i W[r][i] * x[i]; W bf16 [rows][cols] row-major.
    void (*matvec_bf16)(const uint16_t* W, const float* x, float* y, int64_t rows, int64_t cols);
    // Y[t][r] = sum_i W[r][i] * X[t][i] for t < T; X [T][cols], Y [T][rows]. Reads W once per
    // block of tokens (that is the point of it).
    void (*matmul_bf16)(const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols, int64_t T);

    // MXFP4: packed [rows][cols/2] (low nibble = even element), scales [rows][cols/32] (E8M0).
    void (*matvec_mxfp4)(const uint8_t* packed, const uint8_t* scales, const float* x, float* y, int64_t rows,
                         int64_t cols);
    void (*matmul_mxfp4)(const uint8_t* packed, const uint8_t* scales, const float* X, float* Y, int64_t rows,
                         int64_t cols, int64_t T);

    // sum_i a[i] * b[i] (fp32 inputs), fixed reduction order for a given n.
    float (*dot_f32)(const float* a, const float* b, int64_t n);

    // One KDA delta-rule step for one head and one token (spec 2.5 step 6). S [D][D] (row i =
    // key channel), updated in place: S[i][:] *= alpha[i]; u = k^T S; S += k (beta (v - u))^T;
    // o = qs^T S, with qs = q already scaled by 1/sqrt(D) by the caller.
    // D <= kKdaMaxHeadDim (the kernels keep u on the stack).
    void (*kda_step)(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                     float* o, int D);

    // Attention of one head over n_pos cached positions (causality is the caller's n_pos):
    // score_s = dot(q, keys + s*key_stride, dk) * scale; p = softmax(score);
    // out[j] = sum_s p_s * vals[s*val_stride + j], j < dv. scratch holds n_pos floats.
    void (*attend_head)(const float* q, const float* keys, int64_t key_stride, const float* vals,
                        int64_t val_stride, int64_t n_pos, int dk, int dv, float scale, float* out, float* scratch);
};

// Largest KDA head dimension kda_step accepts (K3 uses 128).
inline constexpr int kKdaMaxHeadDim = 512;

// The scalar reference set: the definition of every kernel, and the portable fallback.
const Kernels& scalar_kernels();
// ISA sets, or nullptr when this build or this CPU lacks the ISA.
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();
const Kernels* neon_kernels();  // every aarch64 build; nullptr elsewhere

// The best set this CPU and build support, chosen once. A named set (--kernels, K3_KERNELS) is
// honoured or refused by Engine::load, the one place that reads either.
const Kernels& select_kernels();

// ---- MXFP4 format (spec 3.3) ----
// E2M1 code -> value; bit 3 is the sign.
inline constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
// E8M0 scale byte -> 2^(s-127); 255 (NaN) decodes to 0 (spec, decisions 1).
float e8m0_to_float(uint8_t s);

// bf16 <-> fp32 (exact widening; round-to-nearest-even narrowing for writers and tests).
inline float bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v{static_cast<uint32_t>(h) << 16};
    return v.f;
}
uint16_t f32_to_bf16(float f);

}  // namespace k3
