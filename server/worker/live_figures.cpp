#include "worker/live_figures.h"

namespace k3::server {

using nlohmann::json;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

void LiveFigures::set_layer_counter(std::function<uint64_t()> counter, int n_layers) {
    std::lock_guard lock(mutex_);
    layer_counter_ = std::move(counter);
    n_layers_ = n_layers;
}

void LiveFigures::begin(const Job& job, const EngineStats& stats) {
    std::lock_guard lock(mutex_);
    Current c;
    c.job_id = job.id;
    c.enqueued_at = job.enqueued_at;
    c.started_at = c.last_token_at = Clock::now();
    c.prompt_tokens = int(job.prompt.size());
    c.last_stats = stats;
    current_[job.id] = c;
}

void LiveFigures::prompt_begun(uint64_t job_id, int cached_tokens) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it == current_.end()) return;
    it->second.prefill.begin(it->second.prompt_tokens, cached_tokens, n_layers_, Clock::now());
}

void LiveFigures::prompt_chunk_started(uint64_t job_id, int tokens) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it == current_.end()) return;
    it->second.prefill.chunk_started(tokens, layer_counter_ ? layer_counter_() : 0);
}

void LiveFigures::prompt_chunk_done(uint64_t job_id, int done_tokens) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it == current_.end()) return;
    it->second.prefill.chunk_done(done_tokens, Clock::now());
}

void LiveFigures::prefilled(uint64_t job_id, int cached_tokens, double prefill_seconds, const EngineStats& stats) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it == current_.end()) return;
    it->second.cached_tokens = cached_tokens;
    it->second.prefill_seconds = prefill_seconds;
    it->second.last_stats = stats;
}

// Called once per generated token, right after it was sampled. The first token comes from the
// prompt's logits (its time is the time to first token); every later one cost one decode step,
// and that step's time and reads become a sample.
void LiveFigures::token(uint64_t job_id, const EngineStats& stats) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it == current_.end()) return;
    Current& c = it->second;
    auto now = Clock::now();
    c.generated_tokens++;
    if (!c.first_token_at) {
        c.first_token_at = now;
    } else {
        TokenSample s;
        s.seq = next_seq_++;
        s.job_id = c.job_id;
        s.seconds = seconds_between(c.last_token_at, now);
        s.trunk_bytes = stats.trunk_bytes_read - c.last_stats.trunk_bytes_read;
        s.expert_bytes = stats.expert_bytes_read - c.last_stats.expert_bytes_read;
        s.io_seconds = stats.io_seconds - c.last_stats.io_seconds;
        samples_.push_back(s);
        if (samples_.size() > kKeptSamples) samples_.pop_front();
    }
    c.last_token_at = now;
    c.last_stats = stats;
}

LiveFigures::Held LiveFigures::held() const {
    std::lock_guard lock(mutex_);
    Held h;
    for (const auto& [id, c] : current_) {
        ++h.requests;
        h.context_tokens += c.prompt_tokens + c.generated_tokens;
    }
    return h;
}

void LiveFigures::abandoned(uint64_t job_id) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it != current_.end()) it->second.abandoned = true;
}

void LiveFigures::end(uint64_t job_id) {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    if (it == current_.end()) return;
    last_request_ = request_json(it->second, Clock::now());
    last_request_["stage"] = "finished";
    current_.erase(it);
}

json LiveFigures::prefill_of(const Current& c, Clock::time_point now) const {
    if (!c.prefill.started()) return nullptr;
    // (the engine's counter is read only while a chunk runs)
    const bool counting = layer_counter_ && c.prefill.in_chunk();
    const PrefillFigures f = c.prefill.at(counting ? layer_counter_() : 0, now);
    return {{"done_tokens", f.done_tokens},
            {"total_tokens", f.total_tokens},
            {"cached_tokens", f.cached_tokens},
            {"chunks_done", f.chunks_done},
            {"pass", f.pass ? json{{"number", f.pass->number},
                                   {"tokens", f.pass->tokens},
                                   {"layers_done", f.pass->layers_done},
                                   {"layers", f.pass->layers}}
                            : json(nullptr)},
            {"elapsed_s", f.elapsed_s},
            {"tokens_per_s", f.tokens_per_s ? json(*f.tokens_per_s) : json(nullptr)},
            {"eta_s", f.eta_s ? json(*f.eta_s) : json(nullptr)}};
}

json LiveFigures::prefill_json(uint64_t job_id) const {
    std::lock_guard lock(mutex_);
    auto it = current_.find(job_id);
    return it == current_.end() ? json(nullptr) : prefill_of(it->second, Clock::now());
}

json LiveFigures::request_json(const Current& c, Clock::time_point now) const {
    json j = {{"id", c.job_id},
              {"stage", c.cached_tokens < 0 ? "prompt" : "generating"},
              {"prompt_tokens", c.prompt_tokens},
              {"cached_tokens", c.cached_tokens < 0 ? json(nullptr) : json(c.cached_tokens)},
              {"generated_tokens", c.generated_tokens},
              {"abandoned", c.abandoned},
              {"waited_s", seconds_between(c.enqueued_at, c.started_at)},
              {"elapsed_s", seconds_between(c.started_at, now)},
              {"time_to_first_token_s", nullptr},
              {"prompt_tokens_per_s", nullptr},
              {"seconds_per_token", nullptr},
              {"prefill", prefill_of(c, now)}};
    if (c.cached_tokens >= 0 && c.prefill_seconds > 0)
        j["prompt_tokens_per_s"] = double(c.prompt_tokens - c.cached_tokens) / c.prefill_seconds;
    if (c.first_token_at) {
        j["time_to_first_token_s"] = seconds_between(c.enqueued_at, *c.first_token_at);
        if (c.generated_tokens > 1)
            j["seconds_per_token"] = seconds_between(*c.first_token_at, c.last_token_at) / (c.generated_tokens - 1);
    }
    return j;
}

json LiveFigures::to_json(uint64_t since) const {
    std::lock_guard lock(mutex_);
    json active = json::array();
    for (const auto& [id, c] : current_) active.push_back(request_json(c, Clock::now()));
    json tokens = json::array();
    for (const auto& s : samples_)
        if (s.seq > since)
            tokens.push_back({{"seq", s.seq},
                              {"request", s.job_id},
                              {"seconds", s.seconds},
                              {"trunk_bytes", s.trunk_bytes},
                              {"expert_bytes", s.expert_bytes},
                              {"io_seconds", s.io_seconds}});
    return {{"active", active}, {"last_request", last_request_}, {"tokens", tokens}};
}

}  // namespace k3::server
