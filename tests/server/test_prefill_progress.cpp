// The real `k3serve serve` on the tiny model, a prompt evaluated in many small chunks: while it is
// being read, /v1/status and /slots carry its prefill progress (done of total, rate, time left);
// the count only goes up; by the first streamed token it is done == total. The daemon is held
// between two chunks by its test hook (--test-hold-prefill, docs/development.md), so the test
// reads it mid-prompt without racing it.
#include <doctest/doctest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/daemon.h"
#include "common/daemon_status.h"
#include "common/hold_file.h"
#include "common/loopback_socket.h"
#include "common/metric_value.h"
#include "common/model_cache.h"
#include "common/scratch.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

json get(httplib::Client& c, const char* path) { return get_json(c, path); }

// The prefill object of the one running request, null when none runs.
json running_prefill(httplib::Client& c) {
    const json r = running_request(c);
    return r.is_null() ? json(nullptr) : r["prefill"];
}

}  // namespace

TEST_CASE("tiny model: prefill progress on /v1/status and /slots moves chunk by chunk and is complete by the first token") {
    const std::string model = cached_model("tiny");
    // While it lives, the daemon stops before each prompt chunk after a prompt's first.
    HoldFile hold("hold-prefill");
    // --prefill-mb 0.25: chunks of a few dozen tokens on the tiny model, so a 900-token prompt takes many.
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "1", "--prefill-mb", "0.25",
                     "--test-hold-prefill", hold.file});
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

TEST_CASE("tiny model: a prefill pass shows its number, tokens and layers; /metrics counts the passes and their reads") {
    // Streamed (a 1 MB trunk: 2 of 13 layers pinned, the rest through the ring; a 1 MB cache of
    // 81 of the 96 experts) with a pass budget of its own for about a dozen tokens: a pass is
    // sized from the slots the cache lends, the lm_head and the two pinned layers
    // (docs/performance.md, "Prefill passes"). The daemon is held between the first two passes
    // (--test-hold-prefill), then inside the second, before its middle layer (--test-hold-pass,
    // docs/development.md).
    const std::string model = cached_model("tiny");
    HoldFile between_passes("hold-prefill");
    HoldFile in_pass("hold-pass");
    in_pass.release();
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "1", "--trunk-gb", "0.001", "--cache-gb",
                     "0.001", "--prefill-mb", "0.05", "--test-hold-prefill", between_passes.file, "--test-hold-pass",
                     in_pass.file});
    auto status_client = d.client();
    // (the engine's counters reach /metrics once the idle worker has published them)
    int pass_tokens = 0;
    REQUIRE(eventually([&] { return (pass_tokens = int(metric_value(status_client, "k3serve:prefill_pass_tokens"))) > 0; }));
    REQUIRE(pass_tokens > 1);
    const json before = get(status_client, "/v1/status")["engine"];
    const int total = 5 * pass_tokens / 2;  // two full passes and a half one
    const int passes = 3;
    CHECK(before["pass_tokens_max"] == pass_tokens);
    const double passes0 = metric_value(status_client, "k3serve:forward_passes_total");
    const double layer_reads0 = metric_value(status_client, "k3serve:trunk_layer_reads_total");
    const double read_waits0 = metric_value(status_client, "k3serve:expert_read_waits_total");
    const double lent0 = metric_value(status_client, "k3serve:pass_lent_bytes_total");
    const double unpinned0 = metric_value(status_client, "k3serve:pass_unpinned_layers_total");
    const double lm_head_reads0 = metric_value(status_client, "k3serve:lm_head_reads_total");
    REQUIRE(passes0 >= 0);
    REQUIRE(layer_reads0 >= 0);
    REQUIRE(read_waits0 >= 0);
    REQUIRE(lent0 >= 0);

    json prompt = json::array();
    for (int i = 0; i < total; ++i) prompt.push_back(1 + (i * 37) % 500);
    const json request = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}, {"stream", true}};
    std::atomic<bool> answered{false};
    std::thread client_thread = stream_to_end(d.port(), "/v1/completions", request.dump(), answered);

    // Between the passes: one done, none under way.
    json held = nullptr;
    REQUIRE(eventually([&] {
        held = running_prefill(status_client);
        return held.is_object() && held["chunks_done"].get<int>() >= 1;
    }));
    CHECK(held["chunks_done"] == 1);
    CHECK(held["done_tokens"] == pass_tokens);
    CHECK(held["pass"].is_null());
    // (the worker publishes its board every 0.2 s while held; none is published inside a pass)
    REQUIRE(eventually([&] { return get(status_client, "/slots")["slots"][0]["state"] == "prefill"; }));

    // Inside the second pass, before layer 13 / 2 = 6: it has been through layers 0..5.
    in_pass.hold();
    between_passes.release();
    REQUIRE(eventually([&] {
        held = running_prefill(status_client);
        return held.is_object() && held["pass"].is_object() && held["pass"]["layers_done"] == 6;
    }));
    CHECK(held["pass"]["number"] == 2);
    CHECK(held["pass"]["tokens"] == pass_tokens);
    CHECK(held["pass"]["layers"] == 13);
    CHECK(held["chunks_done"] == 1);
    CHECK(held["done_tokens"] == pass_tokens + pass_tokens * 6 / 13);
    const json slot = get(status_client, "/slots")["slots"][0];
    CHECK(slot["state"] == "prefill");
    CHECK(slot["prefill"]["pass"] == held["pass"]);
    in_pass.release();

    client_thread.join();
    REQUIRE(answered.load());
    // The request's end is published with the counters (a finished job forces the board).
    const json last = get(status_client, "/v1/status")["last_request"];
    CHECK(last["prefill"]["chunks_done"] == passes);
    CHECK(last["prefill"]["pass"].is_null());
    // One forward pass for each of the prompt's passes (the first token comes from the last
    // pass's logits); each streamed layer read once a pass, a pinned one at its first touch and
    // again in each later pass it is lent to, or lent to the pass before (the ring may have
    // started the next walk's first layer); a layer's first batch of experts at most waits for its
    // reads, the later ones were read ahead (12 MoE layers); the cache lent its slots, the lm_head
    // was lent to the full passes (the half one may not need it) and read again before each one's
    // output product, and the two pinned layers were lent too.
    CHECK(metric_value(status_client, "k3serve:forward_passes_total") - passes0 == passes);
    const double layer_reads = metric_value(status_client, "k3serve:trunk_layer_reads_total") - layer_reads0;
    const double unpinned = metric_value(status_client, "k3serve:pass_unpinned_layers_total") - unpinned0;
    CHECK(unpinned >= 2 * (passes - 1));  // the full passes lend both (the half one may need neither)
    CHECK(unpinned <= 2 * passes);
    const double lm_head_reads = metric_value(status_client, "k3serve:lm_head_reads_total") - lm_head_reads0;
    CHECK(lm_head_reads >= passes - 1);
    CHECK(lm_head_reads <= passes);
    // (the ring may hold the first streamed layer from before the prompt: one read fewer)
    CHECK(layer_reads >= 11 * passes + 2 * passes - 1);
    CHECK(layer_reads <= 11 * passes + 2 * passes + 1);
    const double read_waits = metric_value(status_client, "k3serve:expert_read_waits_total") - read_waits0;
    CHECK(read_waits > 0);
    CHECK(read_waits <= 12 * passes);
    CHECK(metric_value(status_client, "k3serve:pass_lent_bytes_total") > lent0);
    MESSAGE(passes << " passes of up to " << pass_tokens << " tokens: " << layer_reads << " trunk layer reads, "
                   << read_waits << " expert read waits");
    const json after = get(status_client, "/v1/status")["engine"];
    CHECK(after["passes"].get<double>() - before["passes"].get<double>() == passes);
    CHECK(after["expert_read_waits"].get<double>() - before["expert_read_waits"].get<double>() == read_waits);
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}
