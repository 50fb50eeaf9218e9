// The prompt cache by API key through the real daemon (issue 21 row 5): with two keys, what key A
// sent is cached for A (its second request has cached_tokens > 0), while key B sending the same
// prompt gets cached_tokens == 0 and exactly A's tokens and logprobs (the cache never changes
// output), then a hit of its own; B's first request runs on the one slot A's request just left,
// so neither that slot's live state nor the shared cache may serve it. A daemon without keys
// keeps one partition: a second client resumes the first one's prompt. /slots lists the asking
// key's cache entries only. With the disk tier, a restarted daemon still keeps each key's states
// to that key.
#include <doctest/doctest.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/model_cache.h"
#include "common/scratch.h"

using namespace k3::test;
using nlohmann::json;

namespace {

const std::string kPrompt = "The ferry left the harbour at dawn, and the woman at the rail counted the gulls until";

json complete(DaemonProcess& d, const std::string& key) {
    auto c = d.client();
    const json body = {{"prompt", kPrompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true},
                       {"logprobs", 3}};
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    auto r = c.Post("/v1/completions", headers, body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

int cached_tokens(const json& answer) { return answer["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(); }

// The tokens and their logprobs: bit-identical output shows as equal JSON (the numbers are printed
// exactly as they came from the logits).
void check_same_output(const json& got, const json& want) {
    CHECK(got["choices"][0]["text"] == want["choices"][0]["text"]);
    CHECK(got["choices"][0]["logprobs"] == want["choices"][0]["logprobs"]);
}

// GET /slots' prompt_cache.entries, as `key` sees them. The worker publishes the board before
// a response goes out (EngineWorker::retire), with the prompt's end already cached.
json slot_entries(DaemonProcess& d, const std::string& key) {
    auto c = d.client();
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    auto r = c.Get("/slots", headers);
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return json::parse(r->body)["prompt_cache"]["entries"];
}

std::vector<std::string> daemon_args(std::vector<std::string> more) {
    std::vector<std::string> args = {cached_model("tiny"), "--port", "0", "--threads", "1", "--parallel", "1",
                                     "--prompt-cache-gb", "0.1"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

}  // namespace

TEST_CASE("tiny model: two API keys: one key's prompt is cached for it alone, and the other key gets the same tokens") {
    DaemonProcess d(daemon_args({"--api-key", "key-alpha,key-beta"}));
    const json a1 = complete(d, "key-alpha");
    CHECK(cached_tokens(a1) == 0);
    const json a2 = complete(d, "key-alpha");
    CHECK(cached_tokens(a2) > 0);
    check_same_output(a2, a1);
    // /slots lists the asking key's cache entries only.
    CHECK_FALSE(slot_entries(d, "key-alpha").empty());
    CHECK(slot_entries(d, "key-beta").empty());

    const json b1 = complete(d, "key-beta");
    CHECK(cached_tokens(b1) == 0);  // A's states are no hint to B
    CHECK(b1["usage"]["prompt_tokens"] == a1["usage"]["prompt_tokens"]);
    check_same_output(b1, a1);

    const json b2 = complete(d, "key-beta");
    CHECK(cached_tokens(b2) > 0);  // B's own
    check_same_output(b2, a1);
    const json a3 = complete(d, "key-alpha");
    CHECK(cached_tokens(a3) > 0);  // A's stayed A's
    check_same_output(a3, a1);
    CHECK_FALSE(slot_entries(d, "key-beta").empty());
}

TEST_CASE("tiny model: a daemon without API keys keeps one prompt cache partition: a second client resumes the first's prompt") {
    DaemonProcess d(daemon_args({}));
    const json first = complete(d, "");
    CHECK(cached_tokens(first) == 0);
    const json second = complete(d, "");  // another connection, another client
    CHECK(cached_tokens(second) > 0);
    check_same_output(second, first);
    CHECK_FALSE(slot_entries(d, "").empty());
}

TEST_CASE("tiny model: two API keys and the disk tier: after a restart each key resumes its own states only") {
    const std::string dir = scratch_dir("prompt-cache-keys").string();
    json cold;
    {
        DaemonProcess d(daemon_args({"--api-key", "key-alpha,key-beta", "--prompt-cache-dir", dir}));
        cold = complete(d, "key-alpha");
        CHECK(cached_tokens(cold) == 0);
        d.signal(SIGTERM);
        CHECK(d.wait_exit() == 0);
    }
    // The key list in another order: a key's partition does not depend on its place in the list.
    DaemonProcess d(daemon_args({"--api-key", "key-beta,key-alpha", "--prompt-cache-dir", dir}));
    const json b = complete(d, "key-beta");
    CHECK(cached_tokens(b) == 0);
    check_same_output(b, cold);
    const json a = complete(d, "key-alpha");
    CHECK(cached_tokens(a) == a["usage"]["prompt_tokens"].get<int>());  // from disk, whole
    check_same_output(a, cold);
    // The log names no key.
    CHECK(d.log().find("key-alpha") == std::string::npos);
    CHECK(d.log().find("key-beta") == std::string::npos);
}
