// The grammar compiler's budgets (k3/grammar.h GrammarLimits; docs/operations.md "Grammar budgets"): each budget
// refuses a grammar over it with a GrammarBudgetError naming the limit and its value, counted
// while the grammar is built (an enum over the count is refused before any of it is written);
// just under each budget the same grammar compiles. And an enum compiled as a trie accepts
// exactly its values, as the one-alternative-per-value rule it replaced does, on random and
// edge strings and token by token, while its automaton states hold at most one stack per next
// byte instead of one per value.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "grammar/grammar_rules.h"
#include "grammar_test_util.h"

using namespace k3;
using k3::test::end_ids;
using k3::test::grammar_accepts;
using json = nlohmann::json;

namespace {

// The budget a compile was refused for ("none" when it compiled).
struct Outcome {
    std::string limit = "none";
    double value = 0;
    std::string message;
};

template <class F>
Outcome outcome_of(F&& compile) {
    Outcome o;
    try {
        compile();
    } catch (const GrammarBudgetError& e) {
        o.limit = grammar_limit_name(e.limit());
        o.value = e.limit_value();
        o.message = e.what();
    }
    return o;
}

Outcome schema_outcome(const json& schema, const GrammarLimits& limits) {
    return outcome_of([&] { Grammar::json_schema(schema.dump(), limits); });
}

// `n` strings that share a `prefix_len`-byte prefix and differ after it.
std::vector<std::string> prefixed_values(size_t n, size_t prefix_len) {
    std::vector<std::string> v;
    const std::string prefix(prefix_len, 'p');
    for (size_t i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i * 7919 % 1000003));
    return v;
}

json enum_schema(const std::vector<std::string>& values) { return json{{"enum", values}}; }

// Whether `a` accepts the bytes of `text` (one automaton for many texts: its steps are cached).
bool accepts(grammar::Automaton& a, std::string_view text) {
    int32_t s = a.start();
    for (unsigned char c : text) {
        s = a.step(s, c);
        if (s == grammar::Automaton::kDead) return false;
    }
    return a.accepting(s);
}

// The rule an enum was before the trie: one alternative per value, each its whole JSON text.
Grammar one_alternative_per_value(const std::vector<std::string>& values) {
    grammar::GrammarBuilder b;
    std::vector<grammar::Sequence> alts;
    for (const auto& v : values) alts.push_back(b.literal(json(v).dump()));
    int32_t root = b.rule("enum", alts);
    return Grammar(std::make_shared<grammar::GrammarRules>(b.finish(root)));
}

}  // namespace

TEST_CASE("grammar budget: an enum over max_enum_values is refused on its count, naming the limit") {
    GrammarLimits limits;
    limits.max_enum_values = 10;
    std::vector<std::string> values = prefixed_values(11, 4);
    Outcome over = schema_outcome(json{{"type", "object"}, {"properties", {{"pick", enum_schema(values)}}}}, limits);
    CHECK(over.limit == "enum");
    CHECK(over.value == 10);
    CHECK(over.message.find("#/properties/pick") != std::string::npos);
    CHECK(over.message.find("11 values") != std::string::npos);
    values.pop_back();
    CHECK(schema_outcome(enum_schema(values), limits).limit == "none");
    // The issue's case at the defaults: 60,000 strings with a 40-byte prefix (2.8 MB).
    CHECK(schema_outcome(enum_schema(prefixed_values(60000, 40)), GrammarLimits{}).limit == "enum");
}

TEST_CASE("grammar budget: enum and const bytes add up over the whole schema") {
    GrammarLimits limits;
    limits.max_literal_bytes = 250;
    const std::string hundred(98, 'x');  // 100 bytes as JSON text, quotes included
    json two = json::parse(R"({"type":"object","properties":{"a":{"enum":[]},"b":{}}})");
    two["properties"]["a"]["enum"].push_back(hundred + "1");
    two["properties"]["b"]["const"] = hundred;
    // 101 + 100 bytes: under 250.
    CHECK(schema_outcome(two, limits).limit == "none");
    json three = two;
    three["properties"]["c"]["enum"] = json::array({hundred});
    Outcome o = schema_outcome(three, limits);
    CHECK(o.limit == "literal_bytes");
    CHECK(o.value == 250);
    CHECK(o.message.find("#/properties/c") != std::string::npos);
}

TEST_CASE("grammar budget: the rules' symbols are counted as they are built") {
    // An array of up to 1000 strings of up to 1000 characters: thousands of rules.
    const json schema = {{"type", "array"}, {"maxItems", 1000}, {"items", {{"type", "string"}, {"maxLength", 1000}}}};
    GrammarLimits small;
    small.max_symbols = 2000;
    Outcome o = schema_outcome(schema, small);
    CHECK(o.limit == "symbols");
    CHECK(o.value == 2000);
    CHECK(schema_outcome(schema, GrammarLimits{}).limit == "none");
}

TEST_CASE("grammar budget: automaton states, while compiling the matcher and while decoding") {
    auto tok = k3::test::synthetic_tokenizer(4096);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    const Grammar g = Grammar::json_object();
    // The first mask walks the vocabulary from the start: past the start state itself.
    GrammarLimits tiny;
    tiny.max_states = 1;
    Outcome o = outcome_of([&] { GrammarMatcher m(g, table, tiny); });
    CHECK(o.limit == "states");
    CHECK(o.value == 1);
    // Enough for the first mask, not for a long walk through nested objects.
    GrammarLimits some;
    for (size_t n = 8;; n *= 2) {
        some.max_states = n;
        if (outcome_of([&] { GrammarMatcher m(g, table, some); }).limit == "none") break;
    }
    GrammarMatcher m(g, table, some);
    Outcome later = outcome_of([&] {
        const std::string text = R"({"a":{"b":[1,{"c":"d"},true],"e":null},"f":-12.5e3})";
        for (char c : text) {
            std::vector<float> logits(size_t(tok->n_vocab()), 0.0f);
            m.mask_logits(logits, 1000);
            REQUIRE(m.accept(tok->encode(std::string(1, c), false).at(0)));
        }
    });
    CHECK(later.limit == "states");
    CHECK(later.value == double(some.max_states));
}

TEST_CASE("grammar budget: compile time counts from the request's start, rules and matcher alike") {
    const json schema = enum_schema(prefixed_values(2000, 8));
    GrammarLimits late;
    late.max_compile_ms = 1;
    late.started = std::chrono::steady_clock::now() - std::chrono::seconds(1);  // a second already gone
    Outcome rules = schema_outcome(schema, late);
    CHECK(rules.limit == "compile_ms");
    CHECK(rules.value == 1);
    // A small grammar too: the clock is read at the end of each step, not only every so often.
    CHECK(schema_outcome(json{{"type", "boolean"}}, late).limit == "compile_ms");
    auto tok = k3::test::synthetic_tokenizer(512);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    const Grammar g = Grammar::json_schema(R"({"type":"boolean"})");
    CHECK(outcome_of([&] { GrammarMatcher m(g, table, late); }).limit == "compile_ms");
    // With the time it needs, the same compiles; once compiled, decoding is not timed.
    GrammarLimits ample;
    ample.max_compile_ms = 60e3;
    CHECK(schema_outcome(schema, ample).limit == "none");
    GrammarMatcher m(g, table, ample);
    CHECK(m.accept(tok->encode("t", false).at(0)));
}

TEST_CASE("enum trie: the same language as one alternative per value, on random and edge strings") {
    std::mt19937 rng(21);
    // Values with shared prefixes, values that are prefixes of others, duplicates, escapes,
    // multi-byte UTF-8, the empty string.
    std::vector<std::string> values = {"", "a", "ab", "abc", "abd", "b", "ab", "x\"y", "tab\t", "\xc3\xa9t\xc3\xa9",
                                       "\xc3\xa9"};
    for (const auto& v : prefixed_values(300, 40)) values.push_back(v);
    std::uniform_int_distribution<int> len(0, 6), pick(0, 3);
    for (int i = 0; i < 200; ++i) {
        std::string s;
        for (int k = len(rng); k > 0; --k) s += "ab\xc3z"[pick(rng)];
        values.push_back(s);
    }
    // Only well-formed UTF-8 values stay (JSON strings are text).
    std::erase_if(values, [](const std::string& v) {
        try {
            (void)json(v).dump();
            return false;
        } catch (const json::exception&) {
            return true;
        }
    });
    const Grammar trie = Grammar::json_schema(enum_schema(values).dump());
    const Grammar plain = one_alternative_per_value(values);
    std::set<std::string> members;
    for (const auto& v : values) members.insert(json(v).dump());
    // Candidates: every value, every prefix of one, each with a byte more, random mutations.
    std::vector<std::string> candidates = {"", "\"", "\"\"\"", "null", "\"ab\" "};
    for (const auto& m : members) {
        for (size_t cut = 0; cut <= m.size(); ++cut) candidates.push_back(m.substr(0, cut));
        candidates.push_back(m + "\"");
        candidates.push_back(m.substr(0, m.size() - 1) + "x\"");
        std::string mutated = m;
        mutated[rng() % mutated.size()] = char("abpz\"0"[rng() % 6]);
        candidates.push_back(mutated);
    }
    grammar::Automaton trie_automaton(trie.shared_rules()), plain_automaton(plain.shared_rules());
    for (const auto& c : candidates) {
        CAPTURE(c);
        CHECK(accepts(trie_automaton, c) == bool(members.count(c)));
        CHECK(accepts(plain_automaton, c) == bool(members.count(c)));
    }
    // And the helper every other grammar test uses, on a few.
    CHECK(grammar_accepts(trie, json(values[3]).dump()));
    CHECK_FALSE(grammar_accepts(trie, "\"abe\""));
}

TEST_CASE("enum trie: masks equal the one-alternative rule's token by token, and states stay small") {
    auto tok = k3::test::synthetic_tokenizer(4096);
    auto table = std::make_shared<const TokenTable>(*tok, tok->n_vocab(), end_ids(*tok));
    const std::vector<std::string> values = prefixed_values(3000, 40);
    const Grammar trie = Grammar::json_schema(enum_schema(values).dump());
    const Grammar plain = one_alternative_per_value(values);
    // The 40-byte prefix is in the rules once, not 3,000 times.
    CHECK(trie.rules().symbols.size() < values.size() * 12);
    std::mt19937 rng(7);
    for (int walk = 0; walk < 6; ++walk) {
        GrammarMatcher a(trie, table), b(plain, table);
        for (int step = 0; step < 80 && !a.finished(); ++step) {
            std::vector<float> la(size_t(tok->n_vocab()), 0.0f), lb = la;
            a.mask_logits(la, 1000);
            b.mask_logits(lb, 1000);
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < tok->n_vocab(); ++id) {
                REQUIRE(std::isfinite(la[size_t(id)]) == std::isfinite(lb[size_t(id)]));
                if (std::isfinite(la[size_t(id)])) allowed.push_back(id);
            }
            REQUIRE(!allowed.empty());
            int32_t id = allowed[rng() % allowed.size()];
            REQUIRE(a.accept(id));
            REQUIRE(b.accept(id));
            CHECK(a.accepting() == b.accepting());
            CHECK(a.finished() == b.finished());
        }
    }
    // Along a value's bytes the trie's states hold at most one stack per possible next byte
    // (10 digits and the closing quote here); one alternative per value held 3,000.
    grammar::Automaton t(trie.shared_rules()), p(plain.shared_rules());
    int32_t st = t.start(), sp = p.start();
    size_t widest_trie = 0, widest_plain = 0;
    for (unsigned char c : json(values[1234]).dump()) {
        widest_trie = std::max(widest_trie, t.stack_count(st));
        widest_plain = std::max(widest_plain, p.stack_count(sp));
        st = t.step(st, c);
        sp = p.step(sp, c);
        REQUIRE(st != grammar::Automaton::kDead);
    }
    CHECK(t.accepting(st));
    CHECK(widest_trie <= 11);
    CHECK(widest_plain >= values.size());
}

TEST_CASE("a schema no finite value satisfies is a GrammarError naming why, in a tool's parameters too") {
    const std::string loop = R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]})";
    auto message = [](auto&& compile) {
        try {
            compile();
        } catch (const GrammarError& e) {
            return std::string(e.what());
        }
        return std::string("(compiled)");
    };
    CHECK(message([&] { Grammar::json_schema(loop); }).find("no finite value satisfies this schema") != std::string::npos);
    std::vector<ToolDeclaration> tools = {{"walk", loop}};
    CHECK(message([&] { Grammar::tool_calls(tools, ToolCallOptions{}); }).find("no finite value") != std::string::npos);
}
