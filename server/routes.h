// The HTTP front end (the only file that includes httplib.h): routes, authentication, CORS,
// limits, the loading/draining gate, OpenAI responses and the SSE pump. Handlers run on
// httplib's thread pool; they parse, validate, tokenize, enqueue a Job and stream its channel.
#pragma once
#include <memory>
#include <string>

#include "server_state.h"

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
