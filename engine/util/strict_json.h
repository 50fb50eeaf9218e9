// Parsing untrusted JSON (config.json, safetensors headers, the shard index) strictly: nesting
// is bounded before the parser sees the text, and a key repeated inside one object is an error
// (nlohmann would silently keep the last one, and a checkpoint must not mean two things).
#pragma once
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "k3/error.h"

namespace k3 {

inline constexpr int kMaxJsonDepth = 64;

// Parses `text`; on any problem throws Error(kind, "<origin>: <what is wrong>").
inline nlohmann::json parse_strict_json(std::string_view text, const std::string& origin, ErrorKind kind) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (char ch : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (ch == '\\') escaped = true;
            else if (ch == '"') in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '{' || ch == '[') {
            if (++depth > kMaxJsonDepth)
                throw Error(kind, origin + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
        } else if (ch == '}' || ch == ']') {
            --depth;
        }
    }
    // One key set per open object; arrays push an empty marker so object_end pops the right one.
    std::vector<std::set<std::string>> open;
    std::string duplicate;
    auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        switch (event) {
            case E::object_start: open.emplace_back(); break;
            case E::object_end:
                if (!open.empty()) open.pop_back();
                break;
            case E::key:
                if (!open.empty() && parsed.is_string() && !open.back().insert(parsed.get<std::string>()).second &&
                    duplicate.empty())
                    duplicate = parsed.get<std::string>();
                break;
            default: break;
        }
        return true;
    };
    nlohmann::json out;
    try {
        out = nlohmann::json::parse(text.begin(), text.end(), callback);
    } catch (const nlohmann::json::exception& e) {
        throw Error(kind, origin + ": malformed JSON: " + e.what());
    }
    if (!duplicate.empty()) {
        if (duplicate.size() > 200) duplicate = duplicate.substr(0, 200) + "...";
        throw Error(kind, origin + ": key \"" + duplicate + "\" appears twice in one JSON object");
    }
    return out;
}

}  // namespace k3
