// vision_attention (vision_attention.h).
#include "vision/vision_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace k3 {

namespace {

// Queries per work item (the MLA's tile bound): a tile shares each key block while it is in
// cache, and a 2-thread machine still gets many items per head.
constexpr int64_t kQueryTile = 16;

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
    // Tiles of kQueryTile consecutive queries of one head fold each 64-key block while it is in
    // cache (kernels.h, attend_block); every query sees all L keys (bidirectional), in the same
    // block order in any tile, so the bits do not depend on the tiling or the thread count.
    const int64_t tiles = (L + kQueryTile - 1) / kQueryTile;
    const float scale = 1.0f / std::sqrt(float(dh));
    cp.parallel_for(int64_t(heads) * tiles, [&](int64_t item, int) {
        const int h = int(item / tiles);
        const int64_t t0 = (item % tiles) * kQueryTile;
        const int nq = int(std::min(L - t0, kQueryTile));
        const float* K = &keys[size_t(h) * L * dh];
        const float* V = &vals[size_t(h) * L * dh];
        int32_t n_valid[kQueryTile];
        float m_run[kQueryTile], l_run[kQueryTile], scores[kQueryTile * kAttendBlock];
        for (int i = 0; i < nq; ++i) {
            m_run[i] = -INFINITY;
            l_run[i] = 0.0f;
        }
        float* acc = out + t0 * A + h * dh;
        for (int i = 0; i < nq; ++i) std::fill_n(acc + i * A, dh, 0.0f);
        for (int64_t b0 = 0; b0 < L; b0 += kAttendBlock) {
            const int32_t n = int32_t(std::min<int64_t>(kAttendBlock, L - b0));
            std::fill_n(n_valid, nq, n);
            cp.k.attend_block(qkv + t0 * row + h * dh, row, nq, n_valid, K + b0 * dh, dh, V + b0 * dh, dh, dh, dh,
                              scale, m_run, l_run, acc, A, scores);
        }
        for (int i = 0; i < nq; ++i)
            for (int j = 0; j < dh; ++j) acc[i * A + j] = acc[i * A + j] / l_run[i];
    });
}

}  // namespace k3
