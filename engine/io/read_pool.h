// Several reads in flight: a small pool of reader threads, each blocked in pread on its own
// part of the work, so the device sees a queue depth of `threads`. A request is one run of one
// file; requests handed over together are issued in (file, offset) order, and runs larger than
// kReadChunk are split into aligned chunks that go to different threads. The pool only moves
// bytes: what a buffer means, and when it may be reused, is the caller's business.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "io/file.h"

namespace k3::io {

inline constexpr int64_t kReadChunk = int64_t(8) << 20;

struct ReadRequest {
    const File* file = nullptr;
    int64_t offset = 0;
    int64_t nbytes = 0;
    uint8_t* buf = nullptr;     // aligned, at least window_capacity(nbytes) bytes
    size_t cap = 0;
    // Called exactly once, on a reader thread, when every chunk has finished: the status and,
    // on success, where byte `offset` landed in buf.
    std::function<void(const Status&, const uint8_t* payload)> done;
};

class ReadPool {
public:
    explicit ReadPool(int threads);
    ~ReadPool();
    ReadPool(const ReadPool&) = delete;
    ReadPool& operator=(const ReadPool&) = delete;

    int threads() const { return int(workers_.size()); }

    // Queues the requests (sorted by file and offset first) and returns at once.
    void submit(std::vector<ReadRequest> requests);

    // Issues the requests and waits for all of them; returns the first failure (in offset
    // order) or Ok. Each request's own `done`, if set, is still called.
    Status read_all(std::vector<ReadRequest> requests);

private:
    void worker();

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace k3::io
