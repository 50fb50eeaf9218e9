// What the server hands the engine for a request, asserted on the prompt the FakeEngine records:
// the K3 chat layout for the developer role (rendered as system), content given as text parts,
// thinking on when a request says nothing and switched by each of the request's spellings, on
// every API that renders a chat; and the sampling fields top_k and
// min_p reaching the sampler (seen in which tokens come out of the fake's known logits).
#include <doctest/doctest.h>

#include "server_harness.h"

using namespace k3::test;

namespace {

json chat(TestServer& server, json body) {
    auto c = server.client();
    auto r = post_json(c, "/v1/chat/completions", body);
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

// The last prompt the engine was given, as text (specials spelled out).
std::string last_prompt_text(const TestServer& server) { return server.tokenizer.decode(server.engine.last_prompt()); }

const std::string kUserHi =
    "<|open|>message role=\"user\"<|sep|>Hi<|close|>message<|sep|><|end_of_msg|>";
const std::string kAnswerThinkingOff = "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>";
const std::string kAnswerThinkingOn = "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>";
// The thinking-effort system message at the default effort, written from the spec
// (../shared/spec/xtml-tools.md, "Checked against the official encoder": internal system
// messages, and kimi-k3-model.md 6.5 for its type), not from the code's table.
const std::string kEffortMax =
    "<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>`thinking_effort` guides on how much to think "
    "in your thinking channel (not including the response channel), supported values include `low`, `medium`, "
    "`high`, and `max`.\nNow the system is invoked with `thinking_effort=max`.<|close|>message<|sep|><|end_of_msg|>";

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("prompts: a developer message is rendered as the system turn, in K3's layout") {
    TestServer server;
    chat(server, {{"messages", json::array({{{"role", "developer"}, {"content", "Be brief."}},
                                            {{"role", "user"}, {"content", "Hi"}}})},
                  {"max_tokens", 1}, {"thinking", false}});
    CHECK(last_prompt_text(server) ==
          "<|open|>message role=\"system\"<|sep|>Be brief.<|close|>message<|sep|><|end_of_msg|>" + kUserHi +
              kAnswerThinkingOff);
    // The same request with role "system" gives the same prompt.
    const auto developer = server.engine.last_prompt();
    chat(server, {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                            {{"role", "user"}, {"content", "Hi"}}})},
                  {"max_tokens", 1}, {"thinking", false}});
    CHECK(server.engine.last_prompt() == developer);
}

TEST_CASE("prompts: content given as text parts is joined in order") {
    TestServer server;
    chat(server, {{"messages", json::array({{{"role", "user"},
                                             {"content", json::array({{{"type", "text"}, {"text", "H"}},
                                                                      {{"type", "text"}, {"text", "i"}}})}}})},
                  {"max_tokens", 1}, {"thinking", false}});
    CHECK(last_prompt_text(server) == kUserHi + kAnswerThinkingOff);
}

TEST_CASE("prompts: thinking on by each spelling opens the think channel; off opens the response") {
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    struct Case {
        std::string what;
        json extra;
        bool thinking;
        const char* effort;  // the effort the system message names, when thinking
    };
    const std::vector<Case> cases = {
        {"saying nothing thinks", json::object(), true, "max"},
        {"thinking: true", {{"thinking", true}}, true, "max"},
        {"thinking: false", {{"thinking", false}}, false, ""},
        {"thinking.type enabled", {{"thinking", {{"type", "enabled"}}}}, true, "max"},
        {"thinking.type disabled", {{"thinking", {{"type", "disabled"}}}}, false, ""},
        {"chat_template_kwargs.thinking", {{"chat_template_kwargs", {{"thinking", true}}}}, true, "max"},
        {"chat_template_kwargs.enable_thinking", {{"chat_template_kwargs", {{"enable_thinking", true}}}}, true, "max"},
        {"chat_template_kwargs.thinking false", {{"chat_template_kwargs", {{"thinking", false}}}}, false, ""},
        {"chat_template_kwargs.enable_thinking false", {{"chat_template_kwargs", {{"enable_thinking", false}}}}, false, ""},
        {"reasoning_effort low", {{"reasoning_effort", "low"}}, true, "low"},
        {"reasoning_effort high", {{"reasoning_effort", "high"}}, true, "high"},
        {"reasoning_effort none", {{"reasoning_effort", "none"}}, false, ""},
        // docs/api.md "Thinking": the encoder renders low, high and max only.
        {"reasoning_effort medium thinks at high", {{"reasoning_effort", "medium"}}, true, "high"},
        {"reasoning_effort minimal thinks at low", {{"reasoning_effort", "minimal"}}, true, "low"},
        {"a thinking object without type is enabled", {{"thinking", json::object()}}, true, "max"},
        {"thinking.effort", {{"thinking", {{"type", "enabled"}, {"effort", "low"}}}}, true, "low"},
        {"thinking.effort wins over reasoning_effort", {{"thinking", {{"effort", "low"}}}, {"reasoning_effort", "high"}}, true, "low"},
        {"chat_template_kwargs.thinking_effort wins over thinking.effort",
         {{"chat_template_kwargs", {{"thinking_effort", "high"}}}, {"thinking", {{"effort", "low"}}}}, true, "high"},
        {"chat_template_kwargs.thinking false wins over reasoning_effort",
         {{"chat_template_kwargs", {{"thinking", false}}}, {"reasoning_effort", "high"}}, false, ""},
        {"thinking.type disabled wins over reasoning_effort", {{"thinking", {{"type", "disabled"}}}, {"reasoning_effort", "high"}}, false, ""},
        {"chat_template_kwargs.thinking true wins over reasoning_effort none",
         {{"chat_template_kwargs", {{"thinking", true}}}, {"reasoning_effort", "none"}}, true, "max"},
    };
    FakeEngineOptions o;
    o.n_ctx_max = 4096;  // the thinking-effort system message is long in byte tokens
    TestServer server(test_config(), o);
    for (const auto& c : cases) {
        CAPTURE(c.what);
        json body = {{"messages", messages}, {"max_tokens", 1}};
        body.update(c.extra);
        chat(server, body);
        const std::string prompt = last_prompt_text(server);
        CAPTURE(prompt);
        if (c.thinking && std::string(c.effort) == "max") {
            CHECK(prompt == kEffortMax + kUserHi + kAnswerThinkingOn);
        } else if (c.thinking) {
            CHECK(prompt.rfind("<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>", 0) == 0);
            CHECK(prompt.find(std::string("invoked with `thinking_effort=") + c.effort + "`.") != std::string::npos);
            CHECK(ends_with(prompt, kUserHi + kAnswerThinkingOn));
        } else {
            CHECK(prompt == kUserHi + kAnswerThinkingOff);
        }
    }
}

TEST_CASE("prompts: a request that says nothing of thinking thinks on every API; each API's off switch opens the response") {
    // xtml-tools.md, "Request fields to encoder inputs": thinking is on unless the request turns
    // it off, and on means the effort message (effort max) before the messages and the think
    // opener after them; off means neither, and the response opener.
    FakeEngineOptions o;
    o.n_ctx_max = 4096;  // the effort message is long in byte tokens
    TestServer server(test_config(), o);
    auto c = server.client();
    const std::string on = kEffortMax + kUserHi + kAnswerThinkingOn, off = kUserHi + kAnswerThinkingOff;
    // The fake's vocabulary is bytes and specials: the count of a prompt text is its tokens'.
    const int on_count = int(server.tokenizer.encode(on, /*allow_special=*/true).size()) - 3;
    const int off_count = int(server.tokenizer.encode(off, /*allow_special=*/true).size()) - 3;
    const json hi = json::array({{{"role", "user"}, {"content", "Hi"}}});
    auto served = [&](const std::string& path, const json& body) {
        CAPTURE(path);
        CAPTURE(body.dump());
        auto r = post_json(c, path, body);
        REQUIRE(r);
        INFO(r->body);
        REQUIRE(r->status == 200);
        return last_prompt_text(server);
    };
    auto body_with = [](json body, const json& extra) {
        body.update(extra);
        return body;
    };

    const json chat_body = {{"messages", hi}, {"max_tokens", 1}};
    CHECK(served("/v1/chat/completions", chat_body) == on);
    for (const json& switch_off : {json{{"thinking", false}}, json{{"thinking", {{"type", "disabled"}}}},
                                   json{{"chat_template_kwargs", {{"thinking", false}}}},
                                   json{{"chat_template_kwargs", {{"enable_thinking", false}}}},
                                   json{{"reasoning_effort", "none"}}})
        CHECK(served("/v1/chat/completions", body_with(chat_body, switch_off)) == off);

    const json responses_body = {{"input", "Hi"}, {"max_output_tokens", 16}};
    CHECK(served("/v1/responses", responses_body) == on);
    CHECK(served("/v1/responses", body_with(responses_body, {{"reasoning", {{"effort", "none"}}}})) == off);

    // Messages: the same default; Anthropic's own switch turns it off.
    const json messages_body = {{"model", "claude-x"}, {"max_tokens", 1}, {"messages", hi}};
    CHECK(served("/v1/messages", messages_body) == on);
    CHECK(served("/v1/messages", body_with(messages_body, {{"thinking", {{"type", "adaptive"}}}})) == on);
    CHECK(served("/v1/messages", body_with(messages_body, {{"thinking", {{"type", "disabled"}}}})) == off);

    // /tokenize of messages and count_tokens render the same prompts.
    auto tokenized = [&](const json& body) {
        auto r = post_json(c, "/tokenize", body);
        REQUIRE(r);
        REQUIRE(r->status == 200);
        const json j = json::parse(r->body);
        return std::make_pair(server.tokenizer.decode(j["tokens"].get<std::vector<int32_t>>()), j["count"].get<int>());
    };
    CHECK(tokenized({{"messages", hi}}) == std::make_pair(on, on_count));
    CHECK(tokenized({{"messages", hi}, {"reasoning_effort", "none"}}) == std::make_pair(off, off_count));
    auto counted = [&](const json& body) {
        auto r = post_json(c, "/v1/messages/count_tokens", body);
        REQUIRE(r);
        REQUIRE(r->status == 200);
        return json::parse(r->body)["input_tokens"].get<int>();
    };
    CHECK(counted(messages_body) == on_count);
    CHECK(counted(body_with(messages_body, {{"thinking", {{"type", "disabled"}}}})) == off_count);
}

TEST_CASE("prompts: an unknown field inside thinking, an unknown effort and a keep other than all are 400s") {
    TestServer server;
    auto c = server.client();
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    for (const json& extra : {json{{"thinking", {{"type", "enabled"}, {"budget", 5}}}},
                              json{{"thinking", {{"effort", "extreme"}}}},
                              json{{"chat_template_kwargs", {{"thinking_effort", "medium-ish"}}}},
                              json{{"thinking", {{"keep", "last"}}}}}) {
        CAPTURE(extra.dump());
        json body = {{"messages", messages}, {"max_tokens", 1}};
        body.update(extra);
        auto r = post_json(c, "/v1/chat/completions", body);
        REQUIRE(r);
        CHECK(r->status == 400);
        CHECK(json::parse(r->body)["error"]["type"] == "invalid_request_error");
    }
}

TEST_CASE("sampling: top_k and min_p over HTTP reach the sampler") {
    // The fake's logits: the script's next byte 10, the byte after it 9, every other id 0. At
    // temperature 1 a free draw leaves the script about one time in four; top_k = 2 keeps only
    // those two bytes; top_k = 1, or min_p = 0.5 (e^-1 < 0.5 of the best), keeps the script's.
    TestServer server;
    auto c = server.client();
    const std::string script = "The quick brown fox jumps over t";
    auto complete = [&](json extra) {
        json body = {{"prompt", "x"}, {"max_tokens", int(script.size())}, {"temperature", 1.0}, {"seed", 3}};
        body.update(extra);
        auto r = post_json(c, "/v1/completions", body);
        REQUIRE(r);
        INFO(r->body);
        REQUIRE(r->status == 200);
        return json::parse(r->body)["choices"][0]["text"].get<std::string>();
    };
    const std::string free_text = complete(json::object());
    CHECK(free_text != script);  // P(all 32 on script) is about 3e-5 for any seed
    CHECK(complete({{"top_k", 1}}) == script);
    CHECK(complete({{"min_p", 0.5}}) == script);
    CHECK(complete({{"min_p", 0.3}}) != script);  // e^-1 = 0.37 > 0.3: the second byte stays
    const std::string two = complete({{"top_k", 2}});
    CHECK(two != script);
    REQUIRE(two.size() == script.size());
    for (size_t i = 0; i < two.size(); ++i) {
        CAPTURE(i);
        CHECK((two[i] == script[i] || two[i] == char(script[i] + 1)));
    }
}

TEST_CASE("prompts: usage, /tokenize and count_tokens leave out the 3-token generation opener") {
    FakeEngineOptions o;
    o.n_ctx_max = 4096;  // the requests say nothing of thinking: the effort message is long in byte tokens
    TestServer server(test_config(), o);
    auto c = server.client();
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    json answer = chat(server, {{"messages", messages}, {"max_tokens", 1}});
    const int evaluated = int(server.engine.last_prompt().size());
    CHECK(answer["usage"]["prompt_tokens"].get<int>() == evaluated - 3);
    auto tokenized = post_json(c, "/tokenize", {{"messages", messages}});
    REQUIRE(tokenized);
    CHECK(json::parse(tokenized->body)["count"].get<int>() == evaluated - 3);
    auto counted = post_json(c, "/v1/messages/count_tokens", {{"messages", messages}, {"max_tokens", 1}});
    REQUIRE(counted);
    CHECK(json::parse(counted->body)["input_tokens"].get<int>() == evaluated - 3);
    // The same request again: every prompt token is cached, and no more than the count.
    answer = chat(server, {{"messages", messages}, {"max_tokens", 1}});
    CHECK(answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() <= evaluated - 3);
}

TEST_CASE("prompts: a system message's own tools are declared where it stands and callable; bad ones are 400s") {
    FakeEngineOptions o;
    o.n_ctx_max = 4096;  // the declaration is long in byte tokens
    TestServer server(test_config(), o);
    auto c = server.client();
    const json search = {{"type", "function"},
                         {"function", {{"name", "search"}, {"description", nullptr}, {"parameters", {{"type", "object"}}}}}};
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}},
                                       {{"role", "developer"}, {"content", ""}, {"tools", json::array({search})}}});
    chat(server, {{"messages", messages}, {"max_tokens", 200}, {"thinking", false},
                  {"tool_choice", {{"type", "function"}, {"function", {{"name", "search"}}}}}});
    const std::string prompt = last_prompt_text(server);
    CHECK(prompt == kUserHi +
                        "<|open|>message role=\"system\" type=\"tool-declare\"<|sep|>## New Tools Available\n"
                        "The system dynamically extends the toolset via lazy-loading.\nYou have access to all existing "
                        "and extended tools.\nHere are the specs for the extended tools.\n\n```json\n"
                        "[{\"function\":{\"name\":\"search\",\"parameters\":{\"type\":\"object\"}},\"type\":\"function\"}]\n```"
                        "<|close|>message<|sep|><|end_of_msg|>" +
                        kAnswerThinkingOff);  // a named function renders no tool-choice message
    const std::vector<json> bad = {
        json::array({{{"role", "user"}, {"content", "Hi"}, {"tools", json::array({search})}}}),
        json::array({{{"role", "system"}, {"content", "text"}, {"tools", json::array({search})}}, {{"role", "user"}, {"content", "Hi"}}}),
        json::array({{{"role", "system"}, {"tools", json::array({{{"type", "function"}, {"function", {{"name", "1bad"}}}}})}},
                     {{"role", "user"}, {"content", "Hi"}}}),
        json::array({{{"role", "system"}, {"tools", json::array({{{"type", "function"}, {"function", {{"name", std::string(257, 'a')}}}}})}},
                     {{"role", "user"}, {"content", "Hi"}}}),
        json::array({{{"role", "system"}, {"tools", json::array({{{"type", "web"}}})}}, {{"role", "user"}, {"content", "Hi"}}}),
        json::array({{{"role", "system"}, {"tools", json::array({search, search})}}, {{"role", "user"}, {"content", "Hi"}}}),
    };
    for (const json& m : bad) {
        CAPTURE(m.dump());
        auto r = post_json(c, "/v1/chat/completions", {{"messages", m}, {"max_tokens", 1}});
        REQUIRE(r);
        CHECK(r->status == 400);
    }
    // Unique across the request's tools and the messages' tools.
    auto r = post_json(c, "/v1/chat/completions", {{"messages", messages}, {"tools", json::array({search})}, {"max_tokens", 1}});
    REQUIRE(r);
    CHECK(r->status == 400);
}

TEST_CASE("prompts: response_format is told to the model after all messages") {
    FakeEngineOptions o;
    o.n_ctx_max = 4096;  // the format message is long in byte tokens
    TestServer server(test_config(), o);
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    chat(server, {{"messages", messages},
                  {"max_tokens", 50},
                  {"thinking", false},
                  {"response_format",
                   {{"type", "json_schema"},
                    {"json_schema", {{"name", "pet"}, {"strict", true}, {"schema", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}}}}}});
    CHECK(last_prompt_text(server) ==
          kUserHi +
              "<|open|>message role=\"system\" type=\"response-format\"<|sep|>The system is invoked with "
              "`response_format=json_schema`.\nYour response must be raw JSON data without markdown code blocks (```json) "
              "or any additional formatting.\nThe JSON data must match the following schema:\n```json\n"
              "{\"properties\":{\"a\":{\"type\":\"integer\"}},\"type\":\"object\"}\n```<|close|>message<|sep|><|end_of_msg|>" +
              kAnswerThinkingOff);
}

TEST_CASE("--hosted-sampling: the vendor verifier's sampling values are accepted, the others are 400s") {
    DaemonConfig config = test_config();
    config.hosted_sampling = true;
    FakeEngineOptions o;
    o.n_ctx_max = 4096;  // the requests say nothing of thinking: the effort message is long in byte tokens
    TestServer server(config, o);
    auto c = server.client();
    const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
    auto status = [&](json extra) {
        json body = {{"messages", messages}, {"max_tokens", 1}};
        body.update(extra);
        auto r = post_json(c, "/v1/chat/completions", body);
        REQUIRE(r);
        return r->status;
    };
    for (const json& ok : {json::object(), json{{"temperature", 0.6}}, json{{"temperature", 1.0}}, json{{"top_p", 0.95}},
                           json{{"presence_penalty", 0}}, json{{"frequency_penalty", 0}}, json{{"n", 1}}}) {
        CAPTURE(ok.dump());
        CHECK(status(ok) == 200);
    }
    for (const json& bad : {json{{"temperature", 1.1}}, json{{"temperature", 2.0}}, json{{"temperature", -0.1}},
                            json{{"top_p", 0.8}}, json{{"presence_penalty", 0.5}}, json{{"frequency_penalty", 0.5}},
                            json{{"n", 2}}}) {
        CAPTURE(bad.dump());
        CHECK(status(bad) == 400);
    }
    // Off (the default), any sampling is served.
    TestServer plain(test_config(), o);
    auto p = plain.client();
    auto r = post_json(p, "/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"temperature", 1.1}, {"top_p", 0.8}});
    REQUIRE(r);
    CHECK(r->status == 200);
}
