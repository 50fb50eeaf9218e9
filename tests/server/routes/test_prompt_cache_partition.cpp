// The server's half of the prompt cache by API key (issue 21 row 5): the partition a request's
// states go to is derived from the key it presents (server/routes/request_gate.h), the same for a key
// wherever it stands in the list and whichever header carries it, different between keys, 0
// without keys; and the worker hands it to the session before the prompt, so a slot whose live
// state another key left resumes nothing of it (FakeSession models that rule as the engine's
// Session does; the real engine and daemon: tests/server/test_daemon_prompt_cache_keys.cpp).
#include <doctest/doctest.h>

#include "routes/request_gate.h"
#include "server_harness.h"

using namespace k3;
using namespace k3::test;

namespace {

HttpRequest with_header(const std::string& name, const std::string& value) {
    HttpRequest req;
    req.headers.emplace(name, value);
    return req;
}

uint64_t partition_of(const std::vector<std::string>& keys, const HttpRequest& req) {
    DaemonConfig c = test_config();
    c.api_keys = keys;
    return prompt_cache_partition(c, req);
}

json complete(TestServer& server, const std::string& key) {
    auto c = server.client();
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    const json body = {{"prompt", "the same prompt for every key"}, {"max_tokens", 2}, {"temperature", 0}};
    auto r = c.Post("/v1/completions", headers, body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

}  // namespace

TEST_CASE("prompt cache partition: derived from the key presented, not from its place in the list") {
    const auto bearer_a = with_header("Authorization", "Bearer key-a");
    const uint64_t a = partition_of({"key-a", "key-b"}, bearer_a);
    CHECK(a != 0);
    CHECK(partition_of({"key-b", "key-c", "key-a"}, bearer_a) == a);  // reordered, one more key
    CHECK(partition_of({"key-a", "key-b"}, with_header("X-Api-Key", "key-a")) == a);
    CHECK(partition_of({"key-a", "key-b"}, with_header("Authorization", "bearer key-a")) == a);
    const uint64_t b = partition_of({"key-a", "key-b"}, with_header("Authorization", "Bearer key-b"));
    CHECK(b != 0);
    CHECK(b != a);
    // No keys: one partition for everyone, whatever a client sends.
    CHECK(partition_of({}, bearer_a) == 0);
    CHECK(partition_of({}, HttpRequest{}) == 0);
}

TEST_CASE("prompt cache partition: the worker runs each key's requests in its partition, and drops another key's live state") {
    DaemonConfig config = test_config();
    config.api_keys = {"key-one", "key-two"};
    TestServer server(config);  // one slot: every request lands on the session the one before it left
    complete(server, "key-one");
    const json again = complete(server, "key-one");
    const json other = complete(server, "key-two");
    const json other_again = complete(server, "key-two");

    const auto p = server.engine.partitions();
    REQUIRE(p.size() == 4);
    CHECK(p[0] == partition_of(config.api_keys, with_header("Authorization", "Bearer key-one")));
    CHECK(p[1] == p[0]);
    CHECK(p[2] == partition_of(config.api_keys, with_header("Authorization", "Bearer key-two")));
    CHECK(p[3] == p[2]);
    CHECK(p[2] != p[0]);
    const auto reused = server.engine.reused();
    CHECK(reused[1] > 0);   // the same key resumes the slot's live state
    CHECK(reused[2] == 0);  // the other key does not
    CHECK(reused[3] > 0);
    CHECK(again["usage"]["prompt_tokens_details"]["cached_tokens"] == reused[1]);
    CHECK(other["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    CHECK(other_again["usage"]["prompt_tokens_details"]["cached_tokens"] == reused[3]);
}

TEST_CASE("prompt cache partition: without keys every request is in partition 0 and resumes the one before") {
    TestServer server;
    complete(server, "");
    const json second = complete(server, "");
    CHECK(server.engine.partitions() == std::vector<uint64_t>{0, 0});
    CHECK(server.engine.reused()[1] > 0);
    CHECK(second["usage"]["prompt_tokens_details"]["cached_tokens"] == server.engine.reused()[1]);
}
