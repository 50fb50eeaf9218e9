// Bounded load test on loopback: the real daemon on the tiny model, 32 concurrent streaming
// clients, a fixed number of requests each. Every request must either complete (finish_reason
// and [DONE]) or be refused with 503 + Retry-After; the daemon must not crash, and its RSS after
// the run must stay close to its RSS after a warm-up round (no leak). Throughput and time to
// first token are printed (and written to $K3_TEST_TMP/load_tiny.txt); they are reported, not
// asserted.
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/daemon.h"
#include "common/scratch.h"
#include "common/model_cache.h"
#include "common/wait.h"

using namespace k3::test;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kClients = 32;
constexpr int kRequestsPerClient = 4;
constexpr int kMaxTokens = 24;
constexpr auto kTimeLimit = std::chrono::seconds(240);
constexpr double kMaxRssGrowthBytes = 8e6;

struct Outcome {
    bool completed = false, refused = false;
    double ttft_s = 0, total_s = 0;
    int tokens = 0;
    std::string problem;
};

// One streamed completion over a raw socket, timing the first data event.
Outcome stream_once(int port, int id) {
    Outcome out;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        close(fd);
        out.problem = "connect failed";
        return out;
    }
    timeval tv{60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string body = json({{"prompt", "Request " + std::to_string(id) + " says"},
                             {"max_tokens", kMaxTokens},
                             {"temperature", 0.7},
                             {"seed", id},
                             {"ignore_eos", true},
                             {"stream", true},
                             {"stream_options", {{"include_usage", true}}}})
                           .dump();
    std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      "Content-Type: application/json\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n\r\n" + body;
    auto start = Clock::now();
    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    std::string got;
    char buf[8192];
    bool first = false;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, size_t(n));
        if (!first && got.find("\"text\"") != std::string::npos) {
            first = true;
            out.ttft_s = std::chrono::duration<double>(Clock::now() - start).count();
        }
    }
    close(fd);
    out.total_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (got.rfind("HTTP/1.1 503", 0) == 0) {
        out.refused = got.find("Retry-After") != std::string::npos && got.find("\"error\"") != std::string::npos;
        if (!out.refused) out.problem = "503 without Retry-After or error body";
        return out;
    }
    if (got.rfind("HTTP/1.1 200", 0) != 0) {
        out.problem = "unexpected answer: " + got.substr(0, 200);
        return out;
    }
    std::smatch m;
    static const std::regex usage(R"("completion_tokens":([0-9]+))");
    if (std::regex_search(got, m, usage)) out.tokens = std::stoi(m[1]);
    out.completed = got.find("\"finish_reason\":\"length\"") != std::string::npos &&
                    got.find("data: [DONE]") != std::string::npos && out.tokens == kMaxTokens;
    if (!out.completed) out.problem = "incomplete stream: " + got.substr(std::max<size_t>(got.size(), 300) - 300);
    return out;
}

double metric(httplib::Client& c, const std::string& name) {
    auto r = c.Get("/metrics");
    REQUIRE(r);
    std::smatch m;
    std::regex re("\n" + std::regex_replace(name, std::regex(R"([\\^$.|?*+()\[\]{}])"), R"(\$&)") + " ([0-9.e+]+)\n");
    REQUIRE(std::regex_search(r->body, m, re));
    return std::stod(m[1]);
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

}  // namespace

TEST_CASE("load: 32 concurrent streaming clients on the tiny model; every request completes or gets 503") {
    std::string model = cached_model("tiny");
    DaemonProcess d({model, "--port", "0", "--threads", "1", "--queue-depth", "16", "--http-threads", "40"});
    auto c = d.client();

    // Warm-up round: one request per client, all at once, so the HTTP threads, their stacks and
    // the allocator's per-thread arenas exist before the RSS baseline is taken; what the main
    // round adds after that is what the requests leave behind.
    {
        std::vector<std::thread> warm;
        std::atomic<int> warm_problems{0};
        for (int i = 0; i < kClients; ++i)
            warm.emplace_back([&, i] {
                const Outcome o = stream_once(d.port(), 1000 + i);
                if (!o.completed && !o.refused) ++warm_problems;
            });
        for (auto& t : warm) t.join();
        REQUIRE(warm_problems.load() == 0);
    }
    double rss_warm = metric(c, "k3serve:resident_memory_bytes");
    double cache_warm = metric(c, "k3serve:prompt_cache_bytes");

    std::vector<Outcome> outcomes(size_t(kClients * kRequestsPerClient));
    std::atomic<bool> over_time{false};
    auto start = Clock::now();
    std::vector<std::thread> clients;
    for (int t = 0; t < kClients; ++t)
        clients.emplace_back([&, t] {
            for (int k = 0; k < kRequestsPerClient; ++k) {
                if (Clock::now() - start > kTimeLimit) {
                    over_time = true;
                    return;
                }
                outcomes[size_t(t * kRequestsPerClient + k)] = stream_once(d.port(), t * 100 + k);
            }
        });
    for (auto& t : clients) t.join();
    double wall = std::chrono::duration<double>(Clock::now() - start).count();
    CHECK_FALSE(over_time.load());

    int completed = 0, refused = 0, tokens = 0;
    std::vector<double> ttft;
    for (const auto& o : outcomes) {
        CHECK_MESSAGE(o.problem.empty(), o.problem);
        completed += o.completed;
        refused += o.refused;
        tokens += o.tokens;
        if (o.completed) ttft.push_back(o.ttft_s);
    }
    CHECK(completed + refused == kClients * kRequestsPerClient);
    CHECK(completed >= kClients);  // the queue (16) plus the running request take many of them
    CHECK_FALSE(d.exited());
    CHECK(metric(c, "k3serve:requests_total{outcome=\"error\"}") == 0);
    CHECK(metric(c, "k3serve:queue_depth") == 0);

    // No leak: the main round's 128 requests may grow the RSS by allocator slack only. The bound
    // is an absolute few MB (measured growth: see docs/development.md), so a leak of 100 KB a
    // request (13 MB over the round) fails it.
    // The prompt cache's states are memory held on purpose (within --prompt-cache-gb), not a leak:
    // its growth, as the daemon reports it, is taken off.
    double rss_after = metric(c, "k3serve:resident_memory_bytes");
    double cache_growth = metric(c, "k3serve:prompt_cache_bytes") - cache_warm;
    CHECK(rss_after - rss_warm - cache_growth <= kMaxRssGrowthBytes);

    char report[512];
    std::snprintf(report, sizeof report,
                  "load_tiny: %d clients x %d requests: %d completed, %d refused (503) in %.2f s; "
                  "%.1f generated tok/s; TTFT p50 %.3f s p95 %.3f s max %.3f s; RSS %.1f -> %.1f MB (prompt cache +%.1f MB)\n",
                  kClients, kRequestsPerClient, completed, refused, wall, tokens / wall, percentile(ttft, 0.5),
                  percentile(ttft, 0.95), percentile(ttft, 1.0), rss_warm / 1e6, rss_after / 1e6, cache_growth / 1e6);
    MESSAGE(report);
    std::ofstream(env_or_throw("K3_TEST_TMP") + "/load_tiny.txt") << report;
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);
}
