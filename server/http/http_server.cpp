#include "http/http_server.h"

#include "http/connection_table.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "http/query_string.h"
#include "http/response_writer.h"
#include "http/socket_address.h"

namespace k3::server {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

thread_local CurrentConnection* t_current = nullptr;

}  // namespace

CurrentConnection* current_connection() { return t_current; }

// One client connection. Owned by the loop while it is read, by one handler thread while its
// request is answered.
struct Connection {
    int fd = -1;
    std::string remote_addr, local_addr;
    int remote_port = -1, local_port = -1;
    RequestParser parser;
    std::string input;                 // received, not yet parsed (pipelined bytes)
    Clock::time_point deadline;
    bool request_started = false;      // a byte of the current request has arrived
    bool continue_sent = false;
    bool lingering = false;            // answered with an error: reading and dropping until close
    size_t body_reserved = 0;          // its share of HttpServerOptions::max_inflight_body
    Clock::time_point idle_since;      // since when it waits for a request (oldest idle goes first)
    bool over_cap = false;             // accepted past the total cap: /health and /metrics only
    ConnectionTable::Entry address_hold;  // counts it against its address until it closes
    bool first_request = true;

    explicit Connection(RequestLimits limits) : parser(limits) {}
    ~Connection() {
        if (fd >= 0) ::close(fd);
    }
};

struct HttpServer::Impl {
    HttpServerOptions options;
    ConnectionTable table;  // before every container of connections: they release into it
    struct Route {
        std::string method, path;
        bool prefix = false;
        Handler handler;
    };
    std::vector<Route> routes;
    HandlerWithResponse pre_routing, error_handler;
    ExceptionHandler exception_handler;
    Logger logger;

    int listen_fd = -1;
    int wake_pipe[2] = {-1, -1};
    std::thread loop_thread;
    std::atomic<bool> running{false};
    std::atomic<int> open_connections{0};
    size_t inflight_body = 0;  // the loop's: bodies being received (reserved at their heads)

    // Handler threads and the requests waiting for one.
    std::mutex mutex;
    std::condition_variable work_cv;
    std::deque<std::unique_ptr<Connection>> ready;      // complete requests
    std::deque<std::unique_ptr<Connection>> returned;   // answered keep-alive connections
    std::vector<std::thread> handlers;
    int idle_handlers = 0;
    bool stopping = false;

    explicit Impl(HttpServerOptions o) : options(o) {}

    void wake() {
        char c = 1;
        ssize_t ignored = ::write(wake_pipe[1], &c, 1);
        (void)ignored;
    }

    // --- the event loop ----------------------------------------------------------------------

    void loop() {
        std::map<int, std::unique_ptr<Connection>> conns;  // read by the loop
        std::vector<pollfd> fds;
        while (running.load()) {
            fds.clear();
            fds.push_back({wake_pipe[0], POLLIN, 0});
            fds.push_back({listen_fd, open_connections.load() < options.max_connections + 16 ? short(POLLIN) : short(0), 0});
            auto next_deadline = after(1.0);
            for (auto& [fd, c] : conns) {
                fds.push_back({fd, POLLIN | POLLRDHUP, 0});
                next_deadline = std::min(next_deadline, c->deadline);
            }
            int wait_ms = int(std::max<long long>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(next_deadline - Clock::now()).count() + 1));
            int rc = ::poll(fds.data(), fds.size(), wait_ms);
            if (rc < 0 && errno != EINTR) break;
            if (!running.load()) break;
            if (fds[0].revents & POLLIN) {
                char buf[256];
                while (::read(wake_pipe[0], buf, sizeof buf) > 0) {
                }
            }
            take_returned(conns);
            if (fds[1].revents & POLLIN) accept_all(conns);
            for (size_t i = 2; i < fds.size(); ++i) {
                if (!fds[i].revents) continue;
                auto it = conns.find(fds[i].fd);
                if (it == conns.end()) continue;
                bool open = read_some(*it->second);
                // A client may half-close right after its request: answer what arrived first.
                if (!advance(conns, it)) continue;
                if (!open) close_connection(conns, it);
            }
            // Deadlines: an idle keep-alive connection is closed; a request that is still
            // arriving is answered 408.
            auto now = Clock::now();
            for (auto it = conns.begin(); it != conns.end();) {
                auto next = std::next(it);
                Connection& c = *it->second;
                if (now >= c.deadline) {
                    if (!c.request_started && c.first_request && !c.lingering) ++table.first_byte_deadline;
                    if (c.request_started && !c.lingering) {
                        bool in_head = !c.parser.head_complete();
                        answer_from_loop(c, 408,
                                         in_head ? "the request head did not arrive within " +
                                                       std::to_string(int(options.head_timeout_s)) + " s"
                                                 : "the request body did not arrive within " +
                                                       std::to_string(int(options.body_timeout_s)) + " s");
                    }
                    close_connection(conns, it);
                }
                it = next;
            }
        }
        conns.clear();
        open_connections = 0;
    }

    void release_body(Connection& c) {
        inflight_body -= c.body_reserved;
        c.body_reserved = 0;
    }

    void close_connection(std::map<int, std::unique_ptr<Connection>>& conns,
                          std::map<int, std::unique_ptr<Connection>>::iterator it) {
        release_body(*it->second);
        conns.erase(it);
        --open_connections;
    }

    void accept_all(std::map<int, std::unique_ptr<Connection>>& conns) {
        for (;;) {
            int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) return;
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (options.send_buffer_bytes > 0)
                setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options.send_buffer_bytes, sizeof options.send_buffer_bytes);
            auto c = std::make_unique<Connection>(options.limits);
            c->fd = fd;
            peer_address(fd, false, c->remote_addr, c->remote_port);
            peer_address(fd, true, c->local_addr, c->local_port);
            // A silent socket has a short deadline for its first byte; the head's runs from it.
            c->deadline = after(options.first_byte_timeout_s);
            c->idle_since = Clock::now();
            int from_address;
            std::tie(c->address_hold, from_address) = table.acquire(c->remote_addr);
            ++open_connections;
            // Its address over its share: that address's oldest idle connection makes room, or
            // this one is refused.
            if (options.max_connections_per_address > 0 && from_address > options.max_connections_per_address &&
                !evict_oldest_idle(conns, &c->remote_addr)) {
                ++table.refused_address;
                answer_from_loop(*c, 503, "too many open connections from " + c->remote_addr + "; retry shortly");
                --open_connections;
                continue;
            }
            // At the total cap, the oldest idle connection anywhere makes room; with none idle
            // this one may still ask for /health or /metrics (up to 16 such).
            if (open_connections.load() > options.max_connections && !evict_oldest_idle(conns, nullptr))
                c->over_cap = true;
            conns.emplace(fd, std::move(c));
        }
    }

    // Closes the connection that has waited longest for a request (from `address` only, when
    // given); false when none is idle. Connections sending a request are bounded by their
    // deadlines instead.
    bool evict_oldest_idle(std::map<int, std::unique_ptr<Connection>>& conns, const std::string* address) {
        std::vector<std::map<int, std::unique_ptr<Connection>>::iterator> idle;
        for (auto it = conns.begin(); it != conns.end(); ++it) {
            const Connection& c = *it->second;
            if (c.request_started || c.lingering || (address && c.remote_addr != *address)) continue;
            idle.push_back(it);
        }
        std::sort(idle.begin(), idle.end(), [](const auto& a, const auto& b) { return a->second->idle_since < b->second->idle_since; });
        for (auto it : idle) {
            // Bytes the loop has not read yet make it a request, not an idle connection.
            char byte;
            if (::recv(it->first, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0) continue;
            ++table.evicted_idle;
            close_connection(conns, it);
            return true;
        }
        return false;
    }

    void take_returned(std::map<int, std::unique_ptr<Connection>>& conns) {
        std::deque<std::unique_ptr<Connection>> back;
        {
            std::lock_guard lock(mutex);
            back.swap(returned);
        }
        for (auto& c : back) {
            c->parser.reset();
            c->request_started = !c->input.empty();
            c->continue_sent = false;
            c->first_request = false;
            c->deadline = c->request_started ? after(options.head_timeout_s) : after(options.keep_alive_s);
            c->idle_since = Clock::now();
            if (open_connections.load() <= options.max_connections) c->over_cap = false;  // room again
            int fd = c->fd;
            auto [it, inserted] = conns.emplace(fd, std::move(c));
            // Pipelined bytes may already hold the next request.
            if (inserted && !it->second->input.empty()) advance(conns, it);
        }
    }

    // Reads what is there. False: the connection is finished (EOF before a complete request,
    // an error, or the end of a lingering close).
    bool read_some(Connection& c) {
        char buf[64 * 1024];
        for (int rounds = 0; rounds < 16; ++rounds) {
            ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
            if (n > 0) {
                if (c.lingering) continue;  // dropped
                if (!c.request_started) {
                    c.request_started = true;
                    c.deadline = after(options.head_timeout_s);
                }
                c.input.append(buf, size_t(n));
                // The parser consumes as it goes; never hold more than one read ahead.
                if (c.input.size() >= sizeof buf) return true;
                continue;
            }
            if (n == 0) return false;
            if (errno == EINTR) continue;
            return errno == EAGAIN || errno == EWOULDBLOCK;
        }
        return true;
    }

    // Parses what has arrived; dispatches a complete request or answers a bad one. Returns
    // false when the connection left `conns`.
    bool advance(std::map<int, std::unique_ptr<Connection>>& conns, std::map<int, std::unique_ptr<Connection>>::iterator it) {
        Connection& c = *it->second;
        if (c.lingering) return true;
        bool was_head = c.parser.head_complete();
        size_t used = c.parser.feed(c.input);
        c.input.erase(0, used);
        switch (c.parser.state()) {
            case RequestParser::State::Failed:
                answer_from_loop(c, c.parser.error_status(), c.parser.error_message());
                linger(c);
                return true;
            case RequestParser::State::Body:
                if (!was_head) {
                    // The head is judged before any of the body is read (or invited).
                    if (c.over_cap) {
                        ++table.refused_total;
                        answer_from_loop(c, 503, "too many open connections; retry shortly");
                        linger(c);
                        return true;
                    }
                    if (!admit_body(c)) {
                        linger(c);
                        return true;
                    }
                    c.deadline = after(options.body_timeout_s);
                    if (c.parser.request().expect_continue && !c.continue_sent && c.parser.request().version_minor == 1) {
                        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
                        ssize_t ignored = ::send(c.fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                        (void)ignored;
                        c.continue_sent = true;
                    }
                }
                return true;
            case RequestParser::State::Complete: {
                if (c.over_cap && !is_priority(c.parser.request())) {
                    ++table.refused_total;
                    answer_from_loop(c, 503, "too many open connections; retry shortly");
                    linger(c);
                    return true;
                }
                release_body(c);
                auto owned = std::move(it->second);
                conns.erase(it);
                dispatch(std::move(owned));
                return false;
            }
            case RequestParser::State::Head: return true;
        }
        return true;
    }

    // Read and drop what the client is still sending for a moment, so that the answer just
    // sent is not lost to a reset, then close.
    void linger(Connection& c) {
        release_body(c);
        ::shutdown(c.fd, SHUT_WR);
        c.lingering = true;
        c.input.clear();
        c.deadline = after(1.0);
    }

    // The request as the handlers see it; `body` is moved in when it has arrived.
    HttpRequest make_request(Connection& c, bool with_body) {
        ParsedRequest& p = c.parser.request();
        HttpRequest req;
        req.method = p.method;
        req.target = p.target;
        size_t q = p.target.find('?');
        req.path = p.target.substr(0, q);
        if (q != std::string::npos) parse_query(p.target.substr(q + 1), req.params);
        req.version_minor = p.version_minor;
        for (auto& [k, v] : p.headers) req.headers.emplace(k, v);
        if (with_body) req.body = std::move(p.body);
        req.remote_addr = c.remote_addr;
        req.remote_port = c.remote_port;
        req.local_addr = c.local_addr;
        req.local_port = c.local_port;
        return req;
    }

    // A request whose head announced a body: the pre-routing handler judges the head (Host,
    // Content-Type, API key, loading) and the body budget must have room, or the answer goes
    // out now and the body is never read. True: read the body.
    bool admit_body(Connection& c) {
        if (pre_routing) {
            HttpRequest req = make_request(c, false);
            HttpResponse res;
            HandlerResponse handled = HandlerResponse::Unhandled;
            try {
                handled = pre_routing(req, res);
            } catch (...) {
                handled = HandlerResponse::Unhandled;  // the handler thread meets it again
            }
            if (handled == HandlerResponse::Handled) {
                send_from_loop(c, req, res);
                return false;
            }
        }
        const size_t bound = c.parser.body_bound();
        if (inflight_body + bound > options.max_inflight_body) {
            answer_from_loop(c, 503, "the server is receiving " + std::to_string(inflight_body >> 20) +
                                         " MiB of request bodies already; retry shortly");
            return false;
        }
        c.body_reserved = bound;
        inflight_body += bound;
        return true;
    }

    // A short answer written by the loop itself (never blocks: the socket buffer is empty).
    void answer_from_loop(Connection& c, int status, const std::string& message) {
        HttpRequest req;
        req.method = c.parser.request().method;
        req.target = c.parser.request().target;
        req.path = req.target.substr(0, req.target.find('?'));
        req.remote_addr = c.remote_addr;
        req.remote_port = c.remote_port;
        HttpResponse res;
        res.status = status;
        res.reason = message;
        // The loop's 503s are refusals under load (connections, handlers, body budget): worth
        // retrying soon. The error handler fills the body and must keep this field, not add one.
        if (status == 503) res.add_header("Retry-After", "2");
        if (error_handler) error_handler(req, res);
        if (res.body.empty()) res.set_content(message + "\n", "text/plain");
        send_from_loop(c, req, res);
    }

    void send_from_loop(Connection& c, const HttpRequest& req, HttpResponse& res) {
        if (res.status >= 400 && res.body.empty() && error_handler) error_handler(req, res);
        std::string head = response_head(res, req.method.empty() ? 1 : c.parser.request().version_minor, false,
                                         res.body.size(), false);
        std::string all = head + (req.method == "HEAD" ? std::string() : res.body);
        ssize_t ignored = ::send(c.fd, all.data(), all.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)ignored;
        if (logger) logger(req, res);
    }

    // --- handler threads ---------------------------------------------------------------------

    bool is_priority(const ParsedRequest& r) const {
        if (r.method != "GET") return false;
        std::string path = r.target.substr(0, r.target.find('?'));
        return std::find(options.priority_paths.begin(), options.priority_paths.end(), path) != options.priority_paths.end();
    }

    void dispatch(std::unique_ptr<Connection> c) {
        std::unique_lock lock(mutex);
        // Requests in hand (being answered or waiting for a thread) against the budget; the
        // priority paths have a reserve of 16 above it.
        int in_hand = int(handlers.size()) - idle_handlers + int(ready.size());
        int cap = options.max_handlers + (is_priority(c->parser.request()) ? 16 : 0);
        if (in_hand >= cap) {
            lock.unlock();
            answer_from_loop(*c, 503, "the server is answering " + std::to_string(in_hand) +
                                          " requests already; retry shortly");
            --open_connections;
            return;
        }
        if (idle_handlers <= int(ready.size())) handlers.emplace_back([this] { handler_loop(); });
        ready.push_back(std::move(c));
        work_cv.notify_one();
    }

    void handler_loop() {
        for (;;) {
            std::unique_ptr<Connection> c;
            {
                std::unique_lock lock(mutex);
                ++idle_handlers;
                work_cv.wait(lock, [&] { return stopping || !ready.empty(); });
                --idle_handlers;
                if (ready.empty()) return;
                c = std::move(ready.front());
                ready.pop_front();
            }
            bool keep = answer(*c);
            if (keep && running.load()) {
                std::lock_guard lock(mutex);
                returned.push_back(std::move(c));
                wake();
            } else {
                c.reset();
                --open_connections;
            }
        }
    }

    const Handler* find_route(const std::string& method, const std::string& path, std::string* allow) const {
        for (const auto& r : routes) {
            bool match = r.prefix ? path.rfind(r.path, 0) == 0 && path.size() > r.path.size() : path == r.path;
            if (!match) continue;
            // HEAD is answered on every GET route: the GET's head, no body (RFC 9110 9.3.2).
            if (r.method == method || (method == "HEAD" && r.method == "GET")) return &r.handler;
            for (const char* m : {r.method.c_str(), r.method == "GET" ? "HEAD" : ""})
                if (*m && allow->find(m) == std::string::npos) *allow += (allow->empty() ? "" : ", ") + std::string(m);
        }
        return nullptr;
    }

    // Runs the request and writes the answer. Returns whether the connection stays open.
    bool answer(Connection& c) {
        ParsedRequest& p = c.parser.request();
        HttpRequest req = make_request(c, true);

        CurrentConnection current;
        current.fd = c.fd;
        current.remote_port = c.remote_port;
        current.http10 = p.version_minor == 0;
        t_current = &current;

        HttpResponse res;
        run_handlers(req, res);
        if (res.status >= 400 && res.body.empty() && !res.streamed() && error_handler) error_handler(req, res);
        if (logger) logger(req, res);

        bool keep = p.keep_alive && running.load();
        bool ok = write_response(c.fd, p.version_minor, req.method == "HEAD", res, keep, options.write_timeout_s, current);
        t_current = nullptr;
        return ok && keep;
    }

    void run_handlers(const HttpRequest& req, HttpResponse& res) {
        try {
            if (pre_routing && pre_routing(req, res) == HandlerResponse::Handled) return;
            std::string allow;
            const Handler* handler = find_route(req.method, req.path, &allow);
            if (handler) {
                res.status = 200;
                (*handler)(req, res);
            } else if (!allow.empty()) {
                res.status = 405;
                res.add_header("Allow", allow);
            } else {
                res.status = 404;
            }
        } catch (...) {
            res = HttpResponse();
            res.status = 500;
            if (exception_handler) exception_handler(req, res, std::current_exception());
        }
    }
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>(options)) {}
HttpServer::~HttpServer() {
    stop();
    if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
}

void HttpServer::Get(const std::string& path, Handler handler) { impl_->routes.push_back({"GET", path, false, std::move(handler)}); }
void HttpServer::Post(const std::string& path, Handler handler) {
    impl_->routes.push_back({"POST", path, false, std::move(handler)});
}
void HttpServer::route_prefix(const std::string& method, const std::string& prefix, Handler handler) {
    impl_->routes.push_back({method, prefix, true, std::move(handler)});
}
void HttpServer::set_pre_routing_handler(HandlerWithResponse handler) { impl_->pre_routing = std::move(handler); }
void HttpServer::set_error_handler(HandlerWithResponse handler) { impl_->error_handler = std::move(handler); }
void HttpServer::set_exception_handler(ExceptionHandler handler) { impl_->exception_handler = std::move(handler); }
void HttpServer::set_logger(Logger logger) { impl_->logger = std::move(logger); }

ConnectionFigures HttpServer::connection_figures() const {
    ConnectionFigures f;
    f.open = impl_->open_connections.load();
    f.evicted_idle = impl_->table.evicted_idle.load();
    f.first_byte_deadline = impl_->table.first_byte_deadline.load();
    f.refused_address = impl_->table.refused_address.load();
    f.refused_total = impl_->table.refused_total.load();
    return f;
}

int HttpServer::bind(const std::string& host, int port) {
    const int fd = listen_socket(host, port);
    if (fd < 0) return -1;
    impl_->listen_fd = fd;
    std::string addr;
    int bound = -1;
    peer_address(fd, true, addr, bound);
    return bound;
}

void HttpServer::start() {
    if (impl_->listen_fd < 0 || impl_->running.load()) return;
    if (::pipe2(impl_->wake_pipe, O_NONBLOCK | O_CLOEXEC) != 0) return;
    impl_->running = true;
    impl_->loop_thread = std::thread([this] { impl_->loop(); });
}

void HttpServer::stop() {
    if (!impl_->loop_thread.joinable()) return;
    impl_->running = false;
    impl_->wake();
    impl_->loop_thread.join();
    {
        std::lock_guard lock(impl_->mutex);
        impl_->stopping = true;
    }
    impl_->work_cv.notify_all();
    for (auto& t : impl_->handlers) t.join();
    impl_->handlers.clear();
    impl_->ready.clear();
    impl_->returned.clear();
    ::close(impl_->wake_pipe[0]);
    ::close(impl_->wake_pipe[1]);
    impl_->wake_pipe[0] = impl_->wake_pipe[1] = -1;
    if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
    impl_->listen_fd = -1;
}

}  // namespace k3::server
