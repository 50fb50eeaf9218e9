// Position table interpolation and the 2-D RoPE table (vision_position.h).
#include "vision/vision_position.h"

#include <algorithm>
#include <cmath>

namespace k3 {

namespace {

// One axis of PyTorch's bilinear resize (align_corners false): the two source indices and the
// weight of the second, from float32 arithmetic as upsample_bilinear2d's CPU kernel does.
struct Tap {
    int i0, i1;
    float l1;
};
std::vector<Tap> taps(int in, int out) {
    std::vector<Tap> t(static_cast<size_t>(out));
    const float scale = float(in) / float(out);
    for (int i = 0; i < out; ++i) {
        const float src = std::max(0.0f, (float(i) + 0.5f) * scale - 0.5f);
        const int i0 = std::min(int(src), in - 1);
        t[size_t(i)] = {i0, std::min(i0 + 1, in - 1), src - float(i0)};
    }
    return t;
}

}  // namespace

std::vector<float> interpolate_position_table(const std::vector<float>& table, int th, int tw, int64_t D, int gh,
                                              int gw) {
    std::vector<float> out(size_t(gh) * size_t(gw) * size_t(D));
    const std::vector<Tap> ty = taps(th, gh), tx = taps(tw, gw);
    for (int y = 0; y < gh; ++y)
        for (int x = 0; x < gw; ++x) {
            const Tap& a = ty[size_t(y)];
            const Tap& b = tx[size_t(x)];
            const float h1 = a.l1, h0 = 1.0f - a.l1, w1 = b.l1, w0 = 1.0f - b.l1;
            const float* p00 = &table[(size_t(a.i0) * tw + b.i0) * D];
            const float* p01 = &table[(size_t(a.i0) * tw + b.i1) * D];
            const float* p10 = &table[(size_t(a.i1) * tw + b.i0) * D];
            const float* p11 = &table[(size_t(a.i1) * tw + b.i1) * D];
            float* o = &out[(size_t(y) * gw + x) * D];
            for (int64_t d = 0; d < D; ++d) o[d] = h0 * (w0 * p00[d] + w1 * p01[d]) + h1 * (w0 * p10[d] + w1 * p11[d]);
        }
    return out;
}

RopeTable rope_table_2d(int gh, int gw, int head_dim) {
    RopeTable r;
    r.pairs = head_dim / 2;
    const int n_freq = head_dim / 4;
    std::vector<float> theta(static_cast<size_t>(n_freq));
    for (int j = 0; j < n_freq; ++j)
        theta[size_t(j)] = 1.0f / std::pow(10000.0f, float(4 * j) / float(head_dim));
    r.cos.resize(size_t(gh) * gw * r.pairs);
    r.sin.resize(r.cos.size());
    for (int y = 0; y < gh; ++y)
        for (int x = 0; x < gw; ++x)
            for (int k = 0; k < r.pairs; ++k) {
                const float angle = float(k % 2 == 0 ? x : y) * theta[size_t(k / 2)];
                const size_t i = (size_t(y) * gw + x) * r.pairs + size_t(k);
                r.cos[i] = std::cos(angle);
                r.sin[i] = std::sin(angle);
            }
    return r;
}

}  // namespace k3
