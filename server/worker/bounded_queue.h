// A bounded queue: a deque behind one mutex and two condition variables (docs/architecture.md). The
// JobQueue from the HTTP threads to the engine worker is one (a full queue is an answer, 503 +
// Retry-After, so its pushes do not wait); the way back is a JobChannel (job_channel.h), which
// is bounded by bytes and never waits. Closing refuses new items; what is queued is still
// handed out.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <iterator>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace k3::server {

template <class T>
class BoundedQueue {
public:
    enum class PushResult { Ok, Full, Closed };

    explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}

    // Waits at most `timeout` for room (zero: not at all). Full: no room came; Closed: the
    // queue was closed and `item` is dropped.
    PushResult push(T item, std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
        std::unique_lock lock(mutex_);
        if (!room_.wait_for(lock, timeout, [&] { return items_.size() < capacity_ || closed_; }))
            return PushResult::Full;
        if (closed_) return PushResult::Closed;
        items_.push_back(std::move(item));
        ready_.notify_one();
        return PushResult::Ok;
    }

    // The next item, waiting up to `timeout` for one; nothing after the timeout, or at once
    // when the queue is closed and empty.
    std::optional<T> pop(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
        if (items_.empty()) return std::nullopt;
        T item = std::move(items_.front());
        items_.pop_front();
        room_.notify_one();
        return item;
    }

    // The first item `match` accepts, taken out of its place in line; nothing if none does.
    template <class Match>
    std::optional<T> take_first(Match&& match) {
        std::lock_guard lock(mutex_);
        for (auto it = items_.begin(); it != items_.end(); ++it) {
            if (!match(*it)) continue;
            T item = std::move(*it);
            items_.erase(it);
            room_.notify_one();
            return item;
        }
        return std::nullopt;
    }

    // Every item available now, waiting up to `timeout` for the first one.
    std::vector<T> pop_all(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        ready_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
        std::vector<T> out(std::make_move_iterator(items_.begin()), std::make_move_iterator(items_.end()));
        items_.clear();
        room_.notify_all();
        return out;
    }

    // Pushes fail (Closed) from now on, without waiting; queued items are still handed out.
    void close() {
        std::lock_guard lock(mutex_);
        closed_ = true;
        ready_.notify_all();
        room_.notify_all();
    }
    bool closed() const {
        std::lock_guard lock(mutex_);
        return closed_;
    }
    size_t size() const {
        std::lock_guard lock(mutex_);
        return items_.size();
    }
    size_t capacity() const { return capacity_; }

    // Calls fn(item) for each queued item, first in line first, under the lock.
    template <class Fn>
    void for_each(Fn&& fn) const {
        std::lock_guard lock(mutex_);
        for (const T& item : items_) fn(item);
    }

private:
    mutable std::mutex mutex_;
    std::condition_variable ready_, room_;
    std::deque<T> items_;
    size_t capacity_;
    bool closed_ = false;
};

}  // namespace k3::server
