// Liveness: whether the engine worker is making progress, told to systemd's watchdog and to
// /health. A thread samples the engine's progress counter (layers evaluated, Engine::progress)
// and the worker's heartbeat (between jobs and tokens). The worker is live when it is idle or
// one of the two moved within `stuck_after_s`; a long prefill moves the counter every layer, so
// it keeps the watchdog fed, and a worker stuck inside one layer (a hung read) starves it.
//
// While live, WATCHDOG=1 goes out at half the interval systemd asks for (WATCHDOG_USEC, through
// sd_watchdog_enabled); when stuck, the pings stop (systemd restarts the daemon) and /health
// answers 503 worker_stuck. Independently, an engine I/O error while serving (a shard
// truncated or unreadable) marks the model unhealthy for good: /health answers 503
// model_unhealthy naming the error, so an orchestrator restarts the daemon.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace k3::server {

struct LivenessOptions {
    double stuck_after_s = 120;          // busy with no progress this long = stuck
    double sample_s = 1;                 // how often to look (shortened to half the watchdog interval)
    std::chrono::microseconds watchdog{0};  // systemd's WATCHDOG_USEC; 0 = from the environment
    std::function<void()> ping;          // sends WATCHDOG=1 (default: sd_notify)
};

class Liveness {
public:
    Liveness(std::function<bool()> busy, std::function<uint64_t()> progress, LivenessOptions options = {});
    ~Liveness();

    void start();
    void stop();
    // The worker made progress (a token, a finished job, an idle loop turn).
    void beat();
    // "" when live; otherwise why not (for /health).
    std::string problem() const;
    // An engine I/O error while serving: the model is unhealthy until restart.
    void mark_unhealthy(const std::string& why);
    bool watchdog_enabled() const { return watchdog_.count() > 0; }

private:
    void run();
    int64_t now_ms() const;

    std::function<bool()> busy_;
    std::function<uint64_t()> progress_;
    LivenessOptions options_;
    std::chrono::microseconds watchdog_{0};
    std::atomic<int64_t> last_progress_ms_{0};
    std::atomic<bool> stuck_{false};
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool stopping_ = false;
    std::string unhealthy_;
    std::thread thread_;
};

}  // namespace k3::server
