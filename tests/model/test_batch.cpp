// Several sequences in one engine step, and the shared prompt cache: each sequence gets the
// logits bits of running alone (prefill chunks of different lengths interleaved with decode
// steps, a member dropped mid-prefill); a prompt resumed from the cache (identical prompt,
// shared prefix, a conversation continued after others ran, an edited last message) gives the
// bits of a cold run; the cache stays within its budget by evicting while sessions run.
#include <doctest/doctest.h>

#include "model/model_test_util.h"

using namespace k3;
using namespace k3::test;

namespace {

constexpr int kSeed = 9;
constexpr int kDecode = 5;

std::string model_dir() { return cached_model("tiny", kSeed); }

// Logits after the prompt and after each of kDecode greedy steps, running alone.
std::vector<std::vector<float>> solo_run(Engine& e, const std::vector<int32_t>& prompt) {
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

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::vector<float> cold_logits(const std::vector<int32_t>& ids) { return cold_logits_of(model_dir(), ids); }

}  // namespace

TEST_CASE("batch: four sequences of different lengths in one step give the bits of each alone") {
    auto solo = load_engine(model_dir(), 2, "", 0);
    auto e = load_engine(model_dir(), 3, "", 0);
    const int V = e->info().n_vocab;
    const std::vector<std::vector<int32_t>> prompts = {test_prompt(11, V, 1), test_prompt(3, V, 2),
                                                       test_prompt(17, V, 3), test_prompt(6, V, 4)};
    std::vector<std::vector<std::vector<float>>> expect;
    for (const auto& p : prompts) expect.push_back(solo_run(*solo, p));

    for (const bool drop_one : {false, true}) {  // sequence 2 leaves after its first chunk
        INFO("drop_one " << drop_one);
        std::vector<std::unique_ptr<Session>> s;
        for (const auto& p : prompts) {
            s.push_back(e->new_session(128));
            int reused = -1;
            REQUIRE(s.back()->begin_prompt(p, &reused).ok());
            CHECK(reused == 0);
        }
        // Prefill in chunks of at most 4 tokens per sequence, then decode; sequences that finished
        // their prompt decode while the others still prefill.
        std::vector<int> decoded(prompts.size(), -1);  // -1: prefilling; k: logits after k steps checked
        std::vector<bool> active(prompts.size(), true);
        for (int round = 0; round < 40; ++round) {
            std::vector<Engine::StepItem> items;
            std::vector<std::vector<int32_t>> next(prompts.size());
            for (size_t i = 0; i < s.size(); ++i) {
                if (!active[i]) continue;
                if (decoded[i] < 0) {
                    items.push_back({s[i].get(), s[i]->next_prompt_chunk(4)});
                } else if (decoded[i] < kDecode) {
                    next[i] = {argmax(s[i]->logits())};
                    items.push_back({s[i].get(), next[i]});
                }
            }
            if (items.empty()) break;
            REQUIRE(e->step(items).ok());
            for (size_t i = 0; i < s.size(); ++i) {
                if (!active[i]) continue;
                if (decoded[i] < 0) {
                    s[i]->prompt_chunk_done();
                    if (s[i]->prompt_pending() == 0) {
                        decoded[i] = 0;
                        CHECK_MESSAGE(same_bits(s[i]->logits(), expect[i][0]), "sequence " << i << " prompt");
                    }
                    if (drop_one && i == 2) active[i] = false;
                } else if (decoded[i] < kDecode) {
                    ++decoded[i];
                    CHECK_MESSAGE(same_bits(s[i]->logits(), expect[i][size_t(decoded[i])]),
                                  "sequence " << i << " step " << decoded[i]);
                }
            }
        }
        for (size_t i = 0; i < s.size(); ++i)
            if (!(drop_one && i == 2)) CHECK(decoded[i] == kDecode);
    }
}

TEST_CASE("batch: a step refuses bad input without touching any session") {
    auto e = load_engine(model_dir(), 2, "", 0);
    const int V = e->info().n_vocab;
    auto a = e->new_session(16), b = e->new_session(16);
    CancelFlag cancel{false};
    REQUIRE(a->sync(test_prompt(4, V, 1), cancel).ok());
    const std::vector<int32_t> one{1}, bad{V};
    CHECK(e->step(std::vector<Engine::StepItem>{{a.get(), one}, {a.get(), one}}).code == StatusCode::InvalidArgument);
    CHECK(e->step(std::vector<Engine::StepItem>{{a.get(), one}, {b.get(), bad}}).code == StatusCode::InvalidArgument);
    const std::vector<int32_t> too_long = test_prompt(13, V, 2);
    CHECK(e->step(std::vector<Engine::StepItem>{{a.get(), too_long}}).code == StatusCode::ContextFull);
    CHECK(a->tokens().size() == 4);
    CHECK(b->tokens().empty());
}

TEST_CASE("prompt cache: resumes give the bits of a cold run") {
    auto e = load_engine(model_dir(), 2, "", 0.05);
    const int V = e->info().n_vocab;
    CancelFlag cancel{false};
    const auto system = test_prompt(40, V, 7);
    const auto u1 = test_prompt(6, V, 8), u2 = test_prompt(5, V, 9), u3 = test_prompt(7, V, 10);
    int reused = -1;

    auto s1 = e->new_session(256);
    REQUIRE(s1->sync(concat(system, u1), cancel, &reused).ok());
    CHECK(reused == 0);

    SUBCASE("the same prompt again, in another session: nothing evaluated") {
        auto s2 = e->new_session(256);
        const uint64_t before = e->stats().tokens_evaluated;
        REQUIRE(s2->sync(concat(system, u1), cancel, &reused).ok());
        CHECK(reused == int(system.size() + u1.size()));
        CHECK(e->stats().tokens_evaluated == before);
        CHECK(same_bits(s2->logits(), cold_logits(concat(system, u1))));
    }
    SUBCASE("a shared system prompt: the second user places a snapshot where they part, the third resumes there") {
        auto s2 = e->new_session(256);
        REQUIRE(s2->sync(concat(system, u2), cancel, &reused).ok());
        CHECK(same_bits(s2->logits(), cold_logits(concat(system, u2))));
        auto s3 = e->new_session(256);
        REQUIRE(s3->sync(concat(system, u3), cancel, &reused).ok());
        CHECK(reused == int(system.size()));
        CHECK(same_bits(s3->logits(), cold_logits(concat(system, u3))));
        const EngineStats st = e->stats();
        CHECK(st.prompt_cache_hits >= 1);
        CHECK(st.prompt_cache_tokens_saved >= system.size());
        CHECK(st.prompt_cache_bytes > 0);
        CHECK(st.prompt_cache_bytes <= st.prompt_cache_budget);
    }
    SUBCASE("a conversation continued after other sessions ran resumes after its generated tokens") {
        std::vector<int32_t> convo = concat(system, u1);
        for (int i = 0; i < 4; ++i) {
            const int32_t id = argmax(s1->logits());
            REQUIRE(s1->append(id, cancel).ok());
            convo.push_back(id);
        }
        s1->remember();
        for (int k = 0; k < 3; ++k) {
            auto other = e->new_session(256);
            REQUIRE(other->sync(test_prompt(30, V, 20 + k), cancel).ok());
        }
        auto s2 = e->new_session(256);
        const auto next = concat(convo, u2);
        REQUIRE(s2->sync(next, cancel, &reused).ok());
        CHECK(reused == int(convo.size()));
        CHECK(same_bits(s2->logits(), cold_logits(next)));
    }
    SUBCASE("an edited last message resumes from before the edit") {
        auto edited = concat(system, u1);
        edited.back() = (edited.back() + 1) % 200;
        auto s2 = e->new_session(256);
        REQUIRE(s2->sync(edited, cancel, &reused).ok());
        CHECK(same_bits(s2->logits(), cold_logits(edited)));
        auto again = edited;
        again.back() = (again.back() + 1) % 200;
        auto s3 = e->new_session(256);
        REQUIRE(s3->sync(again, cancel, &reused).ok());
        CHECK(reused == int(edited.size()) - 1);  // the snapshot placed where the edit parted
        CHECK(same_bits(s3->logits(), cold_logits(again)));
    }
}

TEST_CASE("prompt cache: evicts the least recently used states to stay within its budget") {
    // Measure one snapshot's size, then give a budget of about three.
    const int64_t one = one_snapshot_bytes(model_dir(), 20);
    REQUIRE(one > 0);
    auto e = load_engine(model_dir(), 2, "", double(one) * 3.5 / 1e9);
    const int V = e->info().n_vocab;
    CancelFlag cancel{false};
    auto a = e->new_session(64), b = e->new_session(64);
    for (int k = 0; k < 8; ++k) {
        // two sessions take turns, so eviction happens while the other holds state
        Session& s = k % 2 ? *b : *a;
        const auto p = test_prompt(20, V, 30 + k);
        int reused = -1;
        REQUIRE(s.sync(p, cancel, &reused).ok());
        CHECK(same_bits(s.logits(), cold_logits(p)));
        const EngineStats st = e->stats();
        CHECK(st.prompt_cache_bytes <= st.prompt_cache_budget);
    }
    const EngineStats st = e->stats();
    CHECK(st.prompt_cache_evictions >= 4);
    CHECK(st.prompt_cache_snapshots >= 2);
    CHECK(st.prompt_cache_snapshots <= 3);
    // the most recent prompt is still there, the first one is gone
    int reused = -1;
    auto c = e->new_session(64);
    REQUIRE(c->sync(test_prompt(20, V, 37), cancel, &reused).ok());
    CHECK(reused == 20);
    REQUIRE(c->sync(test_prompt(20, V, 30), cancel, &reused).ok());
    CHECK(reused == 0);
}

TEST_CASE("speculative verify: drafts checked in one step, the rejected ones undone, give the bits of plain decoding") {
    auto e = load_engine(model_dir(), 2, "", 0);
    const int V = e->info().n_vocab;
    CancelFlag cancel{false};
    const auto prompt = test_prompt(13, V, 5);
    // plain greedy: tokens g[0..11] and the logits after each
    auto plain = e->new_session(64);
    REQUIRE(plain->sync(prompt, cancel).ok());
    std::vector<int32_t> g;
    std::vector<std::vector<float>> after;
    for (int i = 0; i < 12; ++i) {
        g.push_back(argmax(plain->logits()));
        REQUIRE(plain->append(g.back(), cancel).ok());
        after.emplace_back(plain->logits().begin(), plain->logits().end());
    }
    for (int keep : {0, 2, 4}) {  // drafts accepted before the first wrong one (4: all of them)
        INFO("accepted drafts " << keep);
        auto s = e->new_session(64);
        REQUIRE(s->sync(prompt, cancel).ok());
        std::vector<int32_t> step = {g[0], g[1], g[2], g[3], g[4]};
        if (keep < 4) step[size_t(keep) + 1] = (step[size_t(keep) + 1] + 1) % 200;
        const size_t start = s->tokens().size();
        REQUIRE(e->step(std::vector<Engine::StepItem>{{s.get(), step, true}}).ok());
        for (int i = 0; i <= keep; ++i) CHECK(same_bits(s->step_logits(size_t(i)), after[size_t(i)]));
        REQUIRE(s->truncate(start + 1 + size_t(keep)).ok());
        CHECK(s->tokens().size() == start + 1 + size_t(keep));
        CHECK(same_bits(s->logits(), after[size_t(keep)]));
        // decoding on from there gives plain's bits
        for (int i = keep + 1; i < 12; ++i) {
            REQUIRE(s->append(g[size_t(i)], cancel).ok());
            CHECK_MESSAGE(same_bits(s->logits(), after[size_t(i)]), "token " << i);
        }
    }
    auto s = e->new_session(64);
    REQUIRE(s->sync(prompt, cancel).ok());
    REQUIRE(s->append(g[0], cancel).ok());
    CHECK(s->truncate(prompt.size()).code == StatusCode::InvalidArgument);  // not after an all_logits step
}
