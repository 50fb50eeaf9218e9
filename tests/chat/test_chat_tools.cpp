// Tools in the chat layout (xtml-tools.md): exact ids for tool declarations, tool choice,
// history with calls and results; the output parser on hand-written XTML fed token by token,
// including tags whose text is split across several tokens, thinking off, truncated and
// malformed calls.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "chat_expect.h"
#include "k3/chat.h"
#include "k3/error.h"
#include "tokenizer/tokenizer_fixtures.h"

using namespace k3;
using namespace k3::test;

namespace {

using Ids = std::vector<int32_t>;

const Tokenizer& tok() {
    static auto t = kimi_over_o200k();
    return *t;
}

struct Expect : ChatExpect {
    Expect() : ChatExpect{::tok()} {}
};

const std::string kTools =
    R"([{"function":{"description":"Weather for a city","name":"get_weather","parameters":{"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"type":"object"}},"type":"function"}])";

ChatMessage message(std::string role, std::string text) {
    ChatMessage m;
    m.role = std::move(role);
    m.content = std::move(text);
    return m;
}

ChatMessage user(std::string text) { return message("user", std::move(text)); }

}  // namespace

TEST_CASE("tools: declaration first, tool choice after all messages, exact ids") {
    std::vector<ChatMessage> msgs = {message("system", "Be brief."), user("Weather in Paris?")};
    ChatOptions opt;
    opt.tools_json = kTools;
    opt.tool_choice = ToolChoice::Required;
    Expect e;
    e.system("tool-declare", "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" + kTools + "\n```");
    e.M("system").T("Be brief.").end_message();
    e.M("user").T("Weather in Paris?").end_message();
    e.system("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
    e.M("assistant").O("response");
    CHECK(render_chat(tok(), msgs, opt) == e.ids);

    opt.tool_choice = ToolChoice::None;
    std::string none = tok().decode(render_chat(tok(), msgs, opt));
    CHECK(none.find("`tool_choice=none`.\nYou MUST NOT call any tools in the next message.") != std::string::npos);
    opt.tool_choice = ToolChoice::Auto;
    CHECK(tok().decode(render_chat(tok(), msgs, opt)).find("tool-choice") == std::string::npos);
}

TEST_CASE("tools: history with calls and results renders in K3's format, exact ids") {
    ChatMessage call;
    call.role = "assistant";
    call.content = "Checking.";
    call.tool_calls = {{"get_weather", R"({"city":"Paris & \"Nice\"","days":3})", "c1"}, {"get_time", "{}", "c2"}};
    ChatMessage result;
    result.role = "tool";
    result.content = "{\"temp\":21}";
    result.tool_call_id = "c1";
    std::vector<ChatMessage> msgs = {user("Weather?"), call, result};
    ChatOptions opt;
    opt.tools_json = kTools;
    opt.tool_choice = ToolChoice::Required;  // after all messages: after the result
    Ids ids = render_chat(tok(), msgs, opt);
    Expect e;
    e.system("tool-declare", "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n" + kTools + "\n```");
    e.M("user").T("Weather?").end_message();
    e.M("assistant").O("response").T("Checking.").C("response");
    e.O("tools");
    e.O("call", {{"tool", "get_weather"}, {"index", "1"}});
    e.O("argument", {{"key", "city"}, {"type", "string"}}).T("Paris & \"Nice\"").C("argument");
    e.O("argument", {{"key", "days"}, {"type", "number"}}).T("3").C("argument");
    e.C("call");
    e.O("call", {{"tool", "get_time"}, {"index", "2"}}).C("call");
    e.C("tools").end_message();
    e.M("tool", {{"tool", "get_weather"}, {"index", "1"}}).T("{\"temp\":21}").end_message();
    e.system("tool-choice", "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.");
    e.M("assistant").O("response");
    CHECK(ids == e.ids);

    // Attribute values escape & and " only; arguments that are JSON but not an object are refused.
    call.tool_calls = {{"a\"b<c>", "{}"}};
    msgs = {user("x"), call};
    CHECK(tok().decode(render_chat(tok(), msgs, {})).find("call tool=\"a&quot;b<c>\" index=\"1\"") != std::string::npos);
    call.tool_calls = {{"f", "[1,2]"}};
    msgs = {user("x"), call};
    CHECK_THROWS_WITH_AS(render_chat(tok(), msgs, {}), doctest::Contains("not an object"), Error);
}

namespace {

struct Call {
    std::string name, arguments;
};

struct Parsed {
    std::string reasoning, content, malformed;
    std::vector<Call> calls;
    std::vector<ToolCallDelta> deltas;
    bool ended = false;
    int complete_calls = 0;
};

Parsed parse(const Ids& ids, bool thinking, std::vector<std::string> declared = {"get_weather", "get_time"}) {
    ChatOutputParser p(tok(), thinking, ToolParsing{true, std::move(declared)});
    Parsed out;
    auto take = [&](const ChatOutputParser::Delta& d) {
        out.reasoning += d.reasoning;
        out.content += d.content;
        if (!d.malformed.empty()) out.malformed = d.malformed;
        for (const auto& t : d.tool_calls) {
            out.deltas.push_back(t);
            if (!t.name.empty()) {
                REQUIRE(t.index == int(out.calls.size()));
                out.calls.push_back({t.name, ""});
            }
            REQUIRE(t.index == int(out.calls.size()) - 1);
            out.calls.back().arguments += t.arguments;
        }
        out.ended = out.ended || d.end_of_turn;
    };
    for (int32_t id : ids) take(p.push(id));
    take(p.flush());
    out.complete_calls = p.tool_calls();
    return out;
}

// The ids of `text` encoded one byte at a time (so every tag name and argument body is split
// across many tokens), with the control tokens as specials.
Ids byte_tokens(const std::string& xtml) {
    Ids ids;
    for (size_t i = 0; i < xtml.size();) {
        bool special = false;
        for (const char* s : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>", "[EOS]"}) {
            std::string sv = s;
            if (xtml.compare(i, sv.size(), sv) == 0) {
                ids.push_back(*tok().special_id(sv));
                i += sv.size();
                special = true;
                break;
            }
        }
        if (special) continue;
        ids.push_back(tok().encode(std::string(1, xtml[i]), false)[0]);
        ++i;
    }
    return ids;
}

const std::string kCallTurn =
    "Let me check.<|close|>response<|sep|>"
    "<|open|>tools<|sep|>\n"
    "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris \"東京\"\n<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|> 3 <|close|>argument<|sep|>"
    "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"units\": \"C\"}<|close|>argument<|sep|>"
    "<|close|>call<|sep|>\n"
    "<|open|>call tool=\"get_time\" index=\"2\"<|sep|><|open|>json<|sep|>{\"zone\": \"UTC\"}<|close|>json<|sep|><|close|>call<|sep|>"
    "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

}  // namespace

TEST_CASE("parser: calls from hand-written XTML, whole tokens and byte by byte give the same calls") {
    for (bool bytewise : {false, true}) {
        CAPTURE(bytewise);
        Ids ids = bytewise ? byte_tokens(kCallTurn) : tok().encode(kCallTurn, true);
        Parsed p = parse(ids, /*thinking=*/false);
        CHECK(p.content == "Let me check.");
        CHECK(p.malformed.empty());
        CHECK(p.ended);
        CHECK(p.complete_calls == 2);
        REQUIRE(p.calls.size() == 2);
        CHECK(p.calls[0].name == "get_weather");
        CHECK(p.calls[0].arguments == R"({"city":"Paris \"東京\"\n","days":3,"opts":{"units":"C"}})");
        CHECK(nlohmann::json::parse(p.calls[0].arguments)["city"] == "Paris \"東京\"\n");
        CHECK(p.calls[1].name == "get_time");
        CHECK(p.calls[1].arguments == R"({"zone":"UTC"})");
        // The name comes alone on the call's first delta; no delta carries tag text.
        CHECK(p.deltas.front().arguments.empty());
        for (const auto& d : p.deltas) CHECK(d.arguments.find("<|") == std::string::npos);
        if (bytewise) CHECK(p.deltas.size() > 10);  // the string body streamed in pieces
    }
}

TEST_CASE("parser: thinking on, reasoning first, then calls") {
    std::string turn = "I should call it.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
                       "<|open|>tools<|sep|><|open|>call tool=\"get_time\" index=\"1\"<|sep|><|close|>call<|sep|>"
                       "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";
    Parsed p = parse(tok().encode(turn, true), true);
    CHECK(p.reasoning == "I should call it.");
    CHECK(p.content.empty());
    REQUIRE(p.calls.size() == 1);
    CHECK(p.calls[0].arguments == "{}");
}

TEST_CASE("parser: malformed or truncated calls degrade to content, never lose text") {
    std::string head = "Sure.<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>";
    // Truncated inside a string argument (max_tokens): the channel comes back as content.
    std::string truncated = head + "<|open|>argument key=\"city\" type=\"string\"<|sep|>Par";
    Parsed t = parse(tok().encode(truncated, true), false);
    CHECK(t.malformed.find("ended inside a call") != std::string::npos);
    CHECK(t.complete_calls == 0);
    CHECK(t.content == "Sure." + truncated.substr(truncated.find("<|open|>tools")));

    // A number argument whose body is not JSON.
    std::string bad_number = head + "<|open|>argument key=\"days\" type=\"number\"<|sep|>three<|close|>argument<|sep|>"
                                    "<|close|>call<|sep|><|close|>tools<|sep|><|end_of_msg|>";
    Parsed b = parse(tok().encode(bad_number, true), false);
    CHECK(b.malformed.find("not a JSON number") != std::string::npos);
    CHECK(b.content.find("three<|close|>argument<|sep|><|close|>call") != std::string::npos);
    CHECK(b.ended);

    // An undeclared tool, an unknown element.
    Parsed u = parse(tok().encode("<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"rm_rf\"<|sep|>", true), false);
    CHECK(u.malformed.find("undeclared tool 'rm_rf'") != std::string::npos);
    Parsed x = parse(tok().encode(head + "<|open|>blob<|sep|>", true), false);
    CHECK(x.malformed.find("unknown element 'blob'") != std::string::npos);
}

TEST_CASE("parser: a typed argument whose body is valid JSON of another type is malformed; its own type passes") {
    auto one_argument = [](const std::string& type, const std::string& body) {
        return "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
               "<|open|>argument key=\"v\" type=\"" + type + "\"<|sep|>" + body +
               "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|end_of_msg|>";
    };
    struct Case {
        const char* type;
        const char* accepted;           // a body of the declared type, as the arguments carry it
        std::vector<const char*> other;  // valid JSON of other types: each alone must be refused
    };
    const std::vector<Case> cases = {
        {"number", "-2.5", {"true", "\"3\"", "null", "[3]", "{\"n\":3}"}},
        {"boolean", "false", {"0", "1", "\"true\"", "null", "[true]"}},
        {"null", "null", {"0", "false", "\"null\"", "[]", "{}"}},
        {"object", "{\"a\":[1]}", {"[1]", "\"{}\"", "null", "1", "true"}},
        {"array", "[1,\"b\"]", {"{\"0\":1}", "\"[]\"", "null", "1", "false"}},
    };
    for (const Case& c : cases) {
        CAPTURE(c.type);
        Parsed ok = parse(tok().encode(one_argument(c.type, c.accepted), true), false);
        CHECK(ok.malformed.empty());
        CHECK(ok.complete_calls == 1);
        REQUIRE(ok.calls.size() == 1);
        CHECK(ok.calls[0].arguments == std::string("{\"v\":") + c.accepted + "}");
        for (const char* body : c.other) {
            CAPTURE(body);
            Parsed bad = parse(tok().encode(one_argument(c.type, body), true), false);
            CHECK(bad.malformed.find(std::string("not a JSON ") + c.type) != std::string::npos);
            CHECK(bad.complete_calls == 0);
            CHECK(bad.content.find(std::string("<|sep|>") + body + "<|close|>argument") != std::string::npos);
        }
    }
    // A json element holds the whole arguments object: valid JSON that is not an object is malformed.
    auto json_element = [](const std::string& body) {
        return "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"get_time\" index=\"1\"<|sep|>"
               "<|open|>json<|sep|>" + body + "<|close|>json<|sep|><|close|>call<|sep|><|close|>tools<|sep|><|end_of_msg|>";
    };
    Parsed object = parse(tok().encode(json_element(R"({"zone": "UTC"})"), true), false);
    CHECK(object.malformed.empty());
    REQUIRE(object.calls.size() == 1);
    CHECK(object.calls[0].arguments == R"({"zone":"UTC"})");
    for (const char* body : {"[1,2]", "\"{}\"", "null", "7", "true"}) {
        CAPTURE(body);
        Parsed bad = parse(tok().encode(json_element(body), true), false);
        CHECK(bad.malformed.find("not a JSON object") != std::string::npos);
        CHECK(bad.complete_calls == 0);
    }
    // A string argument takes any text, JSON or not, as the string's characters.
    Parsed s = parse(tok().encode(one_argument("string", "true"), true), false);
    CHECK(s.malformed.empty());
    REQUIRE(s.calls.size() == 1);
    CHECK(s.calls[0].arguments == R"({"v":"true"})");
}

TEST_CASE("parser: without tool parsing a tools channel is dropped as before") {
    ChatOutputParser p(tok(), false);
    std::string content;
    for (int32_t id : tok().encode(kCallTurn, true)) {
        auto d = p.push(id);
        content += d.content;
        CHECK(d.tool_calls.empty());
    }
    CHECK(content == "Let me check.");
}
