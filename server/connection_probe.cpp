#include "connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace k3::server {

namespace {

bool address_is(const sockaddr_storage& ss, const std::string& addr, int port) {
    char buf[INET6_ADDRSTRLEN] = {};
    int p = -1;
    if (ss.ss_family == AF_INET) {
        auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
        p = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
        p = ntohs(a->sin6_port);
    } else {
        return false;
    }
    return p == port && (addr.empty() || addr == buf);
}

}  // namespace

ConnectionProbe::ConnectionProbe(const std::string& remote_addr, int remote_port, int local_port) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return;
    while (dirent* e = readdir(dir)) {
        char* end = nullptr;
        long fd = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
        struct stat st;
        if (fstat(int(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        sockaddr_storage peer{}, local{};
        socklen_t peer_len = sizeof peer, local_len = sizeof local;
        if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
        if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
        if (address_is(peer, remote_addr, remote_port) && address_is(local, "", local_port)) {
            fd_ = int(fd);
            break;
        }
    }
    closedir(dir);
}

bool ConnectionProbe::gone() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace k3::server
