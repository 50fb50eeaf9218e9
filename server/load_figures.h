// The load figures for whoever balances several daemons (docs/operations.md, "Several daemons
// behind a load balancer"): requests queued and running, and the context they hold, as
// /metrics gauges and as one HAProxy agent-check line (ops/agent_port.h) whose weight falls as
// the daemon fills. Both read the same snapshot, so the weight can be recomputed from the
// gauges.
#pragma once
#include <cstdint>
#include <string>

#include "routes/server_state.h"

namespace k3::server {

struct LoadFigures {
    int64_t queued = 0, queue_capacity = 0;
    int64_t running = 0, parallel = 1;
    int64_t context_in_use = 0, context_capacity = 1;  // tokens; capacity = --parallel x n_ctx

    // How full the daemon is, 0..1: the larger of the requests it holds (running + queued)
    // against twice --parallel (all slots busy with as many waiting is full) and the context
    // in use against its capacity.
    double pressure() const;
    // The agent weight: 100% x (1 - pressure), in steps of 10% (so it does not move with every
    // token), at least 1% (0% would stop new requests to it, as "drain" does).
    int weight_percent() const;
};

LoadFigures load_figures(const ServerState& state);

// The k3serve:requests_queued, k3serve:requests_running, k3serve:context_tokens_in_use,
// k3serve:context_tokens_capacity and k3serve:load_weight_percent series.
std::string render_load_figures(const LoadFigures& f);

// The agent-check answer: "ready <weight>%" while serving; "drain" while loading, draining or
// failed (existing connections finish, new requests go elsewhere).
std::string agent_reply(const ServerState& state);

}  // namespace k3::server
