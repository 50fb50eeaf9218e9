// The Messages API's answers (server/anthropic/response.cpp) and its gate, one condition at a
// time: the worker's events -> content blocks in the order the model wrote them (thinking with
// its signature, text, tool_use streamed as its arguments are written; an unfinished or
// malformed call left out of the whole message), stop_reason for each way a turn ends, usage
// without the cached tokens, the prompt's figures in message_start, keep-alives that add
// nothing, the stream's event sequence against the whole message; over loopback, the x-api-key and Bearer headers
// each on their own, and errors in Anthropic's shape only on its routes (docs/api.md,
// "Anthropic Messages API"; docs/development.md, "Mutation check").
#include <doctest/doctest.h>

#include "anthropic/messages.h"
#include "server_harness.h"
#include "sse_frames.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {

using Frame = SseFrame;

// The frames of a Messages stream; each frame's data.type must equal its event.
std::vector<Frame> frames_of(const std::string& sse) {
    std::vector<Frame> out = sse_frames(sse);
    for (const auto& f : out) CHECK(f.data["type"] == f.event);
    return out;
}

std::vector<std::string> names(const std::vector<Frame>& frames) { return sse_event_names(frames); }

JobEvent delta(const std::string& content, const std::string& reasoning = "") {
    JobEvent e;
    e.content = content;
    e.reasoning = reasoning;
    return e;
}
JobEvent call(const std::string& name, const std::string& arguments) {
    JobEvent e;
    e.tool_calls.push_back({0, name, arguments});
    return e;
}
JobEvent done(FinishReason reason, const std::string& stop_sequence = "") {
    JobEvent e;
    e.kind = JobEvent::Kind::Done;
    e.finish_reason = reason;
    e.stop_sequence = stop_sequence;
    e.usage.prompt_tokens = 30;
    e.usage.cached_tokens = 12;
    e.usage.completion_tokens = 7;
    return e;
}

struct Answer {
    json message;                // the whole answer
    std::vector<Frame> stream;   // the same events streamed
};

GenerationRequest messages_request(bool hide_reasoning = false) {
    GenerationRequest r;
    r.endpoint = Endpoint::Messages;
    r.model = "claude-x";
    r.hide_reasoning = hide_reasoning;
    r.prompt.assign(30, 1);
    return r;
}

// `keep_alive_every`: a keep-alive after the start and after every event, as a stream that is
// quiet between them gets.
Answer answer(const std::vector<JobEvent>& events, bool hide_reasoning = false, bool keep_alive_every = false) {
    const GenerationRequest r = messages_request(hide_reasoning);
    auto whole = make_messages_responder(r);
    for (const auto& e : events) whole->collect(e);
    auto streamed = make_messages_responder(r);
    std::string sse = streamed->stream_start();
    for (const auto& e : events) {
        if (keep_alive_every) sse += streamed->keep_alive();
        sse += streamed->stream_event(e);
    }
    return {json::parse(whole->whole_body()), frames_of(sse)};
}

// The blocks a stream builds, from its content_block_start and deltas alone.
json blocks_from_stream(const std::vector<Frame>& frames) {
    json blocks = json::array();
    std::vector<std::string> partial_json;
    for (const auto& f : frames) {
        if (f.event == "content_block_start") {
            CHECK(f.data["index"] == blocks.size());
            blocks.push_back(f.data["content_block"]);
            partial_json.emplace_back();
        } else if (f.event == "content_block_delta") {
            size_t i = f.data["index"];
            REQUIRE(i + 1 == blocks.size());  // only the open block gets deltas
            const json& d = f.data["delta"];
            if (d["type"] == "text_delta") blocks[i]["text"] = blocks[i]["text"].get<std::string>() + d["text"].get<std::string>();
            else if (d["type"] == "thinking_delta") blocks[i]["thinking"] = blocks[i]["thinking"].get<std::string>() + d["thinking"].get<std::string>();
            else if (d["type"] == "signature_delta") blocks[i]["signature"] = d["signature"];
            else if (d["type"] == "input_json_delta") partial_json[i] += d["partial_json"].get<std::string>();
            else FAIL("unknown delta " << d.dump());
        }
    }
    // (a call's input as the SDKs reassemble it: its pieces parsed as one JSON text; the raw
    // text where they do not parse)
    for (size_t i = 0; i < blocks.size(); ++i) {
        if (blocks[i]["type"] != "tool_use") continue;
        json input = json::parse(partial_json[i], nullptr, false);
        blocks[i]["input"] = input.is_discarded() ? json(partial_json[i]) : input;
    }
    return blocks;
}

bool r_has_ignored_header(const httplib::Result& r) {
    REQUIRE(r);
    CHECK(r->status == 200);
    return r->has_header("X-K3-Ignored-Tools");
}

httplib::Result post_plain(httplib::Client& c) {
    return c.Post("/v1/messages", {{"x-api-key", "sekrit"}},
                  R"({"model": "claude-x", "max_tokens": 4, "temperature": 0, "thinking": {"type": "disabled"},
                      "messages": [{"role": "user", "content": "hi"}]})",
                  "application/json");
}

}  // namespace

TEST_CASE("Messages answer: thinking, text and tool_use blocks in the model's order; a call streams as it is written") {
    Answer a = answer({delta("", "Cold "), delta("", "up north."), delta("Checking."), call("get_weather", R"({"city":)"),
                       call("", R"("Oslo"})"), done(FinishReason::ToolCalls)});
    const json& c = a.message["content"];
    REQUIRE(c.size() == 3);
    CHECK(c[0]["type"] == "thinking");
    CHECK(c[0]["thinking"] == "Cold up north.");
    CHECK(thinking_from_signature(c[0]["signature"].get<std::string>()) == std::optional<std::string>("Cold up north."));
    CHECK(c[1] == json{{"type", "text"}, {"text", "Checking."}});
    CHECK(c[2]["type"] == "tool_use");
    CHECK(c[2]["name"] == "get_weather");
    CHECK(c[2]["input"] == json{{"city", "Oslo"}});
    CHECK(c[2]["id"].get<std::string>().rfind("toolu_", 0) == 0);
    CHECK(a.message["stop_reason"] == "tool_use");
    CHECK(a.message["stop_sequence"].is_null());
    CHECK(a.message["role"] == "assistant");
    CHECK(a.message["model"] == "claude-x");

    CHECK(names(a.stream) == std::vector<std::string>{
              "message_start", "ping",
              "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
              "content_block_start", "content_block_delta", "content_block_stop",
              "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
              "message_delta", "message_stop"});
    // The signature comes last in the thinking block, just before it closes.
    CHECK(a.stream[5].data["delta"]["type"] == "signature_delta");
    // The call opened with its name and id as soon as the model named it, its input empty; the
    // arguments followed as the model wrote them.
    CHECK(a.stream[10].data["content_block"]["input"] == json::object());
    CHECK(a.stream[10].data["content_block"]["name"] == "get_weather");
    CHECK(a.stream[11].data["delta"] == json{{"type", "input_json_delta"}, {"partial_json", R"({"city":)"}});
    CHECK(a.stream[12].data["delta"] == json{{"type", "input_json_delta"}, {"partial_json", R"("Oslo"})"}});
    json streamed = blocks_from_stream(a.stream);
    for (size_t i = 0; i < 3; ++i) {
        CAPTURE(i);
        json whole = c[i];
        if (whole["type"] == "tool_use") whole.erase("id"), streamed[i].erase("id");  // each responder draws its own
        CHECK(streamed[i] == whole);
    }
    CHECK(a.stream[0].data["message"]["content"] == json::array());
    CHECK(a.stream[0].data["message"]["stop_reason"].is_null());
    CHECK(a.stream[14].data["delta"]["stop_reason"] == "tool_use");
}

TEST_CASE("Messages answer: two calls are two tool_use blocks; text between blocks opens a new one") {
    Answer a = answer({call("get_weather", R"({"city":"Oslo"})"), call("get_time", R"({"zone":"CET"})"), done(FinishReason::ToolCalls)});
    const json& c = a.message["content"];
    REQUIRE(c.size() == 2);
    CHECK(c[0]["name"] == "get_weather");
    CHECK(c[0]["input"] == json{{"city", "Oslo"}});
    CHECK(c[1]["name"] == "get_time");
    CHECK(c[1]["input"] == json{{"zone", "CET"}});
    CHECK(c[0]["id"] != c[1]["id"]);
    CHECK(blocks_from_stream(a.stream).size() == 2);

    Answer t = answer({delta("a", "r1"), delta("b"), delta("", "r2"), delta("c"), done(FinishReason::Stop)});
    const json& b = t.message["content"];
    REQUIRE(b.size() == 4);
    CHECK(b[0]["thinking"] == "r1");
    CHECK(b[1]["text"] == "ab");
    CHECK(b[2]["thinking"] == "r2");
    CHECK(thinking_from_signature(b[2]["signature"].get<std::string>()) == std::optional<std::string>("r2"));
    CHECK(b[3]["text"] == "c");
}

TEST_CASE("Messages answer: a call cut short or void is left out of the whole message; streamed, its block closes") {
    // The turn ended by length inside a call: the whole message has no call; the stream had
    // opened it, and closes it with the input written so far (as Anthropic's streams do).
    Answer cut = answer({delta("Let me check."), call("get_weather", R"({"city":"Os)"), done(FinishReason::Length)});
    CHECK(cut.message["content"] == json::array({{{"type", "text"}, {"text", "Let me check."}}}));
    CHECK(cut.message["stop_reason"] == "max_tokens");
    json cut_blocks = blocks_from_stream(cut.stream);
    REQUIRE(cut_blocks.size() == 2);
    CHECK(cut_blocks[1]["input"] == R"({"city":"Os)");
    CHECK(names(cut.stream).at(cut.stream.size() - 3) == "content_block_stop");
    // A malformed tools channel voids the calls so far; its raw text follows as text.
    JobEvent bad = delta("<tools>oops");
    bad.tool_calls_malformed = true;
    Answer void_calls = answer({call("get_weather", R"({"city":"Oslo"})"), bad, done(FinishReason::Stop)});
    CHECK(void_calls.message["content"] == json::array({{{"type", "text"}, {"text", "<tools>oops"}}}));
    json void_blocks = blocks_from_stream(void_calls.stream);
    REQUIRE(void_blocks.size() == 2);
    CHECK(void_blocks[0]["type"] == "tool_use");
    CHECK(void_blocks[1] == void_calls.message["content"][0]);
    // A complete call followed by text is sent when the text starts, the end reason aside.
    Answer then_text = answer({call("get_weather", R"({"city":"Oslo"})"), delta("done"), done(FinishReason::Stop)});
    REQUIRE(then_text.message["content"].size() == 2);
    CHECK(then_text.message["content"][0]["type"] == "tool_use");
    CHECK(then_text.message["content"][1]["text"] == "done");
}

TEST_CASE("Messages answer: stop_reason for each end, the stop sequence, usage without the cached tokens") {
    CHECK(answer({delta("x"), done(FinishReason::Stop)}).message["stop_reason"] == "end_turn");
    CHECK(answer({delta("x"), done(FinishReason::Length)}).message["stop_reason"] == "max_tokens");
    Answer s = answer({delta("x"), done(FinishReason::Stop, "END")});
    CHECK(s.message["stop_reason"] == "stop_sequence");
    CHECK(s.message["stop_sequence"] == "END");
    const Frame& md = s.stream[s.stream.size() - 2];
    REQUIRE(md.event == "message_delta");
    CHECK(md.data["delta"] == json{{"stop_reason", "stop_sequence"}, {"stop_sequence", "END"}});
    json usage = {{"input_tokens", 18}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 12}, {"output_tokens", 7}};
    CHECK(s.message["usage"] == usage);
    CHECK(md.data["usage"] == usage);
    // Nothing at all: an empty content list, still a complete stream.
    Answer empty = answer({done(FinishReason::Stop)});
    CHECK(empty.message["content"] == json::array());
    CHECK(names(empty.stream) == std::vector<std::string>{"message_start", "ping", "message_delta", "message_stop"});
}

TEST_CASE("Messages stream: keep-alives are events that add nothing; message_start has the prompt's figures") {
    const std::vector<JobEvent> events = {delta("", "hmm"), delta("Checking."), call("get_weather", R"({"city":)"),
                                          call("", R"("Oslo"})"), done(FinishReason::ToolCalls)};
    Answer quiet = answer(events, false, true);
    Answer plain = answer(events);
    // Before the first block: a message_delta with no stop_reason and the usage so far; in a
    // block: an empty delta of its kind.
    CHECK(quiet.stream[2].event == "message_delta");
    CHECK(quiet.stream[2].data["delta"] == json{{"stop_reason", nullptr}, {"stop_sequence", nullptr}});
    int empty_deltas = 0;
    for (const auto& f : quiet.stream) {
        if (f.event != "content_block_delta") continue;
        const json& d = f.data["delta"];
        for (const char* field : {"text", "thinking", "partial_json"})
            if (d.contains(field) && d[field] == "") ++empty_deltas;
    }
    CHECK(empty_deltas == 4);  // one in each block open before an event: thinking, text, the call twice
    // The same blocks and end as without them; the whole message is not touched by them.
    json a = blocks_from_stream(quiet.stream), b = blocks_from_stream(plain.stream);
    a[2].erase("id"), b[2].erase("id");
    CHECK(a == b);
    CHECK(quiet.stream.back().event == "message_stop");
    CHECK(quiet.stream[quiet.stream.size() - 2].data == plain.stream[plain.stream.size() - 2].data);

    // message_start: the whole prompt as input until the worker says what it resumed; then the
    // real split, in message_start and in the keep-alive before the first block.
    auto before = make_messages_responder(messages_request());
    json start = frames_of(before->stream_start())[0].data["message"]["usage"];
    CHECK(start["input_tokens"] == 30);
    CHECK(start["cache_read_input_tokens"] == 0);
    CHECK(frames_of(before->keep_alive())[0].data["usage"]["input_tokens"] == 30);
    before->prompt_begun(30, 12);
    CHECK(frames_of(before->keep_alive())[0].data["usage"]["cache_read_input_tokens"] == 12);
    auto begun = make_messages_responder(messages_request());
    begun->prompt_begun(30, 12);
    start = frames_of(begun->stream_start())[0].data["message"]["usage"];
    CHECK(start == json{{"input_tokens", 18}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 12},
                        {"output_tokens", 0}});
}

TEST_CASE("Messages answer: display omitted sends no thinking text, only the signature that holds it") {
    Answer a = answer({delta("", "secret plan"), delta("ok"), done(FinishReason::Stop)}, true);
    const json& c = a.message["content"];
    REQUIRE(c.size() == 2);
    CHECK(c[0]["thinking"] == "");
    CHECK(thinking_from_signature(c[0]["signature"].get<std::string>()) == std::optional<std::string>("secret plan"));
    for (const auto& f : a.stream) {
        CHECK(f.data.dump().find("secret plan") == std::string::npos);
        if (f.event == "content_block_delta") CHECK(f.data["delta"]["type"] != "thinking_delta");
    }
    CHECK(blocks_from_stream(a.stream)[0]["signature"] == c[0]["signature"]);
}

TEST_CASE("Messages errors: each status in Anthropic's type; a full queue is 529 overloaded") {
    auto type_of = [](int status, const std::string& code = "x") {
        json b = anthropic_error_body(ApiError(status, "t", code, "", "why"));
        CHECK(b["type"] == "error");
        CHECK(b["error"]["message"] == "why");
        return b["error"]["type"].get<std::string>();
    };
    CHECK(type_of(400) == "invalid_request_error");
    CHECK(type_of(415) == "invalid_request_error");
    CHECK(type_of(401) == "authentication_error");
    CHECK(type_of(403) == "permission_error");
    CHECK(type_of(404) == "not_found_error");
    CHECK(type_of(413) == "request_too_large");
    CHECK(type_of(429) == "rate_limit_error");
    CHECK(type_of(503) == "overloaded_error");
    CHECK(type_of(500) == "api_error");
    CHECK(type_of(504) == "api_error");
    CHECK(type_of(499) == "invalid_request_error");
    ApiError full = queue_full_error(4);
    CHECK(anthropic_status(full) == 529);
    CHECK(anthropic_error_body(full)["error"]["type"] == "overloaded_error");
    CHECK(anthropic_status(ApiError(503, "t", "loading", "", "m")) == 503);
    CHECK(is_anthropic_path("/v1/messages"));
    CHECK(is_anthropic_path("/v1/messages/count_tokens"));
    CHECK_FALSE(is_anthropic_path("/v1/messagesx"));
    CHECK_FALSE(is_anthropic_path("/v1/chat/completions"));
}

TEST_CASE("Messages API over loopback: x-api-key and Bearer each on its own; errors in Anthropic's shape") {
    auto config = test_config();
    config.api_keys = {"sekrit"};
    FakeEngineOptions o;
    o.script = chat_answer("Hello there!");
    TestServer server(config, o);
    auto c = server.client();
    // Thinking off: the fake's script is a plain answer (a request that says nothing thinks).
    const std::string body = R"({"model": "claude-x", "max_tokens": 32, "temperature": 0, "thinking": {"type": "disabled"},
                                 "messages": [{"role": "user", "content": "hi"}]})";
    auto post = [&](const httplib::Headers& h, const std::string& path = "/v1/messages", const std::string& b = "") {
        auto r = c.Post(path, h, b.empty() ? body : b, "application/json");
        REQUIRE(r);
        return std::make_pair(r->status, json::parse(r->body));
    };
    auto [ok_status, message] = post({{"x-api-key", "sekrit"}, {"anthropic-version", "2023-06-01"}});
    CHECK(ok_status == 200);
    CHECK(message["type"] == "message");
    CHECK(message["content"] == json::array({{{"type", "text"}, {"text", "Hello there!"}}}));
    CHECK(message["stop_reason"] == "end_turn");
    CHECK(post({{"Authorization", "Bearer sekrit"}}).first == 200);
    auto [wrong_status, wrong] = post({{"x-api-key", "sekriT"}});
    CHECK(wrong_status == 401);
    CHECK(wrong["type"] == "error");
    CHECK(wrong["error"]["type"] == "authentication_error");
    CHECK(post({}).first == 401);
    CHECK(post({{"Authorization", "Bearer nope"}, {"x-api-key", "sekrit"}}).first == 401);
    CHECK(post({{"x-api-key", "sekrit"}}, "/v1/messages/count_tokens").second.contains("input_tokens"));

    // A bad request: Anthropic's shape on its route, OpenAI's on chat completions.
    auto [bad_status, bad] = post({{"x-api-key", "sekrit"}}, "/v1/messages", R"({"max_tokens": 8, "messages": []})");
    CHECK(bad_status == 400);
    CHECK(bad["type"] == "error");
    CHECK(bad["error"]["type"] == "invalid_request_error");
    CHECK(bad["error"]["message"].get<std::string>().find("'messages' must not be empty") != std::string::npos);
    auto [chat_status, chat_bad] = post({{"x-api-key", "sekrit"}}, "/v1/chat/completions", R"({"messages": []})");
    CHECK(chat_status == 400);
    CHECK_FALSE(chat_bad.contains("type"));
    CHECK(chat_bad["error"].contains("code"));

    // The tolerance policy: unknown fields and a hosted tool leave the request served, the tool
    // named in X-K3-Ignored-Tools, both counted in /metrics.
    auto figure = [&](const std::string& name) {
        auto m = c.Get("/metrics");
        REQUIRE(m);
        size_t at = m->body.find("\n" + name + " ");
        REQUIRE(at != std::string::npos);
        return std::stod(m->body.substr(at + name.size() + 2));
    };
    double fields_before = figure("k3serve:ignored_fields_total"), tools_before = figure("k3serve:ignored_tools_total");
    auto tolerant = c.Post("/v1/messages", {{"x-api-key", "sekrit"}},
                           R"({"model": "claude-x", "max_tokens": 4, "temperature": 0, "future_knob": 1, "thinking": {"type": "disabled"},
                               "tools": [{"type": "bash_20250124", "name": "bash"}],
                               "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "shade": "blue"}]}]})",
                           "application/json");
    REQUIRE(tolerant);
    CHECK(tolerant->status == 200);
    CHECK(tolerant->get_header_value("X-K3-Ignored-Tools") == "bash_20250124");
    CHECK(figure("k3serve:ignored_fields_total") == fields_before + 2);
    CHECK(figure("k3serve:ignored_tools_total") == tools_before + 1);
    CHECK_FALSE(r_has_ignored_header(post_plain(c)));

    // Streamed over the wire: the same events, ending in message_stop.
    auto r = c.Post("/v1/messages", {{"x-api-key", "sekrit"}},
                    R"({"model": "claude-x", "max_tokens": 32, "temperature": 0, "stream": true, "thinking": {"type": "disabled"},
                        "messages": [{"role": "user", "content": "hi"}]})",
                    "application/json");
    REQUIRE(r);
    CHECK(r->status == 200);
    std::vector<Frame> frames = frames_of(r->body);
    REQUIRE(frames.size() >= 4);
    CHECK(frames.front().event == "message_start");
    CHECK(frames.back().event == "message_stop");
    CHECK(blocks_from_stream(frames) == message["content"]);
}
