// Charges the forward pass's wall time to its stages (k3/forward_stages.h): a clock runs for one
// stage at a time, next() switches it, pause() stops it (a block function with its own clock runs
// meanwhile), and what it measured is added when it switches, pauses or goes out of scope. Only
// the engine's owning thread writes the sums; another may read them (Engine::stats), hence
// relaxed atomics. Two clock reads per stretch, a few dozen a layer: nothing next to the work.
#pragma once
#include <atomic>
#include <chrono>

#include "k3/forward_stages.h"

namespace k3 {

using StageSums = std::array<std::atomic<double>, kForwardStages>;

class StageClock {
public:
    StageClock(StageSums& sums, ForwardStage s) : sums_(sums), stage_(s), t0_(Clock::now()) {}
    ~StageClock() { pause(); }
    StageClock(const StageClock&) = delete;
    StageClock& operator=(const StageClock&) = delete;

    void next(ForwardStage s) {
        pause();
        stage_ = s;
        running_ = true;
        t0_ = Clock::now();
    }
    void pause() {
        if (!running_) return;
        running_ = false;
        std::atomic<double>& sum = sums_[size_t(stage_)];
        sum.store(sum.load(std::memory_order_relaxed) + std::chrono::duration<double>(Clock::now() - t0_).count(),
                  std::memory_order_relaxed);
    }

private:
    using Clock = std::chrono::steady_clock;
    StageSums& sums_;
    ForwardStage stage_;
    bool running_ = true;
    Clock::time_point t0_;
};

}  // namespace k3
