// Finding out that an HTTP client went away while its request is still running. cpp-httplib
// 0.11 gives a handler no socket and no "connection closed" call, so the handler looks its
// connection up once (the socket whose local and peer addresses match the request) and then
// polls it for a peer hang-up (POLLRDHUP/POLLHUP/POLLERR) without reading from it. This lets
// a client that disconnects during a long prefill, or while queued, cancel its job at once
// instead of at the next write.
#pragma once
#include <string>

namespace k3::server {

class ConnectionProbe {
public:
    // Looks the socket up; if it cannot be found, gone() is always false (writes still fail).
    ConnectionProbe(const std::string& remote_addr, int remote_port, int local_port);
    bool gone() const;
    bool found() const { return fd_ >= 0; }

private:
    int fd_ = -1;
};

}  // namespace k3::server
