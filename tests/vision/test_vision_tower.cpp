// The tower's pieces on their own (docs/model.md "The tower", "Merge and projector"):
// the 2x2 merge's slot order on coordinate-encoded rows, the position table's bilinear resize
// (identity at the table's own size, the formula on a small case), the RoPE table's
// orientation (even pairs follow the column, odd ones the row), and a whole random tower giving
// bit-identical rows on 1 and 3 threads and with any token chunk. The numerics against an
// independent reference are tests/reference/test_vision.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/kernels.h"
#include "model/compute.h"
#include "vision/vision_position.h"
#include "vision/vision_projector.h"
#include "vision/vision_tower.h"

using namespace k3;

namespace {

AlignedBytes random_bf16(size_t n, float scale, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, scale);
    AlignedBytes b(n * 2);
    auto* p = reinterpret_cast<uint16_t*>(b.data());
    for (size_t i = 0; i < n; ++i) p[i] = f32_to_bf16(nd(rng));
    return b;
}

std::vector<float> random_f32(size_t n, float lo, float hi, std::mt19937& rng) {
    std::uniform_real_distribution<float> ud(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = ud(rng);
    return v;
}

VisionWeights random_tower() {
    std::mt19937 rng(5);
    VisionWeights w;
    VisionConfig& c = w.cfg;
    c.present = true;
    c.patch_size = 14;
    c.hidden = 32;
    c.intermediate = 64;
    c.heads = 2;
    c.layers = 2;
    c.qkv_hidden = 32;
    c.pos_emb_height = 5;
    c.pos_emb_width = 3;
    c.merge_h = c.merge_w = 2;
    c.mm_hidden = 32;
    c.text_hidden = 48;
    c.projector_eps = 1e-5f;
    const size_t D = 32, A = 32, F = 64, M = 128, H = 48;
    w.patch_embed = random_bf16(D * 588, 0.04f, rng);
    w.pos_table = random_f32(5 * 3 * D, -0.5f, 0.5f, rng);
    for (int b = 0; b < c.layers; ++b) {
        VisionBlockWeights blk;
        blk.norm0 = random_f32(D, 0.8f, 1.2f, rng);
        blk.norm1 = random_f32(D, 0.8f, 1.2f, rng);
        blk.wqkv = random_bf16(3 * A * D, 0.18f, rng);
        blk.wo = random_bf16(D * A, 0.1f, rng);
        blk.fc0 = random_bf16(F * D, 0.18f, rng);
        blk.fc1 = random_bf16(D * F, 0.06f, rng);
        w.blocks.push_back(std::move(blk));
    }
    w.final_norm = random_f32(D, 0.8f, 1.2f, rng);
    w.proj0 = random_bf16(M * M, 0.09f, rng);
    w.proj2 = random_bf16(H * M, 0.09f, rng);
    w.post_norm = random_f32(H, 0.8f, 1.2f, rng);
    return w;
}

}  // namespace

TEST_CASE("the 2x2 merge puts patch (2R+dr, 2C+dc) in slot 2dr+dc of row R*gw/2+C") {
    const int gh = 4, gw = 6, D = 3;
    std::vector<float> y(size_t(gh * gw * D));
    for (int p = 0; p < gh * gw; ++p)
        for (int d = 0; d < D; ++d) y[size_t(p * D + d)] = float(p * 10 + d);
    const std::vector<float> u = merge_2x2(y, gh, gw, D);
    REQUIRE(u.size() == y.size());
    for (int R = 0; R < gh / 2; ++R)
        for (int C = 0; C < gw / 2; ++C)
            for (int k = 0; k < 4; ++k)
                for (int d = 0; d < D; ++d) {
                    const int p = (2 * R + k / 2) * gw + 2 * C + k % 2;
                    CHECK(u[size_t(((R * (gw / 2) + C) * 4 + k) * D + d)] == float(p * 10 + d));
                }
}

TEST_CASE("the position table is kept at its own size and resized bilinearly otherwise") {
    std::mt19937 rng(3);
    const int th = 5, tw = 3, D = 4;
    const std::vector<float> t = random_f32(size_t(th * tw * D), -1, 1, rng);
    CHECK(interpolate_position_table(t, th, tw, D, th, tw) == t);
    // 5 rows -> 2: scale 2.5, src = (i + 0.5) * 2.5 - 0.5 = 0.75 and 3.25; 3 cols -> 6: scale
    // 0.5, src = max(0, (j + 0.5) * 0.5 - 0.5) = 0, 0.25, 0.75, 1.25, 1.75, 2.25 (column 2 twice).
    const std::vector<float> r = interpolate_position_table(t, th, tw, D, 2, 6);
    auto T = [&](int y, int x, int d) { return double(t[size_t((y * tw + x) * D + d)]); };
    const double sy[2] = {0.75, 3.25}, sx[6] = {0, 0.25, 0.75, 1.25, 1.75, 2.25};
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 6; ++j)
            for (int d = 0; d < D; ++d) {
                const int y0 = int(sy[i]), y1 = std::min(y0 + 1, th - 1);
                const int x0 = std::min(int(sx[j]), tw - 1), x1 = std::min(x0 + 1, tw - 1);
                const double ly = sy[i] - y0, lx = sx[j] - x0;
                const double want = (1 - ly) * ((1 - lx) * T(y0, x0, d) + lx * T(y0, x1, d)) +
                                    ly * ((1 - lx) * T(y1, x0, d) + lx * T(y1, x1, d));
                CHECK(r[size_t((i * 6 + j) * D + d)] == doctest::Approx(want).epsilon(1e-6));
            }
}

TEST_CASE("RoPE rotates even pairs by the column and odd pairs by the row") {
    const int gh = 3, gw = 5, dh = 16;
    const RopeTable r = rope_table_2d(gh, gw, dh);
    REQUIRE(r.pairs == 8);
    for (int y = 0; y < gh; ++y)
        for (int x = 0; x < gw; ++x)
            for (int k = 0; k < r.pairs; ++k) {
                const double theta = std::pow(10000.0, -4.0 * (k / 2) / dh);
                const double angle = (k % 2 == 0 ? x : y) * theta;
                const size_t i = size_t((y * gw + x) * r.pairs + k);
                CHECK(r.cos[i] == doctest::Approx(std::cos(angle)).epsilon(1e-5));
                CHECK(r.sin[i] == doctest::Approx(std::sin(angle)).epsilon(1e-5));
            }
}

TEST_CASE("a whole tower gives the same bits on 1 and 3 threads and in any token chunk") {
    const VisionWeights w = random_tower();
    ImageGeometry g;
    g.width = g.resized_width = g.padded_width = 84;
    g.height = g.resized_height = g.padded_height = 56;
    g.grid_h = 4;
    g.grid_w = 6;
    std::mt19937 rng(9);
    const std::vector<float> patches = random_f32(size_t(g.patches() * 588), -1, 1, rng);
    const Kernels& k = select_kernels();
    Compute one(k, 1), three(k, 3);
    one.reserve(64);
    three.reserve(64);
    VisionTrace trace;
    const std::vector<float> a = encode_image_rows(w, one, 64, g, patches, {}, &trace);
    const std::vector<float> b = encode_image_rows(w, three, 64, g, patches);
    const std::vector<float> c = encode_image_rows(w, three, 5, g, patches);  // 24 patches in chunks of 5
    REQUIRE(a.size() == size_t(g.rows() * 48));
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    CHECK(std::memcmp(a.data(), c.data(), a.size() * 4) == 0);
    // The projector's post-norm leaves every row with RMS near its gains' (0.8..1.2), finite.
    for (int64_t r = 0; r < g.rows(); ++r) {
        double ss = 0;
        for (int j = 0; j < 48; ++j) ss += double(a[size_t(r * 48 + j)]) * a[size_t(r * 48 + j)];
        const double rms = std::sqrt(ss / 48);
        CHECK(rms > 0.7);
        CHECK(rms < 1.3);
    }
    CHECK(trace.merged.size() == size_t(g.rows() * 128));
    // A different epsilon changes the rows (the setting reaches every norm of the tower).
    const std::vector<float> e = encode_image_rows(w, one, 64, g, patches, VisionSettings{0.0078125f});
    CHECK(std::memcmp(a.data(), e.data(), a.size() * 4) != 0);
}
