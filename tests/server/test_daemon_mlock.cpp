// serve --mlock (the default) locks the daemon's pages as they are touched where the system lets
// it lock without a ceiling (RLIMIT_MEMLOCK unlimited, or CAP_IPC_LOCK as root), so the resident
// weights, which are the shards' mapped pages, cannot be dropped under memory pressure; where it
// may not, it says so in the log and runs unlocked. Checked on the daemon's own /proc status
// (VmLck) and on what it reports (/metrics k3serve:locked_memory_bytes, /v1/status).
#include <doctest/doctest.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/daemon.h"
#include "common/model_cache.h"

using namespace k3::test;
using nlohmann::json;

namespace {

// VmLck of another process, in bytes (-1 when unreadable).
int64_t locked_bytes_of(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmLck:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    return -1;
}

// Whether this process (and so the daemon it starts) may lock without a ceiling: read from the
// kernel's own view, independently of the daemon's code.
bool may_lock_without_ceiling() {
    rlimit limit{};
    getrlimit(RLIMIT_MEMLOCK, &limit);
    if (limit.rlim_cur == RLIM_INFINITY) return true;
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("CapEff:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> 14) & 1;  // CAP_IPC_LOCK
    return false;
}

double metric(const std::string& body, const std::string& name) {
    const std::string key = "\n" + name + " ";
    size_t at = body.find(key);
    return at == std::string::npos ? -1 : std::stod(body.substr(at + key.size()));
}

const json kGreedy = {{"prompt", "The capital of France is"}, {"max_tokens", 4}, {"temperature", 0}};

}  // namespace

TEST_CASE("tiny model: --mlock locks the daemon's pages where the system allows it, --no-mlock does not") {
    const std::string model = cached_model("tiny");
    const bool allowed = may_lock_without_ceiling();
    INFO("RLIMIT_MEMLOCK unlimited or CAP_IPC_LOCK: " << allowed);

    DaemonProcess d({model, "--port", "0", "--threads", "1", "--no-background-load"});
    auto c = d.client();
    auto r = c.Post("/v1/completions", kGreedy.dump(), "application/json");
    REQUIRE(r);
    REQUIRE(r->status == 200);
    const int64_t vmlck = locked_bytes_of(d.pid());
    const std::string m = c.Get("/metrics")->body;
    const json status = json::parse(c.Get("/v1/status")->body);
    const int64_t weights = int64_t(metric(m, "k3serve:weights_total_bytes"));
    INFO(d.log());
    if (allowed) {
        // Every resident weight byte was touched to answer (background loading off), so all of
        // them are locked, with the rest of what the daemon touched.
        CHECK(d.log().find("memory locked") != std::string::npos);
        CHECK(weights > 0);
        CHECK(vmlck >= weights);
        CHECK(metric(m, "k3serve:locked_memory_bytes") >= double(weights));
        CHECK(status["memory"]["locked_bytes"].get<int64_t>() >= weights);
    } else {
        CHECK(d.log().find("memory not locked") != std::string::npos);
        CHECK(vmlck == 0);
        CHECK(metric(m, "k3serve:locked_memory_bytes") == 0);
    }
    d.signal(SIGTERM);
    CHECK(d.wait_exit() == 0);

    DaemonProcess unlocked({model, "--port", "0", "--threads", "1", "--no-background-load", "--no-mlock"});
    auto u = unlocked.client();
    REQUIRE(u.Post("/v1/completions", kGreedy.dump(), "application/json"));
    CHECK(locked_bytes_of(unlocked.pid()) == 0);
    CHECK(metric(u.Get("/metrics")->body, "k3serve:locked_memory_bytes") == 0);
    CHECK(unlocked.log().find("memory not locked") == std::string::npos);
    unlocked.signal(SIGTERM);
    CHECK(unlocked.wait_exit() == 0);
}
