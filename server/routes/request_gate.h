// What every request passes before its route: the Host check against DNS rebinding, CORS, the
// JSON-only rule for POST bodies, the API key, and the loading/failed gate (docs/operations.md
// "Cross-site protection", "Connections, limits and slow clients").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "http/http_server.h"
#include "routes/server_state.h"

namespace k3::server {

// Paths of the embedded web UI ("/" and its files): public, answered while loading.
bool is_ui_path(const std::string& path);

// The API key a request presents: "Authorization: Bearer K", else "X-Api-Key: K" (empty: none).
std::string presented_api_key(const HttpRequest& req);

// The prompt cache partition a request's states belong to (engine.h Session::set_cache_partition):
// 0 when the daemon has no keys, else a hash (FNV-1a 64, k3/fnv1a.h) of the configured key the
// request presents, never 0. Not the key's place in the list, which moves when keys are added or
// removed and would hand one key's states on disk to another after a restart; and not the key
// itself, which the cache (and its disk tier) must not hold. docs/operations.md "The prompt cache and API keys".
uint64_t prompt_cache_partition(const DaemonConfig& config, const HttpRequest& req);

class RequestGate {
public:
    explicit RequestGate(ServerState& state);
    // Handled: `res` is the refusal (or the CORS preflight's answer); Unhandled: route it.
    HttpServer::HandlerResponse check(const HttpRequest& req, HttpResponse& res);

private:
    void add_cors(const HttpRequest& req, HttpResponse& res) const;
    bool authorized(const HttpRequest& req) const;
    const DaemonConfig& config() const { return state_.config; }

    ServerState& state_;
    std::vector<std::string> allowed_hosts_;  // empty = any Host
};

}  // namespace k3::server
