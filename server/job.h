// A Job is one generation request on its way from an HTTP thread to the engine worker, and its
// JobChannel carries the results back. The HTTP thread builds the job (prompt tokens already
// validated), pushes it on the JobQueue and then only reads the channel; the worker only writes
// it. Cancellation goes the other way through the job's atomic flag, with a reason so the worker
// can count it correctly in /metrics.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bounded_queue.h"
#include "job_outcome.h"
#include "k3/chat.h"
#include "k3/engine.h"
#include "k3/logit_adjust.h"
#include "k3/grammar.h"
#include "k3/sampler.h"

namespace k3::server {

using Clock = std::chrono::steady_clock;

// Why a job was cancelled (stored before the flag is raised).
enum class CancelReason : int { None = 0, ClientGone, Deadline, Shutdown, SlowClient };

struct GenerationParams {
    int max_tokens = 16;                 // generated tokens at most (>= 0), per choice
    int n = 1;                           // choices: separate sequences from the same prompt
    SamplingParams sampling;
    LogitAdjustments adjustments;        // penalties and logit_bias
    std::vector<std::string> stop;       // stop strings: generation ends before them
    std::vector<int32_t> stop_token_ids; // tokens that end generation (not part of the text)
    int logprobs = -1;                   // -1: none; N >= 0: chosen token + N alternatives
    bool chat = false;                   // output goes through the chat parser (reasoning/content)
    bool thinking = false;               // chat with thinking on: reasoning comes first
    bool ignore_eos = false;
    bool skip_special = true;            // completions: special tokens add no text (vLLM's default)

    // Tool calls (chat): which calls the output parser accepts, and how the turn may use them.
    ToolParsing tools;                   // disabled: a tools channel is dropped, never parsed
    ToolChoice tool_choice = ToolChoice::Auto;
    std::string forced_tool;             // a named tool_choice: the one tool the turn must call
    bool parallel_tool_calls = true;     // false: the turn ends after its first call
    std::string tools_json;              // the declared tools (chat layout), for the call grammar
    std::shared_ptr<const Grammar> grammar;  // constrained output (response_format); null = free
};

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
    Usage usage;                         // Done (and Error, as far as it got)
    JobFailure failure;                  // Error

    // Nothing follows this event.
    bool ends_job() const { return kind == Kind::Error || (kind == Kind::Done && last_choice); }
    bool has_output() const { return !content.empty() || !reasoning.empty() || !logprobs.empty() || !tool_calls.empty() || tool_calls_malformed; }
};

// The worker's events for one job, back to the HTTP thread that reads them. The worker waits
// a bounded time for room (Full: the client is too slow); once the reader has closed the
// channel (client gone), pushes return Closed at once and the event is dropped.
using JobChannel = BoundedQueue<JobEvent>;

struct Job {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    GenerationParams params;
    std::shared_ptr<JobChannel> channel = std::make_shared<JobChannel>(256);
    CancelFlag cancel{false};
    std::atomic<CancelReason> cancel_reason{CancelReason::None};
    Clock::time_point enqueued_at = Clock::now();
    std::optional<Clock::time_point> deadline;

    // Raises the cancel flag once; the first reason wins.
    void request_cancel(CancelReason reason) {
        CancelReason expected = CancelReason::None;
        cancel_reason.compare_exchange_strong(expected, reason);
        cancel.store(true);
    }
};

}  // namespace k3::server
