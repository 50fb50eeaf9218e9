// A TCP port for HAProxy's agent-check (docs/operations.md, "Several daemons behind a load
// balancer"): each connection gets one line (the reply function's, e.g. "ready 70%\n") and is
// closed. Its own thread, so a busy HTTP side never delays it; nothing is read from the peer.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace k3::server {

class AgentPort {
public:
    explicit AgentPort(std::function<std::string()> reply) : reply_(std::move(reply)) {}
    ~AgentPort() { stop(); }
    AgentPort(const AgentPort&) = delete;
    AgentPort& operator=(const AgentPort&) = delete;

    // Binds host:port (0: any free port) and starts answering; returns the port. Throws
    // k3::Error (Usage) when the address cannot be bound.
    int start(const std::string& host, int port);
    void stop();

private:
    void loop();

    std::function<std::string()> reply_;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    std::atomic<bool> running_{false};
    std::thread thread_;
};

}  // namespace k3::server
