// Every kernel set against the scalar reference (ref.cpp), and the reference against an fp64
// evaluation of the same formula. The reduction order is part of each kernel's definition
// (kernel_sets.h), so the ISA sets must reproduce the reference bit for bit; the reference in
// turn must sit within named tolerances of exact arithmetic. Also: matmul(T) == matvec per
// token, row-split independence, determinism, MXFP4/E8M0 known values and bf16 conversions.
// Which set runs (K3_KERNELS, availability): test_kernel_dispatch.cpp; blocked attention:
// test_attend_block.cpp.
#include <doctest/doctest.h>

#include "common/skip.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_test_sets.h"
#include "kernels/kernel_sets.h"
#include "kernels/kernels.h"

using namespace k3;
using namespace k3::test;

namespace {

// Tolerances of the fp32 reference against fp64 arithmetic, relative to the sum of |terms|
// (the condition-free scale of a dot product). Accumulating n terms in 16 lanes then a 4-level
// tree has a worst-case bound of about (n/16 + 4) * 2^-24, but rounding errors of random data
// mostly cancel: these shapes (fixed seeds) produce about 1e-7. The limits leave a 4-15x margin
// and are still far below what a wrong formula produces, or rounding x to bf16 (5e-5 to 7e-4
// on these widths).
constexpr double kMaxRelErrBf16Dot = 1e-6;   // bf16 weights, widths up to ~7200
constexpr double kMaxRelErrMxfp4Dot = 1e-6;  // MXFP4 weights, widths up to ~3600
constexpr double kMaxRelErrF32Dot = 1e-6;
constexpr double kMaxRelErrKda = 2e-6;       // two passes of D-long chains, D <= 128
constexpr double kMaxRelErrAttention = 1e-6;  // softmax-weighted sums, relative to max |value|
constexpr double kMaxNmse = 1e-10;            // normalised mean squared error of any output vector


std::vector<uint16_t> random_bf16(std::mt19937& rng, size_t n) {
    std::vector<uint16_t> v(n);
    std::normal_distribution<float> dist(0.0f, 0.05f);
    for (auto& h : v) h = f32_to_bf16(dist(rng));
    return v;
}

// Random MXFP4 tensor: any nibble, scales around 2^-4 with a few 255 (zero) groups.
void random_mxfp4(std::mt19937& rng, int64_t rows, int64_t cols, std::vector<uint8_t>& packed,
                  std::vector<uint8_t>& scales) {
    packed.resize(rows * cols / 2);
    scales.resize(rows * cols / 32);
    std::uniform_int_distribution<int> byte(0, 255), scale(118, 130), rare(0, 19);
    for (auto& b : packed) b = static_cast<uint8_t>(byte(rng));
    for (auto& s : scales) s = static_cast<uint8_t>(rare(rng) == 0 ? 255 : scale(rng));
}

double mxfp4_value(const uint8_t* packed, const uint8_t* scales, int64_t i) {
    const uint8_t byte = packed[i / 2];
    const int code = (i % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
    return static_cast<double>(kE2M1[code]) * e8m0_to_float(scales[i / 32]);
}


// Error figures of an output vector against fp64 truth. `scale[i]` is the per-element error
// scale (sum of |terms|, or max |value|).
struct ErrorStats {
    double max_rel = 0;  // max |got - truth| / scale
    double max_abs = 0;
    double nmse = 0;  // sum (got - truth)^2 / sum truth^2
};

ErrorStats error_stats(const std::vector<float>& got, const std::vector<double>& truth,
                       const std::vector<double>& scale) {
    ErrorStats e;
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double d = std::fabs(got[i] - truth[i]);
        e.max_abs = std::max(e.max_abs, d);
        if (scale[i] > 0) e.max_rel = std::max(e.max_rel, d / scale[i]);
        num += d * d;
        den += truth[i] * truth[i];
    }
    e.nmse = den > 0 ? num / den : num;
    return e;
}

void report(const char* what, const ErrorStats& e) {
    MESSAGE(std::string(what) << ": max_rel " << e.max_rel << " max_abs " << e.max_abs << " nmse " << e.nmse);
}

const int64_t kOddRows[] = {1, 3, 5, 7, 13, 37};
const int64_t kBf16Cols[] = {1, 5, 15, 16, 17, 31, 33, 48, 100, 257, 2055, 7175};
const int64_t kMxfp4Cols[] = {32, 64, 96, 160, 480, 1056, 3584};

}  // namespace

TEST_CASE("bf16 conversions: exact widening, round-to-nearest-even narrowing") {
    CHECK(bf16_to_f32(0x3f80) == 1.0f);
    CHECK(bf16_to_f32(0xc000) == -2.0f);
    CHECK(std::signbit(bf16_to_f32(0x8000)));
    CHECK(std::isinf(bf16_to_f32(0x7f80)));
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(-0.0f) == 0x8000);
    CHECK(f32_to_bf16(INFINITY) == 0x7f80);
    // bf16 keeps 7 mantissa bits: 1 + 2^-8 is a tie between 0x3f80 and 0x3f81 -> even 0x3f80;
    // 1 + 3*2^-8 is a tie between 0x3f81 and 0x3f82 -> even 0x3f82; just above a tie rounds up.
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
    CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
    CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -9)) == 0x3f80);
    // NaN stays a NaN (quiet), whatever its payload.
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
    uint32_t snan_bits = 0x7f800001u;
    float snan;
    std::memcpy(&snan, &snan_bits, 4);
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(snan))));
    // Every non-NaN bf16 survives the round trip.
    int mismatches = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = bf16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        if (f32_to_bf16(f) != h) ++mismatches;
    }
    CHECK(mismatches == 0);
}

TEST_CASE("e8m0 scales: known values and edge cases") {
    CHECK(e8m0_to_float(127) == 1.0f);
    CHECK(e8m0_to_float(128) == 2.0f);
    CHECK(e8m0_to_float(126) == 0.5f);
    CHECK(e8m0_to_float(0) == std::ldexp(1.0f, -127));  // subnormal, not flushed
    CHECK(e8m0_to_float(0) > 0.0f);
    CHECK(e8m0_to_float(1) == std::ldexp(1.0f, -126));
    CHECK(e8m0_to_float(254) == std::ldexp(1.0f, 127));
    CHECK(e8m0_to_float(255) == 0.0f);  // E8M0 NaN decodes to zero (docs/model.md "Numerics")
    for (int s = 0; s < 256; ++s) {
        const uint32_t bits = e8m0_bits(static_cast<uint8_t>(s));
        float f;
        std::memcpy(&f, &bits, 4);
        CHECK_MESSAGE(f == e8m0_to_float(static_cast<uint8_t>(s)), "scale byte " << s);
        CHECK(kE8M0[s] == e8m0_to_float(static_cast<uint8_t>(s)));
    }
}

TEST_CASE("MXFP4 known-value rows, every kernel set") {
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        const Kernels& k = *set.k;
        const int64_t cols = 64;  // two groups
        std::vector<float> x(cols, 0.0f);
        float y = -1.0f;

        // Row 0: every code once in group 0 (bytes (code 2j, code 2j+1)), scale 1; x = 1 -> the
        // E2M1 table sums to zero; with x[i] = i the sum is hand-computable.
        std::vector<uint8_t> packed(cols / 2, 0), scales = {127, 127};
        for (int j = 0; j < 8; ++j) packed[j] = static_cast<uint8_t>((2 * j) | ((2 * j + 1) << 4));
        for (int j = 8; j < 16; ++j) packed[j] = static_cast<uint8_t>((2 * (j - 8)) | ((2 * (j - 8) + 1) << 4));
        for (int i = 0; i < 32; ++i) x[i] = 1.0f;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 0.0f);  // 2 * (0 + .5 + 1 + 1.5 + 2 + 3 + 4 + 6 - (the same)) = 0
        for (int i = 0; i < 32; ++i) x[i] = (i < 16) ? 1.0f : 0.0f;  // first 16 elements: codes 0..15
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 0.0f);
        for (int i = 0; i < 32; ++i) x[i] = (i < 8) ? 1.0f : 0.0f;  // codes 0..7: 0+.5+1+1.5+2+3+4+6
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 18.0f);
        scales[0] = 129;  // x4
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 72.0f);

        // Swapped-nibble negative control: byte 0x71 = low code 1 (0.5, element 0), high code 7
        // (6.0, element 1). x = [1, 0]: the right order gives 0.5, the swapped one 6.
        std::fill(packed.begin(), packed.end(), 0);
        std::fill(x.begin(), x.end(), 0.0f);
        scales = {127, 127};
        packed[0] = 0x71;
        x[0] = 1.0f;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 0.5f);
        CHECK(y != 6.0f);
        x[0] = 0.0f;
        x[1] = 1.0f;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 6.0f);

        // Signs come from each nibble's own bit 3: 0x1a = (-1.0, +0.5), 0x92 = (+1.0, -0.5).
        x[0] = 1.0f;  // x[1] is already 1
        packed[0] = 0x1a;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == -0.5f);
        packed[0] = 0x92;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 0.5f);

        // Scale 255 zeroes its whole group (even with x huge), not its neighbour.
        std::fill(packed.begin(), packed.end(), 0x77);  // every element 6.0
        std::fill(x.begin(), x.end(), 1.0f);
        scales = {255, 127};
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 32 * 6.0f);
        scales = {255, 255};
        for (int i = 0; i < 32; ++i) x[i] = 1e30f;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 0.0f);

        // Scale 0 (subnormal 2^-127): 0.5 * 2^-127 * 2^100 = 2^-28, exactly.
        std::fill(packed.begin(), packed.end(), 0);
        std::fill(x.begin(), x.end(), 0.0f);
        packed[16] = 0x01;  // element 32 (group 1) = code 1 = 0.5
        scales = {127, 0};
        x[32] = std::ldexp(1.0f, 100);
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == std::ldexp(1.0f, -28));
        // Scale 254 (2^127): 1.5 * 2^127 * 2^-100 = 1.5 * 2^27; and -0.5 * 2^127 (code 9).
        packed[16] = 0x93;  // element 32 = code 3 (1.5), element 33 = code 9 (-0.5)
        scales = {127, 254};
        x[32] = std::ldexp(1.0f, -100);
        x[33] = 1.0f;
        k.matvec_mxfp4(packed.data(), scales.data(), x.data(), &y, 1, cols);
        CHECK(y == 1.5f * std::ldexp(1.0f, 27) - std::ldexp(1.0f, 126));
    }
}

// W^T x by its definition (kernels.h): per column, from +0, each term's product rounded and
// then added in increasing row order, never fused. Small integers are exact whatever the order;
// the last check is one a fused multiply-add or another order would get wrong.
TEST_CASE("transposed bf16 product: the definition's values, every kernel set") {
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        const Kernels& k = *set.k;
        const int64_t rows = 3, cols = 37;  // past every width's vector blocks
        std::vector<uint16_t> W(rows * cols);
        for (int64_t d = 0; d < rows; ++d)
            for (int64_t j = 0; j < cols; ++j) W[d * cols + j] = f32_to_bf16(float(j + 1) * float(d + 1));
        const float x[rows] = {1.0f, -2.0f, 0.5f};
        std::vector<float> y(cols, NAN);
        k.matvec_transposed_bf16(W.data(), x, y.data(), rows, cols);
        for (int64_t j = 0; j < cols; ++j) CHECK(y[j] == float(j + 1) * (1.0f - 4.0f + 1.5f));  // exact
        // Rounded products: (1 + 2^-7) (1 + 2^-17) = 1 + 2^-7 + 2^-17 + 2^-24 rounds (a tie, to
        // even) to 1 + 2^-7 + 2^-17 before it is added to -(1 + 2^-7 + 2^-17): +0, where a fused
        // multiply-add keeps the 2^-24.
        const uint16_t w2[2] = {f32_to_bf16(1.0f), f32_to_bf16(1.0f + std::ldexp(1.0f, -7))};
        const float x2[2] = {-(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -17)), 1.0f + std::ldexp(1.0f, -17)};
        float y2 = NAN;
        k.matvec_transposed_bf16(w2, x2, &y2, 2, 1);
        CHECK(y2 == 0.0f);
        CHECK(!std::signbit(y2));  // (+0 + -a) + a = +0
    }
}

TEST_CASE("reference kernels agree with fp64 arithmetic within the named tolerances") {
    std::mt19937 rng(1234);
    const Kernels& ref = scalar_kernels();

    SUBCASE("bf16 matvec") {
        ErrorStats worst;
        for (int64_t cols : kBf16Cols) {
            const int64_t rows = 37;
            auto W = random_bf16(rng, rows * cols);
            auto x = random_floats(rng, cols);
            std::vector<float> y(rows);
            ref.matvec_bf16(W.data(), x.data(), y.data(), rows, cols);
            std::vector<double> truth(rows, 0.0), scale(rows, 0.0);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t i = 0; i < cols; ++i) {
                    const double t = static_cast<double>(bf16_to_f32(W[r * cols + i])) * x[i];
                    truth[r] += t;
                    scale[r] += std::fabs(t);
                }
            const ErrorStats e = error_stats(y, truth, scale);
            CHECK_MESSAGE(e.max_rel <= kMaxRelErrBf16Dot, "cols " << cols);
            CHECK(e.nmse <= kMaxNmse);
            worst.max_rel = std::max(worst.max_rel, e.max_rel);
            worst.max_abs = std::max(worst.max_abs, e.max_abs);
            worst.nmse = std::max(worst.nmse, e.nmse);
        }
        report("scalar matvec_bf16 vs fp64", worst);
    }
    SUBCASE("mxfp4 matvec") {
        ErrorStats worst;
        for (int64_t cols : kMxfp4Cols) {
            const int64_t rows = 13;
            std::vector<uint8_t> packed, scales;
            random_mxfp4(rng, rows, cols, packed, scales);
            auto x = random_floats(rng, cols);
            std::vector<float> y(rows);
            ref.matvec_mxfp4(packed.data(), scales.data(), x.data(), y.data(), rows, cols);
            std::vector<double> truth(rows, 0.0), scale(rows, 0.0);
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t i = 0; i < cols; ++i) {
                    const double t =
                        mxfp4_value(packed.data() + r * cols / 2, scales.data() + r * cols / 32, i) * x[i];
                    truth[r] += t;
                    scale[r] += std::fabs(t);
                }
            const ErrorStats e = error_stats(y, truth, scale);
            CHECK_MESSAGE(e.max_rel <= kMaxRelErrMxfp4Dot, "cols " << cols);
            worst.max_rel = std::max(worst.max_rel, e.max_rel);
            worst.max_abs = std::max(worst.max_abs, e.max_abs);
            worst.nmse = std::max(worst.nmse, e.nmse);
        }
        report("scalar matvec_mxfp4 vs fp64", worst);
    }
    SUBCASE("dot_f32") {
        ErrorStats worst;
        std::vector<float> got;
        std::vector<double> truth, scale;
        for (int64_t n = 0; n <= 300; n += 7) {
            auto a = random_floats(rng, n), b = random_floats(rng, n);
            got.push_back(ref.dot_f32(a.data(), b.data(), n));
            double t = 0, s = 0;
            for (int64_t i = 0; i < n; ++i) {
                t += static_cast<double>(a[i]) * b[i];
                s += std::fabs(static_cast<double>(a[i]) * b[i]);
            }
            truth.push_back(t);
            scale.push_back(s);
        }
        CHECK(got[0] == 0.0f);  // the empty dot product
        const ErrorStats e = error_stats(got, truth, scale);
        CHECK(e.max_rel <= kMaxRelErrF32Dot);
        report("scalar dot_f32 vs fp64", e);
    }
    SUBCASE("kda_step") {
        for (int D : {1, 7, 16, 33, 128}) {
            CAPTURE(D);
            auto S = random_floats(rng, D * D, 0.3f);
            auto q = random_floats(rng, D), k = random_floats(rng, D), v = random_floats(rng, D);
            std::uniform_real_distribution<float> unit(std::exp(-5.0f), 1.0f);
            std::vector<float> alpha(D);
            for (auto& a : alpha) a = unit(rng);
            alpha[0] = 1.0f;  // exact saturation is legal
            const float beta = 0.7f;
            // fp64 evaluation of the delta-rule step (docs/model.md "Kimi Delta Attention")
            std::vector<double> Sd(S.begin(), S.end()), u(D, 0.0), o(D, 0.0), scale_o(D, 0.0);
            for (int i = 0; i < D; ++i)
                for (int j = 0; j < D; ++j) Sd[i * D + j] *= alpha[i];
            for (int i = 0; i < D; ++i)
                for (int j = 0; j < D; ++j) u[j] += k[i] * Sd[i * D + j];
            for (int i = 0; i < D; ++i)
                for (int j = 0; j < D; ++j) Sd[i * D + j] += k[i] * static_cast<double>(beta) * (v[j] - u[j]);
            for (int i = 0; i < D; ++i)
                for (int j = 0; j < D; ++j) {
                    o[j] += q[i] * Sd[i * D + j];
                    scale_o[j] += std::fabs(q[i] * Sd[i * D + j]);
                }
            std::vector<float> out(D);
            ref.kda_step(S.data(), q.data(), k.data(), v.data(), alpha.data(), beta, out.data(), D);
            const ErrorStats e = error_stats(out, o, scale_o);
            CHECK(e.max_rel <= kMaxRelErrKda);
            double state_err = 0, state_max = 0;
            for (int i = 0; i < D * D; ++i) {
                state_err = std::max(state_err, std::fabs(S[i] - Sd[i]));
                state_max = std::max(state_max, std::fabs(Sd[i]));
            }
            CHECK(state_err <= kMaxRelErrKda * state_max);
            if (D == 128) report("scalar kda_step vs fp64 (D=128)", e);
        }
    }
    SUBCASE("attend_head") {
        for (int64_t n_pos : {1, 2, 9, 100}) {
            for (auto [dk, dv] : {std::pair{5, 7}, std::pair{192, 128}, std::pair{576, 512}}) {
                CAPTURE(n_pos);
                CAPTURE(dk);
                const int64_t ks = dk + 3, vs = dv + 1;  // strides wider than the rows
                auto q = random_floats(rng, dk), keys = random_floats(rng, n_pos * ks),
                     vals = random_floats(rng, n_pos * vs);
                const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
                std::vector<double> score(n_pos), truth(dv, 0.0), vmax(dv, 0.0);
                double m = -INFINITY, z = 0;
                for (int64_t s = 0; s < n_pos; ++s) {
                    double d = 0;
                    for (int i = 0; i < dk; ++i) d += static_cast<double>(q[i]) * keys[s * ks + i];
                    score[s] = d * scale;
                    m = std::max(m, score[s]);
                }
                for (int64_t s = 0; s < n_pos; ++s) z += std::exp(score[s] - m);
                for (int64_t s = 0; s < n_pos; ++s)
                    for (int j = 0; j < dv; ++j) {
                        truth[j] += std::exp(score[s] - m) / z * vals[s * vs + j];
                        vmax[j] = std::max(vmax[j], std::fabs(static_cast<double>(vals[s * vs + j])));
                    }
                std::vector<float> out(dv), scratch(kAttendBlock);
                attend_head(ref, q.data(), keys.data(), ks, vals.data(), vs, n_pos, dk, dv, scale, out.data(),
                                scratch.data());
                const ErrorStats e = error_stats(out, truth, vmax);
                CHECK(e.max_rel <= kMaxRelErrAttention);
                if (n_pos == 100 && dk == 576) report("scalar attend_head vs fp64 (100 pos, 576/512)", e);
            }
        }
    }
}

TEST_CASE("every kernel set reproduces the reference bit for bit, on random shapes with tails") {
    std::mt19937 rng(99);
    const Kernels& ref = scalar_kernels();
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        const Kernels& k = *set.k;

        for (int64_t rows : kOddRows)
            for (int64_t cols : kBf16Cols) {
                CAPTURE(rows);
                CAPTURE(cols);
                auto W = random_bf16(rng, rows * cols);
                auto x = random_floats(rng, cols);
                std::vector<float> y_ref(rows), y(rows, NAN);
                ref.matvec_bf16(W.data(), x.data(), y_ref.data(), rows, cols);
                k.matvec_bf16(W.data(), x.data(), y.data(), rows, cols);
                CHECK(same_bits(y.data(), y_ref.data(), rows));
            }

        for (int64_t rows : kOddRows)
            for (int64_t cols : kMxfp4Cols) {
                CAPTURE(rows);
                CAPTURE(cols);
                std::vector<uint8_t> packed, scales;
                random_mxfp4(rng, rows, cols, packed, scales);
                auto x = random_floats(rng, cols);
                std::vector<float> y_ref(rows), y(rows, NAN);
                ref.matvec_mxfp4(packed.data(), scales.data(), x.data(), y_ref.data(), rows, cols);
                k.matvec_mxfp4(packed.data(), scales.data(), x.data(), y.data(), rows, cols);
                CHECK(same_bits(y.data(), y_ref.data(), rows));
            }

        for (int64_t n = 0; n <= 140; ++n) {
            auto a = random_floats(rng, n), b = random_floats(rng, n);
            const float r = ref.dot_f32(a.data(), b.data(), n), got = k.dot_f32(a.data(), b.data(), n);
            CHECK_MESSAGE(std::memcmp(&r, &got, 4) == 0, "n " << n);
        }

        for (int D : {1, 7, 16, 17, 33, 64, 128, 200}) {
            CAPTURE(D);
            auto S = random_floats(rng, D * D, 0.3f);
            auto q = random_floats(rng, D), kk = random_floats(rng, D), v = random_floats(rng, D);
            std::vector<float> alpha(D);
            std::uniform_real_distribution<float> unit(std::exp(-5.0f), 1.0f);
            for (auto& a : alpha) a = unit(rng);
            std::vector<float> S2 = S, o_ref(D), o(D, NAN);
            ref.kda_step(S.data(), q.data(), kk.data(), v.data(), alpha.data(), 0.3f, o_ref.data(), D);
            k.kda_step(S2.data(), q.data(), kk.data(), v.data(), alpha.data(), 0.3f, o.data(), D);
            CHECK(same_bits(o.data(), o_ref.data(), D));
            CHECK(same_bits(S2.data(), S.data(), D * D));
        }

        // W^T x (MLA's query absorption: 128 x 512 in K3): column counts around every width's
        // blocks of four vectors, one vector and the single columns after them.
        for (int64_t rows : {1, 3, 128})
            for (int64_t cols : {1, 3, 4, 8, 15, 16, 17, 33, 64, 65, 100, 512}) {
                CAPTURE(rows);
                CAPTURE(cols);
                auto W = random_bf16(rng, rows * cols);
                auto x = random_floats(rng, rows);
                std::vector<float> y_ref(cols), y(cols, NAN);
                ref.matvec_transposed_bf16(W.data(), x.data(), y_ref.data(), rows, cols);
                k.matvec_transposed_bf16(W.data(), x.data(), y.data(), rows, cols);
                CHECK(same_bits(y.data(), y_ref.data(), cols));
            }

        for (int64_t n_pos : {1, 2, 3, 5, 17, 64, 65, 130}) {
            for (auto [dk, dv] : {std::pair{1, 1}, std::pair{5, 7}, std::pair{17, 33}, std::pair{192, 128},
                                  std::pair{576, 512}}) {
                CAPTURE(n_pos);
                CAPTURE(dk);
                const int64_t ks = dk + 1, vs = dv + 5;
                auto q = random_floats(rng, dk), keys = random_floats(rng, n_pos * ks),
                     vals = random_floats(rng, n_pos * vs);
                std::vector<float> out_ref(dv), out(dv, NAN), scratch(kAttendBlock);
                attend_head(ref, q.data(), keys.data(), ks, vals.data(), vs, n_pos, dk, dv, 0.1f, out_ref.data(),
                            scratch.data());
                attend_head(k, q.data(), keys.data(), ks, vals.data(), vs, n_pos, dk, dv, 0.1f, out.data(),
                              scratch.data());
                CHECK(same_bits(out.data(), out_ref.data(), dv));
            }
        }
    }
}

// Products that underflow to -0.0 leave every lane at -0.0 (n >= 16), so the reference sums to
// -0.0. A set that finishes a column tail by adding 0 * 0 to the lanes past the row's end turns
// those lanes into +0.0 and its sum into +0.0: not the reference's bits.
TEST_CASE("signed zeros: lanes past a column tail keep their sums, for every kernel set") {
    const Kernels& ref = scalar_kernels();
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        for (int64_t n = 16; n <= 48; ++n) {  // from 16: every lane holds a product
            CAPTURE(n);
            const std::vector<float> a(n, -1e-30f), b(n, 1e-30f);
            const float r = ref.dot_f32(a.data(), b.data(), n), got = set.k->dot_f32(a.data(), b.data(), n);
            REQUIRE(std::signbit(r));
            CHECK(std::memcmp(&r, &got, 4) == 0);
            const int64_t rows = 3, T = 2;
            const std::vector<uint16_t> W(rows * n, f32_to_bf16(-1e-30f));
            std::vector<float> X(T * n, 1e-30f), y_ref(T * rows), y(T * rows, NAN);
            ref.matmul_bf16(W.data(), X.data(), y_ref.data(), rows, n, T);
            set.k->matmul_bf16(W.data(), X.data(), y.data(), rows, n, T);
            CHECK(same_bits(y.data(), y_ref.data(), T * rows));
            ref.matvec_bf16(W.data(), X.data(), y_ref.data(), rows, n);
            set.k->matvec_bf16(W.data(), X.data(), y.data(), rows, n);
            CHECK(same_bits(y.data(), y_ref.data(), rows));
        }
    }
}

TEST_CASE("matmul over T tokens gives exactly matvec per token, for every kernel set") {
    std::mt19937 rng(7);
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        const Kernels& k = *set.k;
        // Up to 9 tokens every tail of a register tile (4 or 6 tokens); 14, 29 and 71 tokens of
        // 7,168+ columns cross the passes of tokens (matmul_token_tile: 4-24 tokens at that
        // width, by the L2) with a tile tail in the last pass.
        for (int64_t T : {1, 2, 3, 4, 5, 6, 7, 8, 9, 14, 29, 71}) {
            CAPTURE(T);
            const bool wide = T > 9;
            {
                const int64_t rows = wide ? 7 : 2 * T + 1, cols = wide ? 7177 : 16 * T + 9;  // odd rows, tail columns
                auto W = random_bf16(rng, rows * cols);
                auto X = random_floats(rng, T * cols);
                std::vector<float> Y(T * rows, NAN), y(rows);
                k.matmul_bf16(W.data(), X.data(), Y.data(), rows, cols, T);
                for (int64_t t = 0; t < T; ++t) {
                    k.matvec_bf16(W.data(), X.data() + t * cols, y.data(), rows, cols);
                    CHECK_MESSAGE(same_bits(Y.data() + t * rows, y.data(), rows), "bf16 token " << t);
                }
            }
            {
                const int64_t rows = wide ? 5 : 2 * T + 3, cols = wide ? 7168 : 32 * (T + 2);
                std::vector<uint8_t> packed, scales;
                random_mxfp4(rng, rows, cols, packed, scales);
                auto X = random_floats(rng, T * cols);
                std::vector<float> Y(T * rows, NAN), y(rows);
                k.matmul_mxfp4(packed.data(), scales.data(), X.data(), Y.data(), rows, cols, T);
                for (int64_t t = 0; t < T; ++t) {
                    k.matvec_mxfp4(packed.data(), scales.data(), X.data() + t * cols, y.data(), rows, cols);
                    CHECK_MESSAGE(same_bits(Y.data() + t * rows, y.data(), rows), "mxfp4 token " << t);
                }
            }
        }
    }
}

TEST_CASE("results do not depend on how rows are split, and repeat exactly") {
    std::mt19937 rng(11);
    for (const NamedSet& set : all_sets()) {
        CAPTURE(set.name);
        const Kernels& k = *set.k;
        const int64_t rows = 29, cols = 203, mcols = 224, T = 5;
        auto W = random_bf16(rng, rows * cols);
        auto X = random_floats(rng, T * cols);
        std::vector<uint8_t> packed, scales;
        random_mxfp4(rng, rows, mcols, packed, scales);
        auto Xm = random_floats(rng, T * mcols);

        std::vector<float> whole(T * rows), again(T * rows), split(T * rows), mwhole(T * rows), magain(T * rows),
            msplit(T * rows);
        k.matmul_bf16(W.data(), X.data(), whole.data(), rows, cols, T);
        k.matmul_bf16(W.data(), X.data(), again.data(), rows, cols, T);
        CHECK(same_bits(whole.data(), again.data(), T * rows));
        k.matmul_mxfp4(packed.data(), scales.data(), Xm.data(), mwhole.data(), rows, mcols, T);
        k.matmul_mxfp4(packed.data(), scales.data(), Xm.data(), magain.data(), rows, mcols, T);
        CHECK(same_bits(mwhole.data(), magain.data(), T * rows));

        // Split the rows in three uneven slices (as three threads would) through matvec.
        const int64_t cuts[] = {0, 5, 18, rows};
        for (int64_t t = 0; t < T; ++t)
            for (int part = 0; part < 3; ++part) {
                const int64_t r0 = cuts[part], n = cuts[part + 1] - cuts[part];
                k.matvec_bf16(W.data() + r0 * cols, X.data() + t * cols, split.data() + t * rows + r0, n, cols);
                k.matvec_mxfp4(packed.data() + r0 * mcols / 2, scales.data() + r0 * mcols / 32,
                               Xm.data() + t * mcols, msplit.data() + t * rows + r0, n, mcols);
            }
        CHECK(same_bits(whole.data(), split.data(), T * rows));
        CHECK(same_bits(mwhole.data(), msplit.data(), T * rows));
    }
}
