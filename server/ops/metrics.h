// Counters, gauges and histograms for GET /metrics (Prometheus text format 0.0.4). Names follow
// llama-server's `llamacpp:` series where the meaning is the same, so existing dashboards work;
// the k3serve-specific series (expert cache, bytes read, I/O share, RSS) use the `k3serve:`
// prefix. Updated by the worker and HTTP threads under one mutex: a handful of updates per token
// is far below anything measurable next to a forward pass.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "http/connection_table.h"
#include "k3/engine.h"
#include "k3/grammar.h"

namespace k3::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> upper_bounds);
    void observe(double value);
    void render(std::string& out, const std::string& name, const std::string& help) const;
    uint64_t count() const { return count_; }
    double sum() const { return sum_; }

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> buckets_;  // non-cumulative; made cumulative when rendered
    uint64_t count_ = 0;
    double sum_ = 0;
};

// Memory of this process from /proc/self/status (bytes; 0 when unavailable).
struct ProcessMemory {
    uint64_t rss_bytes = 0;
    uint64_t peak_rss_bytes = 0;
    uint64_t locked_bytes = 0;  // VmLck: pages locked in RAM (serve --mlock)
};
ProcessMemory read_process_memory();

// How a request ended, as counted in k3serve:requests_total{outcome=...}.
enum class RequestOutcome {
    Ok,
    Cancelled,         // the client left (or was too slow) while it ran, or shutdown cancelled it
    Dropped,           // the client left while it was queued: never started
    Deadline,          // it outlived --deadline-s
    RejectedFull,      // the queue was full
    RejectedLoading,   // the model was still loading
    RejectedShutdown,  // the daemon was draining
    Invalid,           // the request was refused (4xx before queueing)
    Unauthorized,      // missing or wrong API key
    Error,             // the engine or the worker failed
};
inline constexpr RequestOutcome kAllRequestOutcomes[] = {
    RequestOutcome::Ok,           RequestOutcome::Cancelled,       RequestOutcome::Dropped,
    RequestOutcome::Deadline,     RequestOutcome::RejectedFull,    RequestOutcome::RejectedLoading,
    RequestOutcome::RejectedShutdown, RequestOutcome::Invalid,     RequestOutcome::Unauthorized,
    RequestOutcome::Error};
// One metric in Prometheus' text format: its HELP and TYPE lines, then its value.
void write_metric(std::string& out, const std::string& name, const char* type, const std::string& help,
                  double value);

// The HTTP front's connection figures as /metrics series (k3serve:http_connections_*).
std::string render_connection_figures(const ConnectionFigures& f);

// The label value in /metrics ("ok", "rejected_full", ...).
const char* outcome_label(RequestOutcome outcome);


class Metrics {
public:
    Metrics();

    void count_request(RequestOutcome outcome);
    void add_prompt_tokens(int prompt, int cached, double prefill_seconds);
    // The model's tools channel could not be parsed (it was returned as content).
    void count_tool_call_parse_failure();
    // A job was cancelled because its client did not take its output (--client-buffer-kb).
    void count_slow_client();
    // A request's grammar was refused for passing one of its budgets (k3/grammar.h).
    void count_grammar_refusal(GrammarLimit limit);
    // Grammars being compiled on HTTP threads now (up, then down, around each compile).
    void grammar_compile_started();
    void grammar_compile_ended(double seconds);
    // The tolerance policy (wire/fields.h): fields ignored, tools left out of the prompt, and
    // output limits lowered to what the context leaves.
    void count_ignored(size_t fields, size_t tools);
    void count_max_tokens_clamped();
    void add_generated_tokens(int n, double decode_seconds);
    void observe_ttft(double seconds);
    void observe_token_latency(double seconds);
    void set_processing(int n);
    // The worker copies engine counters here (it is the only thread allowed to ask the engine).
    void set_engine_stats(const EngineStats& stats);

    uint64_t requests(RequestOutcome outcome) const;
    EngineStats engine_stats() const;

    // The whole exposition. queue_depth and queue_capacity come from the JobQueue, weights from
    // Engine::weights_load().
    std::string render(size_t queue_depth, size_t queue_capacity, bool ready, const WeightsLoad& weights = {}) const;

private:
    mutable std::mutex mutex_;
    std::map<RequestOutcome, uint64_t> requests_;
    uint64_t tool_call_parse_failures_ = 0;
    uint64_t slow_clients_ = 0;
    std::map<GrammarLimit, uint64_t> grammar_refusals_;
    int grammar_compiles_ = 0;
    uint64_t grammar_compiled_ = 0;
    double grammar_compile_seconds_ = 0;
    uint64_t ignored_fields_ = 0, ignored_tools_ = 0, max_tokens_clamped_ = 0;
    uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, generated_tokens_ = 0;
    double prompt_seconds_ = 0, generated_seconds_ = 0;
    int processing_ = 0;
    Histogram ttft_, token_latency_;
    EngineStats engine_;
};

}  // namespace k3::server
