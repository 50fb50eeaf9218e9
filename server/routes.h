// Router: the daemon's routes on the HTTP server (http/http_server.h), in one table: every
// request passes the RequestGate (host, CORS, JSON bodies, key, loading), then its route
// (info_routes, token_routes, web_ui_route, generation_route), inside one wrapper that turns
// anything thrown into an error in the API's shape (routes/route_reply.h). Handlers run on the HTTP
// server's handler threads; they parse, validate, tokenize, enqueue a Job and stream its channel.
#pragma once
#include <memory>
#include <string>

#include "routes/server_state.h"

namespace k3::server {

class Router {
public:
    explicit Router(ServerState& state);
    ~Router();

    // Binds the listening socket; returns the port (useful with port 0). Throws k3::Error(Runtime).
    int bind(const std::string& host, int port);
    // Serves on a background thread until stop(). Call after bind().
    void start();
    // Stops accepting and waits for the connection threads to finish.
    void stop();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace k3::server
