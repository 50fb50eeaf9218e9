// The tokenizer's routes: POST /tokenize, /detokenize and Anthropic's /v1/messages/count_tokens
// (docs/api.md).
#pragma once
#include "http/message.h"
#include "routes/server_state.h"

namespace k3::server {

class TokenRoutes {
public:
    explicit TokenRoutes(ServerState& s) : state_(s) {}

    void count_tokens(const HttpRequest& req, HttpResponse& res);
    void tokenize(const HttpRequest& req, HttpResponse& res);
    void detokenize(const HttpRequest& req, HttpResponse& res);

private:
    ServerState& state_;
};

}  // namespace k3::server
