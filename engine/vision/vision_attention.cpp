// vision_attention (vision_attention.h).
#include "vision/vision_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace k3 {

namespace {

// Queries per work item: enough that a block reuses the head's keys from cache, few enough that
// a 2-thread machine still gets many items per head.
constexpr int64_t kQueryBlock = 32;

// (v[2k], v[2k+1]) as a complex number times (cos + i sin), for the dh/2 pairs of one head.
void rotate(float* v, const float* c, const float* s, int pairs) {
    for (int k = 0; k < pairs; ++k) {
        const float a = v[2 * k], b = v[2 * k + 1];
        v[2 * k] = a * c[k] - b * s[k];
        v[2 * k + 1] = a * s[k] + b * c[k];
    }
}

}  // namespace

void vision_attention(const Compute& cp, float* qkv, int64_t L, int heads, int dh, const RopeTable& rope, float* out) {
    const int64_t A = int64_t(heads) * dh, row = 3 * A;
    const int pairs = dh / 2;
    // RoPE on every head of q and k (the same rotations for all heads and blocks).
    cp.parallel_for(L, [&](int64_t t, int) {
        const float* c = &rope.cos[size_t(t) * pairs];
        const float* s = &rope.sin[size_t(t) * pairs];
        for (int h = 0; h < heads; ++h) {
            rotate(qkv + t * row + h * dh, c, s, pairs);
            rotate(qkv + t * row + A + h * dh, c, s, pairs);
        }
    });
    // Keys and values head-major: [heads][L][dh] each.
    std::vector<float> keys(size_t(heads) * size_t(L) * dh), vals(keys.size());
    cp.parallel_for(L, [&](int64_t t, int) {
        for (int h = 0; h < heads; ++h)
            for (int j = 0; j < dh; ++j) {
                keys[(size_t(h) * L + t) * dh + j] = qkv[t * row + A + h * dh + j];
                vals[(size_t(h) * L + t) * dh + j] = qkv[t * row + 2 * A + h * dh + j];
            }
    });
    const int64_t blocks = (L + kQueryBlock - 1) / kQueryBlock;
    std::vector<std::vector<float>> scratch(size_t(cp.nth), std::vector<float>(size_t(L)));
    const float scale = 1.0f / std::sqrt(float(dh));
    cp.parallel_for(int64_t(heads) * blocks, [&](int64_t item, int thread) {
        const int h = int(item / blocks);
        const int64_t t0 = (item % blocks) * kQueryBlock, t1 = std::min(L, t0 + kQueryBlock);
        const float* K = &keys[size_t(h) * L * dh];
        const float* V = &vals[size_t(h) * L * dh];
        for (int64_t t = t0; t < t1; ++t)
            cp.k.attend_head(qkv + t * row + h * dh, K, dh, V, dh, L, dh, dh, scale, out + t * A + h * dh,
                             scratch[size_t(thread)].data());
    });
}

}  // namespace k3
