// The Responses API's input items (server/responses/request.cpp) against the chat request
// they mean, rendered by the chat parser: an output item answers its call by call_id, and an
// output with a name but no call_id (Codex's goal objective, seen in node_agent_clis) is a tool
// result no call asked for, index 0 (docs/api.md, "Responses API").
#include <doctest/doctest.h>

#include "fake_engine.h"
#include "fake_limits.h"
#include "wire/error.h"
#include "responses/responses.h"
#include "openai/request.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {

json goal_tool() {
    return {{"type", "function"},
            {"name", "create_goal"},
            {"parameters", {{"type", "object"}, {"properties", {{"objective", {{"type", "string"}}}}}}}};
}

// Codex's input after a create_goal call, as it sent it (the ids shortened).
json codex_input(const json& goal_output) {
    return json::array({{{"type", "message"}, {"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "Read notes.txt"}}})}},
                        {{"type", "function_call"}, {"id", "fc_1"}, {"name", "create_goal"}, {"arguments", R"({"objective":"ek"})"}, {"call_id", "call_7"}, {"status", "completed"}},
                        {{"type", "function_call_output"}, {"id", "fco_1"}, {"call_id", "call_7"}, {"output", R"({"goal":{"objective":"ek"}})"}},
                        goal_output});
}

std::string prompt_of(const json& input) {
    json body = {{"model", "m"}, {"input", input}, {"tools", json::array({goal_tool()})}};
    return fake_tokenizer().decode(parse_responses_request(body, fake_tokenizer(), fake_limits()).prompt);
}

}  // namespace

TEST_CASE("Responses input: an output with a name and no call_id is a tool result no call asked for (index counts on)") {
    const std::string prompt = prompt_of(codex_input(
        {{"type", "function_call_output"}, {"id", "fco_2"}, {"name", "goal_objective"}, {"namespace", "agent"}, {"output", "ek"}}));
    // The call's own result, then the call-less one after it; index is a running count of the
    // results since the assistant turn (docs/model.md "Chat layout").
    const size_t answered = prompt.find(R"(<|open|>message role="tool" tool="create_goal" index="1"<|sep|>{"goal":{"objective":"ek"}})");
    const size_t uncalled = prompt.find(R"(<|open|>message role="tool" tool="agent.goal_objective" index="2"<|sep|>ek<|close|>)");
    REQUIRE(answered != std::string::npos);
    REQUIRE(uncalled != std::string::npos);
    CHECK(answered < uncalled);

    // The same result through the chat API, written by hand, renders the same prompt.
    json chat = {{"model", "m"},
                 {"messages", json::array({{{"role", "user"}, {"content", "Read notes.txt"}},
                                           {{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({{{"id", "call_7"}, {"type", "function"}, {"function", {{"name", "create_goal"}, {"arguments", R"({"objective":"ek"})"}}}}})}},
                                           {{"role", "tool"}, {"tool_call_id", "call_7"}, {"content", R"({"goal":{"objective":"ek"}})"}},
                                           {{"role", "tool"}, {"name", "agent.goal_objective"}, {"content", "ek"}}})},
                 {"tools", json::array({{{"type", "function"}, {"function", {{"name", "create_goal"}, {"parameters", goal_tool()["parameters"]}}}}})}};
    CHECK(fake_tokenizer().decode(parse_chat_request(chat, fake_tokenizer(), fake_limits()).prompt) == prompt);
}

TEST_CASE("Responses input: an output with neither call_id nor name, or without output, is a 400 naming the item") {
    for (const json& bad : {json{{"type", "function_call_output"}, {"output", "ek"}},
                            json{{"type", "function_call_output"}, {"call_id", "call_7"}},
                            json{{"type", "function_call_output"}, {"name", "goal_objective"}}}) {
        CAPTURE(bad.dump());
        try {
            prompt_of(codex_input(bad));
            FAIL("accepted");
        } catch (const ApiError& e) {
            CHECK(e.status == 400);
            CHECK(e.param == "input[3]");
            CHECK(std::string(e.what()).find("'input[3]' needs call_id") != std::string::npos);
        }
    }
}

TEST_CASE("Responses input: an output answers a function_call of the input by its call_id, or is a 400 as from OpenAI") {
    auto input = [](const std::string& answered) {
        return json::array({{{"type", "message"}, {"role", "user"}, {"content", "Read notes.txt"}},
                            {{"type", "function_call"}, {"id", "fc_1"}, {"name", "create_goal"}, {"arguments", "{}"}, {"call_id", "call_7"}},
                            {{"type", "function_call_output"}, {"call_id", answered}, {"output", "done"}}});
    };
    CHECK(prompt_of(input("call_7")).find(R"(tool="create_goal" index="1"<|sep|>done)") != std::string::npos);
    // The call's item id (a client that took `id` for `call_id`), and an id no call has.
    for (const char* id : {"fc_1", "call_8"}) {
        CAPTURE(id);
        try {
            prompt_of(input(id));
            FAIL("accepted");
        } catch (const ApiError& e) {
            CHECK(e.status == 400);
            CHECK(e.param == "input");
            CHECK(std::string(e.what()).find(std::string("No tool call found for function call output with call_id ") + id) !=
                  std::string::npos);
        }
    }
}
