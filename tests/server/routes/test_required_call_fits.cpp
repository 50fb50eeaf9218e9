// A required or named tool call that the output limit cannot hold is refused up front with a 400
// naming the minimum (docs/api.md, "Tool calling"), on chat completions, Responses and Messages;
// at exactly that minimum the call completes. The minimum is worked out here from the spec's
// layout of a call (../shared/spec/xtml-tools.md, "The assistant's turn"): one token per control
// token and per byte of tag text, as the fake's byte-level vocabulary has it.
#include <doctest/doctest.h>

#include <string>

#include "server_harness.h"

using namespace k3::test;

namespace {

const json kParameters = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}, {"required", {"city"}}};
const json kChatTool = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", kParameters}}}};

// The shortest call of get_weather with thinking off: the response channel closed, then the
// tools channel with one call whose string argument is empty, then the message closed.
int shortest_call_tokens() {
    const std::string tag_text = std::string("response") + "tools" + "call tool=\"get_weather\" index=\"1\"" +
                                 "argument key=\"city\" type=\"string\"" + "argument" + "call" + "tools" + "message";
    const int control_tokens = 8 * 2;  // each of the 8 tags: <|open|> or <|close|>, and <|sep|>
    return int(tag_text.size()) + control_tokens;
}

FakeEngineOptions roomy() {
    FakeEngineOptions o;
    o.n_ctx_max = 4096;
    return o;
}

json chat_body(int max_tokens, json tool_choice) {
    return {{"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
            {"tools", json::array({kChatTool})},
            {"tool_choice", std::move(tool_choice)},
            {"max_tokens", max_tokens},
            {"thinking", false}};
}

}  // namespace

TEST_CASE("required call fits: below the minimum a 400 names it, at the minimum the call completes") {
    TestServer server(test_config(), roomy());
    auto c = server.client();
    const int need = shortest_call_tokens();
    for (const json& choice : {json("required"), json{{"type", "function"}, {"function", {{"name", "get_weather"}}}}}) {
        INFO(choice.dump());
        auto r = post_json(c, "/v1/chat/completions", chat_body(need - 1, choice));
        REQUIRE(r);
        CHECK(r->status == 400);
        const json e = json::parse(r->body)["error"];
        CHECK(e["param"] == "max_tokens");
        CHECK(e["type"] == "invalid_request_error");
        CHECK(e["message"].get<std::string>().find("at least " + std::to_string(need) + " output tokens") != std::string::npos);

        auto ok = post_json(c, "/v1/chat/completions", chat_body(need, choice));
        REQUIRE(ok);
        REQUIRE(ok->status == 200);
        const json answer = json::parse(ok->body)["choices"][0];
        CHECK(answer["finish_reason"] == "tool_calls");
        CHECK(answer["message"]["tool_calls"][0]["function"]["name"] == "get_weather");
        CHECK(json::parse(answer["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()).contains("city"));
    }
    // tool_choice auto is not refused: the model may answer without a call.
    auto r = post_json(c, "/v1/chat/completions", chat_body(8, "auto"));
    REQUIRE(r);
    CHECK(r->status == 200);
    // The daemon is still serving.
    CHECK(server.client().Get("/health")->status == 200);
}

TEST_CASE("required call fits: Responses and Messages refuse the same way, in their own error shapes") {
    TestServer server(test_config(), roomy());
    auto c = server.client();
    const int need = shortest_call_tokens();
    const std::string at_least = "at least " + std::to_string(need) + " output tokens";

    // Thinking off on each API, as shortest_call_tokens counts.
    json responses = {{"input", "Weather?"},
                      {"reasoning", {{"effort", "none"}}},
                      {"tools", json::array({{{"type", "function"}, {"name", "get_weather"}, {"parameters", kParameters}}})},
                      {"tool_choice", "required"},
                      {"max_output_tokens", need - 1}};
    auto r = post_json(c, "/v1/responses", responses);
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(json::parse(r->body)["error"]["message"].get<std::string>().find(at_least) != std::string::npos);

    json messages = {{"model", "claude-x"},
                     {"max_tokens", need - 1},
                     {"messages", json::array({{{"role", "user"}, {"content", "Weather?"}}})},
                     {"tools", json::array({{{"name", "get_weather"}, {"input_schema", kParameters}}})},
                     {"tool_choice", {{"type", "any"}}},
                     {"thinking", {{"type", "disabled"}}}};
    r = post_json(c, "/v1/messages", messages);
    REQUIRE(r);
    CHECK(r->status == 400);
    const json body = json::parse(r->body);
    CHECK(body["type"] == "error");
    CHECK(body["error"]["type"] == "invalid_request_error");
    CHECK(body["error"]["message"].get<std::string>().find(at_least) != std::string::npos);

    messages["max_tokens"] = need;
    r = post_json(c, "/v1/messages", messages);
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const json answer = json::parse(r->body);
    CHECK(answer["stop_reason"] == "tool_use");
    CHECK(answer["content"].back()["type"] == "tool_use");
}

TEST_CASE("required call fits: a call forced by --new-turn-tool-choice is not refused") {
    DaemonConfig config = test_config();
    config.new_turn_tool_choice = "required";
    TestServer server(config, roomy());
    auto c = server.client();
    auto r = post_json(c, "/v1/chat/completions", chat_body(8, "auto"));
    REQUIRE(r);
    CHECK(r->status == 200);
}
