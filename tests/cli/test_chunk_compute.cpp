// A prefill chunk's compute by stage (cli/chunk_compute.h) charges what the forward pass runs: the
// attention-residual mixes over as many sources as model.cpp mixes (counted here by hand for the
// demo shape), two norms a layer, a KDA head step per head and token, the router per token, one
// join per parallel region; each product at the rate measured at its own column width; and a
// longer prompt adds attention only. Before, the estimate charged the weight products and KDA's
// delta-rule step and nothing else (docs/performance.md, "Time to first token").
#include <doctest/doctest.h>

#include "cli/chunk_compute.h"
#include "synthetic/model_presets.h"

using namespace k3;
using namespace k3::cli;

namespace {

ModelConfig demo() { return find_preset("demo")->config; }

double stage(const ChunkCompute& c, ForwardStage s) { return c.seconds[size_t(s)]; }

}  // namespace

TEST_CASE("chunk compute: the per-token work is charged as often as the forward pass runs it") {
    const ModelConfig c = demo();  // 8 layers, residual blocks of 3, MLA at layers 3, 6, 7 (0-based)
    REQUIRE(c.num_hidden_layers == 8);
    REQUIRE(c.attn_res_block_size == 3);
    const int64_t T = 100;
    ModelRates r;
    r.work.mix_source_seconds = 1e-6;
    const ChunkCompute mix = chunk_compute(c, r, T, 0, c.num_experts);
    // sources a token mixes, layer by layer (pre-attention + pre-MLP; layer 0 copies its input):
    // blocks start at 0, 3, 6, so 0+2, 2+2, 2+2, 2+3, 3+3, 3+3, 3+4, 4+4 = 42
    CHECK(stage(mix, ForwardStage::ResidualMix) == doctest::Approx(42 * T * 1e-6));
    CHECK(mix.total() == doctest::Approx(42 * T * 1e-6));  // nothing else has a cost here

    ModelRates n;
    n.work.norm_seconds = 1e-6;
    n.work.kda_head_seconds = 1e-5;
    n.work.route_seconds = 1e-4;
    const ChunkCompute per = chunk_compute(c, n, T, 0, c.num_experts);
    CHECK(stage(per, ForwardStage::Norms) == doctest::Approx(2 * 8 * T * 1e-6));
    const int kda = 8 - 3, moe = 8 - c.first_k_dense_replace;
    CHECK(stage(per, ForwardStage::KdaHeads) == doctest::Approx(double(kda * c.kda_num_heads) * T * 1e-5));
    CHECK(stage(per, ForwardStage::Routing) == doctest::Approx(double(moe) * T * 1e-4));

    // a join per parallel region: twice the joins' cost, twice their charge; none without them
    ModelRates j;
    j.work.join_seconds = 1e-3;
    const ChunkCompute joins = chunk_compute(c, j, T, 0, c.num_experts);
    CHECK(joins.joins > 8 * 4);  // at least the mixes and norms of every layer
    CHECK(joins.total() == doctest::Approx(double(joins.joins) * 1e-3));
}

TEST_CASE("chunk compute: each product at its own width's rate; a later chunk adds only attention") {
    const ModelConfig c = demo();
    const auto widths = bf16_product_widths(c);
    REQUIRE(widths.size() >= 4);  // hidden, KDA heads, q_lora, latent, ... as columns
    ModelRates all_fast, one_slow;
    for (const auto& [cols, rows] : widths) {
        all_fast.bf16_gflops.push_back({cols, 100});
        one_slow.bf16_gflops.push_back({cols, cols == c.kda_head_dim ? 1.0 : 100});
    }
    all_fast.expert_gflops = one_slow.expert_gflops = {{16, 50}};
    const int64_t T = 64;
    const ChunkCompute fast = chunk_compute(c, all_fast, T, 0, c.num_experts);
    const ChunkCompute slow = chunk_compute(c, one_slow, T, 0, c.num_experts);
    // only KDA's decay projection f_b has the head width as its columns: [P][D], 5 KDA layers
    const double f_b = 5 * 2.0 * T * c.kda_width() * c.kda_head_dim;
    CHECK(stage(slow, ForwardStage::KdaProducts) - stage(fast, ForwardStage::KdaProducts) ==
          doctest::Approx(f_b / 1e9 - f_b / 100e9));
    CHECK(stage(slow, ForwardStage::MoeProducts) == doctest::Approx(stage(fast, ForwardStage::MoeProducts)));
    // the routed experts: top-k of 3 MXFP4 products [I][L] per token and MoE layer
    const double experts = 7 * 2.0 * T * c.num_experts_per_token * 3 * c.moe_intermediate_size * c.routed_expert_hidden_size;
    CHECK(stage(fast, ForwardStage::Experts) == doctest::Approx(experts / 50e9));

    // the same chunk after 1,000 positions: everything but the MLA attention is the same
    all_fast.attention_gflops = 10;
    const ChunkCompute first = chunk_compute(c, all_fast, T, 0, c.num_experts);
    const ChunkCompute later = chunk_compute(c, all_fast, T, 1000, c.num_experts);
    CHECK(later.attention_seconds > 10 * first.attention_seconds);
    CHECK(later.total() - later.attention_seconds == doctest::Approx(first.total() - first.attention_seconds));
    CHECK(stage(later, ForwardStage::MlaAttention) - later.attention_seconds ==
          doctest::Approx(stage(first, ForwardStage::MlaAttention) - first.attention_seconds));
}

TEST_CASE("chunk compute: a pass's attention runs at the rate measured nearest its queries' mean keys") {
    // Rates measured over 1k, 8k and 32k cached rows (machine_speed.h kAttentionKeys): past the
    // caches the rows come at the memory's rate, so a pass deep into a long prompt is charged
    // the 32k figure, not the 1k one (docs/performance.md, "Attention at long context").
    const ModelConfig c = demo();
    ModelRates flat, by_keys;
    flat.attention_gflops = 100;
    by_keys.attention_gflops = 100;
    by_keys.attention_gflops_by_keys = {{1024, 100}, {8192, 50}, {32768, 10}};
    const int64_t T = 64;
    // the causal pairs of a pass of T at p0, per MLA head and layer (chunk_compute's count)
    const auto seconds_at = [&](const ModelRates& r, int64_t p0) { return chunk_compute(c, r, T, p0, c.num_experts).attention_seconds; };
    // a first pass: mean keys 32, nearest 1k, the same as the flat rate
    CHECK(seconds_at(by_keys, 0) == doctest::Approx(seconds_at(flat, 0)));
    // mean keys about 6,000: nearest 8k, twice the time
    CHECK(seconds_at(by_keys, 6000) == doctest::Approx(2 * seconds_at(flat, 6000)));
    // mean keys about 30,000: the 32k figure, ten times
    CHECK(seconds_at(by_keys, 30000) == doctest::Approx(10 * seconds_at(flat, 30000)));
}
