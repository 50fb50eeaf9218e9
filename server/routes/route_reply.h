// How every route answers: a JSON body, or an error in the shape of the API the path belongs to
// (Anthropic's for /v1/messages, OpenAI's everywhere else), and the JSON limits request bodies
// are read with.
#pragma once
#include "http/message.h"
#include "wire/error.h"
#include "wire/json_body.h"
#include "routes/server_state.h"

namespace k3::server {

void send_json(HttpResponse& res, int status, const json& body);
// Sets status, body and, for a 503, one Retry-After (kept if `res` already has one).
void send_error(const HttpRequest& req, HttpResponse& res, const ApiError& e);
// --max-json-depth, and a value budget from the context size (wire/json_body.h).
JsonBodyLimits json_limits(const ServerState& state);

}  // namespace k3::server
