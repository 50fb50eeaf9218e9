// The OpenAI Responses API (POST /v1/responses): its request translated to the chat request it
// means (responses/request.cpp), and its Responder, which shapes the worker's events into response
// items and their stream events (responses/response.cpp).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "k3/tokenizer.h"
#include "wire/generation_request.h"
#include "wire/responder.h"

namespace k3::server {

// `schemas` is JsonBody::schemas (wire/json_body.h; optional).
GenerationRequest parse_responses_request(const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                          const nlohmann::ordered_json* schemas = nullptr);
std::unique_ptr<Responder> make_responses_responder(const GenerationRequest& request);

}  // namespace k3::server
