// --new-turn-tool-choice required (docs/api.md, "Tools"; docs/agents.md): a request offering tools
// with tool_choice auto that starts a turn is rendered and constrained as tool_choice required;
// a request carrying tool results (with or without a user text beside them, as Claude Code
// sends) stays auto, and so do requests whose tools the grammar cannot hold. Asserted on the
// prompt the FakeEngine was given: required adds K3's tool-choice system message.
#include <doctest/doctest.h>

#include <string>

#include "k3/xtml.h"
#include "server_harness.h"

using namespace k3::test;

namespace {

const json kWeather = {{"type", "function"},
                       {"function",
                        {{"name", "get_weather"},
                         {"parameters",
                          {{"type", "object"},
                           {"properties", {{"city", {{"type", "string"}}}}},
                           {"required", {"city"}}}}}}};

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }
json assistant_call() {
    return {{"role", "assistant"},
            {"content", nullptr},
            {"tool_calls", json::array({{{"id", "call_1"}, {"type", "function"},
                                         {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}})}};
}
json tool_result() { return {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "21 C"}}; }

// Status of a chat request, and whether the prompt the engine got asked for a tool call.
std::pair<int, bool> ask(TestServer& server, json messages, json tools, json extra = json::object()) {
    json body = {{"messages", std::move(messages)}, {"tools", std::move(tools)}, {"max_tokens", 64}};
    body.update(extra);
    auto c = server.client();
    auto r = post_json(c, "/v1/chat/completions", body);
    REQUIRE(r);
    if (r->status != 200) MESSAGE(r->body);
    if (r->status != 200) return {r->status, false};
    std::string prompt = server.tokenizer.decode(server.engine.last_prompt());
    return {200, prompt.find(std::string(k3::xtml::kToolChoiceRequired)) != std::string::npos};
}

DaemonConfig forcing() {
    DaemonConfig c = test_config();
    c.new_turn_tool_choice = "required";
    return c;
}

// Room for the tool declarations (the fake's default context is 256 tokens of bytes).
FakeEngineOptions roomy() {
    FakeEngineOptions o;
    o.n_ctx_max = 4096;
    return o;
}

}  // namespace

TEST_CASE("new-turn tool choice: a turn's first request must call a tool; the one with its results is left auto") {
    TestServer server(forcing(), roomy());
    const json tools = json::array({kWeather});
    CHECK(ask(server, json::array({user("Weather?")}), tools) == std::pair{200, true});
    // tool_choice "auto" said explicitly is the same.
    CHECK(ask(server, json::array({user("Weather?")}), tools, {{"tool_choice", "auto"}}) == std::pair{200, true});
    // A later turn of the conversation starts with a user message again.
    CHECK(ask(server, json::array({user("Weather?"), assistant_call(), tool_result(), {{"role", "assistant"}, {"content", "21 C"}},
                                   user("And tomorrow?")}), tools) == std::pair{200, true});
    // The request carrying the results, and the same with a user text after them.
    CHECK(ask(server, json::array({user("Weather?"), assistant_call(), tool_result()}), tools) == std::pair{200, false});
    CHECK(ask(server, json::array({user("Weather?"), assistant_call(), tool_result(), user("reminder")}), tools) ==
          std::pair{200, false});
    // What the client chose itself is kept: none stays none; no tools, nothing to force.
    CHECK(ask(server, json::array({user("Weather?")}), tools, {{"tool_choice", "none"}}) == std::pair{200, false});
    CHECK(ask(server, json::array({user("Weather?")}), json::array()) == std::pair{200, false});
    // A response_format is not combined with a forced call.
    CHECK(ask(server, json::array({user("Weather?")}), tools, {{"response_format", {{"type", "json_object"}}}}) ==
          std::pair{200, false});
}

TEST_CASE("new-turn tool choice: tools whose schema the grammar cannot hold leave the request auto, not a 400") {
    json odd = kWeather;
    odd["function"]["parameters"]["propertyNames"] = {{"pattern", "^[a-z]+$"}};
    const json tools = json::array({odd});
    TestServer server(forcing(), roomy());
    CHECK(ask(server, json::array({user("Weather?")}), tools) == std::pair{200, false});
    // The client asking for required itself still gets the 400 naming the keyword.
    CHECK(ask(server, json::array({user("Weather?")}), tools, {{"tool_choice", "required"}}).first == 400);
}

TEST_CASE("new-turn tool choice: off by default") {
    TestServer server(test_config(), roomy());
    CHECK(ask(server, json::array({user("Weather?")}), json::array({kWeather})) == std::pair{200, false});
}
