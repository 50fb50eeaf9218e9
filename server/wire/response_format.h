// Constrained output requests -> a compiled Grammar: OpenAI's `response_format`
// ({type: text | json_object | json_schema}) and llama-server's top-level `json_schema`. Runs on
// the HTTP thread, so a schema the grammar engine cannot enforce is a 400 naming the keyword
// before anything is queued; so is one over a compile budget (GrammarLimits). The route then
// compiles its matcher on the same thread (routes/generation_route.cpp) and the worker only runs it.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "k3/chat.h"
#include "k3/grammar.h"

namespace k3::server {

// Null when the request asks for free text. Throws ApiError(400). `schemas` (JsonBody::schemas,
// may be null: keys sorted) gives the schema's property order, which the output follows. A schema
// over one of `limits` is a GrammarRefusal (400 grammar_too_large).
std::shared_ptr<const Grammar> parse_response_format(const nlohmann::json& body, const nlohmann::ordered_json* schemas,
                                                     const GrammarLimits& limits = {});

// What the prompt tells the model about the same field (docs/model.md "Chat layout"): the
// format's type and, for json_schema, its `schema` (else its `json_schema`, else the whole
// json_schema object; llama-server's top-level `json_schema` is the schema). Call after
// parse_response_format accepted the body.
ChatResponseFormat response_format_prompt(const nlohmann::json& body);

}  // namespace k3::server
