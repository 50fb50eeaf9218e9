// Everything that must be refused or cut short, over real HTTP: bad input (400/401/404/413) with
// an OpenAI error body while the daemon keeps serving, 503 + Retry-After while loading and when
// the queue is full, client disconnects cancelling work (decode, prefill, queued), deadlines.
#include <doctest/doctest.h>

#include "server_harness.h"

using namespace k3::test;

namespace {

// The answer is an OpenAI error: {"error":{"message","type","param","code"}}.
void check_error(const httplib::Result& r, int status, const std::string& code = "") {
    REQUIRE(r);
    CHECK(r->status == status);
    json j = json::parse(r->body);
    REQUIRE(j.contains("error"));
    CHECK(j["error"]["message"].is_string());
    CHECK_FALSE(j["error"]["message"].get<std::string>().empty());
    CHECK(j["error"]["type"].is_string());
    // OpenAI's Error: param and code are each a string or null, never the status number.
    CHECK(j["error"].contains("param"));
    CHECK((j["error"]["param"].is_string() || j["error"]["param"].is_null()));
    CHECK(j["error"].contains("code"));
    CHECK((j["error"]["code"].is_string() || j["error"]["code"].is_null()));
    if (!code.empty()) CHECK(j["error"]["code"] == code);
}

void check_still_serving(httplib::Client& c) {
    auto r = post_json(c, "/v1/completions", {{"prompt", "ok"}, {"max_tokens", 2}, {"temperature", 0}});
    REQUIRE(r);
    CHECK(r->status == 200);
}

const json kUser = json::array({{{"role", "user"}, {"content", "Hi"}}});

}  // namespace

TEST_CASE("bad input: each answered with an OpenAI error body, and the daemon keeps serving") {
    TestServer server;
    auto c = server.client();
    struct Case {
        const char* what;
        const char* path;
        std::string body;
        int status;
        const char* code;
    };
    std::vector<Case> cases = {
        {"malformed JSON", "/v1/completions", R"({"prompt": "x",)", 400, "invalid_json"},
        {"not an object", "/v1/completions", R"([1,2,3])", 400, ""},
        {"empty body", "/v1/chat/completions", "", 400, "invalid_json"},
        {"prompt wrong type", "/v1/completions", R"({"prompt": 12})", 400, "invalid_type"},
        {"missing prompt", "/v1/completions", R"({"max_tokens": 3})", 400, "missing_required_parameter"},
        {"max_tokens wrong type", "/v1/completions", R"({"prompt": "x", "max_tokens": "ten"})", 400, "invalid_type"},
        {"max_tokens negative", "/v1/completions", R"({"prompt": "x", "max_tokens": -1})", 400, ""},
        {"temperature too high", "/v1/completions", R"({"prompt": "x", "temperature": 3})", 400, ""},
        {"temperature negative", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "temperature": -0.5})", 400, ""},
        {"temperature wrong type", "/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400, "invalid_type"},
        {"top_p zero", "/v1/completions", R"({"prompt": "x", "top_p": 0})", 400, ""},
        {"two prompts", "/v1/completions", R"({"prompt": ["a", "b"]})", 400, "unsupported_parameter"},
        {"token id out of range", "/v1/completions", R"({"prompt": [1, 999999]})", 400, ""},
        {"empty prompt", "/v1/completions", R"({"prompt": ""})", 400, ""},
        {"stop too many", "/v1/completions", R"({"prompt": "x", "stop": ["a","b","c","d","e"]})", 400, ""},
        {"stop wrong type", "/v1/completions", R"({"prompt": "x", "stop": 5})", 400, "invalid_type"},
        {"logprobs > 5", "/v1/completions", R"({"prompt": "x", "logprobs": 6})", 400, ""},
        {"stream_options without stream", "/v1/completions", R"({"prompt": "x", "stream_options": {"include_usage": true}})", 400, ""},
        {"messages missing", "/v1/chat/completions", R"({"model": "fake"})", 400, "missing_required_parameter"},
        {"messages empty", "/v1/chat/completions", R"({"messages": []})", 400, ""},
        {"messages not an array", "/v1/chat/completions", R"({"messages": "hi"})", 400, "invalid_type"},
        {"message not an object", "/v1/chat/completions", R"({"messages": ["hi"]})", 400, "invalid_type"},
        {"unknown role", "/v1/chat/completions", R"({"messages": [{"role":"wizard","content":"x"}]})", 400, ""},
        {"tool role", "/v1/chat/completions", R"({"messages": [{"role":"tool","content":"x"}]})", 400, ""},
        {"content wrong type", "/v1/chat/completions", R"({"messages": [{"role":"user","content":42}]})", 400, "invalid_type"},
        {"image content", "/v1/chat/completions", R"({"messages": [{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", 400, ""},
        {"tool without function", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "tools": [{"type":"function"}]})", 400, "missing_required_parameter"},
        {"tool_choice without tools", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "tool_choice": "required"})", 400, ""},
        {"tool_choice naming the function \"\"", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "tools": [{"type":"function","function":{"name":"f"}}], "tool_choice": {"type":"function","function":{"name":""}}})", 400, "missing_required_parameter"},
        {"tool result answering no call", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}, {"role":"tool","tool_call_id":"call_1","content":"x"}]})", 400, ""},
        {"schema keyword not enforced", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "response_format": {"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","format":"email"}}}})", 400, "unsupported_schema"},
        {"unknown response_format", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "response_format": {"type":"yaml"}})", 400, "invalid_value"},
        {"GBNF grammar", "/v1/completions", R"({"prompt": "x", "grammar": "root ::= \"a\""})", 400, "unsupported_parameter"},
        {"reasoning_effort unknown", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "reasoning_effort": "extreme"})", 400, ""},
        {"max_completion_tokens zero", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "max_completion_tokens": 0})", 400, ""},
        {"top_logprobs without logprobs", "/v1/chat/completions", R"({"messages": [{"role":"user","content":"x"}], "top_logprobs": 2})", 400, ""},
        {"echo with logprobs", "/v1/completions", R"({"prompt": "x", "echo": true, "logprobs": 1})", 400, "unsupported_parameter"},
        {"penalty out of range", "/v1/completions", R"({"prompt": "x", "presence_penalty": 2.5})", 400, ""},
        {"logit_bias key not a token", "/v1/completions", R"({"prompt": "x", "logit_bias": {"abc": 1}})", 400, ""},
        {"logit_bias value out of range", "/v1/completions", R"({"prompt": "x", "logit_bias": {"5": 101}})", 400, ""},
        {"stop token outside the vocabulary", "/v1/completions", R"({"prompt": "x", "stop_token_ids": [999999]})", 400, ""},
        {"n too large", "/v1/completions", R"({"prompt": "x", "n": 17})", 400, ""},
        {"tokenize wrong type", "/tokenize", R"({"content": 5})", 400, "invalid_type"},
        {"detokenize missing tokens", "/detokenize", R"({})", 400, ""},
    };
    for (const auto& tc : cases) {
        CAPTURE(tc.what);
        auto r = c.Post(tc.path, tc.body, "application/json");
        check_error(r, tc.status, tc.code);
    }
    // Invalid UTF-8 inside a JSON string.
    std::string bad_utf8 = std::string(R"({"prompt": "caf)") + "\xC3\x28" + R"("})";
    check_error(c.Post("/v1/completions", bad_utf8, "application/json"), 400, "invalid_utf8");
    // Deep nesting.
    std::string deep = R"({"prompt": "x", "user": )" + std::string(200, '[') + std::string(200, ']') + "}";
    check_error(c.Post("/v1/completions", deep, "application/json"), 400, "invalid_json");
    // Prompt longer than the context (the fake's context is 256 tokens).
    check_error(post_json(c, "/v1/completions", {{"prompt", std::string(300, 'a')}, {"max_tokens", 1}}), 400,
                "context_length_exceeded");
    check_error(post_json(c, "/v1/chat/completions",
                          {{"messages", json::array({{{"role", "user"}, {"content", std::string(300, 'a')}}})}}),
                400, "context_length_exceeded");
    // prompt + max_tokens over the context: lowered to what the context leaves, and said so.
    {
        auto r = post_json(c, "/v1/completions", {{"prompt", std::string(200, 'a')}, {"max_tokens", 100}});
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(r->get_header_value("X-K3-Max-Tokens-Clamped").find("max_tokens=100; granted=") == 0);
    }
    // Unknown fields anywhere are ignored, and any model name is served and echoed back. (Thinking
    // off in these two: the effort message alone, in the fake's byte tokens, outgrows its context.)
    {
        auto r = c.Post("/v1/chat/completions",
                        R"({"model": "gpt-5", "client_metadata": {"a": 1}, "max_tokens": 2, "thinking": false,
                            "messages": [{"role":"user","content":[{"type":"text","text":"x","annotations":[]}],"colour":"red"}]})",
                        "application/json");
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(json::parse(r->body)["model"] == "gpt-5");
    }
    // A tool this server cannot run is left out of the prompt, and said so.
    {
        auto r = c.Post("/v1/chat/completions",
                        R"({"max_tokens": 2, "thinking": false, "messages": [{"role":"user","content":"x"}], "tools": [{"type":"web_search"}]})",
                        "application/json");
        REQUIRE(r);
        CHECK(r->status == 200);
        CHECK(r->get_header_value("X-K3-Ignored-Tools") == "web_search");
    }
    // Unknown route and wrong method.
    check_error(c.Get("/v1/engines"), 404);
    check_error(c.Get("/v1/completions"), 405);
    check_still_serving(c);
    CHECK(server.state.metrics.requests(RequestOutcome::Invalid) >= cases.size());
}

TEST_CASE("an oversized body is refused with 413") {
    auto config = test_config();
    config.max_body_bytes = 4096;
    TestServer server(config);
    auto c = server.client();
    json big = {{"prompt", std::string(8000, 'a')}};
    auto r = post_json(c, "/v1/completions", big);
    check_error(r, 413);
    auto c2 = server.client();
    check_still_serving(c2);
}

TEST_CASE("API keys: missing or wrong key is 401; health and UI stay public; metrics by setting") {
    auto config = test_config();
    config.api_keys = {"sekrit", "other"};
    TestServer server(config);
    auto c = server.client();
    check_error(post_json(c, "/v1/completions", {{"prompt", "x"}}), 401, "invalid_api_key");
    check_error(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}}), 401);
    check_error(c.Get("/v1/models", {{"Authorization", "Bearer sekri"}}), 401);
    CHECK(c.Get("/v1/models", {{"Authorization", "Bearer sekrit"}})->status == 200);
    CHECK(c.Get("/v1/models", {{"Authorization", "Bearer other"}})->status == 200);
    CHECK(c.Get("/health")->status == 200);
    CHECK(c.Get("/")->status == 200);
    CHECK(c.Get("/metrics")->status == 200);  // public unless metrics_auth
    c.set_bearer_token_auth("sekrit");
    check_still_serving(c);

    config.metrics_auth = true;
    TestServer locked(config);
    auto l = locked.client();
    check_error(l.Get("/metrics"), 401);
    CHECK(l.Get("/metrics", {{"Authorization", "Bearer sekrit"}})->status == 200);
}

TEST_CASE("while loading: 503 + Retry-After on the API, /health 503, UI served") {
    TestServer server(test_config(), {}, /*ready=*/false);
    auto c = server.client();
    auto r = post_json(c, "/v1/chat/completions", {{"messages", kUser}});
    check_error(r, 503, "model_loading");
    CHECK(r->get_header_value("Retry-After") == "5");
    auto h = c.Get("/health");
    check_error(h, 503);
    CHECK(h->has_header("Retry-After"));
    check_error(c.Get("/v1/models"), 503);
    CHECK(c.Get("/")->status == 200);
    server.state.phase = Phase::Ready;
    CHECK(c.Get("/health")->status == 200);
    check_still_serving(c);
}

TEST_CASE("a full queue answers 503 + Retry-After with an OpenAI error") {
    auto config = test_config();
    config.queue_depth = 1;
    FakeEngineOptions o;
    o.hold = std::make_shared<Gate>();  // the first job stays on the worker until the test lets go
    o.hold_at_token = 0;
    TestServer server(config, o);
    // Occupy the worker, then the one queue slot.
    std::thread busy([&] {
        auto c = server.client();
        post_json(c, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 40}});
    });
    REQUIRE(server.engine.options().held->wait());
    std::thread queued([&] {
        auto c = server.client();
        post_json(c, "/v1/completions", {{"prompt", "b"}, {"max_tokens", 2}});
    });
    REQUIRE(eventually([&] { return server.state.queue.size() == 1; }));
    auto c = server.client();
    auto r = post_json(c, "/v1/completions", {{"prompt", "c"}, {"max_tokens", 2}});
    check_error(r, 503, "queue_full");
    CHECK(r->get_header_value("Retry-After") == "2");
    CHECK(server.state.metrics.requests(RequestOutcome::RejectedFull) == 1);
    server.engine.options().hold->open();
    busy.join();
    queued.join();
    CHECK(server.state.metrics.requests(RequestOutcome::Ok) == 2);
    check_still_serving(c);
}

TEST_CASE("a client that disconnects mid-stream cancels its job at the token it was on") {
    FakeEngineOptions o;
    o.hold = std::make_shared<Gate>();  // never opened: only a cancel lets the job go on
    o.hold_at_token = 1;                // after two streamed tokens
    TestServer server(test_config(), o);
    uint64_t evaluated_when_held = 0;
    {
        RawClient raw(server.port);
        REQUIRE(raw.ok());
        raw.send_post("/v1/completions", json({{"prompt", "x"}, {"max_tokens", 200}, {"stream", true}}).dump());
        std::string got = raw.read_until("data: ");
        REQUIRE(got.find("200 OK") != std::string::npos);
        REQUIRE(server.engine.options().held->wait());
        evaluated_when_held = server.engine.evaluated();
    }  // hang up
    REQUIRE(eventually([&] { return server.state.metrics.requests(RequestOutcome::Cancelled) == 1; }));
    REQUIRE(eventually([&] { return !server.worker->busy(); }));
    // Not one more token was evaluated after the client left.
    CHECK(server.engine.evaluated() == evaluated_when_held);
    auto c = server.client();
    check_still_serving(c);
    auto m = c.Get("/metrics");
    CHECK(m->body.find("k3serve:requests_total{outcome=\"cancelled\"} 1") != std::string::npos);
}

TEST_CASE("with --abandoned-prefill-s 0 a client that disconnects during a long prefill cancels it (non-streamed request)") {
    FakeEngineOptions o;
    o.hold = std::make_shared<Gate>();  // never opened: the prefill stops at position 50
    o.hold_at_prompt_token = 50;
    // (by default the prompt would be read on into the prompt cache: test_daemon_abandoned_prefill.cpp)
    DaemonConfig config = test_config();
    config.abandoned_prefill_s = 0;
    TestServer server(config, o);
    {
        RawClient raw(server.port);
        raw.send_post("/v1/completions", json({{"prompt", std::string(200, 'p')}, {"max_tokens", 4}}).dump());
        REQUIRE(server.engine.options().held->wait());
    }
    REQUIRE(eventually([&] { return server.state.metrics.requests(RequestOutcome::Cancelled) == 1; }));
    CHECK(server.engine.evaluated() == 50);  // stopped part-way through the prompt, where it was
}

TEST_CASE("a queued job whose client left is dropped before it starts") {
    FakeEngineOptions o;
    o.hold = std::make_shared<Gate>();
    o.hold_at_token = 0;
    TestServer server(test_config(), o);
    std::thread busy([&] {
        auto c = server.client();
        post_json(c, "/v1/completions", {{"prompt", "a"}, {"max_tokens", 30}});
    });
    REQUIRE(server.engine.options().held->wait());
    {
        RawClient raw(server.port);
        raw.send_post("/v1/completions", json({{"prompt", "queued"}, {"max_tokens", 50}}).dump());
        REQUIRE(eventually([&] { return server.state.queue.size() == 1; }));
    }
    // The queued client has hung up. Take its job out of the queue (the worker is held, so it
    // is not looking), wait until its handler noticed and cancelled it, and put it back: only
    // then may the running job finish and the worker reach it.
    std::shared_ptr<Job> queued = server.state.queue.pop(std::chrono::milliseconds(0)).value_or(nullptr);
    REQUIRE(queued);
    REQUIRE(eventually([&] { return queued->cancel.load(); }));
    REQUIRE(server.state.queue.push(queued) == JobQueue::PushResult::Ok);
    server.engine.options().hold->open();
    busy.join();
    REQUIRE(eventually([&] { return server.state.metrics.requests(RequestOutcome::Dropped) == 1; }));
    CHECK(server.state.metrics.requests(RequestOutcome::Ok) == 1);
}

TEST_CASE("the per-request deadline cuts a slow request with 504") {
    auto config = test_config();
    config.deadline_s = 0.3;
    FakeEngineOptions o;
    o.token_delay = std::chrono::milliseconds(30);
    TestServer server(config, o);
    auto c = server.client();
    auto r = post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 100}});
    check_error(r, 504, "deadline_exceeded");
    CHECK(server.state.metrics.requests(RequestOutcome::Deadline) == 1);
    // Streamed: the error arrives as a data: {"error":...} event after the first tokens.
    auto s = post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 100}, {"stream", true}});
    REQUIRE(s->status == 200);
    auto events = sse_data(s->body);
    REQUIRE(events.size() >= 2);
    CHECK(events.back() == "[DONE]");
    json err = json::parse(events[events.size() - 2]);
    CHECK(err["error"]["code"] == "deadline_exceeded");
}

TEST_CASE("keep-alive chunks keep a stream alive while the first token is slow") {
    FakeEngineOptions o;
    o.prefill_delay = std::chrono::milliseconds(10);  // 100-token prompt: ~1 s, ping interval 0.2 s
    TestServer server(test_config(), o);
    auto c = server.client();
    auto r = post_json(c, "/v1/completions", {{"prompt", std::string(100, 'p')}, {"max_tokens", 3}, {"stream", true}});
    REQUIRE(r->status == 200);
    // Before the first token: chunks with no text (an event the SDKs hand over, docs/agents.md).
    const std::vector<std::string> data = sse_data(r->body);
    REQUIRE(data.size() >= 2);
    const json first = json::parse(data[0]);
    CHECK(first["choices"][0]["text"] == "");
    CHECK(first["choices"][0]["finish_reason"].is_null());
    CHECK(data.back() == "[DONE]");
}
