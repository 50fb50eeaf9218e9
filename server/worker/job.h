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

#include "worker/job_channel.h"
#include "worker/job_event.h"
#include "worker/job_outcome.h"
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
    // The grammar compiled (automaton and first mask) on the HTTP thread before the job is
    // queued (routes/generation_route.cpp), so the worker only runs it; set whenever `grammar` is.
    std::shared_ptr<GrammarMatcher> compiled_grammar;
};

struct Job {
    uint64_t id = 0;
    std::vector<int32_t> prompt;
    std::vector<PromptImage> images;  // the prompt's images (Session::set_prompt_images)
    // The prompt's last tokens that usage does not report (the chat's generation opener).
    int uncounted_prompt_tokens = 0;
    GenerationParams params;
    uint64_t cache_partition = 0;        // the prompt cache's, from the API key (routes/request_gate.h)
    std::shared_ptr<JobChannel> channel = std::make_shared<JobChannel>();
    CancelFlag cancel{false};
    std::atomic<CancelReason> cancel_reason{CancelReason::None};
    // What the engine reads while it evaluates the prompt's chunks: raised with `cancel`, except
    // when the client leaves a prompt that may finish abandoned (--abandoned-prefill-s: the
    // prefill goes on into the prompt cache, and the worker decides when it stops).
    CancelFlag stop_prefill{false};
    bool finish_abandoned_prefill = false;
    Clock::time_point enqueued_at = Clock::now();
    // Set by the worker once it has begun the prompt: the tokens resumed from the prompt cache
    // (known before the prefill; the Messages API's message_start carries them). -1 before.
    std::atomic<int> prompt_cached{-1};

    // Raises the cancel flag once; the first reason wins.
    void request_cancel(CancelReason reason) {
        CancelReason expected = CancelReason::None;
        cancel_reason.compare_exchange_strong(expected, reason);
        if (reason != CancelReason::ClientGone || !finish_abandoned_prefill) stop_prefill.store(true);
        cancel.store(true);
    }
};

}  // namespace k3::server
