// A request body is parsed once (wire/json_body.h): the value the parsers read, and the JSON
// schemas in it with their keys as the client wrote them, which is the order a schema's
// properties are generated in. Checked at each place a schema may sit, through the parsers.
#include <doctest/doctest.h>

#include "fake_engine.h"
#include "fake_limits.h"
#include "wire/json_body.h"
#include "responses/responses.h"
#include "openai/request.h"
#include "wire/response_format.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {


// Properties written z, a, m: sorted they would be a, m, z.
constexpr const char* kSchema =
    R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"},"m":{"type":"boolean"}},"required":["z","a","m"]})";
constexpr const char* kSorted =
    R"({"properties":{"a":{"type":"string"},"m":{"type":"boolean"},"z":{"type":"integer"}},"required":["z","a","m"],"type":"object"})";

JsonBody parse(const std::string& text) { return parse_json_body(text, JsonBodyLimits{}); }

}  // namespace

TEST_CASE("request body: each schema keeps the client's key order; the value reads as before") {
    const JsonBody chat = parse(std::string(R"({"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)") +
                                kSchema + "}}}");
    REQUIRE(chat.schemas.contains("response_format.json_schema.schema"));
    CHECK(chat.schemas["response_format.json_schema.schema"].dump() == kSchema);
    CHECK(chat.schemas.size() == 1);
    CHECK(chat.value["response_format"]["json_schema"]["schema"].dump() == kSorted);  // json sorts keys

    const JsonBody top = parse(std::string(R"({"json_schema":)") + kSchema + "}");
    CHECK(top.schemas["json_schema"].dump() == kSchema);
    const JsonBody responses = parse(std::string(R"({"text":{"format":{"type":"json_schema","name":"n","schema":)") + kSchema + "}}}");
    CHECK(responses.schemas["text.format.schema"].dump() == kSchema);

    const JsonBody none = parse(R"({"json_schema":null,"response_format":{"type":"text"},"text":{"format":{"type":"text"}}})");
    CHECK(none.schemas.empty());
}

TEST_CASE("request body: the grammar follows the written order for chat, llama-server's json_schema and Responses") {
    const Grammar written = Grammar::json_schema(kSchema);
    const Grammar sorted = Grammar::json_schema(kSorted);
    REQUIRE_FALSE(written.same_rules(sorted));  // else this test could not tell them apart

    const JsonBody chat = parse(std::string(R"({"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)") +
                                kSchema + "}}}");
    CHECK(parse_response_format(chat.value, &chat.schemas)->same_rules(written));
    CHECK(parse_response_format(chat.value, nullptr)->same_rules(sorted));
    const JsonBody top = parse(std::string(R"({"json_schema":)") + kSchema + "}");
    CHECK(parse_response_format(top.value, &top.schemas)->same_rules(written));

    // /v1/responses is served as the chat request it means: its grammar is that chat request's.
    const JsonBody as_chat = parse(std::string(R"({"model":"m","messages":[{"role":"user","content":"hi"}],)") +
                                   R"("response_format":{"type":"json_schema","json_schema":{"name":"n","schema":)" + kSchema + "}}}");
    const JsonBody responses = parse(std::string(R"({"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"n","schema":)") +
                                     kSchema + "}}}");
    const GenerationRequest c = parse_chat_request(as_chat.value, fake_tokenizer(), fake_limits(), &as_chat.schemas);
    const GenerationRequest r = parse_responses_request(responses.value, fake_tokenizer(), fake_limits(), &responses.schemas);
    const GenerationRequest r_sorted = parse_responses_request(responses.value, fake_tokenizer(), fake_limits(), nullptr);
    REQUIRE(c.params.grammar);
    REQUIRE(r.params.grammar);
    CHECK(r.params.grammar->same_rules(*c.params.grammar));
    CHECK_FALSE(r_sorted.params.grammar->same_rules(*c.params.grammar));
}
