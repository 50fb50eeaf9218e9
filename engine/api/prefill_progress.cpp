#include "k3/prefill_progress.h"

#include <algorithm>

namespace k3 {

void PrefillProgress::begin(int total_tokens, int cached_tokens, int n_layers, Clock::time_point now) {
    total_ = std::max(0, total_tokens);
    cached_ = std::clamp(cached_tokens, 0, total_);
    n_layers_ = std::max(0, n_layers);
    done_ = cached_;
    chunk_tokens_ = 0;
    chunk_layer_start_ = 0;
    chunks_done_ = 0;
    start_ = now;
    end_.reset();
    if (done_ == total_) end_ = now;
}

void PrefillProgress::chunk_started(int tokens, uint64_t layer_counter) {
    chunk_tokens_ = std::clamp(tokens, 0, total_ - done_);
    chunk_layer_start_ = layer_counter;
}

void PrefillProgress::chunk_done(int done_tokens, Clock::time_point now) {
    // Never back: a chunk's end is at or past anything counted inside it.
    done_ = std::clamp(done_tokens, done_, total_);
    chunk_tokens_ = 0;
    ++chunks_done_;
    if (done_ == total_ && !end_) end_ = now;
}

PrefillFigures PrefillProgress::at(uint64_t layer_counter, Clock::time_point now) const {
    PrefillFigures f;
    f.total_tokens = total_;
    f.cached_tokens = cached_;
    f.chunks_done = chunks_done_;
    f.done_tokens = done_;
    if (chunk_tokens_ > 0) {
        const uint64_t layers =
            layer_counter > chunk_layer_start_ ? std::min<uint64_t>(layer_counter - chunk_layer_start_, uint64_t(n_layers_)) : 0;
        if (n_layers_ > 0) f.done_tokens += int(uint64_t(chunk_tokens_) * layers / uint64_t(n_layers_));
        f.pass = PassFigures{chunks_done_ + 1, chunk_tokens_, int(layers), n_layers_};
    }
    f.elapsed_s = std::max(0.0, std::chrono::duration<double>((end_ ? *end_ : now) - start_).count());
    const int evaluated = f.done_tokens - cached_;
    if (f.done_tokens == total_) f.eta_s = 0.0;
    if (evaluated > 0 && f.elapsed_s > 0) {
        f.tokens_per_s = evaluated / f.elapsed_s;
        f.eta_s = (total_ - f.done_tokens) / *f.tokens_per_s;
    }
    return f;
}

}  // namespace k3
