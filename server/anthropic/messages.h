// The Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens), as Claude Code and
// the Anthropic SDKs use it (docs/agents.md, docs/api.md "Anthropic Messages API"). A request is
// translated into the chat request it means and validated by the same parser as the OpenAI
// routes, so all three wire formats share one renderer, grammar, prompt cache and worker; only
// the answers' shapes (anthropic/response.cpp) and error bodies differ.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "wire/generation_request.h"
#include "wire/responder.h"

namespace k3::server {

// POST /v1/messages (anthropic/request.cpp).
GenerationRequest parse_messages_request(const json& body, const Tokenizer& tok, const ModelLimits& limits);
// POST /v1/messages/count_tokens: the prompt's length in tokens, however long.
int count_message_tokens(const json& body, const Tokenizer& tok, const ModelLimits& limits);

// The Responder for a Messages request: a "message" object, or its stream of typed events
// (message_start, content_block_start/_delta/_stop, message_delta, message_stop).
std::unique_ptr<Responder> make_messages_responder(const GenerationRequest& request);

// Routes whose errors take Anthropic's shape.
bool is_anthropic_path(const std::string& path);
// {"type":"error","error":{"type","message"}}: OpenAI's error types mapped to Anthropic's
// (invalid_request_error, authentication_error, permission_error, not_found_error,
// request_too_large, rate_limit_error, api_error, overloaded_error); its HTTP status (a full
// queue is 529 overloaded_error).
json anthropic_error_body(const ApiError& e);
int anthropic_status(const ApiError& e);

// Thinking blocks carry an opaque signature that comes back in the history: ours holds the
// thinking text itself, so a client that shows no thinking (display "omitted") still sends the
// reasoning back and the next turn renders, and reuses the prompt cache, as the model wrote it.
std::string thinking_signature(const std::string& thinking);
// The text a signature of ours holds; nullopt for anything else (another server's signature).
std::optional<std::string> thinking_from_signature(const std::string& signature);

}  // namespace k3::server
