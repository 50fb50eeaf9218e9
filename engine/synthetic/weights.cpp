// Tensor contents for synthetic checkpoints (see synthetic_weights.h for the distributions).
#include "synthetic/weights.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <string_view>

#include "kernels/kernels.h"
#include "synthetic/vocab.h"
#include "util/check.h"
#include "k3/fnv1a.h"

namespace k3 {

namespace {

// splitmix64 as a stream: a counter advanced by the golden gamma, finalised per draw.
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
};

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}
bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Standard normal quantile by bisection on erfc (only used to build the code table once).
double normal_quantile(double p) {
    double lo = -10, hi = 10;
    for (int it = 0; it < 100; ++it) {
        const double mid = 0.5 * (lo + hi);
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

// Spread of w/scale inside a group: wide enough that +-6 (saturation) and +-0 both occur.
constexpr double kCodeSpread = 2.5;

// 256 equally likely E2M1 codes: the quantiles of N(0, kCodeSpread^2) rounded to the nearest
// E2M1 value, sign in bit 3 (negative values that round to zero give -0, code 8).
struct CodeTable {
    std::array<uint8_t, 256> code{};
    double mean_square = 0;  // E[E2M1[code]^2] over the table
    CodeTable() {
        static constexpr double kMagnitude[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
        for (int u = 0; u < 256; ++u) {
            const double z = kCodeSpread * normal_quantile((u + 0.5) / 256.0);
            const double m = std::fabs(z);
            int best = 0;
            for (int c = 1; c < 8; ++c)
                if (std::fabs(m - kMagnitude[c]) < std::fabs(m - kMagnitude[best])) best = c;
            code[size_t(u)] = uint8_t(best | (z < 0 ? 8 : 0));
            mean_square += kMagnitude[best] * kMagnitude[best] / 256.0;
        }
    }
};

const CodeTable& code_table() {
    static const CodeTable table;
    return table;
}

// E[4^(row offset + group offset)] for row offsets {-1,0,1} and group offsets {-2,-1,0,1}:
// the extra variance the scale spread adds, divided out of the base scale.
constexpr double kScaleSpreadVariance = ((0.25 + 1 + 4) / 3.0) * ((1.0 / 16 + 0.25 + 1 + 4) / 4.0);

// Uniform in (0, 1) from 16 random bits.
inline float unit16(uint64_t bits) { return (float(bits & 0xffffu) + 0.5f) / 65536.0f; }

// Approximately standard normal (Irwin-Hall of four uniforms: exact mean and variance, tails cut
// at +-3.46) from one 64-bit draw.
inline float normal64(uint64_t r) {
    const float s = unit16(r) + unit16(r >> 16) + unit16(r >> 32) + unit16(r >> 48);
    return (s - 2.0f) * 1.7320508f;
}

// The MLA q_a_proj writes its output at this scale: a mean square near 1e-5, comparable to the eps
// of q_a_layernorm. Reading that eps wrong (rms_norm_eps 1e-5 instead of the first-party 1e-6,
// docs/model.md "Numerics") then changes the normed q by ~25% and the golden fixtures catch it (the
// goldens' mutation teeth, docs/development.md "Reference model and goldens"); with unit-scale
// outputs the two eps values would be indistinguishable.
constexpr float kMlaQaGain = 3e-3f;

// Output projections write into the residual stream; keep them smaller (header comment).
bool is_output_projection(std::string_view name) {
    return ends_with(name, ".wo.weight") || ends_with(name, "mlp.fc1.weight") ||  // the vision tower's
           ends_with(name, "o_proj.weight") || ends_with(name, "mlp.down_proj.weight") ||
           ends_with(name, "shared_experts.down_proj.weight") || ends_with(name, "routed_expert_up_proj.weight");
}

// AnswerEnding: the embedding's column 0, and the model-level fold's column 0, which makes the
// embedding the heaviest source of the final mix (attn_res_mix: its normed column 0 is ~7, so
// its score is ~3.5 above the running residual's).
constexpr float kEndingChannel = 16.0f;
constexpr float kEndingFold = 0.5f;

// Column 0 of the final normed state when the mix is all embedding: the channel over the rms of
// a row whose other hidden - 1 entries are ~N(0, 1).
float ending_channel_normed(const ModelConfig& cfg) {
    const float e = float(cfg.hidden_size);
    return kEndingChannel / std::sqrt((kEndingChannel * kEndingChannel + e - 1.0f) / e);
}

void apply_ending(const ModelConfig& cfg, const TensorSpec& t, const AnswerEnding& ending, TensorRecipe& r) {
    const std::string_view name = t.name;
    const int64_t width = t.shape.back();
    if (t.role == TensorRole::Embed) {
        r.column0 = kEndingChannel;
    } else if (name == kModelPrefix + "output_attn_res_proj.weight") {
        r.column0 = kEndingFold;
    } else if (name == kModelPrefix + "norm.weight") {
        r.column0 = 1.0f;
    } else if (t.role == TensorRole::LmHead) {
        const float per_logit = 1.0f / ending_channel_normed(cfg);
        const int64_t specials = cfg.vocab_size - kSpecialSlots;
        r.column0 = 0.0f;
        r.column0_rows = {{specials + 2, ending.end_of_msg * per_logit},  // <|end_of_msg|> (vocab.cpp)
                          {specials + 4, ending.close * per_logit},       // <|close|>
                          {int64_t('"'), ending.quote * per_logit}};      // byte ranks come first
    } else {
        return;
    }
    r.set_column0 = true;
    r.row_len = width;
}

// Element 0 of row `row` under an AnswerEnding recipe.
float column0_value(const TensorRecipe& r, int64_t row) {
    for (const auto& [at, value] : r.column0_rows)
        if (at == row) return value;
    return r.column0;
}

TensorRecipe recipe_for_weights(const ModelConfig& cfg, const TensorSpec& t, uint64_t seed) {
    TensorRecipe r;
    r.key = mix64(mix64(seed) ^ fnv1a(t.name));
    const std::string_view name = t.name;

    if (t.role == TensorRole::ExpertPacked) {
        r.kind = FillKind::Mxfp4Codes;
        return r;
    }
    if (t.role == TensorRole::ExpertScale) {
        r.kind = FillKind::Mxfp4Scales;
        r.row_bytes = t.shape.at(1);
        const double in = double(t.shape.at(1) * kMxfp4Group);
        const double target_std = 1.0 / std::sqrt(in);
        const double unit_std = std::sqrt(code_table().mean_square * kScaleSpreadVariance);
        r.scale_base = int(std::lround(127.0 + std::log2(target_std / unit_std)));
        return r;
    }
    if (ends_with(name, "A_log")) {
        r.kind = FillKind::ALogF32;
        r.heads = cfg.kda_num_heads;
        return r;
    }
    if (ends_with(name, "dt_bias")) {
        r.kind = FillKind::UniformF32;
        r.a = -0.25f, r.b = 0.25f;
        return r;
    }
    if (ends_with(name, "conv1d.weight")) {
        const float bound = 1.0f / std::sqrt(float(cfg.short_conv_kernel_size));
        r.kind = FillKind::UniformF32;
        r.a = -bound, r.b = bound;
        return r;
    }
    if (ends_with(name, "e_score_correction_bias")) {
        r.kind = FillKind::UniformF32;
        r.a = -0.25f, r.b = 0.25f;
        return r;
    }
    if (ends_with(name, "o_norm.weight")) {
        r.kind = FillKind::UniformF32;
        r.a = 0.8f, r.b = 1.2f;
        return r;
    }
    if (ends_with(name, "_res_proj.weight")) {  // attention-residual scoring vectors [1][hidden]
        r.kind = FillKind::NormalBf16;
        r.a = 1.0f / std::sqrt(float(cfg.hidden_size));
        return r;
    }
    if (t.role == TensorRole::Vision && t.shape.size() == 4) {  // patch embedding [D][3][p][p]: a [D][3p^2] matrix
        r.kind = FillKind::NormalBf16;
        r.a = 1.0f / std::sqrt(float(t.shape[1] * t.shape[2] * t.shape[3]));
        return r;
    }
    if (t.role == TensorRole::Vision && t.shape.size() == 3) {  // position table [h][w][D], of the patches' scale
        r.kind = FillKind::NormalBf16;
        r.a = 0.5f;
        return r;
    }
    if (t.shape.size() == 1) {  // every other vector is an RMSNorm gain
        K3_CHECK(contains(name, "norm"), "no recipe for vector %s", t.name.c_str());
        r.kind = FillKind::UniformBf16;
        r.a = 0.8f, r.b = 1.2f;
        return r;
    }
    K3_CHECK(t.shape.size() == 2 && t.dtype == DType::BF16, "no recipe for %s", t.name.c_str());
    r.kind = FillKind::NormalBf16;
    if (t.role == TensorRole::Embed) {
        r.a = 1.0f;
    } else if (t.role == TensorRole::LmHead) {
        r.a = 1.0f / std::sqrt(float(t.shape[1]));
        r.row_len = t.shape[1];
        r.quiet_from_row = t.shape[0] - kSpecialSlots;
        r.quiet_gain = 0.05f;
    } else {
        const float gain = ends_with(name, "q_a_proj.weight") ? kMlaQaGain : is_output_projection(name) ? 0.5f : 1.0f;
        r.a = gain / std::sqrt(float(t.shape[1]));
    }
    return r;
}

}  // namespace

TensorRecipe recipe_for(const ModelConfig& cfg, const TensorSpec& t, uint64_t seed, const AnswerEnding& ending) {
    TensorRecipe r = recipe_for_weights(cfg, t, seed);
    if (ending.on) apply_ending(cfg, t, ending, r);
    return r;
}

void fill_tensor_block(const TensorRecipe& r, int64_t tensor_bytes, int64_t block, uint8_t* out) {
    const int64_t begin = block * kFillBlockBytes;
    const int64_t n = std::min(kFillBlockBytes, tensor_bytes - begin);
    K3_CHECK(n > 0, "block %lld outside the tensor", static_cast<long long>(block));
    SplitMix64 rng{mix64(r.key ^ mix64(uint64_t(block)))};

    switch (r.kind) {
        case FillKind::NormalBf16:
        case FillKind::UniformBf16: {
            const int64_t count = n / 2, first = begin / 2;
            for (int64_t i = 0; i < count; ++i) {
                const uint64_t bits = rng.next();
                float v;
                if (r.kind == FillKind::UniformBf16) {
                    v = r.a + (r.b - r.a) * unit16(bits);
                } else {
                    const bool quiet = r.row_len > 0 && (first + i) / r.row_len >= r.quiet_from_row;
                    v = (quiet ? r.a * r.quiet_gain : r.a) * normal64(bits);
                }
                if (r.set_column0 && (first + i) % r.row_len == 0) v = column0_value(r, (first + i) / r.row_len);
                const uint16_t h = f32_to_bf16(v);
                std::memcpy(out + 2 * i, &h, 2);
            }
            break;
        }
        case FillKind::UniformF32: {
            const int64_t count = n / 4;
            for (int64_t i = 0; i < count; ++i) {
                const float v = r.a + (r.b - r.a) * unit16(rng.next());
                std::memcpy(out + 4 * i, &v, 4);
            }
            break;
        }
        case FillKind::ALogF32: {
            const int64_t count = n / 4, first = begin / 4;
            const int heads = std::max(r.heads, 1);
            const int rotation = int(r.key % uint64_t(heads));
            for (int64_t i = 0; i < count; ++i) {
                const int64_t h = first + i;
                float v = 0.0f;  // zero padding past num_heads
                if (h < r.heads) {
                    const double frac = heads > 1 ? double((h + rotation) % heads) / double(heads - 1) : 0.0;
                    v = float(std::log(1.0 + 15.0 * frac));
                }
                std::memcpy(out + 4 * i, &v, 4);
            }
            break;
        }
        case FillKind::Mxfp4Codes: {
            // Four packed bytes (eight codes) per draw; then make sure no 16-byte group (32
            // elements) is all +-0, which a real quantiser would never emit for a live group.
            const auto& table = code_table().code;
            K3_CHECK(n % 16 == 0, "packed MXFP4 block of %lld bytes is not whole groups", static_cast<long long>(n));
            for (int64_t i = 0; i < n; i += 4) {
                uint64_t bits = rng.next();
                for (int k = 0; k < 4; ++k, bits >>= 16)
                    out[i + k] = uint8_t(table[bits & 0xff] | (table[(bits >> 8) & 0xff] << 4));
            }
            for (int64_t g = 0; g < n; g += 16) {
                uint64_t lo, hi;
                std::memcpy(&lo, out + g, 8);
                std::memcpy(&hi, out + g + 8, 8);
                if (((lo | hi) & 0x7777777777777777ull) == 0) out[g] = uint8_t((out[g] & 0xf0) | 0x2);  // +1.0
            }
            break;
        }
        case FillKind::Mxfp4Scales: {
            for (int64_t i = 0; i < n; ++i) {
                const int64_t row = (begin + i) / r.row_bytes;
                const int row_offset = int(mix64(r.key ^ (uint64_t(row) * 0x2545f4914f6cdd1dull)) % 3) - 1;
                const int group_offset = int(rng.next() & 3) - 2;
                const int s = std::clamp(r.scale_base + row_offset + group_offset, 1, 254);
                out[i] = uint8_t(s);
            }
            break;
        }
    }
}

}  // namespace k3
