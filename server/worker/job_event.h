// JobEvent: one message from the engine worker to the HTTP thread that owns a job (text, token
// logprobs, tool-call pieces, the end and its usage), as domain facts; how they look on the wire
// is the API layer's business.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "worker/job_outcome.h"
#include "k3/chat.h"

namespace k3::server {

struct TokenLogprob {
    int32_t id = -1;
    std::string text;                    // the token's bytes (may be a partial UTF-8 sequence)
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;  // most likely alternatives, best first
};

struct Usage {
    int prompt_tokens = 0;
    int completion_tokens = 0;
    int cached_tokens = 0;               // prompt tokens reused from the worker's session
    int reasoning_tokens = 0;
};

// One message from the worker to the HTTP thread that owns the job. Domain facts only: how
// they look on the wire is the API layer's business.
struct JobEvent {
    enum class Kind { Delta, Done, Error };
    Kind kind = Kind::Delta;
    int choice = 0;                      // which of the request's n choices this is about
    bool last_choice = true;             // Done: no choice follows (the job is over)
    std::string content;                 // new response text (always whole UTF-8 characters)
    std::string reasoning;               // new reasoning text (chat with thinking on)
    std::vector<TokenLogprob> logprobs;  // one per token behind this delta, when asked for
    std::vector<ToolCallDelta> tool_calls;  // pieces of the turn's tool calls, in order
    // The tools channel turned out malformed: its raw text follows as content and the calls
    // streamed so far are void (a whole response drops them).
    bool tool_calls_malformed = false;
    FinishReason finish_reason = FinishReason::Stop;  // Done
    std::string stop_sequence;           // Done: the stop string that ended the text, if one did
    Usage usage;                         // Done (and Error, as far as it got)
    JobFailure failure;                  // Error

    // Nothing follows this event.
    bool ends_job() const { return kind == Kind::Error || (kind == Kind::Done && last_choice); }
    bool has_output() const { return !content.empty() || !reasoning.empty() || !logprobs.empty() || !tool_calls.empty() || tool_calls_malformed; }
};

}  // namespace k3::server
