// OpenAI function calling -> K3's chat options: the declared tools (`tools`, or the legacy
// `functions`), `tool_choice` (or the legacy `function_call`), `parallel_tool_calls`, and the
// history's assistant calls and tool results. Shared by /v1/chat/completions and /v1/responses,
// which spell the same things differently (the caller passes the tools already in the chat
// layout).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/job.h"
#include "k3/chat.h"
#include "k3/grammar.h"

namespace k3::server {

using json = nlohmann::json;

struct ToolRequest {
    json tools = json::array();       // [{"type":"function","function":{name, description?, parameters?, strict?}}]
    json dynamic = json::array();     // the same, declared by system messages (callable, declared where they stand)
    std::vector<std::string> names;   // declared, in order: the global ones, then the dynamic ones
    ToolChoice choice = ToolChoice::Auto;
    std::string forced;               // a named tool_choice: the one tool to call
    bool parallel = true;
    bool any() const { return !names.empty(); }
};

// Chat-completions fields: tools/functions, tool_choice/function_call, parallel_tool_calls.
// `dynamic` are the tools the messages declare (check_dynamic_tools): callable like the others.
ToolRequest parse_chat_tools(const json& body, const json& dynamic = json::array());
// A system message's `tools` (dynamic tools), as the hosted API takes them (docs/api.md "Tool
// calling"): an array of {"type":"function","function":{name, ...}} with names of
// [A-Za-z_][A-Za-z0-9_-]*, at most 256 characters; null-valued function fields dropped. A 400
// naming `where` otherwise.
json check_dynamic_tools(const json& tools, const std::string& where);
// One function tool in the chat layout, validated ({"type":"function","function":{...}}).
// `where` names the field in errors.
json check_function_tool(const json& function, const std::string& where);
// `tool_choice` in either layout: "auto" | "none" | "required" | {"type":"function", "name"}
// (responses) or {"type":"function","function":{"name"}} (chat).
void parse_tool_choice(const json& choice, ToolRequest& tools, const std::string& where);

// Sets the chat options and the job's tool parsing from the request's tools.
void apply_tools(const ToolRequest& tools, ChatOptions& options, GenerationParams& params);
// tool_choice "required" or a named function: the grammar that holds the turn to calls of the
// declared (or the named) tools with arguments valid for their schemas (k3/grammar.h); null
// otherwise. Throws a 400 naming a schema keyword the grammar engine does not enforce.
std::shared_ptr<const Grammar> tool_call_grammar(const ToolRequest& tools, bool thinking, const GrammarLimits& limits = {});

// Calls made in the history, by id, so a tool result can name its call.
class CallRegistry {
public:
    // Records an assistant turn's calls (name, 1-based index within the turn).
    void add_turn(const std::vector<std::pair<std::string, std::string>>& id_and_name);
    // The call `id` answers, or a 400 naming `where`.
    std::pair<std::string, int> find(const std::string& id, const std::string& where) const;
    // Legacy role "function": the latest call to `name`.
    std::pair<std::string, int> find_by_name(const std::string& name, const std::string& where) const;

private:
    std::map<std::string, std::pair<std::string, int>> by_id_;
    std::map<std::string, int> latest_index_by_name_;
};

}  // namespace k3::server
