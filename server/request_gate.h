// What every request passes before its route: the Host check against DNS rebinding, CORS, the
// JSON-only rule for POST bodies, the API key, and the loading/failed gate (docs/operations.md
// "Cross-site protection", "Connections, limits and slow clients").
#pragma once
#include <string>
#include <vector>

#include "http/http_server.h"
#include "server_state.h"

namespace k3::server {

// Paths of the embedded web UI ("/" and its files): public, answered while loading.
bool is_ui_path(const std::string& path);

class RequestGate {
public:
    explicit RequestGate(ServerState& state);
    // Handled: `res` is the refusal (or the CORS preflight's answer); Unhandled: route it.
    HttpServer::HandlerResponse check(const httplib::Request& req, httplib::Response& res);

private:
    void add_cors(const httplib::Request& req, httplib::Response& res) const;
    bool authorized(const httplib::Request& req) const;
    const DaemonConfig& config() const { return state_.config; }

    ServerState& state_;
    std::vector<std::string> allowed_hosts_;  // empty = any Host
};

}  // namespace k3::server
