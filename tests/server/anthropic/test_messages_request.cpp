// The Messages API's request mapping (server/anthropic/request.cpp), one condition at a time:
// each block type against the chat request it means (the reference is the chat request written
// by hand and rendered by the chat parser, so a block mapped to the wrong role, field or order
// renders another prompt), the placement rules for tool_use / tool_result / thinking blocks and
// their pairing, our thinking signatures (the text rides in them) against tampered and foreign
// ones, the tool_choice forms, and the tolerance policy: which fields are ignored and counted,
// which are refused with a 400 that names them (docs/api.md, "Anthropic Messages API",
// "Unknown fields"; docs/development.md, "Mutation check").
#include <doctest/doctest.h>

#include <algorithm>
#include <optional>

#include "anthropic/messages.h"
#include "fake_engine.h"
#include "fake_limits.h"
#include "wire/fields.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {


struct Parsed {
    GenerationRequest request;
    std::string prompt;  // the rendered prompt's text (the fake tokenizer is byte-level)
    IgnoredFields ignored;
};

Parsed messages(const json& body) {
    Parsed p;
    IgnoredFieldsScope scope(p.ignored);
    p.request = parse_messages_request(body, fake_tokenizer(), fake_limits());
    p.prompt = fake_tokenizer().decode(p.request.prompt);
    return p;
}

Parsed chat(const json& body) {
    Parsed p;
    IgnoredFieldsScope scope(p.ignored);
    p.request = parse_chat_request(body, fake_tokenizer(), fake_limits());
    p.prompt = fake_tokenizer().decode(p.request.prompt);
    return p;
}

// The 400 a Messages body is refused with (fails the case when it is accepted).
ApiError refusal(const json& body) {
    try {
        IgnoredFields ignored;
        IgnoredFieldsScope scope(ignored);
        parse_messages_request(body, fake_tokenizer(), fake_limits());
    } catch (const ApiError& e) {
        return e;
    }
    FAIL("accepted: " << body.dump());
    return ApiError(0, "", "", "", "");
}

json user(const json& content) { return {{"role", "user"}, {"content", content}}; }
json assistant(const json& content) { return {{"role", "assistant"}, {"content", content}}; }
json text(const std::string& t) { return {{"type", "text"}, {"text", t}}; }
// Both sides say thinking off: these cases are about the blocks' mapping, and a request that says
// nothing thinks (the case "thinking, display and effort" asserts that default).
json body_of(const json& msgs) {
    return {{"model", "claude-x"}, {"max_tokens", 512}, {"messages", msgs}, {"thinking", {{"type", "disabled"}}}};
}
json chat_of(const json& msgs) { return {{"model", "claude-x"}, {"max_completion_tokens", 512}, {"messages", msgs}, {"thinking", false}}; }

json weather_tool() {
    return {{"name", "get_weather"},
            {"description", "Weather in a city"},
            {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}}}};
}
json weather_function() {
    return {{"type", "function"},
            {"function", {{"name", "get_weather"}, {"description", "Weather in a city"},
                          {"parameters", weather_tool()["input_schema"]}}}};
}
json call_block(const std::string& id, const json& input) {
    return {{"type", "tool_use"}, {"id", id}, {"name", "get_weather"}, {"input", input}};
}
json chat_call(const std::string& id, const std::string& arguments) {
    return {{"id", id}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", arguments}}}};
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST_CASE("Messages request: system as a string, as blocks (each its own text segment), and as a turn") {
    json msgs = json::array({user("hi")});
    json b = body_of(msgs);
    b["system"] = "Be brief.";
    json c = chat_of(json::array({{{"role", "system"}, {"content", "Be brief."}}, user("hi")}));
    CHECK(messages(b).prompt == chat(c).prompt);
    b["system"] = json::array({text("Be"), text("brief.")});
    // Blocks are chat text parts: each its own segment, nothing between them (docs/model.md
    // "Chat layout"), not one text joined by newlines.
    c["messages"][0]["content"] = json::array({text("Be"), text("brief.")});
    CHECK(messages(b).prompt == chat(c).prompt);
    CHECK(messages(b).prompt.find("Bebrief.") != std::string::npos);
    // A system turn inside messages is rendered where it stands, not moved to the front.
    json mid = body_of(json::array({user("a"), assistant("b"), {{"role", "system"}, {"content", json::array({text("now terse")})}}, user("c")}));
    json mid_chat = chat_of(json::array({user("a"), assistant("b"), {{"role", "system"}, {"content", "now terse"}}, user("c")}));
    CHECK(messages(mid).prompt == chat(mid_chat).prompt);
    CHECK(messages(mid).prompt != messages(body_of(json::array({user("a"), assistant("b"), user("c")}))).prompt);
}

TEST_CASE("Messages request: a user turn's text blocks are one message; content as a string or blocks") {
    CHECK(messages(body_of(json::array({user(json::array({text("ab"), text("cd")}))}))).prompt ==
          chat(chat_of(json::array({user("abcd")}))).prompt);
    CHECK(messages(body_of(json::array({user("abcd")}))).prompt == chat(chat_of(json::array({user("abcd")}))).prompt);
    // An assistant turn as a string and as a text block.
    json as_string = body_of(json::array({user("q"), assistant("the answer"), user("more")}));
    json as_block = body_of(json::array({user("q"), assistant(json::array({text("the answer")})), user("more")}));
    CHECK(messages(as_string).prompt == messages(as_block).prompt);
    CHECK(messages(as_string).prompt == chat(chat_of(json::array({user("q"), assistant("the answer"), user("more")}))).prompt);
}

TEST_CASE("Messages request: tool_use becomes the assistant's tool call, tool_result the tool message after it") {
    json b = body_of(json::array({user("Weather in Oslo?"),
                                  assistant(json::array({text("Checking."), call_block("toolu_1", {{"city", "Oslo"}})})),
                                  user(json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "-3 C"}}}))}));
    b["tools"] = json::array({weather_tool()});
    json c = chat_of(json::array({user("Weather in Oslo?"),
                                  {{"role", "assistant"}, {"content", "Checking."}, {"tool_calls", json::array({chat_call("toolu_1", R"({"city":"Oslo"})")})}},
                                  {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "-3 C"}}}));
    c["tools"] = json::array({weather_function()});
    Parsed m = messages(b);
    CHECK(m.prompt == chat(c).prompt);
    CHECK(m.prompt.find("key=\"city\" type=\"string\"<|sep|>Oslo<|close|>argument") != std::string::npos);
    CHECK(m.request.params.tools_json == chat(c).request.params.tools_json);

    // A result as text blocks is their text parts, each its own segment; is_error marks it.
    json blocks = b;
    blocks["messages"][2]["content"][0]["content"] = json::array({text("-3 C"), text("windy")});
    json blocks_chat = c;
    blocks_chat["messages"][2]["content"] = json::array({text("-3 C"), text("windy")});
    CHECK(messages(blocks).prompt == chat(blocks_chat).prompt);
    json failed = b;
    failed["messages"][2]["content"][0]["is_error"] = true;
    json failed_chat = c;
    failed_chat["messages"][2]["content"] = "Error: -3 C";
    CHECK(messages(failed).prompt == chat(failed_chat).prompt);
    // A failed result as blocks: "Error: " opens its first segment.
    json failed_blocks = blocks;
    failed_blocks["messages"][2]["content"][0]["is_error"] = true;
    json failed_blocks_chat = c;
    failed_blocks_chat["messages"][2]["content"] = json::array({text("Error: -3 C"), text("windy")});
    CHECK(messages(failed_blocks).prompt == chat(failed_blocks_chat).prompt);
    json not_failed = b;
    not_failed["messages"][2]["content"][0]["is_error"] = false;
    CHECK(messages(not_failed).prompt == m.prompt);

    // A tool_use without input is called with {}; text after the results is a user message of
    // its own; results alone add no empty user message.
    json no_input = b;
    no_input["messages"][1]["content"][1].erase("input");
    json no_input_chat = c;
    no_input_chat["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{}";
    CHECK(messages(no_input).prompt == chat(no_input_chat).prompt);
    json with_text = b;
    with_text["messages"][2]["content"].push_back(text("And tomorrow?"));
    json with_text_chat = c;
    with_text_chat["messages"].push_back(user("And tomorrow?"));
    CHECK(messages(with_text).prompt == chat(with_text_chat).prompt);
    json empty_user = c;
    empty_user["messages"].push_back(user(""));
    CHECK(m.prompt != chat(empty_user).prompt);
}

TEST_CASE("Messages request: two calls in one turn and their results, in order") {
    json b = body_of(json::array({user("Oslo and Rome?"),
                                  assistant(json::array({call_block("toolu_a", {{"city", "Oslo"}}), call_block("toolu_b", {{"city", "Rome"}})})),
                                  user(json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_a"}, {"content", "-3 C"}},
                                                    {{"type", "tool_result"}, {"tool_use_id", "toolu_b"}, {"content", "14 C"}}}))}));
    b["tools"] = json::array({weather_tool()});
    json c = chat_of(json::array({user("Oslo and Rome?"),
                                  {{"role", "assistant"}, {"content", ""},
                                   {"tool_calls", json::array({chat_call("toolu_a", R"({"city":"Oslo"})"), chat_call("toolu_b", R"({"city":"Rome"})")})}},
                                  {{"role", "tool"}, {"tool_call_id", "toolu_a"}, {"content", "-3 C"}},
                                  {{"role", "tool"}, {"tool_call_id", "toolu_b"}, {"content", "14 C"}}}));
    c["tools"] = json::array({weather_function()});
    CHECK(messages(b).prompt == chat(c).prompt);
    json swapped = b;
    std::swap(swapped["messages"][2]["content"][0], swapped["messages"][2]["content"][1]);
    // Results sent out of order are put into the order of the calls by their ids (docs/model.md
    // "Chat layout"): the same prompt, Oslo's result first.
    CHECK(messages(swapped).prompt == messages(b).prompt);
}

TEST_CASE("Messages request: each block is refused outside the turn it belongs to, and a result needs its call") {
    json call_turn = assistant(json::array({call_block("toolu_1", {{"city", "Oslo"}})}));
    json result = {{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "-3 C"}};
    json thinking = {{"type", "thinking"}, {"thinking", "hmm"}, {"signature", ""}};
    json ok = body_of(json::array({user("q"), call_turn, user(json::array({result}))}));
    ok["tools"] = json::array({weather_tool()});
    CHECK_NOTHROW(messages(ok));

    ApiError e = refusal(body_of(json::array({user(json::array({call_block("toolu_1", json::object())}))})));
    CHECK(e.status == 400);
    CHECK(e.param == "messages[0].content[0].type");
    CHECK(std::string(e.what()).find("'tool_use' block cannot be in a user turn") != std::string::npos);
    e = refusal(body_of(json::array({user("q"), assistant(json::array({result}))})));
    CHECK(e.param == "messages[1].content[0].type");
    CHECK(std::string(e.what()).find("'tool_result' block cannot be in a assistant turn") != std::string::npos);
    e = refusal(body_of(json::array({user(json::array({thinking}))})));
    CHECK(e.param == "messages[0].content[0].type");

    // The pairing: a result whose id answers no earlier call, and one without an id.
    json unpaired = ok;
    unpaired["messages"][2]["content"][0]["tool_use_id"] = "toolu_2";
    e = refusal(unpaired);
    CHECK(e.status == 400);
    CHECK(std::string(e.what()).find("'toolu_2', which answers no earlier assistant tool call") != std::string::npos);
    json no_id = ok;
    no_id["messages"][2]["content"][0].erase("tool_use_id");
    e = refusal(no_id);
    CHECK(e.param == "messages[2].content[0].tool_use_id");
    CHECK(e.code == "missing_required_parameter");
    // A call's input must be an object.
    json list_input = ok;
    list_input["messages"][1]["content"][0]["input"] = json::array({"Oslo"});
    e = refusal(list_input);
    CHECK(e.param == "messages[1].content[0].input");
    // An image in a user turn reaches the image check (these limits: a model without a vision
    // tower, so it is refused saying so; docs/api.md "Images"), documents are refused by name,
    // and so is an image in a tool result; a block that is not an object is refused.
    json image = {{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AAAA"}}}};
    e = refusal(body_of(json::array({user(json::array({image}))})));
    CHECK(e.code == "images_not_supported");
    CHECK(e.param == "messages[0].content[0]");
    e = refusal(body_of(json::array({user(json::array({{{"type", "document"}}}))})));
    CHECK(e.code == "unsupported_content");
    CHECK(e.param == "messages[0].content[0].type");
    json image_result = ok;
    image_result["messages"][2]["content"][0]["content"] = json::array({image});
    e = refusal(image_result);
    CHECK(e.code == "unsupported_content");
    CHECK(e.param == "messages[2].content[0].content[0].type");
    e = refusal(body_of(json::array({user(json::array({"text"}))})));
    CHECK(e.param == "messages[0].content[0]");
    e = refusal(body_of(json::array({{{"role", "tool"}, {"content", "x"}}})));
    CHECK(e.param == "messages[0].role");
}

TEST_CASE("Messages request: thinking blocks, and our signatures against tampered and foreign ones") {
    const std::string reasoning = "Oslo is cold in December.";
    for (std::string s : {std::string(""), std::string("a"), std::string("ab"), std::string("abc"), std::string("abcd"),
                          reasoning, std::string("\xe2\x82\xac \x01\xff")}) {
        CAPTURE(s);
        auto back = thinking_from_signature(thinking_signature(s));
        REQUIRE(back);
        CHECK(*back == s);
    }
    std::string sig = thinking_signature(reasoning);
    CHECK(sig.rfind("k3s1.", 0) == 0);
    // One character changed in the text or in the hash, the prefix, or the hash cut off.
    std::string bad_text = sig;
    bad_text[6] = bad_text[6] == 'A' ? 'B' : 'A';
    CHECK_FALSE(thinking_from_signature(bad_text));
    std::string bad_hash = sig;
    bad_hash.back() = bad_hash.back() == '0' ? '1' : '0';
    CHECK_FALSE(thinking_from_signature(bad_hash));
    CHECK_FALSE(thinking_from_signature("k3s2." + sig.substr(5)));
    CHECK_FALSE(thinking_from_signature(sig.substr(0, sig.rfind('.'))));
    CHECK_FALSE(thinking_from_signature("EqQBCkYIBRgCKkBa"));  // another server's
    CHECK_FALSE(thinking_from_signature(""));

    // In the history: the text as sent; empty text with our signature (display "omitted")
    // renders the text the signature holds; with a foreign or tampered one, none.
    json call_turn = json::array({call_block("toolu_1", {{"city", "Oslo"}})});
    auto history = [&](const json& thinking_block) {
        json turn = call_turn;
        turn.insert(turn.begin(), thinking_block);
        json b = body_of(json::array({user("q"), assistant(turn),
                                      user(json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "-3 C"}}}))}));
        b["tools"] = json::array({weather_tool()});
        b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
        return messages(b).prompt;
    };
    json reference = chat_of(json::array({user("q"),
                                          {{"role", "assistant"}, {"content", ""}, {"reasoning_content", reasoning},
                                           {"tool_calls", json::array({chat_call("toolu_1", R"({"city":"Oslo"})")})}},
                                          {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "-3 C"}}}));
    reference["tools"] = json::array({weather_function()});
    reference["thinking"] = true;
    std::string with_text = history({{"type", "thinking"}, {"thinking", reasoning}, {"signature", sig}});
    CHECK(with_text == chat(reference).prompt);
    CHECK(with_text.find(reasoning) != std::string::npos);
    CHECK(history({{"type", "thinking"}, {"thinking", ""}, {"signature", sig}}) == with_text);
    // The text sent wins over the signature's.
    std::string other = history({{"type", "thinking"}, {"thinking", "Rome is warm."}, {"signature", sig}});
    CHECK(other.find("Rome is warm.") != std::string::npos);
    CHECK(other.find(reasoning) == std::string::npos);
    json no_reasoning = reference;
    no_reasoning["messages"][1].erase("reasoning_content");
    std::string none = chat(no_reasoning).prompt;
    CHECK(none != with_text);
    CHECK(history({{"type", "thinking"}, {"thinking", ""}, {"signature", bad_hash}}) == none);
    CHECK(history({{"type", "thinking"}, {"thinking", ""}, {"signature", "EqQBCkYIBRgCKkBa"}}) == none);
    // redacted_thinking (another server's encrypted reasoning) renders nothing.
    CHECK(history({{"type", "redacted_thinking"}, {"data", "EmwKAhgBEgy3va3pzix"}}) == none);
}

TEST_CASE("Messages request: thinking, display and effort; each bad value refused by name") {
    json b = body_of(json::array({user("q")}));
    // Without `thinking` the request thinks at effort max, as a chat request that says nothing
    // does (xtml-tools.md, "Request fields to encoder inputs": thinking.type, else on).
    b.erase("thinking");
    CHECK(messages(b).request.params.thinking);
    json said_nothing = chat_of(json::array({user("q")}));
    said_nothing.erase("thinking");
    CHECK(messages(b).prompt == chat(said_nothing).prompt);
    CHECK(messages(b).prompt.find("invoked with `thinking_effort=max`.") != std::string::npos);
    b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
    CHECK(messages(b).request.params.thinking);
    CHECK_FALSE(messages(b).request.hide_reasoning);
    b["thinking"] = {{"type", "adaptive"}};
    CHECK(messages(b).request.params.thinking);
    b["thinking"] = {{"type", "disabled"}};
    CHECK_FALSE(messages(b).request.params.thinking);
    b["thinking"] = {{"type", "adaptive"}, {"display", "omitted"}};
    CHECK(messages(b).request.hide_reasoning);
    b["thinking"] = {{"type", "adaptive"}, {"display", "summarized"}};
    CHECK_FALSE(messages(b).request.hide_reasoning);
    // Effort reaches the prompt only with thinking on.
    json low = b, high = b;
    low["output_config"] = {{"effort", "low"}};
    high["output_config"] = {{"effort", "high"}};
    CHECK(messages(low).prompt != messages(high).prompt);
    json off_low = low, off_high = high;
    off_low["thinking"] = off_high["thinking"] = {{"type", "disabled"}};
    CHECK(messages(off_low).prompt == messages(off_high).prompt);

    struct Bad {
        const char* what;
        json thinking, output_config;
        const char* param;
    };
    for (const Bad& bad : std::vector<Bad>{
             {"type", {{"type", "on"}}, nullptr, "thinking.type"},
             {"budget below 1", {{"type", "enabled"}, {"budget_tokens", 0}}, nullptr, "budget_tokens"},
             {"display", {{"type", "adaptive"}, {"display", "full"}}, nullptr, "thinking.display"},
             {"not an object", true, nullptr, "thinking"},
             {"effort", nullptr, {{"effort", "extreme"}}, "output_config.effort"},
             {"format", nullptr, {{"format", {{"type", "json_schema"}}}}, "output_config.format"},
         }) {
        CAPTURE(bad.what);
        json x = body_of(json::array({user("q")}));
        if (!bad.thinking.is_null()) x["thinking"] = bad.thinking;
        if (!bad.output_config.is_null()) x["output_config"] = bad.output_config;
        ApiError e = refusal(x);
        CHECK(e.status == 400);
        CHECK(e.param == bad.param);
    }
}

TEST_CASE("Messages request: each tool_choice form and disable_parallel_tool_use on its own") {
    json b = body_of(json::array({user("q")}));
    b["tools"] = json::array({weather_tool()});
    CHECK(messages(b).request.params.tool_choice == ToolChoice::Auto);
    CHECK(messages(b).request.params.parallel_tool_calls);
    auto with_choice = [&](const json& choice) {
        json x = b;
        x["tool_choice"] = choice;
        return messages(x).request.params;
    };
    CHECK(with_choice({{"type", "auto"}}).tool_choice == ToolChoice::Auto);
    CHECK(with_choice({{"type", "any"}}).tool_choice == ToolChoice::Required);
    CHECK(with_choice({{"type", "none"}}).tool_choice == ToolChoice::None);
    GenerationParams named = with_choice({{"type", "tool"}, {"name", "get_weather"}});
    CHECK(named.forced_tool == "get_weather");
    CHECK(with_choice({{"type", "any"}}).forced_tool.empty());
    CHECK_FALSE(with_choice({{"type", "auto"}, {"disable_parallel_tool_use", true}}).parallel_tool_calls);
    CHECK(with_choice({{"type", "auto"}, {"disable_parallel_tool_use", false}}).parallel_tool_calls);
    CHECK_FALSE(with_choice({{"type", "any"}, {"disable_parallel_tool_use", true}}).parallel_tool_calls);

    for (const json& bad : {json{{"type", "required"}}, json("auto"), json{{"type", "tool"}, {"name", "nope"}},
                            json{{"type", "tool"}}}) {
        CAPTURE(bad.dump());
        json x = b;
        x["tool_choice"] = bad;
        CHECK(refusal(x).status == 400);
    }
    json x = b;
    x["tool_choice"] = {{"type", "required"}};
    CHECK(refusal(x).param == "tool_choice.type");
}

TEST_CASE("Messages request: unknown fields and blocks are ignored and named; hosted tools left out") {
    json b = body_of(json::array({user(json::array({{{"type", "text"}, {"text", "hi"}, {"cache_control", {{"type", "ephemeral"}}},
                                                     {"annotations", json::array()}}}))}));
    b["metadata"] = {{"user_id", "u1"}};
    b["betas_of_tomorrow"] = true;
    b["tools"] = json::array({weather_tool(), {{"type", "web_search_20250305"}, {"name", "web_search"}},
                              {{"name", "lazy"}, {"defer_loading", true}, {"input_schema", {{"type", "object"}}}}});
    Parsed p = messages(b);
    CHECK(has(p.ignored.fields, "betas_of_tomorrow"));
    CHECK(has(p.ignored.fields, "messages[0].content[0].annotations"));
    CHECK_FALSE(has(p.ignored.fields, "metadata"));  // known, changes nothing here
    CHECK_FALSE(has(p.ignored.fields, "messages[0].content[0].cache_control"));
    CHECK(p.ignored.tools == std::vector<std::string>{"web_search_20250305", "lazy (defer_loading)"});
    // Only the custom tool is offered: the same prompt as a request with it alone.
    json alone = body_of(json::array({user("hi")}));
    alone["tools"] = json::array({weather_tool()});
    CHECK(p.prompt == messages(alone).prompt);
    json custom = alone;
    custom["tools"][0]["type"] = "custom";
    CHECK(messages(custom).prompt == p.prompt);
    CHECK(messages(custom).ignored.tools.empty());

    // An unknown block type is left out and named; an unknown block in a system prompt too.
    json unknown_block = body_of(json::array({user(json::array({text("hi"), {{"type", "search_result"}, {"source", "x"}}}))}));
    Parsed u = messages(unknown_block);
    CHECK(has(u.ignored.fields, "messages[0].content[1](search_result)"));
    CHECK(u.prompt == messages(body_of(json::array({user("hi")}))).prompt);
    json unknown_system = body_of(json::array({user("hi")}));
    unknown_system["system"] = json::array({text("s"), {{"type", "mystery"}}});
    CHECK(has(messages(unknown_system).ignored.fields, "system[1](mystery)"));
    // A known field of the wrong type is refused, not ignored.
    json bad_system = body_of(json::array({user("hi")}));
    bad_system["system"] = 7;
    CHECK(refusal(bad_system).param == "system");
}

TEST_CASE("Messages request: the top-level fields, each refused alone when wrong") {
    json b = body_of(json::array({user("q")}));
    b["stop_sequences"] = json::array({"a", "b", "c", "d", "e"});  // more than chat's 4
    b["temperature"] = 1.0;
    b["top_k"] = 5;
    Parsed p = messages(b);
    CHECK(p.request.params.stop == std::vector<std::string>{"a", "b", "c", "d", "e"});
    CHECK(p.request.params.max_tokens == 512);
    CHECK(p.request.params.sampling.top_k == 5);
    CHECK(p.request.model == "claude-x");
    CHECK(p.request.endpoint == Endpoint::Messages);

    struct Bad {
        const char* key;
        json value;
        const char* param;
    };
    for (const Bad& bad : std::vector<Bad>{{"temperature", 1.5, "temperature"},
                                           {"temperature", -0.1, "temperature"},
                                           {"stop_sequences", "END", "stop_sequences"},
                                           {"stop_sequences", json::array({""}), "stop_sequences"},
                                           {"stop_sequences", json::array({1}), "stop_sequences"},
                                           {"messages", json::array(), "messages"},
                                           {"messages", "hi", "messages"},
                                           {"max_tokens", -1, "max_completion_tokens"},
                                           {"tools", json::object(), "tools"}}) {
        CAPTURE(bad.key);
        CAPTURE(bad.value.dump());
        json x = b;
        x[bad.key] = bad.value;
        ApiError e = refusal(x);
        CHECK(e.status == 400);
        CHECK(e.param == bad.param);
    }
    json no_messages = b;
    no_messages.erase("messages");
    CHECK(refusal(no_messages).code == "missing_required_parameter");
    CHECK(refusal(json::array()).status == 400);
}

TEST_CASE("Messages count_tokens: the prompt's length, also past the context") {
    json b = body_of(json::array({user("hello there")}));
    // Without the generation opener, as usage counts the prompt (docs/api.md "Thinking", Usage).
    CHECK(count_message_tokens(b, fake_tokenizer(), fake_limits()) ==
          int(messages(b).request.prompt.size()) - kGenerationOpenerTokens);
    json longer = body_of(json::array({user(std::string(6000, 'x'))}));
    CHECK(count_message_tokens(longer, fake_tokenizer(), fake_limits()) > fake_limits().n_ctx);
    json s = b;
    s["system"] = "sys";
    CHECK(count_message_tokens(s, fake_tokenizer(), fake_limits()) > count_message_tokens(b, fake_tokenizer(), fake_limits()));
}
