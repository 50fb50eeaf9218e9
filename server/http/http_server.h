// HttpServer: the daemon's HTTP/1.1 connection model, of our own. Debian 12 ships cpp-httplib
// 0.11, which gives each connection a pool thread for its whole life, has only a per-recv read
// timeout (no deadline for a request head or body), no cap on header count or unterminated
// lines, and inflates gzip bodies before the size cap applies. So the server has its own
// request, response and stream types (http/message.h), its own parser and writer, and:
//
//   * one event-loop thread accepts and reads every connection that is not being answered
//     (new, idle keep-alive, or sending its request), non-blocking, with a deadline for the head
//     and one for the body, and RequestParser's caps; a slow or idle client costs a file
//     descriptor and a buffer, never a thread;
//   * a complete request goes to a handler thread (spawned on demand up to max_handlers) that
//     runs the route and writes the answer with a write deadline, then gives a keep-alive
//     connection back to the loop;
//   * requests that break a limit are answered from the loop (400/408/413/414/415/431/501),
//     with the connection closed after a short lingering read.
//
// What it gives up: HTTP/2 and TLS (a proxy in front adds them), compressed answers, byte
// ranges and multipart bodies; none of the daemon's routes needs them.
//
// The handler-thread budget only has to cover requests being answered (running + queued +
// quick ones), which the daemon sizes from its queue depth, so /health and /metrics are always
// answered while every generation slot is taken.
#pragma once
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/connection_table.h"
#include "http/message.h"
#include "http/request_parser.h"

namespace k3::server {

struct HttpServerOptions {
    RequestLimits limits;
    double head_timeout_s = 10;   // first byte of a request -> end of its head
    double body_timeout_s = 60;   // end of the head -> end of the body
    double keep_alive_s = 5;      // an idle connection between requests is closed after this
    double write_timeout_s = 10;  // a client that reads nothing this long is dropped
    int max_handlers = 64;        // requests answered at once (one thread each)
    // GET paths that get a thread even when max_handlers are busy (up to 16 more): /health
    // must answer while a burst of generation requests holds every handler.
    std::vector<std::string> priority_paths;
    // Open connections. Near it, the connection idle longest is closed to make room for a new
    // one; with none idle, a new one may still ask for a priority path (16 more).
    int max_connections = 1024;
    int max_connections_per_address = 256;  // the same, per client address (0: no per-address cap)
    double first_byte_timeout_s = 3;        // a new connection that sends nothing this long is closed
    // The kernel's send buffer per connection. Fixed (no autotuning, which grows it to 4 MiB):
    // what a client that stops reading pins in the kernel, before the job's own budget
    // (--client-buffer-kb) applies. 256 KiB streams tokens far faster than anyone reads them.
    int send_buffer_bytes = 256 * 1024;
    // Request bodies being received at once, in bytes (a Content-Length counts in full from the
    // head on, a chunked body as the body limit): past it a request gets 503 + Retry-After at
    // its head, so connections x the body limit is never held.
    size_t max_inflight_body = 256u << 20;
};

class HttpServer {
public:
    using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
    // What a pre-routing or error handler did: Handled means `res` is the answer.
    enum class HandlerResponse { Handled, Unhandled };
    using HandlerWithResponse = std::function<HandlerResponse(const HttpRequest&, HttpResponse&)>;
    using ExceptionHandler = std::function<void(const HttpRequest&, HttpResponse&, std::exception_ptr)>;
    using Logger = std::function<void(const HttpRequest&, const HttpResponse&)>;

    explicit HttpServer(HttpServerOptions options = {});
    ~HttpServer();

    // Routes: exact paths; route_prefix() matches every path that starts with `prefix`.
    void Get(const std::string& path, Handler handler);
    void Post(const std::string& path, Handler handler);
    void route_prefix(const std::string& method, const std::string& prefix, Handler handler);

    // Runs first for every complete request; Handled means `res` is the answer. It sees only the
    // request's head (method, target, headers): for a request with a body it runs on the
    // event loop as soon as the head has arrived, before any body byte is read or "100
    // Continue" is sent, and a Handled answer is sent instead (the body is never read). So it
    // must be quick and must not block.
    void set_pre_routing_handler(HandlerWithResponse handler);
    // Fills the body of an error answer that has none (status >= 400): the front's own refusals,
    // 404/405, and handlers that set only a status.
    void set_error_handler(HandlerWithResponse handler);
    void set_exception_handler(ExceptionHandler handler);
    void set_logger(Logger logger);
    // What the connection caps did so far (for /metrics).
    ConnectionFigures connection_figures() const;

    // Binds and listens; returns the port (useful with port 0), -1 on failure.
    int bind(const std::string& host, int port);
    // Serves on a background thread until stop(). Call after bind().
    void start();
    // Stops accepting, closes idle connections and waits for the handlers to finish.
    void stop();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// The connection the calling handler thread is answering: lets a handler notice that its client
// went away without reading. Valid only on a handler thread, inside a handler or its content
// provider.
struct CurrentConnection {
    int fd = -1;
    int remote_port = -1;
    bool http10 = false;
    bool committed = false;  // the response head has been written
    bool probed = false;     // a "100 Continue" probe was sent after the client's FIN
};
CurrentConnection* current_connection();

}  // namespace k3::server
