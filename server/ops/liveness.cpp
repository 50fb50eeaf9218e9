#include "ops/liveness.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <algorithm>

namespace k3::server {

Liveness::Liveness(std::function<bool()> busy, std::function<uint64_t()> progress, LivenessOptions options)
    : busy_(std::move(busy)), progress_(std::move(progress)), options_(std::move(options)) {
    watchdog_ = options_.watchdog;
    uint64_t usec = 0;
    if (watchdog_.count() == 0 && sd_watchdog_enabled(0, &usec) > 0) watchdog_ = std::chrono::microseconds(usec);
    if (watchdog_.count() > 0)
        options_.sample_s = std::min(options_.sample_s, std::chrono::duration<double>(watchdog_).count() / 2);
    if (!options_.ping) options_.ping = [] { sd_notify(0, "WATCHDOG=1"); };
    last_progress_ms_ = now_ms();
}

Liveness::~Liveness() { stop(); }

int64_t Liveness::now_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void Liveness::start() {
    if (thread_.joinable()) return;
    thread_ = std::thread([this] { run(); });
}

void Liveness::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Liveness::beat() { last_progress_ms_ = now_ms(); }

void Liveness::mark_unhealthy(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (unhealthy_.empty()) spdlog::error("model unhealthy, restart the daemon: {}", why);
    unhealthy_ = why;
}

std::string Liveness::problem() const {
    {
        std::lock_guard lock(mutex_);
        if (!unhealthy_.empty()) return "model unhealthy after an engine I/O error: " + unhealthy_;
    }
    if (stuck_.load())
        return "the engine worker has made no progress for " +
               std::to_string((now_ms() - last_progress_ms_.load()) / 1000) + " s";
    return {};
}

void Liveness::run() {
    uint64_t last_count = progress_ ? progress_() : 0;
    auto period = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(options_.sample_s));
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        lock.unlock();
        uint64_t count = progress_ ? progress_() : 0;
        if (count != last_count || !busy_()) beat();
        last_count = count;
        bool stuck = double(now_ms() - last_progress_ms_.load()) > options_.stuck_after_s * 1000;
        if (stuck != stuck_.load()) {
            if (stuck) spdlog::error("engine worker stuck: no progress for {} s", options_.stuck_after_s);
            else spdlog::warn("engine worker making progress again");
            stuck_ = stuck;
        }
        if (!stuck && watchdog_.count() > 0) options_.ping();
        lock.lock();
        cv_.wait_for(lock, period, [&] { return stopping_; });
    }
}

}  // namespace k3::server
