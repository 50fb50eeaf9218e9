// The OpenAI chat/completions and completions requests: their JSON parsed and validated into the
// wire layer's GenerationRequest (wire/generation_request.h), everything that can be checked
// before a job is queued. The Responses and Messages APIs translate their bodies into the chat
// request they mean and parse it here.
#pragma once
#include <nlohmann/json.hpp>

#include "k3/tokenizer.h"
#include "wire/generation_request.h"

namespace k3::server {

// `schemas` is JsonBody::schemas (wire/json_body.h; optional): a JSON schema's property order
// comes from it, since `json` objects keep their keys sorted.
GenerationRequest parse_completion_request(const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                           const nlohmann::ordered_json* schemas = nullptr);
GenerationRequest parse_chat_request(const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                     const nlohmann::ordered_json* schemas = nullptr);

}  // namespace k3::server
