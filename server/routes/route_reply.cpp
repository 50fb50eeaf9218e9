#include "routes/route_reply.h"

#include "anthropic/messages.h"
#include "wire/generation_request.h"

namespace k3::server {

void send_json(HttpResponse& res, int status, const json& body) {
    res.status = status;
    res.set_content(dump(body), "application/json");
}

// Errors in the shape of the API the path belongs to: Anthropic's for /v1/messages, OpenAI's
// everywhere else.
void send_error(const HttpRequest& req, HttpResponse& res, const ApiError& e) {
    if (is_anthropic_path(req.path))
        send_json(res, anthropic_status(e), anthropic_error_body(e));
    else
        send_json(res, e.status, error_body(e));
    // One Retry-After field, never two: one already set stays (the HTTP front's own refusals
    // under load carry "2" when their body is filled here, http_server.cpp answer_from_loop).
    if (int s = retry_after_seconds(e); s && !res.has_header("Retry-After"))
        res.add_header("Retry-After", std::to_string(s));
}

JsonBodyLimits json_limits(const ServerState& state) {
    return {state.config.max_json_depth, json_value_budget(state.limits.n_ctx)};
}

}  // namespace k3::server
