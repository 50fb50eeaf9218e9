// Block attention residuals (docs/model.md "Layer stack"): each sub-layer's input is a softmax mix
// of the block snapshots and the running residual. Scores use the RMS-normalised sources, the mix
// uses the raw ones. One token at a time, single-threaded per token, so the bits never depend on
// threads.
#include <cmath>

#include "model/blocks.h"
#include "model/norms.h"

namespace k3 {

void attn_res_mix(const float* const* src, int n, const float* fold, float eps, int64_t E, float* out) {
    constexpr int kMaxSources = 256;
    float score[kMaxSources];  // n <= blocks + 1, far below this for any real depth
    // score_s = fold . (v_s / rms(v_s))
    for (int s = 0; s < n; ++s) {
        const float inv = rms_inv(src[s], E, eps);
        double acc = 0;
        for (int64_t i = 0; i < E; ++i) acc += double(src[s][i] * inv) * double(fold[i]);
        score[s] = float(acc);
    }
    // p = softmax(score)
    float mx = score[0];
    for (int s = 1; s < n; ++s) mx = score[s] > mx ? score[s] : mx;
    double z = 0;
    for (int s = 0; s < n; ++s) {
        score[s] = std::exp(score[s] - mx);
        z += score[s];
    }
    // out = sum_s p_s v_s, in source order
    for (int64_t i = 0; i < E; ++i) out[i] = 0.0f;
    for (int s = 0; s < n; ++s) {
        const float p = float(score[s] / z);
        for (int64_t i = 0; i < E; ++i) out[i] += p * src[s][i];
    }
}

}  // namespace k3
