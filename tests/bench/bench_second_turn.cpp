// The speed-up state reuse gives a chat's second turn: the time to answer turn 2 (prefill +
// one token) right after turn 1 (the worker's session still holds turn 1, so only the new
// messages are evaluated) against the same request after an unrelated one (nothing reusable,
// the whole conversation is evaluated). Runs the real daemon as a subprocess, with one slot and
// no prompt cache (--parallel 1 --prompt-cache-gb 0), so "recomputed" really recomputes;
// bench_batching measures what the prompt cache adds.
//   bench_second_turn [MODEL_DIR] [--system-words N] [--threads N]
// Without MODEL_DIR it writes the demo model into $K3_TEST_TMP (default /tmp/k3serve-bench).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/daemon.h"
#include "common/model_cache.h"

using namespace k3::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Seconds for one non-streamed request with max_tokens 1 (prefill + one token), and its usage.
std::pair<double, json> timed(httplib::Client& c, const json& messages) {
    json body = {{"messages", messages}, {"max_tokens", 1}, {"temperature", 0}};
    auto start = Clock::now();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (!r || r->status != 200) {
        std::fprintf(stderr, "request failed: %s\n", r ? r->body.c_str() : "no answer");
        std::exit(1);
    }
    return {s, json::parse(r->body)["usage"]};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, threads = "0";
    int system_words = 600;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--system-words" && i + 1 < argc) system_words = std::atoi(argv[++i]);
        else if (a == "--threads" && i + 1 < argc) threads = argv[++i];
        else model = a;
    }
    if (!std::getenv("K3SERVE_BIN")) setenv("K3SERVE_BIN", K3SERVE_BIN_DEFAULT, 1);
    if (!std::getenv("K3_TEST_TMP")) setenv("K3_TEST_TMP", "/tmp/k3serve-bench", 1);
    if (model.empty()) model = cached_model("demo");

    std::string system;
    const char* words[] = {"the", "model", "reads", "experts", "from", "disk", "when", "routed", "and", "keeps",
                           "its", "trunk", "pinned", "in", "memory", "so", "answers", "stay", "identical"};
    for (int i = 0; i < system_words; ++i) system += std::string(words[i % 19]) + (i % 12 == 11 ? ". " : " ");
    json turn1 = json::array({{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", "Summarise that."}}});
    json turn2 = turn1;
    turn2.push_back({{"role", "assistant"}, {"content", "It streams experts and pins the trunk."}});
    turn2.push_back({{"role", "user"}, {"content", "And why are the answers identical?"}});
    json unrelated = json::array({{{"role", "user"}, {"content", "Something else entirely."}}});

    DaemonProcess d({model, "--port", "0", "--threads", threads, "--parallel", "1", "--prompt-cache-gb", "0"});
    auto c = d.client();
    timed(c, unrelated);  // warm caches and code paths once
    std::vector<double> warm, cold;
    json warm_usage, cold_usage;
    for (int rep = 0; rep < 3; ++rep) {
        timed(c, turn1);
        auto [w, wu] = timed(c, turn2);
        timed(c, unrelated);
        auto [k, ku] = timed(c, turn2);  // the session now holds the unrelated request
        warm.push_back(w);
        cold.push_back(k);
        warm_usage = wu;
        cold_usage = ku;
    }
    std::printf("model %s, second turn of %d prompt tokens\n", model.c_str(), warm_usage["prompt_tokens"].get<int>());
    std::printf("  reused state: %.3f s (cached_tokens %d)\n", median(warm),
                warm_usage["prompt_tokens_details"]["cached_tokens"].get<int>());
    std::printf("  recomputed:   %.3f s (cached_tokens %d)\n", median(cold),
                cold_usage["prompt_tokens_details"]["cached_tokens"].get<int>());
    std::printf("  speed-up: %.1fx (medians of 3)\n", median(cold) / median(warm));
    d.signal(SIGTERM);
    return d.wait_exit();
}
