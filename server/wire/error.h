// Every OpenAI error the server answers, with its HTTP status: request validation (bad_request),
// the daemon's own refusals (loading, queue full, draining, auth) and the jobs' failures as the
// worker reports them (JobFailure). Nothing else in the server spells an HTTP status or an
// OpenAI error type/code.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "k3/grammar.h"
#include "worker/job_outcome.h"

namespace k3::server {

using json = nlohmann::json;

// An error answered with an OpenAI-shaped body: {"error":{"message","type","param","code"}}.
struct ApiError : std::runtime_error {
    ApiError(int status_, std::string type_, std::string code_, std::string param_, const std::string& message)
        : std::runtime_error(message), status(status_), type(std::move(type_)), code(std::move(code_)),
          param(std::move(param_)) {}
    int status;
    std::string type, code, param;
};

ApiError bad_request(const std::string& param, const std::string& message, const std::string& code = "invalid_value");

// A request's grammar over one of its compile budgets: 400, code "grammar_too_large", the
// message naming what passed which limit and the setting that raises it (--grammar-max-enum
// 10000). The limit rides along so the route can count the refusal per limit in /metrics.
struct GrammarRefusal : ApiError {
    GrammarRefusal(const std::string& param, const GrammarBudgetError& e);
    GrammarLimit limit;
};
json error_body(int status, const std::string& type, const std::string& code, const std::string& param,
                const std::string& message);
json error_body(const ApiError& e);
// Seconds a client should wait before retrying (Retry-After), or 0 when retrying will not help.
int retry_after_seconds(const ApiError& e);

// A job's failure as the client sees it (499 cancelled, 503 shutting down, 504 deadline, 400
// context/prompt, 500 engine).
ApiError api_error(const JobFailure& failure);

// The daemon's own refusals.
ApiError loading_error(const std::string& status);
ApiError model_failed_error(const std::string& status);
ApiError shutting_down_error();
ApiError queue_full_error(size_t capacity);
ApiError unauthorized_error();
ApiError not_found_error(const std::string& message);
ApiError internal_error(const std::string& message);
// A k3::Error thrown while handling a request: usage errors are the client's, the rest ours.
ApiError engine_error(bool usage, const std::string& message);
// An error the HTTP front produced itself (404 no route, 413 body too large, 400 bad request line).
ApiError transport_error(int status, const std::string& message);

}  // namespace k3::server
