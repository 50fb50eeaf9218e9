// The tokenizer's routes: POST /tokenize, /detokenize and Anthropic's /v1/messages/count_tokens
// (docs/api.md).
#pragma once
#include <httplib.h>

#include "routes/server_state.h"

namespace k3::server {

class TokenRoutes {
public:
    explicit TokenRoutes(ServerState& s) : state_(s) {}

    void count_tokens(const httplib::Request& req, httplib::Response& res);
    void tokenize(const httplib::Request& req, httplib::Response& res);
    void detokenize(const httplib::Request& req, httplib::Response& res);

private:
    ServerState& state_;
};

}  // namespace k3::server
