#include "io/read_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace k3::io {

namespace {

// The chunks of one request count down here; the last one to finish reports.
struct Pending {
    ReadRequest request;
    std::atomic<int> remaining{0};
    std::mutex mu;
    Status first_failure;
    int64_t payload_delta = 0;

    void finish_chunk(const Status& s) {
        if (!s.ok()) {
            std::lock_guard lock(mu);
            if (first_failure.ok()) first_failure = s;
        }
        if (remaining.fetch_sub(1) == 1) {
            Status result;
            {
                std::lock_guard lock(mu);
                result = first_failure;
            }
            const uint8_t* payload = result.ok() ? request.buf + payload_delta : nullptr;
            if (request.done) request.done(result, payload);
        }
    }
};

}  // namespace

ReadPool::ReadPool(int threads) {
    threads = std::max(1, threads);
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { worker(); });
}

ReadPool::~ReadPool() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ReadPool::worker() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
            if (jobs_.empty()) return;  // stopping and drained
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        job();
    }
}

void ReadPool::submit(std::vector<ReadRequest> requests) {
    std::sort(requests.begin(), requests.end(), [](const ReadRequest& a, const ReadRequest& b) {
        if (a.file != b.file) return a.file->path() < b.file->path();
        return a.offset < b.offset;
    });
    std::vector<std::function<void()>> jobs;
    for (auto& r : requests) {
        auto pending = std::make_shared<Pending>();
        int64_t lo = 0, len = 0;
        r.file->window(r.offset, r.nbytes, &lo, &len);
        pending->payload_delta = r.offset - lo;
        int64_t required = r.offset + r.nbytes - lo;
        if (int64_t(r.cap) < len) {
            Status s = io_error(r.file->path(), r.offset, r.nbytes, "buffer smaller than the read window");
            if (r.done) r.done(s, nullptr);
            continue;
        }
        int n_chunks = int((len + kReadChunk - 1) / kReadChunk);
        pending->remaining = n_chunks;
        pending->request = std::move(r);
        for (int c = 0; c < n_chunks; ++c) {
            int64_t part_lo = int64_t(c) * kReadChunk;
            int64_t part_len = std::min(kReadChunk, len - part_lo);
            int64_t part_required = std::clamp(required - part_lo, int64_t(0), part_len);
            jobs.push_back([pending, lo, part_lo, part_len, part_required] {
                const ReadRequest& q = pending->request;
                Status s = q.file->read_window_part(q.buf + part_lo, lo + part_lo, part_len, part_required);
                pending->finish_chunk(s);
            });
        }
    }
    {
        std::lock_guard lock(mu_);
        for (auto& j : jobs) jobs_.push_back(std::move(j));
    }
    cv_.notify_all();
}

Status ReadPool::read_all(std::vector<ReadRequest> requests) {
    struct Latch {
        std::mutex mu;
        std::condition_variable cv;
        size_t remaining = 0;
        std::vector<Status> results;
    };
    auto latch = std::make_shared<Latch>();
    latch->remaining = requests.size();
    latch->results.resize(requests.size());
    // Order the failures by offset so the reported one does not depend on thread timing.
    std::vector<size_t> order(requests.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (requests[a].file != requests[b].file) return requests[a].file->path() < requests[b].file->path();
        return requests[a].offset < requests[b].offset;
    });
    for (size_t rank = 0; rank < order.size(); ++rank) {
        auto& r = requests[order[rank]];
        auto user_done = std::move(r.done);
        r.done = [latch, rank, user_done](const Status& s, const uint8_t* payload) {
            if (user_done) user_done(s, payload);
            std::lock_guard lock(latch->mu);
            latch->results[rank] = s;
            if (--latch->remaining == 0) latch->cv.notify_all();
        };
    }
    submit(std::move(requests));
    std::unique_lock lock(latch->mu);
    latch->cv.wait(lock, [&] { return latch->remaining == 0; });
    for (const auto& s : latch->results)
        if (!s.ok()) return s;
    return Status::Ok();
}

}  // namespace k3::io
