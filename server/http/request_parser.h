// RequestParser: one HTTP/1.x request read incrementally from the bytes a connection delivers,
// with every limit applied while reading, before any route, key or handler sees the request:
// request-line and header-block size, header count, body size for Content-Length and chunked
// bodies alike, no Content-Encoding (a gzip body would inflate past the body cap), no
// Transfer-Encoding other than chunked, one well-formed Content-Length. A request that breaks a
// limit ends with the status to answer (400, 413, 414, 415, 431, 501) and a message; the caller
// answers it and closes the connection. Pure: no sockets, no clocks (the front owns deadlines),
// so it is also the target of the request fuzzer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k3::server {

struct RequestLimits {
    size_t max_request_line = 8 * 1024;   // method + target + version
    size_t max_header_bytes = 32 * 1024;  // the whole header block
    size_t max_headers = 100;
    size_t max_body = 8u << 20;           // decoded body, whatever the framing
};

struct ParsedRequest {
    std::string method;
    std::string target;                   // as sent (path + optional ?query), never decoded
    int version_minor = 1;                // HTTP/1.0 or HTTP/1.1
    std::vector<std::pair<std::string, std::string>> headers;  // names as sent, values trimmed
    std::string body;
    bool expect_continue = false;         // "Expect: 100-continue"
    bool keep_alive = true;               // what the client asked for (version + Connection)

    // First value of a header (case-insensitive name), or "".
    std::string header(std::string_view name) const;
};

class RequestParser {
public:
    enum class State { Head, Body, Complete, Failed };

    explicit RequestParser(RequestLimits limits) : limits_(limits) {}

    // Consumes bytes from `data`; returns how many were used. Stops at the end of one request
    // (state Complete; the rest belongs to the next request) or at the first error (Failed).
    size_t feed(std::string_view data);

    State state() const { return state_; }
    // Set once the head is complete (state Body or Complete).
    bool head_complete() const { return state_ == State::Body || state_ == State::Complete; }
    ParsedRequest& request() { return request_; }
    const ParsedRequest& request() const { return request_; }
    // Once the head is complete: the most body bytes this request can bring (its Content-Length,
    // or the body limit for a chunked body).
    size_t body_bound() const { return chunked_ ? limits_.max_body : body_remaining_ + request_.body.size(); }
    // For Failed: the HTTP status to answer and why.
    int error_status() const { return error_status_; }
    const std::string& error_message() const { return error_message_; }

    // Ready for the next request on the same connection.
    void reset();

private:
    bool fail(int status, std::string message);
    bool take_head_line(std::string_view line);
    bool finish_head();
    size_t feed_chunked(std::string_view data);

    RequestLimits limits_;
    State state_ = State::Head;
    ParsedRequest request_;
    std::string line_;                    // the line being assembled (head or chunk size)
    size_t head_bytes_ = 0;
    bool have_request_line_ = false;
    // Body framing.
    bool chunked_ = false;
    size_t body_remaining_ = 0;           // Content-Length bytes still to come
    enum class ChunkStep { Size, Data, DataEnd, Trailer } chunk_step_ = ChunkStep::Size;
    size_t chunk_remaining_ = 0;
    size_t trailer_bytes_ = 0;
    int error_status_ = 0;
    std::string error_message_;
};

}  // namespace k3::server
