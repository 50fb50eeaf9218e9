// The one list that names the engine's counters (EngineStats, k3/engine.h). The run report
// (`k3serve run --report`) and /metrics both walk visit_stats(), so a new counter is one field in
// EngineStats and one line in visit_stats (engine/api/stats.cpp).
#pragma once
#include <functional>

namespace k3 {

struct EngineStats;  // k3/engine.h: the counters themselves

// One counter, or a figure derived from the counters, as the outputs name it.
struct StatField {
    const char* key;     // run report key ("expert_hits")
    const char* metric;  // /metrics name ("k3serve:expert_cache_hits_total")
    const char* type;    // Prometheus type: "counter" or "gauge"
    const char* help;    // /metrics help text
    double value;
    bool whole;          // a count (the report writes it as an integer)
};

// Calls `visit` for every field, in the order /metrics lists them.
void visit_stats(const EngineStats& stats, const std::function<void(const StatField&)>& visit);

}  // namespace k3
