#include "wire/json_body.h"

#include <algorithm>

namespace k3::server {

JsonShape scan_json_shape(std::string_view text, int stop_at_depth, size_t stop_at_values) {
    JsonShape shape;
    int depth = 0;
    bool in_string = false, escaped = false, any = false;
    for (char ch : text) {
        if (in_string) {
            if (escaped) escaped = false;
            else if (ch == '\\') escaped = true;
            else if (ch == '"') in_string = false;
            continue;
        }
        switch (ch) {
            case '"': in_string = true; any = true; break;
            case '{':
            case '[':
                // The container and its first element (an empty one counts one too many: harmless).
                shape.values += 2;
                shape.depth = std::max(shape.depth, ++depth);
                break;
            case '}':
            case ']': --depth; break;
            case ',': ++shape.values; break;  // one more element or member
            case ' ': case '\t': case '\r': case '\n': break;
            default: any = true;
        }
        if (shape.depth > stop_at_depth || shape.values > stop_at_values) break;
    }
    if (shape.values == 0 && any) shape.values = 1;  // one scalar
    return shape;
}

size_t json_value_budget(int n_ctx) { return size_t(std::max(n_ctx, 0)) + 65536; }

namespace {

// The subtree at a dotted path of kSchemaPaths, or null.
const nlohmann::ordered_json* at_path(const nlohmann::ordered_json& doc, std::string_view path) {
    const nlohmann::ordered_json* v = &doc;
    while (!path.empty()) {
        const size_t dot = path.find('.');
        const std::string key(path.substr(0, dot));
        if (!v->is_object()) return nullptr;
        auto it = v->find(key);
        if (it == v->end()) return nullptr;
        v = &*it;
        path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
    }
    return v;
}

}  // namespace

JsonBody parse_json_body(const std::string& body, const JsonBodyLimits& limits) {
    if (body.empty()) throw bad_request("", "the request body is empty; expected a JSON object", "invalid_json");
    JsonShape shape = scan_json_shape(body, limits.max_depth, limits.max_values);
    if (shape.depth > limits.max_depth)
        throw bad_request("", "the JSON nests deeper than " + std::to_string(limits.max_depth) + " levels", "invalid_json");
    if (shape.values > limits.max_values)
        throw ApiError(413, "invalid_request_error", "too_many_json_values", "",
                       "the request body holds more than " + std::to_string(limits.max_values) +
                           " JSON values (arrays' elements and objects' members): one per token of the context "
                           "plus 65536 are accepted");
    try {
        nlohmann::ordered_json doc = nlohmann::ordered_json::parse(body);
        JsonBody out;
        out.schemas = nlohmann::ordered_json::object();
        for (const char* path : kSchemaPaths)
            if (const auto* s = at_path(doc, path); s && !s->is_null()) out.schemas[path] = *s;
        out.value = json(std::move(doc));
        return out;
    } catch (const json::parse_error& e) {
        std::string what = e.what();
        if (what.find("UTF-8") != std::string::npos)
            throw bad_request("", "the request body is not valid UTF-8: " + what, "invalid_utf8");
        throw bad_request("", "the request body is not valid JSON: " + what, "invalid_json");
    } catch (const json::exception& e) {
        // Not a syntax error but still the client's text: e.g. a number beyond a double (1e400).
        throw bad_request("", "the request body cannot be represented: " + std::string(e.what()), "invalid_json");
    }
}

}  // namespace k3::server
