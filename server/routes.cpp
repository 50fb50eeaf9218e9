#include "routes.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "anthropic/messages.h"
#include "http/connection_probe.h"
#include "http/http_server.h"
#include "openai/json_body.h"
#include "openai/request.h"
#include "openai/response.h"
#include "http/sse.h"
#include "openai/fields.h"
#include "status.h"
#include "k3/error.h"
#include "web_assets.h"
#include "k3/fnv1a.h"

namespace k3::server {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

// Errors in the shape of the API the path belongs to: Anthropic's for /v1/messages, OpenAI's
// everywhere else.
void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
    if (is_anthropic_path(req.path))
        send_json(res, anthropic_status(e), anthropic_error_body(e));
    else
        send_json(res, e.status, error_body(e));
    if (int s = retry_after_seconds(e)) res.set_header("Retry-After", std::to_string(s));
}

bool is_ui_path(const std::string& path) {
    return path == "/" || (path.size() > 1 && find_web_asset(path.substr(1)) != nullptr);
}

// Figures that follow /metrics' rules: public unless --metrics-auth, answered while loading.
bool is_figures_path(const std::string& path) { return path == "/metrics" || path == "/v1/status"; }

// FNV-1a of an embedded file, as a strong ETag (computed once per file).
std::string etag_of(const WebAsset& asset) {
    const uint64_t h = Fnv1a().add(asset.begin, size_t(asset.end - asset.begin)).value();
    char buf[24];
    std::snprintf(buf, sizeof buf, "\"%016llx\"", (unsigned long long)h);
    return buf;
}

bool iequals(const std::string& a, const std::string& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
        return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
    });
}

// "application/json; charset=utf-8" -> "application/json".
std::string media_type(const std::string& content_type) {
    std::string t = content_type.substr(0, content_type.find(';'));
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
    return t;
}

// The host part of a Host header: "localhost:8080" -> "localhost", "[::1]:80" -> "[::1]".
std::string host_name(const std::string& host) {
    if (!host.empty() && host[0] == '[') {
        // "[::1]" or "[::1]:port"; "[::1].evil.example" is not an address in brackets.
        size_t end = host.find(']');
        if (end != std::string::npos && (end + 1 == host.size() || host[end + 1] == ':')) return host.substr(0, end + 1);
        return host;
    }
    return host.substr(0, host.find(':'));
}

bool is_loopback_address(const std::string& host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// Constant-time comparison, so key checks do not leak a prefix through timing.
bool same_key(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

// Everything one generation request needs while it streams: the job, the Responder that shapes
// what the client sees, and the events received before streaming began.
struct Exchange {
    std::shared_ptr<Job> job;
    std::unique_ptr<Responder> responder;
    ConnectionProbe probe;
    std::optional<Clock::time_point> deadline;
    std::vector<JobEvent> pending;    // received before streaming began

    Exchange(std::shared_ptr<Job> j, std::unique_ptr<Responder> r, const httplib::Request& req)
        : job(std::move(j)), responder(std::move(r)), probe(req.remote_addr, req.remote_port, req.local_port),
          deadline(job->deadline) {}

    // The client left, or the deadline passed: tell the worker (the worker answers the deadline).
    bool check_client() {
        if (probe.gone()) {
            job->request_cancel(CancelReason::ClientGone);
            return false;
        }
        if (deadline && Clock::now() >= *deadline) job->request_cancel(CancelReason::Deadline);
        return true;
    }
};

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
    std::vector<std::string> allowed_hosts;  // empty = any Host

    explicit Impl(ServerState& s) : state(s), server(front_options(s.config)) {
        // DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends
        // "Host: evil.example". A loopback daemon without a key serves loopback names only.
        if (is_loopback_address(config().host) && config().api_keys.empty()) {
            allowed_hosts = {"localhost", "127.0.0.1", "[::1]"};
            for (const auto& h : config().allowed_hosts) allowed_hosts.push_back(host_name(h));
        }
        install();
    }

    const DaemonConfig& config() const { return state.config; }
    JsonBodyLimits json_limits() const { return {config().max_json_depth, json_value_budget(state.limits.n_ctx)}; }

    // --- gates: CORS, auth, loading/draining -----------------------------------------------

    void add_cors(const httplib::Request& req, httplib::Response& res) const {
        const std::string& allowed = config().cors_origin;
        if (allowed.empty()) return;
        if (allowed == "*") {
            res.set_header("Access-Control-Allow-Origin", "*");
        } else if (req.get_header_value("Origin") == allowed) {
            res.set_header("Access-Control-Allow-Origin", allowed);
            res.set_header("Vary", "Origin");
        } else {
            return;
        }
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        // Whatever the client asks for (the OpenAI SDK sends X-Stainless-* headers, others
        // X-Api-Key): the origin check above is the gate, not the header names.
        std::string asked = req.get_header_value("Access-Control-Request-Headers");
        bool plain = std::all_of(asked.begin(), asked.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ';
        });
        res.set_header("Access-Control-Allow-Headers", !asked.empty() && plain ? asked : "Authorization, Content-Type, X-Api-Key");
        res.set_header("Access-Control-Max-Age", "600");
    }

    bool authorized(const httplib::Request& req) const {
        if (config().api_keys.empty()) return true;
        std::string header = req.get_header_value("Authorization");
        std::string key;
        if (header.size() > 7 && iequals(header.substr(0, 7), "Bearer ")) key = header.substr(7);  // scheme is case-insensitive
        if (key.empty()) key = req.get_header_value("X-Api-Key");
        for (const auto& k : config().api_keys)
            if (same_key(k, key)) return true;
        return false;
    }

    HttpServer::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res) {
        if (!allowed_hosts.empty() && req.has_header("Host")) {
            std::string host = host_name(req.get_header_value("Host"));
            bool ok = std::any_of(allowed_hosts.begin(), allowed_hosts.end(), [&](const std::string& h) { return iequals(h, host); });
            if (!ok) {
                state.metrics.count_request(RequestOutcome::Invalid);
                send_error(req, res, ApiError(403, "permission_error", "host_not_allowed", "",
                                         "Host '" + host + "' is not served: this daemon listens on loopback without an "
                                         "API key and answers only loopback names (add --allowed-hosts or --api-key)"));
                return HttpServer::HandlerResponse::Handled;
            }
        }
        add_cors(req, res);
        if (req.method == "OPTIONS") {
            res.status = config().cors_origin.empty() ? 405 : 204;
            if (res.status == 405) res.set_header("Allow", "GET, HEAD, POST");
            return HttpServer::HandlerResponse::Handled;
        }
        // Only JSON bodies: a form or text/plain POST is a "simple" cross-site request that a
        // browser sends without asking first.
        if (req.method == "POST" && !iequals(media_type(req.get_header_value("Content-Type")), "application/json")) {
            state.metrics.count_request(RequestOutcome::Invalid);
            send_error(req, res, ApiError(415, "invalid_request_error", "unsupported_media_type", "",
                                     "POST bodies must be sent as Content-Type: application/json"));
            return HttpServer::HandlerResponse::Handled;
        }
        const std::string& path = req.path;
        bool is_public = path == "/health" || path == "/v1/health" || is_ui_path(path);
        bool needs_key = !is_public && (!is_figures_path(path) || config().metrics_auth);
        if (needs_key && !authorized(req)) {
            state.metrics.count_request(RequestOutcome::Unauthorized);
            send_error(req, res, unauthorized_error());
            return HttpServer::HandlerResponse::Handled;
        }
        Phase phase = state.phase.load();
        if (!is_public && !is_figures_path(path) && phase == Phase::Loading) {
            state.metrics.count_request(RequestOutcome::RejectedLoading);
            send_error(req, res, loading_error(state.status()));
            return HttpServer::HandlerResponse::Handled;
        }
        if (!is_public && !is_figures_path(path) && phase == Phase::Failed) {
            send_error(req, res, model_failed_error(state.status()));
            return HttpServer::HandlerResponse::Handled;
        }
        return HttpServer::HandlerResponse::Unhandled;
    }

    // Every handler runs inside this: OpenAI-shaped errors for anything thrown.
    template <class Fn>
    HttpServer::Handler wrap(Fn fn) {
        return [this, fn](const httplib::Request& req, httplib::Response& res) {
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

    // --- routes ------------------------------------------------------------------------------

    void install() {
        server.set_pre_routing_handler([this](const auto& req, auto& res) { return pre_route(req, res); });
        server.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
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
        server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
            if (res.body.empty() && res.status != 204) {
                std::string message = !res.reason.empty() ? res.reason
                                      : res.status == 404 ? "no route for " + req.method + " " + req.path
                                      : res.status == 405 ? req.method + " is not allowed on " + req.path +
                                                                " (allowed: " + res.get_header_value("Allow") + ")"
                                                          : "HTTP error " + std::to_string(res.status);
                // the front's own 503 (every handler busy, too many connections) is a refusal
                // under load, like a full queue, not a server error
                state.metrics.count_request(res.status == 503  ? RequestOutcome::RejectedFull
                                            : res.status >= 500 ? RequestOutcome::Error
                                                                : RequestOutcome::Invalid);
                send_error(req, res, transport_error(res.status, message));
                if (res.status == 503 && !res.has_header("Retry-After")) res.set_header("Retry-After", "2");
            }
            return HttpServer::HandlerResponse::Handled;
        });
        // The path is logged escaped: a %0a in it must not forge a log line.
        server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
            spdlog::debug("{} {} -> {}", req.method, json(req.path).dump(-1, ' ', true, json::error_handler_t::replace),
                          res.status);
        });

        server.Get("/health", wrap([this](const auto& req, auto& res) { health(req, res); }));
        server.Get("/v1/health", wrap([this](const auto& req, auto& res) { health(req, res); }));
        server.Get("/metrics", wrap([this](const auto&, auto& res) {
                       res.set_content(state.metrics.render(state.queue.size(), state.queue.capacity(),
                                                            state.phase.load() == Phase::Ready, state.weights_load()) +
                                           render_connection_figures(server.connection_figures()),
                                       "text/plain; version=0.0.4");
                   }));
        server.Get("/v1/status", wrap([this](const auto& req, auto& res) { status(req, res); }));
        server.Get("/v1/models", wrap([this](const auto&, auto& res) { models(res); }));
        server.Get("/models", wrap([this](const auto&, auto& res) { models(res); }));
        server.route_prefix("GET", "/v1/models/", wrap([this](const auto& req, auto& res) { model(req, res); }));
        server.Get("/props", wrap([this](const auto&, auto& res) { props(res); }));
        server.Get("/slots", wrap([this](const auto&, auto& res) { send_json(res, 200, slots_status_json(state)); }));
        server.Post("/tokenize", wrap([this](const auto& req, auto& res) { tokenize(req, res); }));
        server.Post("/detokenize", wrap([this](const auto& req, auto& res) { detokenize(req, res); }));
        for (const char* path : {"/v1/completions", "/completions"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generate(req, res, Endpoint::Completions); }));
        for (const char* path : {"/v1/chat/completions", "/chat/completions"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generate(req, res, Endpoint::ChatCompletions); }));
        // Anthropic's Messages API (query strings such as ?beta=true are not part of the path).
        server.Post("/v1/messages", wrap([this](const auto& req, auto& res) { generate(req, res, Endpoint::Messages); }));
        server.Post("/v1/messages/count_tokens", wrap([this](const auto& req, auto& res) { count_tokens(req, res); }));
        for (const char* path : {"/v1/responses", "/responses"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generate(req, res, Endpoint::Responses); }));
        if (config().web_ui) {
            server.Get("/", wrap([this](const auto& req, auto& res) { ui(req, res); }));
            for (const WebAsset& asset : kWebAssets) {
                // Not "/" + name: GCC 12 at -O3 reports a false -Wrestrict for a one-character
                // literal put in front of a std::string (GCC bug 105329).
                std::string route(1, '/');
                route += asset.name;
                server.Get(route, wrap([this](const auto& req, auto& res) { ui(req, res); }));
            }
        }
    }

    void health(const httplib::Request& req, httplib::Response& res) {
        switch (state.phase.load()) {
            case Phase::Ready: {
                if (std::string problem = state.liveness ? state.liveness->problem() : ""; !problem.empty()) {
                    bool model = problem.rfind("model", 0) == 0;
                    send_error(req, res, ApiError(503, "unavailable_error", model ? "model_unhealthy" : "worker_stuck", "", problem));
                    return;
                }
                // Serving while the routed experts load: ok, and how far they are. A piece that
                // failed to load makes the model unhealthy (requests needing it fail).
                const WeightsLoad w = state.weights_load();
                if (w.failures > 0) {
                    send_error(req, res, ApiError(503, "unavailable_error", "model_unhealthy", "",
                                             "model weights failed to load: " + w.first_failure));
                    return;
                }
                if (!w.complete()) {
                    send_json(res, 200, {{"status", "ok"},
                                         {"weights", "loading"},
                                         {"weights_loaded_bytes", w.loaded_bytes},
                                         {"weights_total_bytes", w.total_bytes}});
                    return;
                }
                send_json(res, 200, {{"status", "ok"}});
                return;
            }
            case Phase::Loading:
                send_error(req, res, loading_error(state.status()));
                return;
            case Phase::Draining:
                send_error(req, res, shutting_down_error());
                return;
            case Phase::Failed:
                send_error(req, res, model_failed_error(state.status()));
                return;
        }
    }

    void models(httplib::Response& res) {
        json model = {{"id", state.limits.model_name},
                      {"object", "model"},
                      {"created", state.start_time},
                      {"owned_by", "k3serve"},
                      {"max_model_len", state.limits.n_ctx},
                      {"meta",
                       {{"n_vocab", state.info.n_vocab},
                        {"n_ctx_max", state.info.n_ctx_max},
                        {"shape", state.info.shape},
                        {"fingerprint", state.info.fingerprint}}}};
        // Anthropic's model object and list fields too (the Anthropic SDK's models.list reads
        // them; OpenAI's schema allows the extra keys), so one route serves both SDKs.
        char created_at[32];
        std::time_t start = std::time_t(state.start_time);
        std::strftime(created_at, sizeof created_at, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&start));
        model["type"] = "model";
        model["display_name"] = state.limits.model_name;
        model["created_at"] = created_at;
        send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}, {"has_more", false},
                             {"first_id", state.limits.model_name}, {"last_id", state.limits.model_name}});
    }

    // GET /v1/models/{id} (the SDK's models.retrieve).
    void model(const httplib::Request& req, httplib::Response& res) {
        std::string id = req.path.substr(std::string("/v1/models/").size());
        if (id != state.limits.model_name && (state.limits.strict_model_name || id.empty()))
            throw ApiError(404, "not_found_error", "model_not_found", "model",
                           "The model '" + id + "' does not exist; this server serves '" + state.limits.model_name + "'");
        models(res);
        json one = json::parse(res.body)["data"][0];
        one["id"] = one["display_name"] = id;  // any name is served by the loaded model (--strict-model-name: only its own)
        res.body = dump(one);
    }

    void props(httplib::Response& res) {
        json j = {{"model",
                   {{"id", state.limits.model_name},
                    {"name", state.info.name},
                    {"shape", state.info.shape},
                    {"n_vocab", state.info.n_vocab},
                    {"n_ctx_max", state.info.n_ctx_max},
                    {"bos_token_id", state.info.bos_token_id},
                    {"eos_token_id", state.info.eos_token_id},
                    {"kv_bytes_per_position", state.info.kv_bytes_per_position},
                    {"fingerprint", state.info.fingerprint}}},
                  {"kernels", state.info.kernels},
                  {"memory_plan", state.info.memory_plan},
                  {"n_ctx", state.limits.n_ctx},
                  {"max_prompt_tokens", state.limits.max_prompt_tokens},
                  {"total_slots", config().parallel},
                  {"queue_capacity", state.queue.capacity()},
                  {"config", config().to_json()},
                  {"build", K3_VERSION},
                  {"default_generation_settings",
                   {{"temperature", 1.0}, {"top_p", 1.0}, {"completions_max_tokens", 16},
                    {"chat_max_tokens", "rest of the context"}, {"thinking", false}}}};
        send_json(res, 200, j);
    }

    // POST /v1/messages/count_tokens: {"input_tokens": N}.
    void count_tokens(const httplib::Request& req, httplib::Response& res) {
        json body = parse_json_body(req.body, json_limits());
        IgnoredFields ignored;
        IgnoredFieldsScope scope(ignored);
        send_json(res, 200, {{"input_tokens", count_message_tokens(body, *state.tokenizer, state.limits)}});
    }

    void tokenize(const httplib::Request& req, httplib::Response& res) {
        json body = parse_json_body(req.body, json_limits());
        if (!body.is_object()) throw bad_request("", "the request body must be a JSON object", "invalid_type");
        const json* text = body.contains("content") ? &body["content"] : body.contains("prompt") ? &body["prompt"] : nullptr;
        if (!text || !text->is_string()) throw bad_request("content", "'content' must be a string", "invalid_type");
        // Bounded like a prompt: an answer with pieces is ~20x its text, so 4 MiB of text was
        // ~90 MB of JSON and 3.5 GB at peak. More than a context's worth is never useful.
        size_t max_bytes = size_t(std::max(state.limits.n_ctx, 1)) * 16;
        if (text->get_ref<const std::string&>().size() > max_bytes)
            throw bad_request("content", "'content' is longer than " + std::to_string(max_bytes) +
                                             " bytes (16 per token of the context)");
        bool allow_special = body.value("add_special", false) || body.value("parse_special", false);
        auto ids = state.tokenizer->encode(text->get<std::string>(), allow_special);
        if (ids.size() > size_t(state.limits.n_ctx))
            throw bad_request("content", "'content' is " + std::to_string(ids.size()) + " tokens, more than the context (" +
                                             std::to_string(state.limits.n_ctx) + ")",
                              "context_length_exceeded");
        json tokens = json::array();
        bool pieces = body.value("with_pieces", false);
        for (int32_t id : ids) {
            if (pieces)
                tokens.push_back({{"id", id}, {"piece", std::string(state.tokenizer->token_bytes(id))}});
            else
                tokens.push_back(id);
        }
        send_json(res, 200, {{"tokens", tokens}, {"count", ids.size()}});
    }

    void detokenize(const httplib::Request& req, httplib::Response& res) {
        json body = parse_json_body(req.body, json_limits());
        if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
            throw bad_request("tokens", "'tokens' must be an array of token ids", "invalid_type");
        std::vector<int32_t> ids;
        for (const auto& t : body["tokens"]) {
            if (!t.is_number_integer() || t.get<long long>() < 0 || t.get<long long>() >= state.info.n_vocab)
                throw bad_request("tokens", "token ids must be integers in [0, " + std::to_string(state.info.n_vocab) + ")");
            ids.push_back(int32_t(t.get<long long>()));
        }
        send_json(res, 200, {{"content", state.tokenizer->decode(ids)}});
    }

    void status(const httplib::Request& req, httplib::Response& res) {
        uint64_t since = 0;
        if (req.has_param("since")) {
            const std::string v = req.get_param_value("since");
            char* end = nullptr;
            since = std::strtoull(v.c_str(), &end, 10);
            if (v.empty() || *end != '\0') throw bad_request("since", "'since' must be a non-negative integer");
        }
        res.set_header("Cache-Control", "no-store");
        send_json(res, 200, status_json(state, since));
    }

    // The UI's files. Its own files are revalidated on every load (no-cache + ETag, so a new
    // build is picked up at once); the Debian libraries under vendor/ may be kept for a day.
    // Content-Security-Policy: only this origin's scripts, styles, fonts and connections, no inline
    // script or style, no frames, no plugins.
    void ui(const httplib::Request& req, httplib::Response& res) {
        std::string name = req.path == "/" ? "index.html" : req.path.substr(1);
        const WebAsset* asset = find_web_asset(name);
        if (!asset) throw not_found_error("no such file");
        static const std::map<std::string, std::string> etags = [] {
            std::map<std::string, std::string> m;
            for (const WebAsset& a : kWebAssets) m[a.name] = etag_of(a);
            return m;
        }();
        bool vendor = name.rfind("vendor/", 0) == 0;
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_header("Referrer-Policy", "no-referrer");
        res.set_header("Cache-Control", vendor ? "public, max-age=86400" : "no-cache");
        res.set_header("Content-Security-Policy",
                       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
                       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
        if (name == "index.html") res.set_header("X-Frame-Options", "DENY");
        if (!config().web_dir.empty() && !vendor) {
            // --web-dir (UI development): only the UI's own files, never an arbitrary path.
            std::ifstream in(config().web_dir + "/" + name, std::ios::binary);
            if (!in) throw not_found_error("web-dir: cannot read " + name);
            std::stringstream ss;
            ss << in.rdbuf();
            res.set_content(ss.str(), asset->content_type);
            return;
        }
        const std::string& etag = etags.at(name);
        res.set_header("ETag", etag);
        if (req.get_header_value("If-None-Match") == etag) {
            res.status = 304;
            return;
        }
        res.set_content(reinterpret_cast<const char*>(asset->begin), asset->size(), asset->content_type);
    }

    // --- generation --------------------------------------------------------------------------

    void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
        if (state.phase.load() == Phase::Draining) {
            state.metrics.count_request(RequestOutcome::RejectedShutdown);
            throw shutting_down_error();
        }
        json body = parse_json_body(req.body, json_limits());
        GenerationRequest g;
        IgnoredFields ignored;
        {
            IgnoredFieldsScope scope(ignored);
            switch (endpoint) {
                case Endpoint::Completions: g = parse_completion_request(body, *state.tokenizer, state.limits, req.body); break;
                case Endpoint::ChatCompletions: g = parse_chat_request(body, *state.tokenizer, state.limits, req.body); break;
                case Endpoint::Responses: g = parse_responses_request(body, *state.tokenizer, state.limits, req.body); break;
                case Endpoint::Messages: g = parse_messages_request(body, *state.tokenizer, state.limits, req.body); break;
            }
        }
        report_tolerance(req, res, g, ignored);
        std::unique_ptr<Responder> responder = make_responder(g, state.info.fingerprint);
        auto job = std::make_shared<Job>();
        job->id = state.next_job_id++;
        job->prompt = std::move(g.prompt);
        job->params = std::move(g.params);
        if (config().deadline_s > 0)
            job->deadline = job->enqueued_at + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(config().deadline_s));
        auto ex = std::make_shared<Exchange>(job, std::move(responder), req);

        switch (state.queue.push(job)) {
            case JobQueue::PushResult::Ok: break;
            case JobQueue::PushResult::Full:
                state.metrics.count_request(RequestOutcome::RejectedFull);
                throw queue_full_error(state.queue.capacity());
            case JobQueue::PushResult::Closed:
                state.metrics.count_request(RequestOutcome::RejectedShutdown);
                throw shutting_down_error();
        }
        if (g.stream)
            stream(req, ex, res);
        else
            respond_whole(req, ex, res);
    }

    // What the tolerance policy did to this request (openai/fields.h), told to the operator (the
    // log, /metrics) and to the client (response headers).
    void report_tolerance(const httplib::Request& req, httplib::Response& res, const GenerationRequest& g,
                          const IgnoredFields& ignored) {
        state.metrics.count_ignored(ignored.fields.size(), ignored.tools.size());
        auto joined = [](const std::vector<std::string>& v) {
            std::string out;
            for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
            return out;
        };
        if (!ignored.fields.empty()) spdlog::debug("{} {}: ignored unknown fields: {}", req.method, req.path, joined(ignored.fields));
        if (!ignored.tools.empty()) {
            spdlog::info("{} {}: left out tools this server cannot run: {}", req.method, req.path, joined(ignored.tools));
            res.set_header("X-K3-Ignored-Tools", joined(ignored.tools));
        }
        if (!g.clamp.param.empty()) {
            state.metrics.count_max_tokens_clamped();
            spdlog::info("{} {}: {} {} lowered to {}, what the context leaves", req.method, req.path, g.clamp.param,
                         g.clamp.asked, g.clamp.granted);
            res.set_header("X-K3-Max-Tokens-Clamped",
                           g.clamp.param + "=" + std::to_string(g.clamp.asked) + "; granted=" + std::to_string(g.clamp.granted));
        }
    }

    // Non-streaming: collect everything, answer once. A client that leaves cancels the job.
    void respond_whole(const httplib::Request& req, const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
        // counted like a stream, so a shutdown waits for this answer too
        ++state.open_streams;
        struct Closed {
            std::atomic<int>& n;
            ~Closed() { --n; }
        } closed{state.open_streams};
        for (;;) {
            for (auto& e : ex->job->channel->pop_all(kPollInterval)) {
                if (e.kind == JobEvent::Kind::Error) {
                    ex->job->channel->close();
                    send_error(req, res, api_error(e.failure));
                    return;
                }
                ex->responder->collect(e);
                if (e.ends_job()) {
                    ex->job->channel->close();
                    send_json(res, 200, ex->responder->body());
                    return;
                }
            }
            if (!ex->check_client()) {
                ex->job->channel->close();
                res.status = 499;  // nobody reads it
                return;
            }
        }
    }

    // Streaming: wait briefly for the first event so that an early error is a plain HTTP error;
    // after that (or after the first ping interval) commit to 200 + SSE.
    void stream(const httplib::Request& req, const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
        // Counted from here (not from the commit), so a shutdown that cancels the job before its
        // first event still waits for this handler to answer.
        ++state.open_streams;
        auto commit_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(config().sse_ping_s));
        while (ex->pending.empty() && Clock::now() < commit_at) {
            ex->pending = ex->job->channel->pop_all(kPollInterval);
            if (!ex->check_client()) {
                ex->job->channel->close();
                res.status = 499;
                --state.open_streams;
                return;
            }
        }
        if (!ex->pending.empty() && ex->pending.front().kind == JobEvent::Kind::Error) {
            ex->job->channel->close();
            send_error(req, res, api_error(ex->pending.front().failure));
            --state.open_streams;
            return;
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        double ping_s = config().sse_ping_s;
        res.set_chunked_content_provider(
            "text/event-stream",
            [ex, ping_s](size_t, httplib::DataSink& sink) {
                // (an empty write would end httplib's chunked stream: skip it)
                auto write = [&](const std::string& s) { return s.empty() || sink.write(s.data(), s.size()); };
                bool ok = write(ex->responder->stream_start());
                auto last_write = Clock::now();
                while (ok) {
                    std::vector<JobEvent> events = std::move(ex->pending);
                    ex->pending.clear();
                    if (events.empty()) events = ex->job->channel->pop_all(kPollInterval);
                    for (const auto& e : events) {
                        if (e.kind == JobEvent::Kind::Error) {
                            write(ex->responder->stream_error(api_error(e.failure)));
                            sink.done();
                            return true;
                        }
                        ok = ok && write(ex->responder->stream_event(e));
                        if (e.ends_job()) {
                            if (ok) sink.done();
                            return ok;
                        }
                        last_write = Clock::now();
                    }
                    if (ok && events.empty() &&
                        std::chrono::duration<double>(Clock::now() - last_write).count() >= ping_s) {
                        ok = write(ex->responder->keep_alive());
                        last_write = Clock::now();
                    }
                    if (ok && !ex->check_client()) ok = false;
                }
                ex->job->request_cancel(CancelReason::ClientGone);
                return false;
            },
            [ex, this](bool success) {
                if (!success) ex->job->request_cancel(CancelReason::ClientGone);
                ex->job->channel->close();
                --state.open_streams;
            });
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
