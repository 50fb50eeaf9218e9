// Waiting in tests without racing the clock: poll a condition until it holds (bounded), or block
// on a Gate that the code under test opens at the exact moment of interest. A sleep followed by
// an assertion passes or fails with the machine's load; these only ever wait longer.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace k3::test {

// Polls `pred` every few milliseconds until it holds or `timeout` passes; returns whether it held.
// The timeout is a bound against hangs, generous on purpose: a slow machine only waits longer.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
        if (std::chrono::steady_clock::now() >= deadline) return pred();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

// A one-shot latch with a bounded wait: open() once (from any thread), and every wait returns.
class Gate {
public:
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        cv_.notify_all();
    }
    bool is_open() const {
        std::lock_guard lock(mutex_);
        return open_;
    }
    // Returns whether the gate opened within `timeout` (a bound against hangs only).
    bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(20)) const {
        std::unique_lock lock(mutex_);
        return cv_.wait_for(lock, timeout, [&] { return open_; });
    }

private:
    mutable std::mutex mutex_;
    mutable std::condition_variable cv_;
    bool open_ = false;
};

}  // namespace k3::test
