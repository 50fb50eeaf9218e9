// The routes that describe the daemon: GET /health, /v1/models (and /v1/models/{id}), /props and
// /v1/status (docs/api.md).
#pragma once
#include "http/message.h"
#include "routes/server_state.h"

namespace k3::server {

class InfoRoutes {
public:
    explicit InfoRoutes(ServerState& s) : state_(s) {}

    void health(const HttpRequest& req, HttpResponse& res);
    void models(HttpResponse& res);
    void model(const HttpRequest& req, HttpResponse& res);
    void props(HttpResponse& res);
    void status(const HttpRequest& req, HttpResponse& res);

private:
    const DaemonConfig& config() const { return state_.config; }

    ServerState& state_;
};

}  // namespace k3::server
