// Finding out that an HTTP client went away while its request is still running (a long
// prefill, or a place in the queue), so that its job is cancelled at once instead of at the
// next write. The handler thread's connection comes from HttpServer (current_connection()).
//
// A FIN from the client is ambiguous: it closed the socket, or it only half-closed after
// sending its request and still waits for the answer. So a FIN before the response head went
// out is answered with an interim "100 Continue" (clients skip 1xx answers): a client that is
// still there reads it, a closed socket answers with a reset, which the next look sees. After
// the head went out, the stream's own writes and pings find a closed socket. HTTP/1.0 has no
// interim answers: there a FIN counts as gone.
#pragma once
#include <string>

#include "http/http_server.h"

namespace k3::server {

class ConnectionProbe {
public:
    // The calling handler thread's connection, if its peer port is `remote_port`; otherwise
    // gone() is always false (writes still fail).
    ConnectionProbe(const std::string& remote_addr, int remote_port, int local_port);
    bool gone() const;
    bool found() const { return connection_ != nullptr; }

private:
    CurrentConnection* connection_ = nullptr;
};

}  // namespace k3::server
