// Four schema features that JSON-schema validators accept and tool definitions use (docs/api.md,
// "Schema keywords enforced"): `pattern` together with minLength/maxLength, maxLength above
// 1,000, fractional bounds on numbers (minimum 0.5, exclusiveMaximum 9.75), and integer bounds
// beyond 2^53. For each: random walks through the compiled grammar (what a model with random
// weights could write) must all validate, checked here by independent means (std::regex for
// ECMA-262 patterns, code points counted from UTF-8, bounds compared both as IEEE doubles, as
// JavaScript validators do, and exactly as decimals, as Python's do); and
// strings that break the schema are rejected.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "grammar_test_util.h"

using namespace k3;
using k3::test::check_sentences;
using k3::test::grammar_accepts;
using k3::test::refused_keyword;
using nlohmann::json;

namespace {

// The schema's grammar under every budget but the clock: these cases are about which sentences
// it takes. The time budget is test_grammar_budgets.cpp's subject and the compile time
// bench_grammar_compile's; under the sanitizers on a loaded machine the 1,500-character `x`
// pattern took more than the default 5 s (scripts/sanitize.sh at load 8, 5 Dec 2026).
Grammar compile(std::string_view schema) {
    GrammarLimits limits;
    limits.max_compile_ms = std::numeric_limits<double>::infinity();
    return Grammar::json_schema(schema, limits);
}

// A sentence of `g` chosen at random byte by byte; past `soft_limit` bytes it heads for the
// nearest end (each byte then lowers the distance to an accepting state).
std::string random_sentence(const Grammar& g, std::mt19937& rng, size_t soft_limit) {
    GrammarLimits limits;
    limits.max_states = 1u << 22;  // the walk tries every byte at every position
    grammar::Automaton a(g.shared_rules(), limits);
    int32_t s = a.start();
    std::string out;
    for (;;) {
        if (a.accepting(s) && (!a.can_continue(s) || out.size() > soft_limit || rng() % 16 == 0)) return out;
        std::vector<int> options;
        for (int sym = 0; sym < 256; ++sym)
            if (a.step(s, sym) != grammar::Automaton::kDead) options.push_back(sym);
        REQUIRE(!options.empty());
        int pick = options[rng() % options.size()];
        if (out.size() > soft_limit)
            for (int sym : options)
                if (a.distance(a.step(s, sym)) < a.distance(a.step(s, pick))) pick = sym;
        out += char(pick);
        s = a.step(s, pick);
    }
}

// Unicode characters in UTF-8 text (continuation bytes not counted), as JSON schema counts length.
size_t code_points(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

// Two decimal texts (no exponent) compared exactly: <0, 0, >0.
int exact_compare(const std::string& a, const std::string& b) {
    struct Parts {
        bool negative;
        std::string integer, fraction;
    };
    auto parts = [](const std::string& t) {
        Parts p{!t.empty() && t[0] == '-', "", ""};
        std::string body = t.substr(p.negative ? 1 : 0);
        size_t dot = body.find('.');
        p.integer = body.substr(0, dot);
        if (dot != std::string::npos) p.fraction = body.substr(dot + 1);
        p.integer.erase(0, std::min(p.integer.find_first_not_of('0'), p.integer.size()));
        while (!p.fraction.empty() && p.fraction.back() == '0') p.fraction.pop_back();
        if (p.integer.empty() && p.fraction.empty()) p.negative = false;
        return p;
    };
    Parts x = parts(a), y = parts(b);
    if (x.negative != y.negative) return x.negative ? -1 : 1;
    int m = 0;
    if (x.integer.size() != y.integer.size()) m = x.integer.size() < y.integer.size() ? -1 : 1;
    else if (x.integer != y.integer) m = x.integer < y.integer ? -1 : 1;
    else {
        size_t n = std::max(x.fraction.size(), y.fraction.size());
        x.fraction.resize(n, '0');
        y.fraction.resize(n, '0');
        if (x.fraction != y.fraction) m = x.fraction < y.fraction ? -1 : 1;
    }
    return x.negative ? -m : m;
}

struct Bound {
    const char* text = nullptr;  // the bound as written in the schema
    bool exclusive = false;
};

// Whether the number `text` is within the bounds, read both ways.
bool within(const std::string& text, Bound lo, Bound hi) {
    const double v = std::strtod(text.c_str(), nullptr);
    if (lo.text) {
        const double b = std::strtod(lo.text, nullptr);
        const int e = exact_compare(text, lo.text);
        if (lo.exclusive ? !(v > b) || e <= 0 : !(v >= b) || e < 0) return false;
    }
    if (hi.text) {
        const double b = std::strtod(hi.text, nullptr);
        const int e = exact_compare(text, hi.text);
        if (hi.exclusive ? !(v < b) || e >= 0 : !(v <= b) || e > 0) return false;
    }
    return true;
}

// A JSON string of n copies of c (built with += : GCC 12's false -Wrestrict, bug 105329).
std::string quoted(size_t n, char c) {
    std::string s;
    s += '"';
    s.append(n, c);
    s += '"';
    return s;
}



}  // namespace

TEST_CASE("schema features: pattern with minLength/maxLength, every sentence validates") {
    struct Case {
        const char* pattern;
        int min, max;  // max < 0: none
    };
    const Case cases[] = {
        {"^[a-z0-9_]+$", 3, 16},
        {"^[A-Z]{2}-\\d+$", 0, 6},
        {"ab", 4, 6},                // unanchored: anything around it
        {"^(cat|horse)s?$", 4, -1},  // cats, horse, horses; not cat
        {"^[a-f]*$", 1200, 1300},    // and long
        {"x", 0, 1500},
    };
    std::mt19937 rng(7);
    for (const Case& c : cases) {
        json schema = {{"type", "string"}, {"pattern", c.pattern}, {"minLength", c.min}};
        if (c.max >= 0) schema["maxLength"] = c.max;
        CAPTURE(schema.dump());
        Grammar g = compile(schema.dump());
        const std::regex re(c.pattern, std::regex::ECMAScript);
        for (int walk = 0; walk < 40; ++walk) {
            const std::string text = random_sentence(g, rng, size_t(c.max >= 0 ? c.max : c.min + 20) * 2);
            CAPTURE(text);
            const json value = json::parse(text);  // a JSON string, its escapes decoded
            REQUIRE(value.is_string());
            const std::string s = value.get<std::string>();
            CHECK(code_points(s) >= size_t(c.min));
            if (c.max >= 0) CHECK(code_points(s) <= size_t(c.max));
            CHECK(std::regex_search(s, re));
        }
    }
}

TEST_CASE("schema features: pattern with lengths accepts the edges and rejects what breaks either") {
    Grammar g = compile(R"({"type":"string","pattern":"^[a-z0-9_]+$","minLength":3,"maxLength":5})");
    check_sentences(g, {R"("abc")", R"("a_1z9")"}, {R"("ab")", R"("abcdef")", R"("ABC")", R"("ab-c")", R"("")"});
    Grammar around = compile(R"({"type":"string","pattern":"ab","minLength":4,"maxLength":5})");
    check_sentences(around, {R"("xxab")", R"("abxxx")", R"("xabxx")"}, {R"("ab")", R"("xab")", R"("xxxabx")", R"("xxxx")"});
    // A length counts characters, not bytes or escapes.
    Grammar two = compile(R"({"type":"string","pattern":"^.+$","maxLength":2})");
    check_sentences(two, {"\"\xc3\xa9\xc3\xa9\"", R"("\"a")"}, {"\"\xc3\xa9\xc3\xa9\xc3\xa9\"", R"("\"ab")"});
    // No string of those lengths matches: refused, naming the pattern.
    CHECK(refused_keyword(R"({"type":"string","pattern":"^a{3}$","minLength":5})") == "pattern");
    CHECK(refused_keyword(R"({"type":"string","pattern":"^(ab){3}$","maxLength":5})") == "pattern");
}

TEST_CASE("schema features: maxLength and minLength above 1,000") {
    Grammar g = compile(R"({"type":"string","minLength":1100,"maxLength":5000})");
    check_sentences(g, {quoted(1100, 'a'), quoted(5000, 'z')}, {quoted(1099, 'a'), quoted(5001, 'a')});
    std::mt19937 rng(11);
    Grammar up_to = compile(R"({"type":"string","maxLength":2500})");
    for (int walk = 0; walk < 10; ++walk) {
        const std::string text = random_sentence(up_to, rng, 2600);
        CHECK(code_points(json::parse(text).get<std::string>()) <= 2500);
    }
    // The grammar budget still bounds a length: refused by the symbols limit, before building.
    try {
        compile(R"({"type":"string","maxLength":100000000})");
        FAIL("accepted");
    } catch (const GrammarBudgetError& e) {
        CHECK(e.limit() == GrammarLimit::Symbols);
    }
}

TEST_CASE("schema features: fractional and beyond-2^53 bounds, every sentence validates both ways") {
    struct Case {
        const char* type;
        Bound lo, hi;
    };
    const Case cases[] = {
        {"number", {"0.5"}, {"9.75", true}},
        {"number", {"-2.25", true}, {"0.1"}},
        {"number", {"0.1", true}, {}},
        {"number", {}, {"-0.001", true}},
        {"integer", {"0.5"}, {"7.5"}},
        {"integer", {"-9007199254740993"}, {"9007199254740993"}},
        {"integer", {"9007199254740993", true}, {"9007199254741100"}},
        {"integer", {"0"}, {"18446744073709551615"}},
        {"integer", {"100000000000000000000", true}, {}},
        {"number", {"-1e20"}, {"12345678901234567890.5", true}},
    };
    std::mt19937 rng(5);
    for (const Case& c : cases) {
        std::string schema = std::string(R"({"type":")") + c.type + "\"";
        if (c.lo.text) schema += std::string(",\"") + (c.lo.exclusive ? "exclusiveMinimum" : "minimum") + "\":" + c.lo.text;
        if (c.hi.text) schema += std::string(",\"") + (c.hi.exclusive ? "exclusiveMaximum" : "maximum") + "\":" + c.hi.text;
        schema += "}";
        CAPTURE(schema);
        Grammar g = compile(schema);
        // The bounds as decimals for `within` (1e20 style in a schema: its value written out).
        Bound lo = c.lo, hi = c.hi;
        if (lo.text && std::string(lo.text) == "-1e20") lo.text = "-100000000000000000000";
        for (int walk = 0; walk < 300; ++walk) {
            const std::string text = random_sentence(g, rng, 40);
            CAPTURE(text);
            const json value = json::parse(text);
            CHECK(value.is_number());
            if (std::string(c.type) == "integer") CHECK(text.find_first_of(".eE") == std::string::npos);
            CHECK(within(text, lo, hi));
        }
    }
}

TEST_CASE("schema features: fractional and big bounds accept inside, reject outside") {
    Grammar g = compile(R"({"type":"number","minimum":0.5,"exclusiveMaximum":9.75})");
    check_sentences(g, {"0.5", "0.50", "0.6", "1", "9", "9.7", "9.749", "9.7499999999"},
          {"0.49", "0.4999999", "0", "-1", "9.75", "9.750", "9.76", "10", "-0.5"});
    Grammar i = compile(R"({"type":"integer","minimum":0.5,"maximum":7.5})");
    check_sentences(i, {"1", "7"}, {"0", "8", "1.0", "0.5"});
    Grammar big = compile(R"({"type":"integer","minimum":-9007199254740993,"maximum":9007199254740993})");
    check_sentences(big, {"0", "9007199254740992", "-9007199254740992", "123456789012345"},
          {"9007199254740994", "-9007199254740994", "90071992547409930"});
    Grammar huge = compile(R"({"type":"integer","exclusiveMinimum":100000000000000000000})");
    check_sentences(huge, {"100000000000000020000", "1000000000000000000000"}, {"100000000000000000000", "99999999999999999999", "5"});
    Grammar u64 = compile(R"({"type":"integer","minimum":0,"maximum":18446744073709551615})");
    check_sentences(u64, {"0", "18446744073709551615", "4294967296"}, {"-1", "18446744073709551617", "100000000000000000000"});
    CHECK(refused_keyword(R"({"type":"number","exclusiveMinimum":9.75,"maximum":9.75})") == "maximum");
    CHECK(refused_keyword(R"({"type":"integer","minimum":0.5,"maximum":0.75})") == "maximum");
}
