#include "load_figures.h"

#include <algorithm>
#include <cmath>

#include "ops/metrics.h"

namespace k3::server {

double LoadFigures::pressure() const {
    const double requests = double(running + queued) / double(2 * std::max<int64_t>(1, parallel));
    const double context = double(context_in_use) / double(std::max<int64_t>(1, context_capacity));
    return std::clamp(std::max(requests, context), 0.0, 1.0);
}

int LoadFigures::weight_percent() const {
    const int steps = int(std::floor((1.0 - pressure()) * 10.0 + 1e-9));
    return std::max(1, steps * 10);
}

LoadFigures load_figures(const ServerState& state) {
    LoadFigures f;
    const LiveFigures::Held held = state.live.held();
    f.queued = int64_t(state.queue.size());
    f.queue_capacity = int64_t(state.queue.capacity());
    f.running = held.requests;
    f.parallel = std::max(1, state.config.parallel);
    f.context_in_use = held.context_tokens;
    f.context_capacity = std::max<int64_t>(1, int64_t(f.parallel) * std::max(1, state.limits.n_ctx));
    return f;
}

std::string render_load_figures(const LoadFigures& f) {
    std::string out;
    auto gauge = [&out](const char* name, const char* help, int64_t value) {
        write_metric(out, name, "gauge", help, double(value));
    };
    gauge("k3serve:requests_queued", "Requests waiting for a slot (at most --queue-depth).", f.queued);
    gauge("k3serve:requests_running", "Requests the engine worker runs now (at most --parallel).", f.running);
    gauge("k3serve:context_tokens_in_use", "Context (KV rows and state) held by the running requests, in tokens.",
          f.context_in_use);
    gauge("k3serve:context_tokens_capacity", "Context the slots can hold: --parallel x the context size, in tokens.",
          f.context_capacity);
    gauge("k3serve:load_weight_percent",
          "The weight the agent port reports: 100 x (1 - max(requests / (2 x parallel), context in use / capacity)), "
          "in steps of 10, at least 1.",
          f.weight_percent());
    // The same figures under the names the Gateway API Inference Extension's endpoint picker
    // reads by default (vLLM's), so it balances k3serve replicas with no metric mapping
    // (docs/operations.md "Several daemons behind a load balancer").
    gauge("vllm:num_requests_waiting", "Requests waiting for a slot (k3serve:requests_queued).", f.queued);
    gauge("vllm:num_requests_running", "Requests running now (k3serve:requests_running).", f.running);
    write_metric(out, "vllm:kv_cache_usage_perc", "gauge",
                 "Share of the slots' context in use, 0..1 (k3serve:context_tokens_in_use / _capacity).",
                 double(f.context_in_use) / double(std::max<int64_t>(1, f.context_capacity)));
    return out;
}

std::string agent_reply(const ServerState& state) {
    if (state.phase.load() != Phase::Ready) return "drain\n";
    return "ready " + std::to_string(load_figures(state).weight_percent()) + "%\n";
}

}  // namespace k3::server
