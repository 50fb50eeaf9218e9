// The trace hook (engine/model/trace.h): the forward pass's named intermediates match the numpy
// reference's step by step, a planted mistake is reported at the step it first touches, and
// attaching a trace changes no bit of the logits.
#include <doctest/doctest.h>

#include "model/golden_tolerance.h"
#include "model/trace_compare.h"

using namespace k3;
using namespace k3::test;

namespace {

// Every step within 1.3x the worst measured (golden_tolerance.h).
constexpr double kMaxRelL2 = kTraceRelL2Tiny;
constexpr int kSeed = 7;  // the tiny golden's seed

std::string trace_dir() { return k3::test::scratch_dir("trace").string(); }

int first_layer(const ModelConfig& c, bool mla) {
    for (int il = 0; il < c.num_hidden_layers; ++il)
        if (c.is_mla(il) == mla) return il;
    return -1;
}

}  // namespace

TEST_CASE("trace: every named intermediate matches the reference, step by step") {
    const std::string dir = cached_model("tiny", kSeed);
    auto e = load_engine(dir, 2);
    const std::vector<int32_t> ids = test_prompt(12, e->info().n_vocab);
    std::vector<float> logits;
    AttachedTrace trace(*e);
    REQUIRE(e->new_session(int(ids.size()))->prefill_all_logits(ids, logits).ok());

    const ModelConfig& c = static_cast<EngineImpl&>(*e).config();
    // embed, five steps per layer (attn_in, attn_out, ffn_in, mlp_out or moe_out, out), result_norm
    REQUIRE(trace.recorder.steps.size() == size_t(2 + 5 * c.num_hidden_layers));
    CHECK(trace.recorder.steps.front().name == "embed");
    CHECK(trace.recorder.steps[1].name == "blk.0.attn_in");
    CHECK(trace.recorder.steps.back().name == "result_norm");
    for (const TraceStep& s : trace.recorder.steps) CHECK(s.values.size() == ids.size() * size_t(c.hidden_size));

    double worst = 0;
    const std::string diverged =
        first_divergence(trace.recorder.steps, reference_trace(dir, ids, trace_dir()), kMaxRelL2, &worst);
    CHECK_MESSAGE(diverged.empty(), "the engine first parts from the reference at " << diverged);
    MESSAGE("worst rel-L2 over " << trace.recorder.steps.size() << " steps = " << worst);
}

TEST_CASE("trace: a planted mistake is named at the first step it changes") {
    const std::string dir = cached_model("tiny", kSeed);
    auto e = load_engine(dir, 2);
    const ModelConfig& c = static_cast<EngineImpl&>(*e).config();
    const std::vector<int32_t> ids = test_prompt(12, e->info().n_vocab);
    std::vector<float> logits;
    AttachedTrace trace(*e);
    REQUIRE(e->new_session(int(ids.size()))->prefill_all_logits(ids, logits).ok());

    struct Planted {
        const char* mutation;
        std::string first_step;
    };
    const Planted planted[] = {
        {"conv_without_silu", trace_name("attn_out", first_layer(c, false))},          // KDA
        {"mla_norm_eps_1e5", trace_name("attn_out", first_layer(c, true))},            // MLA
        {"router_bias_in_weights", trace_name("moe_out", c.first_k_dense_replace)},    // MoE
    };
    for (const Planted& p : planted) {
        INFO("mutation " << p.mutation);
        const std::string diverged = first_divergence(
            trace.recorder.steps, reference_trace(dir, ids, trace_dir(), p.mutation), kMaxRelL2);
        CHECK(diverged.substr(0, diverged.find(' ')) == p.first_step);
    }
}

TEST_CASE("trace: attaching a trace changes no bit of the logits") {
    auto e = load_engine(cached_model("tiny", kSeed), 2);
    const std::vector<int32_t> ids = test_prompt(20, e->info().n_vocab, 3);
    std::vector<float> plain, traced;
    REQUIRE(e->new_session(int(ids.size()))->prefill_all_logits(ids, plain).ok());
    {
        AttachedTrace trace(*e);
        REQUIRE(e->new_session(int(ids.size()))->prefill_all_logits(ids, traced).ok());
        CHECK(!trace.recorder.steps.empty());
    }
    CHECK(same_bits(plain, traced));
}
