#include "ops/metrics.h"

#include "k3/stats.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace k3::server {

namespace {

std::string format_number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

// A counter with one series per value of an enum (every value written, 0 when never counted):
// name{label="value_name"} count.
template <class Key, size_t N, class NameOf>
void write_counter_by(std::string& out, const std::string& name, const std::string& help, const char* label,
                      const Key (&keys)[N], const std::map<Key, uint64_t>& counts, NameOf name_of) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " counter\n";
    for (Key key : keys) {
        auto it = counts.find(key);
        out += name + "{" + label + "=\"" + name_of(key) + "\"} " + std::to_string(it == counts.end() ? 0 : it->second) + "\n";
    }
}

}  // namespace

void write_metric(std::string& out, const std::string& name, const char* type, const std::string& help,
                  double value) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    out += name + " " + format_number(value) + "\n";
}

std::string render_connection_figures(const ConnectionFigures& f) {
    std::string out;
    write_metric(out, "k3serve:http_connections_open", "gauge", "Client connections open now.", f.open);
    out += "# HELP k3serve:http_connections_closed_total Connections the daemon closed or refused to hold its caps, by why.\n"
           "# TYPE k3serve:http_connections_closed_total counter\n";
    const std::pair<const char*, uint64_t> reasons[] = {{"evicted_idle", f.evicted_idle},
                                                         {"first_byte_deadline", f.first_byte_deadline},
                                                         {"refused_address", f.refused_address},
                                                         {"refused_total", f.refused_total}};
    for (const auto& [reason, n] : reasons)
        out += std::string("k3serve:http_connections_closed_total{reason=\"") + reason + "\"} " + std::to_string(n) + "\n";
    return out;
}

const char* outcome_label(RequestOutcome outcome) {
    switch (outcome) {
        case RequestOutcome::Ok: return "ok";
        case RequestOutcome::Cancelled: return "cancelled";
        case RequestOutcome::Dropped: return "dropped";
        case RequestOutcome::Deadline: return "deadline";
        case RequestOutcome::RejectedFull: return "rejected_full";
        case RequestOutcome::RejectedLoading: return "rejected_loading";
        case RequestOutcome::RejectedShutdown: return "rejected_shutdown";
        case RequestOutcome::Invalid: return "invalid";
        case RequestOutcome::Unauthorized: return "unauthorized";
        case RequestOutcome::Error: return "error";
    }
    return "error";
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
    size_t i = 0;
    while (i < bounds_.size() && value > bounds_[i]) ++i;
    ++buckets_[i];
    ++count_;
    sum_ += value;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cumulative += buckets_[i];
        out += name + "_bucket{le=\"" + format_number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    cumulative += buckets_.back();
    out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cumulative) + "\n";
    out += name + "_sum " + format_number(sum_) + "\n";
    out += name + "_count " + std::to_string(count_) + "\n";
}

ProcessMemory read_process_memory() {
    ProcessMemory m;
    std::ifstream in("/proc/self/status");
    std::string line;
    while (std::getline(in, line)) {
        auto value_kb = [&] {
            std::istringstream s(line.substr(line.find(':') + 1));
            uint64_t kb = 0;
            s >> kb;
            return kb * 1024;
        };
        if (line.rfind("VmRSS:", 0) == 0) m.rss_bytes = value_kb();
        if (line.rfind("VmHWM:", 0) == 0) m.peak_rss_bytes = value_kb();
        if (line.rfind("VmLck:", 0) == 0) m.locked_bytes = value_kb();
    }
    return m;
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}),
      token_latency_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}) {}

void Metrics::count_request(RequestOutcome outcome) {
    std::lock_guard lock(mutex_);
    ++requests_[outcome];
}

void Metrics::add_prompt_tokens(int prompt, int cached, double prefill_seconds) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += static_cast<uint64_t>(prompt);
    cached_tokens_ += static_cast<uint64_t>(cached);
    prompt_seconds_ += prefill_seconds;
}

void Metrics::count_tool_call_parse_failure() {
    std::lock_guard lock(mutex_);
    ++tool_call_parse_failures_;
}

void Metrics::count_slow_client() {
    std::lock_guard lock(mutex_);
    ++slow_clients_;
}

void Metrics::count_grammar_refusal(GrammarLimit limit) {
    std::lock_guard lock(mutex_);
    ++grammar_refusals_[limit];
}

void Metrics::grammar_compile_started() {
    std::lock_guard lock(mutex_);
    ++grammar_compiles_;
}

void Metrics::grammar_compile_ended(double seconds) {
    std::lock_guard lock(mutex_);
    --grammar_compiles_;
    ++grammar_compiled_;
    grammar_compile_seconds_ += seconds;
}

void Metrics::count_ignored(size_t fields, size_t tools) {
    std::lock_guard lock(mutex_);
    ignored_fields_ += fields;
    ignored_tools_ += tools;
}

void Metrics::count_max_tokens_clamped() {
    std::lock_guard lock(mutex_);
    ++max_tokens_clamped_;
}

void Metrics::add_generated_tokens(int n, double decode_seconds) {
    std::lock_guard lock(mutex_);
    generated_tokens_ += static_cast<uint64_t>(n);
    generated_seconds_ += decode_seconds;
}

void Metrics::observe_ttft(double seconds) {
    std::lock_guard lock(mutex_);
    ttft_.observe(seconds);
}

void Metrics::observe_token_latency(double seconds) {
    std::lock_guard lock(mutex_);
    token_latency_.observe(seconds);
}

void Metrics::set_processing(int n) {
    std::lock_guard lock(mutex_);
    processing_ = n;
}

void Metrics::set_engine_stats(const EngineStats& stats) {
    std::lock_guard lock(mutex_);
    engine_ = stats;
}

uint64_t Metrics::requests(RequestOutcome outcome) const {
    std::lock_guard lock(mutex_);
    auto it = requests_.find(outcome);
    return it == requests_.end() ? 0 : it->second;
}

EngineStats Metrics::engine_stats() const {
    std::lock_guard lock(mutex_);
    return engine_;
}

std::string Metrics::render(size_t queue_depth, size_t queue_capacity, bool ready, const WeightsLoad& weights) const {
    std::lock_guard lock(mutex_);
    std::string out;
    write_metric(out, "llamacpp:prompt_tokens_total", "counter", "Prompt tokens processed (including reused ones).",
                 double(prompt_tokens_));
    write_metric(out, "llamacpp:prompt_seconds_total", "counter", "Time spent in prompt processing.", prompt_seconds_);
    write_metric(out, "llamacpp:tokens_predicted_total", "counter", "Generated tokens.", double(generated_tokens_));
    write_metric(out, "llamacpp:tokens_predicted_seconds_total", "counter", "Time spent generating tokens.",
                 generated_seconds_);
    write_metric(out, "llamacpp:requests_processing", "gauge", "Requests the engine worker is running (up to --parallel).",
                 processing_);
    write_metric(out, "llamacpp:requests_deferred", "gauge", "Requests waiting in the queue.", double(queue_depth));
    write_metric(out, "k3serve:queue_depth", "gauge", "Requests waiting in the queue.", double(queue_depth));
    write_metric(out, "k3serve:queue_capacity", "gauge", "Queue capacity (--queue-depth).", double(queue_capacity));
    write_metric(out, "k3serve:ready", "gauge", "1 once the model is loaded and the daemon is serving.", ready ? 1 : 0);
    write_metric(out, "k3serve:weights_loaded_bytes", "gauge",
                 "Resident weights read so far; reaches k3serve:weights_total_bytes once every routed expert is "
                 "in (the daemon serves while they load). 0 with a memory budget (weights read on demand).",
                 double(weights.loaded_bytes));
    write_metric(out, "k3serve:weights_total_bytes", "gauge", "Resident weights to read at start.",
                 double(weights.total_bytes));
    write_metric(out, "k3serve:weights_loading", "gauge", "1 while routed experts are still being read behind a serving daemon.",
                 ready && !weights.complete() ? 1 : 0);
    write_metric(out, "k3serve:weights_load_failures_total", "counter",
                 "Pieces of the resident weights whose read failed (requests that need them fail; /health says so).",
                 double(weights.failures));
    write_metric(out, "k3serve:prompt_tokens_cached_total", "counter",
                 "Prompt tokens reused (a slot's live state or the shared prompt cache) instead of recomputed.", double(cached_tokens_));

    write_counter_by(out, "k3serve:requests_total", "Finished requests by outcome.", "outcome", kAllRequestOutcomes,
                     requests_, outcome_label);
    write_metric(out, "k3serve:tool_call_parse_failures_total", "counter",
                 "Model outputs whose tool calls could not be parsed (returned as content instead).",
                 double(tool_call_parse_failures_));
    write_metric(out, "k3serve:slow_client_cancellations_total", "counter",
                 "Jobs cancelled because their client did not take their output (--client-buffer-kb).",
                 double(slow_clients_));
    write_counter_by(out, "k3serve:grammar_refusals_total", "Request grammars refused for passing a budget (--grammar-max-*).",
                     "limit", kAllGrammarLimits, grammar_refusals_, grammar_limit_name);
    write_metric(out, "k3serve:grammar_compiles_in_progress", "gauge",
                 "Request grammars being compiled on HTTP threads now (never on the engine worker).",
                 double(grammar_compiles_));
    write_metric(out, "k3serve:grammar_compiles_total", "counter", "Request grammars compiled (refused ones too).",
                 double(grammar_compiled_));
    write_metric(out, "k3serve:grammar_compile_seconds_total", "counter",
                 "Time spent compiling request grammars on HTTP threads.", grammar_compile_seconds_);
    write_metric(out, "k3serve:ignored_fields_total", "counter",
                 "Request fields this server does not know, ignored (their names are logged at debug level).",
                 double(ignored_fields_));
    write_metric(out, "k3serve:ignored_tools_total", "counter",
                 "Tools left out of the prompt because this server cannot run them (hosted tools such as web_search).",
                 double(ignored_tools_));
    write_metric(out, "k3serve:max_tokens_clamped_total", "counter",
                 "Requests whose output limit was above what the context leaves, lowered to it.",
                 double(max_tokens_clamped_));
    ttft_.render(out, "k3serve:time_to_first_token_seconds", "Time from arrival to the first generated token.");
    token_latency_.render(out, "k3serve:time_per_output_token_seconds", "Time between generated tokens.");

    visit_stats(engine_, [&](const StatField& f) { write_metric(out, f.metric, f.type, f.help, f.value); });

    ProcessMemory mem = read_process_memory();
    write_metric(out, "k3serve:resident_memory_bytes", "gauge", "Current resident set size.", double(mem.rss_bytes));
    write_metric(out, "k3serve:resident_memory_peak_bytes", "gauge", "Peak resident set size.",
                 double(mem.peak_rss_bytes));
    write_metric(out, "k3serve:locked_memory_bytes", "gauge",
                 "Memory locked in RAM (VmLck): with serve --mlock, every page touched; 0 when not locked.",
                 double(mem.locked_bytes));
    return out;
}

}  // namespace k3::server
