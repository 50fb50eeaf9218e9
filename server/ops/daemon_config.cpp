#include "ops/daemon_config.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "k3/error.h"

namespace k3::server {

namespace {

using json = nlohmann::json;

// One setting: its config-file key (the command-line flag is the same with '-' for '_'), and how
// to set it from a string (command line, environment) and from JSON (config file).
struct Setting {
    const char* key;
    std::function<void(DaemonConfig&, const std::string&)> from_string;
    std::function<void(DaemonConfig&, const json&)> from_json;
};

long parse_long(const std::string& what, const std::string& s, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
        throw Error(ErrorKind::Usage, what + ": expected an integer in [" + std::to_string(lo) + ", " +
                                          std::to_string(hi) + "], got '" + s + "'");
    return v;
}

double parse_double(const std::string& what, const std::string& s, double lo, double hi) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !(v >= lo && v <= hi))
        throw Error(ErrorKind::Usage, what + ": expected a number in [" + std::to_string(lo) + ", " +
                                          std::to_string(hi) + "], got '" + s + "'");
    return v;
}

bool parse_bool(const std::string& what, const std::string& s) {
    if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "0" || s == "no" || s == "off") return false;
    throw Error(ErrorKind::Usage, what + ": expected true or false, got '" + s + "'");
}

std::string json_scalar(const std::string& what, const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_number_integer()) return std::to_string(v.get<long long>());
    if (v.is_number()) {
        std::ostringstream s;
        s << v.get<double>();
        return s.str();
    }
    throw Error(ErrorKind::Config, what + ": expected a string, number or boolean, got " + v.dump());
}

template <class T>
Setting int_setting(const char* key, T DaemonConfig::*field, long lo, long hi) {
    return {key, [=](DaemonConfig& c, const std::string& s) { c.*field = T(parse_long(key, s, lo, hi)); }, {}};
}
Setting double_setting(const char* key, double DaemonConfig::*field, double lo, double hi) {
    return {key, [=](DaemonConfig& c, const std::string& s) { c.*field = parse_double(key, s, lo, hi); }, {}};
}
Setting string_setting(const char* key, std::string DaemonConfig::*field, std::set<std::string> allowed = {}) {
    return {key,
            [=](DaemonConfig& c, const std::string& s) {
                if (!allowed.empty() && !allowed.count(s)) {
                    std::string list;
                    for (auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
                    throw Error(ErrorKind::Usage, std::string(key) + ": expected one of " + list + ", got '" + s + "'");
                }
                c.*field = s;
            },
            {}};
}
Setting bool_setting(const char* key, bool DaemonConfig::*field) {
    return {key, [=](DaemonConfig& c, const std::string& s) { c.*field = parse_bool(key, s); }, {}};
}

std::vector<std::string> split_keys(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

const std::vector<Setting>& settings() {
    static const std::vector<Setting> table = {
        string_setting("model", &DaemonConfig::model_dir),
        string_setting("model_alias", &DaemonConfig::model_alias),
        bool_setting("strict_model_name", &DaemonConfig::strict_model_name),
        string_setting("new_turn_tool_choice", &DaemonConfig::new_turn_tool_choice, {"auto", "required"}),
        string_setting("host", &DaemonConfig::host),
        int_setting("port", &DaemonConfig::port, 0, 65535),
        int_setting("threads", &DaemonConfig::threads, 0, 4096),
        int_setting("http_threads", &DaemonConfig::http_threads, 1, 1024),
        int_setting("max_connections", &DaemonConfig::max_connections, 1, 1000000),
        int_setting("max_connections_per_address", &DaemonConfig::max_connections_per_address, 0, 1000000),
        double_setting("first_byte_timeout_s", &DaemonConfig::first_byte_timeout_s, 0.1, 3600),
        double_setting("header_timeout_s", &DaemonConfig::header_timeout_s, 0.1, 3600),
        double_setting("body_timeout_s", &DaemonConfig::body_timeout_s, 0.1, 3600),
        {"allowed_hosts",
         [](DaemonConfig& c, const std::string& s) { c.allowed_hosts = split_keys(s); },
         [](DaemonConfig& c, const json& v) {
             if (!v.is_array()) throw Error(ErrorKind::Config, "allowed_hosts: expected an array of host names");
             c.allowed_hosts.clear();
             for (auto& h : v) {
                 if (!h.is_string()) throw Error(ErrorKind::Config, "allowed_hosts: every entry must be a string");
                 c.allowed_hosts.push_back(h.get<std::string>());
             }
         }},
        int_setting("queue_depth", &DaemonConfig::queue_depth, 1, 100000),
        int_setting("parallel", &DaemonConfig::parallel, 1, 64),
        int_setting("draft_max", &DaemonConfig::draft_max, 0, 32),
        double_setting("deadline_s", &DaemonConfig::deadline_s, 0, 1e7),
        double_setting("drain_timeout_s", &DaemonConfig::drain_timeout_s, 0, 1e5),
        double_setting("sse_ping_s", &DaemonConfig::sse_ping_s, 0.05, 3600),
        double_setting("slow_client_s", &DaemonConfig::slow_client_s, 0.1, 3600),
        int_setting("client_buffer_kb", &DaemonConfig::client_buffer_kb, 16, 1 << 20),
        double_setting("stuck_after_s", &DaemonConfig::stuck_after_s, 0.1, 1e6),
        {"api_key",
         [](DaemonConfig& c, const std::string& s) { c.api_keys = split_keys(s); },
         [](DaemonConfig& c, const json& v) {
             if (v.is_array()) {
                 c.api_keys.clear();
                 for (auto& k : v) {
                     if (!k.is_string() || k.get<std::string>().empty())
                         throw Error(ErrorKind::Config, "api_key: every entry must be a non-empty string");
                     c.api_keys.push_back(k.get<std::string>());
                 }
             } else if (v.is_string()) {
                 c.api_keys = split_keys(v.get<std::string>());
             } else {
                 throw Error(ErrorKind::Config, "api_key: expected a string or an array of strings");
             }
         }},
        {"api_key_file",
         [](DaemonConfig& c, const std::string& s) {
             std::ifstream in(s);
             if (!in) throw Error(ErrorKind::Usage, "api_key_file: cannot read '" + s + "'");
             std::string line;
             while (std::getline(in, line)) {
                 while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
                 if (!line.empty() && line[0] != '#') c.api_keys.push_back(line);
             }
         },
         {}},
        bool_setting("metrics_auth", &DaemonConfig::metrics_auth),
        string_setting("cors_origin", &DaemonConfig::cors_origin),
        int_setting("max_body_bytes", &DaemonConfig::max_body_bytes, 1024, 1L << 34),
        int_setting("max_inflight_body_mb", &DaemonConfig::max_inflight_body_mb, 1, 1 << 20),
        int_setting("max_json_depth", &DaemonConfig::max_json_depth, 4, 10000),
        int_setting("max_prompt_tokens", &DaemonConfig::max_prompt_tokens, 0, 1L << 30),
        int_setting("n_ctx", &DaemonConfig::n_ctx, 0, 1L << 30),
        string_setting("log_format", &DaemonConfig::log_format, {"text", "json"}),
        string_setting("log_level", &DaemonConfig::log_level, {"trace", "debug", "info", "warn", "error"}),
        bool_setting("web_ui", &DaemonConfig::web_ui),
        string_setting("web_dir", &DaemonConfig::web_dir),
        {"preset", [](DaemonConfig& c, const std::string& s) { c.memory.preset = s; }, {}},
        {"trunk_gb", [](DaemonConfig& c, const std::string& s) { c.memory.trunk_gb = parse_double("trunk_gb", s, -1, 1e6); }, {}},
        {"cache_gb", [](DaemonConfig& c, const std::string& s) { c.memory.cache_gb = parse_double("cache_gb", s, -1, 1e6); }, {}},
        {"prompt_cache_gb",
         [](DaemonConfig& c, const std::string& s) { c.memory.prompt_cache_gb = parse_double("prompt_cache_gb", s, -1, 1e6); },
         {}},
        {"prompt_cache_dir", [](DaemonConfig& c, const std::string& s) { c.memory.prompt_cache_dir = s; }, {}},
        {"prompt_cache_dir_gb",
         [](DaemonConfig& c, const std::string& s) {
             c.memory.prompt_cache_dir_gb = parse_double("prompt_cache_dir_gb", s, -1, 1e7);
         },
         {}},
        {"trunk", [](DaemonConfig& c, const std::string& s) { c.memory.trunk_dir = s; }, {}},
        {"prefill_mb", [](DaemonConfig& c, const std::string& s) { c.memory.prefill_mb = parse_double("prefill_mb", s, -1, 1e7); }, {}},
        {"lookahead", [](DaemonConfig& c, const std::string& s) { c.memory.lookahead = parse_bool("lookahead", s); }, {}},
        {"background_load",
         [](DaemonConfig& c, const std::string& s) { c.memory.background_load = parse_bool("background_load", s); },
         {}},
        bool_setting("mlock", &DaemonConfig::mlock),
        string_setting("kernels", &DaemonConfig::kernels, {"", "scalar", "avx2", "avx512", "neon"}),
    };
    return table;
}

const Setting* find_setting(const std::string& key) {
    for (const auto& s : settings())
        if (key == s.key) return &s;
    return nullptr;
}

std::string flag_to_key(std::string flag) {
    for (auto& ch : flag)
        if (ch == '-') ch = '_';
    return flag;
}

}  // namespace

const char* serve_usage() {
    return R"(usage: k3serve serve [MODEL_DIR] [options]

Runs the OpenAI-compatible daemon: POST /v1/completions, /v1/chat/completions, /tokenize,
/detokenize; GET /v1/models, /health, /metrics, /props and the web UI at /.
Settings come from defaults < --config FILE (JSON, keys as below with '_' for '-') <
environment (K3SERVE_MODEL, K3SERVE_HOST, K3SERVE_PORT, K3SERVE_API_KEY) < command line.

  MODEL_DIR                 checkpoint directory (or "model" in the config file)
  --config FILE             JSON config file (see config/k3serve.example.json)
  --host ADDR               bind address (default 127.0.0.1)
  --port N                  port (default 8080; 0 = any free port, printed at start)
  --threads N               compute threads (default: physical cores)
  --http-threads N          requests answered at once, one thread each (default 64; at
                            least --queue-depth + --parallel + 16)
  --max-connections N       open client connections (default 1024; idle ones hold no thread);
                            near it the longest idle one is closed for a new one
  --max-connections-per-address N
                            the same per client address, 0 = none (default 256; behind a
                            proxy every client has its address: raise it or set 0)
  --first-byte-timeout-s S  a new connection must send its first byte within S (default 3)
  --header-timeout-s S      a request head must arrive within S seconds (default 10)
  --body-timeout-s S        a request body must arrive within S seconds of its head (default 60)
  --allowed-hosts H1,H2     more Host names to serve when bound to loopback without an API key
                            (default: localhost, 127.0.0.1, [::1] only; DNS-rebinding guard)
  --queue-depth N           requests waiting for the engine at most; more get 503 (default 8)
  --parallel N              requests run at once, batched into each engine step (default 4)
  --draft-max N             speculative decoding: verify up to N prompt-lookup drafts per step,
                            exact (the output never changes), 0 = off (default 8)
  --deadline-s S            per-request deadline in seconds, 0 = none (default 600)
  --drain-timeout-s S       on SIGTERM, let requests finish this long, then cancel (default 30)
  --sse-ping-s S            SSE keep-alive comment interval while waiting (default 5)
  --slow-client-s S         drop a connection whose client reads nothing this long (default 10)
  --client-buffer-kb N      cancel a stream once this much of its output waits for its client;
                            the engine never waits for a client (default 1024)
  --stuck-after-s S         a busy engine with no progress (per layer) this long is stuck: /health
                            answers 503 and systemd watchdog pings stop (default 120)
  --api-key K1[,K2]         require "Authorization: Bearer K" on the API (default: none)
  --api-key-file FILE       one key per line
  --metrics-auth BOOL       /metrics needs the key too (default false)
  --cors-origin ORIGIN      send CORS headers for this origin or "*" (default: off)
  --max-body-bytes N        request body limit (default 8388608)
  --max-inflight-body-mb N  request bodies being received at once, MiB; more get 503 at their
                            head (default 256)
  --max-json-depth N        JSON nesting limit (default 64)
  --max-prompt-tokens N     prompt length limit, 0 = the context size (default 0)
  --n-ctx N                 context size in tokens, 0 = min(model maximum, 32768)
  --model-alias NAME        model id to report (default: the directory name)
  --strict-model-name BOOL  refuse requests naming another model with a 404 (default false:
                            any name is served by the loaded model and echoed back)
  --new-turn-tool-choice auto|required
                            "required": a request that offers tools with tool_choice auto and
                            starts a turn (no tool results since the last assistant message) must
                            call one of them; the requests carrying the results stay auto. For
                            models that answer without using their tools (default auto)
  --log-format text|json    log lines as plain text or JSON (default text)
  --log-level LEVEL         trace, debug, info, warn, error (default info)
  --web-ui BOOL             serve the web UI at / (default true)
  --web-dir DIR             serve the UI from DIR instead of the embedded copy (UI work)
  --preset NAME             memory preset: laptop, desktop, workstation, server, max, auto
  --trunk-gb GB             RAM for the dense trunk (overrides the preset)
  --cache-gb GB             RAM for the expert cache (overrides the preset)
  --prompt-cache-gb GB      RAM for the prompt cache shared by all requests, 0 = off
                            (default: from the preset, else 1)
  --prompt-cache-dir DIR    the prompt cache's disk tier: states leaving RAM (and every
                            prompt's end) are kept in DIR, checksummed, and reused after a
                            restart (one directory per model; default: none)
  --prompt-cache-dir-gb GB  disk for it (default: 8 x the prompt cache's RAM)
  --trunk DIR               packed trunk (k3serve pack-trunk)
  --prefill-mb MB           activations of one prefill chunk; the chunk is as many tokens as
                            fit (default: the preset's, else at most 256 tokens)
  --lookahead BOOL          read ahead the experts the next layer's router predicts (exact:
                            it only schedules reads; default true); --no-lookahead = false
  --background-load BOOL    everything resident: serve once the trunk is in memory and read
                            the routed experts behind it (a request needing one not read yet
                            reads it first; default true); --no-background-load = false
  --mlock BOOL              keep the daemon's memory (resident weights, pinned layers, caches)
                            from being paged out: pages are locked as they are touched, where
                            RLIMIT_MEMLOCK is unlimited or the process has CAP_IPC_LOCK (else a
                            warning; default true); --no-mlock = false
  --kernels NAME            force a kernel set: scalar, avx2, avx512, neon
  --help                    this text

Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage/config/checkpoint,
130 second SIGINT/SIGTERM.
)";
}

void apply_config_json(DaemonConfig& config, const json& j, const std::string& source) {
    if (!j.is_object()) throw Error(ErrorKind::Config, source + ": expected a JSON object at the top level");
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& key = it.key();
        if (!key.empty() && key[0] == '_') continue;  // "_comment" and friends
        const Setting* s = find_setting(key);
        if (!s) throw Error(ErrorKind::Config, source + ": unknown key '" + key + "'");
        try {
            if (s->from_json)
                s->from_json(config, it.value());
            else
                s->from_string(config, json_scalar(key, it.value()));
        } catch (const Error& e) {
            throw Error(ErrorKind::Config, source + ": " + e.what());
        }
    }
}

DaemonConfig parse_daemon_config(int argc, char** argv, bool* help) {
    *help = false;
    // First pass: --help and --config, so that the file sits below the command line.
    std::string config_file;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            *help = true;
            return {};
        }
        if (a == "--config") {
            if (i + 1 >= argc) throw Error(ErrorKind::Usage, "--config: missing FILE");
            config_file = argv[++i];
        } else if (a.rfind("--config=", 0) == 0) {
            config_file = a.substr(9);
        }
    }
    DaemonConfig config;
    if (!config_file.empty()) {
        std::ifstream in(config_file);
        if (!in) throw Error(ErrorKind::Config, config_file + ": cannot open the config file");
        json j;
        try {
            j = json::parse(in, nullptr, true, /*ignore_comments=*/true);
        } catch (const json::parse_error& e) {
            throw Error(ErrorKind::Config, config_file + ": not valid JSON: " + e.what());
        }
        apply_config_json(config, j, config_file);
    }
    for (auto [env, key] : {std::pair{"K3SERVE_MODEL", "model"}, {"K3SERVE_HOST", "host"},
                            {"K3SERVE_PORT", "port"}, {"K3SERVE_API_KEY", "api_key"}}) {
        if (const char* v = std::getenv(env); v && *v) {
            try {
                find_setting(key)->from_string(config, v);
            } catch (const Error& e) {
                throw Error(ErrorKind::Usage, std::string("environment ") + env + ": " + e.what());
            }
        }
    }
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--config") {
            ++i;
            continue;
        }
        if (a.rfind("--config=", 0) == 0) continue;
        if (a.rfind("--", 0) != 0) {
            if (a.rfind("-", 0) == 0) throw Error(ErrorKind::Usage, "unknown option '" + a + "' (see --help)");
            config.model_dir = a;
            continue;
        }
        std::string name = a.substr(2), value;
        bool has_value = false;
        // The switches `k3serve run` has, spelled the same way here.
        if (name == "no-lookahead" || name == "no-background-load" || name == "no-mlock") {
            find_setting(flag_to_key(name.substr(3)))->from_string(config, "false");
            continue;
        }
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_value = true;
        }
        const Setting* s = find_setting(flag_to_key(name));
        if (!s || name.find('_') != std::string::npos)
            throw Error(ErrorKind::Usage, "unknown option '--" + name + "' (see --help)");
        if (!has_value) {
            if (i + 1 >= argc) throw Error(ErrorKind::Usage, "--" + name + ": missing value");
            value = argv[++i];
        }
        try {
            s->from_string(config, value);
        } catch (const Error& e) {
            throw Error(ErrorKind::Usage, std::string("--") + e.what());
        }
    }
    if (config.model_dir.empty()) throw Error(ErrorKind::Usage, "no MODEL_DIR given (argument, \"model\" in --config, or K3SERVE_MODEL)");
    if (config.model_alias.empty()) {
        std::filesystem::path p(config.model_dir);
        config.model_alias = (p.has_filename() ? p.filename() : p.parent_path().filename()).string();
    }
    if (config.threads == 0) config.threads = physical_cores();
    if (!config.cors_origin.empty() && config.cors_origin.find_first_of(" ,") != std::string::npos)
        throw Error(ErrorKind::Usage, "cors_origin: give one origin or \"*\", got '" + config.cors_origin + "'");
    return config;
}

EngineOptions DaemonConfig::engine_options() const {
    EngineOptions o;
    o.model_dir = model_dir;
    o.memory = memory;
    o.threads = threads;
    o.kernels = kernels;
    return o;
}

json DaemonConfig::to_json() const {
    return json{
        {"model", model_dir},
        {"model_alias", model_alias},
        {"strict_model_name", strict_model_name},
        {"new_turn_tool_choice", new_turn_tool_choice},
        {"host", host},
        {"port", port},
        {"threads", threads},
        {"http_threads", http_threads},
        {"max_connections", max_connections},
        {"max_connections_per_address", max_connections_per_address},
        {"first_byte_timeout_s", first_byte_timeout_s},
        {"header_timeout_s", header_timeout_s},
        {"body_timeout_s", body_timeout_s},
        {"allowed_hosts", allowed_hosts},
        {"queue_depth", queue_depth},
        {"parallel", parallel},
        {"draft_max", draft_max},
        {"deadline_s", deadline_s},
        {"drain_timeout_s", drain_timeout_s},
        {"sse_ping_s", sse_ping_s},
        {"slow_client_s", slow_client_s},
        {"client_buffer_kb", client_buffer_kb},
        {"stuck_after_s", stuck_after_s},
        {"api_keys", api_keys.size()},  // how many, never the keys
        {"metrics_auth", metrics_auth},
        {"cors_origin", cors_origin},
        {"max_body_bytes", max_body_bytes},
        {"max_inflight_body_mb", max_inflight_body_mb},
        {"max_json_depth", max_json_depth},
        {"max_prompt_tokens", max_prompt_tokens},
        {"n_ctx", n_ctx},
        {"log_format", log_format},
        {"log_level", log_level},
        {"web_ui", web_ui},
        {"web_dir", web_dir},
        {"preset", memory.preset},
        {"trunk_gb", memory.trunk_gb},
        {"cache_gb", memory.cache_gb},
        {"prompt_cache_gb", memory.prompt_cache_gb},
        {"prompt_cache_dir", memory.prompt_cache_dir},
        {"prompt_cache_dir_gb", memory.prompt_cache_dir_gb},
        {"trunk", memory.trunk_dir},
        {"prefill_mb", memory.prefill_mb},
        {"lookahead", memory.lookahead},
        {"background_load", memory.background_load},
        {"mlock", mlock},
        {"kernels", kernels},
    };
}

}  // namespace k3::server
