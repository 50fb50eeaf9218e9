// What the daemon records of each generated token, in one call from the worker: /metrics' time
// to first token (from the job's arrival) or the latency since the job's previous token, the
// engine's counters in /metrics, and /v1/status's live figures (the token's seconds and the
// bytes read for it). The worker is the only thread that may ask the engine for its counters,
// so the observer runs on it (docs/architecture.md, "One place for each concept").
#pragma once
#include "k3/engine.h"
#include "ops/metrics.h"
#include "worker/job.h"
#include "worker/live_figures.h"

namespace k3::server {

class TokenObserver {
public:
    TokenObserver(const Engine& engine, Metrics& metrics, LiveFigures* live)
        : engine_(engine), metrics_(metrics), live_(live) {}

    // A token of `job` was produced at `now`: its first (of all its choices), or one after the
    // token produced at `previous`.
    void token(const Job& job, bool first, Clock::time_point previous, Clock::time_point now);

private:
    const Engine& engine_;
    Metrics& metrics_;
    LiveFigures* live_;  // null: no live figures (nor per-token engine counters)
};

}  // namespace k3::server
