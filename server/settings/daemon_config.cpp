#include "settings/daemon_config.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "k3/error.h"
#include "settings/daemon_settings.h"

namespace k3::server {

namespace {

using json = nlohmann::json;

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

std::string flag_to_key(std::string flag) {
    for (auto& ch : flag)
        if (ch == '-') ch = '_';
    return flag;
}

}  // namespace

std::string serve_usage() {
    return std::string(R"(usage: k3serve serve [MODEL_DIR] [options]

Runs the OpenAI-compatible daemon: POST /v1/completions, /v1/chat/completions, /v1/responses,
/v1/messages, /tokenize, /detokenize; GET /v1/models, /health, /metrics, /v1/status, /props,
/slots and the web UI at /.
Settings come from defaults < --config FILE (JSON, keys as below with '_' for '-') <
environment (K3SERVE_MODEL, K3SERVE_HOST, K3SERVE_PORT, K3SERVE_API_KEY) < command line.

  MODEL_DIR                 checkpoint directory (or "model" in the config file)
  --config FILE             JSON config file (see config/k3serve.example.json)
)") +
           settings_help() +
           R"(  --help                    this text

Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage/config/checkpoint,
130 second SIGINT/SIGTERM.
)";
}

void apply_config_json(DaemonConfig& config, const json& j, const std::string& source) {
    if (!j.is_object()) throw Error(ErrorKind::Config, source + ": expected a JSON object at the top level");
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& key = it.key();
        if (!key.empty() && key[0] == '_') continue;  // "_comment" and friends
        const DaemonSetting* s = find_daemon_setting(key);
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
                find_daemon_setting(key)->from_string(config, v);
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
        // --no-lookahead and the like (the switches `k3serve run` has, spelled the same way).
        if (name.rfind("no-", 0) == 0) {
            const DaemonSetting* s = find_daemon_setting(flag_to_key(name.substr(3)));
            if (s && s->negatable && name.find_first_of("_=") == std::string::npos) {
                s->from_string(config, "false");
                continue;
            }
        }
        if (auto eq = name.find('='); eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_value = true;
        }
        const DaemonSetting* s = find_daemon_setting(flag_to_key(name));
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

GrammarLimits DaemonConfig::grammar_limits() const {
    GrammarLimits g;
    g.max_enum_values = size_t(grammar_max_enum);
    g.max_literal_bytes = grammar_max_literal_bytes;
    g.max_symbols = grammar_max_symbols;
    g.max_states = grammar_max_states;
    g.max_compile_ms = grammar_max_compile_ms;
    return g;
}

EngineOptions DaemonConfig::engine_options() const {
    EngineOptions o;
    o.model_dir = model_dir;
    o.memory = memory;
    o.threads = threads;
    o.kernels = kernels;
    o.vision = vision;
    o.hold_pass = test_hold_pass;
    return o;
}

json DaemonConfig::to_json() const {
    json j = json::object();
    for (const auto& s : daemon_settings())
        if (s.shown) j[s.shown_as ? s.shown_as : s.key] = s.shown(*this);
    return j;
}

}  // namespace k3::server
