#include "routes.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "routes/generation_route.h"
#include "http/http_server.h"
#include "routes/info_routes.h"
#include "k3/error.h"
#include "load_figures.h"
#include "routes/request_gate.h"
#include "routes/route_reply.h"
#include "routes/status.h"
#include "routes/token_routes.h"
#include "web_assets.h"
#include "routes/web_ui_route.h"

namespace k3::server {

namespace {

HttpServerOptions front_options(const DaemonConfig& c) {
    HttpServerOptions o;
    o.limits.max_body = c.max_body_bytes;
    o.max_inflight_body = size_t(c.max_inflight_body_mb) << 20;
    o.head_timeout_s = c.header_timeout_s;
    o.body_timeout_s = c.body_timeout_s;
    // Longer than any client keeps an idle socket for reuse (Node's undici 4 s, Python's httpx
    // 5 s): a server that closes first races the client's next request on that socket, which
    // then fails with "other side closed". Idle sockets hold no thread, and the connection caps
    // close the oldest idle one first (docs/operations.md, "Connections, limits and slow clients").
    o.keep_alive_s = 75;
    o.write_timeout_s = std::max(1.0, c.slow_client_s);
    // Running + queued + a reserve for /health, /metrics and the quick routes.
    o.max_handlers = std::max(c.http_threads, c.queue_depth + c.parallel + 16);
    o.max_connections = c.max_connections;
    o.max_connections_per_address = c.max_connections_per_address;
    o.first_byte_timeout_s = c.first_byte_timeout_s;
    o.priority_paths = {"/health", "/v1/health", "/metrics"};
    return o;
}

}  // namespace

struct Router::Impl {
    ServerState& state;
    HttpServer server;
    RequestGate gate;
    InfoRoutes info;
    TokenRoutes tokens;
    GenerationRoute generation;

    explicit Impl(ServerState& s)
        : state(s), server(front_options(s.config)), gate(s), info(s), tokens(s), generation(s) {
        install();
    }

    const DaemonConfig& config() const { return state.config; }

    // Every handler runs inside this: OpenAI-shaped errors for anything thrown.
    template <class Fn>
    HttpServer::Handler wrap(Fn fn) {
        return [this, fn](const HttpRequest& req, HttpResponse& res) {
            try {
                fn(req, res);
            } catch (const ApiError& e) {
                if (e.status < 500) state.metrics.count_request(RequestOutcome::Invalid);
                send_error(req, res, e);
            } catch (const Error& e) {
                state.metrics.count_request(RequestOutcome::Invalid);
                send_error(req, res, engine_error(e.kind() == ErrorKind::Usage, e.what()));
            } catch (const json::exception& e) {
                // Only the client's JSON is read in handlers: a wrong type there is its mistake.
                state.metrics.count_request(RequestOutcome::Invalid);
                send_error(req, res, bad_request("", std::string("the request does not have the expected shape: ") + e.what(),
                                            "invalid_type"));
            } catch (const std::exception& e) {
                state.metrics.count_request(RequestOutcome::Error);
                spdlog::error("{} {}: {}", req.method, req.path, e.what());
                send_error(req, res, internal_error(e.what()));
            }
        };
    }

    void install() {
        server.set_pre_routing_handler([this](const auto& req, auto& res) { return gate.check(req, res); });
        server.set_exception_handler([this](const HttpRequest& req, HttpResponse& res, std::exception_ptr ep) {
            std::string what = "unknown exception";
            try {
                if (ep) std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            state.metrics.count_request(RequestOutcome::Error);
            spdlog::error("{} {}: {}", req.method, req.path, what);
            send_error(req, res, internal_error(what));
        });
        // Fills in an OpenAI error body for errors the front produces itself (404, 405, and the
        // request limits: 400, 408, 413, 414, 415, 431, 501, 503), whose reason says why.
        server.set_error_handler([this](const HttpRequest& req, HttpResponse& res) {
            if (res.body.empty() && res.status != 204) {
                std::string message = !res.reason.empty() ? res.reason
                                      : res.status == 404 ? "no route for " + req.method + " " + req.path
                                      : res.status == 405 ? req.method + " is not allowed on " + req.path +
                                                                " (allowed: " + res.header("Allow") + ")"
                                                          : "HTTP error " + std::to_string(res.status);
                // the front's own 503 (every handler busy, too many connections) is a refusal
                // under load, like a full queue, not a server error
                state.metrics.count_request(res.status == 503  ? RequestOutcome::RejectedFull
                                            : res.status >= 500 ? RequestOutcome::Error
                                                                : RequestOutcome::Invalid);
                // The front's 503 already carries its Retry-After, which send_error keeps.
                send_error(req, res, transport_error(res.status, message));
            }
            return HttpServer::HandlerResponse::Handled;
        });
        // The path is logged escaped: a %0a in it must not forge a log line.
        server.set_logger([](const HttpRequest& req, const HttpResponse& res) {
            spdlog::debug("{} {} -> {}", req.method, json(req.path).dump(-1, ' ', true, json::error_handler_t::replace),
                          res.status);
        });

        server.Get("/health", wrap([this](const auto& req, auto& res) { info.health(req, res); }));
        server.Get("/v1/health", wrap([this](const auto& req, auto& res) { info.health(req, res); }));
        server.Get("/metrics", wrap([this](const auto&, auto& res) {
                       res.set_content(state.metrics.render(state.queue.size(), state.queue.capacity(),
                                                            state.phase.load() == Phase::Ready, state.weights_load()) +
                                           render_connection_figures(server.connection_figures()) +
                                           render_load_figures(load_figures(state)),
                                       "text/plain; version=0.0.4");
                   }));
        server.Get("/v1/status", wrap([this](const auto& req, auto& res) { info.status(req, res); }));
        server.Get("/v1/models", wrap([this](const auto&, auto& res) { info.models(res); }));
        server.Get("/models", wrap([this](const auto&, auto& res) { info.models(res); }));
        server.route_prefix("GET", "/v1/models/", wrap([this](const auto& req, auto& res) { info.model(req, res); }));
        server.Get("/props", wrap([this](const auto&, auto& res) { info.props(res); }));
        server.Get("/slots", wrap([this](const auto& req, auto& res) {
            send_json(res, 200, slots_status_json(state, prompt_cache_partition(config(), req)));
        }));
        server.Post("/tokenize", wrap([this](const auto& req, auto& res) { tokens.tokenize(req, res); }));
        server.Post("/detokenize", wrap([this](const auto& req, auto& res) { tokens.detokenize(req, res); }));
        for (const char* path : {"/v1/completions", "/completions"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generation.generate(req, res, Endpoint::Completions); }));
        for (const char* path : {"/v1/chat/completions", "/chat/completions"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generation.generate(req, res, Endpoint::ChatCompletions); }));
        // Anthropic's Messages API (query strings such as ?beta=true are not part of the path).
        server.Post("/v1/messages", wrap([this](const auto& req, auto& res) { generation.generate(req, res, Endpoint::Messages); }));
        server.Post("/v1/messages/count_tokens", wrap([this](const auto& req, auto& res) { tokens.count_tokens(req, res); }));
        for (const char* path : {"/v1/responses", "/responses"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generation.generate(req, res, Endpoint::Responses); }));
        if (config().web_ui) {
            server.Get("/", wrap([this](const auto& req, auto& res) { answer_web_ui(config(), req, res); }));
            for (const WebAsset& asset : kWebAssets) {
                // Not "/" + name: GCC 12 at -O3 reports a false -Wrestrict for a one-character
                // literal put in front of a std::string (GCC bug 105329).
                std::string route(1, '/');
                route += asset.name;
                server.Get(route, wrap([this](const auto& req, auto& res) { answer_web_ui(config(), req, res); }));
            }
        }
    }
};

Router::Router(ServerState& state) : impl_(std::make_unique<Impl>(state)) {}
Router::~Router() { stop(); }

int Router::bind(const std::string& host, int port) {
    int bound = impl_->server.bind(host, port);
    if (bound < 0)
        throw Error(ErrorKind::Runtime, "cannot listen on " + host + ":" + std::to_string(port) +
                                            " (address in use, or not an address of this machine?)");
    return bound;
}

void Router::start() { impl_->server.start(); }

void Router::stop() { impl_->server.stop(); }

}  // namespace k3::server
