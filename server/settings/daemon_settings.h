// The settings of `k3serve serve`, in one table: each row is a config-file key, the flag spelled
// from it ("max_body_bytes" -> --max-body-bytes), what its value is, a line of help with the
// default, how to set it from text (command line, environment) or JSON (config file), and how
// /props and the start-up log show it. The parser, the config file, `--help` and the table in
// docs/operations.md ("Every setting") all come from it; a test compares that page with
// settings_markdown().
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <functional>
#include <string>
#include <vector>

#include "settings/daemon_config.h"

namespace k3::server {

struct DaemonSetting {
    const char* key;      // config-file key
    const char* value;    // what the value is, for --help ("N", "S", "BOOL", "DIR", ...)
    const char* help;     // what it does, with its default
    std::function<void(DaemonConfig&, const std::string&)> from_string;
    // Empty: the JSON scalar as text, through from_string.
    std::function<void(DaemonConfig&, const nlohmann::json&)> from_json = {};
    // Its value in DaemonConfig::to_json(); empty: not shown (api_key_file: the keys are shown
    // by api_key, as a count).
    std::function<nlohmann::json(const DaemonConfig&)> shown = {};
    bool negatable = false;  // --no-FLAG sets it false
    const char* shown_as = nullptr;  // the name in to_json() when not `key`
};

const std::vector<DaemonSetting>& daemon_settings();
// The row of a config-file key; nullptr if there is none.
const DaemonSetting* find_daemon_setting(const std::string& key);
// "--max-body-bytes".
std::string setting_flag(const DaemonSetting& s);

// The options part of `k3serve serve --help`: flag and value, then the help wrapped beside it.
std::string settings_help();
// The table of docs/operations.md "Every setting": flag, config key, meaning.
std::string settings_markdown();

}  // namespace k3::server
