#include "settings/daemon_settings.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "k3/error.h"
#include "k3/kernel_set_names.h"

namespace k3::server {

namespace {

using json = nlohmann::json;

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

std::vector<std::string> split_keys(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string item;
    while (std::getline(in, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

// A field of DaemonConfig, or of its MemoryOptions (the engine's memory settings).
template <class T>
struct Field {
    T DaemonConfig::*top = nullptr;
    T MemoryOptions::*memory = nullptr;
    T& of(DaemonConfig& c) const { return top ? c.*top : c.memory.*memory; }
    const T& of(const DaemonConfig& c) const { return top ? c.*top : c.memory.*memory; }
};
template <class T>
Field<T> field(T DaemonConfig::*f) { return {f, nullptr}; }
template <class T>
Field<T> field(T MemoryOptions::*f) { return {nullptr, f}; }

template <class T>
DaemonSetting shown_field(DaemonSetting s, Field<T> f) {
    s.shown = [f](const DaemonConfig& c) { return json(f.of(c)); };
    return s;
}

template <class T>
DaemonSetting int_setting(const char* key, const char* value, const char* help, Field<T> f, long lo, long hi) {
    return shown_field({key, value, help, [=](DaemonConfig& c, const std::string& s) { f.of(c) = T(parse_long(key, s, lo, hi)); }},
                       f);
}
DaemonSetting double_setting(const char* key, const char* value, const char* help, Field<double> f, double lo, double hi) {
    return shown_field({key, value, help, [=](DaemonConfig& c, const std::string& s) { f.of(c) = parse_double(key, s, lo, hi); }},
                       f);
}
DaemonSetting string_setting(const char* key, const char* value, const char* help, Field<std::string> f,
                             std::set<std::string> allowed = {}) {
    return shown_field({key, value, help,
                        [=](DaemonConfig& c, const std::string& s) {
                            if (!allowed.empty() && !allowed.count(s)) {
                                std::string list;
                                for (auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
                                throw Error(ErrorKind::Usage, std::string(key) + ": expected one of " + list + ", got '" + s + "'");
                            }
                            f.of(c) = s;
                        }},
                       f);
}
DaemonSetting bool_setting(const char* key, const char* help, Field<bool> f, bool negatable = false) {
    DaemonSetting s = shown_field({key, "BOOL", help, [=](DaemonConfig& c, const std::string& v) { f.of(c) = parse_bool(key, v); }}, f);
    s.negatable = negatable;
    return s;
}

DaemonSetting allowed_hosts_setting() {
    return {"allowed_hosts", "H1,H2",
            "more Host names to serve when bound to loopback without an API key (default: localhost, 127.0.0.1, [::1] "
            "only; DNS-rebinding guard)",
            [](DaemonConfig& c, const std::string& s) { c.allowed_hosts = split_keys(s); },
            [](DaemonConfig& c, const json& v) {
                if (!v.is_array()) throw Error(ErrorKind::Config, "allowed_hosts: expected an array of host names");
                c.allowed_hosts.clear();
                for (auto& h : v) {
                    if (!h.is_string()) throw Error(ErrorKind::Config, "allowed_hosts: every entry must be a string");
                    c.allowed_hosts.push_back(h.get<std::string>());
                }
            },
            [](const DaemonConfig& c) { return json(c.allowed_hosts); }};
}

DaemonSetting api_key_setting() {
    DaemonSetting s{"api_key", "K1[,K2]", "require \"Authorization: Bearer K\" on the API (default: none)",
                    [](DaemonConfig& c, const std::string& v) { c.api_keys = split_keys(v); },
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
                    },
                    [](const DaemonConfig& c) { return json(c.api_keys.size()); }};  // how many, never the keys
    s.shown_as = "api_keys";
    return s;
}

DaemonSetting api_key_file_setting() {
    return {"api_key_file", "FILE", "more API keys, one a line ('#' starts a comment line)",
            [](DaemonConfig& c, const std::string& s) {
                std::ifstream in(s);
                if (!in) throw Error(ErrorKind::Usage, "api_key_file: cannot read '" + s + "'");
                std::string line;
                while (std::getline(in, line)) {
                    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
                    if (!line.empty() && line[0] != '#') c.api_keys.push_back(line);
                }
            }};
}

// Lines of at most `width` columns, broken at spaces.
std::vector<std::string> wrap(const std::string& text, size_t width) {
    std::vector<std::string> lines;
    std::istringstream words(text);
    std::string word, line;
    while (words >> word) {
        if (!line.empty() && line.size() + 1 + word.size() > width) {
            lines.push_back(line);
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    if (!line.empty()) lines.push_back(line);
    return lines;
}

std::string full_help(const DaemonSetting& s) {
    std::string help = s.help;
    if (s.negatable) help += "; --no-" + setting_flag(s).substr(2) + " = false";
    return help;
}

std::string table_cell(const std::string& text) {
    std::string out;
    for (char ch : text) {
        if (ch == '|') out += '\\';
        out += ch;
    }
    return out;
}

// --kernels: "" (the best set) or a name of the kernel-set table.
std::set<std::string> kernel_set_choices() {
    std::set<std::string> choices{""};
    for (const std::string& name : kernel_set_names()) choices.insert(name);
    return choices;
}

}  // namespace

const std::vector<DaemonSetting>& daemon_settings() {
    using D = DaemonConfig;
    using M = MemoryOptions;
    // The kernel sets come from the engine's table (k3/kernel_set_names.h), never listed here.
    static const std::string kernels_help =
        "force a kernel set: " + kernel_set_list() + " (default: the best this CPU has)";
    static const std::vector<DaemonSetting> table = {
        string_setting("model", "DIR", "checkpoint directory (also the first argument, MODEL_DIR)", field(&D::model_dir)),
        string_setting("host", "ADDR", "bind address (default 127.0.0.1)", field(&D::host)),
        int_setting("port", "N", "port (default 8080; 0 = any free port, printed at start)", field(&D::port), 0, 65535),
        int_setting("threads", "N", "compute threads (default: physical cores)", field(&D::threads), 0, 4096),
        int_setting("http_threads", "N",
                    "requests answered at once, one thread each (default 64; at least --queue-depth + --parallel + 16)",
                    field(&D::http_threads), 1, 1024),
        int_setting("max_connections", "N",
                    "open client connections (default 1024; idle ones hold no thread); near it the longest idle one is "
                    "closed for a new one",
                    field(&D::max_connections), 1, 1000000),
        int_setting("agent_port", "N",
                    "answer HAProxy's agent-check on this port of --host: \"ready W%\" with W falling as requests and "
                    "context fill, \"drain\" while loading or draining (default -1: off; 0 = any free port)",
                    field(&D::agent_port), -1, 65535),
        int_setting("max_connections_per_address", "N",
                    "the same per client address, 0 = none (default 256; behind a proxy all clients share its address: "
                    "raise it or set 0)",
                    field(&D::max_connections_per_address), 0, 1000000),
        double_setting("first_byte_timeout_s", "S", "a new connection must send its first byte within S (default 3)",
                       field(&D::first_byte_timeout_s), 0.1, 3600),
        double_setting("header_timeout_s", "S", "a request head must arrive within S seconds (default 10)",
                       field(&D::header_timeout_s), 0.1, 3600),
        double_setting("body_timeout_s", "S", "a request body must arrive within S seconds of its head (default 60)",
                       field(&D::body_timeout_s), 0.1, 3600),
        allowed_hosts_setting(),
        int_setting("queue_depth", "N", "requests waiting for the engine at most; more get 503 (default 8)",
                    field(&D::queue_depth), 1, 100000),
        int_setting("parallel", "N", "requests run at once, batched into each engine step (default 4)", field(&D::parallel), 1, 64),
        int_setting("draft_max", "N",
                    "speculative decoding: verify up to N prompt-lookup drafts per step, exact (the output never "
                    "changes), 0 = off (default 8)",
                    field(&D::draft_max), 0, 32),
        double_setting("deadline_s", "S", "per-request deadline in seconds, 0 = none (default 600)", field(&D::deadline_s), 0, 1e7),
        double_setting("drain_timeout_s", "S", "on SIGTERM, let requests finish this long, then cancel (default 30)",
                       field(&D::drain_timeout_s), 0, 1e5),
        double_setting("sse_ping_s", "S",
                       "a quiet stream gets a keep-alive event its SDK passes on this often (default 5)",
                       field(&D::sse_ping_s), 0.05, 3600),
        int_setting("interleave_tokens", "N",
                    "while other requests decode, at most N prompt tokens share their step; a longer pass runs on its "
                    "own (with decode_wait_s on) or is cut to N tokens (with it 0) (default 64)",
                    field(&D::interleave_tokens), 1, 1 << 20),
        double_setting("decode_wait_s", "S",
                       "while a prompt's pass runs on its own, requests already decoding take a step before its first "
                       "layer and then between its layers whenever one has waited S seconds for its next token; "
                       "0 = off (default 10)",
                       field(&D::decode_wait_s), 0, 1e6),
        double_setting("abandoned_prefill_s", "S",
                       "a prompt whose client left is read on into the prompt cache for at most S seconds, and a request "
                       "for the same prompt takes it over; 0 = it stops at once (default 1800)",
                       field(&D::abandoned_prefill_s), 0, 1e6),
        double_setting("slow_client_s", "S", "drop a connection whose client reads nothing this long (default 10)",
                       field(&D::slow_client_s), 0.1, 3600),
        int_setting("client_buffer_kb", "N",
                    "cancel a stream once this much of its output waits for its client; the engine never waits for a "
                    "client (default 1024)",
                    field(&D::client_buffer_kb), 16, 1 << 20),
        double_setting("stuck_after_s", "S",
                       "a busy engine with no progress (per layer) this long is stuck: /health answers 503 and systemd "
                       "watchdog pings stop (default 120)",
                       field(&D::stuck_after_s), 0.1, 1e6),
        api_key_setting(),
        api_key_file_setting(),
        bool_setting("metrics_auth", "/metrics and /v1/status need the key too (default false)", field(&D::metrics_auth)),
        string_setting("cors_origin", "ORIGIN", "send CORS headers for this origin or \"*\" (default: off)", field(&D::cors_origin)),
        int_setting("max_body_bytes", "N", "request body limit (default 8388608)", field(&D::max_body_bytes), 1024, 1L << 34),
        int_setting("max_inflight_body_mb", "N",
                    "request bodies being received at once, MiB; more get 503 at their head (default 256)",
                    field(&D::max_inflight_body_mb), 1, 1 << 20),
        int_setting("max_json_depth", "N", "JSON nesting limit (default 64)", field(&D::max_json_depth), 4, 10000),
        int_setting("max_answer_mb", "N",
                    "a whole (non-streamed) answer at most, MiB, judged before it runs from n x max_tokens x a token's "
                    "bytes with its logprobs; more is a 400 (default 256; streams are not bound by it)",
                    field(&D::max_answer_mb), 1, 1 << 20),
        int_setting("max_prompt_tokens", "N", "prompt length limit, 0 = the context size (default 0)",
                    field(&D::max_prompt_tokens), 0, 1L << 30),
        int_setting("image_max_bytes", "N", "an image's encoded size limit, bytes (default 20971520)",
                    field(&D::image_max_bytes), 1, 1L << 34),
        int_setting("image_max_pixels", "N", "an image's width x height limit (default 50000000)",
                    field(&D::image_max_pixels), 1, 1L << 40),
        int_setting("images_per_request", "N", "images in one request at most, every turn's counted (default 8)",
                    field(&D::images_per_request), 0, 4096),
        int_setting("grammar_max_enum", "N",
                    "values of one enum in a response_format or tool schema; more is a 400 grammar_too_large "
                    "(default 10000)",
                    field(&D::grammar_max_enum), 1, 10000000),
        int_setting("grammar_max_literal_bytes", "N",
                    "bytes of all enum and const values of one request's schema together; more is a 400 "
                    "grammar_too_large (default 1048576)",
                    field(&D::grammar_max_literal_bytes), 1, 1L << 32),
        int_setting("grammar_max_symbols", "N",
                    "size of one request's compiled grammar in symbols (a byte, control token or reference each); "
                    "more is a 400 grammar_too_large (default 4194304)",
                    field(&D::grammar_max_symbols), 64, 1L << 32),
        int_setting("grammar_max_states", "N",
                    "states of one request's grammar automaton; more while compiling is a 400 grammar_too_large, "
                    "while generating an error event (default 65536)",
                    field(&D::grammar_max_states), 16, 1L << 26),
        double_setting("grammar_max_compile_ms", "MS",
                       "time to compile one request's grammar on its HTTP thread (rules, automaton, first mask); "
                       "longer is a 400 grammar_too_large (default 5000)",
                       field(&D::grammar_max_compile_ms), 1, 3.6e6),
        int_setting("n_ctx", "N", "context size in tokens, 0 = min(model maximum, 32768) (default 0)", field(&D::n_ctx), 0,
                    1L << 30),
        string_setting("model_alias", "NAME", "model id to report (default: the directory name)", field(&D::model_alias)),
        bool_setting("hosted_sampling",
                     "hold chat requests to Moonshot's hosted sampling, to reproduce its published figures: "
                     "temperature 1.0 with thinking, 0.6 without (either may be sent), top_p 0.95, no presence or "
                     "frequency penalty, n 1; other values are a 400 (default false: any sampling)",
                     field(&D::hosted_sampling)),
        bool_setting("strict_model_name",
                     "refuse requests naming another model with a 404 (default false: any name is served by the loaded "
                     "model and echoed back)",
                     field(&D::strict_model_name)),
        string_setting("new_turn_tool_choice", "auto|required",
                       "\"required\": a request that offers tools with tool_choice auto and starts a turn (no tool "
                       "results since the last assistant message) must call one of them; the requests carrying the "
                       "results stay auto. For models that answer without using their tools (default auto)",
                       field(&D::new_turn_tool_choice), {"auto", "required"}),
        string_setting("log_format", "text|json", "log lines as plain text or JSON (default text)", field(&D::log_format),
                       {"text", "json"}),
        string_setting("log_level", "LEVEL", "trace, debug, info, warn, error (default info)", field(&D::log_level),
                       {"trace", "debug", "info", "warn", "error"}),
        bool_setting("web_ui", "serve the web UI at / (default true)", field(&D::web_ui)),
        string_setting("web_dir", "DIR", "serve the UI from DIR instead of the embedded copy (UI work)", field(&D::web_dir)),
        string_setting("preset", "NAME", "memory preset: laptop, desktop, workstation, server, max, auto", field(&M::preset)),
        double_setting("trunk_gb", "GB", "RAM for the dense trunk (overrides the preset)", field(&M::trunk_gb), -1, 1e6),
        double_setting("cache_gb", "GB", "RAM for the expert cache (overrides the preset)", field(&M::cache_gb), -1, 1e6),
        double_setting("prompt_cache_gb", "GB",
                       "RAM for the prompt cache, one budget for all requests (with API keys, each key resumes only its own prompts), 0 = off (default: from the preset, else 1)",
                       field(&M::prompt_cache_gb), -1, 1e6),
        string_setting("prompt_cache_dir", "DIR",
                       "the prompt cache's disk tier: states leaving RAM (and every prompt's end) are kept in DIR, "
                       "checksummed, and reused after a restart (one directory per model; default: none)",
                       field(&M::prompt_cache_dir)),
        double_setting("prompt_cache_dir_gb", "GB", "disk for it (default: 8 x the prompt cache's RAM)",
                       field(&M::prompt_cache_dir_gb), -1, 1e7),
        string_setting("trunk", "DIR", "packed trunk (k3serve pack-trunk)", field(&M::trunk_dir)),
        double_setting("prefill_mb", "MB",
                       "a prefill pass's own memory, to which a budget lends the expert cache's spare slots, the "
                       "lm_head and pinned trunk layers; a pass is as many tokens as that holds (default: the "
                       "preset's, else 256 MiB)",
                       field(&M::prefill_mb), -1, 1e7),
        int_setting("pass_tokens", "N",
                    "at most N tokens a prefill pass, which bounds what a request arriving during one waits "
                    "(default 0: as many as memory allows)",
                    field(&M::pass_tokens), 0, 1 << 30),
        bool_setting("lookahead",
                     "read ahead the experts the next layer's router predicts (exact: it only schedules reads; default "
                     "true)",
                     field(&M::lookahead), true),
        bool_setting("background_load",
                     "everything resident: serve once the trunk is in memory and read the routed experts behind it (a "
                     "request needing one not read yet reads it first; default true)",
                     field(&M::background_load), true),
        bool_setting("mlock",
                     "keep the daemon's memory (resident weights, pinned layers, caches) from being paged out: pages "
                     "are locked as they are touched, where RLIMIT_MEMLOCK is unlimited or the process has "
                     "CAP_IPC_LOCK (else a warning; default true)",
                     field(&D::mlock), true),
        string_setting("kernels", "NAME", kernels_help.c_str(), field(&D::kernels), kernel_set_choices()),
        bool_setting("vision",
                     "read the checkpoint's vision tower and accept images; --no-vision serves the text model without "
                     "reading it (images get a 400; default true)",
                     field(&D::vision), true),
        // Test hooks (docs/development.md "Tests wait on states").
        string_setting("test_hold_prefill", "FILE",
                       "test hook: while FILE exists, a prompt that has read a prefill pass waits before its next "
                       "(the worker goes on serving the others)",
                       field(&D::test_hold_prefill)),
        string_setting("test_hold_pass", "FILE",
                       "test hook: while FILE exists, a prefill pass of more than one token waits before its middle "
                       "layer (a cancel lets it go)",
                       field(&D::test_hold_pass)),
        string_setting("test_hold_grammar_compile", "FILE",
                       "test hook: while FILE exists, a request waits after compiling its grammar, before its job is "
                       "queued",
                       field(&D::test_hold_grammar_compile)),
        string_setting("test_hold_background_load", "FILE",
                       "test hook: while FILE exists, the background load reads nothing past the trunk (requests read "
                       "the experts they need)",
                       field(&M::hold_background_load)),
    };
    return table;
}

const DaemonSetting* find_daemon_setting(const std::string& key) {
    for (const auto& s : daemon_settings())
        if (key == s.key) return &s;
    return nullptr;
}

std::string setting_flag(const DaemonSetting& s) {
    std::string flag = std::string("--") + s.key;
    for (auto& ch : flag)
        if (ch == '_') ch = '-';
    return flag;
}

std::string settings_help() {
    constexpr size_t kHelpColumn = 28, kWidth = 100;
    std::string out;
    for (const auto& s : daemon_settings()) {
        std::string head = "  " + setting_flag(s) + " " + s.value;
        std::vector<std::string> lines = wrap(full_help(s), kWidth - kHelpColumn);
        for (size_t i = 0; i < lines.size(); ++i) {
            std::string left = i == 0 ? head : "";
            if (left.size() + 1 > kHelpColumn) {
                out += left + "\n";
                left.clear();
            }
            out += left + std::string(kHelpColumn - left.size(), ' ') + lines[i] + "\n";
        }
    }
    return out;
}

std::string settings_markdown() {
    std::string out = "| flag | config-file key | meaning |\n|---|---|---|\n";
    for (const auto& s : daemon_settings())
        out += "| `" + table_cell(setting_flag(s) + " " + s.value) + "` | `" + s.key + "` | " + table_cell(full_help(s)) + " |\n";
    return out;
}

}  // namespace k3::server
