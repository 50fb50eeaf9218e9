#include "ops/agent_port.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "http/socket_address.h"
#include "k3/error.h"

namespace k3::server {

int AgentPort::start(const std::string& host, int port) {
    // The same listening socket as the HTTP server's (http/socket_address.h): non-blocking, which
    // loop() suits since it polls before each accept.
    errno = 0;
    const int fd = listen_socket(host, port);
    if (fd < 0) {
        std::string why = "--agent-port: cannot listen on " + host + ":" + std::to_string(port);
        if (errno != 0) why += std::string(": ") + std::strerror(errno);
        throw Error(ErrorKind::Usage, why);
    }
    std::string bound_addr;
    int bound_port = port;
    peer_address(fd, /*local=*/true, bound_addr, bound_port);
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
