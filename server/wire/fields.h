// Typed access to the fields of an OpenAI request body, each throwing a 400 that names the
// field and what was expected. Shared by every endpoint's request parser.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace k3::server {

using json = nlohmann::json;

// A field that is present and not null, or nullptr.
const json* field(const json& body, const char* key);
std::optional<long long> get_int(const json& body, const char* key, long long lo, long long hi);
// A token count such as max_tokens: a whole number >= lo. Counts beyond any context (even past
// 2^64, or written as 1e30) come back as kHugeCount, so that the context check answers them
// with context_length_exceeded instead of narrowing them to a small or negative int.
inline constexpr long long kHugeCount = (1LL << 62);
std::optional<long long> get_token_count(const json& body, const char* key, long long lo);
// The string at obj[key] ("" when absent or null); `where` names the field in the 400 otherwise
// (a non-string "type" used to be a 500).
std::string string_field(const json& obj, const char* key, const std::string& where);
std::optional<double> get_number(const json& body, const char* key, double lo, double hi);
std::optional<bool> get_bool(const json& body, const char* key);
std::optional<std::string> get_string(const json& body, const char* key);
// A number field that must be absent or 0 (a feature this server does not have).
void refuse_nonzero(const json& body, const char* key, const std::string& why);
// The tolerance policy of every API (docs/api.md, "Unknown fields"): a field we do not know is
// ignored wherever it sits, because clients add fields faster than servers learn them (Codex
// sends `client_metadata`, the Agents SDK `annotations` inside content parts); a known field
// whose value we cannot honour is a 400 naming it. check_keys records the unknown keys of `obj`
// as "where.key" in the IgnoredFields of the request being parsed on this thread.
void check_keys(const json& obj, const std::set<std::string>& allowed, const std::string& where);

// One top-level field of a request that is translated into the chat request it means (the
// Responses and Messages APIs): its name, and the chat field it is copied to unchanged (nullptr:
// read by the translation's own code, or known and changing nothing). An endpoint's table of
// these is the one list of its fields: the known-keys check (check_fields) and the plain copies
// (copy_fields) both come from it, so a new field is one row plus any code that reads it.
struct RequestField {
    const char* name;
    const char* chat_name = nullptr;
};
// check_keys over the table's names.
void check_fields(const json& body, std::span<const RequestField> fields);
// Each field of the table that has a chat_name and is present (not null) in `body`, copied to
// chat[chat_name].
void copy_fields(const json& body, std::span<const RequestField> fields, json& chat);

// The fields a request's parser ignored, and the tools it left out of the prompt. One per
// request, installed for the parse on the HTTP thread that runs it (the parsers are plain
// functions called from many places; a scope saves threading a collector through each).
struct IgnoredFields {
    std::vector<std::string> fields;  // "messages[0].content[1].annotations", ...
    std::vector<std::string> tools;   // tools we cannot run, by type or name ("web_search")
};
class IgnoredFieldsScope {
public:
    explicit IgnoredFieldsScope(IgnoredFields& sink);
    ~IgnoredFieldsScope();
    IgnoredFieldsScope(const IgnoredFieldsScope&) = delete;
    IgnoredFieldsScope& operator=(const IgnoredFieldsScope&) = delete;

private:
    IgnoredFields* previous_;
};
// Records an ignored field or a tool left out (no-op outside a scope).
void note_ignored_field(const std::string& path);
void note_ignored_tool(const std::string& what);

}  // namespace k3::server
