// JobChannel: a job's events from the engine worker back to the HTTP thread that owns the job.
// The worker never waits on it (docs/operations.md, "A client that stops reading"): one engine
// worker serves every stream, so a wait for one client's room would stall all of them. Instead
// each push is judged against a byte budget of output the client has not taken yet; a push that
// would go past it is refused (OverBudget) and the worker cancels that job alone. The event
// that ends a job (Done of the last choice, or Error) is always taken, so the reader learns how
// its job ended. Once the reader has closed the channel (client gone), pushes return Closed and
// the event is dropped.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <iterator>
#include <mutex>
#include <vector>

#include "worker/job_event.h"

namespace k3::server {

// What an event holds in memory, approximately: its texts plus a fixed cost per event and per
// logprob entry (the vectors' and strings' own headers).
size_t event_bytes(const JobEvent& event);

class JobChannel {
public:
    enum class PushResult { Ok, OverBudget, Closed };

    // Never waits. OverBudget: the undelivered bytes plus this event would exceed `budget`
    // (the event is dropped); an event that ends the job is taken regardless.
    PushResult push(JobEvent event, size_t budget) {
        const size_t bytes = event_bytes(event);
        std::lock_guard lock(mutex_);
        if (closed_) return PushResult::Closed;
        if (!event.ends_job() && buffered_ + bytes > budget) return PushResult::OverBudget;
        buffered_ += bytes;
        items_.push_back({std::move(event), bytes});
        ready_.notify_one();
        return PushResult::Ok;
    }

    // Every event available now, waiting up to `timeout` for the first one.
    std::vector<JobEvent> pop_all(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
        std::vector<JobEvent> out;
        out.reserve(items_.size());
        for (auto& item : items_) out.push_back(std::move(item.event));
        items_.clear();
        buffered_ = 0;
        return out;
    }

    // The reader is done: later pushes are Closed.
    void close() {
        std::lock_guard lock(mutex_);
        closed_ = true;
        ready_.notify_all();
    }
    bool closed() const {
        std::lock_guard lock(mutex_);
        return closed_;
    }
    // Bytes pushed and not yet taken by the reader.
    size_t buffered_bytes() const {
        std::lock_guard lock(mutex_);
        return buffered_;
    }

private:
    struct Item {
        JobEvent event;
        size_t bytes;
    };
    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<Item> items_;
    size_t buffered_ = 0;
    bool closed_ = false;
};

}  // namespace k3::server
