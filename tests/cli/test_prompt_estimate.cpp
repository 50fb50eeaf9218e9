// Time to first token (cli/projection.h, estimate_prompt) for the real Kimi K3 config: the
// chunks add up, the attention term is the count of causal (query, key) pairs at K3's MLA widths
// counted here by hand, it grows with the square of the prompt while the rest grows linearly,
// and a plan that streams is bounded by its reads where a resident one is bounded by compute.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "cli/projection.h"
#include "real_k3_config.h"
#include "store/memory_plan.h"
#include "weights/config.h"

using namespace k3;
using namespace k3::io;
using k3::test::auto_plan;
using k3::test::real_k3;

namespace {

// The machine: a 7 GB/s disk, 3 TFLOP/s, attention at a third of that.
cli::Bandwidths machine() {
    cli::Bandwidths b;
    b.disk_gbps = 7;
    b.expert_gbps = 7;
    b.mem_gbps = 300;
    b.gflops = 3000;
    b.attention_gflops = 1000;
    return b;
}

}  // namespace

TEST_CASE("time to first token: the chunks add up, with K3's MLA attention over every causal pair") {
    const cli::ModelSizes m = real_k3();
    const ModelConfig& c = m.config;
    const MemoryPlan plan = auto_plan(m, 3000);  // everything resident
    const cli::Bandwidths b = machine();
    const int T = plan.chunk_tokens;
    REQUIRE(T >= 64);
    const int64_t n = 4 * int64_t(T) + T / 2;  // four whole chunks and a half one
    const cli::PromptEstimate e = cli::estimate_prompt(m, plan, b, n);
    CHECK(e.tokens == n);
    CHECK(e.chunks == 5);

    // K3: 24 MLA layers (the rest KDA), 96 heads, a 512-wide latent and a 64-wide rope slot
    int mla = 0;
    for (int il = 0; il < c.num_hidden_layers; ++il) mla += c.is_mla(il) ? 1 : 0;
    CHECK(mla == 24);
    CHECK(c.num_attention_heads == 96);
    CHECK(c.kv_lora_rank == 512);
    CHECK(c.qk_rope_head_dim == 64);
    const double pairs = double(n) * double(n + 1) / 2;
    const double attention = 24.0 * 96 * pairs * 2 * (512 + 64 + 512) / (b.attention_gflops * 1e9);
    CHECK(e.attention_seconds == doctest::Approx(attention).epsilon(1e-9));

    // resident: each chunk costs its compute (what it reads, the embedding rows, is far less);
    // the weights' part is linear in the tokens
    const cli::Projection whole = cli::project(m, plan, b, T), half = cli::project(m, plan, b, T / 2);
    MESSAGE(plan.describe());
    CHECK(e.read_bound_chunks == 0);
    CHECK(e.read_seconds < e.compute_seconds / 10);
    const double weights = 4 * whole.chunk_compute_seconds + half.chunk_compute_seconds;
    CHECK(e.compute_seconds == doctest::Approx(weights + attention).epsilon(1e-9));
    CHECK(e.seconds == doctest::Approx(e.compute_seconds + 4 * whole.chunk_exposed_seconds + half.chunk_exposed_seconds)
                           .epsilon(1e-9));

    // twice the prompt: four times the attention, twice the rest
    const cli::PromptEstimate e2 = cli::estimate_prompt(m, plan, b, 2 * n);
    CHECK(e2.attention_seconds / e.attention_seconds == doctest::Approx(4.0).epsilon(1e-3));
    const double rest = e.compute_seconds - e.attention_seconds, rest2 = e2.compute_seconds - e2.attention_seconds;
    CHECK(rest2 / rest == doctest::Approx(2.0).epsilon(0.02));
}

TEST_CASE("time to first token: at 128 GB K3's prompt is one pass, bounded by compute, not by the disk") {
    // The expert cache lends its spare slots to the pass, then the lm_head and the pinned trunk
    // layers (docs/performance.md, "Prefill passes"): a 10,000-token prompt is one pass that
    // borrows only slots and reads each expert once, 32,768 tokens one pass too (it unpins
    // layers, each read once in it; was two passes when only the cache lent); before the passes,
    // 108-token chunks each read most of the 1.45 TB pool (16,330 s at 10,000).
    const cli::ModelSizes m = real_k3();
    const cli::Bandwidths b = machine();
    const MemoryPlan streamed = auto_plan(m, 128);
    REQUIRE(streamed.streaming);
    REQUIRE(streamed.pass_lent_slots > 0);
    const cli::PromptEstimate ten = cli::estimate_prompt(m, streamed, b, 10000);
    CHECK(ten.chunks == 1);
    CHECK(ten.seconds <= 1.1 * ten.compute_seconds);
    CHECK(ten.unpinned_layer_reads == 0);
    CHECK(ten.lm_head_read_seconds == 0);
    const cli::PromptEstimate e = cli::estimate_prompt(m, streamed, b, 32768);
    CHECK(e.chunks == 1);
    CHECK(e.unpinned_layer_reads > 0);
    CHECK(e.read_bound_chunks == 0);
    CHECK(e.seconds <= 1.15 * e.compute_seconds);
    CHECK(e.attention_seconds > 0);
    // A longer prompt never arrives sooner, and more memory never makes it slower.
    CHECK(cli::estimate_prompt(m, streamed, b, 65536).seconds > e.seconds);
    const cli::PromptEstimate resident = cli::estimate_prompt(m, auto_plan(m, 3000), b, 32768);
    CHECK(resident.seconds < e.seconds);
    CHECK(resident.attention_seconds == doctest::Approx(e.attention_seconds).epsilon(1e-9));
}

TEST_CASE("time to first token: at 8 GB K3's 10,000-token prompt takes two passes sized by the lent lm_head, within 1.3x its compute") {
    // auto's 8 GB plan: a 3.19 GB read ring, nothing pinned, 17 expert slots (nothing to lend):
    // before the lm_head was lent, 402-token passes (25 of them, 5.97x the compute); now the
    // 2.35 GB lm_head goes to each pass and is read again before its output product.
    const cli::ModelSizes m = real_k3();
    const cli::Bandwidths b = machine();
    const MemoryPlan plan = auto_plan(m, 8);
    REQUIRE(plan.streaming);
    REQUIRE(plan.trunk.n_pinned == 0);
    CHECK(plan.pass_lm_head_bytes == m.lm_head);
    CHECK(plan.chunk_tokens > 4000);
    const cli::PromptEstimate ten = cli::estimate_prompt(m, plan, b, 10000);
    CHECK(ten.chunks == 2);
    CHECK(ten.seconds <= 1.3 * ten.compute_seconds);
    // the lm_head's read again is charged, once a pass
    CHECK(ten.lm_head_read_seconds == doctest::Approx(2 * double(m.lm_head) / 7e9).epsilon(1e-9));
    CHECK(ten.unpinned_layer_reads == 0);
    // and the 40,000-token prompt at 128 GB within 1.15x its compute
    const cli::PromptEstimate forty = cli::estimate_prompt(m, auto_plan(m, 128), b, 40000);
    CHECK(forty.seconds <= 1.15 * forty.compute_seconds);
}
