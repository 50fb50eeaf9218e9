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
                     "--interleave-tokens", std::to_string(cap), "--draft-max", "0", "--test-hold-prefill",
                     between_passes.file});
    auto status = d.client();
    int pass = 0;
    REQUIRE(eventually([&] { return (pass = int(metric_value(status, "k3serve:prefill_pass_tokens"))) > 0; }));
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
