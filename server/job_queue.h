// The bounded queue between HTTP threads and the engine worker: one mutex and one condition
// variable (house style 3.6). A full queue is an answer (503 + Retry-After), not a wait; a
// closed queue (shutdown) refuses new jobs and lets the worker drain what is left.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "job.h"

namespace k3::server {

class JobQueue {
public:
    enum class PushResult { Ok, Full, Closed };

    explicit JobQueue(size_t capacity) : capacity_(capacity) {}

    PushResult push(std::shared_ptr<Job> job) {
        std::lock_guard lock(mutex_);
        if (closed_) return PushResult::Closed;
        if (jobs_.size() >= capacity_) return PushResult::Full;
        jobs_.push_back(std::move(job));
        ready_.notify_one();
        return PushResult::Ok;
    }

    // The next job, or nullptr after `timeout` or once the queue is closed and empty.
    std::shared_ptr<Job> pop(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, timeout, [&] { return !jobs_.empty() || closed_; });
        if (jobs_.empty()) return nullptr;
        auto job = std::move(jobs_.front());
        jobs_.pop_front();
        return job;
    }

    // New pushes fail from now on; jobs already queued are still handed out.
    void close() {
        std::lock_guard lock(mutex_);
        closed_ = true;
        ready_.notify_all();
    }
    bool closed() const {
        std::lock_guard lock(mutex_);
        return closed_;
    }
    size_t size() const {
        std::lock_guard lock(mutex_);
        return jobs_.size();
    }
    size_t capacity() const { return capacity_; }
    // How long each waiting job has waited, first in line first (for /v1/status).
    std::vector<double> waiting_seconds() const {
        std::lock_guard lock(mutex_);
        std::vector<double> out;
        auto now = Clock::now();
        for (const auto& job : jobs_) out.push_back(std::chrono::duration<double>(now - job->enqueued_at).count());
        return out;
    }

    // Cancels every job still waiting (shutdown after the drain timeout).
    void cancel_all(CancelReason reason) {
        std::lock_guard lock(mutex_);
        for (auto& job : jobs_) job->request_cancel(reason);
    }

private:
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::shared_ptr<Job>> jobs_;
    size_t capacity_;
    bool closed_ = false;
};

}  // namespace k3::server
