// merge_2x2 and project_rows (vision_projector.h).
#include "vision/vision_projector.h"

#include <cmath>
#include <cstring>

#include "model/norms.h"
#include "vision/vision_tower.h"

namespace k3 {

std::vector<float> merge_2x2(const std::vector<float>& y, int gh, int gw, int64_t D) {
    const int mh = gh / 2, mw = gw / 2;
    std::vector<float> u(size_t(mh) * mw * 4 * size_t(D));
    for (int R = 0; R < mh; ++R)
        for (int C = 0; C < mw; ++C)
            for (int k = 0; k < 4; ++k) {
                const int64_t src = int64_t(2 * R + k / 2) * gw + (2 * C + k % 2);
                std::memcpy(&u[((size_t(R) * mw + C) * 4 + k) * D], &y[size_t(src) * D], sizeof(float) * size_t(D));
            }
    return u;
}

std::vector<float> project_rows(const VisionWeights& w, const Compute& cp, const std::vector<float>& merged, int64_t N,
                                int64_t max_tokens) {
    const int64_t M = w.cfg.merged_width(), H = w.cfg.text_hidden;
    std::vector<float> mid(size_t(N) * M), z(size_t(N) * H);
    vision_matmul(cp, bf16(w.proj0), merged.data(), mid.data(), M, M, N, max_tokens);
    // nn.GELU() without arguments: the exact, erf form (docs/model.md "Merge and projector"), not
    // the tower's tanh form.
    parallel_elementwise(cp, int64_t(mid.size()), [&](int64_t i) {
        const float s = mid[size_t(i)];
        mid[size_t(i)] = 0.5f * s * (1.0f + std::erf(s * float(M_SQRT1_2)));
    });
    vision_matmul(cp, bf16(w.proj2), mid.data(), z.data(), H, M, N, max_tokens);
    cp.parallel_for(N, [&](int64_t r, int) {
        float* row = &z[size_t(r) * H];
        rmsnorm(row, w.post_norm.data(), row, H, w.cfg.projector_eps);
    });
    return z;
}

}  // namespace k3
