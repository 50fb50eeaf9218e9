// The OpenAI API over real HTTP on loopback, against the real worker and HTTP layer with a
// FakeEngine: response shapes, SSE framing, usage, stop strings, seeds, state reuse, and the
// side routes (/health, /v1/models, /props, /metrics, /tokenize, /detokenize, UI, CORS).
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "server_harness.h"

using namespace k3::test;

namespace {

json body_of(const httplib::Result& r) {
    REQUIRE(r);
    return json::parse(r->body);
}

// Concatenated text of a completions or chat SSE stream; checks the framing on the way.
struct StreamSummary {
    std::string text, reasoning, id, finish_reason;
    int chunks = 0;
    bool done = false, role_first = false;
    json usage;
};

StreamSummary read_stream(const std::string& body, bool chat) {
    StreamSummary s;
    auto events = sse_data(body);
    REQUIRE(!events.empty());
    for (size_t i = 0; i < events.size(); ++i) {
        if (events[i] == "[DONE]") {
            CHECK(i + 1 == events.size());
            s.done = true;
            break;
        }
        json j = json::parse(events[i]);
        REQUIRE_FALSE(j.contains("error"));
        if (s.id.empty()) s.id = j["id"];
        CHECK(j["id"] == s.id);  // one id for the whole stream
        CHECK(j["object"] == (chat ? "chat.completion.chunk" : "text_completion"));
        if (j["choices"].empty()) {  // the usage chunk
            s.usage = j["usage"];
            continue;
        }
        CHECK(s.finish_reason.empty());  // nothing after the finishing chunk but usage
        const json& c = j["choices"][0];
        if (chat) {
            if (i == 0) s.role_first = c["delta"].value("role", "") == "assistant";
            s.text += c["delta"].value("content", "");
            s.reasoning += c["delta"].value("reasoning_content", "");
        } else {
            s.text += c["text"].get<std::string>();
        }
        if (!c["finish_reason"].is_null()) s.finish_reason = c["finish_reason"];
        ++s.chunks;
    }
    return s;
}

}  // namespace

TEST_CASE("completions: greedy text, usage and response shape") {
    TestServer server;
    auto c = server.client();
    auto r = post_json(c, "/v1/completions",
                       {{"model", "fake"}, {"prompt", "Hi"}, {"max_tokens", 9}, {"temperature", 0}});
    REQUIRE(r->status == 200);
    json j = body_of(r);
    CHECK(j["object"] == "text_completion");
    CHECK(j["id"].get<std::string>().rfind("cmpl-", 0) == 0);
    CHECK(j["model"] == "fake");
    CHECK(j["choices"][0]["text"] == "The quick");
    CHECK(j["choices"][0]["finish_reason"] == "length");
    CHECK(j["usage"]["prompt_tokens"] == 2);
    CHECK(j["usage"]["completion_tokens"] == 9);
    CHECK(j["usage"]["total_tokens"] == 11);
}

TEST_CASE("completions: EOS ends with finish_reason stop; echo prepends the prompt") {
    FakeEngineOptions o;
    o.script = bytes_of("abc");
    o.script.push_back(FakeTokenizer::kEos);
    TestServer server(test_config(), o);
    auto c = server.client();
    json j = body_of(post_json(c, "/v1/completions", {{"prompt", "xy"}, {"max_tokens", 10}, {"temperature", 0}, {"echo", true}}));
    CHECK(j["choices"][0]["text"] == "xyabc");
    CHECK(j["choices"][0]["finish_reason"] == "stop");
    CHECK(j["usage"]["completion_tokens"] == 4);
}

TEST_CASE("completions: special tokens add no text unless skip_special_tokens is false") {
    FakeEngineOptions o;
    o.script = {'a', FakeTokenizer::kSep, 'b'};
    TestServer server(test_config(), o);
    auto c = server.client();
    json j = body_of(post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"temperature", 0}}));
    CHECK(j["choices"][0]["text"] == "ab");
    json k = body_of(post_json(c, "/v1/completions",
                               {{"prompt", "x"}, {"max_tokens", 3}, {"temperature", 0}, {"skip_special_tokens", false}}));
    CHECK(k["choices"][0]["text"] == "a<|sep|>b");
}

TEST_CASE("completions: token-id prompts and a list of one prompt are accepted") {
    TestServer server;
    auto c = server.client();
    json a = body_of(post_json(c, "/v1/completions", {{"prompt", json::array({72, 105})}, {"max_tokens", 3}, {"temperature", 0}}));
    json b = body_of(post_json(c, "/v1/completions", {{"prompt", json::array({"Hi"})}, {"max_tokens", 3}, {"temperature", 0}}));
    json d = body_of(post_json(c, "/v1/completions",
                               {{"prompt", json::array({json::array({72, 105})})}, {"max_tokens", 3}, {"temperature", 0}}));
    CHECK(a["choices"][0]["text"] == "The");
    CHECK(b["choices"][0]["text"] == "The");
    CHECK(d["choices"][0]["text"] == "The");
    CHECK(a["usage"]["prompt_tokens"] == 2);
}

TEST_CASE("stop strings are honoured across token boundaries and never emitted") {
    TestServer server;
    auto c = server.client();
    // Each token is one byte, so "ck b" spans four tokens.
    json j = body_of(post_json(c, "/v1/completions",
                               {{"prompt", "x"}, {"max_tokens", 30}, {"temperature", 0}, {"stop", json::array({"zzz", "ck b"})}}));
    CHECK(j["choices"][0]["text"] == "The qui");
    CHECK(j["choices"][0]["finish_reason"] == "stop");

    auto r = post_json(c, "/v1/completions",
                       {{"prompt", "x"}, {"max_tokens", 30}, {"temperature", 0}, {"stop", "ck b"}, {"stream", true}});
    REQUIRE(r->status == 200);
    auto s = read_stream(r->body, false);
    CHECK(s.text == "The qui");
    CHECK(s.finish_reason == "stop");
    CHECK(r->body.find("ck") == std::string::npos);
    // A partial match that does not complete is released.
    json k = body_of(post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 5}, {"temperature", 0}, {"stop", "quiet"}}));
    CHECK(k["choices"][0]["text"] == "The q");
}

TEST_CASE("completions streaming: one id, finish_reason on the last chunk, usage chunk, [DONE]") {
    TestServer server;
    auto c = server.client();
    auto r = post_json(c, "/v1/completions",
                       {{"prompt", "Hi"}, {"max_tokens", 5}, {"temperature", 0}, {"stream", true},
                        {"stream_options", {{"include_usage", true}}}});
    REQUIRE(r->status == 200);
    CHECK(r->get_header_value("Content-Type").find("text/event-stream") == 0);
    auto s = read_stream(r->body, false);
    CHECK(s.text == "The q");
    CHECK(s.finish_reason == "length");
    CHECK(s.done);
    CHECK(s.usage["completion_tokens"] == 5);
    CHECK(s.usage["prompt_tokens"] == 2);
    // Without include_usage there is no usage chunk.
    auto r2 = post_json(c, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 2}, {"stream", true}});
    CHECK(read_stream(r2->body, false).usage.is_null());
}

TEST_CASE("chat: non-streamed and streamed answers, role first, usage") {
    FakeEngineOptions o;
    o.script = chat_answer("Hello there!");
    TestServer server(test_config(), o);
    auto c = server.client();
    // Thinking off: the fake's script is a plain answer (a request that says nothing thinks).
    json req = {{"model", "fake"}, {"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"temperature", 0},
                {"thinking", false}};
    json j = body_of(post_json(c, "/v1/chat/completions", req));
    CHECK(j["object"] == "chat.completion");
    CHECK(j["id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
    CHECK(j["choices"][0]["message"]["role"] == "assistant");
    CHECK(j["choices"][0]["message"]["content"] == "Hello there!");
    CHECK(j["choices"][0]["finish_reason"] == "stop");
    CHECK(j["usage"]["prompt_tokens"].get<int>() > 2);

    req["stream"] = true;
    req["stream_options"] = {{"include_usage", true}};
    auto r = post_json(c, "/v1/chat/completions", req);
    auto s = read_stream(r->body, true);
    CHECK(s.role_first);
    CHECK(s.text == "Hello there!");
    CHECK(s.finish_reason == "stop");
    CHECK(s.done);
    CHECK(s.usage["completion_tokens"] == j["usage"]["completion_tokens"]);
}

TEST_CASE("chat: max_completion_tokens limits the answer; max_tokens is the alias") {
    FakeEngineOptions o;
    o.script = chat_answer("Hello there!");
    TestServer server(test_config(), o);
    auto c = server.client();
    json req = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"temperature", 0}, {"max_completion_tokens", 4},
                {"thinking", false}};
    json j = body_of(post_json(c, "/v1/chat/completions", req));
    CHECK(j["choices"][0]["message"]["content"] == "Hell");
    CHECK(j["choices"][0]["finish_reason"] == "length");
    req.erase("max_completion_tokens");
    req["max_tokens"] = 2;
    CHECK(body_of(post_json(c, "/v1/chat/completions", req))["choices"][0]["message"]["content"] == "He");
}

TEST_CASE("seeds: the same seed gives the same text, different seeds differ") {
    TestServer server;
    auto c = server.client();
    auto run = [&](int seed) {
        json j = body_of(post_json(c, "/v1/completions",
                                   {{"prompt", "x"}, {"max_tokens", 24}, {"temperature", 1.0}, {"seed", seed}}));
        return j["choices"][0]["text"].get<std::string>();
    };
    std::string a = run(7);
    CHECK(run(7) == a);
    bool any_different = false;
    for (int seed = 8; seed < 12; ++seed) any_different |= run(seed) != a;
    CHECK(any_different);
}

TEST_CASE("state reuse: a second turn reports cached tokens and matches a cold run") {
    FakeEngineOptions o;
    o.script = chat_answer("Sure.");
    json turn1 = {{"messages", json::array({{{"role", "user"}, {"content", "Tell me about foxes."}}})}, {"temperature", 0},
                  {"thinking", false}};
    json turn2 = turn1;
    turn2["messages"].push_back({{"role", "assistant"}, {"content", "Sure."}});
    turn2["messages"].push_back({{"role", "user"}, {"content", "More, please."}});

    TestServer warm(test_config(), o);
    auto c = warm.client();
    json first = body_of(post_json(c, "/v1/chat/completions", turn1));
    CHECK(first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    uint64_t evaluated_before = warm.engine.evaluated();
    json second = body_of(post_json(c, "/v1/chat/completions", turn2));
    int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"];
    CHECK(cached > first["usage"]["prompt_tokens"].get<int>() - 2);
    // Only the new part of the prompt (and the answer) was evaluated. prompt_tokens leaves out the
    // generation opener the model still reads (docs/api.md "Thinking", Usage).
    CHECK(warm.engine.evaluated() - evaluated_before <=
          uint64_t(second["usage"]["prompt_tokens"].get<int>() + k3::kGenerationOpenerTokens - cached +
                   second["usage"]["completion_tokens"].get<int>()));

    TestServer cold(test_config(), o);
    auto cc = cold.client();
    json cold_second = body_of(post_json(cc, "/v1/chat/completions", turn2));
    CHECK(cold_second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    CHECK(cold_second["choices"][0]["message"]["content"] == second["choices"][0]["message"]["content"]);

    // The fake's answer does not depend on its prompt, so the equal answers above prove little:
    // what does is that the warm engine was given exactly the cold engine's prompt, holding the
    // whole conversation in order, and skipped just the cached part of it.
    const auto warm_prompts = warm.engine.prompts();
    REQUIRE(warm_prompts.size() == 2);
    CHECK(warm_prompts[1] == cold.engine.last_prompt());
    CHECK(warm.engine.reused() == std::vector<int>{0, cached});
    const std::string text = warm.tokenizer.decode(warm_prompts[1]);
    const size_t q1 = text.find("Tell me about foxes."), a1 = text.find("Sure."), q2 = text.find("More, please.");
    CHECK(q1 != std::string::npos);
    CHECK(a1 != std::string::npos);
    CHECK(q2 != std::string::npos);
    CHECK((q1 < a1 && a1 < q2));
    // The reused part is the first prompt (and then the first answer, not recorded here).
    const auto shared = std::ptrdiff_t(std::min(size_t(cached), warm_prompts[0].size()));
    CHECK(std::equal(warm_prompts[0].begin(), warm_prompts[0].begin() + shared, warm_prompts[1].begin()));
}

TEST_CASE("logprobs: completions layout and chat layout") {
    TestServer server;
    auto c = server.client();
    json j = body_of(post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}}));
    const json& lp = j["choices"][0]["logprobs"];
    REQUIRE(lp["tokens"].size() == 3);
    CHECK(lp["tokens"][0] == "T");
    CHECK(lp["token_logprobs"][0].get<double>() < 0);
    CHECK(lp["token_logprobs"][0].get<double>() > -1);
    CHECK(lp["top_logprobs"][0].size() == 2);
    CHECK(lp["text_offset"][1] == 1);

    FakeEngineOptions o;
    o.script = chat_answer("Hey");
    TestServer chat(test_config(), o);
    auto cc = chat.client();
    json k = body_of(post_json(cc, "/v1/chat/completions",
                               {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"temperature", 0},
                                {"thinking", false}, {"logprobs", true}, {"top_logprobs", 1}}));
    const json& content = k["choices"][0]["logprobs"]["content"];
    REQUIRE(content.size() >= 3);
    CHECK(content[0]["token"] == "H");
    CHECK(content[0]["bytes"] == json::array({72}));
    CHECK(content[0]["top_logprobs"].size() == 1);
}

TEST_CASE("side routes: health, models, props, tokenize, detokenize, metrics, UI") {
    TestServer server;
    auto c = server.client();
    auto h = c.Get("/health");
    CHECK(h->status == 200);
    CHECK(body_of(h)["status"] == "ok");
    json models = body_of(c.Get("/v1/models"));
    CHECK(models["object"] == "list");
    CHECK(models["data"][0]["id"] == "fake");
    CHECK(models["data"][0]["object"] == "model");
    json props = body_of(c.Get("/props"));
    CHECK(props["model"]["fingerprint"] == "fake0123456789abcdef");
    CHECK(props["config"]["queue_depth"] == 4);
    CHECK(props["n_ctx"] == 256);
    // A chat request that says nothing of thinking thinks (docs/api.md "Thinking").
    CHECK(props["default_generation_settings"]["thinking"] == true);
    json t = body_of(post_json(c, "/tokenize", {{"content", "Hi<|sep|>"}, {"add_special", true}}));
    CHECK(t["tokens"] == json::array({72, 105, FakeTokenizer::kSep}));
    json t2 = body_of(post_json(c, "/tokenize", {{"content", "Hi"}, {"with_pieces", true}}));
    CHECK(t2["tokens"][1]["piece"] == "i");
    json d = body_of(post_json(c, "/detokenize", {{"tokens", json::array({72, 105})}}));
    CHECK(d["content"] == "Hi");
    CHECK(post_json(c, "/detokenize", {{"tokens", json::array({100000})}})->status == 400);

    post_json(c, "/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}});
    auto m = c.Get("/metrics");
    REQUIRE(m->status == 200);
    CHECK(m->get_header_value("Content-Type").find("text/plain; version=0.0.4") == 0);
    for (const char* name :
         {"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "k3serve:queue_depth",
          "k3serve:requests_total{outcome=\"ok\"} 1", "k3serve:time_to_first_token_seconds_bucket",
          "k3serve:time_per_output_token_seconds_count", "k3serve:expert_cache_hits_total 7",
          "k3serve:expert_cache_misses_total 3", "k3serve:io_share", "k3serve:resident_memory_bytes",
          "k3serve:resident_memory_peak_bytes", "k3serve:expert_bytes_read_total"})
        CHECK_MESSAGE(m->body.find(name) != std::string::npos, name);

    auto ui = c.Get("/");
    REQUIRE(ui->status == 200);
    CHECK(ui->get_header_value("Content-Type").find("text/html") == 0);
    CHECK(ui->body.find("<html") != std::string::npos);
    CHECK(c.Get("/app.js")->status == 200);
    CHECK(c.Get("/style.css")->status == 200);
    CHECK(c.Get("/../../etc/passwd")->status == 404);
    CHECK(c.Get("/CMakeLists.txt")->status == 404);
}

TEST_CASE("CORS is off unless configured; configured origin gets headers and preflight") {
    {
        TestServer server;
        auto c = server.client();
        auto r = c.Get("/v1/models", {{"Origin", "http://evil.example"}});
        CHECK_FALSE(r->has_header("Access-Control-Allow-Origin"));
    }
    auto config = test_config();
    config.cors_origin = "http://app.example";
    TestServer server(config);
    auto c = server.client();
    auto r = c.Get("/v1/models", {{"Origin", "http://app.example"}});
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "http://app.example");
    auto other = c.Get("/v1/models", {{"Origin", "http://evil.example"}});
    CHECK_FALSE(other->has_header("Access-Control-Allow-Origin"));
    auto pre = c.Options("/v1/chat/completions", {{"Origin", "http://app.example"}});
    CHECK(pre->status == 204);
    CHECK(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization") != std::string::npos);
}

TEST_CASE("web-dir serves the UI's files from disk, and only those") {
    auto dir = std::string(std::getenv("K3_SOURCE_DIR") ? std::getenv("K3_SOURCE_DIR") : ".") + "/web";
    auto config = test_config();
    config.web_dir = dir;
    TestServer server(config);
    auto c = server.client();
    auto r = c.Get("/app.js");
    REQUIRE(r->status == 200);
    std::ifstream in(dir + "/app.js");
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(r->body == ss.str());
    CHECK(c.Get("/index.html")->status == 200);
    CHECK(c.Get("/README.md")->status == 404);
}

TEST_CASE("GET /v1/status: the loading line and progress, then the figures of a finished request") {
    TestServer loading(test_config(), {}, /*ready=*/false);
    loading.state.set_status("loading weights 25%");
    auto lc = loading.client();
    json l = body_of(lc.Get("/v1/status"));
    CHECK(l["phase"] == "loading");
    CHECK(l["progress"].get<double>() == doctest::Approx(0.25));
    CHECK(l["memory"]["plan_bytes"].is_null());
    CHECK(lc.Get("/v1/models")->status == 503);  // the API itself still waits

    TestServer server;
    auto c = server.client();
    json before = body_of(c.Get("/v1/status"));
    CHECK(before["phase"] == "ready");
    CHECK(before["last_request"].is_null());
    CHECK(before["tokens"].empty());
    json done = body_of(post_json(c, "/v1/completions", {{"prompt", "hello"}, {"max_tokens", 5}, {"temperature", 0}}));
    json after = body_of(c.Get("/v1/status"));
    CHECK(after["active"].empty());
    CHECK(after["last_request"]["stage"] == "finished");
    CHECK(after["last_request"]["generated_tokens"] == 5);
    CHECK(after["last_request"]["prompt_tokens"] == done["usage"]["prompt_tokens"]);
    // One sample per decode step: the first token comes from the prompt's logits.
    REQUIRE(after["tokens"].size() == 4);
    uint64_t last = after["tokens"][3]["seq"];
    CHECK(body_of(c.Get(("/v1/status?since=" + std::to_string(last - 1)).c_str()))["tokens"].size() == 1);
    CHECK(c.Get("/v1/status?since=x")->status == 400);
    CHECK(after["queue"]["capacity"] == 4);
    CHECK(after["requests"]["ok"] == 1);
}
