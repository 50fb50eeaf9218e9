// A request's JSON body -> value, within bounds set before any DOM is built: nesting depth and
// the number of values. A parsed value costs ~16 bytes of node plus its array or map slot for
// as little as two bytes of text ("1,"), so an 8 MiB body of numbers was ~10x its size in
// memory, per concurrent request. A linear pre-scan counts first and refuses early. The text is
// parsed once, keys in the client's order; the value the parsers read (keys sorted) is built
// from that, and the JSON schemas in it keep the client's order (a schema's properties are
// generated in the order written).
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "wire/error.h"

namespace k3::server {

struct JsonBodyLimits {
    int max_depth = 64;            // --max-json-depth
    size_t max_values = 1u << 20;  // json_value_budget(n_ctx)
};

// What the pre-scan sees: nesting depth and values (array elements, object members and
// containers; an upper bound of the DOM's node count within a few per container).
struct JsonShape {
    int depth = 0;
    size_t values = 0;
};

// One pass over the text, tracking strings and escapes only: no validation (the parser does that).
JsonShape scan_json_shape(std::string_view text, int stop_at_depth, size_t stop_at_values);

// Values a request may hold: one per token of the context (a prompt given as token ids, a
// chat's messages and tools all render into the context) plus 65,536 for the structure around them.
size_t json_value_budget(int n_ctx);

// Where a request carries a JSON schema whose key order is kept: the top-level "json_schema"
// (llama-server), "response_format.json_schema.schema" (chat, completions) and
// "text.format.schema" (/v1/responses).
inline constexpr const char* kSchemaPaths[] = {"json_schema", "response_format.json_schema.schema", "text.format.schema"};

struct JsonBody {
    nlohmann::json value;            // what the parsers read
    nlohmann::ordered_json schemas;  // {path: schema} for the kSchemaPaths present, keys as written
};

// JSON text -> value, parsed once. Throws ApiError: 400 invalid_json (syntax, nesting, a number
// beyond a double), 400 invalid_utf8, 413 too_many_json_values (more values than the budget).
JsonBody parse_json_body(const std::string& body, const JsonBodyLimits& limits);

}  // namespace k3::server
