// Exact speculative decoding by prompt lookup, through the real daemon: the same greedy
// completion with --draft-max 0 (plain) and --draft-max N, decode tokens/s of each, whether the
// texts are identical, and the acceptance the daemon reports in /slots.
// Two runs:
// - a long one. A random-weight model does not copy its prompt, but its greedy output falls
//   into a cycle after a while, and prompt lookup drafts from the cycle. The run is chosen
//   inside the output itself: the tokens (streamed one by one with their logprobs entry) are
//   searched for the earliest position s from which they repeat with some period p <= 64 up to
//   the end; "repeating" is the window from s + p (the cycle has been seen once, so the
//   drafter can find it) to the end, "before the cycle" the tokens before s. Each window's
//   tokens/s is its token count over the time between the arrival of the token before it and
//   the arrival of its last token, the same token indices in both runs (the texts are equal).
//   With --narrow K the long run is made to repeat: a logit_bias of +30 on K token ids (the
//   same in both runs) leaves the greedy choice among those K, so the output is a walk over K
//   tokens that prompt lookup can draft from (random models here do not cycle within thousands
//   of tokens on their own).
// - a short one that ends before the output repeats (the cost when drafts are rare or
//   rejected).
//   bench_speculative MODEL_DIR [--long N] [--short N] [--draft-max N] [--threads N]
//                     [--trunk-gb G --cache-gb G] [--narrow K]
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/daemon.h"
#include "load_average.h"

using namespace k3::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Run {
    std::string text;
    std::vector<std::string> tokens;              // each generated token's text
    std::vector<Clock::time_point> arrived;       // when each arrived
    int completion_tokens = 0;
    json speculative;
    // tokens/s over tokens [from, to): their count over the time since token from - 1 arrived
    double tok_s(size_t from, size_t to) const {
        if (from == 0 || to <= from || to > arrived.size()) return 0;
        return double(to - from) / std::chrono::duration<double>(arrived[to - 1] - arrived[from - 1]).count();
    }
};

// The earliest s from which tokens repeat with a period p <= 64 to the end (at least 3 periods
// long); {tokens.size(), 0} when they do not.
std::pair<size_t, size_t> find_cycle(const std::vector<std::string>& t) {
    const size_t n = t.size();
    std::pair<size_t, size_t> best{n, 0};
    for (size_t p = 1; p <= 64 && 3 * p <= n; ++p) {
        size_t s = n - p;  // walk back while t[i] == t[i + p]
        while (s > 0 && t[s - 1] == t[s - 1 + p]) --s;
        if (n - s >= 3 * p && s < best.first) best = {s, p};
    }
    return best;
}

Run generate(DaemonProcess& d, const std::string& prompt, int max_tokens, const json& logit_bias = json::object()) {
    auto c = d.client();
    c.set_read_timeout(3600, 0);
    const json body = {{"prompt", prompt},  {"max_tokens", max_tokens}, {"temperature", 0},
                       {"ignore_eos", true}, {"stream", true},           {"logprobs", 0},
                       {"stream_options", {{"include_usage", true}}}, {"logit_bias", logit_bias}};
    Run run;
    std::string buffer;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
        const auto now = Clock::now();
        buffer.append(data, n);
        size_t pos;
        while ((pos = buffer.find("\n\n")) != std::string::npos) {
            const std::string event = buffer.substr(0, pos);
            buffer.erase(0, pos + 2);
            if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
            const json j = json::parse(event.substr(6));
            if (j.contains("usage") && !j["usage"].is_null()) run.completion_tokens = j["usage"]["completion_tokens"];
            if (!j.contains("choices") || j["choices"].empty()) continue;
            const json& choice = j["choices"][0];
            run.text += choice.value("text", "");
            if (choice.contains("logprobs") && choice["logprobs"].is_object())
                for (const json& t : choice["logprobs"]["tokens"]) {
                    run.tokens.push_back(t.get<std::string>());
                    run.arrived.push_back(now);
                }
        }
        return true;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    if (!c.send(req, res, err) || res.status != 200) {
        std::fprintf(stderr, "request failed\n");
        std::exit(1);
    }
    auto s = c.Get("/slots");
    if (s && s->status == 200) run.speculative = json::parse(s->body)["speculative"];
    return run;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, threads = "0", trunk, cache, draft_max = "8";
    int long_n = 200, short_n = 24, narrow = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--long") long_n = std::atoi(next().c_str());
        else if (a == "--short") short_n = std::atoi(next().c_str());
        else if (a == "--draft-max") draft_max = next();
        else if (a == "--threads") threads = next();
        else if (a == "--trunk-gb") trunk = next();
        else if (a == "--cache-gb") cache = next();
        else if (a == "--narrow") narrow = std::atoi(next().c_str());
        else model = a;
    }
    if (model.empty()) {
        std::fprintf(stderr, "usage: bench_speculative MODEL_DIR [--long N] [--short N] [--draft-max N] "
                             "[--threads N] [--trunk-gb G --cache-gb G] [--narrow K]\n");
        return 2;
    }
    if (!std::getenv("K3SERVE_BIN")) setenv("K3SERVE_BIN", K3SERVE_BIN_DEFAULT, 1);
    const std::string prompt = "The quick brown fox jumps over the lazy dog. The quick brown fox";
    std::printf("model %s, trunk_gb %s, cache_gb %s, draft-max %s; load average %s\n", model.c_str(),
                trunk.empty() ? "-" : trunk.c_str(), cache.empty() ? "-" : cache.c_str(), draft_max.c_str(),
                load_average().c_str());
    // ids 300.. are ordinary tokens in every preset's vocabulary (past the byte and special ranges)
    json long_bias = json::object();
    for (int k = 0; k < narrow; ++k) long_bias[std::to_string(300 + k)] = 30;
    if (narrow > 0) std::printf("long run narrowed to %d token ids by a logit_bias of +30\n", narrow);
    Run plain[2], spec[2];
    for (int variant = 0; variant < 2; ++variant) {
        std::vector<std::string> args = {model, "--port", "0", "--threads", threads, "--parallel", "1",
                                         "--prompt-cache-gb", "0", "--draft-max", variant == 0 ? "0" : draft_max};
        if (!trunk.empty()) args.insert(args.end(), {"--trunk-gb", trunk});
        if (!cache.empty()) args.insert(args.end(), {"--cache-gb", cache});
        DaemonProcess d(args);
        generate(d, "warm up", 2);
        Run* out = variant == 0 ? plain : spec;
        out[0] = generate(d, prompt, long_n, long_bias);
        out[1] = generate(d, prompt, short_n);
        d.signal(SIGTERM);
        d.wait_exit();
    }
    // /slots counts since the daemon started: the long run's drafts are the first figures, the
    // short run's the difference.
    auto counts = [](const json& a, const char* k) { return a.is_object() ? a.value(k, 0) : 0; };
    const int long_drafted = counts(spec[0].speculative, "drafted"), long_accepted = counts(spec[0].speculative, "accepted");
    const int short_drafted = counts(spec[1].speculative, "drafted") - long_drafted;
    const int short_accepted = counts(spec[1].speculative, "accepted") - long_accepted;

    const Run &pl = plain[0], &sp = spec[0];
    const auto [start, period] = find_cycle(pl.tokens);
    std::printf("long: %zu tokens; identical text: %s; drafts verified %d, accepted %d (%.0f%%)\n", pl.tokens.size(),
                pl.text == sp.text ? "yes" : "NO", long_drafted, long_accepted,
                long_drafted ? 100.0 * long_accepted / long_drafted : 0.0);
    if (period == 0) {
        const size_t n = pl.tokens.size();
        std::printf("  the output did not fall into a cycle within %zu tokens (try a larger --long); whole run: plain "
                    "%.2f tok/s, speculative %.2f tok/s = %.2fx\n",
                    n, pl.tok_s(1, n), sp.tok_s(1, n), sp.tok_s(1, n) / pl.tok_s(1, n));
    } else {
        const size_t from = start + period, to = pl.tokens.size();
        std::printf("  cycle of %zu tokens from token %zu; repeating window [%zu, %zu): plain %.2f tok/s, "
                    "speculative %.2f tok/s = %.2fx\n",
                    period, start, from, to, pl.tok_s(from, to), sp.tok_s(from, to), sp.tok_s(from, to) / pl.tok_s(from, to));
        if (start > 2)
            std::printf("  before the cycle [1, %zu): plain %.2f tok/s, speculative %.2f tok/s = %.2fx\n", start,
                        pl.tok_s(1, start), sp.tok_s(1, start), sp.tok_s(1, start) / pl.tok_s(1, start));
    }
    const size_t n_short = std::min(plain[1].tokens.size(), spec[1].tokens.size());
    std::printf("short (before it repeats): %zu tokens; plain %.2f tok/s, speculative %.2f tok/s = %.2fx; identical "
                "text: %s; drafts verified %d, accepted %d\n",
                n_short, plain[1].tok_s(1, n_short), spec[1].tok_s(1, n_short),
                spec[1].tok_s(1, n_short) / plain[1].tok_s(1, n_short), plain[1].text == spec[1].text ? "yes" : "NO",
                short_drafted, short_accepted);
    std::printf("load average at the end: %s\n", load_average().c_str());
    return 0;
}
