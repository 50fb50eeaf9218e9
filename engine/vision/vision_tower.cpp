// encode_image_rows (vision_tower.h): patch embedding + position table, the pre-norm blocks,
// the final norm, then the merge and the projector. Memory for an image of L patches is about
// L x (4D + 6A) floats (x, h, delta, the table; qkv, keys and values, attention out): 0.57 GB
// at 1920x1080 with K3's shapes.
#include "vision/vision_tower.h"

#include <algorithm>
#include <cmath>

#include "k3/error.h"
#include "model/norms.h"
#include "vision/vision_attention.h"
#include "vision/vision_position.h"
#include "vision/vision_projector.h"

namespace k3 {

namespace {

// PyTorch's tanh-approximated GELU ("gelu_pytorch_tanh", docs/model.md "The tower"), in its float32 form.
inline float gelu_tanh(float u) {
    constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
    constexpr float kKappa = 0.044715f;
    return 0.5f * u * (1.0f + std::tanh(kBeta * (u + kKappa * u * u * u)));
}

void norm_rows(const Compute& cp, const float* x, const float* gain, float* y, int64_t L, int64_t D, float eps) {
    cp.parallel_for(L, [&](int64_t t, int) { rmsnorm(x + t * D, gain, y + t * D, D, eps); });
}

void add_into(const Compute& cp, float* x, const float* d, int64_t n) {
    parallel_elementwise(cp, n, [&](int64_t i) { x[i] += d[i]; });
}

}  // namespace

void vision_matmul(const Compute& cp, const uint16_t* W, const float* X, float* Y, int64_t rows, int64_t cols,
                   int64_t T, int64_t max_tokens) {
    const int64_t chunk = std::max<int64_t>(1, max_tokens);
    for (int64_t t0 = 0; t0 < T; t0 += chunk)
        cp.matmul_bf16(W, X + t0 * cols, Y + t0 * rows, rows, cols, std::min(chunk, T - t0));
}

std::vector<float> encode_image_rows(const VisionWeights& w, const Compute& cp, int64_t max_tokens,
                                     const ImageGeometry& g, std::span<const float> patches, const VisionSettings& s,
                                     VisionTrace* trace) {
    const VisionConfig& c = w.cfg;
    const int64_t L = g.patches(), D = c.hidden, A = c.qkv_hidden, F = c.intermediate;
    const int64_t patch_len = 3 * int64_t(c.patch_size) * c.patch_size;
    if (int64_t(patches.size()) != L * patch_len || g.grid_h % 2 || g.grid_w % 2 || g.grid_h > 512 || g.grid_w > 512)
        throw Error(ErrorKind::Usage, "image patches do not match the grid " + std::to_string(g.grid_h) + "x" +
                                          std::to_string(g.grid_w) + " of " + std::to_string(c.patch_size) + "-px patches");

    // 5.1-5.2: x = conv(patches) + the position table resized to the grid.
    std::vector<float> x(size_t(L * D));
    vision_matmul(cp, bf16(w.patch_embed), patches.data(), x.data(), D, patch_len, L, max_tokens);
    const std::vector<float> pos =
        interpolate_position_table(w.pos_table, c.pos_emb_height, c.pos_emb_width, D, g.grid_h, g.grid_w);
    add_into(cp, x.data(), pos.data(), L * D);
    if (trace) trace->embedded = x;

    const RopeTable rope = rope_table_2d(g.grid_h, g.grid_w, c.head_dim());
    std::vector<float> h(size_t(L * D)), qkv(size_t(L * 3 * A)), att(size_t(L * A)), delta(size_t(L * D));
    const int64_t mlp_chunk = std::max<int64_t>(1, max_tokens);
    std::vector<float> up(size_t(std::min(L, mlp_chunk) * F));
    for (const VisionBlockWeights& b : w.blocks) {
        // 5.4: x += attn(norm0(x)) wo^T ; x += gelu_tanh(norm1(x) fc0^T) fc1^T
        norm_rows(cp, x.data(), b.norm0.data(), h.data(), L, D, s.norm_eps);
        vision_matmul(cp, bf16(b.wqkv), h.data(), qkv.data(), 3 * A, D, L, max_tokens);
        vision_attention(cp, qkv.data(), L, c.heads, c.head_dim(), rope, att.data());
        vision_matmul(cp, bf16(b.wo), att.data(), delta.data(), D, A, L, max_tokens);
        add_into(cp, x.data(), delta.data(), L * D);
        norm_rows(cp, x.data(), b.norm1.data(), h.data(), L, D, s.norm_eps);
        for (int64_t t0 = 0; t0 < L; t0 += mlp_chunk) {
            const int64_t T = std::min(mlp_chunk, L - t0);
            cp.matmul_bf16(bf16(b.fc0), h.data() + t0 * D, up.data(), F, D, T);
            parallel_elementwise(cp, T * F, [&](int64_t i) { up[size_t(i)] = gelu_tanh(up[size_t(i)]); });
            cp.matmul_bf16(bf16(b.fc1), up.data(), delta.data() + t0 * D, D, F, T);
        }
        add_into(cp, x.data(), delta.data(), L * D);
    }
    // 5.5 final norm, 6 merge, 7 projector.
    norm_rows(cp, x.data(), w.final_norm.data(), x.data(), L, D, s.norm_eps);
    if (trace) trace->tower_out = x;
    std::vector<float> merged = merge_2x2(x, g.grid_h, g.grid_w, D);
    if (trace) trace->merged = merged;
    return project_rows(w, cp, merged, g.rows(), max_tokens);
}

}  // namespace k3
