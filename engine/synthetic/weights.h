// Random but realistic contents for every tensor of a synthetic checkpoint, deterministic for
// (seed, tensor name) and computable block by block in any order, so the writer can fill blocks
// on all cores and still produce byte-identical files.
//
// What "realistic" means here (all widths from the tensor's shape, nothing hard-coded):
//  - bf16 matrices [out][in]: ~N(0, gain^2/in); gain 1 for input projections (outputs keep the
//    input's scale) and 0.5 for the projections that write into the residual stream (o_proj,
//    down projections, routed_expert_up_proj), so the residual grows slowly within an
//    attention-residual block; embeddings ~N(0, 1); lm_head gain 1 (logits of std ~1), except
//    the rows of the 256 special slots, at gain 0.05: like a trained model's never-emitted
//    reserved tokens, they are practically never the argmax, so greedy output is always text
//    (and never ends early on an end-of-turn token). MLA q_a_proj gain 3e-3, so the eps of
//    q_a_layernorm matters (its outputs' mean square ~1e-5).
//  - norm gains uniform in [0.8, 1.2]; attention-residual scoring vectors ~N(0, 1/hidden), so the
//    softmax over sources is neither uniform nor one-hot.
//  - KDA: A_log = log(1..16) spread over the heads (rotated per layer), zero past num_heads;
//    dt_bias uniform +-0.25; conv taps uniform +-1/sqrt(kernel).
//  - router: gate.weight gain 1 (logits ~N(0,1), sigmoid scores spread ~0.2) and
//    e_score_correction_bias uniform +-0.25, which reorders the top-k selection.
//  - MXFP4 experts: E2M1 codes distributed like a Gaussian quantised at a group scale (every one
//    of the 16 codes occurs, no 32-group is all zeros), E8M0 scales = a base chosen so the
//    dequantised weights have std ~1/sqrt(in), plus a per-row offset (-1..+1) and a per-group
//    offset (-2..+1): a 7-value spread (e.g. 118..124 for k3-mini's w1).
//  - optionally (AnswerEnding, below) a steady column 0 that gives chosen tokens a logit bias.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "weights/config.h"
#include "weights/model_tensors.h"

namespace k3 {

// Blocks the generator fills independently. A multiple of every element size and of the
// 16 bytes of one packed MXFP4 group, so no element or group straddles two blocks.
inline constexpr int64_t kFillBlockBytes = 64 << 10;

// A lean toward ending answers, for a preset whose random weights must still finish their turns
// (the `agent` preset: coding agents wait for the end of each answer, docs/agents.md). Every
// token's embedding holds the same large value in column 0, and the model-level mix of attention
// residuals leans on the embedding (its fold's column 0 is positive), so the final normed state
// has a steady positive column 0 whatever the text; lm_head's column 0 then acts as a logit bias
// per token: zero for ordinary tokens, `end_of_msg` for <|end_of_msg|> (a free-text answer ends
// within a few tokens), `close` for <|close|> (what ends reasoning and a grammar-held call's
// string argument, which the grammar keeps open until then) and `quote` for the '"' byte (what
// ends a JSON string inside an argument). Biases are in logits, against ordinary logits of
// std ~0.5 over the vocabulary.
struct AnswerEnding {
    bool on = false;
    float end_of_msg = 0, close = 0, quote = 0;
};

enum class FillKind { NormalBf16, UniformBf16, UniformF32, ALogF32, Mxfp4Codes, Mxfp4Scales };

struct TensorRecipe {
    FillKind kind = FillKind::NormalBf16;
    float a = 0, b = 0;     // NormalBf16: a = std; Uniform*: [a, b]
    int64_t row_len = 0;    // NormalBf16: elements per row, and rows >= quiet_from_row get
    int64_t quiet_from_row = INT64_MAX;  //   std a * quiet_gain (lm_head's special slots)
    float quiet_gain = 1;
    bool set_column0 = false;  // NormalBf16/UniformBf16: element 0 of every row (row_len wide)
    float column0 = 0;         //   is column0, or the value column0_rows gives for that row
    std::vector<std::pair<int64_t, float>> column0_rows;
    int heads = 0;          // ALogF32: KDA heads (the rest of the vector is zero padding)
    int scale_base = 127;   // Mxfp4Scales: the E8M0 byte of a typical group
    int64_t row_bytes = 0;  // Mxfp4Scales: scale bytes per row
    uint64_t key = 0;       // from (seed, tensor name)
};

// How tensor `t` of model `cfg` is filled for `seed` (and `ending`, when on).
TensorRecipe recipe_for(const ModelConfig& cfg, const TensorSpec& t, uint64_t seed, const AnswerEnding& ending = {});

// Writes block `block` of the tensor's bytes (bytes [block * kFillBlockBytes, min(+kFillBlockBytes,
// nbytes))) to `out`, which points at that block's first byte.
void fill_tensor_block(const TensorRecipe& recipe, int64_t tensor_bytes, int64_t block, uint8_t* out);

// splitmix64 finaliser: the counter-based generator behind every block.
inline uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace k3
