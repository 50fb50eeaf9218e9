// POST /v1/responses requests: translated into the chat-completions request they mean and
// validated by the same parser, so both endpoints render, sample and call tools identically.
// What this server cannot honour is refused with a 400 naming the field: stored responses
// (previous_response_id, conversation, background), hosted tools (web search, files, ...),
// input parts other than text and (in user messages) input_image.
#include "responses/responses.h"

#include <set>

#include "openai/request.h"
#include "wire/response_format.h"
#include "wire/fields.h"

namespace k3::server {

namespace {

// The text of one input_text/output_text part.
std::string part_text(const json& part, const std::string& at) {
    std::string type = part.is_object() ? part.value("type", "") : "";
    if (type == "input_image")
        throw bad_request(at, "images (input_image) are only accepted in user messages", "unsupported_content");
    if (type != "input_text" && type != "output_text" && type != "text")
        throw bad_request(at, "only input_text and output_text content parts (and input_image in user messages) are supported (got \"" +
                                  type + "\")",
                          "unsupported_content");
    if (!part.contains("text") || !part["text"].is_string())
        throw bad_request(at + ".text", "'" + at + ".text' must be a string", "invalid_type");
    check_keys(part, {"type", "text", "annotations", "logprobs"}, at);
    return part["text"].get<std::string>();
}

// Text of a message item's content: a string or input_text/output_text parts.
std::string item_text(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw bad_request(where, "'" + where + "' must be a string or an array of text parts", "invalid_type");
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) text += part_text(content[i], where + "[" + std::to_string(i) + "]");
    return text;
}

// A user message's content with images: the chat API's parts (text and image_url, in order).
// Without images, its text (item_text).
json user_content(const json& content, const std::string& where) {
    if (!content.is_array()) return item_text(content, where);
    json parts = json::array();
    bool images = false;
    for (size_t i = 0; i < content.size(); ++i) {
        const json& part = content[i];
        std::string at = where + "[" + std::to_string(i) + "]";
        if (!part.is_object() || part.value("type", "") != "input_image") {
            parts.push_back({{"type", "text"}, {"text", part_text(part, at)}});
            continue;
        }
        check_keys(part, {"type", "image_url", "file_id", "detail"}, at);
        if (field(part, "file_id"))
            throw bad_request(at + ".file_id", "'file_id' is not supported (there is no Files API here): send 'image_url' as a data: URL",
                              "unsupported_parameter");
        const json* url = field(part, "image_url");
        if (!url || !url->is_string())
            throw bad_request(at + ".image_url", "'" + at + ".image_url' must be a string (a data: URL)", "invalid_type");
        parts.push_back({{"type", "image_url"}, {"image_url", {{"url", *url}}}});
        images = true;
    }
    if (!images) return item_text(content, where);
    return parts;
}

// The text of a reasoning item (its content, else its summary).
std::string reasoning_text(const json& item) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
        if (const json* parts = field(item, key); parts && parts->is_array())
            for (const auto& p : *parts)
                if (p.is_object() && p.contains("text") && p["text"].is_string()) text += p["text"].get<std::string>();
        if (!text.empty()) break;
    }
    return text;
}

// The request's tools as Response.tools reports them: as sent, but a function tool always has
// `strict` and `parameters` (the schema requires both), null where the request left them out.
json echoed_tools(const json& body) {
    json tools = body.value("tools", json::array());
    if (!tools.is_array()) return tools;
    for (auto& t : tools)
        if (t.is_object() && t.value("type", "") == "function")
            for (const char* key : {"strict", "parameters"})
                if (!t.contains(key)) t[key] = nullptr;
    return tools;
}

// input (a string or items) + instructions -> chat messages.
json translate_input(const json& body) {
    json messages = json::array();
    if (auto instructions = get_string(body, "instructions"); instructions && !instructions->empty())
        messages.push_back({{"role", "system"}, {"content", *instructions}});
    const json* input = field(body, "input");
    if (!input) throw bad_request("input", "'input' is required", "missing_required_parameter");
    if (input->is_string()) {
        messages.push_back({{"role", "user"}, {"content", *input}});
        return messages;
    }
    if (!input->is_array()) throw bad_request("input", "'input' must be a string or an array of items", "invalid_type");
    std::string pending_reasoning;  // a reasoning item belongs to the assistant turn after it
    std::set<std::string> call_ids;  // of the function_call items so far
    auto assistant = [&]() -> json& {
        if (messages.empty() || messages.back()["role"] != "assistant" || !pending_reasoning.empty()) {
            json m = {{"role", "assistant"}, {"content", ""}};
            if (!pending_reasoning.empty()) m["reasoning_content"] = pending_reasoning;
            pending_reasoning.clear();
            messages.push_back(m);
        }
        return messages.back();
    };
    for (size_t i = 0; i < input->size(); ++i) {
        const json& item = (*input)[i];
        std::string where = "input[" + std::to_string(i) + "]";
        if (!item.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
        std::string type = item.value("type", item.contains("role") ? "message" : "");
        if (type == "message") {
            check_keys(item, {"type", "role", "content", "id", "status"}, where);
            auto role = get_string(item, "role");
            if (!role) throw bad_request(where + ".role", "'" + where + ".role' is required", "missing_required_parameter");
            if (*role != "user" && *role != "system" && *role != "developer" && *role != "assistant")
                throw bad_request(where + ".role", "unsupported role '" + *role + "' (user, system, developer, assistant)");
            const json* content = field(item, "content");
            if (*role == "user") {
                messages.push_back({{"role", *role}, {"content", content ? user_content(*content, where + ".content") : ""}});
                continue;
            }
            std::string text = content ? item_text(*content, where + ".content") : "";
            if (*role == "assistant") {
                json& m = assistant();
                m["content"] = m["content"].get<std::string>() + text;
            } else {
                messages.push_back({{"role", *role}, {"content", text}});
            }
        } else if (type == "function_call") {
            check_keys(item, {"type", "call_id", "name", "namespace", "arguments", "id", "status"}, where);
            auto call_id = get_string(item, "call_id");
            auto name = get_string(item, "name");
            if (auto ns = get_string(item, "namespace"); ns && !ns->empty() && name) *name = *ns + kNamespaceSeparator + *name;
            if (!call_id || !name)
                throw bad_request(where, "'" + where + "' needs call_id and name", "missing_required_parameter");
            call_ids.insert(*call_id);
            json& m = assistant();
            if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
            m["tool_calls"].push_back({{"id", *call_id},
                                       {"type", "function"},
                                       {"function", {{"name", *name}, {"arguments", get_string(item, "arguments").value_or("{}")}}}});
        } else if (type == "function_call_output") {
            check_keys(item, {"type", "call_id", "output", "name", "namespace", "id", "status"}, where);
            auto call_id = get_string(item, "call_id");
            auto name = get_string(item, "name");
            if (auto ns = get_string(item, "namespace"); ns && !ns->empty() && name) *name = *ns + kNamespaceSeparator + *name;
            const json* output = field(item, "output");
            if ((!call_id && !name) || !output)
                throw bad_request(where, "'" + where + "' needs call_id (or, for an output no call asked for, name) and output",
                                  "missing_required_parameter");
            // As OpenAI answers an output that answers no call of the input (such as one naming
            // the call's item id, fc_..., instead of its call_id).
            if (call_id && !call_ids.count(*call_id))
                throw bad_request("input", "No tool call found for function call output with call_id " + *call_id + " (" +
                                               where + ".call_id: no function_call item before it has that call_id)");
            std::string text = output->is_string() ? output->get<std::string>() : item_text(*output, where + ".output");
            // Codex sends some outputs of its own with a name and no call_id (its goal objective,
            // "agent.goal_objective", after create_goal): a tool result no call asked for, which
            // the chat parser renders with index 0 (docs/api.md, "Responses API").
            if (call_id) messages.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", text}});
            else messages.push_back({{"role", "tool"}, {"name", *name}, {"content", text}});
        } else if (type == "reasoning") {
            check_keys(item, {"type", "id", "summary", "content", "encrypted_content", "status"}, where);
            pending_reasoning += reasoning_text(item);
        } else {
            throw bad_request(where + ".type", "input items of type \"" + type +
                                                   "\" are not supported (message, function_call, function_call_output, reasoning)",
                              "unsupported_parameter");
        }
    }
    return messages;
}

// Every top-level field of a Responses request (wire/fields.h, RequestField): the known-keys
// check and the fields copied as they are into the chat request come from this table; the others
// are read below (or change nothing: store, metadata, ...).
constexpr RequestField kResponsesFields[] = {
    {"model", "model"},
    {"input"},
    {"instructions"},
    {"tools"},
    {"tool_choice"},
    {"parallel_tool_calls", "parallel_tool_calls"},
    {"max_output_tokens", "max_completion_tokens"},
    {"temperature", "temperature"},
    {"top_p", "top_p"},
    {"top_k", "top_k"},
    {"min_p", "min_p"},
    {"seed", "seed"},
    {"stream", "stream"},
    {"stream_options"},
    {"reasoning"},
    {"text"},
    {"store"},
    {"metadata"},
    {"user"},
    {"safety_identifier"},
    {"prompt_cache_key"},
    {"service_tier"},
    {"truncation"},
    {"include"},
    {"previous_response_id"},
    {"background"},
    {"conversation"},
    {"top_logprobs"},
    {"max_tool_calls"},
};

}  // namespace

GenerationRequest parse_responses_request(const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                          const nlohmann::ordered_json* schemas) {
    if (!body.is_object()) throw bad_request("", "the request body must be a JSON object", "invalid_type");
    check_fields(body, kResponsesFields);
    for (const char* key : {"previous_response_id", "conversation"})
        if (field(body, key))
            throw bad_request(key, std::string("'") + key + "' needs stored responses, which this server does not keep: "
                                                          "send the whole conversation as 'input'",
                              "unsupported_parameter");
    if (get_bool(body, "background").value_or(false))
        throw bad_request("background", "background responses are not supported", "unsupported_parameter");

    json chat = {{"messages", translate_input(body)}};
    std::vector<std::string> namespaces;
    copy_fields(body, kResponsesFields, chat);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw bad_request("stream_options", "'stream_options' must be an object", "invalid_type");
        check_keys(*so, {"include_obfuscation"}, "stream_options");
    }
    if (const json* n = field(body, "top_logprobs")) {
        chat["logprobs"] = true;
        chat["top_logprobs"] = *n;
    }
    if (const json* tools = field(body, "tools")) {
        if (!tools->is_array()) throw bad_request("tools", "'tools' must be an array", "invalid_type");
        json chat_tools = json::array();
        auto add_function = [&](const json& t, const std::string& prefix) {
            json function = t;
            function.erase("type");
            if (!prefix.empty() && function.contains("name") && function["name"].is_string())
                function["name"] = prefix + function["name"].get<std::string>();
            chat_tools.push_back({{"type", "function"}, {"function", function}});
        };
        for (size_t i = 0; i < tools->size(); ++i) {
            const json& t = (*tools)[i];
            std::string where = "tools[" + std::to_string(i) + "]";
            if (!t.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
            std::string type = string_field(t, "type", where + ".type");
            if (type == "function") {
                add_function(t, "");
            } else if (type == "namespace") {
                // A namespace's functions are offered as "NAMESPACE.NAME"; their calls come back
                // as {namespace, name} (responses/response.cpp splits them again).
                std::string ns = string_field(t, "name", where + ".name");
                namespaces.push_back(ns);
                const json* inner = field(t, "tools");
                if (ns.empty() || !inner || !inner->is_array())
                    throw bad_request(where, "a namespace tool needs a 'name' and an array of 'tools'", "invalid_type");
                for (size_t j = 0; j < inner->size(); ++j) {
                    const json& f = (*inner)[j];
                    if (f.is_object() && f.value("type", "function") == "function")
                        add_function(f, ns + kNamespaceSeparator);
                    else
                        note_ignored_tool(ns + "." + (f.is_object() ? f.value("type", "?") : "?"));
                }
            } else {
                // Hosted tools (web_search, file_search, code_interpreter, mcp, ...) and custom
                // grammar tools run on OpenAI's side or need a grammar we do not take: left out of
                // the prompt, and said so (X-K3-Ignored-Tools, the log).
                note_ignored_tool(type.empty() ? where : type);
            }
        }
        chat["tools"] = chat_tools;
    }
    if (const json* c = field(body, "tool_choice")) {
        if (c->is_object()) {
            if (c->value("type", "") != "function")
                throw bad_request("tool_choice", "only function tool choices are supported", "unsupported_parameter");
            auto name = get_string(*c, "name");
            if (!name) throw bad_request("tool_choice", "'tool_choice' names no function", "missing_required_parameter");
            chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
        } else {
            chat["tool_choice"] = *c;
        }
    }
    if (const json* reasoning = field(body, "reasoning")) {
        if (!reasoning->is_object()) throw bad_request("reasoning", "'reasoning' must be an object", "invalid_type");
        check_keys(*reasoning, {"effort", "summary", "generate_summary"}, "reasoning");
        if (const json* effort = field(*reasoning, "effort")) chat["reasoning_effort"] = *effort;
    }
    if (const json* text = field(body, "text")) {
        if (!text->is_object()) throw bad_request("text", "'text' must be an object", "invalid_type");
        check_keys(*text, {"format", "verbosity"}, "text");
        if (const json* format = field(*text, "format")) {
            if (!format->is_object()) throw bad_request("text.format", "'text.format' must be an object", "invalid_type");
            std::string type = format->value("type", "");
            if (type == "json_schema") {
                json schema = {{"name", format->value("name", "response")}};
                if (format->contains("schema")) schema["schema"] = (*format)["schema"];
                if (format->contains("strict")) schema["strict"] = (*format)["strict"];
                if (format->contains("description")) schema["description"] = (*format)["description"];
                chat["response_format"] = {{"type", "json_schema"}, {"json_schema", schema}};
            } else {
                chat["response_format"] = {{"type", type}};
            }
        }
    }
    if (const json* include = field(body, "include")) {
        if (!include->is_array()) throw bad_request("include", "'include' must be an array", "invalid_type");
        for (const auto& what : *include)
            if (!what.is_string() || (what != "reasoning.encrypted_content" && what != "message.output_text.logprobs"))
                throw bad_request("include", "'include' may list reasoning.encrypted_content and message.output_text.logprobs only, got " + what.dump(),
                                  "unsupported_parameter");
    }

    // text.format.schema in the client's key order (json sorts keys): handed on to where the chat
    // parser looks for it, the chat request's response_format.
    nlohmann::ordered_json chat_schemas = nlohmann::ordered_json::object();
    if (schemas && schemas->is_object())
        if (auto it = schemas->find("text.format.schema"); it != schemas->end())
            chat_schemas["response_format.json_schema.schema"] = *it;
    GenerationRequest r = parse_chat_request(chat, tok, limits, &chat_schemas);
    r.endpoint = Endpoint::Responses;
    r.tool_namespaces = std::move(namespaces);
    // What the response object reports back about the request.
    json& echo = r.responses_echo;
    echo["instructions"] = body.value("instructions", json(nullptr));
    echo["max_output_tokens"] = body.value("max_output_tokens", json(nullptr));
    echo["parallel_tool_calls"] = body.value("parallel_tool_calls", json(true));
    echo["temperature"] = body.value("temperature", json(1.0));
    echo["top_p"] = body.value("top_p", json(1.0));
    echo["tool_choice"] = body.value("tool_choice", json("auto"));
    echo["tools"] = echoed_tools(body);
    echo["metadata"] = body.value("metadata", json::object());
    echo["text"] = body.value("text", json{{"format", {{"type", "text"}}}});
    json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
    if (const json* rq = field(body, "reasoning"))
        for (const char* key : {"effort", "summary"})
            if (rq->contains(key)) reasoning[key] = (*rq)[key];
    echo["reasoning"] = reasoning;
    // OpenAI's schema has `user` a string or absent (docs/api.md "/v1/responses").
    if (const json* user = field(body, "user"); user && user->is_string()) echo["user"] = *user;
    return r;
}

}  // namespace k3::server
