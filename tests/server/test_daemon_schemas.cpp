// The real `k3serve serve` on the tiny model over loopback: a response_format schema that no
// finite value satisfies is the client's error (400 naming why), and the daemon serves on.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/model_cache.h"

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
    auto r = c.Post("/v1/chat/completions", request.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    CHECK(r->status == 400);
    json error = json::parse(r->body)["error"];
    CHECK(error["type"] == "invalid_request_error");
    CHECK(error["message"].get<std::string>().find("no finite value satisfies this schema") != std::string::npos);
    // The same schema with the recursion optional is served.
    json optional = request;
    optional["response_format"]["json_schema"]["schema"].erase("required");
    auto ok = c.Post("/v1/chat/completions", optional.dump(), "application/json");
    REQUIRE(ok);
    CHECK(ok->status == 200);
}
