#include "http.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "connection_probe.h"
#include "openai.h"
#include "k3/error.h"
#include "web_assets.h"

namespace k3::server {

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(50);

const char* reason_type(int status) {
    switch (status) {
        case 400: return "invalid_request_error";
        case 401: return "authentication_error";
        case 403: return "permission_error";
        case 404: return "not_found_error";
        case 405: return "invalid_request_error";
        case 413: return "invalid_request_error";
        case 501: return "not_supported_error";
        case 503: return "unavailable_error";
        default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

void send_json(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
    send_json(res, e.status, error_body(e));
    if (e.status == 503) res.set_header("Retry-After", e.code == "queue_full" ? "2" : "5");
}

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)rng());
    return std::string(prefix) + buf;
}

bool is_ui_path(const std::string& path) {
    return path == "/" || path == "/index.html" || path == "/app.js" || path == "/style.css";
}

// Constant-time comparison, so key checks do not leak a prefix through timing.
bool same_key(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

// Everything one generation request needs while it streams: the job, how to shape chunks, and
// what has been said so far.
struct Exchange {
    std::shared_ptr<Job> job;
    bool chat = false;
    bool include_usage = false;
    bool echo = false;
    std::string echo_text;
    ResponseIds ids;
    ConnectionProbe probe;
    std::optional<Clock::time_point> deadline;
    size_t text_offset = 0;           // completions logprobs: offset of the next token's text
    std::vector<JobEvent> pending;    // received before streaming began

    Exchange(std::shared_ptr<Job> j, const httplib::Request& req)
        : job(std::move(j)), probe(req.remote_addr, req.remote_port, req.local_port), deadline(job->deadline) {}

    // The client left, or the deadline passed: tell the worker (the worker answers the deadline).
    bool check_client() {
        if (probe.gone()) {
            job->request_cancel(CancelReason::ClientGone);
            return false;
        }
        if (deadline && Clock::now() >= *deadline) job->request_cancel(CancelReason::Deadline);
        return true;
    }

    json chunk_base() const {
        json j = {{"id", ids.id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", ids.created},
                  {"model", ids.model},
                  {"system_fingerprint", ids.fingerprint}};
        if (include_usage) j["usage"] = nullptr;
        return j;
    }

    // One chunk for a Delta or the Done event (finish_reason set on the latter).
    json chunk(const JobEvent& e, bool first_chat_chunk) {
        json j = chunk_base();
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        if (chat) {
            json delta = json::object();
            if (first_chat_chunk) delta["role"] = "assistant";
            if (!e.reasoning.empty()) delta["reasoning_content"] = e.reasoning;
            if (!e.content.empty() || first_chat_chunk) delta["content"] = e.content;
            choice["delta"] = delta;
            if (!e.logprobs.empty()) choice["logprobs"] = chat_logprobs_json(e.logprobs);
        } else {
            choice["text"] = e.content;
            if (!e.logprobs.empty()) {
                choice["logprobs"] = completion_logprobs_json(e.logprobs, text_offset);
                for (const auto& lp : e.logprobs) text_offset += lp.text.size();
            }
        }
        if (e.kind == JobEvent::Kind::Done) choice["finish_reason"] = e.finish_reason;
        j["choices"] = json::array({choice});
        return j;
    }
};

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace

struct HttpServer::Impl {
    ServerState& state;
    httplib::Server server;
    std::thread listener;

    explicit Impl(ServerState& s) : state(s) { install(); }

    const DaemonConfig& config() const { return state.config; }

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
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
    }

    bool authorized(const httplib::Request& req) const {
        if (config().api_keys.empty()) return true;
        std::string header = req.get_header_value("Authorization");
        std::string key;
        if (header.rfind("Bearer ", 0) == 0) key = header.substr(7);
        if (key.empty()) key = req.get_header_value("X-Api-Key");
        for (const auto& k : config().api_keys)
            if (same_key(k, key)) return true;
        return false;
    }

    httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res) {
        add_cors(req, res);
        if (req.method == "OPTIONS") {
            res.status = config().cors_origin.empty() ? 405 : 204;
            return httplib::Server::HandlerResponse::Handled;
        }
        const std::string& path = req.path;
        bool is_public = path == "/health" || path == "/v1/health" || is_ui_path(path);
        bool needs_key = !is_public && (path != "/metrics" || config().metrics_auth);
        if (needs_key && !authorized(req)) {
            state.metrics.count_request("unauthorized");
            send_error(res, ApiError(401, "authentication_error", "invalid_api_key", "",
                                     "Invalid or missing API key: send \"Authorization: Bearer <key>\""));
            return httplib::Server::HandlerResponse::Handled;
        }
        Phase phase = state.phase.load();
        if (!is_public && path != "/metrics" && phase == Phase::Loading) {
            state.metrics.count_request("rejected_loading");
            send_error(res, ApiError(503, "unavailable_error", "model_loading", "",
                                     "Loading model (" + state.status() + "); retry shortly"));
            return httplib::Server::HandlerResponse::Handled;
        }
        if (!is_public && path != "/metrics" && phase == Phase::Failed) {
            send_error(res, ApiError(503, "unavailable_error", "model_failed", "", "the model failed to load: " + state.status()));
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    }

    // Every handler runs inside this: OpenAI-shaped errors for anything thrown.
    template <class Fn>
    httplib::Server::Handler wrap(Fn fn) {
        return [this, fn](const httplib::Request& req, httplib::Response& res) {
            try {
                fn(req, res);
            } catch (const ApiError& e) {
                if (e.status < 500) state.metrics.count_request("invalid");
                send_error(res, e);
            } catch (const Error& e) {
                state.metrics.count_request("invalid");
                send_error(res, ApiError(e.kind() == ErrorKind::Usage ? 400 : 500,
                                         e.kind() == ErrorKind::Usage ? "invalid_request_error" : "server_error", "", "",
                                         e.what()));
            } catch (const std::exception& e) {
                state.metrics.count_request("error");
                spdlog::error("{} {}: {}", req.method, req.path, e.what());
                send_error(res, ApiError(500, "server_error", "internal_error", "", e.what()));
            }
        };
    }

    // --- routes ------------------------------------------------------------------------------

    void install() {
        server.set_payload_max_length(config().max_body_bytes);
        server.set_read_timeout(60, 0);
        server.set_write_timeout(std::chrono::seconds(std::max(1, int(config().slow_client_s))));
        server.set_keep_alive_max_count(1000);
        server.set_keep_alive_timeout(5);  // also bounds how long shutdown waits for idle connections
        int n_threads = config().http_threads;
        server.new_task_queue = [n_threads] { return new httplib::ThreadPool(size_t(n_threads)); };
        server.set_pre_routing_handler([this](const auto& req, auto& res) { return pre_route(req, res); });
        server.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "unknown exception";
            try {
                if (ep) std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            state.metrics.count_request("error");
            spdlog::error("{} {}: {}", req.method, req.path, what);
            send_error(res, ApiError(500, "server_error", "internal_error", "", what));
        });
        // Fills in an OpenAI error body for errors httplib produces itself (404, 413, 400).
        server.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
            if (res.body.empty() && res.status != 204) {
                std::string message = res.status == 404   ? "no route for " + req.method + " " + req.path
                                      : res.status == 413 ? "the request body is larger than " +
                                                                std::to_string(config().max_body_bytes) + " bytes"
                                                          : "HTTP error " + std::to_string(res.status);
                if (res.status == 413 || res.status == 404) state.metrics.count_request("invalid");
                send_json(res, res.status, error_body(res.status, reason_type(res.status), "", "", message));
            }
            return httplib::Server::HandlerResponse::Handled;
        }));
        server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
            spdlog::debug("{} {} -> {}", req.method, req.path, res.status);
        });

        server.Get("/health", wrap([this](const auto&, auto& res) { health(res); }));
        server.Get("/v1/health", wrap([this](const auto&, auto& res) { health(res); }));
        server.Get("/metrics", wrap([this](const auto&, auto& res) {
                       res.set_content(state.metrics.render(state.queue.size(), state.queue.capacity(),
                                                            state.phase.load() == Phase::Ready),
                                       "text/plain; version=0.0.4");
                   }));
        server.Get("/v1/models", wrap([this](const auto&, auto& res) { models(res); }));
        server.Get("/models", wrap([this](const auto&, auto& res) { models(res); }));
        server.Get("/props", wrap([this](const auto&, auto& res) { props(res); }));
        server.Post("/tokenize", wrap([this](const auto& req, auto& res) { tokenize(req, res); }));
        server.Post("/detokenize", wrap([this](const auto& req, auto& res) { detokenize(req, res); }));
        for (const char* path : {"/v1/completions", "/completions"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generate(req, res, false); }));
        for (const char* path : {"/v1/chat/completions", "/chat/completions"})
            server.Post(path, wrap([this](const auto& req, auto& res) { generate(req, res, true); }));
        if (config().web_ui)
            for (const char* path : {"/", "/index.html", "/app.js", "/style.css"})
                server.Get(path, wrap([this](const auto& req, auto& res) { ui(req, res); }));
    }

    void health(httplib::Response& res) {
        switch (state.phase.load()) {
            case Phase::Ready: send_json(res, 200, {{"status", "ok"}}); return;
            case Phase::Loading:
                send_error(res, ApiError(503, "unavailable_error", "model_loading", "", "Loading model (" + state.status() + ")"));
                return;
            case Phase::Draining:
                send_error(res, ApiError(503, "unavailable_error", "shutting_down", "", "the server is shutting down"));
                return;
            case Phase::Failed:
                send_error(res, ApiError(503, "unavailable_error", "model_failed", "", "the model failed to load: " + state.status()));
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
        send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
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
                  {"total_slots", 1},
                  {"queue_capacity", state.queue.capacity()},
                  {"config", config().to_json()},
                  {"build", K3_VERSION},
                  {"default_generation_settings",
                   {{"temperature", 1.0}, {"top_p", 1.0}, {"completions_max_tokens", 16},
                    {"chat_max_tokens", "rest of the context"}, {"thinking", false}}}};
        send_json(res, 200, j);
    }

    void tokenize(const httplib::Request& req, httplib::Response& res) {
        json body = parse_json_body(req.body, config().max_json_depth);
        if (!body.is_object()) throw bad_request("", "the request body must be a JSON object", "invalid_type");
        const json* text = body.contains("content") ? &body["content"] : body.contains("prompt") ? &body["prompt"] : nullptr;
        if (!text || !text->is_string()) throw bad_request("content", "'content' must be a string", "invalid_type");
        bool allow_special = body.value("add_special", false) || body.value("parse_special", false);
        auto ids = state.tokenizer->encode(text->get<std::string>(), allow_special);
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
        json body = parse_json_body(req.body, config().max_json_depth);
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

    void ui(const httplib::Request& req, httplib::Response& res) {
        std::string name = req.path == "/" ? "index.html" : req.path.substr(1);
        const WebAsset* asset = find_web_asset(name);
        if (!asset) throw ApiError(404, "not_found_error", "", "", "no such file");
        if (!config().web_dir.empty()) {
            // Only the UI's own three files, never an arbitrary path.
            std::ifstream in(config().web_dir + "/" + name, std::ios::binary);
            if (!in) throw ApiError(404, "not_found_error", "", "", "web-dir: cannot read " + name);
            std::stringstream ss;
            ss << in.rdbuf();
            res.set_content(ss.str(), asset->content_type);
        } else {
            res.set_content(reinterpret_cast<const char*>(asset->data), asset->size, asset->content_type);
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Content-Type-Options", "nosniff");
        if (name == "index.html") {
            res.set_header("Content-Security-Policy",
                           "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'");
            res.set_header("X-Frame-Options", "DENY");
        }
    }

    // --- generation --------------------------------------------------------------------------

    void generate(const httplib::Request& req, httplib::Response& res, bool chat) {
        if (state.phase.load() == Phase::Draining) {
            state.metrics.count_request("rejected_shutdown");
            throw ApiError(503, "unavailable_error", "shutting_down", "", "the server is shutting down");
        }
        json body = parse_json_body(req.body, config().max_json_depth);
        GenerationRequest g = chat ? parse_chat_request(body, *state.tokenizer, state.limits)
                                   : parse_completion_request(body, *state.tokenizer, state.limits);
        auto job = std::make_shared<Job>();
        job->id = state.next_job_id++;
        job->prompt = std::move(g.prompt);
        job->params = std::move(g.params);
        if (config().deadline_s > 0)
            job->deadline = job->enqueued_at + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(config().deadline_s));
        auto ex = std::make_shared<Exchange>(job, req);
        ex->chat = chat;
        ex->include_usage = g.include_usage;
        ex->echo = g.echo;
        ex->echo_text = g.echo ? g.echo_text : "";
        ex->text_offset = ex->echo_text.size();
        ex->ids = {random_id(chat ? "chatcmpl-" : "cmpl-"), (long long)std::time(nullptr), g.model,
                   "k3serve-" K3_VERSION "-" + state.info.fingerprint.substr(0, 12)};

        switch (state.queue.push(job)) {
            case JobQueue::PushResult::Ok: break;
            case JobQueue::PushResult::Full:
                state.metrics.count_request("rejected_full");
                throw ApiError(503, "unavailable_error", "queue_full", "",
                               "the server is busy: " + std::to_string(state.queue.capacity()) +
                                   " requests are already waiting; retry shortly");
            case JobQueue::PushResult::Closed:
                state.metrics.count_request("rejected_shutdown");
                throw ApiError(503, "unavailable_error", "shutting_down", "", "the server is shutting down");
        }
        if (g.stream)
            stream(ex, res);
        else
            respond_whole(ex, res);
    }

    // Non-streaming: collect everything, answer once. A client that leaves cancels the job.
    void respond_whole(const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
        std::string content = ex->echo_text, reasoning;
        std::vector<TokenLogprob> logprobs;
        for (;;) {
            for (auto& e : ex->job->channel->pop_all(kPollInterval)) {
                content += e.content;
                reasoning += e.reasoning;
                logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
                if (e.kind == JobEvent::Kind::Error) {
                    ex->job->channel->close();
                    send_error(res, ApiError(e.http_status, e.error_type, e.error_code, "", e.message));
                    return;
                }
                if (e.kind == JobEvent::Kind::Done) {
                    ex->job->channel->close();
                    json choice = {{"index", 0}, {"finish_reason", e.finish_reason}, {"logprobs", nullptr}};
                    if (ex->chat) {
                        json message = {{"role", "assistant"}, {"content", content}, {"refusal", nullptr}};
                        if (ex->job->params.thinking) message["reasoning_content"] = reasoning;
                        choice["message"] = message;
                        if (ex->job->params.logprobs >= 0) choice["logprobs"] = chat_logprobs_json(logprobs);
                    } else {
                        choice["text"] = content;
                        if (ex->job->params.logprobs >= 0)
                            choice["logprobs"] = completion_logprobs_json(logprobs, ex->echo_text.size());
                    }
                    send_json(res, 200,
                              {{"id", ex->ids.id},
                               {"object", ex->chat ? "chat.completion" : "text_completion"},
                               {"created", ex->ids.created},
                               {"model", ex->ids.model},
                               {"system_fingerprint", ex->ids.fingerprint},
                               {"choices", json::array({choice})},
                               {"usage", usage_json(e.usage)}});
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
    void stream(const std::shared_ptr<Exchange>& ex, httplib::Response& res) {
        auto commit_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(config().sse_ping_s));
        while (ex->pending.empty() && Clock::now() < commit_at) {
            ex->pending = ex->job->channel->pop_all(kPollInterval);
            if (!ex->check_client()) {
                ex->job->channel->close();
                res.status = 499;
                return;
            }
        }
        if (!ex->pending.empty() && ex->pending.front().kind == JobEvent::Kind::Error) {
            const JobEvent& e = ex->pending.front();
            ex->job->channel->close();
            send_error(res, ApiError(e.http_status, e.error_type, e.error_code, "", e.message));
            return;
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_header("X-Accel-Buffering", "no");
        ++state.open_streams;
        double ping_s = config().sse_ping_s;
        res.set_chunked_content_provider(
            "text/event-stream",
            [ex, ping_s](size_t, httplib::DataSink& sink) {
                auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
                bool ok = true;
                bool first = true;
                if (ex->chat) {
                    ok = write(sse(ex->chunk(JobEvent{}, true)));
                    first = false;
                } else if (ex->echo && !ex->echo_text.empty()) {
                    JobEvent echo;
                    echo.content = ex->echo_text;
                    ok = write(sse(ex->chunk(echo, false)));
                }
                (void)first;
                auto last_write = Clock::now();
                while (ok) {
                    std::vector<JobEvent> events = std::move(ex->pending);
                    ex->pending.clear();
                    if (events.empty()) events = ex->job->channel->pop_all(kPollInterval);
                    for (const auto& e : events) {
                        if (e.kind == JobEvent::Kind::Error) {
                            json err = error_body(e.http_status, e.error_type, e.error_code, "", e.message);
                            write(sse(err));
                            write("data: [DONE]\n\n");
                            sink.done();
                            return true;
                        }
                        if (e.kind == JobEvent::Kind::Done) {
                            ok = write(sse(ex->chunk(e, false)));
                            if (ok && ex->include_usage) {
                                json u = ex->chunk_base();
                                u["choices"] = json::array();
                                u["usage"] = usage_json(e.usage);
                                ok = write(sse(u));
                            }
                            if (ok) ok = write("data: [DONE]\n\n");
                            if (ok) sink.done();
                            return ok;
                        }
                        ok = ok && write(sse(ex->chunk(e, false)));
                        last_write = Clock::now();
                    }
                    if (ok && events.empty() &&
                        std::chrono::duration<double>(Clock::now() - last_write).count() >= ping_s) {
                        ok = write(": ping\n\n");
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

HttpServer::HttpServer(ServerState& state) : impl_(std::make_unique<Impl>(state)) {}
HttpServer::~HttpServer() { stop(); }

int HttpServer::bind(const std::string& host, int port) {
    int bound = port == 0 ? impl_->server.bind_to_any_port(host) : (impl_->server.bind_to_port(host, port) ? port : -1);
    if (bound < 0)
        throw Error(ErrorKind::Runtime, "cannot listen on " + host + ":" + std::to_string(port) +
                                            " (address in use, or not an address of this machine?)");
    return bound;
}

void HttpServer::start() {
    impl_->listener = std::thread([this] { impl_->server.listen_after_bind(); });
}

void HttpServer::stop() {
    if (!impl_->listener.joinable()) return;
    // httplib ignores stop() until its listen loop is running: wait for it to get there.
    for (int i = 0; i < 5000 && !impl_->server.is_running(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    impl_->server.stop();
    impl_->listener.join();
}

}  // namespace k3::server
