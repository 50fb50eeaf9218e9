// The worker's events -> OpenAI chat/completions and completions JSON: their Responders
// (openai/completion_response.cpp, openai/chat_response.cpp, on wire/responder.h's base) and the
// pieces they share (usage, logprobs layouts, finish reasons).
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/job.h"
#include "wire/error.h"
#include "wire/generation_request.h"
#include "wire/responder.h"

namespace k3::server {

struct ResponseIds {
    std::string id;          // "cmpl-…" / "chatcmpl-…"
    long long created = 0;   // unix seconds, same on every chunk
    std::string model;
    std::string fingerprint; // system_fingerprint
};

// The Responder for a completions or chat completions request. `model_fingerprint` is the served
// model's.
std::unique_ptr<Responder> make_openai_responder(const GenerationRequest& request, const std::string& model_fingerprint);

// --- shared shapes ---------------------------------------------------------------------------

const char* finish_reason_name(FinishReason reason);
// {id, object, created, model, system_fingerprint} of a completion, chat completion or chunk;
// No "usage" in stream chunks: the schema's usage is an object, present once known (the
// usage chunk at the end; OpenAI's CreateChatCompletionStreamResponse, docs/api.md "Routes").
json envelope(const ResponseIds& ids, const char* object);
// The end of a completions/chat stream: the usage chunk (choices: []) if asked for, then [DONE].
std::string stream_end(const ResponseIds& ids, const char* chunk_object, bool include_usage, const Usage& usage);
json usage_json(const Usage& u);
// Logprobs in the completions layout ({tokens, token_logprobs, top_logprobs, text_offset}), and
// one token's entry of its top_logprobs ({"alternative": logprob, ...}).
json completion_logprobs_json(const std::vector<TokenLogprob>& lps, size_t text_offset);
json completion_top_logprobs(const TokenLogprob& lp);
// Logprobs in the chat layout ({content: [{token, logprob, bytes, top_logprobs}]}), and one
// token's entry of its content.
json chat_logprobs_json(const std::vector<TokenLogprob>& lps);
json chat_logprob_entry(const TokenLogprob& lp);
std::unique_ptr<Responder> make_completion_responder(const GenerationRequest& request, ResponseIds ids);
std::unique_ptr<Responder> make_chat_responder(const GenerationRequest& request, ResponseIds ids);

}  // namespace k3::server
