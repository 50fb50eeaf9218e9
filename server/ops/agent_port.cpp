#include "ops/agent_port.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "k3/error.h"

namespace k3::server {

int AgentPort::start(const std::string& host, int port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const std::string service = std::to_string(port);
    if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 || !res)
        throw Error(ErrorKind::Usage, "--agent-port: cannot resolve '" + host + "'");
    int fd = ::socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
        const std::string why = std::strerror(errno);
        if (fd >= 0) ::close(fd);
        ::freeaddrinfo(res);
        throw Error(ErrorKind::Usage, "--agent-port: cannot listen on " + host + ":" + service + ": " + why);
    }
    ::freeaddrinfo(res);
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    const int bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    if (::pipe2(wake_, O_CLOEXEC) != 0) {
        ::close(fd);
        throw Error(ErrorKind::Usage, "--agent-port: pipe: " + std::string(std::strerror(errno)));
    }
    listen_fd_ = fd;
    running_ = true;
    thread_ = std::thread([this] { loop(); });
    return bound_port;
}

void AgentPort::stop() {
    if (!running_.exchange(false)) return;
    char c = 1;
    ssize_t ignored = ::write(wake_[1], &c, 1);
    (void)ignored;
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
    listen_fd_ = wake_[0] = wake_[1] = -1;
}

void AgentPort::loop() {
    while (running_.load()) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
        if (fds[1].revents) return;
        if (!(fds[0].revents & POLLIN)) continue;
        int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) continue;
        // One short line into an empty socket buffer: a non-blocking send takes it whole.
        const std::string line = reply_();
        ssize_t ignored = ::send(c, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)ignored;
        ::shutdown(c, SHUT_WR);
        ::close(c);
    }
}

}  // namespace k3::server
