// Constrained output requests -> a compiled Grammar: OpenAI's `response_format`
// ({type: text | json_object | json_schema}) and llama-server's top-level `json_schema`. Runs on
// the HTTP thread, so a schema the grammar engine cannot enforce is a 400 naming the keyword
// before anything is queued. The worker runs the grammar (worker/worker.cpp).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "k3/grammar.h"

namespace k3::server {

// Null when the request asks for free text. Throws ApiError(400). `raw_body` (the request text,
// may be empty) gives the schema's property order, which the output follows.
std::shared_ptr<const Grammar> parse_response_format(const nlohmann::json& body, std::string_view raw_body);

// For /v1/responses, which is parsed as the chat request it means: the request text reduced to
// {"response_format":{"json_schema":{"schema":S}}} with S = its text.format.schema in the
// client's key order ("" when there is none), to pass as that chat request's raw body.
std::string responses_schema_source(std::string_view raw_body);

}  // namespace k3::server
