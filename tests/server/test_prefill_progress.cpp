// The real `k3serve serve` on the tiny model, a prompt evaluated in many small chunks: while it is
// being read, /v1/status and /slots carry its prefill progress (done of total, rate, time left);
// the count only goes up; by the first streamed token it is done == total. The daemon is held
// between two chunks by its test hook (K3_TEST_HOLD_PREFILL, docs/development.md), so the test
// reads it mid-prompt without racing it.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/daemon.h"
#include "common/daemon_status.h"
#include "common/loopback_socket.h"
#include "common/model_cache.h"
#include "common/scratch.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// While it lives, a daemon started meanwhile stops before each prompt chunk after a prompt's first.
struct HoldPrefill {
    std::filesystem::path file = process_scratch_root() / "hold-prefill";
    HoldPrefill() {
        std::ofstream(file).put('x');
        setenv("K3_TEST_HOLD_PREFILL", file.c_str(), 1);
    }
    void release() { std::filesystem::remove(file); }
    ~HoldPrefill() {
        release();
        unsetenv("K3_TEST_HOLD_PREFILL");
    }
};

json get(httplib::Client& c, const char* path) { return get_json(c, path); }

// The prefill object of the one running request, null when none runs.
json running_prefill(httplib::Client& c) {
    const json r = running_request(c);
    return r.is_null() ? json(nullptr) : r["prefill"];
}

}  // namespace

TEST_CASE("tiny model: prefill progress on /v1/status and /slots moves chunk by chunk and is complete by the first token") {
    const std::string model = cached_model("tiny");
    HoldPrefill hold;
    // --prefill-mb 0.25: chunks of a few dozen tokens on the tiny model, so a 900-token prompt takes many.
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "1", "--prefill-mb", "0.25"});
    auto status_client = d.client();

    const int total = 900;
    json prompt = json::array();
    for (int i = 0; i < total; ++i) prompt.push_back(1 + (i * 37) % 500);
    const json request = {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"stream", true}};

    json at_first_token = nullptr;
    std::atomic<bool> got_token{false}, answered{false};
    std::thread client_thread([&] {
        LoopbackSocket client(d.port());
        auto status_at_token = d.client();
        client.send(json_post("/v1/completions", request.dump()));
        // the first event of a completion stream is its first token's (the bound is against hangs)
        if (client.read_until("data: {", 600000).find("data: {") != std::string::npos) {
            at_first_token = get(status_at_token, "/v1/status");
            got_token = true;
        }
        client.read_until("data: [DONE]", 600000);
        answered = true;
    });

    // Held after the first chunk: the count is that chunk's end, short of the total.
    json held = nullptr;
    REQUIRE(eventually([&] {
        held = running_prefill(status_client);
        return held.is_object() && held["chunks_done"].get<int>() >= 1;
    }));
    const json status = get(status_client, "/v1/status");
    CHECK(status["active"][0]["stage"] == "prompt");
    CHECK(held["total_tokens"] == total);
    CHECK(held["cached_tokens"] == 0);
    CHECK(held["chunks_done"] == 1);
    const int first_chunk = held["done_tokens"];
    CHECK(first_chunk < total);
    CHECK(held["tokens_per_s"].get<double>() > 0);
    CHECK(held["eta_s"].get<double>() > 0);
    CHECK(held["elapsed_s"].get<double>() > 0);
    // /slots says the same of the same request (once the worker has published its board: it
    // does so every 0.2 s while held)
    json slot = nullptr;
    REQUIRE(eventually([&] {
        slot = get(status_client, "/slots")["slots"][0];
        return slot["state"] == "prefill";
    }));
    CHECK(slot["prefill"]["done_tokens"] == first_chunk);
    CHECK(slot["prefill"]["total_tokens"] == total);
    CHECK_FALSE(got_token.load());

    // Let it go: every later read shows as much or more, until the first token.
    hold.release();
    int last = first_chunk, reads = 0;
    while (!got_token.load() && !answered.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));  // (not a wait: a pace for the reads)
        const json p = running_prefill(status_client);
        if (!p.is_object()) continue;
        const int done = p["done_tokens"];
        CHECK(done >= last);
        CHECK(done <= total);
        last = done;
        ++reads;
    }
    client_thread.join();
    INFO("status reads while the prompt was read: " << reads);
    REQUIRE(at_first_token.is_object());
    // the request is generating, or (three tokens come quickly) already finished
    const json& active = at_first_token["active"].empty() ? at_first_token["last_request"] : at_first_token["active"][0];
    REQUIRE(active.is_object());
    CHECK(active["stage"] != "prompt");
    CHECK(active["prefill"]["done_tokens"] == total);
    CHECK(active["prefill"]["total_tokens"] == total);
    CHECK(active["prefill"]["eta_s"] == 0.0);
    CHECK(active["prefill"]["chunks_done"].get<int>() > 2);
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}
