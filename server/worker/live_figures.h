// What the engine is doing right now, for GET /v1/status and the web UI's live figures: the
// requests being run (stage, tokens so far), the figures of the last finished request, and the
// last few hundred generated tokens (seconds and bytes read each) for the UI's chart. Written by
// the worker (a few calls per token, under one mutex), read by HTTP threads. Requests are keyed
// by job id, so a worker that runs several at once reports each; the bytes of a token are the
// engine's reads since that request's previous token (shared by requests decoded in one step).
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>

#include "worker/job.h"
#include "k3/engine.h"
#include "k3/prefill_progress.h"

namespace k3::server {

// One generated token: how long it took and what the engine read from disk for it.
struct TokenSample {
    uint64_t seq = 0;              // 1, 2, 3... across requests (the UI asks for seq > N)
    uint64_t job_id = 0;
    double seconds = 0;
    uint64_t trunk_bytes = 0;
    uint64_t expert_bytes = 0;
    double io_seconds = 0;
};

class LiveFigures {
public:
    static constexpr size_t kKeptSamples = 512;

    // Engine::progress() (safe from any thread) and the model's layer count: a status read
    // during a prompt chunk counts the layers the chunk has been through (PrefillProgress).
    void set_layer_counter(std::function<uint64_t()> counter, int n_layers);

    // Worker side, in the order a request goes through them.
    void begin(const Job& job, const EngineStats& stats);
    // The prompt's evaluation starts at `cached_tokens` (resumed), then runs chunk by chunk.
    void prompt_begun(uint64_t job_id, int cached_tokens);
    void prompt_chunk_started(uint64_t job_id, int tokens);
    void prompt_chunk_done(uint64_t job_id, int done_tokens);
    void prefilled(uint64_t job_id, int cached_tokens, double prefill_seconds, const EngineStats& stats);
    void token(uint64_t job_id, const EngineStats& stats);
    // Its client left; its prompt is being read on into the prompt cache (--abandoned-prefill-s).
    void abandoned(uint64_t job_id);
    void end(uint64_t job_id);

    // JSON for /v1/status (stage: "prompt", "generating", or "finished" for the last request): {"active": [...], "last_request": {...}|null, "tokens": [...]} with the
    // token samples whose seq is greater than `since`.
    nlohmann::json to_json(uint64_t since) const;
    // The "prefill" object of a running request (as in /v1/status), null when it is not running.
    nlohmann::json prefill_json(uint64_t job_id) const;

    // The requests being run and the context they hold (prompt + generated tokens), for the
    // router-facing load figures (load_figures.h).
    struct Held {
        int requests = 0;
        int64_t context_tokens = 0;
    };
    Held held() const;

private:
    struct Current {
        uint64_t job_id = 0;
        Clock::time_point enqueued_at, started_at, last_token_at;
        std::optional<Clock::time_point> first_token_at;
        int prompt_tokens = 0;
        int cached_tokens = -1;    // -1 while the prompt is being evaluated
        int generated_tokens = 0;
        bool abandoned = false;
        double prefill_seconds = 0;
        EngineStats last_stats;    // at the previous token, for per-token differences
        PrefillProgress prefill;
    };
    nlohmann::json request_json(const Current& c, Clock::time_point now) const;
    nlohmann::json prefill_of(const Current& c, Clock::time_point now) const;

    mutable std::mutex mutex_;
    std::function<uint64_t()> layer_counter_;
    int n_layers_ = 0;
    std::map<uint64_t, Current> current_;  // by job id
    nlohmann::json last_request_;  // null until a request finished
    std::deque<TokenSample> samples_;
    uint64_t next_seq_ = 1;
};

}  // namespace k3::server
