// A plain TCP socket to 127.0.0.1 that a test drives byte by byte: for clients a library would
// never be (one that stops reading, one that never sends, one that sends a head and waits), and
// for framing a library would fix. Reads wait on the socket (poll), bounded against hangs only.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace k3::test {

class LoopbackSocket {
public:
    // receive_buffer > 0 shrinks the kernel's receive buffer before connecting, so that a client
    // that stops reading holds little in flight. `from` is the source address, another of
    // 127.0.0.0/8 to stand for another client (the daemon caps connections per address).
    explicit LoopbackSocket(int port, int receive_buffer = 0, const char* from = nullptr) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        if (receive_buffer > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
        if (from) {
            sockaddr_in local{};
            local.sin_family = AF_INET;
            ::inet_pton(AF_INET, from, &local.sin_addr);
            if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
                ::close(fd_);
                fd_ = -1;
                return;
            }
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    ~LoopbackSocket() { close(); }
    LoopbackSocket(const LoopbackSocket&) = delete;
    LoopbackSocket& operator=(const LoopbackSocket&) = delete;

    bool ok() const { return fd_ >= 0; }
    void close() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }
    // False once the server has closed or reset the connection.
    bool send(const std::string& s) { return fd_ >= 0 && ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == ssize_t(s.size()); }
    // Half-closes: the server reads end of input, the socket still receives.
    void shutdown_write() {
        if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
    }
    // Reads until `needle` shows up, the peer closes, or `ms` pass (a bound against hangs).
    // Returns everything received so far.
    const std::string& read_until(const std::string& needle, int ms = 20000) {
        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (received_.find(needle) == std::string::npos && !closed_ && std::chrono::steady_clock::now() < until) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) continue;
            char buf[8192];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) closed_ = true;
            else received_.append(buf, size_t(n));
        }
        return received_;
    }
    // Reads until the peer closes (or `ms` pass).
    const std::string& read_to_close(int ms = 20000) { return read_until(std::string(1, '\0') + "never", ms); }
    bool closed() const { return closed_; }
    const std::string& received() const { return received_; }

    // The status of the first final (non-1xx) answer in `response`, -1 if none.
    static int status_of(const std::string& response) {
        size_t pos = 0;
        while (response.compare(pos, 5, "HTTP/") == 0) {
            int status = std::atoi(response.c_str() + pos + 9);
            if (status >= 200) return status;
            size_t end = response.find("\r\n\r\n", pos);
            if (end == std::string::npos) return status;
            pos = end + 4;
        }
        return -1;
    }

private:
    int fd_ = -1;
    std::string received_;
    bool closed_ = false;
};

// A POST with a JSON body, as bytes.
inline std::string json_post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra_headers +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// A streamed request on a connection of its own, read to its end ("data: [DONE]", bounded against
// hangs) on a thread, which then sets `done`: the client of a test that reads the daemon's
// state meanwhile.
inline std::thread stream_to_end(int port, std::string path, std::string body, std::atomic<bool>& done) {
    return std::thread([port, path = std::move(path), body = std::move(body), &done] {
        LoopbackSocket client(port);
        client.send(json_post(path, body));
        client.read_until("data: [DONE]", 600000);
        done = true;
    });
}

}  // namespace k3::test
