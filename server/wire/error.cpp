#include "wire/error.h"

#include <algorithm>
#include <cstdio>

namespace k3::server {

namespace {

const char* type_for_status(int status) {
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

}  // namespace

ApiError bad_request(const std::string& param, const std::string& message, const std::string& code) {
    return ApiError(400, "invalid_request_error", code, param, message);
}

namespace {

// The serve setting that sets a budget (settings/daemon_settings.cpp): --grammar-max-NAME.
std::string grammar_limit_flag(GrammarLimit limit) {
    std::string flag = std::string("--grammar-max-") + grammar_limit_name(limit);
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
}

std::string refusal_message(const GrammarBudgetError& e) {
    char value[32];
    std::snprintf(value, sizeof value, "%.0f", e.limit_value());
    return std::string(e.what()) + " (" + grammar_limit_flag(e.limit()) + " " + value + ")";
}

}  // namespace

GrammarRefusal::GrammarRefusal(const std::string& param, const GrammarBudgetError& e)
    : ApiError(400, "invalid_request_error", "grammar_too_large", param, refusal_message(e)), limit(e.limit()) {}

// The status is not in the body: code is a string or null, never the status number
// (docs/api.md, the error table).
json error_body(int /*status*/, const std::string& type, const std::string& code, const std::string& param,
                const std::string& message) {
    return json{{"error",
                 {{"message", message},
                  {"type", type},
                  {"param", param.empty() ? json(nullptr) : json(param)},
                  {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

json error_body(const ApiError& e) { return error_body(e.status, e.type, e.code, e.param, e.what()); }

int retry_after_seconds(const ApiError& e) {
    if (e.status != 503) return 0;
    return e.code == "queue_full" ? 2 : 5;
}

ApiError api_error(const JobFailure& f) {
    switch (f.kind) {
        case FailureKind::Cancelled: return ApiError(499, "cancelled", "cancelled", "", f.message);
        case FailureKind::ShuttingDown: return ApiError(503, "unavailable_error", "shutting_down", "", f.message);
        case FailureKind::Deadline: return ApiError(504, "timeout_error", "deadline_exceeded", "", f.message);
        case FailureKind::ContextFull: return bad_request("", f.message, "context_length_exceeded");
        case FailureKind::InvalidPrompt: return bad_request("", f.message, "invalid_prompt");
        case FailureKind::EngineFailed: return ApiError(500, "server_error", "engine_error", "", f.message);
        case FailureKind::ModelUnavailable: return ApiError(503, "unavailable_error", "model_unhealthy", "", f.message);
        case FailureKind::Internal: return ApiError(500, "server_error", "internal_error", "", f.message);
    }
    return ApiError(500, "server_error", "internal_error", "", f.message);
}

ApiError loading_error(const std::string& status) {
    return ApiError(503, "unavailable_error", "model_loading", "", "Loading model (" + status + "); retry shortly");
}

ApiError model_failed_error(const std::string& status) {
    return ApiError(503, "unavailable_error", "model_failed", "", "the model failed to load: " + status);
}

ApiError shutting_down_error() {
    return ApiError(503, "unavailable_error", "shutting_down", "", "the server is shutting down");
}

ApiError queue_full_error(size_t capacity) {
    return ApiError(503, "unavailable_error", "queue_full", "",
                    "the server is busy: " + std::to_string(capacity) + " requests are already waiting; retry shortly");
}

ApiError unauthorized_error() {
    return ApiError(401, "authentication_error", "invalid_api_key", "",
                    "Invalid or missing API key: send \"Authorization: Bearer <key>\"");
}

ApiError not_found_error(const std::string& message) { return ApiError(404, "not_found_error", "", "", message); }

ApiError internal_error(const std::string& message) {
    return ApiError(500, "server_error", "internal_error", "", message);
}

ApiError engine_error(bool usage, const std::string& message) {
    return usage ? ApiError(400, "invalid_request_error", "", "", message)
                 : ApiError(500, "server_error", "", "", message);
}

ApiError transport_error(int status, const std::string& message) {
    return ApiError(status, type_for_status(status), "", "", message);
}

}  // namespace k3::server
