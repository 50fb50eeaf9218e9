// The per-vector math of the forward pass that is not a weight product: RMSNorm, the KDA L2 norm
// and sigmoid (docs/model.md "Numerics"; SiTU-GLU is a kernel, kernels.h). Sums of squares
// accumulate in double in index order, so a norm's result does not depend on anything but its input.
#pragma once
#include <cmath>
#include <cstdint>

namespace k3 {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// 1 / sqrt(mean(x^2) + eps).
inline float rms_inv(const float* x, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
    return float(1.0 / std::sqrt(ss / double(n) + double(eps)));
}

// y = (x * inv) * w, inv = 1/sqrt(mean(x^2) + eps); y may alias x.
inline void rmsnorm(const float* x, const float* w, float* y, int64_t n, float eps) {
    const float inv = rms_inv(x, n, eps);
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * inv) * w[i];
}

// x *= 1/sqrt(sum(x^2) + eps): the KDA q/k L2 norm, eps inside the square root (decisions 1).
inline void l2norm(float* x, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
    const float inv = float(1.0 / std::sqrt(ss + double(eps)));
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace k3
