// JSON schema -> grammar: which byte strings each compiled schema accepts and rejects, numeric
// bounds against the plain comparison over a grid of numbers, patterns, refusals naming the
// keyword, and the tool-call grammar's XTML structure.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "grammar_test_util.h"

using namespace k3;
using k3::test::check_sentences;
using k3::test::grammar_accepts;
using k3::test::refused_keyword;

TEST_CASE("json_object accepts objects and nothing else") {
    Grammar g = Grammar::json_object();
    check_sentences(g,
          {"{}", R"({"a":1})", R"({"a":[1,2.5e-3,{"b":null}],"c":"x\"\u00e9\n","d":true})", "{\"k\":\"\xc3\xa9\"}",
           R"({"":-0.0})"},
          {"[]", "1", "\"s\"", "{", R"({"a":})", R"({"a":1,})", R"({a:1})", "{\"a\":01}", R"({"a":1} )",
           "{\"a\":\"\x01\"}", "{\"a\":\"\xc3\"}", "{\"a\":\"\xed\xa0\x80\"}", R"({"a":"\ud800"})", R"({"a":"\x"})"});
}

TEST_CASE("objects: required, optional, order, additionalProperties") {
    Grammar g = Grammar::json_schema(R"({"type":"object","properties":{
        "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},
        "required":["name"],"additionalProperties":false})");
    check_sentences(g,
          {R"({"name":"x"})", R"({"name":"x","age":3})", R"({"name":"x","tags":[]})",
           R"({"name":"","age":-12,"tags":["a","b"]})"},
          {R"({})", R"({"age":3})", R"({"age":3,"name":"x"})", R"({"name":"x","extra":1})", R"({"name":"x",})",
           R"({"name":"x","age":1.5})", R"({"name":3})", R"({"name":"x","tags":[1]})"});
}

TEST_CASE("enum, const, anyOf, type lists, nested $ref and recursion") {
    check_sentences(Grammar::json_schema(R"({"enum":["red","green",3,null]})"), {R"("red")", "3", "null"}, {R"("blue")", "4", R"("Red")"});
    check_sentences(Grammar::json_schema(R"({"const":{"a":[1]}})"), {R"({"a":[1]})"}, {R"({"a":[2]})"});
    check_sentences(Grammar::json_schema(R"({"anyOf":[{"type":"string"},{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x"]}]})"),
          {R"("s")", R"({"x":false})"}, {"1", R"({})"});
    check_sentences(Grammar::json_schema(R"({"type":["integer","null"]})"), {"null", "7"}, {"7.5", R"("7")"});
    check_sentences(Grammar::json_schema(R"({"type":"number","nullable":true})"), {"null", "7.5"}, {R"("7")"});
    Grammar tree = Grammar::json_schema(R"({"$ref":"#/$defs/node","$defs":{"node":{"type":"object",
        "properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"]}}})");
    check_sentences(tree, {R"({"v":1,"kids":[]})", R"({"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]})"},
          {R"({"v":1})", R"({"v":1,"kids":[{"v":2}]})"});
    check_sentences(Grammar::json_schema(R"({"type":"object","properties":{"next":{"$ref":"#"}}})"), {"{}", R"({"next":{"next":{}}})"},
          {R"({"next":1})"});
}

TEST_CASE("arrays and strings with counts") {
    check_sentences(Grammar::json_schema(R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2})"),
          {"[true]", "[true,false]"}, {"[]", "[true,true,true]", "[1]"});
    check_sentences(Grammar::json_schema(R"({"type":"string","minLength":2,"maxLength":3})"),
          {R"("ab")", R"("abc")", "\"\xc3\xa9\xc3\xa9\"", R"("\n\t")"}, {R"("a")", R"("abcd")"});
    check_sentences(Grammar::json_schema(R"({"type":"object","additionalProperties":{"type":"integer"}})"),
          {"{}", R"({"a":1,"b":2})"}, {R"({"a":"x"})"});
}

TEST_CASE("numeric bounds agree with the comparison on a grid") {
    struct Case {
        const char* schema;
        double lo, hi;
        bool lo_excl, hi_excl, integral;
    };
    const Case cases[] = {
        {R"({"type":"integer","minimum":-12,"maximum":107})", -12, 107, false, false, true},
        {R"({"type":"integer","exclusiveMinimum":0})", 0, 1e18, true, false, true},
        {R"({"type":"integer","maximum":-3})", -1e18, -3, false, false, true},
        {R"({"type":"number","minimum":0,"maximum":1})", 0, 1, false, false, false},
        {R"({"type":"number","exclusiveMinimum":-2,"exclusiveMaximum":30})", -2, 30, true, true, false},
        {R"({"type":"number","minimum":5})", 5, 1e18, false, false, false},
        {R"({"type":"integer","minimum":0.5,"maximum":99.5})", 1, 99, false, false, true},
    };
    const char* fractions[] = {"", ".0", ".00", ".5", ".05", ".9"};
    for (const Case& c : cases) {
        Grammar g = Grammar::json_schema(c.schema);
        for (int i = -150; i <= 150; ++i)
            for (const char* f : fractions) {
                for (int neg = 0; neg < (i == 0 ? 2 : 1); ++neg) {
                    std::string text = neg ? "-" : "";
                    text += std::to_string(i);
                    text += f;
                    double v = std::stod(text);
                    bool is_int = std::string(f).find_first_not_of(".0") == std::string::npos && std::string(f) != ".";
                    bool in = (c.lo_excl ? v > c.lo : v >= c.lo) && (c.hi_excl ? v < c.hi : v <= c.hi);
                    // Integers are written without a fraction; "-0" is not produced.
                    bool expect = in && (c.integral ? std::string(f).empty() : true) && !(neg && v == 0) &&
                                  !(neg && i == 0 && is_int);
                    CHECK_MESSAGE(grammar_accepts(g, text) == expect, c.schema << " on " << text);
                }
            }
    }
}

TEST_CASE("string patterns") {
    check_sentences(Grammar::json_schema(R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})"), {R"("AB-123")"},
          {R"("AB-12")", R"("ab-123")", R"("xAB-123")"});
    check_sentences(Grammar::json_schema(R"({"type":"string","pattern":"^(cat|dog)s?$"})"), {R"("cat")", R"("dogs")"}, {R"("cow")"});
    // Unanchored: the match may sit anywhere.
    check_sentences(Grammar::json_schema(R"({"type":"string","pattern":"ab+c"})"), {R"("xxabbbc!")"}, {R"("ac")"});
    // A quote in a class is written escaped in JSON.
    check_sentences(Grammar::json_schema(R"({"type":"string","pattern":"^[\"a]+$"})"), {R"("a\"a")"}, {R"("b")"});
    check_sentences(Grammar::json_schema(R"({"type":"string","pattern":"^[^0-9]*$"})"), {"\"x\xc3\xa9\"", R"("")"}, {R"("a1")"});
}

TEST_CASE("unsupported keywords are refused by name") {
    CHECK(refused_keyword(R"({"type":"string","format":"email"})") == "format");
    CHECK(refused_keyword(R"({"oneOf":[{"type":"string"}]})") == "oneOf");
    CHECK(refused_keyword(R"({"type":"array","uniqueItems":true})") == "uniqueItems");
    CHECK(refused_keyword(R"({"$ref":"http://example.com/s.json"})") == "$ref");
    CHECK(refused_keyword(R"j({"type":"string","pattern":"(?=a)"})j") == "pattern");
    CHECK(refused_keyword(R"({"type":"string","pattern":"(a)\\1"})") == "pattern");
    CHECK(refused_keyword(R"({"type":"object","properties":{"a":{"type":"int"}}})") == "type");
    CHECK(refused_keyword(R"({"type":"object","properties":{},"required":["a"]})") == "required");
    CHECK(refused_keyword(R"({"type":"integer","minimum":5,"maximum":4})") == "maximum");
    CHECK(refused_keyword("{not json") == "schema");
    try {
        Grammar::json_schema(R"({"type":"object","properties":{"when":{"type":"string","format":"date-time"}}})");
        FAIL("accepted");
    } catch (const GrammarError& e) {
        CHECK(e.path() == "#/properties/when");
        CHECK(std::string(e.what()).find("'format'") != std::string::npos);
    }
}

TEST_CASE("tool-call grammar: declared names, typed argument bodies, indices") {
    std::vector<ToolDeclaration> tools = {
        {"get_weather", R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1},
                          "unit":{"enum":["c","f"]}},"required":["city"]})"},
        {"ping", ""},
    };
    Grammar one = Grammar::tool_calls(tools, {});
    const std::string head = "<|close|>response<|sep|><|open|>tools<|sep|>";
    const std::string tail = "<|close|>tools<|sep|><|close|>message<|sep|>";
    auto call = [](const std::string& name, int index, const std::string& args) {
        return "<|open|>call tool=\"" + name + "\" index=\"" + std::to_string(index) + "\"<|sep|>" + args + "<|close|>call<|sep|>";
    };
    auto arg = [](const std::string& key, const std::string& type, const std::string& body) {
        return "<|open|>argument key=\"" + key + "\" type=\"" + type + "\"<|sep|>" + body + "<|close|>argument<|sep|>";
    };
    const std::string city = arg("city", "string", "Paris \"old\" town");
    CHECK(grammar_accepts(one, head + call("get_weather", 1, city) + tail));
    CHECK(grammar_accepts(one, head + call("get_weather", 1, city + arg("days", "number", "3") + arg("unit", "string", "f")) + tail));
    CHECK(grammar_accepts(one, head + call("ping", 1, "") + tail));
    CHECK_FALSE(grammar_accepts(one, head + call("get_weather", 1, "") + tail));                       // city required
    CHECK_FALSE(grammar_accepts(one, head + call("get_weather", 1, city + arg("days", "number", "0")) + tail));  // minimum 1
    CHECK_FALSE(grammar_accepts(one, head + call("get_weather", 1, city + arg("unit", "string", "k")) + tail));
    CHECK_FALSE(grammar_accepts(one, head + call("get_time", 1, "") + tail));                          // undeclared
    CHECK_FALSE(grammar_accepts(one, head + call("ping", 1, "") + call("ping", 2, "") + tail));         // one call only
    CHECK_FALSE(grammar_accepts(one, head + tail));                                                    // none at all
    Grammar many = Grammar::tool_calls(tools, {.thinking = true, .max_calls = 3});
    std::string think = "some reasoning<|close|>think<|sep|><|open|>response<|sep|>";
    CHECK(grammar_accepts(many, think + head + call("ping", 1, "") + call("get_weather", 2, city) + tail));
    CHECK_FALSE(grammar_accepts(many, think + head + call("ping", 1, "") + call("ping", 1, "") + tail));  // index counts
    CHECK_THROWS_AS(Grammar::tool_calls(std::vector<ToolDeclaration>{{"bad", R"({"type":"object","properties":{"a":{"format":"uri"}}})"}}, {}),
                    GrammarError);
}
