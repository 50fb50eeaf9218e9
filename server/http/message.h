// The HTTP request and response as the routes, the gate and the error helpers see them, and the
// sink a streamed body is written to. HttpServer (http_server.h) fills an HttpRequest from the
// parsed bytes, runs the handlers, and response_writer.h puts the HttpResponse on the wire; no
// HTTP library's types cross this line (the server links none: tests use cpp-httplib only as a
// client).
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <string>

namespace k3::server {

// Header names compare case-insensitively (RFC 9110 5.1). A response's fields go out in this
// order: sorted by name, the fields of one name in the order they were added.
struct HeaderNameLess {
    bool operator()(const std::string& a, const std::string& b) const;
};
using HttpHeaders = std::multimap<std::string, std::string, HeaderNameLess>;
// Query parameters, percent-decoded (http/query_string.h); names are case-sensitive.
using QueryParams = std::multimap<std::string, std::string>;

// The first value of header `name` (any case), or "" when there is none.
std::string header_value(const HttpHeaders& headers, const std::string& name);

struct HttpRequest {
    std::string method;        // "GET", "POST", ... as sent
    std::string target;        // as sent: path + optional "?query", never decoded
    std::string path;          // the target up to '?', not decoded
    QueryParams params;        // the query's parameters
    int version_minor = 1;     // HTTP/1.0 or HTTP/1.1
    HttpHeaders headers;       // names as sent, values trimmed
    std::string body;          // empty until the body has arrived (the gate sees the head alone)
    std::string remote_addr;   // the peer
    int remote_port = -1;
    std::string local_addr;    // the address and port the request came in on
    int local_port = -1;

    bool has_header(const std::string& name) const { return headers.find(name) != headers.end(); }
    // First value of a header (any case), or "".
    std::string header(const std::string& name) const { return header_value(headers, name); }
    bool has_param(const std::string& name) const { return params.find(name) != params.end(); }
    // First value of a query parameter, or "".
    std::string param(const std::string& name) const;
};

// Where a streamed body goes. write() sends one piece and returns false once the client cannot
// be written to; an empty piece is not sent (in a chunked body it would read as the end).
// done() ends the body.
struct StreamSink {
    std::function<bool(const char* data, size_t size)> write;
    std::function<void()> done;
};

// A streamed body: called again and again until it calls sink.done() (return true) or fails
// (return false: the client is gone or the stream broke off).
using ContentProvider = std::function<bool(StreamSink& sink)>;
// Called once when the response is destroyed, with whether its stream went out to the end.
using StreamEnd = std::function<void(bool complete)>;

// An answer: a status, header fields and a body that is either whole (`body`, sent with its
// Content-Length) or streamed (stream(): chunked over HTTP/1.1, raw to the connection's end over
// HTTP/1.0). Move-only: a streamed response owns its StreamEnd.
class HttpResponse {
public:
    int status = 200;
    // Why the front refused the request (408, 413, 503...): the message the error handler writes
    // into the body. Never sent itself.
    std::string reason;
    HttpHeaders headers;
    std::string body;

    HttpResponse() = default;
    HttpResponse(HttpResponse&& other) noexcept;
    HttpResponse& operator=(HttpResponse&& other) noexcept;
    HttpResponse(const HttpResponse&) = delete;
    HttpResponse& operator=(const HttpResponse&) = delete;
    ~HttpResponse();

    // Adds a field; a second call with the same name adds a second field. A name or value with
    // CR or LF is dropped (it would split the head).
    void add_header(const std::string& name, const std::string& value);
    bool has_header(const std::string& name) const { return headers.find(name) != headers.end(); }
    std::string header(const std::string& name) const { return header_value(headers, name); }

    // A whole body and its Content-Type (replacing any Content-Type set before).
    void set_content(std::string content, const std::string& content_type);
    void set_content(const char* data, size_t size, const std::string& content_type);

    // A streamed body of `content_type`: `provider` writes it once the head has gone out;
    // `on_end`, if given, learns when the response is destroyed whether it went out whole
    // (false also for HEAD, which sends no body, and when it was never written).
    void stream(const std::string& content_type, ContentProvider provider, StreamEnd on_end = nullptr);

    // For the writer (response_writer.cpp).
    bool streamed() const { return static_cast<bool>(provider_); }
    bool provide(StreamSink& sink) { return provider_(sink); }
    void set_stream_complete(bool complete) { stream_complete_ = complete; }

private:
    void end_stream();

    ContentProvider provider_;
    StreamEnd on_end_;
    bool stream_complete_ = false;
};

}  // namespace k3::server
