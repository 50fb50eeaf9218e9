// The prompt cache's disk tier through the real daemon: a daemon started again on the same
// --prompt-cache-dir resumes a prompt it saw before the restart (cached_tokens is the whole
// prompt) and answers with exactly the tokens and logprobs of the cold run; /slots and /metrics
// report the disk tier.
#include <doctest/doctest.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include "common/daemon.h"
#include "common/model_cache.h"
#include "common/scratch.h"

using namespace k3::test;
using nlohmann::json;

namespace {

json complete(DaemonProcess& d, const std::string& prompt) {
    auto c = d.client();
    const json body = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true},
                       {"logprobs", 3}};
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body);
}

std::vector<std::string> daemon_args(const std::string& dir) {
    return {cached_model("tiny"), "--port", "0", "--threads", "1", "--parallel", "1", "--prompt-cache-gb", "0.1",
            "--prompt-cache-dir", dir};
}

}  // namespace

TEST_CASE("prompt cache disk tier: a restarted daemon reuses the states and answers with the cold run's tokens") {
    const std::string dir = scratch_dir("prompt-cache-dir").string();
    const std::string prompt = "A lighthouse keeper kept a log of every ship that passed, and one night he wrote";
    json cold;
    {
        DaemonProcess d(daemon_args(dir));
        cold = complete(d, prompt);
        CHECK(cold["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
        d.signal(SIGTERM);
        CHECK(d.wait_exit() == 0);
    }
    DaemonProcess d(daemon_args(dir));
    const json warm = complete(d, prompt);
    CHECK(warm["usage"]["prompt_tokens_details"]["cached_tokens"] == warm["usage"]["prompt_tokens"]);
    CHECK(warm["choices"][0]["text"] == cold["choices"][0]["text"]);
    CHECK(warm["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]);  // same logits, same bits

    auto c = d.client();
    auto s = c.Get("/slots");
    REQUIRE(s);
    const json disk = json::parse(s->body)["prompt_cache"]["disk"];
    INFO(disk.dump());
    REQUIRE(disk.is_object());
    CHECK(disk["hits"].get<int>() >= 1);
    CHECK(disk["refused"].get<int>() == 0);
    CHECK(disk["files"].get<int>() >= 1);
    CHECK(disk["bytes"].get<int64_t>() > 0);
    CHECK(disk["bytes"].get<int64_t>() <= disk["budget_bytes"].get<int64_t>());
    auto m = c.Get("/metrics");
    REQUIRE(m);
    CHECK(m->body.find("k3serve:prompt_cache_disk_hits_total") != std::string::npos);
    CHECK(m->body.find("k3serve:prompt_cache_disk_bytes") != std::string::npos);
}
