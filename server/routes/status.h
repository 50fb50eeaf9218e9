// GET /v1/status: the daemon's live figures as one JSON object, for the web UI (polled about once
// a second) and for people with curl. Unlike /metrics it carries the current request, the last
// finished one and the recent per-token samples the UI charts. Shape: docs/web-ui.md.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "routes/server_state.h"

namespace k3::server {

// `since`: only token samples with a larger seq (0 = all that are kept).
nlohmann::json status_json(const ServerState& state, uint64_t since);

// GET /slots: the worker's last published board (ops/slots_json.h), each busy slot with its
// request's prefill progress as of now (the board is published between steps; the progress
// moves inside a prompt chunk too). Cache entries of `partition` only (prompt_cache_partition).
nlohmann::json slots_status_json(const ServerState& state, uint64_t partition);

}  // namespace k3::server
