// The only kernel header model code includes. A Kernels table of function pointers is filled
// once at start-up by select_kernels() (the best row of kernel_sets() this build and CPU run:
// scalar reference, AVX2+FMA or AVX-512 on x86-64, NEON on aarch64); model code calls
// k.matvec_bf16(...) and never an intrinsic.
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
//    set reproduces it, so every set of kernel_sets() gives bit-identical results.
//  - Kernels are thread-safe. matmul_mxfp4/matvec_mxfp4 keep a per-thread activation buffer
//    (cols x up to 64 tokens floats) that grows on first use and is then reused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace k3 {

struct Kernels {
    const char* name;  // its row's name in kernel_sets()

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

    // One KDA delta-rule step for one head and one token (docs/model.md "Kimi Delta Attention",
    // steps 1-4). S [D][D] (row i = key channel), updated in place: S[i][:] *= alpha[i]; u = k^T S;
    // S += k (beta (v - u))^T; o = qs^T S, with qs = q already scaled by 1/sqrt(D) by the caller.
    // D <= kKdaMaxHeadDim (the kernels keep u on the stack).
    void (*kda_step)(float* S, const float* qs, const float* k, const float* v, const float* alpha, float beta,
                     float* o, int D);

    // Blocked attention (docs/architecture.md, "Blocked attention"): the keys are cut into
    // blocks of kAttendBlock positions at fixed absolute boundaries (0, 64, 128, ...) and every
    // query folds them in block order into an online-softmax state, so a query's bits depend
    // only on its own keys, never on which queries share its tile. attend_block folds one block
    // into nq queries' states: query i (Q + i*q_stride) sees the block's first n_valid[i] keys
    // (1 <= n_valid[i] <= kAttendBlock). Its state is m[i] (running max of scaled scores, start
    // -inf), l[i] (running sum of exponentials, start 0) and acc + i*acc_stride (dv running
    // weighted values, start 0). Per query: score_s = dot(q, keys + s*key_stride, dk) * scale
    // (16-lane dots); fold_block_softmax (kernel_sets.h) gives c and p_s; then
    // acc[j] = acc[j] * c followed by one fma chain over the block's keys of p_s * vals[s][j].
    // attend_head (below) divides acc by l at the end. scratch holds nq * kAttendBlock floats.
    void (*attend_block)(const float* Q, int64_t q_stride, int nq, const int32_t* n_valid, const float* keys,
                         int64_t key_stride, const float* vals, int64_t val_stride, int dk, int dv, float scale,
                         float* m, float* l, float* acc, int64_t acc_stride, float* scratch);

    // SiTU-GLU in place (docs/model.md "Numerics"): g[i] = (b1 tanh(g[i]/b1)) sigmoid(g[i]) *
    // (b2 tanh(u[i]/b2)) for i < n, with tanh and exp by the polynomials of situ_lanes.h (within
    // a few ulp of the exact function; tests/kernels/test_situ_glu.cpp measures it), the same
    // bits in every set and whatever the split of the elements.
    void (*situ_glu)(float* g, const float* u, int64_t n, float b1, float b2);

    // y[j] = sum over d of x[d] * W[d][j] for j < cols: W bf16 [rows][cols], x [rows], y [cols].
    // Per output, from +0, each term's product rounded and then added (not fused), in increasing
    // d: MLA's query absorption, W_k^T q_nope (model/mla.cpp).
    void (*matvec_transposed_bf16)(const uint16_t* W, const float* x, float* y, int64_t rows, int64_t cols);

    // The trunk codec's bulk decode (store/trunk_codec.h): from word `begin` (a multiple of 32),
    // groups of 32 words whose codes are all below 15 (no escape): dst[2i] = low[i] and
    // dst[2i + 1] = table[code i], code i being the low nibble of nibbles[i / 2] for even i and
    // the high nibble for odd i. Stops at the first group that holds an escape or has fewer than
    // 32 words left and returns its first word; the codec decodes the rest word by word.
    size_t (*trunk_words)(const uint8_t* table, const uint8_t* nibbles, const uint8_t* low, size_t begin,
                          size_t words, uint8_t* dst);
};

// Keys per attention block: 64 rows of K3's 576-float MLA latent are 147 KiB, which stay in
// L2 while a tile of queries is scored against them.
inline constexpr int kAttendBlock = 64;

// Attention of one query over n_pos cached positions (causality is the caller's n_pos): the
// blocks of attend_block in order, then out[j] = acc[j] / l. The exact bits any tiling of
// attend_block gives for this query. scratch holds kAttendBlock floats.
void attend_head(const Kernels& k, const float* q, const float* keys, int64_t key_stride, const float* vals,
                 int64_t val_stride, int64_t n_pos, int dk, int dv, float scale, float* out, float* scratch);

// Largest KDA head dimension kda_step accepts (K3 uses 128).
inline constexpr int kKdaMaxHeadDim = 512;

// One row per kernel set, in order of preference (the last row this build and CPU run is the
// best): its name (the --kernels / K3_KERNELS value, the tests' and benchmarks' label), what the
// CPU must have, and the set's table when this build has the set and this CPU runs it. A new ISA
// is one row here (kernel_table.cpp) plus its kernel files and their flags (engine/CMakeLists.txt).
struct KernelSet {
    const char* name;
    const char* needs;                // for messages: "AVX2, FMA and F16C"
    const Kernels* (*usable)();       // nullptr when this build or this CPU lacks the set
};
std::span<const KernelSet> kernel_sets();

// The row of that name, or nullptr for a name no row has.
const KernelSet* find_kernel_set(std::string_view name);

// The scalar reference set: the definition of every kernel, and the portable fallback (the
// first row, always usable).
const Kernels& scalar_kernels();

// The best set this CPU and build support, chosen once. A named set (--kernels, K3_KERNELS) is
// honoured or refused by Engine::load, the one place that reads either.
const Kernels& select_kernels();

// ---- MXFP4 format (docs/model.md "MXFP4") ----
// E2M1 code -> value; bit 3 is the sign.
inline constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
// E8M0 scale byte -> 2^(s-127); 255 (NaN) decodes to 0 (docs/model.md "Numerics").
float e8m0_to_float(uint8_t s);

// bf16 <-> fp32 (exact widening; round-to-nearest-even narrowing for writers and tests).
inline float bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v{static_cast<uint32_t>(h) << 16};
    return v.f;
}
uint16_t f32_to_bf16(float f);

}  // namespace k3
