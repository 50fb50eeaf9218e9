// How far a prompt's evaluation (prefill) has got, for the people waiting on it: tokens done of
// the total, the rate and the time left. The daemon's /v1/status and /slots and `k3serve run`'s
// progress line all show this one model (docs/api.md, "Prefill progress").
//
// The prompt is evaluated in chunks (Session::next_prompt_chunk). Between chunks the count is
// exact; inside a chunk it advances with Engine::progress(), the engine's count of layers
// evaluated, which any thread may read while the chunk runs: a chunk of T tokens that has been
// through l of the model's L layers counts as T * l / L tokens (rounded down), so the count moves
// every layer, never passes the chunk's end and never goes back. Not thread-safe: the owner
// guards it (the worker writes it, HTTP threads read it under the same mutex).
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>

namespace k3 {

// The pass being evaluated: the prompt's pass `number` (1, 2, ...), its tokens, and the layers
// of the model it has been through (docs/performance.md, "Prefill passes").
struct PassFigures {
    int number = 0;
    int tokens = 0;
    int layers_done = 0;
    int layers = 0;
};

struct PrefillFigures {
    int done_tokens = 0;           // prompt tokens in the state (cached ones included)
    int total_tokens = 0;          // the prompt's length
    int cached_tokens = 0;         // resumed from a cached state, not evaluated
    int chunks_done = 0;           // chunks (passes) evaluated so far
    std::optional<PassFigures> pass;     // the pass under way (none between passes)
    double elapsed_s = 0;          // since the evaluation began
    std::optional<double> tokens_per_s;  // evaluated tokens per second so far (none before the first layer)
    std::optional<double> eta_s;         // the rest at that rate
};

class PrefillProgress {
public:
    using Clock = std::chrono::steady_clock;

    // n_layers: the model's decoder layers (0: no counting inside a chunk).
    void begin(int total_tokens, int cached_tokens, int n_layers, Clock::time_point now);
    // A chunk of `tokens` tokens starts; `layer_counter` is Engine::progress() just before it.
    void chunk_started(int tokens, uint64_t layer_counter);
    // The chunk is in the state: `done_tokens` is the state's length now. At the prompt's end
    // the figures stop moving (elapsed and rate are those of the evaluation).
    void chunk_done(int done_tokens, Clock::time_point now);
    // The figures at `now`, with Engine::progress() read at about the same time.
    PrefillFigures at(uint64_t layer_counter, Clock::time_point now) const;
    bool started() const { return total_ > 0; }
    bool finished() const { return end_.has_value(); }
    bool in_chunk() const { return chunk_tokens_ > 0; }

private:
    int total_ = 0, cached_ = 0, n_layers_ = 0;
    int done_ = 0;                 // exact: at the last chunk boundary
    int chunk_tokens_ = 0;         // the chunk being evaluated (0: none)
    uint64_t chunk_layer_start_ = 0;
    int chunks_done_ = 0;
    Clock::time_point start_{};
    std::optional<Clock::time_point> end_;  // when done reached total
};

}  // namespace k3
