#include "worker/token_observer.h"

namespace k3::server {

void TokenObserver::token(const Job& job, bool first, Clock::time_point previous, Clock::time_point now) {
    if (first)
        metrics_.observe_ttft(std::chrono::duration<double>(now - job.enqueued_at).count());
    else
        metrics_.observe_token_latency(std::chrono::duration<double>(now - previous).count());
    if (!live_) return;
    const EngineStats stats = engine_.stats();
    metrics_.set_engine_stats(stats);
    live_->token(job.id, stats);
}

}  // namespace k3::server
