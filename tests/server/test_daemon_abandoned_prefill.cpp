// No prefill paid twice (docs/agents.md, "No prefill paid twice"): the real `k3serve serve` on
// the tiny model, a prompt read in many small chunks and held between two of them by the test
// hook (--test-hold-prefill, docs/development.md). A client that leaves mid-prompt does not
// stop it: /v1/status shows the request abandoned and still being read, and the same request
// sent again takes it over where it is (its cached_tokens count what the first attempt read);
// when nobody comes back it is read to its end into the prompt cache, and a later request
// resumes all of it. --abandoned-prefill-s bounds how long it goes on (0: it stops at once).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
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

constexpr int kPromptTokens = 900;

json completion_request(bool stream) {
    json prompt = json::array();
    for (int i = 0; i < kPromptTokens; ++i) prompt.push_back(1 + (i * 37) % 500);
    return {{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0}, {"stream", stream}};
}

json running(httplib::Client& c) { return running_request(c); }

bool held_mid_prompt(const json& r) {
    return r.is_object() && r["prefill"].is_object() && r["prefill"]["chunks_done"].get<int>() >= 1 &&
           r["prefill"]["done_tokens"].get<int>() < kPromptTokens;
}

// A daemon (--abandoned-prefill-s as given) whose streamed request was held mid-prompt and
// then left by its client; the hold is still on. `left` is the running request as it was when
// its client hung up (its id, and the prompt tokens read by then).
struct LeftMidPrompt {
    HoldFile hold{"hold-abandoned-prefill"};
    DaemonProcess d;
    httplib::Client status;
    json left;

    explicit LeftMidPrompt(const char* abandoned_prefill_s = "1800")
        : d({cached_model("tiny"), "--port", "0", "--threads", "1", "--parallel", "1", "--prefill-mb", "0.25",
             "--abandoned-prefill-s", abandoned_prefill_s, "--test-hold-prefill", hold.file}),
          status(d.client()) {
        LoopbackSocket client(d.port());
        client.send(json_post("/v1/completions", completion_request(true).dump()));
        REQUIRE(eventually([&] { return held_mid_prompt(left = running(status)); }));
    }  // the socket closes here
    int read_when_left() const { return left["prefill"]["done_tokens"]; }
};

int cached_tokens(const httplib::Result& r) {
    REQUIRE(r);
    REQUIRE(r->status == 200);
    return json::parse(r->body)["usage"]["prompt_tokens_details"]["cached_tokens"];
}

const std::string kCancelled = "k3serve:requests_total{outcome=\"cancelled\"}";

}  // namespace

TEST_CASE("tiny model: a prompt whose client left is read on, and the same request sent again takes it over") {
    LeftMidPrompt t;
    // Still running after its client left, marked abandoned.
    REQUIRE(eventually([&] {
        const json r = running(t.status);
        return r.is_object() && r["id"] == t.left["id"] && r["abandoned"] == true;
    }));

    // The retry arrives while the prompt is still held: it takes the running prefill over.
    std::optional<httplib::Result> answer;
    std::thread retry([&] {
        auto c = t.d.client();
        c.set_read_timeout(600);
        answer = c.Post("/v1/completions", completion_request(false).dump(), "application/json");
    });
    REQUIRE(eventually([&] {
        const json r = running(t.status);
        return r.is_object() && r["id"] != t.left["id"] && get_json(t.status, "/v1/status")["queue"]["depth"] == 0;
    }));
    CHECK(running(t.status)["abandoned"] == false);
    t.hold.release();
    retry.join();
    CHECK(cached_tokens(*answer) >= t.read_when_left());
    CHECK(metric_value(t.status, kCancelled) == 1);
}

TEST_CASE("tiny model: an abandoned prompt nobody comes back for is read to its end into the prompt cache") {
    LeftMidPrompt t;
    REQUIRE(eventually([&] { return running(t.status)["abandoned"] == true; }));
    t.hold.release();
    // Read to its end: nothing runs, and the request counts as cancelled.
    REQUIRE(eventually([&] { return running(t.status).is_null() && metric_value(t.status, kCancelled) == 1; }));
    auto c = t.d.client();
    const int cached = cached_tokens(c.Post("/v1/completions", completion_request(false).dump(), "application/json"));
    CHECK(cached > t.read_when_left());
}

TEST_CASE("tiny model: --abandoned-prefill-s bounds an abandoned prompt; 0 stops it when its client leaves") {
    {
        LeftMidPrompt t("0");
        // (still held: only the cancel ends it)
        REQUIRE(eventually([&] { return running(t.status).is_null() && metric_value(t.status, kCancelled) == 1; }));
    }
    LeftMidPrompt t("3");
    REQUIRE(eventually([&] { return running(t.status)["abandoned"] == true; }));  // read on while held ...
    REQUIRE(eventually([&] { return running(t.status).is_null() && metric_value(t.status, kCancelled) == 1; }));  // ... then stopped
}
