// OpenAI JSON <-> the server's native structs: request parsing and validation (everything that
// can be checked before a job is queued), response and stream-chunk building, and the error
// body. No HTTP in here: http.cpp calls these and owns the sockets.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "job.h"
#include "k3/chat.h"
#include "k3/tokenizer.h"

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
json error_body(int status, const std::string& type, const std::string& code, const std::string& param,
                const std::string& message);
json error_body(const ApiError& e);

// JSON text -> value, with a nesting limit. Throws ApiError(400) naming the problem (including
// ill-formed UTF-8 inside strings).
json parse_json_body(const std::string& body, int max_depth);

// What validation needs to know about the served model.
struct ModelLimits {
    std::string model_name;
    int n_ctx = 0;             // session context
    int max_prompt_tokens = 0; // <= n_ctx - 1
    int n_vocab = 0;
};

// A validated request, ready to become a Job.
struct GenerationRequest {
    std::vector<int32_t> prompt;
    GenerationParams params;
    bool stream = false;
    bool include_usage = false;
    bool echo = false;          // completions: prepend the prompt text
    std::string echo_text;
    std::string model;          // as reported back
};

GenerationRequest parse_completion_request(const json& body, const Tokenizer& tok, const ModelLimits& limits);
GenerationRequest parse_chat_request(const json& body, const Tokenizer& tok, const ModelLimits& limits);

// --- responses -------------------------------------------------------------------------------

json usage_json(const Usage& u);
// Logprobs in the completions layout ({tokens, token_logprobs, top_logprobs, text_offset}).
json completion_logprobs_json(const std::vector<TokenLogprob>& lps, size_t text_offset);
// Logprobs in the chat layout ({content: [{token, logprob, bytes, top_logprobs}]}).
json chat_logprobs_json(const std::vector<TokenLogprob>& lps);

struct ResponseIds {
    std::string id;          // "cmpl-…" / "chatcmpl-…"
    long long created = 0;   // unix seconds, same on every chunk
    std::string model;
    std::string fingerprint; // system_fingerprint
};

// Serialises with invalid UTF-8 replaced by U+FFFD (a token's bytes may be a partial character).
std::string dump(const json& j);

}  // namespace k3::server
