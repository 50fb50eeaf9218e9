// The Kimi K3 chat layout as the official encoder writes it (docs/model.md "Chat layout"). The
// prompt is a list of segments, each encoded on its own, so a segment boundary is a token
// boundary: control segments (<|open|>, <|close|>, <|sep|>, <|end_of_msg|>, the image framing)
// are special ids; every text segment, including all user and assistant text, is encoded with
// specials disallowed, so text that spells a control token stays plain text.
//
// An open tag is <|open|>, the name, then per attribute the four segments ` KEY`, `="`, the
// escaped value, `"`, then <|sep|>; a close tag is <|close|>, the name, <|sep|>. In order:
//   [tools]     <|open|>message role="system" type="tool-declare"<|sep|>DECLARATION<|close|>message<|sep|><|end_of_msg|>
//   [thinking]  the same with type="thinking-effort"
//   per message <|open|>message role="ROLE"[ name="N"]<|sep|> BODY <|close|>message<|sep|><|end_of_msg|>
//     system/user: the content (each part its own segment; a user turn's images where they sit);
//                  a system message with its own tools is their declaration instead
//     assistant:   [thinking] <|open|>think<|sep|>reasoning<|close|>think<|sep|>
//                  <|open|>response<|sep|>content<|close|>response<|sep|> [<|open|>tools<|sep|> calls <|close|>tools<|sep|>]
//     tool:        role="tool" tool="NAME" index="N", the result (runs in call order)
//   [tool_choice none|required] type="tool-choice"
//   [response_format json]      type="response-format"
//   generation prompt: <|open|>message role="assistant"<|sep|><|open|>think|response<|sep|>
// Every literal lives in k3/xtml.h.
#include "k3/chat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>

#include "chat/python_json.h"
#include "chat/tool_results.h"
#include "k3/error.h"
#include "k3/xtml.h"

namespace k3 {

namespace {

using Attributes = std::vector<std::pair<std::string_view, std::string>>;

// The control tokens the layout needs, looked up once per call.
struct ControlIds {
    int32_t open, close, sep, end_of_msg;

    explicit ControlIds(const Tokenizer& tok) {
        open = need(tok, xtml::kOpen);
        close = need(tok, xtml::kClose);
        sep = need(tok, xtml::kSep);
        end_of_msg = need(tok, xtml::kEndOfMessage);
        need(tok, xtml::kEos);
    }
    static int32_t need(const Tokenizer& tok, std::string_view content) {
        auto id = tok.special_id(content);
        if (!id) throw Error(ErrorKind::Config, "chat: the tokenizer has no " + std::string(content) + " token");
        return *id;
    }
};

class Renderer {
public:
    explicit Renderer(const Tokenizer& tok) : tok_(tok), ids_(tok) {}

    void control(int32_t id) { out_.push_back(id); }
    // One text segment (an empty one adds nothing).
    void text(std::string_view s) {
        auto ids = tok_.encode(s, /*allow_special=*/false);
        out_.insert(out_.end(), ids.begin(), ids.end());
    }
    // An image's framing: control segments, so text can never forge it (docs/model.md "Images in the prompt").
    void image(const ChatImage& im) {
        control(ControlIds::need(tok_, xtml::kMediaBegin));
        text(xtml::image_size_text(im.width, im.height));
        control(ControlIds::need(tok_, xtml::kMediaContent));
        control(ControlIds::need(tok_, xtml::kMediaPad));
        control(ControlIds::need(tok_, xtml::kMediaEnd));
    }
    // The content: one segment per part, the images where they sit.
    void content(const ChatMessage& m) {
        std::vector<size_t> cuts = m.part_starts;
        for (const ChatImage& im : m.images) cuts.push_back(im.offset);
        std::sort(cuts.begin(), cuts.end());
        size_t at = 0, next_image = 0;
        const std::string_view all(m.content);
        for (size_t cut : cuts) {
            cut = std::min(cut, all.size());
            text(all.substr(at, cut - at));
            at = std::max(at, cut);
            while (next_image < m.images.size() && m.images[next_image].offset <= at) image(m.images[next_image++]);
        }
        text(all.substr(at));
    }
    void open_tag(std::string_view name, const Attributes& attributes = {}) {
        control(ids_.open);
        text(name);
        for (const auto& [key, value] : attributes) {
            std::string spaced(1, ' ');  // (appends: GCC 12 warns falsely on "literal" + std::string&&)
            text(spaced.append(key));
            text("=\"");
            text(xtml::escape_attribute(value));
            text("\"");
        }
        control(ids_.sep);
    }
    void close_tag(std::string_view name) { control(ids_.close), text(name), control(ids_.sep); }
    void message(const Attributes& attributes, const std::function<void()>& body) {
        open_tag(xtml::kMessage, attributes);
        body();
        close_tag(xtml::kMessage);
        control(ids_.end_of_msg);
    }
    std::vector<int32_t> take() { return std::move(out_); }

private:
    const Tokenizer& tok_;
    ControlIds ids_;
    std::vector<int32_t> out_;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string_view strip(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

std::string_view json_type_name(const nlohmann::ordered_json& v) {
    if (v.is_string()) return xtml::kTypeString;
    if (v.is_number()) return xtml::kTypeNumber;
    if (v.is_boolean()) return xtml::kTypeBoolean;
    if (v.is_null()) return xtml::kTypeNull;
    if (v.is_object()) return xtml::kTypeObject;
    return xtml::kTypeArray;
}

// A call's arguments: one argument element per member in the order sent (a string body as raw
// text, any other as JSON with Python's separators); blank: none; not JSON: the text in one
// <|open|>json type="object"<|sep|> element.
void render_arguments(Renderer& r, const ChatToolCall& c, size_t message_index, size_t call_index) {
    if (strip(c.arguments).empty()) return;
    auto args = nlohmann::ordered_json::parse(c.arguments, nullptr, false);
    if (args.is_discarded()) {
        r.open_tag(xtml::kJson, {{xtml::kTypeAttr, std::string(xtml::kTypeObject)}});
        r.text(c.arguments);
        r.close_tag(xtml::kJson);
        return;
    }
    if (!args.is_object())
        throw Error(ErrorKind::Usage, "chat: message " + std::to_string(message_index) + " tool call " +
                                          std::to_string(call_index) + ": 'arguments' is JSON but not an object");
    for (auto it = args.begin(); it != args.end(); ++it) {
        r.open_tag(xtml::kArgument, {{xtml::kKeyAttr, it.key()}, {xtml::kTypeAttr, std::string(json_type_name(it.value()))}});
        r.text(it.value().is_string() ? it.value().get<std::string>()
                                      : chat_json::dump(it.value(), chat_json::Separators::Python));
        r.close_tag(xtml::kArgument);
    }
}

// <|open|>tools<|sep|> one call element per call (index from 1) <|close|>tools<|sep|>.
void render_tool_calls(Renderer& r, const std::vector<ChatToolCall>& calls, size_t message_index) {
    r.open_tag(xtml::kTools);
    for (size_t i = 0; i < calls.size(); ++i) {
        r.open_tag(xtml::kCall, {{xtml::kToolAttr, calls[i].name}, {xtml::kIndexAttr, std::to_string(i + 1)}});
        render_arguments(r, calls[i], message_index, i);
        r.close_tag(xtml::kCall);
    }
    r.close_tag(xtml::kTools);
}

// A tools array as the declaration writes it: keys sorted at every depth, compact, a function's
// null-valued fields dropped, nothing added.
std::string declared_tools(const std::string& tools_json, const std::string& where) {
    auto tools = nlohmann::json::parse(tools_json, nullptr, false);
    if (tools.is_discarded() || !tools.is_array()) throw Error(ErrorKind::Usage, "chat: " + where + " is not a JSON array");
    for (auto& tool : tools) {
        if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) continue;
        auto& f = tool["function"];
        for (auto it = f.begin(); it != f.end();) it = it.value().is_null() ? f.erase(it) : std::next(it);
    }
    return chat_json::dump(tools, chat_json::Separators::Compact);
}

bool has_own_tools(const ChatMessage& m) {
    if (m.tools_json.empty()) return false;
    auto tools = nlohmann::json::parse(m.tools_json, nullptr, false);
    return !(tools.is_array() && tools.empty());
}

bool is_system(const std::string& role) { return role == "system" || role == "developer"; }

void check_messages(std::span<const ChatMessage> messages, const ChatOptions& options) {
    if (options.thinking) {
        const std::string& e = options.thinking_effort;
        if (std::find(std::begin(xtml::kThinkingEfforts), std::end(xtml::kThinkingEfforts), e) == std::end(xtml::kThinkingEfforts))
            throw Error(ErrorKind::Usage, "chat: unknown thinking_effort '" + e + "' (use low, high or max)");
    }
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (!is_system(role) && role != "user" && role != "assistant" && role != "tool")
            throw Error(ErrorKind::Usage, "chat: message " + std::to_string(i) + " has unknown role '" + role +
                                              "' (use system, developer, user, assistant or tool)");
        if (!messages[i].tools_json.empty() && !is_system(role))
            throw Error(ErrorKind::Usage, "chat: message " + std::to_string(i) + " (" + role +
                                              ") has tools; only system messages declare tools");
        // The release gathers images from user turns only (docs/model.md "Images in the prompt").
        if (!messages[i].images.empty() && role != "user")
            throw Error(ErrorKind::Usage, "chat: message " + std::to_string(i) + " (" + role +
                                              ") has images; images are only accepted in user messages");
        size_t at = 0;
        for (const ChatImage& im : messages[i].images) {
            if (im.offset < at || im.offset > messages[i].content.size())
                throw Error(ErrorKind::Usage, "chat: message " + std::to_string(i) + ": image offsets out of order");
            at = im.offset;
        }
    }
    if (options.continue_final && (messages.empty() || messages.back().role != "assistant" || !messages.back().tool_calls.empty()))
        throw Error(ErrorKind::Usage, "chat: continuing the final message needs an assistant message without tool calls last");
}

// An assistant turn's reasoning: with thinking on always a think channel, empty when there is
// no reasoning or only whitespace.
void think_channel(Renderer& r, const ChatMessage& m) {
    r.open_tag(xtml::kThink);
    if (!strip(m.reasoning_content).empty()) r.text(m.reasoning_content);
    r.close_tag(xtml::kThink);
}

}  // namespace

std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 const ChatOptions& options) {
    check_messages(messages, options);
    Renderer r(tok);
    auto system_message = [&](std::string_view type, std::string_view body) {
        r.message({{xtml::kRoleAttr, std::string(xtml::kRoleSystem)}, {xtml::kTypeAttr, std::string(type)}},
                  [&] { r.text(strip(body)); });
    };
    if (!options.tools_json.empty())
        system_message(xtml::kToolDeclareType, std::string(xtml::kToolsPreamble)
                                                   .append(declared_tools(options.tools_json, "tools"))
                                                   .append(xtml::kToolsPostamble));
    if (options.thinking) system_message(xtml::kThinkingEffortType, xtml::thinking_effort_text(options.thinking_effort));

    const chat_layout::ToolResultPlacement results = chat_layout::place_tool_results(messages);
    auto message_attributes = [&](const ChatMessage& m, size_t i) {
        const std::string role = is_system(m.role) ? std::string(xtml::kRoleSystem) : m.role;
        Attributes a = {{xtml::kRoleAttr, role}};
        if (role == xtml::kRoleTool) {
            a.push_back({xtml::kToolAttr, results.tool[i]});
            a.push_back({xtml::kIndexAttr, std::to_string(results.index[i])});
        } else if (!m.name.empty()) {
            a.push_back({xtml::kNameAttr, m.name});
        }
        return a;
    };
    const size_t closed = options.continue_final ? messages.size() - 1 : messages.size();
    for (size_t k = 0; k < closed; ++k) {
        const size_t i = results.order[k];
        const ChatMessage& m = messages[i];
        if (is_system(m.role) && has_own_tools(m)) {
            system_message(xtml::kToolDeclareType, std::string(xtml::kDynamicToolsPreamble)
                                                       .append(declared_tools(m.tools_json, "message " + std::to_string(i) + " tools"))
                                                       .append(xtml::kToolsPostamble));
            continue;
        }
        r.message(message_attributes(m, i), [&] {
            if (m.role != "assistant") {
                r.content(m);
                return;
            }
            if (options.thinking) think_channel(r, m);
            r.open_tag(xtml::kResponse);
            r.content(m);
            r.close_tag(xtml::kResponse);
            if (!m.tool_calls.empty()) render_tool_calls(r, m.tool_calls, i);
        });
    }
    if (options.continue_final) {
        // The answer so far, left open: its reasoning (thinking on) is closed, its response is not.
        const ChatMessage& m = messages.back();
        r.open_tag(xtml::kMessage, message_attributes(m, messages.size() - 1));
        if (options.thinking) think_channel(r, m);
        r.open_tag(xtml::kResponse);
        r.content(m);
        return r.take();
    }
    if (options.tool_choice == ToolChoice::Required) system_message(xtml::kToolChoiceType, xtml::kToolChoiceRequired);
    if (options.tool_choice == ToolChoice::None) system_message(xtml::kToolChoiceType, xtml::kToolChoiceNone);
    const ChatResponseFormat& format = options.response_format;
    if (format.type == "json_object") {
        system_message(xtml::kResponseFormatType, xtml::response_format_text(format.type));
    } else if (format.type == "json_schema") {
        auto schema = nlohmann::json::parse(format.schema_json, nullptr, false);
        if (schema.is_discarded()) throw Error(ErrorKind::Usage, "chat: the response format's schema is not JSON");
        system_message(xtml::kResponseFormatType, xtml::response_format_text(format.type)
                                                      .append(xtml::kResponseFormatSchemaPreamble)
                                                      .append(chat_json::dump(schema, chat_json::Separators::Compact))
                                                      .append(xtml::kToolsPostamble));
    } else if (!format.type.empty() && format.type != "text") {
        throw Error(ErrorKind::Usage, "chat: unknown response format '" + format.type + "'");
    }
    if (options.add_generation_prompt) {
        r.open_tag(xtml::kMessage, {{xtml::kRoleAttr, std::string(xtml::kRoleAssistant)}});
        r.open_tag(options.thinking ? xtml::kThink : xtml::kResponse);
    }
    return r.take();
}

}  // namespace k3
