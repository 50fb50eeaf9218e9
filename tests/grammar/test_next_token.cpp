// The next-token step (k3/next_token.h), shared by the daemon's worker and `k3serve run`: with
// its defaults it is the greedy choice itself; end tokens are reported; biases and penalties
// come before the grammar's mask (a bias never revives a token the grammar refuses); a walk
// under a grammar ends in output that parses, within its token budget.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar_test_util.h"
#include "k3/next_token.h"

using namespace k3;
using k3::test::end_ids;

TEST_CASE("next token: the defaults are the greedy choice, ties and NaN included, and nothing ends") {
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> level(0, 7);  // few distinct values: many ties
    NextToken step{NextTokenRules{}};
    for (int round = 0; round < 200; ++round) {
        std::vector<float> logits(97);
        for (float& l : logits) l = float(level(rng));
        if (round % 3 == 0) logits[size_t(round % 97)] = NAN;
        const NextToken::Choice c = step.choose(logits, 1000);
        CHECK(c.id == greedy_token(logits));
        CHECK(c.allowed);
        CHECK_FALSE(c.ends);
    }
    CHECK_FALSE(step.constrained());
    CHECK_FALSE(step.output_complete());
}

TEST_CASE("next token: an end token is reported as ending; the penalties see each chosen token") {
    NextTokenRules rules;
    rules.end_tokens = {2};
    rules.adjustments.presence_penalty = 10.0f;
    NextToken step(rules);
    const std::vector<float> logits = {0.0f, 5.0f, 4.0f, 1.0f};
    const NextToken::Choice first = step.choose(logits, 10);
    CHECK(first.id == 1);
    CHECK_FALSE(first.ends);
    // 1 now carries the presence penalty: 2 is the largest, and it is an end token.
    const NextToken::Choice second = step.choose(logits, 10);
    CHECK(second.id == 2);
    CHECK(second.ends);
}

TEST_CASE("next token: the grammar masks the adjusted scores, and a walk ends in output that parses") {
    auto tok = k3::test::synthetic_tokenizer(512);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    const Grammar g = Grammar::json_object();
    const int32_t letter_x = tok->encode("x", false).at(0);  // never a JSON object's first byte
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        NextTokenRules rules;
        rules.sampling.temperature = 1.0f;
        rules.sampling.seed = seed;
        rules.adjustments.bias = {{letter_x, 1000.0f}};
        rules.grammar = std::make_shared<GrammarMatcher>(g, table);
        rules.end_tokens = end_ids(*tok);
        NextToken step(rules);
        CHECK(step.constrained());
        std::mt19937 rng{uint32_t(seed)};
        std::normal_distribution<float> noise(0.0f, 2.0f);
        std::string text;
        const int budget = 60;
        bool ended = false;
        for (int left = budget; left > 0 && !ended; --left) {
            std::vector<float> logits(size_t(tok->n_vocab()));
            for (float& l : logits) l = noise(rng);
            const NextToken::Choice c = step.choose(logits, left);
            REQUIRE(c.allowed);
            if (text.empty()) CHECK(c.id != letter_x);  // the bias did not beat the mask
            if (c.ends) break;
            text += tok->decode(std::vector<int32_t>{c.id});
            ended = step.output_complete();
        }
        CAPTURE(text);
        CHECK(nlohmann::json::parse(text).is_object());
    }
}
