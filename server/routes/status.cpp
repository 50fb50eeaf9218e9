#include "routes/status.h"

#include <regex>

#include "ops/slots_json.h"

namespace k3::server {

using nlohmann::json;

namespace {

const char* phase_name(Phase p) {
    switch (p) {
        case Phase::Loading: return "loading";
        case Phase::Ready: return "ready";
        case Phase::Draining: return "draining";
        case Phase::Failed: return "failed";
    }
    return "unknown";
}

// "loading trunk 37%" -> 0.37; loading lines without a percentage -> null.
json progress_of(const std::string& status) {
    static const std::regex percent(R"((\d+(?:\.\d+)?)\s*%)");
    std::smatch m;
    if (std::regex_search(status, m, percent)) return std::stod(m[1]) / 100.0;
    return nullptr;
}

bool loaded_phase(Phase p) { return p == Phase::Ready || p == Phase::Draining; }

double ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

}  // namespace

json status_json(const ServerState& state, uint64_t since) {
    Phase phase = state.phase.load();
    std::string status = state.status();
    json j = {{"phase", phase_name(phase)}, {"status", status}, {"progress", progress_of(status)}};

    json waiting = json::array();
    for (double s : state.queue.waiting_seconds()) waiting.push_back(s);
    j["queue"] = {{"depth", waiting.size()}, {"capacity", state.queue.capacity()}, {"waiting_s", waiting}};

    EngineStats e = state.metrics.engine_stats();
    j["engine"] = {{"tokens_evaluated", e.tokens_evaluated},
                   {"trunk_bytes_read", e.trunk_bytes_read},
                   {"expert_bytes_read", e.expert_bytes_read},
                   {"expert_requests", e.expert_requests},
                   {"expert_hits", e.expert_hits},
                   {"expert_hit_ratio", ratio(double(e.expert_hits), double(e.expert_requests))},
                   {"io_seconds", e.io_seconds},
                   {"compute_seconds", e.compute_seconds},
                   {"io_share", ratio(e.io_seconds, e.io_seconds + e.compute_seconds)},
                   {"pinned_layers", e.pinned_layers},
                   {"passes", e.passes},
                   {"pass_tokens_max", e.pass_tokens_max},
                   {"trunk_layer_reads", e.trunk_layer_reads},
                   {"expert_read_waits", e.expert_read_waits},
                   {"pass_lent_bytes", e.pass_lent_bytes},
                   {"pass_unpinned_layers", e.pass_unpinned_layers},
                   {"lm_head_reads", e.lm_head_reads}};

    const WeightsLoad w = state.weights_load();
    j["weights"] = {{"loaded_bytes", w.loaded_bytes},
                    {"total_bytes", w.total_bytes},
                    {"loading", loaded_phase(phase) && !w.complete()},
                    {"failures", w.failures}};

    // The model facts are written before the phase turns Ready: not read earlier.
    bool loaded = phase == Phase::Ready || phase == Phase::Draining;
    if (loaded) j["model"] = state.limits.model_name;
    ProcessMemory mem = read_process_memory();
    j["memory"] = {{"rss_bytes", mem.rss_bytes},
                   {"peak_rss_bytes", mem.peak_rss_bytes},
                   {"locked_bytes", mem.locked_bytes},
                   {"plan_bytes", loaded ? json(state.info.memory_plan_bytes) : json(nullptr)},
                   {"plan", loaded ? json(state.info.memory_plan) : json(nullptr)}};

    json requests = json::object();
    for (RequestOutcome outcome : {RequestOutcome::Ok, RequestOutcome::Cancelled, RequestOutcome::Dropped,
                                   RequestOutcome::Deadline, RequestOutcome::Error})
        requests[outcome_label(outcome)] = state.metrics.requests(outcome);
    j["requests"] = requests;

    json live = state.live.to_json(since);
    for (auto& [key, value] : live.items()) j[key] = value;
    return j;
}

json slots_status_json(const ServerState& state, uint64_t partition) {
    json j = slots_json(state.board.view(), partition);
    for (json& slot : j["slots"])
        if (slot.contains("job_id")) slot["prefill"] = state.live.prefill_json(slot["job_id"].get<uint64_t>());
    return j;
}

}  // namespace k3::server
