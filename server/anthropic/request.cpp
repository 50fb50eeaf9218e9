// POST /v1/messages requests: translated into the chat-completions request they mean (system
// blocks, user/assistant/system turns, tool_use/tool_result blocks, tools with input_schema,
// tool_choice, thinking, effort) and validated by the chat parser, so Messages, chat completions
// and Responses render, sample and call tools identically. Fields this server does not know are
// ignored and counted (wire/fields.h); cache_control, metadata and context_management are
// known and change nothing here (the prompt cache works without being asked).
#include <algorithm>
#include <climits>

#include "anthropic/messages.h"
#include "openai/request.h"
#include "wire/fields.h"

namespace k3::server {

namespace {

// A system prompt or a tool result as chat content: a string, or its text blocks as chat text
// parts, each its own segment with nothing between them (docs/model.md "Chat layout").
json block_parts(const json& content, const std::string& where) {
    if (content.is_string()) return content;
    if (!content.is_array()) throw bad_request(where, "'" + where + "' must be a string or an array of blocks", "invalid_type");
    json parts = json::array();
    for (size_t i = 0; i < content.size(); ++i) {
        const json& b = content[i];
        std::string at = where + "[" + std::to_string(i) + "]";
        if (!b.is_object()) throw bad_request(at, "'" + at + "' must be an object", "invalid_type");
        std::string type = string_field(b, "type", at + ".type");
        if (type == "text") {
            check_keys(b, {"type", "text", "cache_control", "citations"}, at);
            parts.push_back({{"type", "text"}, {"text", string_field(b, "text", at + ".text")}});
        } else if (type == "image" || type == "document") {
            throw bad_request(at + ".type", "'" + type + "' blocks are not supported here (images only in a user message's content)",
                              "unsupported_content");
        } else {
            note_ignored_field(at + "(" + type + ")");
        }
    }
    return parts;
}

// An is_error result: "Error: " before its text, in its first segment.
json error_result(json body) {
    if (body.is_string()) return "Error: " + body.get<std::string>();
    if (body.empty()) return "Error: ";
    body[0]["text"] = "Error: " + body[0]["text"].get<std::string>();
    return body;
}

// One Anthropic message -> the chat messages it means. A user turn's tool_result blocks become
// tool messages (they come first, as clients send them), its text one user message; an
// assistant turn's thinking, text and tool_use blocks one assistant message.
void translate_message(const json& m, size_t index, json& out) {
    std::string where = "messages[" + std::to_string(index) + "]";
    if (!m.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
    check_keys(m, {"role", "content"}, where);
    std::string role = string_field(m, "role", where + ".role");
    if (role != "user" && role != "assistant" && role != "system")
        throw bad_request(where + ".role", "unsupported role '" + role + "' (user, assistant, system)");
    const json* content = field(m, "content");
    if (!content) throw bad_request(where + ".content", "'" + where + ".content' is required", "missing_required_parameter");
    // A system turn inside messages (Claude Code's mid-conversation system beta) is rendered
    // where it stands.
    if (role == "system") {
        out.push_back({{"role", "system"}, {"content", block_parts(*content, where + ".content")}});
        return;
    }
    if (content->is_string()) {
        out.push_back({{"role", role}, {"content", *content}});
        return;
    }
    if (!content->is_array()) throw bad_request(where + ".content", "'" + where + ".content' must be a string or an array of blocks", "invalid_type");
    std::string reasoning;
    json calls = json::array();
    // The turn's text blocks and images in order, as chat parts: each text block its own segment
    // (docs/model.md "Chat layout").
    json parts = json::array();
    bool has_text = false;
    for (size_t j = 0; j < content->size(); ++j) {
        const json& b = (*content)[j];
        std::string at = where + ".content[" + std::to_string(j) + "]";
        if (!b.is_object()) throw bad_request(at, "'" + at + "' must be an object", "invalid_type");
        std::string type = string_field(b, "type", at + ".type");
        if (type == "text") {
            check_keys(b, {"type", "text", "cache_control", "citations"}, at);
            std::string text = string_field(b, "text", at + ".text");
            has_text |= !text.empty();
            parts.push_back({{"type", "text"}, {"text", std::move(text)}});
        } else if (type == "tool_result" && role == "user") {
            check_keys(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, at);
            std::string id = string_field(b, "tool_use_id", at + ".tool_use_id");
            if (id.empty()) throw bad_request(at + ".tool_use_id", "'" + at + ".tool_use_id' is required", "missing_required_parameter");
            const json* result = field(b, "content");
            json body = result ? block_parts(*result, at + ".content") : json("");
            if (get_bool(b, "is_error").value_or(false)) body = error_result(std::move(body));
            out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", body}});
        } else if (type == "tool_use" && role == "assistant") {
            check_keys(b, {"type", "id", "name", "input", "cache_control", "caller"}, at);
            const json* input = field(b, "input");
            if (input && !input->is_object()) throw bad_request(at + ".input", "'" + at + ".input' must be an object", "invalid_type");
            calls.push_back({{"id", string_field(b, "id", at + ".id")},
                             {"type", "function"},
                             {"function", {{"name", string_field(b, "name", at + ".name")},
                                           {"arguments", input ? dump(*input) : std::string("{}")}}}});
        } else if (type == "thinking" && role == "assistant") {
            check_keys(b, {"type", "thinking", "signature", "cache_control"}, at);
            std::string thinking = string_field(b, "thinking", at + ".thinking");
            // display "omitted" sent the text back empty: ours is inside the signature.
            if (thinking.empty())
                if (auto from_signature = thinking_from_signature(string_field(b, "signature", at + ".signature")))
                    thinking = *from_signature;
            reasoning += thinking;
        } else if (type == "redacted_thinking" && role == "assistant") {
            check_keys(b, {"type", "data"}, at);  // another server's encrypted reasoning: nothing to render
        } else if (type == "image" && role == "user") {
            // {"source": {"type": "base64", "media_type": "image/png", "data": "..."}}: the chat
            // API's data: URL (docs/api.md "Images")
            check_keys(b, {"type", "source", "cache_control"}, at);
            const json* source = field(b, "source");
            if (!source || !source->is_object())
                throw bad_request(at + ".source", "'" + at + ".source' must be an object", "invalid_type");
            const std::string source_type = string_field(*source, "type", at + ".source.type");
            if (source_type == "url")
                throw bad_request(at + ".source", "remote image URLs are not fetched (the daemon fetches nothing): send the image "
                                                  "as a base64 source",
                                  "image_url_not_supported");
            if (source_type != "base64")
                throw bad_request(at + ".source.type", "image sources of type '" + source_type + "' are not supported (base64)",
                                  "image_url_not_supported");
            check_keys(*source, {"type", "media_type", "data"}, at + ".source");
            parts.push_back({{"type", "image_url"},
                             {"image_url",
                              {{"url", "data:" + string_field(*source, "media_type", at + ".source.media_type") + ";base64," +
                                           string_field(*source, "data", at + ".source.data")}}}});
        } else if (type == "image") {
            throw bad_request(at + ".type", "images are only accepted in user messages", "unsupported_content");
        } else if (type == "document") {
            throw bad_request(at + ".type", "'document' blocks are not supported: this server takes text and images",
                              "unsupported_content");
        } else if (type == "tool_result" || type == "tool_use" || type == "thinking") {
            throw bad_request(at + ".type", "a '" + type + "' block cannot be in a " + role + " turn");
        } else {
            note_ignored_field(at + "(" + type + ")");  // server tool results, search results, ...
        }
    }
    if (role == "assistant") {
        json msg = {{"role", "assistant"}, {"content", parts}};
        if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
        if (!calls.empty()) msg["tool_calls"] = calls;
        out.push_back(std::move(msg));
    } else if (has_text || std::any_of(parts.begin(), parts.end(), [](const json& p) { return p["type"] != "text"; })) {
        out.push_back({{"role", "user"}, {"content", parts}});
    } else if (out.empty() || out.back()["role"] != "tool") {
        out.push_back({{"role", "user"}, {"content", ""}});
    }
}

// Anthropic tools -> chat tools. Custom tools ({name, description, input_schema}) are offered;
// Anthropic-defined ones (bash_20250124, web_search_..., computer_...) and deferred ones
// (defer_loading: found through server-side tool search) are left out and said so.
json translate_tools(const json& tools) {
    if (!tools.is_array()) throw bad_request("tools", "'tools' must be an array", "invalid_type");
    json out = json::array();
    for (size_t i = 0; i < tools.size(); ++i) {
        const json& t = tools[i];
        std::string where = "tools[" + std::to_string(i) + "]";
        if (!t.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
        std::string type = string_field(t, "type", where + ".type");
        std::string name = string_field(t, "name", where + ".name");
        if (!type.empty() && type != "custom") {
            note_ignored_tool(type);
            continue;
        }
        if (get_bool(t, "defer_loading").value_or(false)) {
            note_ignored_tool(name + " (defer_loading)");
            continue;
        }
        check_keys(t, {"type", "name", "description", "input_schema", "cache_control", "defer_loading", "strict",
                       "input_examples", "allowed_callers", "eager_input_streaming"},
                   where);
        json function = {{"name", name}};
        if (const json* d = field(t, "description")) function["description"] = *d;
        if (const json* s = field(t, "input_schema")) function["parameters"] = *s;
        if (const json* s = field(t, "strict")) function["strict"] = *s;
        out.push_back({{"type", "function"}, {"function", function}});
    }
    return out;
}

// tool_choice {type: auto|any|tool|none, name, disable_parallel_tool_use} -> the chat fields.
void translate_tool_choice(const json& c, json& chat) {
    if (!c.is_object()) throw bad_request("tool_choice", "'tool_choice' must be an object", "invalid_type");
    check_keys(c, {"type", "name", "disable_parallel_tool_use"}, "tool_choice");
    std::string type = string_field(c, "type", "tool_choice.type");
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool")
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_field(c, "name", "tool_choice.name")}}}};
    else throw bad_request("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none, got \"" + type + "\"");
    if (auto d = get_bool(c, "disable_parallel_tool_use"); d && *d) chat["parallel_tool_calls"] = false;
}

// thinking {enabled (budget_tokens) | adaptive | disabled} and output_config.effort -> K3's
// thinking switch and effort (docs/api.md "Thinking": medium thinks at high). A request without
// `thinking` thinks, as every other API here and the official encoder do (xtml-tools.md,
// "Request fields to encoder inputs": thinking.type, else on); Anthropic's own
// {"type": "disabled"} turns it off.
void translate_thinking(const json& body, json& chat, GenerationRequest& r) {
    bool thinking = true;
    if (const json* t = field(body, "thinking")) {
        if (!t->is_object()) throw bad_request("thinking", "'thinking' must be an object", "invalid_type");
        check_keys(*t, {"type", "budget_tokens", "display"}, "thinking");
        std::string type = string_field(*t, "type", "thinking.type");
        if (type != "enabled" && type != "adaptive" && type != "disabled")
            throw bad_request("thinking.type", "'thinking.type' must be enabled, adaptive or disabled, got \"" + type + "\"");
        thinking = type != "disabled";
        if (type == "enabled") get_int(*t, "budget_tokens", 1, INT_MAX);  // validated; K3 has no budget switch
        std::string display = string_field(*t, "display", "thinking.display");
        if (!display.empty() && display != "summarized" && display != "omitted")
            throw bad_request("thinking.display", "'thinking.display' must be summarized or omitted, got \"" + display + "\"");
        r.hide_reasoning = display == "omitted";
    }
    chat["thinking"] = thinking;
    if (const json* oc = field(body, "output_config")) {
        if (!oc->is_object()) throw bad_request("output_config", "'output_config' must be an object", "invalid_type");
        check_keys(*oc, {"effort", "format"}, "output_config");
        if (field(*oc, "format")) throw bad_request("output_config.format", "'output_config.format' is not supported", "unsupported_parameter");
        std::string effort = string_field(*oc, "effort", "output_config.effort");
        if (!effort.empty() && effort != "low" && effort != "medium" && effort != "high" && effort != "max" && effort != "xhigh")
            throw bad_request("output_config.effort", "'output_config.effort' must be low, medium, high, xhigh or max, got \"" + effort + "\"");
        if (thinking && !effort.empty()) chat["reasoning_effort"] = effort;
    }
}

// Every top-level field of a Messages request (wire/fields.h, RequestField): the known-keys check
// and the fields copied as they are into the chat request come from this table; the others are
// read by the translation (or change nothing: metadata, cache_control, ...).
constexpr RequestField kMessagesFields[] = {
    {"model", "model"},
    {"messages"},
    {"system"},
    {"max_tokens", "max_completion_tokens"},
    {"stop_sequences"},
    {"stream", "stream"},
    {"temperature", "temperature"},
    {"top_p", "top_p"},
    {"top_k", "top_k"},
    {"tools"},
    {"tool_choice"},
    {"thinking"},
    {"output_config"},
    {"metadata"},
    {"cache_control"},
    {"context_management"},
    {"service_tier"},
    {"container"},
    {"mcp_servers"},
    {"inference_geo"},
};

json translate(const json& body, GenerationRequest& r) {
    if (!body.is_object()) throw bad_request("", "the request body must be a JSON object", "invalid_type");
    check_fields(body, kMessagesFields);
    json messages = json::array();
    if (const json* system = field(body, "system")) messages.push_back({{"role", "system"}, {"content", block_parts(*system, "system")}});
    const json* in = field(body, "messages");
    if (!in) throw bad_request("messages", "'messages' is required", "missing_required_parameter");
    if (!in->is_array()) throw bad_request("messages", "'messages' must be an array", "invalid_type");
    if (in->empty()) throw bad_request("messages", "'messages' must not be empty");
    for (size_t i = 0; i < in->size(); ++i) translate_message((*in)[i], i, messages);

    json chat = {{"messages", messages}};
    get_number(body, "temperature", 0, 1);  // Anthropic's range, narrower than chat's
    copy_fields(body, kMessagesFields, chat);
    if (const json* tools = field(body, "tools")) chat["tools"] = translate_tools(*tools);
    if (const json* c = field(body, "tool_choice")) translate_tool_choice(*c, chat);
    translate_thinking(body, chat, r);
    return chat;
}

// stop_sequences: any number of non-empty strings (chat's `stop` takes 4).
std::vector<std::string> stop_sequences(const json& body) {
    std::vector<std::string> out;
    const json* s = field(body, "stop_sequences");
    if (!s) return out;
    if (!s->is_array()) throw bad_request("stop_sequences", "'stop_sequences' must be an array of strings", "invalid_type");
    for (const auto& x : *s) {
        if (!x.is_string() || x.get_ref<const std::string&>().empty())
            throw bad_request("stop_sequences", "'stop_sequences' entries must be non-empty strings", "invalid_type");
        out.push_back(x.get<std::string>());
    }
    return out;
}

}  // namespace

GenerationRequest parse_messages_request(const json& body, const Tokenizer& tok, const ModelLimits& limits) {
    GenerationRequest shape;
    json chat = translate(body, shape);
    GenerationRequest r = parse_chat_request(chat, tok, limits);
    r.endpoint = Endpoint::Messages;
    r.hide_reasoning = shape.hide_reasoning;
    for (auto& s : stop_sequences(body)) r.params.stop.push_back(std::move(s));
    return r;
}

int count_message_tokens(const json& body, const Tokenizer& tok, const ModelLimits& limits) {
    GenerationRequest shape;
    json chat = translate(body, shape);
    chat.erase("stream");
    chat["max_completion_tokens"] = 1;
    // Counted whatever the length: a prompt longer than the context still has a length.
    ModelLimits unbounded = limits;
    unbounded.n_ctx = INT_MAX / 2;
    unbounded.max_prompt_tokens = INT_MAX / 2;
    return parse_chat_request(chat, tok, unbounded).reported_prompt_tokens();
}

}  // namespace k3::server
