#include "routes/request_gate.h"

#include <algorithm>
#include <cctype>

#include "k3/fnv1a.h"

#include "routes/route_reply.h"
#include "web_assets.h"

namespace k3::server {

namespace {

// Figures that follow /metrics' rules: public unless --metrics-auth, answered while loading.
bool is_figures_path(const std::string& path) { return path == "/metrics" || path == "/v1/status"; }

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

}  // namespace

bool is_ui_path(const std::string& path) {
    return path == "/" || (path.size() > 1 && find_web_asset(path.substr(1)) != nullptr);
}

std::string presented_api_key(const HttpRequest& req) {
    const std::string header = req.header("Authorization");
    std::string key;
    if (header.size() > 7 && iequals(header.substr(0, 7), "Bearer ")) key = header.substr(7);  // scheme is case-insensitive
    if (key.empty()) key = req.header("X-Api-Key");
    return key;
}

uint64_t prompt_cache_partition(const DaemonConfig& config, const HttpRequest& req) {
    if (config.api_keys.empty()) return 0;
    const std::string key = presented_api_key(req);
    // The gate let the request through, so the key is one of the configured ones; hashed with a
    // prefix of its own so the value is no other FNV identity in the daemon.
    const uint64_t h = Fnv1a().add("k3serve prompt cache partition\n").add(key).value();
    return h == 0 ? 1 : h;
}

RequestGate::RequestGate(ServerState& s) : state_(s) {
    // DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends
    // "Host: evil.example". A loopback daemon without a key serves loopback names only.
    if (is_loopback_address(config().host) && config().api_keys.empty()) {
        allowed_hosts_ = {"localhost", "127.0.0.1", "[::1]"};
        for (const auto& h : config().allowed_hosts) allowed_hosts_.push_back(host_name(h));
    }
}

void RequestGate::add_cors(const HttpRequest& req, HttpResponse& res) const {
    const std::string& allowed = config().cors_origin;
    if (allowed.empty()) return;
    if (allowed == "*") {
        res.add_header("Access-Control-Allow-Origin", "*");
    } else if (req.header("Origin") == allowed) {
        res.add_header("Access-Control-Allow-Origin", allowed);
        res.add_header("Vary", "Origin");
    } else {
        return;
    }
    res.add_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    // Whatever the client asks for (the OpenAI SDK sends X-Stainless-* headers, others
    // X-Api-Key): the origin check above is the gate, not the header names.
    std::string asked = req.header("Access-Control-Request-Headers");
    bool plain = std::all_of(asked.begin(), asked.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' || c == ' ';
    });
    res.add_header("Access-Control-Allow-Headers", !asked.empty() && plain ? asked : "Authorization, Content-Type, X-Api-Key");
    res.add_header("Access-Control-Max-Age", "600");
}

bool RequestGate::authorized(const HttpRequest& req) const {
    if (config().api_keys.empty()) return true;
    const std::string key = presented_api_key(req);
    for (const auto& k : config().api_keys)
        if (same_key(k, key)) return true;
    return false;
}

HttpServer::HandlerResponse RequestGate::check(const HttpRequest& req, HttpResponse& res) {
    if (!allowed_hosts_.empty() && req.has_header("Host")) {
        std::string host = host_name(req.header("Host"));
        bool ok = std::any_of(allowed_hosts_.begin(), allowed_hosts_.end(), [&](const std::string& h) { return iequals(h, host); });
        if (!ok) {
            state_.metrics.count_request(RequestOutcome::Invalid);
            send_error(req, res, ApiError(403, "permission_error", "host_not_allowed", "",
                                     "Host '" + host + "' is not served: this daemon listens on loopback without an "
                                     "API key and answers only loopback names (add --allowed-hosts or --api-key)"));
            return HttpServer::HandlerResponse::Handled;
        }
    }
    add_cors(req, res);
    if (req.method == "OPTIONS") {
        res.status = config().cors_origin.empty() ? 405 : 204;
        if (res.status == 405) res.add_header("Allow", "GET, HEAD, POST");
        return HttpServer::HandlerResponse::Handled;
    }
    // Only JSON bodies: a form or text/plain POST is a "simple" cross-site request that a
    // browser sends without asking first.
    if (req.method == "POST" && !iequals(media_type(req.header("Content-Type")), "application/json")) {
        state_.metrics.count_request(RequestOutcome::Invalid);
        send_error(req, res, ApiError(415, "invalid_request_error", "unsupported_media_type", "",
                                 "POST bodies must be sent as Content-Type: application/json"));
        return HttpServer::HandlerResponse::Handled;
    }
    const std::string& path = req.path;
    bool is_public = path == "/health" || path == "/v1/health" || is_ui_path(path);
    bool needs_key = !is_public && (!is_figures_path(path) || config().metrics_auth);
    if (needs_key && !authorized(req)) {
        state_.metrics.count_request(RequestOutcome::Unauthorized);
        send_error(req, res, unauthorized_error());
        return HttpServer::HandlerResponse::Handled;
    }
    Phase phase = state_.phase.load();
    if (!is_public && !is_figures_path(path) && phase == Phase::Loading) {
        state_.metrics.count_request(RequestOutcome::RejectedLoading);
        send_error(req, res, loading_error(state_.status()));
        return HttpServer::HandlerResponse::Handled;
    }
    if (!is_public && !is_figures_path(path) && phase == Phase::Failed) {
        send_error(req, res, model_failed_error(state_.status()));
        return HttpServer::HandlerResponse::Handled;
    }
    return HttpServer::HandlerResponse::Unhandled;
}

}  // namespace k3::server
