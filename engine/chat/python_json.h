// JSON text as the official K3 encoder writes it (docs/model.md "Chat layout"): the encoder is
// Python and serialises with `json.dumps(..., ensure_ascii=False)`, so numbers are spelled as
// Python's float repr and ints, strings keep non-ASCII characters, and the separators are
// either compact (`,` `:`: tool declarations, the response-format schema) or Python's default
// (`, ` `: `: the bodies of non-string tool-call arguments).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace k3::chat_json {

enum class Separators { Compact, Python };

// Object members in the value's own order (nlohmann::json: sorted by key, which is Python's
// sort_keys=True order for UTF-8 keys; ordered_json: as written).
std::string dump(const nlohmann::json& value, Separators separators);
std::string dump(const nlohmann::ordered_json& value, Separators separators);

// A double as Python's repr() spells it: the shortest digits that read back the same, fixed
// notation between 1e-4 and 1e16 with at least one decimal ("1.0"), otherwise "1e+16",
// "1.5e-07".
std::string python_float(double value);

}  // namespace k3::chat_json
