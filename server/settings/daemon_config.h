// DaemonConfig: every setting of `k3serve serve`, from defaults < config file (JSON) <
// environment (K3SERVE_HOST, K3SERVE_PORT, K3SERVE_API_KEY, K3SERVE_MODEL) < command line. The
// settings themselves (key, flag, help, parsing) are one table, settings/daemon_settings.h; the
// environment is read here and nowhere else. Bad values throw k3::Error(Usage/Config) naming the
// flag or key, which serve_main turns into exit code 2.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "k3/engine.h"
#include "k3/grammar.h"

namespace k3::server {

// The engine's defaults, except that the daemon answers while the routed experts load.
inline MemoryOptions serve_memory_defaults() {
    MemoryOptions m;
    m.background_load = true;
    return m;
}

struct DaemonConfig {
    std::string model_dir;
    std::string model_alias;          // name in /v1/models and responses ("" = directory name)
    bool hosted_sampling = false;     // Moonshot's hosted sampling constraints on chat requests
    bool strict_model_name = false;   // a request naming another model is a 404 (default: served)
    std::string new_turn_tool_choice = "auto";  // "required": a turn's first request with tools must call one
    std::string host = "127.0.0.1";
    int port = 8080;
    int threads = 0;                  // compute threads; 0 = physical cores
    int http_threads = 64;            // requests answered at once (raised to queue depth + parallel + 16)
    int max_connections = 1024;       // open client connections (idle ones cost no thread)
    int agent_port = -1;              // HAProxy agent-check port on --host; -1 = none, 0 = any free one
    int max_connections_per_address = 256;  // the same per client address, 0 = no such cap
    double first_byte_timeout_s = 3;  // a new connection must send its first byte within this
    double header_timeout_s = 10;     // a request head must arrive within this
    double body_timeout_s = 60;       // ... and its body within this after the head
    std::vector<std::string> allowed_hosts;  // extra Host names served when on loopback without a key
    int queue_depth = 8;              // jobs waiting for the worker, at most
    int parallel = 4;                 // jobs the worker runs at once (continuous batching)
    int draft_max = 8;                // speculative drafts (prompt lookup) verified per step, 0 = off
    double deadline_s = 600;          // per-request deadline (queue + prefill + decode); 0 = none
    double drain_timeout_s = 30;      // shutdown: let in-flight requests finish this long
    double sse_ping_s = 5;            // keep-alive interval of a quiet stream (docs/agents.md)
    int interleave_tokens = 64;        // a prompt's pass beside other streams' decode steps: at most this many tokens
    double decode_wait_s = 10;         // a longer pass runs alone; decoding streams step between its layers after this wait
    double abandoned_prefill_s = 1800; // a prompt whose client left reads on into the prompt cache this long; 0 = stops
    double slow_client_s = 10;        // a client that does not read this long is cancelled
    int client_buffer_kb = 1024;      // a stream's output its client has not taken; past it, cancelled
    double stuck_after_s = 120;       // a busy worker with no engine progress this long is stuck
    std::vector<std::string> api_keys;
    bool metrics_auth = false;        // /metrics needs the API key too
    std::string cors_origin;          // "" = no CORS headers; "*" or one origin
    size_t max_body_bytes = 8u << 20;
    int max_inflight_body_mb = 256;   // request bodies being received at once; more get 503
    int max_json_depth = 64;
    int max_answer_mb = 256;          // a whole (non-streamed) answer's bound; more is refused up front
    int max_prompt_tokens = 0;        // 0 = the context size
    int64_t image_max_bytes = 20ll << 20;      // an image's encoded size (docs/api.md "Images")
    int64_t image_max_pixels = 50'000'000;     // an image's stored width x height
    int images_per_request = 8;                // images in one request, every turn's counted
    // What one request's grammar (response_format schema, required tool call) may cost to
    // compile (k3/grammar.h GrammarLimits; docs/operations.md "Grammar budgets").
    int grammar_max_enum = int(GrammarLimits{}.max_enum_values);
    size_t grammar_max_literal_bytes = GrammarLimits{}.max_literal_bytes;
    size_t grammar_max_symbols = GrammarLimits{}.max_symbols;
    size_t grammar_max_states = GrammarLimits{}.max_states;
    double grammar_max_compile_ms = GrammarLimits{}.max_compile_ms;
    int n_ctx = 0;                    // session context; 0 = min(model maximum, 32768)
    std::string log_format = "text";  // text | json
    std::string log_level = "info";
    bool web_ui = true;
    std::string web_dir;              // serve the UI from here instead of the embedded copy
    MemoryOptions memory = serve_memory_defaults();
    bool mlock = true;                // lock pages in RAM as they are touched, where allowed (ops/memory_lock.h)
    std::string kernels;
    bool vision = true;               // false (--no-vision): the vision tower is not read; images get a 400
    // Test hooks (docs/development.md "Tests wait on states"): files whose presence holds the
    // daemon at a known point; "" = none. The background load's is memory.hold_background_load.
    std::string test_hold_prefill;          // a prompt waits between two prefill passes
    std::string test_hold_pass;             // the engine waits inside a pass (EngineOptions::hold_pass)
    std::string test_hold_grammar_compile;  // a request waits after compiling its grammar

    // The engine's view of this config.
    EngineOptions engine_options() const;
    // The grammar compiler's budgets.
    GrammarLimits grammar_limits() const;
    // Everything, for the startup log and GET /props (API keys masked).
    nlohmann::json to_json() const;
};

// The usage text of `k3serve serve --help` (its options from settings/daemon_settings.h).
std::string serve_usage();

// Parses argv (after the subcommand name). Sets *help when --help was given. Throws
// k3::Error(Usage) for a bad flag, k3::Error(Config) for a bad config file.
DaemonConfig parse_daemon_config(int argc, char** argv, bool* help);

// Applies the keys of a config-file JSON object (unknown keys are an error naming the key).
void apply_config_json(DaemonConfig& config, const nlohmann::json& j, const std::string& source);

}  // namespace k3::server
