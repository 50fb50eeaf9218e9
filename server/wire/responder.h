// The worker's events -> the client. One Responder per request shapes everything the client sees
// after validation: the stream's chunks (as SSE frames) or the whole body. Each endpoint has its
// own Responder (openai/completion_response.cpp, openai/chat_response.cpp, responses/response.cpp,
// anthropic/response.cpp); the route picks it (routes/generation_route.h, make_responder).
#pragma once
#include <string>

#include "worker/job.h"
#include "wire/error.h"

namespace k3::server {

class Responder {
public:
    virtual ~Responder() = default;

    // Streaming. Frames to send before the first event (the chat role chunk, the echoed prompt).
    virtual std::string stream_start() = 0;
    // Frames for one Delta or Done event; after a Done they end the stream.
    virtual std::string stream_event(const JobEvent& event) = 0;
    // Frames for a failure after the stream began; they end the stream.
    virtual std::string stream_error(const ApiError& error);
    // What keeps a quiet stream alive while the request waits or its prompt is evaluated, or
    // between two slow tokens: an event the API's official SDK hands to its caller (the agents'
    // idle watchdogs count only those) that adds nothing to the answer (docs/agents.md,
    // "Prefills longer than a client's patience").
    virtual std::string keep_alive() = 0;
    // The worker began the prompt: its length and the tokens resumed from the prompt cache,
    // known before the prefill (the Messages API's message_start carries them).
    virtual void prompt_begun(int /*prompt_tokens*/, int /*cached_tokens*/) {}

    // Whole response: every Delta and the Done event go through collect(), then whole_body()
    // once, which hands over the body's text (the completions and chat Responders build it as
    // text while they collect: openai/choices_responder.h).
    virtual void collect(const JobEvent& event) = 0;
    virtual std::string whole_body() = 0;
};

// "<prefix><16 hex digits>", random.
std::string random_id(const char* prefix);

}  // namespace k3::server
