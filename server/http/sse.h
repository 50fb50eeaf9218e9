// Server-sent events framing (the text/event-stream wire format): what a frame looks like, not
// what it carries. The OpenAI layer decides the payloads; routes.cpp writes the frames.
#pragma once
#include <string>
#include <string_view>

namespace k3::server::sse {

// "data: PAYLOAD\n\n" (the payload is one line of JSON).
std::string data(std::string_view payload);
// "event: NAME\ndata: PAYLOAD\n\n" (typed events, as /v1/responses streams them).
std::string event(std::string_view name, std::string_view payload);
// The OpenAI terminator "data: [DONE]\n\n".
std::string done();

}  // namespace k3::server::sse
