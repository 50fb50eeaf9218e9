// Exact speculative decoding by prompt lookup, through the real daemon: the same greedy
// completion with --draft-max 0 (plain) and --draft-max N, decode tokens/s of each (from the
// first streamed token to the last), whether the texts are identical, and the acceptance the
// daemon reports in /slots. Two runs: a long one (random-weight models' greedy output falls
// into a cycle after a while; prompt lookup drafts from the cycle) and a short one that ends
// before the output repeats (the cost when drafts are rare or rejected).
//   bench_speculative MODEL_DIR [--long N] [--short N] [--draft-max N] [--threads N]
//                     [--trunk-gb G --cache-gb G]
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>

#include "common/daemon.h"

using namespace k3::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Run {
    std::string text;
    int tokens = 0;
    double decode_tok_s = 0;
    json speculative;
};

Run generate(DaemonProcess& d, const std::string& prompt, int max_tokens) {
    auto c = d.client();
    c.set_read_timeout(3600, 0);
    const json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true},
                       {"stream", true}, {"stream_options", {{"include_usage", true}}}};
    Run run;
    std::string buffer;
    Clock::time_point first{}, last{};
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
                            if (j.contains("usage") && !j["usage"].is_null())
                                run.tokens = j["usage"]["completion_tokens"];
                            if (!j.contains("choices") || j["choices"].empty()) continue;
                            const std::string t = j["choices"][0].value("text", "");
                            if (t.empty()) continue;
                            if (first == Clock::time_point{}) first = now;
                            last = now;
                            run.text += t;
                        }
                        return true;
                    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    if (!c.send(req, res, err) || res.status != 200) {
        std::fprintf(stderr, "request failed\n");
        std::exit(1);
    }
    run.decode_tok_s = double(run.tokens - 1) / std::chrono::duration<double>(last - first).count();
    auto s = c.Get("/slots");
    if (s && s->status == 200) run.speculative = json::parse(s->body)["speculative"];
    return run;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, threads = "0", trunk, cache, draft_max = "8";
    int long_n = 200, short_n = 24;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
        if (a == "--long") long_n = std::atoi(next().c_str());
        else if (a == "--short") short_n = std::atoi(next().c_str());
        else if (a == "--draft-max") draft_max = next();
        else if (a == "--threads") threads = next();
        else if (a == "--trunk-gb") trunk = next();
        else if (a == "--cache-gb") cache = next();
        else model = a;
    }
    if (model.empty()) {
        std::fprintf(stderr, "usage: bench_speculative MODEL_DIR [--long N] [--short N] [--draft-max N] "
                             "[--threads N] [--trunk-gb G --cache-gb G]\n");
        return 2;
    }
    if (!std::getenv("K3SERVE_BIN")) setenv("K3SERVE_BIN", K3SERVE_BIN_DEFAULT, 1);
    const std::string prompt = "The quick brown fox jumps over the lazy dog. The quick brown fox";
    std::printf("model %s, trunk_gb %s, cache_gb %s, draft-max %s\n", model.c_str(), trunk.empty() ? "-" : trunk.c_str(),
                cache.empty() ? "-" : cache.c_str(), draft_max.c_str());
    Run plain[2], spec[2];
    for (int variant = 0; variant < 2; ++variant) {
        std::vector<std::string> args = {model, "--port", "0", "--threads", threads, "--parallel", "1",
                                         "--prompt-cache-gb", "0", "--draft-max", variant == 0 ? "0" : draft_max};
        if (!trunk.empty()) args.insert(args.end(), {"--trunk-gb", trunk});
        if (!cache.empty()) args.insert(args.end(), {"--cache-gb", cache});
        DaemonProcess d(args);
        generate(d, "warm up", 2);
        Run* out = variant == 0 ? plain : spec;
        out[0] = generate(d, prompt, long_n);
        out[1] = generate(d, prompt, short_n);
        d.signal(SIGTERM);
        d.wait_exit();
    }
    const char* names[2] = {"long (output repeats)", "short (before it repeats)"};
    for (int i = 0; i < 2; ++i)
        std::printf("%s: %d tokens; plain %.2f tok/s, speculative %.2f tok/s = %.2fx; identical text: %s; "
                    "drafts verified/accepted so far: %s\n",
                    names[i], spec[i].tokens, plain[i].decode_tok_s, spec[i].decode_tok_s,
                    spec[i].decode_tok_s / plain[i].decode_tok_s, plain[i].text == spec[i].text ? "yes" : "NO",
                    spec[i].speculative.dump().c_str());
    return 0;
}
