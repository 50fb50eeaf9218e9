#include "wire/fields.h"

#include <cmath>

#include "wire/error.h"

namespace k3::server {

// A field that is present and not null, or nullptr.
const json* field(const json& body, const char* key) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<long long> get_int(const json& body, const char* key, long long lo, long long hi) {
    const json* v = field(body, key);
    if (!v) return std::nullopt;
    long long x = 0;
    if (v->is_number_integer()) {
        if (v->is_number_unsigned() && v->get<unsigned long long>() > (unsigned long long)hi)
            throw bad_request(key, std::string("'") + key + "' must be an integer in [" + std::to_string(lo) + ", " +
                                       std::to_string(hi) + "]");
        x = v->get<long long>();
    } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
        // Range first: converting a double outside long long's range is undefined.
        double d = v->get<double>();
        if (d < double(lo) || d > double(hi))
            throw bad_request(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " +
                                       std::to_string(hi) + "], got " + v->dump());
        x = (long long)d;
    } else {
        throw bad_request(key, std::string("'") + key + "' must be an integer, got " + v->dump(), "invalid_type");
    }
    if (x < lo || x > hi)
        throw bad_request(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "], got " + std::to_string(x));
    return x;
}

std::optional<long long> get_token_count(const json& body, const char* key, long long lo) {
    const json* v = field(body, key);
    if (!v) return std::nullopt;
    long long x = 0;
    if (v->is_number_unsigned()) {
        x = v->get<unsigned long long>() > (unsigned long long)kHugeCount ? kHugeCount : (long long)v->get<unsigned long long>();
    } else if (v->is_number_integer()) {
        x = v->get<long long>();
    } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
        double d = v->get<double>();
        x = d >= double(kHugeCount) ? kHugeCount : d < double(lo) ? lo - 1 : (long long)d;
    } else {
        throw bad_request(key, std::string("'") + key + "' must be an integer, got " + v->dump(), "invalid_type");
    }
    if (x < lo)
        throw bad_request(key, std::string("'") + key + "' must be at least " + std::to_string(lo) + ", got " + v->dump());
    return x;
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
    const json* v = field(obj, key);
    if (!v) return {};
    if (!v->is_string()) throw bad_request(where, "'" + where + "' must be a string, got " + v->dump(), "invalid_type");
    return v->get<std::string>();
}

std::optional<double> get_number(const json& body, const char* key, double lo, double hi) {
    const json* v = field(body, key);
    if (!v) return std::nullopt;
    if (!v->is_number())
        throw bad_request(key, std::string("'") + key + "' must be a number, got " + v->dump(), "invalid_type");
    double x = v->get<double>();
    if (!(x >= lo && x <= hi))
        throw bad_request(key, std::string("'") + key + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                   "], got " + v->dump());
    return x;
}

std::optional<bool> get_bool(const json& body, const char* key) {
    const json* v = field(body, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean())
        throw bad_request(key, std::string("'") + key + "' must be true or false, got " + v->dump(), "invalid_type");
    return v->get<bool>();
}

std::optional<std::string> get_string(const json& body, const char* key) {
    const json* v = field(body, key);
    if (!v) return std::nullopt;
    if (!v->is_string())
        throw bad_request(key, std::string("'") + key + "' must be a string, got " + v->dump(), "invalid_type");
    return v->get<std::string>();
}

void refuse_nonzero(const json& body, const char* key, const std::string& why) {
    auto x = get_number(body, key, -1e9, 1e9);
    if (x && *x != 0) throw bad_request(key, std::string("'") + key + "' is not supported: " + why, "unsupported_parameter");
}

namespace {
thread_local IgnoredFields* current_ignored = nullptr;
}  // namespace

IgnoredFieldsScope::IgnoredFieldsScope(IgnoredFields& sink) : previous_(current_ignored) { current_ignored = &sink; }
IgnoredFieldsScope::~IgnoredFieldsScope() { current_ignored = previous_; }

void note_ignored_field(const std::string& path) {
    if (current_ignored) current_ignored->fields.push_back(path);
}

void note_ignored_tool(const std::string& what) {
    if (current_ignored) current_ignored->tools.push_back(what);
}

void check_keys(const json& obj, const std::set<std::string>& allowed, const std::string& where) {
    for (auto it = obj.begin(); it != obj.end(); ++it)
        if (!allowed.count(it.key())) note_ignored_field(where.empty() ? it.key() : where + "." + it.key());
}

void check_fields(const json& body, std::span<const RequestField> fields) {
    std::set<std::string> names;
    for (const RequestField& f : fields) names.insert(f.name);
    check_keys(body, names, "");
}

void copy_fields(const json& body, std::span<const RequestField> fields, json& chat) {
    for (const RequestField& f : fields)
        if (f.chat_name)
            if (const json* v = field(body, f.name)) chat[f.chat_name] = *v;
}

}  // namespace k3::server
