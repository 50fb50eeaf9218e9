#include "wire/response_format.h"

#include <regex>

#include "wire/generation_request.h"
#include "wire/fields.h"

namespace k3::server {

namespace {

// The schema's text with its keys in the order the client wrote them (`json` sorts object keys):
// the body's parse kept it (wire/json_body.h); without it, sorted.
std::string schema_text(const json& schema, const nlohmann::ordered_json* schemas, const char* path) {
    if (schemas && schemas->is_object())
        if (auto it = schemas->find(path); it != schemas->end()) return it->dump();
    return schema.dump();
}

std::shared_ptr<const Grammar> compile_schema(const json& schema, const std::string& text, const std::string& param,
                                              const GrammarLimits& limits) {
    if (!schema.is_object() && !schema.is_boolean())
        throw bad_request(param, "'" + param + "' must be a JSON schema object", "invalid_type");
    try {
        return std::make_shared<const Grammar>(Grammar::json_schema(text, limits));
    } catch (const GrammarBudgetError& e) {
        throw GrammarRefusal(param, e);
    } catch (const GrammarError& e) {
        // The message names the keyword and where it sits in the schema.
        throw bad_request(param, e.what(), "unsupported_schema");
    }
}

}  // namespace

std::shared_ptr<const Grammar> parse_response_format(const json& body, const nlohmann::ordered_json* schemas,
                                                     const GrammarLimits& limits) {
    auto grammar_field = body.find("grammar");
    if (grammar_field != body.end() && !grammar_field->is_null())
        throw bad_request("grammar", "'grammar' (GBNF) is not supported; use response_format json_schema",
                          "unsupported_parameter");
    auto rf_it = body.find("response_format");
    auto top_schema = body.find("json_schema");
    bool has_rf = rf_it != body.end() && !rf_it->is_null();
    bool has_top_schema = top_schema != body.end() && !top_schema->is_null();
    if (has_rf && has_top_schema)
        throw bad_request("json_schema", "give either 'response_format' or 'json_schema', not both");
    if (has_top_schema)
        return compile_schema(*top_schema, schema_text(*top_schema, schemas, "json_schema"), "json_schema", limits);
    if (!has_rf) return nullptr;

    const json& rf = *rf_it;
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
        throw bad_request("response_format", "'response_format' must be an object with a string 'type'", "invalid_type");
    const std::string type = rf["type"].get<std::string>();
    auto only_keys = [&](const json& obj, std::initializer_list<const char*> keys, const std::string& where) {
        for (auto it = obj.begin(); it != obj.end(); ++it)
            if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
                note_ignored_field(where + "." + it.key());
    };
    if (type == "text") {
        only_keys(rf, {"type"}, "response_format");
        return nullptr;
    }
    if (type == "json_object") {
        only_keys(rf, {"type"}, "response_format");
        return std::make_shared<const Grammar>(Grammar::json_object());
    }
    if (type != "json_schema")
        throw bad_request("response_format.type",
                          "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\" (got \"" + type + "\")");
    only_keys(rf, {"type", "json_schema"}, "response_format");
    if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
        throw bad_request("response_format.json_schema", "'response_format.json_schema' is required: {name, schema, strict}",
                          "missing_required_parameter");
    const json& js = rf["json_schema"];
    only_keys(js, {"name", "description", "schema", "strict"}, "response_format.json_schema");
    if (!js.contains("name") || !js["name"].is_string() ||
        !std::regex_match(js["name"].get<std::string>(), std::regex("[A-Za-z0-9_-]{1,64}")))
        throw bad_request("response_format.json_schema.name",
                          "'response_format.json_schema.name' is required: 1-64 letters, digits, '_' or '-'");
    if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
        throw bad_request("response_format.json_schema.strict", "'strict' must be true or false", "invalid_type");
    if (js.contains("description") && !js["description"].is_string())
        throw bad_request("response_format.json_schema.description", "'description' must be a string", "invalid_type");
    // strict or not, the schema is enforced (strict: false only lets OpenAI skip enforcement).
    const json schema = js.contains("schema") ? js["schema"] : json::object();
    std::string text = js.contains("schema") ? schema_text(schema, schemas, "response_format.json_schema.schema") : "{}";
    return compile_schema(schema, text, "response_format.json_schema.schema", limits);
}

ChatResponseFormat response_format_prompt(const json& body) {
    if (const json* top = field(body, "json_schema")) return {"json_schema", top->dump()};
    const json* rf = field(body, "response_format");
    if (!rf || !rf->is_object()) return {};
    const std::string type = rf->value("type", "");
    if (type == "json_object") return {type, ""};
    if (type != "json_schema") return {};
    const json& js = (*rf)["json_schema"];
    if (const json* schema = field(js, "schema")) return {type, schema->dump()};
    if (const json* schema = field(js, "json_schema")) return {type, schema->dump()};
    return {type, js.dump()};
}

}  // namespace k3::server
