// What the server hands the engine for a request, asserted on the prompt the FakeEngine records:
// the K3 chat layout for the developer role (rendered as system), content given as text parts,
// thinking switched on by each of the request's spellings; and the sampling fields top_k and
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

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("prompts: a developer message is rendered as the system turn, in K3's layout") {
    TestServer server;
    chat(server, {{"messages", json::array({{{"role", "developer"}, {"content", "Be brief."}},
                                            {{"role", "user"}, {"content", "Hi"}}})},
                  {"max_tokens", 1}});
    CHECK(last_prompt_text(server) ==
          "<|open|>message role=\"system\"<|sep|>Be brief.<|close|>message<|sep|><|end_of_msg|>" + kUserHi +
              kAnswerThinkingOff);
    // The same request with role "system" gives the same prompt.
    const auto developer = server.engine.last_prompt();
    chat(server, {{"messages", json::array({{{"role", "system"}, {"content", "Be brief."}},
                                            {{"role", "user"}, {"content", "Hi"}}})},
                  {"max_tokens", 1}});
    CHECK(server.engine.last_prompt() == developer);
}

TEST_CASE("prompts: content given as text parts is joined in order") {
    TestServer server;
    chat(server, {{"messages", json::array({{{"role", "user"},
                                             {"content", json::array({{{"type", "text"}, {"text", "H"}},
                                                                      {{"type", "text"}, {"text", "i"}}})}}})},
                  {"max_tokens", 1}});
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
        {"default", json::object(), false, ""},
        {"thinking: true", {{"thinking", true}}, true, "max"},
        {"thinking.type enabled", {{"thinking", {{"type", "enabled"}}}}, true, "max"},
        {"thinking.type disabled", {{"thinking", {{"type", "disabled"}}}}, false, ""},
        {"chat_template_kwargs.thinking", {{"chat_template_kwargs", {{"thinking", true}}}}, true, "max"},
        {"chat_template_kwargs.enable_thinking", {{"chat_template_kwargs", {{"enable_thinking", true}}}}, true, "max"},
        {"reasoning_effort low", {{"reasoning_effort", "low"}}, true, "low"},
        {"reasoning_effort high", {{"reasoning_effort", "high"}}, true, "high"},
        {"reasoning_effort none", {{"reasoning_effort", "none"}}, false, ""},
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
        if (c.thinking) {
            CHECK(prompt.rfind("<|open|>message role=\"system\" type=\"thinking-effort\"<|sep|>", 0) == 0);
            CHECK(prompt.find(std::string("invoked with `thinking_effort=") + c.effort + "`.") != std::string::npos);
            CHECK(ends_with(prompt, kUserHi + kAnswerThinkingOn));
        } else {
            CHECK(prompt == kUserHi + kAnswerThinkingOff);
        }
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
