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

// SAX events of a document, keeping one key set per open object: the first key repeated
// inside one object lands in `duplicate`.
struct DuplicateKeyFinder : nlohmann::json_sax<nlohmann::json> {
    std::vector<std::set<std::string>> open;
    std::string duplicate;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override {
        open.emplace_back();
        return true;
    }
    bool key(string_t& k) override {
        if (!open.empty() && !open.back().insert(k).second && duplicate.empty()) duplicate = k;
        return true;
    }
    bool end_object() override {
        if (!open.empty()) open.pop_back();
        return true;
    }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

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
    nlohmann::json out;
    try {
        out = nlohmann::json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::exception& e) {
        throw Error(kind, origin + ": malformed JSON: " + e.what());
    }
    // Repeated keys, found by a second pass over the events. (A parse callback would do it in
    // one pass, but nlohmann's callback parser rescans the enclosing object at every object
    // end: quadratic in a safetensors header's 9,000+ tensors, seconds per k3-mini shard.)
    DuplicateKeyFinder finder;
    nlohmann::json::sax_parse(text.begin(), text.end(), &finder);
    std::string duplicate = finder.duplicate;
    if (!duplicate.empty()) {
        if (duplicate.size() > 200) duplicate = duplicate.substr(0, 200) + "...";
        throw Error(kind, origin + ": key \"" + duplicate + "\" appears twice in one JSON object");
    }
    return out;
}

}  // namespace k3
