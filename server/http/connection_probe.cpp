#include "http/connection_probe.h"

#include <poll.h>
#include <sys/socket.h>

namespace k3::server {

ConnectionProbe::ConnectionProbe(const std::string&, int remote_port, int) {
    CurrentConnection* c = current_connection();
    if (c && c->fd >= 0 && c->remote_port == remote_port) connection_ = c;
}

bool ConnectionProbe::gone() const {
    // Only on the thread (and during the request) the probe was made for.
    if (!connection_ || current_connection() != connection_) return false;
    CurrentConnection& c = *connection_;
    pollfd p{c.fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (!(p.revents & POLLRDHUP)) return false;
    if (c.http10) return true;
    if (!c.committed && !c.probed) {
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t ignored = ::send(c.fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)ignored;
        c.probed = true;
    }
    return false;
}

}  // namespace k3::server
