// The worker's events -> OpenAI response JSON. One Responder per request shapes everything the
// client sees after validation: the stream's chunks (as SSE frames) or the whole body. Each
// endpoint has its own Responder (openai/completion_response.cpp, openai/chat_response.cpp,
// openai/responses_response.cpp);
// the shared pieces (usage, logprobs layouts, finish reasons) are declared here.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/job.h"
#include "openai/request.h"
#include "openai/error.h"

namespace k3::server {

struct ResponseIds {
    std::string id;          // "cmpl-…" / "chatcmpl-…"
    long long created = 0;   // unix seconds, same on every chunk
    std::string model;
    std::string fingerprint; // system_fingerprint
};

class Responder {
public:
    virtual ~Responder() = default;

    // Streaming. Frames to send before the first event (the chat role chunk, the echoed prompt).
    virtual std::string stream_start() = 0;
    // Frames for one Delta or Done event; after a Done they end the stream.
    virtual std::string stream_event(const JobEvent& event) = 0;
    // Frames for a failure after the stream began; they end the stream.
    virtual std::string stream_error(const ApiError& error);
    // What keeps a quiet stream alive while the request waits or its prompt is evaluated (an SSE
    // comment; Anthropic clients count only events, so theirs is an `event: ping`).
    virtual std::string keep_alive();

    // Whole response: every Delta and the Done event go through collect(), then whole_body()
    // once, which hands over the body's text (the completions and chat Responders build it as
    // text while they collect: openai/choices_responder.h).
    virtual void collect(const JobEvent& event) = 0;
    virtual std::string whole_body() = 0;
};

// The Responder for the request's endpoint. `model_fingerprint` is the served model's.
std::unique_ptr<Responder> make_responder(const GenerationRequest& request, const std::string& model_fingerprint);

// --- shared shapes ---------------------------------------------------------------------------

const char* finish_reason_name(FinishReason reason);
// {id, object, created, model, system_fingerprint} of a completion, chat completion or chunk;
// No "usage" in stream chunks: the schema's usage is an object, present once known (the
// usage chunk at the end, ../shared/data/openai-openapi.json CreateChatCompletionStreamResponse).
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
// "<prefix><16 hex digits>", random.
std::string random_id(const char* prefix);

std::unique_ptr<Responder> make_completion_responder(const GenerationRequest& request, ResponseIds ids);
std::unique_ptr<Responder> make_chat_responder(const GenerationRequest& request, ResponseIds ids);
std::unique_ptr<Responder> make_responses_responder(const GenerationRequest& request);
std::unique_ptr<Responder> make_messages_responder(const GenerationRequest& request);  // anthropic/response.cpp

}  // namespace k3::server
