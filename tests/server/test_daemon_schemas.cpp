// The real `k3serve serve` on the tiny model over loopback: a response_format schema that no
// finite value satisfies is the client's error (400 naming why), and the daemon serves on; a
// schema over a grammar budget (issue 21 row 4: an enum of 60,000 strings) is a 400
// grammar_too_large naming the limit and its setting, counted in /metrics, and an enum within
// the budgets is served, its output one of the enum's values whatever the random weights say.
// That enum is compiled on its HTTP thread, never on the engine worker: another client's stream
// gets its tokens while the compile is held open by the test hook --test-hold-grammar-compile.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/daemon.h"
#include "common/hold_file.h"
#include "common/loopback_socket.h"
#include "common/metric_value.h"
#include "common/model_cache.h"
#include "common/wait.h"
#include "post_json.h"

using namespace k3::test;
using nlohmann::json;

TEST_CASE("tiny model: a schema no finite value satisfies is a 400 naming it, not a 500") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1"});
    auto c = d.client();
    // An object that requires a property holding the object itself: every value is infinite.
    const json schema = {{"type", "object"}, {"properties", {{"next", {{"$ref", "#"}}}}}, {"required", {"next"}}};
    const json request = {{"messages", json::array({{{"role", "user"}, {"content", "x"}}})}, {"max_tokens", 8},
                          {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "loop"}, {"schema", schema}}}}}};
    json error = post(c, "/v1/chat/completions", request, 400)["error"];
    INFO(error.dump());
    CHECK(error["type"] == "invalid_request_error");
    CHECK(error["message"].get<std::string>().find("no finite value satisfies this schema") != std::string::npos);
    // The same schema with the recursion optional is served.
    json optional = request;
    optional["response_format"]["json_schema"]["schema"].erase("required");
    auto ok = c.Post("/v1/chat/completions", optional.dump(), "application/json");
    REQUIRE(ok);
    CHECK(ok->status == 200);
}

namespace {

// `n` strings that share a 40-byte prefix (the issue's enum: 60,000 of them are 2.8 MB).
json prefixed_enum(size_t n) {
    json values = json::array();
    const std::string prefix(40, 'p');
    for (size_t i = 0; i < n; ++i) values.push_back(prefix + std::to_string(i * 7919 % 1000003));
    return values;
}

json enum_request(const json& values) {
    const json schema = {{"type", "object"}, {"properties", {{"pick", {{"enum", values}}}}}, {"required", {"pick"}},
                         {"additionalProperties", false}};
    return {{"messages", json::array({{{"role", "user"}, {"content", "pick one"}}})}, {"max_tokens", 120},
            {"temperature", 1.0}, {"seed", 5},
            {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "pick"}, {"schema", schema}}}}}};
}

// The same constraint on a plain completion. A chat tells the model its schema (docs/api.md
// "Constrained output"), and thousands of enum strings overflow the tiny model's context; a
// completion's prompt is only its text, so the grammar alone is served.
json enum_completion_request(const json& values) {
    json request = enum_request(values);
    request.erase("messages");
    request["prompt"] = "pick one";
    return request;
}

std::string completion_text(const std::string& body) {
    return json::parse(body)["choices"][0]["text"].get<std::string>();
}

}  // namespace

TEST_CASE("tiny model: a 60,000-string enum is a 400 grammar_too_large naming --grammar-max-enum, counted") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1"});
    auto c = d.client();
    json error = post(c, "/v1/chat/completions", enum_request(prefixed_enum(60000)), 400)["error"];
    INFO(error.dump());
    CHECK(error["type"] == "invalid_request_error");
    CHECK(error["code"] == "grammar_too_large");
    CHECK(error["param"] == "response_format.json_schema.schema");
    const std::string message = error["message"];
    CHECK(message.find("60000 values") != std::string::npos);
    CHECK(message.find("#/properties/pick") != std::string::npos);
    CHECK(message.find("(--grammar-max-enum 10000)") != std::string::npos);
    CHECK(metric_value(c, "k3serve:grammar_refusals_total{limit=\"enum\"}") == 1);
    CHECK(metric_value(c, "k3serve:grammar_refusals_total{limit=\"literal_bytes\"}") == 0);
    // Within the budgets, the same shape of enum is served and the output is one of its values.
    const json values = prefixed_enum(2000);
    auto ok = c.Post("/v1/completions", enum_completion_request(values).dump(), "application/json");
    REQUIRE(ok);
    INFO(ok->body);
    REQUIRE(ok->status == 200);
    const std::string content = completion_text(ok->body);
    INFO(content);
    const std::set<std::string> allowed(values.begin(), values.end());
    CHECK(allowed.count(json::parse(content)["pick"].get<std::string>()) == 1);
}

TEST_CASE("tiny model: every grammar budget is a daemon setting; one lowered refuses what the default serves") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--grammar-max-literal-bytes", "4096"});
    auto c = d.client();
    // 200 values of about 45 bytes: 9 KB of enum text, over 4096 bytes.
    json error = post(c, "/v1/chat/completions", enum_request(prefixed_enum(200)), 400)["error"];
    INFO(error.dump());
    CHECK(error["code"] == "grammar_too_large");
    CHECK(error["message"].get<std::string>().find("(--grammar-max-literal-bytes 4096)") != std::string::npos);
    auto props = c.Get("/props");
    REQUIRE(props);
    CHECK(props->body.find("\"grammar_max_literal_bytes\":4096") != std::string::npos);
    CHECK(metric_value(c, "k3serve:grammar_refusals_total{limit=\"literal_bytes\"}") == 1);
}

namespace {

size_t events_in(const std::string& received) {
    size_t n = 0;
    for (size_t pos = 0; (pos = received.find("data: ", pos)) != std::string::npos; pos += 6) ++n;
    return n;
}

}  // namespace

TEST_CASE("tiny model: a large enum compiles on its HTTP thread while another client's stream gets its tokens") {
    std::string model = cached_model("tiny");
    // The HTTP thread waits after compiling, before queueing the job, until hold.release().
    HoldFile hold("hold-grammar-compile");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--draft-max", "0",
                     "--test-hold-grammar-compile", hold.file});
    auto c = d.client();
    auto props = c.Get("/props");
    REQUIRE(props);
    const int ctx = json::parse(props->body)["n_ctx"].get<int>();
    // The other client: a stream as long as the context allows, read as it comes.
    const json stream_request = {{"prompt", "x"}, {"max_tokens", ctx - 64}, {"stream", true}, {"ignore_eos", true}};
    LoopbackSocket stream(d.port());
    REQUIRE(stream.ok());
    REQUIRE(stream.send(json_post("/v1/completions", stream_request.dump())));
    auto tokens = [&] {
        stream.read_until(std::string(1, '\0'), 20);
        return events_in(stream.received());
    };
    REQUIRE(eventually([&] { return tokens() >= 2; }, std::chrono::seconds(60)));

    // 5,000 strings with a 40-byte prefix: within the budgets, held open once compiled.
    const json values = prefixed_enum(5000);
    int answer_status = 0;
    std::string answer_body;
    std::thread enum_client([&] {
        auto own = d.client();
        if (auto r = own.Post("/v1/completions", enum_completion_request(values).dump(), "application/json")) {
            answer_status = r->status;
            answer_body = r->body;
        }
    });
    const bool compiling = eventually([&] { return metric_value(c, "k3serve:grammar_compiles_in_progress") == 1; },
                                      std::chrono::seconds(60));
    CHECK(compiling);
    // While that compile is in progress, the stream's tokens keep arriving.
    const size_t before = tokens();
    CHECK(eventually([&] { return tokens() >= before + 16; }, std::chrono::seconds(60)));
    CHECK(metric_value(c, "k3serve:grammar_compiles_in_progress") == 1);
    CHECK(metric_value(c, "llamacpp:requests_processing") == 1);  // the enum's job is not on the worker yet
    hold.release();
    enum_client.join();
    INFO(answer_body);
    REQUIRE(answer_status == 200);
    const std::string content = completion_text(answer_body);
    INFO(content);
    const std::set<std::string> allowed(values.begin(), values.end());
    CHECK(allowed.count(json::parse(content)["pick"].get<std::string>()) == 1);
    CHECK(metric_value(c, "k3serve:grammar_compiles_in_progress") == 0);
    CHECK(metric_value(c, "k3serve:grammar_compiles_total") == 1);
    stream.close();
}
