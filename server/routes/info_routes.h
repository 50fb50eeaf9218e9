// The routes that describe the daemon: GET /health, /v1/models (and /v1/models/{id}), /props and
// /v1/status (docs/api.md).
#pragma once
#include <httplib.h>

#include "routes/server_state.h"

namespace k3::server {

class InfoRoutes {
public:
    explicit InfoRoutes(ServerState& s) : state_(s) {}

    void health(const httplib::Request& req, httplib::Response& res);
    void models(httplib::Response& res);
    void model(const httplib::Request& req, httplib::Response& res);
    void props(httplib::Response& res);
    void status(const httplib::Request& req, httplib::Response& res);

private:
    const DaemonConfig& config() const { return state_.config; }

    ServerState& state_;
};

}  // namespace k3::server
