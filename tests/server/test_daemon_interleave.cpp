// Other streams during a prefill (docs/performance.md, "Other streams during a prefill"): the
// real `k3serve serve` on the tiny model. A long prompt is held between its first two passes
// (--test-hold-prefill); a short request arrives meanwhile. Its prompt, which one step finishes,
// goes before the rest of the long one, and from then on each step carries its next token and
// at most --interleave-tokens of the long prompt: the long prompt's passes say so.
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
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;

namespace {

json prompt_of(int n, int salt) {
    json p = json::array();
    for (int i = 0; i < n; ++i) p.push_back(1 + (i * 37 + salt) % 500);
    return p;
}

// The passes a prompt of `total` tokens takes after its first pass of `pass` tokens when every
// later one is capped at `cap` tokens: a pass also ends at each multiple of `pass`, where the
// prompt leaves a snapshot (docs/performance.md, "Prefill passes").
// The plan's prefill pass in tokens, as /metrics gives it once the daemon is up.
int planned_pass_tokens(httplib::Client& status) {
    int pass = 0;
    REQUIRE(eventually([&] { return (pass = int(metric_value(status, "k3serve:prefill_pass_tokens"))) > 0; }));
    return pass;
}

int capped_passes(int total, int pass, int cap) {
    int passes = 1;
    for (int pos = pass; pos < total; ++passes) pos = std::min({pos + cap, (pos / pass + 1) * pass, total});
    return passes;
}

}  // namespace

TEST_CASE("tiny model: a short request that arrives during a long prompt is answered after the pass under way, "
          "and the long prompt goes on beside its stream in passes of --interleave-tokens") {
    const std::string model = cached_model("tiny");
    HoldFile between_passes("hold-prefill");
    const int cap = 4;
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--prefill-mb", "0.25",
                     "--interleave-tokens", std::to_string(cap), "--decode-wait-s", "0", "--draft-max", "0", "--test-hold-prefill",
                     between_passes.file});
    auto status = d.client();
    const int pass = planned_pass_tokens(status);
    REQUIRE(pass > 2 * cap);
    const int long_total = 4 * pass + pass / 2;

    std::atomic<bool> long_done{false}, short_done{false};
    std::thread long_client = stream_to_end(
        d.port(), "/v1/completions",
        json{{"prompt", prompt_of(long_total, 0)}, {"max_tokens", 1}, {"temperature", 0}, {"stream", true}}.dump(), long_done);
    // held after the long prompt's first pass
    REQUIRE(eventually([&] {
        const json r = running_request(status);
        return r.is_object() && r["prefill"].is_object() && r["prefill"]["chunks_done"] == 1;
    }));

    // the short request arrives and is admitted beside it, still held
    std::thread short_client = stream_to_end(
        d.port(), "/v1/completions",
        json{{"prompt", prompt_of(8, 250)}, {"max_tokens", 3000}, {"temperature", 0}, {"stream", true}}.dump(), short_done);
    REQUIRE(eventually([&] {
        const json slots = get_json(status, "/slots")["slots"];
        return slots[0]["state"] == "prefill" && slots[1]["state"] == "prefill";
    }));
    between_passes.release();

    long_client.join();
    REQUIRE(long_done.load());
    const json s = get_json(status, "/v1/status");
    const json& long_request = s["last_request"];
    REQUIRE(long_request.is_object());
    CHECK(long_request["prompt_tokens"] == long_total);
    // The short prompt took the second step; every later pass of the long one ran beside its
    // decode step, at most `cap` tokens (without the short-first rule it would have waited for
    // the whole long prompt: 5 passes; without the cap, passes of `pass` tokens).
    const int passes = long_request["prefill"]["chunks_done"];
    CHECK(passes == capped_passes(long_total, pass, cap));
    // and the short request got a token in each of those steps (it is still generating: 3,000
    // tokens take it seconds past the long prompt's end)
    REQUIRE(s["active"].size() == 1);
    CHECK(s["active"][0]["prompt_tokens"] == 8);
    CHECK(s["active"][0]["generated_tokens"].get<int>() >= passes - 1);
    short_client.join();
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}

// ---- decode steps between the layers of a long prompt's pass (--decode-wait-s) ----

namespace {

constexpr int kTinyLayers = 13;  // the tiny model's decoder layers

json completion(const json& prompt, int max_tokens) {
    return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
}

// A non-streamed completion on a thread of its own: its text lands in `text`, then `done` is set.
std::thread complete_in_background(const DaemonProcess& d, json body, std::string& text, std::atomic<bool>& done) {
    return std::thread([&d, body = std::move(body), &text, &done] {
        auto c = d.client();
        auto r = c.Post("/v1/completions", body.dump(), "application/json");
        if (r && r->status == 200) text = json::parse(r->body)["choices"][0]["text"].get<std::string>();
        done = true;
    });
}

// Each request's text from a daemon that runs them one after the other, with no decode steps
// between layers (the reference bits).
std::vector<std::string> texts_alone(const std::string& model, const std::vector<json>& bodies) {
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "1", "--prefill-mb", "0.25", "--draft-max",
                     "0", "--decode-wait-s", "0"});
    auto c = d.client();
    std::vector<std::string> out;
    for (const json& b : bodies) {
        auto r = c.Post("/v1/completions", b.dump(), "application/json");
        REQUIRE(r);
        REQUIRE(r->status == 200);
        out.push_back(json::parse(r->body)["choices"][0]["text"].get<std::string>());
    }
    return out;
}

// /v1/status's running request with this many prompt tokens (null when none).
json active_with_prompt(httplib::Client& c, int prompt_tokens) {
    const json status = get_json(c, "/v1/status");
    for (const json& a : status["active"])
        if (a["prompt_tokens"] == prompt_tokens) return a;
    return nullptr;
}

// That request is running and has produced a token.
bool has_generated(httplib::Client& c, int prompt_tokens) {
    const json a = active_with_prompt(c, prompt_tokens);
    return a.is_object() && a["generated_tokens"].get<int>() > 0;
}

}  // namespace

TEST_CASE("tiny model: a decoding stream takes its tokens while a long prompt's pass is held between two layers, "
          "and both give the bits each gives alone") {
    const std::string model = cached_model("tiny");
    HoldFile in_pass("hold-pass");
    in_pass.release();
    // (--decode-wait-s as short as it gets: a decode step before every layer of the pass)
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--prefill-mb", "0.25",
                     "--interleave-tokens", "4", "--draft-max", "0", "--decode-wait-s", "0.000001",
                     "--test-hold-pass", in_pass.file});
    auto status = d.client();
    const int pass = planned_pass_tokens(status);
    REQUIRE(pass > 8);
    const int long_total = 2 * pass + pass / 2;
    const json short_body = completion(prompt_of(8, 250), 3000);
    const json long_body = completion(prompt_of(long_total, 0), 5);

    // the short request decodes; then the long prompt's first pass (on its own: longer than
    // --interleave-tokens) is held before its middle layer
    std::string short_text, long_text;
    std::atomic<bool> short_done{false}, long_done{false};
    std::thread short_client = complete_in_background(d, short_body, short_text, short_done);
    REQUIRE(eventually([&] { return short_done.load() || has_generated(status, 8); }));
    REQUIRE_FALSE(short_done.load());
    in_pass.hold();
    std::thread long_client = complete_in_background(d, long_body, long_text, long_done);
    REQUIRE(eventually([&] {
        const json a = active_with_prompt(status, long_total);
        return a.is_object() && a["prefill"]["pass"].is_object() &&
               a["prefill"]["pass"]["layers_done"] == kTinyLayers / 2;
    }));

    // Held there, the short request goes on: 100 more tokens, from decode steps between the
    // layers (without them it waits for the pass: this times out), and the pass has not moved.
    const int generated = active_with_prompt(status, 8)["generated_tokens"];
    REQUIRE(eventually([&] {
        const json a = active_with_prompt(status, 8);
        return a.is_object() && a["generated_tokens"].get<int>() >= generated + 100;
    }));
    const json held = active_with_prompt(status, long_total);
    REQUIRE(held.is_object());
    CHECK(held["prefill"]["chunks_done"] == 0);
    CHECK(held["prefill"]["pass"]["number"] == 1);
    CHECK(held["prefill"]["pass"]["layers_done"] == kTinyLayers / 2);
    // (the board is published every 0.2 s meanwhile)
    CHECK(eventually([&] { return get_json(status, "/slots")["steps_between_layers"].get<int>() >= 100; }));
    in_pass.release();
    long_client.join();
    short_client.join();
    REQUIRE(long_done.load());
    CHECK_FALSE(short_text.empty());
    CHECK_FALSE(long_text.empty());
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);

    const std::vector<std::string> alone = texts_alone(model, {short_body, long_body});
    CHECK(short_text == alone[0]);
    CHECK(long_text == alone[1]);
}

TEST_CASE("tiny model: --decode-wait-s bounds a decoding stream's wait in layers: a decode step before each pass, "
          "and before every layer when the bound is shorter than a layer") {
    const std::string model = cached_model("tiny");
    const json short_body = completion(prompt_of(8, 250), 3000);
    for (const char* wait : {"1000", "0.000001"}) {
        CAPTURE(wait);
        DaemonProcess d({model, "--port", "0", "--threads", "1", "--parallel", "2", "--prefill-mb", "0.25",
                         "--interleave-tokens", "4", "--draft-max", "0", "--decode-wait-s", wait});
        auto status = d.client();
        const int pass = planned_pass_tokens(status);
        REQUIRE(pass > 8);
        // three passes, each longer than --interleave-tokens: each runs on its own
        const int long_total = 2 * pass + pass / 2;
        const json long_body = completion(prompt_of(long_total, 0), 1);

        std::string short_text, long_text;
        std::atomic<bool> short_done{false}, long_done{false};
        std::thread short_client = complete_in_background(d, short_body, short_text, short_done);
        REQUIRE(eventually([&] { return short_done.load() || has_generated(status, 8); }));
        const int between0 = get_json(status, "/slots")["steps_between_layers"];
        std::thread long_client = complete_in_background(d, long_body, long_text, long_done);
        long_client.join();
        REQUIRE(long_done.load());
        // the short request still decodes (3,000 tokens take it seconds past the long prompt)
        const json s = get_json(status, "/v1/status");
        REQUIRE(s["active"].size() == 1);
        CHECK(s["last_request"]["prefill"]["chunks_done"] == 3);
        // (the board is published with the long request's end)
        const int between = get_json(status, "/slots")["steps_between_layers"].get<int>() - between0;
        CHECK(between == (std::string(wait) == "1000" ? 3 : 3 * kTinyLayers));
        short_client.join();
        CHECK(short_text.size() > 0);
        d.signal(SIGTERM);
        CHECK(d.wait_exit() == 0);
    }
}
