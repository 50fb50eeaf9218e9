// Prefill passes (docs/performance.md, "Prefill passes"): a pass goes through the layers tile
// by tile, and the routed experts run expert by expert over the whole pass in groups of rows.
// Neither the pass, the tile nor the group size may change a bit: the reference is the same
// prompt evaluated one token at a time by a resident engine. The tiny fixtures are far smaller
// than a tile, so the tests narrow the tiles and groups (Activations::narrow_tiles) until they
// cut the prompt, a sequence of a batch, and an expert's tokens.
#include <doctest/doctest.h>

#include <algorithm>

#include "api/engine_impl.h"
#include "model/model_test_util.h"
#include "weights/chunk_size.h"

using namespace k3;
using namespace k3::test;

namespace {

constexpr int kSeed = 9;
constexpr int kPrompt = 41;
constexpr int kDecode = 4;

// An engine (without a prompt cache unless asked) whose passes hold `pass_tokens` tokens (0: the default).
std::unique_ptr<Engine> engine_with_pass(const std::string& dir, int pass_tokens, int threads = 2,
                                         bool prompt_cache = false) {
    EngineOptions o;
    o.model_dir = dir;
    o.threads = threads;
    o.memory.prompt_cache_gb = prompt_cache ? 1.0 : 0.0;
    if (pass_tokens > 0) {
        const ModelConfig cfg = open_checkpoint(dir).config;
        o.memory.prefill_mb = (double(pass_cost(cfg).bytes(pass_tokens)) + 0.5) / 1e6;
    }
    return Engine::load(o);
}

Activations& activations(Engine& e) { return static_cast<EngineImpl&>(e).model().act; }

// Logits after the prompt and after each greedy step.
std::vector<std::vector<float>> run(Engine& e, const std::vector<int32_t>& prompt) {
    auto s = e.new_session(128);
    CancelFlag cancel{false};
    REQUIRE(s->sync(prompt, cancel).ok());
    std::vector<std::vector<float>> out{{s->logits().begin(), s->logits().end()}};
    for (int i = 0; i < kDecode; ++i) {
        REQUIRE(s->append(argmax(s->logits()), cancel).ok());
        out.emplace_back(s->logits().begin(), s->logits().end());
    }
    return out;
}

}  // namespace

TEST_CASE("a pass gives the bits of one token at a time, whatever its size, tiles and expert groups") {
    for (const char* preset : {"tiny", "tiny-wide"}) {
        CAPTURE(std::string(preset));
        const std::string dir = cached_model(preset, kSeed);
        auto one = engine_with_pass(dir, 1);
        REQUIRE(one->max_step_tokens() == 1);
        const std::vector<int32_t> prompt = test_prompt(kPrompt, one->info().n_vocab);
        const auto expect = run(*one, prompt);

        struct Case {
            int pass, tile;
            int64_t rows;
        };
        // whole-prompt passes cut into tiles of 1, 2, 5 and 16 tokens and groups of 1, 3, 7 and
        // 40 expert rows; passes of 7 and 16 tokens (the prompt in 6 and 3 passes) with tiles
        // that do not divide them
        const Case cases[] = {{kPrompt, 1, 1},  {kPrompt, 2, 3},    {kPrompt, 5, 7},   {kPrompt, 16, 40},
                              {kPrompt, 1000, 1 << 20}, {7, 3, 5}, {16, 5, 2},  {16, 1000, 1 << 20}};
        for (const Case& c : cases) {
            CAPTURE(c.pass);
            CAPTURE(c.tile);
            CAPTURE(c.rows);
            auto e = engine_with_pass(dir, c.pass, 3);
            REQUIRE(e->max_step_tokens() == c.pass);
            activations(*e).narrow_tiles(c.tile, c.rows);
            const auto got = run(*e, prompt);
            REQUIRE(got.size() == expect.size());
            for (size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(same_bits(got[i], expect[i]), "step " << i);
        }
    }
}

TEST_CASE("a batch cut into tiles across its sequences, and every token's logits, keep their bits") {
    const std::string dir = cached_model("tiny", kSeed);
    auto solo = engine_with_pass(dir, 1);
    const int V = solo->info().n_vocab;
    const std::vector<std::vector<int32_t>> prompts = {test_prompt(11, V, 1), test_prompt(3, V, 2), test_prompt(9, V, 3)};
    std::vector<std::vector<float>> expect;
    for (const auto& p : prompts) expect.push_back(run(*solo, p)[0]);
    std::vector<float> every_expect;
    REQUIRE(solo->new_session(64)->prefill_all_logits(prompts[0], every_expect).ok());

    auto e = engine_with_pass(dir, 32);
    activations(*e).narrow_tiles(4, 5);  // tiles of 4 rows: sequence 0 ends inside the third
    std::vector<std::unique_ptr<Session>> s;
    std::vector<Engine::StepItem> items;
    for (const auto& p : prompts) {
        s.push_back(e->new_session(64));
        REQUIRE(s.back()->begin_prompt(p, nullptr).ok());
        items.push_back({s.back().get(), s.back()->next_prompt_chunk(32)});
    }
    REQUIRE(e->step(items).ok());
    for (size_t i = 0; i < s.size(); ++i) {
        s[i]->prompt_chunk_done();
        CHECK_MESSAGE(same_bits(s[i]->logits(), expect[i]), "sequence " << i);
    }
    std::vector<float> every;
    REQUIRE(e->new_session(64)->prefill_all_logits(prompts[0], every).ok());
    CHECK(same_bits(every, every_expect));
}

TEST_CASE("a prompt resumed off the pass grid leaves a snapshot at each multiple of the pass") {
    // Passes of T tokens (2, 3 and 8); a first prompt of 5 tokens leaves the next one to resume
    // at 5, off the grid: its passes end at each multiple of T (and at its end, 37), each leaving
    // a snapshot, so a later prompt that shares 29 of its tokens resumes at the last multiple at
    // or below 29 (28, 27, 24), not at 5 (docs/performance.md, "Prefill passes").
    const std::string dir = cached_model("tiny", kSeed);
    for (const int T : {2, 3, 8}) {
        CAPTURE(T);
        auto e = engine_with_pass(dir, T, 2, /*prompt_cache=*/true);
        REQUIRE(e->max_step_tokens() == T);
        const int V = e->info().n_vocab;
        const std::vector<int32_t> long_prompt = test_prompt(37, V, 5);
        CancelFlag cancel{false};
        int reused = -1;
        REQUIRE(e->new_session(64)->sync(std::span(long_prompt).first(5), cancel, &reused).ok());
        REQUIRE(e->new_session(64)->sync(long_prompt, cancel, &reused).ok());
        CHECK(reused == 5);
        std::vector<int> at;
        for (const PromptCacheEntry& entry : e->prompt_cache_entries()) at.push_back(entry.tokens);
        for (int want = T; want <= 37; want += T)
            if (want > 5) CHECK_MESSAGE(std::count(at.begin(), at.end(), want) == 1, "snapshot at " << want);
        CHECK(std::count(at.begin(), at.end(), 37) == 1);
        std::vector<int32_t> shares(long_prompt.begin(), long_prompt.begin() + 29);
        const std::vector<int32_t> tail = test_prompt(6, V, 9);
        shares.insert(shares.end(), tail.begin(), tail.end());
        auto later = e->new_session(64);
        REQUIRE(later->sync(shares, cancel, &reused).ok());
        CHECK(reused == 29 / T * T);
        CHECK(same_bits(later->logits(), cold_logits_of(dir, shares)));
    }
}

TEST_CASE("decode steps between the layers of a pass leave the pass's bits and give the decoding sequence its own") {
    // (docs/performance.md, "Other streams during a prefill") The pass's rows wait in the
    // activations while a decode step of another session runs in the side ones; resident and
    // streamed (the trunk through the ring, a small expert cache lending slots to the pass).
    const std::string dir = cached_model("tiny", kSeed);
    auto ref = engine_with_pass(dir, 0);
    const int V = ref->info().n_vocab;
    const int n_layers = ref->info().n_layers;
    const std::vector<int32_t> decode_prompt = test_prompt(6, V, 5), long_prompt = test_prompt(kPrompt, V, 6);
    const auto expect_decode = run(*ref, decode_prompt);
    const auto expect_long = run(*ref, long_prompt);
    for (const bool streamed : {false, true}) {
        CAPTURE(streamed);
        EngineOptions o;
        o.model_dir = dir;
        o.threads = 2;
        o.memory.prompt_cache_gb = 0;
        o.memory.prefill_mb = (double(pass_cost(open_checkpoint(dir).config).bytes(16)) + 0.5) / 1e6;
        o.memory.pass_tokens = 16;  // (a streamed pass would be sized by what it borrows too)
        if (streamed) o.memory.trunk_gb = o.memory.cache_gb = 0.001;
        auto e = Engine::load(o);
        auto d = e->new_session(128), p = e->new_session(128);
        CancelFlag cancel{false};
        REQUIRE(d->sync(decode_prompt, cancel).ok());
        REQUIRE(same_bits(d->logits(), expect_decode[0]));
        // a decode step of `d` before each layer of the first passes (kDecode of them), each
        // compared with the solo run's logits
        int steps = 0, same = 0, failed = 0;
        std::vector<int> layers;
        const Engine::BetweenLayers decode_step = [&](int il) {
            layers.push_back(il);
            if (steps >= kDecode) return;
            const int32_t next[1] = {argmax(d->logits())};
            const Engine::StepItem item{d.get(), next};
            if (!e->step(std::span<const Engine::StepItem>(&item, 1)).ok()) ++failed;
            ++steps;
            if (same_bits(d->logits(), expect_decode[size_t(steps)])) ++same;
        };
        int reused = -1, passes = 0;
        REQUIRE(p->begin_prompt(long_prompt, &reused).ok());
        while (p->prompt_pending() > 0) {
            const Engine::StepItem item{p.get(), p->next_prompt_chunk(size_t(e->max_step_tokens()))};
            REQUIRE(e->step_between_layers(std::span<const Engine::StepItem>(&item, 1), decode_step).ok());
            p->prompt_chunk_done();
            ++passes;
        }
        CHECK(passes == 3);
        CHECK(failed == 0);
        CHECK(steps == kDecode);
        CHECK(same == kDecode);
        REQUIRE(layers.size() == size_t(passes * n_layers));
        for (size_t i = 0; i < layers.size(); ++i) CHECK(layers[i] == int(i) % n_layers);
        // the prompt's logits, and its decode steps after it, are the solo run's
        CHECK(same_bits(p->logits(), expect_long[0]));
        for (int i = 0; i < kDecode; ++i) {
            REQUIRE(p->append(argmax(p->logits()), cancel).ok());
            CHECK(same_bits(p->logits(), expect_long[size_t(i + 1)]));
        }

        // A cancel raised between layers (after a decode step there) stops the pass at that
        // layer: the step answers Cancelled and leaves the prompt's session at a consistent
        // prefix; the decode step stands, and the prompt read again gives the same bits.
        auto d2 = e->new_session(128), p2 = e->new_session(128);
        REQUIRE(d2->sync(decode_prompt, cancel).ok());
        CancelFlag stop{false};
        bool stepped = false;
        const Engine::BetweenLayers step_then_cancel = [&](int il) {
            if (il != n_layers / 2) return;
            const int32_t next[1] = {argmax(d2->logits())};
            const Engine::StepItem item{d2.get(), next};
            stepped = e->step(std::span<const Engine::StepItem>(&item, 1)).ok();
            stop = true;
        };
        REQUIRE(p2->begin_prompt(long_prompt, &reused).ok());
        const Engine::StepItem first{p2.get(), p2->next_prompt_chunk(size_t(e->max_step_tokens())), false, &stop};
        CHECK(e->step_between_layers(std::span<const Engine::StepItem>(&first, 1), step_then_cancel).code ==
              StatusCode::Cancelled);
        CHECK(stepped);
        CHECK(same_bits(d2->logits(), expect_decode[1]));
        CHECK(p2->tokens().empty());
        REQUIRE(p2->sync(long_prompt, cancel).ok());
        CHECK(same_bits(p2->logits(), expect_long[0]));
    }
}
