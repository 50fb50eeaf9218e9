// The generation routes (POST /v1/completions, /v1/chat/completions, /v1/responses,
// /v1/messages): the body is parsed and validated on the HTTP thread, a Job is queued for the
// worker, and its events are answered whole or streamed as SSE while the client is watched
// (docs/architecture.md "A request's way").
#pragma once
#include <memory>
#include <string>

#include "http/message.h"
#include "wire/fields.h"
#include "wire/generation_request.h"
#include "wire/responder.h"
#include "routes/server_state.h"

namespace k3::server {

// The Responder for the request's endpoint (openai/response.h, responses/responses.h,
// anthropic/messages.h). `model_fingerprint` is the served model's.
std::unique_ptr<Responder> make_responder(const GenerationRequest& request, const std::string& model_fingerprint);

struct Exchange;

class GenerationRoute {
public:
    explicit GenerationRoute(ServerState& s) : state_(s) {}

    void generate(const HttpRequest& req, HttpResponse& res, Endpoint endpoint);

private:
    void compile_grammar(GenerationParams& params, const GrammarLimits& limits);
    void report_tolerance(const HttpRequest& req, HttpResponse& res, const GenerationRequest& g,
                          const IgnoredFields& ignored);
    void respond_whole(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, HttpResponse& res);
    void stream(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, HttpResponse& res);

    const DaemonConfig& config() const { return state_.config; }

    ServerState& state_;
};

}  // namespace k3::server
