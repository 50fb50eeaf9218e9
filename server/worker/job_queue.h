// The bounded queue between HTTP threads and the engine worker. A full queue is an answer
// (503 + Retry-After), not a wait, so pushes here never wait for room; a closed queue
// (shutdown) refuses new jobs and lets the worker drain what is left.
#pragma once
#include <chrono>
#include <memory>
#include <vector>

#include "worker/bounded_queue.h"
#include "worker/job.h"

namespace k3::server {

class JobQueue : public BoundedQueue<std::shared_ptr<Job>> {
public:
    using BoundedQueue::BoundedQueue;

    // How long each waiting job has waited, first in line first (for /v1/status).
    std::vector<double> waiting_seconds() const {
        std::vector<double> out;
        const auto now = Clock::now();
        for_each([&](const std::shared_ptr<Job>& job) {
            out.push_back(std::chrono::duration<double>(now - job->enqueued_at).count());
        });
        return out;
    }

    // Cancels every job still waiting (shutdown after the drain timeout).
    void cancel_all(CancelReason reason) {
        for_each([&](const std::shared_ptr<Job>& job) { job->request_cancel(reason); });
    }
};

}  // namespace k3::server
