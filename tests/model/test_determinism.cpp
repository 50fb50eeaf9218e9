// Bit-identity of the forward pass (docs/model.md "Numerics"): the same logits bits for 1, 2 and 3
// threads, from run to run, and between one prefill and the same tokens fed one at a time
// (and a prefill followed by decode steps), for the selected kernel set and for scalar.
#include <doctest/doctest.h>

#include "model/activations.h"
#include "weights/chunk_size.h"
#include "weights/checkpoint.h"
#include "model/model_test_util.h"

using namespace k3;
using namespace k3::test;

namespace {

constexpr int kSeed = 3;
constexpr int kPass = 64;  // tokens of a prefill pass here (the fixtures' default holds the whole context)

// An engine whose prefill passes hold kPass tokens.
std::unique_ptr<Engine> load_with_passes(const std::string& dir, int threads, const std::string& kernels) {
    EngineOptions o;
    o.model_dir = dir;
    o.threads = threads;
    o.kernels = kernels;
    const ModelConfig cfg = open_checkpoint(dir).config;
    o.memory.prefill_mb = (double(pass_cost(cfg).bytes(kPass)) + 0.5) / 1e6;
    return Engine::load(o);
}

std::vector<float> prefill_logits(Engine& e, const std::vector<int32_t>& ids) {
    auto s = e.new_session(int(ids.size()));
    std::vector<float> all;
    REQUIRE(s->prefill_all_logits(ids, all).ok());
    return all;
}

void check_preset(const std::string& preset, const std::string& kernels) {
    const std::string dir = cached_model(preset, kSeed);
    // Longer than one prefill pass, so a prompt in passes is part of what is compared.
    const int kLength = kPass + 6;
    auto e1 = load_with_passes(dir, 1, kernels);
    REQUIRE(e1->max_step_tokens() == kPass);
    const int V = e1->info().n_vocab;
    const auto ids = test_prompt(kLength, V);
    const std::vector<float> ref = prefill_logits(*e1, ids);
    INFO("preset " << preset << ", kernels " << e1->info().kernels);

    SUBCASE("threads 2 and 3 give the bits of 1") {
        for (int threads : {2, 3}) {
            auto e = load_with_passes(dir, threads, kernels);
            CHECK_MESSAGE(same_bits(prefill_logits(*e, ids), ref), "threads=" << threads);
        }
    }
    SUBCASE("run to run") {
        CHECK(same_bits(prefill_logits(*e1, ids), ref));
        auto again = load_with_passes(dir, 1, kernels);
        CHECK(same_bits(prefill_logits(*again, ids), ref));
    }
    SUBCASE("one token at a time equals the prefill at every position (first 40)") {
        auto e2 = load_with_passes(dir, 2, kernels);
        auto s = e2->new_session(kLength);
        CancelFlag cancel{false};
        REQUIRE(s->sync(std::span(ids).first(1), cancel).ok());
        CHECK(same_bits(s->logits(), std::span(ref).first(size_t(V))));
        for (int t = 1; t < 40; ++t) {
            REQUIRE(s->append(ids[size_t(t)], cancel).ok());
            CHECK_MESSAGE(same_bits(s->logits(), std::span(ref).subspan(size_t(t) * V, size_t(V))), "position " << t);
        }
    }
    SUBCASE("prefill then decode, across the chunk boundary, equals the prefill") {
        auto s = e1->new_session(kLength);
        CancelFlag cancel{false};
        const int prompt = kLength - 10;  // the decoded positions cross the prefill's chunk boundary
        REQUIRE(s->sync(std::span(ids).first(prompt), cancel).ok());
        CHECK(same_bits(s->logits(), std::span(ref).subspan(size_t(prompt - 1) * V, size_t(V))));
        for (int t = prompt; t < kLength; ++t) {
            REQUIRE(s->append(ids[size_t(t)], cancel).ok());
            CHECK_MESSAGE(same_bits(s->logits(), std::span(ref).subspan(size_t(t) * V, size_t(V))), "position " << t);
        }
    }
}

}  // namespace

TEST_CASE("determinism: tiny, selected kernels") { check_preset("tiny", ""); }
TEST_CASE("determinism: tiny, scalar kernels") { check_preset("tiny", "scalar"); }
TEST_CASE("determinism: tiny-wide, selected kernels") { check_preset("tiny-wide", ""); }
TEST_CASE("determinism: tiny-wide, scalar kernels") { check_preset("tiny-wide", "scalar"); }
