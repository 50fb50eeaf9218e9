// The golden prompts (tests/fixtures/golden, the independent numpy reference's) at every pass
// size and budget (docs/performance.md, "Prefill passes"): passes of 1, 2, 3, 5 and 7 tokens and
// the whole sequence in one, resident, streamed through the smallest trunk ring, or the trunk
// pinned, with an expert cache that holds only the prefill pipeline's two batches (nothing to
// lend) or the whole pool lending its slots to the pass, and passes sized by the lm_head and the
// pinned trunk layers lent to them. Every configuration gives the same
// bytes: every position's logits and the greedy ids, which are the golden's (the logits within
// the reference's bound, golden_tolerance.h).
//
// And the costs no output shows (a mistake there changes no bit): the passes a sequence takes
// (each reads the weights once) and the expert reads a pass waits for (at most a layer's first
// batch: the later ones are read ahead). The snapshots a prompt resumed off the pass grid leaves
// at each multiple of the pass: test_prefill_pass.cpp.
#include <doctest/doctest.h>

#include <numeric>

#include "model/golden_fixture.h"
#include "model/golden_tolerance.h"
#include "model/model_test_util.h"
#include "store/memory_plan.h"
#include "weights/checkpoint.h"
#include "weights/chunk_size.h"

using namespace k3;
using namespace k3::test;

namespace {

// What the configurations are made of, from the checkpoint's footprint.
struct Sizes {
    int64_t trunk_all = 0, trunk_edge = 0, pool = 0, slot = 0;
    int pipeline_slots = 0;  // the pipeline's two batches (2 x top-k + 8), which the cache never lends
    int moe_layers = 0;
    PassCost pass;
};

Sizes sizes_of(const std::string& dir) {
    const Checkpoint ckpt = open_checkpoint(dir);
    const io::ModelFootprint f = io::footprint_of(ckpt);
    Sizes s;
    s.trunk_all = std::accumulate(f.layer_alloc_bytes.begin(), f.layer_alloc_bytes.end(), int64_t(0));
    s.trunk_edge = io::smallest_trunk_budget(f.layer_alloc_bytes);
    s.slot = f.expert_slot_bytes;
    s.pool = f.routed_experts * f.expert_slot_bytes;
    s.pipeline_slots = 2 * f.experts_per_token + 8;
    for (int il = 0; il < ckpt.config.num_hidden_layers; ++il) s.moe_layers += ckpt.config.is_dense(il) ? 0 : 1;
    s.pass = f.pass;
    return s;
}

struct Config {
    std::string name;
    MemoryOptions memory;
    int pass_tokens = 0;    // the pass the plan must give (0: at least the whole sequence; -1: at least 2 tokens)
    bool pipelined = false; // streamed experts with the pipeline's room: reads go ahead
};

std::vector<Config> configs(const Sizes& s) {
    const auto own = [&](int tokens) { return (double(s.pass.bytes(tokens)) + 0.5) / 1e6; };
    const auto gb = [](int64_t bytes) { return double(bytes) / io::kGB; };
    const auto memory = [](double trunk_gb, double cache_gb, double prefill_mb, int pass_tokens = 0) {
        MemoryOptions m;
        m.trunk_gb = trunk_gb;
        m.cache_gb = cache_gb;
        m.prefill_mb = prefill_mb;
        m.pass_tokens = pass_tokens;
        m.prompt_cache_gb = 0;
        return m;
    };
    const double ring = gb(s.trunk_edge + 4096), pinned = gb(s.trunk_all);
    const double two_batches = gb(int64_t(s.pipeline_slots) * s.slot + 4096), pool = gb(s.pool);
    return {
        {"resident, one pass", memory(-1, -1, -1), 0, false},
        {"resident, passes of 1 token", memory(-1, -1, own(1)), 1, false},
        {"resident, passes of 2 tokens", memory(-1, -1, own(2)), 2, false},
        {"resident, passes of 5 tokens", memory(-1, -1, own(5)), 5, false},
        {"trunk ring, pipeline cache, one pass", memory(ring, two_batches, 1e3), 0, true},
        {"trunk ring, pipeline cache, passes of 2 tokens", memory(ring, two_batches, own(2), 2), 2, true},
        {"trunk ring, pipeline cache, passes of 7 tokens", memory(ring, two_batches, own(7), 7), 7, true},
        {"trunk pinned, pipeline cache, passes of 3 tokens", memory(pinned, two_batches, own(3), 3), 3, true},
        {"trunk pinned, the pool cached, a one-token own budget: passes sized by the lent slots",
         memory(pinned, pool, own(1)), 0, false},
        // lent memory sizes the pass (docs/performance.md, "Prefill passes"): the lm_head, which
        // the last pass reads again before its output product, and pinned trunk layers, each read
        // once a pass; -1: whatever the plan gives, at least two tokens
        {"trunk ring, pipeline cache, a one-token own budget: passes sized by the lent lm_head",
         memory(ring, two_batches, own(1)), -1, true},
        {"trunk pinned, pipeline cache, a one-token own budget: passes sized by the lm_head and unpinned layers",
         memory(pinned, two_batches, own(1)), -1, true},
    };
}

std::unique_ptr<Engine> engine_for(const std::string& dir, const MemoryOptions& memory) {
    EngineOptions o;
    o.model_dir = dir;
    o.threads = 2;
    o.memory = memory;
    return Engine::load(o);
}

void check_passes(const std::string& preset) {
    const Golden g = load_golden(preset);
    const std::string dir = cached_model(preset, g.seed);
    const Sizes sizes = sizes_of(dir);
    const size_t V = size_t(g.vocab), n = g.greedy.size();
    std::vector<float> first_all, first_prompt;
    for (const Config& c : configs(sizes)) {
        CAPTURE(c.name);
        auto e = engine_for(dir, c.memory);
        REQUIRE(e->info().n_vocab == g.vocab);
        const int T = e->max_step_tokens();
        if (c.pass_tokens > 0) REQUIRE(T == c.pass_tokens);
        else if (c.pass_tokens < 0) REQUIRE(T >= 2);
        else REQUIRE(T >= int(n));
        MESSAGE(preset << ", " << c.name << ": " << e->info().memory_plan);

        // Every position's logits of the golden sequence: the same bytes everywhere, the
        // golden's within the bound, in ceil(n / T) passes.
        const EngineStats before = e->stats();
        std::vector<float> all;
        REQUIRE(e->new_session(int(n))->prefill_all_logits(g.greedy, all).ok());
        const EngineStats after = e->stats();
        const uint64_t passes = (n + size_t(T) - 1) / size_t(T);
        CHECK(after.passes - before.passes == passes);
        if (first_all.empty()) {
            first_all = all;
            for (size_t t = 0; t < n; ++t) {
                CHECK_MESSAGE(rel_l2(&all[t * V], &g.logits[t * V], int(V)) <= golden_rel_l2_bound(preset), "position " << t);
                CHECK_MESSAGE(argmax(std::span(all).subspan(t * V, V)) == g.argmax[t], "position " << t);
            }
        }
        CHECK(same_bits(all, first_all));
        if (c.pipelined) {
            // a layer's first batch at most waits for reads of its own (docs/performance.md,
            // "Prefill pipeline"); reading a later batch on demand waits more
            const uint64_t waits = after.expert_read_waits - before.expert_read_waits;
            MESSAGE(passes << " pass(es) of up to " << T << " tokens: " << waits << " expert read waits");
            CHECK(waits <= passes * uint64_t(sizes.moe_layers));
        }

        // The prompt, then greedy decoding: the golden ids, the prompt's logits the same bytes.
        auto s = e->new_session(int(n));
        CancelFlag cancel{false};
        REQUIRE(s->sync(g.prompt, cancel).ok());
        if (first_prompt.empty()) first_prompt.assign(s->logits().begin(), s->logits().end());
        CHECK(same_bits(s->logits(), first_prompt));
        std::vector<int32_t> seq = g.prompt;
        while (seq.size() < n) {
            seq.push_back(argmax(s->logits()));
            if (seq.size() < n) REQUIRE(s->append(seq.back(), cancel).ok());
        }
        CHECK(seq == g.greedy);
    }
}

}  // namespace

TEST_CASE("golden across passes: tiny, the same bytes at every pass size and budget") { check_passes("tiny"); }
TEST_CASE("golden across passes: tiny-wide, the same bytes at every pass size and budget") { check_passes("tiny-wide"); }
