// The field tables of the translated APIs (server/responses/request.cpp kResponsesFields,
// server/anthropic/request.cpp kMessagesFields; wire/fields.h RequestField): each field a table
// copies reaches the chat request under its chat name, the fields a table names are known (not
// reported as ignored), and the others are ignored and reported (docs/api.md: unknown fields are
// ignored at every level).
#include <doctest/doctest.h>

#include "anthropic/messages.h"
#include "fake_limits.h"
#include "responses/responses.h"
#include "wire/fields.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {

json function_tool() {
    return {{"type", "function"}, {"name", "look"}, {"parameters", {{"type", "object"}, {"properties", json::object()}}}};
}

}  // namespace

TEST_CASE("request fields: each Responses field its table copies reaches the chat request; only unknown ones are ignored") {
    // Every value differs from its default, so a field left behind shows.
    json body = {{"model", "asked-model"},
                 {"input", "hi"},
                 {"temperature", 0.5},
                 {"top_p", 0.25},
                 {"top_k", 7},
                 {"min_p", 0.125},
                 {"seed", 42},
                 {"stream", true},
                 {"max_output_tokens", 9},
                 {"tools", json::array({function_tool()})},
                 {"parallel_tool_calls", false},
                 {"store", false},
                 {"metadata", {{"a", "b"}}},
                 {"truncation", "disabled"},
                 {"frobnicate", 1}};
    IgnoredFields ignored;
    GenerationRequest r;
    {
        IgnoredFieldsScope scope(ignored);
        r = parse_responses_request(body, fake_tokenizer(), fake_limits());
    }
    CHECK(r.model == "asked-model");
    CHECK(r.params.sampling.temperature == 0.5f);
    CHECK(r.params.sampling.top_p == 0.25f);
    CHECK(r.params.sampling.top_k == 7);
    CHECK(r.params.sampling.min_p == 0.125f);
    CHECK(r.params.sampling.seed == 42u);
    CHECK(r.stream);
    CHECK(r.params.max_tokens == 9);
    CHECK_FALSE(r.params.parallel_tool_calls);
    CHECK(ignored.fields == std::vector<std::string>{"frobnicate"});
}

TEST_CASE("request fields: each Messages field its table copies reaches the chat request; only unknown ones are ignored") {
    json body = {{"model", "asked-model"},
                 {"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                 {"max_tokens", 9},
                 {"temperature", 0.5},
                 {"top_p", 0.25},
                 {"top_k", 7},
                 {"stream", true},
                 {"metadata", {{"user_id", "u"}}},
                 {"service_tier", "auto"},
                 {"frobnicate", 1}};
    IgnoredFields ignored;
    GenerationRequest r;
    {
        IgnoredFieldsScope scope(ignored);
        r = parse_messages_request(body, fake_tokenizer(), fake_limits());
    }
    CHECK(r.model == "asked-model");
    CHECK(r.params.sampling.temperature == 0.5f);
    CHECK(r.params.sampling.top_p == 0.25f);
    CHECK(r.params.sampling.top_k == 7);
    CHECK(r.stream);
    CHECK(r.params.max_tokens == 9);
    CHECK(ignored.fields == std::vector<std::string>{"frobnicate"});

    // Anthropic's temperature range is [0, 1], narrower than chat's [0, 2].
    body["temperature"] = 1.5;
    IgnoredFieldsScope scope(ignored);
    CHECK_THROWS_AS(parse_messages_request(body, fake_tokenizer(), fake_limits()), ApiError);
}
