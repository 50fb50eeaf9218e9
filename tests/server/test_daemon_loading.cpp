// The daemon serves while the routed experts load (serve's default, --background-load): over real
// HTTP on loopback, with the background reads held by the test hook (--test-hold-background-load)
// so requests deterministically run while experts are unread. /health and /metrics say loading,
// then ready; completions are identical before and after the load finishes and to a daemon that
// read everything first (--no-background-load); a read that fails makes /health 503 and the
// request that needed it a 500 naming the file; a shard truncated in place (its mapped pages
// gone) kills the daemon with a line naming the file.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/background_load.h"
#include "common/daemon.h"
#include "common/model_cache.h"
#include "common/scratch.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// The value of one unlabelled series in a /metrics body (-1 when missing).
double metric(const std::string& body, const std::string& name) {
    const std::string key = "\n" + name + " ";
    size_t at = body.find(key);
    if (at == std::string::npos) return -1;
    return std::stod(body.substr(at + key.size()));
}


const json kGreedy = {{"prompt", "The capital of France is"}, {"max_tokens", 12}, {"temperature", 0}};

std::string complete(httplib::Client& c) {
    auto r = c.Post("/v1/completions", kGreedy.dump(), "application/json");
    REQUIRE(r);
    INFO(r->body);
    REQUIRE(r->status == 200);
    return json::parse(r->body)["choices"][0]["text"];
}

}  // namespace

TEST_CASE("serving while experts load: health and metrics say loading then ready, completions identical") {
    const std::string model = cached_model("tiny");
    std::string want;
    {
        DaemonProcess eager({model, "--port", "0", "--threads", "1", "--no-background-load"});
        auto c = eager.client();
        auto health = c.Get("/health");
        REQUIRE(health);
        CHECK(json::parse(health->body) == json{{"status", "ok"}});
        want = complete(c);
        const std::string m = c.Get("/metrics")->body;
        CHECK(metric(m, "k3serve:weights_loading") == 0);
        CHECK(metric(m, "k3serve:weights_total_bytes") > 0);
        CHECK(metric(m, "k3serve:weights_loaded_bytes") == metric(m, "k3serve:weights_total_bytes"));
        eager.signal(SIGTERM);
        CHECK(eager.wait_exit() == 0);
    }

    HoldBackgroundLoad hold;
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--test-hold-background-load", hold.file});
    auto c = d.client();
    auto health = c.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    json h = json::parse(health->body);
    CHECK(h["status"] == "ok");
    CHECK(h["weights"] == "loading");
    CHECK(h["weights_loaded_bytes"].get<int64_t>() < h["weights_total_bytes"].get<int64_t>());
    std::string m = c.Get("/metrics")->body;
    CHECK(metric(m, "k3serve:ready") == 1);
    CHECK(metric(m, "k3serve:weights_loading") == 1);
    CHECK(metric(m, "k3serve:weights_loaded_bytes") < metric(m, "k3serve:weights_total_bytes"));
    auto status = json::parse(c.Get("/v1/status")->body);
    CHECK(status["weights"]["loading"] == true);

    // While the experts are held back: the ones this request needs are read for it.
    CHECK(complete(c) == want);
    m = c.Get("/metrics")->body;
    CHECK(metric(m, "k3serve:weights_loading") == 1);  // still held: the request overlapped the load

    hold.release();
    REQUIRE(eventually([&] { return json::parse(c.Get("/health")->body) == json{{"status", "ok"}}; },
                       std::chrono::seconds(120)));
    m = c.Get("/metrics")->body;
    CHECK(metric(m, "k3serve:weights_loading") == 0);
    CHECK(metric(m, "k3serve:weights_loaded_bytes") == metric(m, "k3serve:weights_total_bytes"));
    CHECK(metric(m, "k3serve:weights_load_failures_total") == 0);
    CHECK(complete(c) == want);
    // The log says so too (its watcher looks every 50 ms).
    CHECK(eventually([&] { return d.log().find("every routed expert is loaded") != std::string::npos; }));
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}

TEST_CASE("serving while experts load: a failed expert read is a 500 naming the file, and /health 503") {
    auto model = process_scratch_root() / "daemon-background-truncated";
    std::filesystem::remove_all(model);
    std::filesystem::copy(cached_model("tiny"), model);
    HoldBackgroundLoad hold;
    DaemonProcess d({model.string(), "--port", "0", "--threads", "1", "--test-hold-background-load", hold.file});
    auto c = d.client();
    // Serving, the experts not read yet: now some of them cannot be.
    REQUIRE(cut_experts_after_trunk(model));
    auto r = c.Post("/v1/completions", kGreedy.dump(), "application/json");
    REQUIRE(r);
    CHECK(r->status == 500);
    CHECK(r->body.find(".safetensors") != std::string::npos);
    auto health = c.Get("/health");
    REQUIRE(health);
    CHECK(health->status == 503);
    CHECK(json::parse(health->body)["error"]["code"] == "model_unhealthy");
    const std::string m = c.Get("/metrics")->body;
    CHECK(metric(m, "k3serve:weights_load_failures_total") > 0);
    hold.release();
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}

TEST_CASE("serve takes --no-lookahead, --lookahead and background_load from the config file") {
    const std::string model = cached_model("tiny");
    auto config = process_scratch_root() / "loading-config.json";
    std::ofstream(config) << R"({"background_load": false, "lookahead": false})";
    DaemonProcess d({model, "--port", "0", "--config", config.string()});
    CHECK(d.log().find("\"background_load\":false") != std::string::npos);
    CHECK(d.log().find("\"lookahead\":false") != std::string::npos);
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
    DaemonProcess e({model, "--port", "0", "--no-lookahead", "--lookahead", "true"});
    CHECK(e.log().find("\"lookahead\":true") != std::string::npos);
    CHECK(e.log().find("\"background_load\":true") != std::string::npos);
    e.signal(SIGTERM);
    CHECK(e.wait_exit() == 0);
    std::string bin = env_or_throw("K3SERVE_BIN");
    CHECK(WEXITSTATUS(std::system((bin + " serve " + model + " --lookahead maybe 2> /dev/null").c_str())) == 2);
}

// "tiny model:" keeps it out of the sanitizer pass (scripts/sanitize.sh): ASan takes the re-raised SIGBUS
// itself and aborts, so the exit status there is SIGABRT's.
TEST_CASE("tiny model: a shard truncated in place under a resident daemon: it dies of SIGBUS naming the file") {
    auto model = process_scratch_root() / "daemon-mapped-truncated";
    std::filesystem::remove_all(model);
    std::filesystem::copy(cached_model("tiny"), model);
    DaemonProcess d({model.string(), "--port", "0", "--threads", "1", "--no-background-load"});
    auto c = d.client();
    // Every trunk page of the first shard is gone from under the mapping.
    std::filesystem::resize_file(model / "model-00001-of-00002.safetensors", 4096);
    auto r = c.Post("/v1/completions", kGreedy.dump(), "application/json");
    CHECK_FALSE(r);  // the connection dies with the daemon
    CHECK(d.wait_exit() == 128 + SIGBUS);
    CHECK(d.log().find("model-00001-of-00002.safetensors changed on disk while mapped") != std::string::npos);
}
