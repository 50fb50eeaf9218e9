#include "http/response_writer.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>

namespace k3::server {

namespace {
constexpr size_t kCopiedBody = 64 * 1024;
}  // namespace

std::string response_head(const HttpResponse& res, int version_minor, bool chunked, size_t length, bool keep) {
    std::string head = std::string(version_minor == 0 ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(res.status) + " " +
                       reason_phrase(res.status) + "\r\n";
    for (const auto& [k, v] : res.headers) {
        // Values are ours, but never let a CR/LF split a header.
        if (k.find_first_of("\r\n") != std::string::npos || v.find_first_of("\r\n") != std::string::npos) continue;
        head += k + ": " + v + "\r\n";
    }
    if (chunked) head += "Transfer-Encoding: chunked\r\n";
    else if (length != size_t(-1)) head += "Content-Length: " + std::to_string(length) + "\r\n";
    head += keep ? (version_minor == 0 ? "Connection: keep-alive\r\n" : "") : "Connection: close\r\n";
    head += "\r\n";
    return head;
}

const char* reason_phrase(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 417: return "Expectation Failed";
        case 431: return "Request Header Fields Too Large";
        case 499: return "Client Closed Request";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
    }
}

bool write_all(int fd, const char* data, size_t size, double timeout_s) {
    while (size > 0) {
        ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            data += n;
            size -= size_t(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            pollfd p{fd, POLLOUT, 0};
            int rc = ::poll(&p, 1, int(timeout_s * 1000));
            if (rc <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
            continue;
        }
        return false;
    }
    return true;
}

bool write_response(int fd, int version_minor, bool head_only, HttpResponse& res, bool& keep, double timeout,
                    CurrentConnection& current) {
    if (!res.streamed()) {
        std::string out = response_head(res, version_minor, false, res.body.size(), keep);
        current.committed = true;
        if (head_only) return write_all(fd, out.data(), out.size(), timeout);
        // A small body goes in the head's packet; a large one (a whole answer of many MB) is
        // written from where it is, not copied behind the head (openai/choices_responder.h).
        if (res.body.size() <= kCopiedBody) {
            out += res.body;
            return write_all(fd, out.data(), out.size(), timeout);
        }
        return write_all(fd, out.data(), out.size(), timeout) && write_all(fd, res.body.data(), res.body.size(), timeout);
    }
    // A streamed body: chunked for HTTP/1.1; an HTTP/1.0 client cannot decode chunks, so it
    // gets the raw bytes and the end of the body is the end of the connection. HEAD gets
    // the head alone.
    bool chunked = version_minor == 1;
    if (head_only) {
        std::string head = response_head(res, version_minor, chunked, size_t(-1), keep);
        current.committed = true;
        res.set_stream_complete(false);
        return write_all(fd, head.data(), head.size(), timeout);
    }
    if (!chunked) keep = false;
    std::string head = response_head(res, version_minor, chunked, size_t(-1), keep);
    current.committed = true;
    bool ok = write_all(fd, head.data(), head.size(), timeout);
    bool done = false;
    StreamSink sink;
    sink.write = [&](const char* d, size_t n) {
        if (!ok || n == 0) return ok;
        if (chunked) {
            char size_line[32];
            int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", n);
            ok = write_all(fd, size_line, size_t(len), timeout) && write_all(fd, d, n, timeout) &&
                 write_all(fd, "\r\n", 2, timeout);
        } else {
            ok = write_all(fd, d, n, timeout);
        }
        return ok;
    };
    sink.done = [&] { done = true; };
    while (ok && !done) {
        if (!res.provide(sink)) ok = false;
    }
    if (ok && chunked) ok = write_all(fd, "0\r\n\r\n", 5, timeout);
    res.set_stream_complete(ok);
    return ok;
}

}  // namespace k3::server
