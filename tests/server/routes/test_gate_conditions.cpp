// The checks between the network and the model, one condition at a time: for each condition a
// check combines, a request in which only that condition fails (and its neighbour that passes),
// so a check broken in any one of its parts fails a case here (docs/development.md, "Mutation
// check"). The API key comparison, the Host guard, the CORS origin rule, the JSON-only rule,
// the body limit and the JSON pre-scan's depth and value budget.
#include <doctest/doctest.h>

#include "wire/json_body.h"
#include "server_harness.h"

using namespace k3::test;

namespace {

int status(const httplib::Result& r) {
    REQUIRE(r);
    return r->status;
}

std::string error_code(const httplib::Result& r) {
    REQUIRE(r);
    json j = json::parse(r->body);
    REQUIRE(j.contains("error"));
    return j["error"]["code"].is_string() ? j["error"]["code"].get<std::string>() : "";
}

int models_with(TestServer& server, const httplib::Headers& headers) {
    auto c = server.client();
    return status(c.Get("/v1/models", headers));
}

int bearer(TestServer& server, const std::string& key) {
    return models_with(server, {{"Authorization", "Bearer " + key}});
}

}  // namespace

TEST_CASE("API key: a wrong key of the right length is refused wherever it differs") {
    auto config = test_config();
    config.api_keys = {"k3-sekrit-0042", "second"};
    TestServer server(config);
    CHECK(bearer(server, "k3-sekrit-0042") == 200);
    CHECK(bearer(server, "second") == 200);
    // Same length as the first key, one byte changed: first, middle, last.
    CHECK(bearer(server, "x3-sekrit-0042") == 401);
    CHECK(bearer(server, "k3-sekrix-0042") == 401);
    CHECK(bearer(server, "k3-sekrit-0043") == 401);
    // Only the case of one letter differs (keys are compared as bytes, not as text).
    CHECK(bearer(server, "K3-sekrit-0042") == 401);
    // A byte whose xor with the right one is 0x80: only the top bit differs.
    CHECK(bearer(server, std::string("k3-sekrit-004") + char('2' ^ 0x80)) == 401);
    // Same length as the second key, every byte wrong.
    CHECK(bearer(server, "zzzzzz") == 401);
    // The right key's prefix, the right key with more after it.
    CHECK(bearer(server, "k3-sekrit-004") == 401);
    CHECK(bearer(server, "k3-sekrit-00420") == 401);
    CHECK(bearer(server, "secondk3-sekrit-0042") == 401);
    auto c = server.client();
    CHECK(error_code(c.Get("/v1/models", {{"Authorization", "Bearer k3-sekrit-0043"}})) == "invalid_api_key");
}

TEST_CASE("API key: the Bearer scheme and the X-Api-Key header, each on its own") {
    auto config = test_config();
    config.api_keys = {"sekrit"};
    TestServer server(config);
    CHECK(models_with(server, {{"Authorization", "Bearer sekrit"}}) == 200);
    CHECK(models_with(server, {{"Authorization", "BEARER sekrit"}}) == 200);  // the scheme is case-insensitive
    CHECK(models_with(server, {{"Authorization", "Basic sekrit"}}) == 401);   // another scheme
    CHECK(models_with(server, {{"Authorization", "sekrit"}}) == 401);         // no scheme
    CHECK(models_with(server, {{"Authorization", "Bearer"}}) == 401);         // a scheme and no key
    CHECK(models_with(server, {{"X-Api-Key", "sekrit"}}) == 200);
    CHECK(models_with(server, {{"X-Api-Key", "sekriT"}}) == 401);
    // An empty Bearer key falls back to X-Api-Key; a wrong Bearer key is not rescued by it.
    CHECK(models_with(server, {{"Authorization", "Bearer "}, {"X-Api-Key", "sekrit"}}) == 200);
    CHECK(models_with(server, {{"Authorization", "Bearer wrong!"}, {"X-Api-Key", "sekrit"}}) == 401);
    CHECK(models_with(server, {}) == 401);
}

TEST_CASE("API key: every API route needs it; only health, the UI and the figures are public") {
    auto config = test_config();
    config.api_keys = {"sekrit"};
    TestServer server(config);
    auto c = server.client();
    for (const char* path : {"/v1/models", "/props", "/slots"}) {
        CAPTURE(path);
        CHECK(status(c.Get(path)) == 401);
    }
    CHECK(status(c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": 1})", "application/json")) == 401);
    CHECK(status(c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}]})",
                        "application/json")) == 401);
    CHECK(status(c.Post("/tokenize", R"({"content": "x"})", "application/json")) == 401);
    CHECK(status(c.Get("/health")) == 200);
    CHECK(status(c.Get("/")) == 200);
    CHECK(status(c.Get("/metrics")) == 200);
    CHECK(status(c.Get("/v1/status")) == 200);
    // --metrics-auth closes the figures, and only them: health stays open.
    config.metrics_auth = true;
    TestServer locked(config);
    auto l = locked.client();
    CHECK(status(l.Get("/v1/status")) == 401);
    CHECK(status(l.Get("/metrics")) == 401);
    CHECK(status(l.Get("/health")) == 200);
    CHECK(status(l.Get("/v1/status", {{"Authorization", "Bearer sekrit"}})) == 200);
}

TEST_CASE("Host guard: on loopback without a key, only loopback names; each name on its own") {
    TestServer server;  // 127.0.0.1, no key
    auto c = server.client();
    auto with_host = [&](const std::string& host) { return status(c.Get("/props", {{"Host", host}})); };
    CHECK(with_host("localhost") == 200);
    CHECK(with_host("LocalHost:8080") == 200);  // names are case-insensitive, the port is not part of it
    CHECK(with_host("127.0.0.1:1") == 200);
    CHECK(with_host("[::1]:8080") == 200);
    CHECK(with_host("[::1]") == 200);
    // Names that start or end like a loopback name are other names.
    CHECK(with_host("localhost.evil.example") == 403);
    CHECK(with_host("evil-localhost") == 403);
    CHECK(with_host("127.0.0.1.evil.example") == 403);
    CHECK(with_host("127.0.0.2") == 403);
    CHECK(with_host("[::1].evil.example") == 403);
    CHECK(with_host("evil.example:127.0.0.1") == 403);
    CHECK(error_code(c.Get("/props", {{"Host", "evil.example"}})) == "host_not_allowed");
}

TEST_CASE("Host guard: only a daemon that is on loopback and without a key has it") {
    for (const char* host : {"127.0.0.1", "127.0.0.5", "localhost", "::1"}) {
        CAPTURE(host);
        auto config = test_config();
        config.host = host;  // what the daemon was told to listen on (the test binds 127.0.0.1)
        TestServer server(config);
        auto c = server.client();
        CHECK(status(c.Get("/props", {{"Host", "evil.example"}})) == 403);
    }
    for (const char* host : {"0.0.0.0", "192.168.1.7", "::"}) {
        CAPTURE(host);
        auto config = test_config();
        config.host = host;
        TestServer server(config);
        auto c = server.client();
        CHECK(status(c.Get("/props", {{"Host", "k3.example.org"}})) == 200);
    }
}

TEST_CASE("CORS: the configured origin exactly, or any with *; nothing for others") {
    auto config = test_config();
    config.cors_origin = "http://app.example:3000";
    TestServer server(config);
    auto c = server.client();
    auto allow_origin = [&](const std::string& origin) {
        auto r = c.Get("/v1/models", {{"Origin", origin}});
        REQUIRE(r);
        return r->get_header_value("Access-Control-Allow-Origin");
    };
    CHECK(allow_origin("http://app.example:3000") == "http://app.example:3000");
    CHECK(allow_origin("http://app.example:3000.evil.example").empty());
    CHECK(allow_origin("http://app.example:300").empty());
    CHECK(allow_origin("https://app.example:3000").empty());
    CHECK(allow_origin("http://evil.example").empty());
    CHECK(allow_origin("").empty());
    {
        auto r = c.Get("/v1/models", {{"Origin", "http://app.example:3000"}});
        CHECK(r->get_header_value("Vary") == "Origin");  // the answer depends on the origin
        auto preflight = c.Options("/v1/models", {{"Origin", "http://evil.example"}, {"Access-Control-Request-Method", "POST"}});
        REQUIRE(preflight);
        CHECK_FALSE(preflight->has_header("Access-Control-Allow-Origin"));
        CHECK_FALSE(preflight->has_header("Access-Control-Allow-Methods"));
    }
    config.cors_origin = "*";
    TestServer any(config);
    auto a = any.client();
    auto r = a.Get("/v1/models", {{"Origin", "http://evil.example"}});
    REQUIRE(r);
    CHECK(r->get_header_value("Access-Control-Allow-Origin") == "*");
    // Without a CORS origin: no headers, and a preflight is not answered as one.
    TestServer none;
    auto n = none.client();
    auto plain = n.Get("/v1/models", {{"Origin", "http://localhost:3000"}});
    REQUIRE(plain);
    CHECK_FALSE(plain->has_header("Access-Control-Allow-Origin"));
    auto pre = n.Options("/v1/models", {{"Origin", "http://localhost:3000"}, {"Access-Control-Request-Method", "POST"}});
    REQUIRE(pre);
    CHECK(pre->status == 405);
}

TEST_CASE("JSON bodies only: the media type is compared whole, in any case, parameters aside") {
    TestServer server;
    auto c = server.client();
    const std::string body = R"({"prompt": "x", "max_tokens": 1})";
    CHECK(status(c.Post("/v1/completions", body, "application/json")) == 200);
    CHECK(status(c.Post("/v1/completions", body, "Application/JSON")) == 200);
    CHECK(status(c.Post("/v1/completions", body, "application/json ; charset=utf-8")) == 200);
    CHECK(status(c.Post("/v1/completions", body, "application/jsonp")) == 415);
    CHECK(status(c.Post("/v1/completions", body, "application/json-seq")) == 415);
    CHECK(status(c.Post("/v1/completions", body, "text/plain; format=application/json")) == 415);
    CHECK(status(c.Post("/v1/completions", body, "multipart/form-data")) == 415);
}

TEST_CASE("body limit: a body of exactly the limit is read, one byte more is 413") {
    auto config = test_config();
    config.max_body_bytes = 4096;
    TestServer server(config);
    auto c = server.client();
    std::string body = R"({"prompt": "x", "max_tokens": 1})";
    std::string exact = body + std::string(4096 - body.size(), ' ');  // JSON allows trailing whitespace
    REQUIRE(exact.size() == 4096);
    CHECK(status(c.Post("/v1/completions", exact, "application/json")) == 200);
    CHECK(status(c.Post("/v1/completions", exact + " ", "application/json")) == 413);
}

TEST_CASE("JSON pre-scan: depth and value budget at their limits, strings and escapes skipped") {
    using k3::server::JsonBodyLimits;
    using k3::server::parse_json_body;
    auto nested = [](int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); };
    auto code_of = [](const std::string& text, JsonBodyLimits limits) -> std::string {
        try {
            parse_json_body(text, limits);
            return "ok";
        } catch (const k3::server::ApiError& e) {
            return std::to_string(e.status) + " " + e.code;
        }
    };
    // Depth: the limit itself parses, one more does not; objects count like arrays.
    CHECK(code_of(nested(8), {8, 1000}) == "ok");
    CHECK(code_of(nested(9), {8, 1000}) == "400 invalid_json");
    CHECK(code_of(R"({"a":{"b":{"c":1}}})", {3, 1000}) == "ok");
    CHECK(code_of(R"({"a":{"b":{"c":{}}}})", {3, 1000}) == "400 invalid_json");
    // Closing brackets bring the depth down: many shallow siblings are shallow.
    std::string siblings = "[";
    for (int i = 0; i < 50; ++i) siblings += std::string(i ? "," : "") + "[[1]]";
    CHECK(code_of(siblings + "]", {3, 1000}) == "ok");
    // Values: a container and each element. [0,0,0] is 4; so is {"a":0,"b":0,"c":0}.
    CHECK(k3::server::scan_json_shape("[0,0,0]", 64, 1000).values == 4);
    CHECK(k3::server::scan_json_shape(R"({"a":0,"b":0,"c":0})", 64, 1000).values == 4);
    CHECK(code_of("[0,0,0]", {64, 4}) == "ok");
    CHECK(code_of("[0,0,0,0]", {64, 4}) == "413 too_many_json_values");
    CHECK(code_of("7", {64, 1}) == "ok");  // one scalar is one value
    // Brackets, commas and quotes inside strings are text; an escaped quote does not end one.
    CHECK(code_of(R"(["[[[[,,,,", "\"[[[[,,,,"])", {2, 3}) == "ok");
    CHECK(code_of(R"(["\\", [[1]]])", {3, 7}) == "ok");
    CHECK(code_of(R"(["\\", [[1]]])", {2, 7}) == "400 invalid_json");  // "\\" ends where it seems to
    // The scan stops early but still reports past the limit (no DOM is built for 1 MB of '[').
    CHECK(code_of(std::string(1 << 20, '['), {64, 1u << 20}) == "400 invalid_json");
}
