// The sockets under the HTTP server: a non-blocking listening socket for a host and port, and the
// numeric address and port at either end of a connected one.
#pragma once
#include <string>

namespace k3::server {

// Binds and listens (backlog 1024, SO_REUSEADDR, non-blocking, close-on-exec) on the first
// address `host` resolves to that accepts it; -1 if none does.
int listen_socket(const std::string& host, int port);

// The numeric address and port of this end (`local`) or the peer of `fd`; unchanged on failure.
void peer_address(int fd, bool local, std::string& addr, int& port);

}  // namespace k3::server
