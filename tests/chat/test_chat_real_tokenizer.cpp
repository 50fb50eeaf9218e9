// Rendered prompts with the real Kimi tokenizer, token by token, against expected prompts written
// out here by hand from the layout in docs/model.md "Chat layout" (the official encoder's
// rules): every literal below is spelled in this file, not taken from k3/xtml.h, and each
// segment is encoded on its own. Each case also shows that the rule it checks changes the ids
// (the one-segment or old spelling encodes differently), so a renderer that broke the rule
// would fail it. Skips, naming the missing file, without ../shared/data/kimi-tokenizer/.
#include <doctest/doctest.h>

#include "chat_expect.h"
#include "common/real_tokenizer.h"
#include "common/skip.h"
#include "k3/chat.h"
#include "k3/error.h"

using namespace k3;
using namespace k3::test;

namespace {

using Ids = std::vector<int32_t>;

const std::string kEffort =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), "
    "supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort=";


ChatMessage tool_result(std::string call_id, std::string content, std::string name = "") {
    ChatMessage m = chat_message("tool", std::move(content));
    m.tool_call_id = std::move(call_id);
    m.tool_name = std::move(name);
    return m;
}

Ids encode(const Tokenizer& tok, const std::string& text) { return tok.encode(text, false); }

}  // namespace

TEST_CASE("real tokenizer: a named system turn, reasoning history, thinking at max; attributes are four segments") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    ChatMessage sys = chat_message("system", "Be brief.");
    sys.name = "_private";
    std::vector<ChatMessage> msgs = {sys, chat_message("user", "2+2?"), chat_message("assistant", "4", "Add."), chat_message("user", "And 3+3?")};
    ChatOptions opt;
    opt.thinking = true;
    ChatExpect e{*tok};
    e.system("thinking-effort", kEffort + "max`.");
    e.M("system", {{"name", "_private"}}).T("Be brief.").end_message();
    e.M("user").T("2+2?").end_message();
    e.M("assistant").O("think").T("Add.").C("think").O("response").T("4").C("response").end_message();
    e.M("user").T("And 3+3?").end_message();
    e.M("assistant").O("think");
    const Ids ids = render_chat(*tok, msgs, opt);
    CHECK(ids == e.ids);
    // The generation opener is <|open|>think<|sep|>: three tokens, the ones usage leaves out.
    REQUIRE(ids.size() > 3);
    CHECK(Ids(ids.end() - kGenerationOpenerTokens, ids.end()) == Ids{163587, encode(*tok, "think").at(0), 163589});
    // Teeth: the attribute as one segment is other tokens.
    CHECK(encode(*tok, " name=\"_private\"") != [&] {
        Ids a = encode(*tok, " name");
        for (const char* s : {"=\"", "_private", "\""}) {
            Ids b = encode(*tok, s);
            a.insert(a.end(), b.begin(), b.end());
        }
        return a;
    }());
}

TEST_CASE("real tokenizer: attribute values escape only & and \"") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    ChatMessage user = chat_message("user", "hi");
    user.name = "<b>&\"q\"";
    std::vector<ChatMessage> msgs = {user};
    ChatOptions opt;
    opt.add_generation_prompt = false;
    ChatExpect e{*tok};
    e.M("user", {{"name", "<b>&amp;&quot;q&quot;"}}).T("hi").end_message();
    CHECK(render_chat(*tok, msgs, opt) == e.ids);
    CHECK(encode(*tok, "<b>&amp;&quot;q&quot;") != encode(*tok, "&lt;b&gt;&amp;&quot;q&quot;"));
}

TEST_CASE("real tokenizer: tools, calls with every kind of argument, results put in call order, tool_choice last") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    ChatMessage call = chat_message("assistant", "");
    call.tool_calls = {
        {"get_weather", R"({"city":"Paris","days":3,"opts":{"b":[true,false],"a":1.50},"note":null})", "call_a"},
        {"lookup", "{city: Paris}", "call_b"},
        {"now", "  ", "call_c"},
    };
    std::vector<ChatMessage> msgs = {chat_message("user", "Weather?"), call, tool_result("call_c", "12:00"),
                                     tool_result("call_a", "sunny"), tool_result("call_b", "found")};
    ChatOptions opt;
    // Keys unsorted and a null description, as a client may send them.
    opt.tools_json = R"([{"type":"function","function":{"name":"get_weather","description":null,"parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
    opt.tool_choice = ToolChoice::Required;
    ChatExpect e{*tok};
    e.system("tool-declare",
             "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
             R"([{"function":{"name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"type":"object"}},"type":"function"}])"
             "\n```");
    e.M("user").T("Weather?").end_message();
    e.M("assistant").O("response").C("response").O("tools");
    e.O("call", {{"tool", "get_weather"}, {"index", "1"}});
    e.O("argument", {{"key", "city"}, {"type", "string"}}).T("Paris").C("argument");
    e.O("argument", {{"key", "days"}, {"type", "number"}}).T("3").C("argument");
    e.O("argument", {{"key", "opts"}, {"type", "object"}}).T("{\"b\": [true, false], \"a\": 1.5}").C("argument");
    e.O("argument", {{"key", "note"}, {"type", "null"}}).T("null").C("argument");
    e.C("call");
    e.O("call", {{"tool", "lookup"}, {"index", "2"}}).O("json", {{"type", "object"}}).T("{city: Paris}").C("json").C("call");
    e.O("call", {{"tool", "now"}, {"index", "3"}}).C("call");
    e.C("tools").end_message();
    e.M("tool", {{"tool", "get_weather"}, {"index", "1"}}).T("sunny").end_message();
    e.M("tool", {{"tool", "lookup"}, {"index", "2"}}).T("found").end_message();
    e.M("tool", {{"tool", "now"}, {"index", "3"}}).T("12:00").end_message();
    e.system("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
    e.M("assistant").O("response");
    CHECK(render_chat(*tok, msgs, opt) == e.ids);
    CHECK(encode(*tok, "{\"b\": [true, false], \"a\": 1.5}") != encode(*tok, "{\"b\":[true,false],\"a\":1.5}"));

    // One result whose id matches no call: the run keeps its order, each result its own name,
    // else the name of the call at its position; index still counts 1, 2.
    msgs = {chat_message("user", "Weather?"), call, tool_result("call_x", "x", "mine"), tool_result("call_a", "sunny")};
    opt.tools_json.clear();
    opt.tool_choice = ToolChoice::None;
    ChatExpect f{*tok};
    f.M("tool", {{"tool", "mine"}, {"index", "1"}}).T("x").end_message();
    f.M("tool", {{"tool", "lookup"}, {"index", "2"}}).T("sunny").end_message();
    f.system("tool-choice", "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.");
    f.M("assistant").O("response");
    const Ids ids = render_chat(*tok, msgs, opt);
    REQUIRE(ids.size() > f.ids.size());
    CHECK(Ids(ids.end() - long(f.ids.size()), ids.end()) == f.ids);

    // A result missing: index is the running count, not the call's position.
    msgs = {chat_message("user", "Weather?"), call, tool_result("call_b", "found"), chat_message("user", "and?"),
            tool_result("call_c", "late", "now")};
    opt.tool_choice = ToolChoice::Auto;
    opt.add_generation_prompt = false;
    ChatExpect g{*tok};
    g.M("tool", {{"tool", "lookup"}, {"index", "1"}}).T("found").end_message();
    g.M("user").T("and?").end_message();
    g.M("tool", {{"tool", "now"}, {"index", "2"}}).T("late").end_message();
    const Ids tail = render_chat(*tok, msgs, opt);
    REQUIRE(tail.size() > g.ids.size());
    CHECK(Ids(tail.end() - long(g.ids.size()), tail.end()) == g.ids);

    // JSON that is not an object is refused.
    call.tool_calls = {{"f", "[1, 2]", "c"}};
    msgs = {chat_message("user", "x"), call};
    CHECK_THROWS_WITH_AS(render_chat(*tok, msgs, opt), doctest::Contains("not an object"), Error);
}

TEST_CASE("real tokenizer: whitespace-only reasoning is an empty think channel; each content part its own segment") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    ChatMessage user = chat_message("user", "Hello");
    user.part_starts = {3};  // parts "Hel" and "lo"
    ChatMessage answer = chat_message("assistant", "Fine.", " \n\t ");
    std::vector<ChatMessage> msgs = {user, answer};
    ChatOptions opt;
    opt.thinking = true;
    opt.thinking_effort = "low";
    opt.add_generation_prompt = false;
    ChatExpect e{*tok};
    e.system("thinking-effort", kEffort + "low`.");
    e.M("user").T("Hel").T("lo").end_message();
    e.M("assistant").O("think").C("think").O("response").T("Fine.").C("response").end_message();
    CHECK(render_chat(*tok, msgs, opt) == e.ids);
    CHECK(encode(*tok, "Hello") != ChatExpect{*tok}.T("Hel").T("lo").ids);
}

TEST_CASE("real tokenizer: developer is system; a system message's own tools are declared where it stands") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    ChatMessage dev = chat_message("developer", "ignored when it declares tools");
    dev.tools_json = R"([{"type":"function","function":{"parameters":{"type":"object"},"name":"search"}}])";
    std::vector<ChatMessage> msgs = {chat_message("developer", "Be kind."), chat_message("user", "Find it."), dev};
    ChatOptions opt;
    opt.tools_json = R"([{"type":"function","function":{"name":"open"}}])";
    ChatExpect e{*tok};
    e.system("tool-declare",
             "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
             R"([{"function":{"name":"open"},"type":"function"}])"
             "\n```");
    e.M("system").T("Be kind.").end_message();
    e.M("user").T("Find it.").end_message();
    e.system("tool-declare",
             "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
             "You have access to all existing and extended tools.\nHere are the specs for the extended tools.\n\n```json\n"
             R"([{"function":{"name":"search","parameters":{"type":"object"}},"type":"function"}])"
             "\n```");
    e.M("assistant").O("response");
    CHECK(render_chat(*tok, msgs, opt) == e.ids);
    // Tools on a user message are refused.
    ChatMessage user = chat_message("user", "");
    user.tools_json = dev.tools_json;
    msgs = {user};
    CHECK_THROWS_WITH_AS(render_chat(*tok, msgs, opt), doctest::Contains("only system messages declare tools"), Error);
}

TEST_CASE("real tokenizer: response_format last before the generation prompt, after the tool choice") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    std::vector<ChatMessage> msgs = {chat_message("user", "A pet.")};
    ChatOptions opt;
    opt.response_format = {"json_schema",
                           R"({"type":"object","properties":{"name":{"type":"string"},"age":{"minimum":0.5,"type":"number"}},"required":["name"]})"};
    const std::string lead =
        "The system is invoked with `response_format=";
    const std::string rest =
        "`.\nYour response must be raw JSON data without markdown code blocks (```json) or any additional formatting.";
    ChatExpect e{*tok};
    e.M("user").T("A pet.").end_message();
    e.system("response-format",
             lead + "json_schema" + rest + "\nThe JSON data must match the following schema:\n```json\n" +
                 R"({"properties":{"age":{"minimum":0.5,"type":"number"},"name":{"type":"string"}},"required":["name"],"type":"object"})" +
                 "\n```");
    e.M("assistant").O("response");
    CHECK(render_chat(*tok, msgs, opt) == e.ids);

    opt.response_format = {"json_object", ""};
    ChatExpect f{*tok};
    f.M("user").T("A pet.").end_message();
    f.system("response-format", lead + "json_object" + rest);
    f.M("assistant").O("response");
    CHECK(render_chat(*tok, msgs, opt) == f.ids);

    opt.tool_choice = ToolChoice::Required;
    ChatExpect h{*tok};
    h.M("user").T("A pet.").end_message();
    h.system("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
    h.system("response-format", lead + "json_object" + rest);
    h.M("assistant").O("response");
    CHECK(render_chat(*tok, msgs, opt) == h.ids);

    opt.tool_choice = ToolChoice::Auto;
    opt.response_format = {"text", ""};
    ChatExpect g{*tok};
    g.M("user").T("A pet.").end_message();
    g.M("assistant").O("response");
    CHECK(render_chat(*tok, msgs, opt) == g.ids);
}

TEST_CASE("real tokenizer: efforts low, high and max are rendered; medium is not an effort the encoder writes") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    std::vector<ChatMessage> msgs = {chat_message("user", "x")};
    ChatOptions opt;
    opt.thinking = true;
    for (const char* effort : {"low", "high", "max"}) {
        CAPTURE(effort);
        opt.thinking_effort = effort;
        ChatExpect e{*tok};
        e.system("thinking-effort", kEffort + effort + "`.");
        e.M("user").T("x").end_message();
        e.M("assistant").O("think");
        CHECK(render_chat(*tok, msgs, opt) == e.ids);
    }
    opt.thinking_effort = "medium";
    CHECK_THROWS_WITH_AS(render_chat(*tok, msgs, opt), doctest::Contains("unknown thinking_effort 'medium'"), Error);
}
