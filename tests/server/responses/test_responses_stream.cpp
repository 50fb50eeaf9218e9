// The Responses API's answers (docs/api.md, "Responses API"): the worker's events -> a stream
// whose every event has a type OpenAI's description lists (responses_event_types.h, written from
// it), numbered in order, in the order the items grow, ending in the whole response; and the
// function_call items' ids: call_id (what a function_call_output answers) is never the item's
// id, whole or streamed.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "responses/responses.h"
#include "responses_event_types.h"
#include "sse_frames.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {

JobEvent delta(const std::string& content, const std::string& reasoning = "") {
    JobEvent e;
    e.content = content;
    e.reasoning = reasoning;
    return e;
}
JobEvent call(const std::string& name, const std::string& arguments, int index = 0) {
    JobEvent e;
    e.tool_calls.push_back({index, name, arguments});
    return e;
}
JobEvent done(FinishReason reason) {
    JobEvent e;
    e.kind = JobEvent::Kind::Done;
    e.finish_reason = reason;
    e.usage.prompt_tokens = 20;
    e.usage.completion_tokens = 9;
    return e;
}

struct Answer {
    json response;                 // the whole answer
    std::vector<SseFrame> stream;  // the same events streamed
};

Answer answer(const std::vector<JobEvent>& events) {
    GenerationRequest r;
    r.endpoint = Endpoint::Responses;
    r.model = "gpt-x";
    auto whole = make_responses_responder(r);
    for (const auto& e : events) whole->collect(e);
    auto streamed = make_responses_responder(r);
    std::string sse = streamed->stream_start();
    for (const auto& e : events) sse += streamed->stream_event(e);
    return {json::parse(whole->whole_body()), sse_frames(sse)};
}

// What an item is, without its random ids.
json without_ids(json item) {
    item.erase("id");
    item.erase("call_id");
    return item;
}

const std::vector<JobEvent> kThinkTalkCall = {delta("", "Cold "), delta("", "up north."), delta("Checking."),
                                              call("get_weather", R"({"city":)"), call("", R"("Oslo"})"),
                                              call("get_time", R"({})", 1), done(FinishReason::ToolCalls)};

}  // namespace

TEST_CASE("Responses stream: every event has a type OpenAI lists, its name as the SSE event, numbered in order") {
    const std::set<std::string_view> known(std::begin(kResponsesStreamEventTypes), std::end(kResponsesStreamEventTypes));
    Answer a = answer(kThinkTalkCall);
    REQUIRE(!a.stream.empty());
    for (size_t i = 0; i < a.stream.size(); ++i) {
        const SseFrame& f = a.stream[i];
        CAPTURE(f.data.dump());
        CHECK(known.count(f.event) == 1);
        CHECK(f.data["type"] == f.event);
        CHECK(f.data["sequence_number"] == i);
    }
    // The events this answer needs, in the order its items grow (a reasoning item, a message,
    // two calls): a renamed event fails here even if its new name is another known type.
    const std::vector<std::string> expected = {
        "response.created", "response.in_progress",
        // the reasoning item, its part announced before its deltas as the message's is (the openai
        // SDK's ResponseStream refuses a reasoning_text.delta whose part was never added)
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
        "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
        "response.output_item.done",
        // the message
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        // the two calls, the first one's arguments in two pieces
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed"};
    CHECK(sse_event_names(a.stream) == expected);
}

TEST_CASE("Responses stream: the deltas build the items the whole answer has, and the last event carries them") {
    Answer a = answer(kThinkTalkCall);
    const json& output = a.response["output"];
    REQUIRE(output.size() == 4);
    CHECK(output[0]["type"] == "reasoning");
    CHECK(output[0]["content"][0]["text"] == "Cold up north.");
    CHECK(output[1]["content"][0]["text"] == "Checking.");
    CHECK(output[2]["arguments"] == R"({"city":"Oslo"})");
    CHECK(output[3]["name"] == "get_time");
    // From the stream alone: each item as added, its text from the deltas that name it.
    std::vector<json> items;
    std::vector<std::string> texts;
    for (const SseFrame& f : a.stream) {
        const std::string& type = f.event;
        if (type == "response.output_item.added") {
            CHECK(f.data["output_index"] == items.size());
            items.push_back(f.data["item"]);
            texts.emplace_back();
        } else if (type.size() > 6 && type.compare(type.size() - 6, 6, ".delta") == 0) {
            size_t i = f.data["output_index"];
            REQUIRE(i + 1 == items.size());  // only the open item grows
            CHECK(f.data["item_id"] == items[i]["id"]);
            texts[i] += f.data["delta"].get<std::string>();
        } else if (type == "response.output_item.done") {
            size_t i = f.data["output_index"];
            CHECK(f.data["item"]["id"] == items[i]["id"]);
            items[i] = f.data["item"];
        }
    }
    REQUIRE(items.size() == output.size());
    CHECK(texts == std::vector<std::string>{"Cold up north.", "Checking.", R"({"city":"Oslo"})", "{}"});
    const json& last = a.stream.back().data["response"];
    CHECK(last["status"] == "completed");
    for (size_t i = 0; i < items.size(); ++i) {
        CHECK(without_ids(items[i]) == without_ids(output[i]));
        CHECK(last["output"][i] == items[i]);
    }
}

TEST_CASE("Responses answer: a function_call's call_id is its own, never the item's id, whole and streamed") {
    Answer a = answer(kThinkTalkCall);
    std::vector<json> calls;
    for (const json& item : a.response["output"])
        if (item["type"] == "function_call") calls.push_back(item);
    for (const SseFrame& f : a.stream)
        if (f.event == "response.output_item.done" && f.data["item"]["type"] == "function_call") calls.push_back(f.data["item"]);
    REQUIRE(calls.size() == 4);
    std::set<std::string> call_ids;
    for (const json& c : calls) {
        CAPTURE(c.dump());
        const std::string id = c["id"], call_id = c["call_id"];
        CHECK(id.rfind("fc_", 0) == 0);
        CHECK(call_id.rfind("call_", 0) == 0);
        CHECK(call_id != id);
        call_ids.insert(call_id);
    }
    CHECK(call_ids.size() == 4);  // the two calls of each answer have their own
    // The arguments' deltas name the item, not the call.
    for (const SseFrame& f : a.stream)
        if (f.event == "response.function_call_arguments.delta")
            CHECK(f.data["item_id"].get<std::string>().rfind("fc_", 0) == 0);
}
