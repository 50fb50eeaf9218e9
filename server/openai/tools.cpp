#include "openai/tools.h"

#include <algorithm>
#include <regex>

#include "wire/error.h"
#include "wire/fields.h"

namespace k3::server {

json check_function_tool(const json& function, const std::string& where) {
    if (!function.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
    check_keys(function, {"name", "description", "parameters", "strict"}, where);
    const json* name = field(function, "name");
    if (!name || !name->is_string())
        throw bad_request(where + ".name", "'" + where + ".name' is required", "missing_required_parameter");
    static const std::regex valid_name("^[A-Za-z0-9_.:-]{1,64}$");
    if (!std::regex_match(name->get<std::string>(), valid_name))
        throw bad_request(where + ".name",
                          "tool names are 1 to 64 letters, digits, '_', '-', '.' or ':', got " + name->dump());
    json out = {{"name", *name}};
    if (const json* d = field(function, "description")) {
        if (!d->is_string()) throw bad_request(where + ".description", "must be a string", "invalid_type");
        out["description"] = *d;
    }
    if (const json* p = field(function, "parameters")) {
        if (!p->is_object()) throw bad_request(where + ".parameters", "'parameters' must be a JSON schema object", "invalid_type");
        out["parameters"] = *p;
    }
    if (const json* s = field(function, "strict")) {
        if (!s->is_boolean()) throw bad_request(where + ".strict", "must be true or false", "invalid_type");
        out["strict"] = *s;
    }
    return {{"type", "function"}, {"function", out}};
}

void parse_tool_choice(const json& c, ToolRequest& tools, const std::string& where) {
    if (c.is_string()) {
        std::string s = c.get<std::string>();
        if (s == "auto") tools.choice = ToolChoice::Auto;
        else if (s == "none") tools.choice = ToolChoice::None;
        else if (s == "required") tools.choice = ToolChoice::Required;
        else throw bad_request(where, "'" + where + "' must be auto, none, required or a named function, got \"" + s + "\"");
    } else if (c.is_object()) {
        // chat: {"type":"function","function":{"name":...}}; responses: {"type":"function","name":...};
        // legacy function_call: {"name":...}
        std::string type = c.value("type", "function");
        if (type != "function")
            throw bad_request(where, "only function tools can be chosen (got type \"" + type + "\")", "unsupported_parameter");
        const json* name = nullptr;
        if (const json* f = field(c, "function"); f && f->is_object()) name = field(*f, "name");
        if (!name) name = field(c, "name");
        // An empty name is no name: forced to "" the turn would be `required` (any tool).
        if (!name || !name->is_string() || name->get_ref<const std::string&>().empty())
            throw bad_request(where, "'" + where + "' names no function", "missing_required_parameter");
        tools.choice = ToolChoice::Required;
        tools.forced = name->get<std::string>();
    } else {
        throw bad_request(where, "'" + where + "' must be a string or an object", "invalid_type");
    }
    if (tools.choice != ToolChoice::Auto && tools.choice != ToolChoice::None && tools.names.empty())
        throw bad_request(where, "'" + where + "' asks for a tool call but no tools are declared");
    if (!tools.forced.empty() &&
        std::find(tools.names.begin(), tools.names.end(), tools.forced) == tools.names.end())
        throw bad_request(where, "'" + where + "' names '" + tools.forced + "', which is not among the declared tools");
}

json check_dynamic_tools(const json& tools, const std::string& where) {
    if (!tools.is_array()) throw bad_request(where, "'" + where + "' must be an array", "invalid_type");
    static const std::regex valid_name("^[A-Za-z_][A-Za-z0-9_-]{0,255}$");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& tool = tools[i];
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!tool.is_object()) throw bad_request(at, "'" + at + "' must be an object", "invalid_type");
        for (auto it = tool.begin(); it != tool.end(); ++it)
            if (it.key() != "type" && it.key() != "function")
                throw bad_request(at + "." + it.key(), "unknown field '" + it.key() + "' in '" + at + "' (type, function)");
        if (!tool.contains("type") || tool["type"] != "function")
            throw bad_request(at + ".type", "'" + at + ".type' must be \"function\"", "invalid_type");
        const json* f = field(tool, "function");
        if (!f || !f->is_object())
            throw bad_request(at + ".function", "'" + at + ".function' must be an object", "missing_required_parameter");
        json function = json::object();
        for (auto it = f->begin(); it != f->end(); ++it)
            if (!it->is_null()) function[it.key()] = *it;
        for (auto it = function.begin(); it != function.end(); ++it)
            if (it.key() != "name" && it.key() != "description" && it.key() != "parameters" && it.key() != "strict")
                throw bad_request(at + ".function." + it.key(), "unknown field '" + it.key() + "' in '" + at +
                                                                   ".function' (name, description, parameters, strict)");
        if (!function.contains("name") || !function["name"].is_string() ||
            !std::regex_match(function["name"].get<std::string>(), valid_name))
            throw bad_request(at + ".function.name", "dynamic tool names are 1 to 256 characters of [A-Za-z_][A-Za-z0-9_-]*, got " +
                                                         (function.contains("name") ? function["name"].dump() : std::string("none")));
        if (function.contains("description") && !function["description"].is_string())
            throw bad_request(at + ".function.description", "must be a string", "invalid_type");
        if (function.contains("parameters") && !function["parameters"].is_object())
            throw bad_request(at + ".function.parameters", "'parameters' must be a JSON schema object", "invalid_type");
        if (function.contains("strict") && !function["strict"].is_boolean())
            throw bad_request(at + ".function.strict", "must be true or false", "invalid_type");
        out.push_back({{"type", "function"}, {"function", function}});
    }
    return out;
}

ToolRequest parse_chat_tools(const json& body, const json& dynamic) {
    ToolRequest t;
    const json* tools = field(body, "tools");
    const json* functions = field(body, "functions");
    if (tools && functions) throw bad_request("functions", "send either 'tools' or the legacy 'functions', not both");
    if (tools) {
        if (!tools->is_array()) throw bad_request("tools", "'tools' must be an array", "invalid_type");
        for (size_t i = 0; i < tools->size(); ++i) {
            const json& tool = (*tools)[i];
            std::string where = "tools[" + std::to_string(i) + "]";
            if (!tool.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
            std::string type = string_field(tool, "type", where + ".type");
            if (type != "function") {
                // A tool this server cannot run (a hosted one, or a custom grammar tool): left out
                // of the prompt, so the model is never offered it (docs/api.md, "Tools").
                note_ignored_tool(type.empty() ? where : type);
                continue;
            }
            check_keys(tool, {"type", "function"}, where);
            if (!field(tool, "function"))
                throw bad_request(where + ".function", "'" + where + ".function' is required", "missing_required_parameter");
            t.tools.push_back(check_function_tool(tool["function"], where + ".function"));
        }
    } else if (functions) {
        if (!functions->is_array()) throw bad_request("functions", "'functions' must be an array", "invalid_type");
        for (size_t i = 0; i < functions->size(); ++i)
            t.tools.push_back(check_function_tool((*functions)[i], "functions[" + std::to_string(i) + "]"));
    }
    t.dynamic = dynamic;
    for (const json* list : {&t.tools, &t.dynamic})
        for (const auto& tool : *list) {
            std::string name = tool["function"]["name"];
            if (std::find(t.names.begin(), t.names.end(), name) != t.names.end())
                throw bad_request(list == &t.tools ? "tools" : "messages",
                                  "the tool '" + name + "' is declared twice (names are unique across 'tools' and the "
                                  "system messages' tools)");
            t.names.push_back(name);
        }
    const json* choice = field(body, "tool_choice");
    const json* legacy = field(body, "function_call");
    if (choice && legacy) throw bad_request("function_call", "send either 'tool_choice' or the legacy 'function_call', not both");
    if (choice) parse_tool_choice(*choice, t, "tool_choice");
    if (legacy) parse_tool_choice(*legacy, t, "function_call");
    if (const json* p = field(body, "parallel_tool_calls")) {
        if (!p->is_boolean()) throw bad_request("parallel_tool_calls", "must be true or false", "invalid_type");
        t.parallel = p->get<bool>();
    }
    return t;
}

namespace {
// The global tools, then the dynamic ones: what a call may name.
json all_tools(const ToolRequest& tools) {
    json all = tools.tools;
    for (const auto& t : tools.dynamic) all.push_back(t);
    return all;
}
}  // namespace

void apply_tools(const ToolRequest& tools, ChatOptions& options, GenerationParams& params) {
    if (!tools.any()) return;
    if (!tools.tools.empty()) options.tools_json = tools.tools.dump(-1, ' ', false, json::error_handler_t::strict);
    // A named function renders nothing: constrained decoding alone holds the turn to it.
    options.tool_choice = tools.forced.empty() ? tools.choice : ToolChoice::Auto;
    params.tools.enabled = tools.choice != ToolChoice::None;
    params.tools.declared = tools.forced.empty() ? tools.names : std::vector<std::string>{tools.forced};
    params.parallel_tool_calls = tools.parallel;
    params.tool_choice = tools.choice;
    params.forced_tool = tools.forced;
    params.tools_json = all_tools(tools).dump(-1, ' ', false, json::error_handler_t::strict);
}

std::shared_ptr<const Grammar> tool_call_grammar(const ToolRequest& tools, bool thinking, const GrammarLimits& limits) {
    if (!tools.any() || tools.choice != ToolChoice::Required) return nullptr;
    std::vector<ToolDeclaration> declarations;
    for (const auto& tool : all_tools(tools)) {
        const json& f = tool["function"];
        std::string name = f["name"];
        if (!tools.forced.empty() && name != tools.forced) continue;
        declarations.push_back({name, f.contains("parameters") ? f["parameters"].dump() : ""});
    }
    ToolCallOptions options;
    options.thinking = thinking;
    options.max_calls = tools.parallel && tools.forced.empty() ? 16 : 1;
    try {
        return std::make_shared<const Grammar>(Grammar::tool_calls(declarations, options, limits));
    } catch (const GrammarBudgetError& e) {
        throw GrammarRefusal("tools", e);
    } catch (const GrammarError& e) {
        throw bad_request("tools", e.what(), "unsupported_schema");
    }
}

void CallRegistry::add_turn(const std::vector<std::pair<std::string, std::string>>& id_and_name) {
    for (size_t i = 0; i < id_and_name.size(); ++i) {
        const auto& [id, name] = id_and_name[i];
        if (!id.empty()) by_id_[id] = {name, int(i) + 1};
        latest_index_by_name_[name] = int(i) + 1;
    }
}

std::pair<std::string, int> CallRegistry::find(const std::string& id, const std::string& where) const {
    auto it = by_id_.find(id);
    if (it == by_id_.end())
        throw bad_request(where, "'" + where + "' is '" + id + "', which answers no earlier assistant tool call");
    return it->second;
}

std::pair<std::string, int> CallRegistry::find_by_name(const std::string& name, const std::string& where) const {
    auto it = latest_index_by_name_.find(name);
    if (it == latest_index_by_name_.end())
        throw bad_request(where, "no earlier assistant call to the function '" + name + "'");
    return {name, it->second};
}

}  // namespace k3::server
