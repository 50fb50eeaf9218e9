// JSON schema -> grammar rules. One SchemaCompiler per root schema (it resolves $ref against
// that root's $defs/definitions); the tool-call grammar uses one per tool's parameters.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/json_rules.h"

namespace k3::grammar {

class SchemaCompiler {
public:
    SchemaCompiler(JsonRules& json, const nlohmann::ordered_json& root) : j_(json), b_(json.b), root_(root) {}

    // The rule for JSON text valid under `schema` (found at JSON pointer `path`).
    int32_t compile(const nlohmann::ordered_json& schema, const std::string& path);

    // An XTML argument's possible forms: the type attribute and the rule for its body (raw
    // text for "string", JSON for the others).
    struct ArgumentForm {
        std::string type;
        int32_t body;
    };
    std::vector<ArgumentForm> argument_forms(const nlohmann::ordered_json& schema, const std::string& path);

    // `schema` with $ref followed (annotations beside a $ref are allowed, anything else not).
    const nlohmann::ordered_json& resolve(const nlohmann::ordered_json& schema, std::string& path);

private:
    int32_t compile_typed(const nlohmann::ordered_json& s, const std::string& type, const std::string& path, bool raw);
    int32_t compile_object(const nlohmann::ordered_json& s, const std::string& path);
    int32_t compile_array(const nlohmann::ordered_json& s, const std::string& path);
    int32_t compile_string(const nlohmann::ordered_json& s, const std::string& path, bool raw);
    int32_t compile_number(const nlohmann::ordered_json& s, const std::string& type, const std::string& path);
    int32_t literal_values(const nlohmann::ordered_json& values, const std::string& path, bool raw);
    // The rule for exactly these byte strings, as a trie: strings sorted, their shared prefixes
    // written once, so a state of the automaton holds at most one alternative per next byte
    // (an enum of N strings with a common prefix costs N, not N squared).
    int32_t literal_trie(std::vector<std::string> values);
    int32_t trie_node(const std::vector<std::string>& sorted, size_t lo, size_t hi, size_t depth);
    std::vector<std::string> types_of(const nlohmann::ordered_json& s, const std::string& path);
    void check_keywords(const nlohmann::ordered_json& s, const std::string& path);

    JsonRules& j_;
    GrammarBuilder& b_;
    const nlohmann::ordered_json& root_;
    std::map<std::string, int32_t> ref_rules_;  // "#/$defs/X" -> rule (made before compiling: recursion)
    int depth_ = 0;
};

}  // namespace k3::grammar
