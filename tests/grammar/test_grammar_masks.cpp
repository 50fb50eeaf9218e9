// Token masks against brute force: at every step of seeded random walks through a grammar, the
// mask (trie walk, cached per state) must allow exactly the tokens whose own bytes the grammar
// accepts, checked over the whole vocabulary of the tiny model's tokenizer (single bytes) and
// the demo tokenizer (multi-byte pieces). Every walk must end in output that parses, within
// its token budget, and masked logits of allowed tokens must keep their exact values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "grammar/token_table.h"
#include "grammar_test_util.h"

using namespace k3;
using k3::test::end_ids;

namespace {

// One random walk: returns the text produced (controls as their text).
std::string walk(const Grammar& g, const std::shared_ptr<Tokenizer>& tok, const std::shared_ptr<const TokenTable>& table,
                 uint32_t seed, int budget) {
    GrammarMatcher m(g, table);
    std::mt19937 rng(seed);
    std::vector<float> logits(size_t(table->n_vocab()));
    std::string text;
    int start_need = m.min_tokens_to_finish();
    for (int n = 0; n < budget && !m.finished(); ++n) {
        std::uniform_real_distribution<float> u(-4.0f, 4.0f);
        for (auto& l : logits) l = u(rng);
        std::vector<float> masked = logits;
        uint64_t forced_before = m.stats().forced_masks;
        m.mask_logits(masked, budget - n);
        // When the budget binds, the mask is narrower than what the grammar allows.
        bool forced = m.stats().forced_masks != forced_before;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < table->n_vocab(); ++id) {
            bool in_mask = std::isfinite(masked[size_t(id)]);
            bool brute = m.allows(id);
            if (in_mask != brute && !(forced && brute)) {
                FAIL_CHECK("token " << id << " (" << tok->decode(std::vector<int32_t>{id}) << ") mask " << in_mask
                                    << " brute force " << brute << " after " << text);
                return text;
            }
            if (in_mask) {
                CHECK(masked[size_t(id)] == logits[size_t(id)]);  // allowed logits unchanged
                allowed.push_back(id);
            }
        }
        REQUIRE(!allowed.empty());
        int32_t id = allowed[rng() % allowed.size()];
        REQUIRE(m.accept(id));
        const auto& ends = table->data().end_ids;
        if (std::find(ends.begin(), ends.end(), id) == ends.end()) text += tok->decode(std::vector<int32_t>{id});
    }
    if (start_need <= budget) CHECK_MESSAGE(m.accepting(), "did not finish within " << budget << ": " << text);
    return text;
}

}  // namespace

TEST_CASE("masks equal brute force on the tiny and demo vocabularies; output always parses") {
    const char* schema = R"({"type":"object","properties":{
        "name":{"type":"string","maxLength":12},"kind":{"enum":["cat","dog"]},
        "age":{"type":"integer","minimum":0,"maximum":30},
        "scores":{"type":"array","items":{"type":"number"},"maxItems":3},
        "owner":{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-f0-9]{4}$"}},"required":["id"]}},
        "required":["name","kind","owner"],"additionalProperties":false})";
    for (int vocab : {512, 4096}) {
        auto tok = k3::test::synthetic_tokenizer(vocab);
        auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
        for (uint32_t seed = 1; seed <= 3; ++seed) {
            std::string text = walk(Grammar::json_schema(schema), tok, table, seed, 400);
            auto v = nlohmann::json::parse(text);
            CHECK(v["name"].is_string());
            CHECK((v["kind"] == "cat" || v["kind"] == "dog"));
            CHECK(v["owner"]["id"].get<std::string>().size() == 4);
            if (v.contains("age")) CHECK((v["age"].get<int>() >= 0 && v["age"].get<int>() <= 30));
            std::string obj = walk(Grammar::json_object(), tok, table, seed, 120);
            CHECK(nlohmann::json::parse(obj).is_object());
        }
    }
}

TEST_CASE("the token budget forces a complete output") {
    auto tok = k3::test::synthetic_tokenizer(4096);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    Grammar g = Grammar::json_schema(R"({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array",
        "items":{"type":"string"}}},"required":["a","b"]})");
    GrammarMatcher m(g, table);
    int need = m.min_tokens_to_finish();
    CHECK(need == int(std::string(R"({"a":"","b":[]})").size()));
    for (uint32_t seed = 1; seed <= 4; ++seed) {
        std::string text = walk(g, tok, table, seed, need + int(seed) * 3);
        CHECK(nlohmann::json::parse(text).is_object());
    }
}

TEST_CASE("control tokens and end tokens in the tool-call grammar") {
    auto tok = k3::test::synthetic_tokenizer(4096);
    auto ends = end_ids(*tok);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), ends);
    std::vector<ToolDeclaration> tools = {{"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},
        "days":{"type":"integer"}},"required":["city"]})"}};
    Grammar g = Grammar::tool_calls(tools, {.thinking = false, .max_calls = 2});
    GrammarMatcher m(g, table);
    // The first token must be <|close|>; no end token before the grammar is complete.
    std::vector<float> logits(size_t(table->n_vocab()), 0.0f);
    m.mask_logits(logits, 1000);
    int32_t close = *tok->special_id("<|close|>");
    for (int32_t id = 0; id < table->n_vocab(); ++id) CHECK(std::isfinite(logits[size_t(id)]) == (id == close));
    std::string text = walk(g, tok, table, 7, 300);
    CHECK(text.find("call tool=\"get_weather\" index=\"1\"") != std::string::npos);
    CHECK(k3::test::grammar_accepts(g, text));
}

TEST_CASE("mask cache: repeated states hit") {
    auto tok = k3::test::synthetic_tokenizer(4096);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    GrammarMatcher m(Grammar::json_schema(R"({"type":"string"})"), table);
    std::vector<float> logits(size_t(table->n_vocab()), 0.0f);
    m.mask_logits(logits, 100);
    REQUIRE(m.accept(*tok->encode("\"", false).begin()));
    for (int i = 0; i < 5; ++i) {
        std::vector<float> l(size_t(table->n_vocab()), 0.0f);
        m.mask_logits(l, 100);
        REQUIRE(m.accept(tok->encode("a", false)[0]));
    }
    CHECK(m.stats().masks == 6);
    // The start's mask was made when the matcher was built (compiled); "inside the string" once,
    // then hits.
    CHECK(m.stats().mask_cache_hits == 5);
}

TEST_CASE("a reset matcher serves the same grammar again from its cache") {
    auto tok = k3::test::synthetic_tokenizer(4096);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    const char* schema = R"({"type":"object","properties":{"a":{"enum":["x","y"]},"b":{"type":"boolean"}},"required":["a","b"]})";
    Grammar g1 = Grammar::json_schema(schema), g2 = Grammar::json_schema(schema);
    CHECK(g1.same_rules(g2));
    CHECK_FALSE(g1.same_rules(Grammar::json_schema(R"({"type":"object","properties":{"a":{"enum":["x","z"]}}})")));
    CHECK_FALSE(g1.same_rules(g1.chat_response(true)));
    GrammarMatcher m(g1, table);
    CHECK(!walk(g1, tok, table, 3, 100).empty());
    // Run the same walk twice on one matcher: same output, the second time every mask cached.
    auto run = [&]() {
        m.reset();
        std::mt19937 rng(3);
        std::string text;
        std::vector<float> logits(size_t(table->n_vocab()));
        while (!m.finished()) {
            std::uniform_real_distribution<float> u(-4.0f, 4.0f);
            for (auto& l : logits) l = u(rng);
            m.mask_logits(logits, 100);
            int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
            REQUIRE(m.accept(best));
            text += tok->decode(std::vector<int32_t>{best});
        }
        return text;
    };
    std::string a = run();
    uint64_t misses = m.stats().masks - m.stats().mask_cache_hits;
    std::string b = run();
    CHECK(a == b);
    CHECK(m.stats().masks - m.stats().mask_cache_hits == misses);
    CHECK(nlohmann::json::parse(a)["b"].is_boolean());
}
