// The Kimi K3 chat layout (docs/model.md "Chat layout"; XTML): control segments (<|open|>,
// <|close|>, <|sep|>, <|end_of_msg|>) are special ids; every text segment, including all user and
// assistant text, is encoded with specials disallowed, so text that spells a control token stays
// plain text.
//
// [thinking] <|open|>message role="system"
// type="thinking-effort"<|sep|>EFFORT<|close|>message<|sep|><|end_of_msg|>
//   per message: <|open|>message role="ROLE"<|sep|> BODY <|close|>message<|sep|><|end_of_msg|>
//     system/user BODY: content; a user turn's images are written where they sit in it, each
//                       <|media_begin|>image WxH<|media_content|><|media_pad|><|media_end|>
//     assistant BODY:   [thinking] <|open|>think<|sep|>reasoning<|close|>think<|sep|>
//                       <|open|>response<|sep|>content<|close|>response<|sep|>
//   generation prompt: <|open|>message role="assistant"<|sep|><|open|>think|response<|sep|>
//
// With tools (xtml-tools.md): a "tool-declare" system message first; an assistant turn with calls
// adds <|open|>tools<|sep|> <|open|>call tool="NAME" index="N"<|sep|> one <|open|>argument key="K"
// type="T"<|sep|>BODY<|close|>argument<|sep|> per argument <|close|>call<|sep|> ...
// <|close|>tools<|sep|> after its response; a tool result is <|open|>message role="tool"
// tool="NAME" index="N"<|sep|>RESULT<|close|>message<|sep|><|end_of_msg|>; a tool_choice other than
// auto adds a "tool-choice" system message after the last user turn.
// Every literal lives in k3/xtml.h.
#include "k3/chat.h"

#include <nlohmann/json.hpp>

#include <functional>

#include "k3/error.h"
#include "k3/xtml.h"

namespace k3 {

namespace {

// The control tokens the layout needs, looked up once per call.
struct ControlIds {
    int32_t open, close, sep, end_of_msg, eos;

    explicit ControlIds(const Tokenizer& tok) {
        open = need(tok, xtml::kOpen);
        close = need(tok, xtml::kClose);
        sep = need(tok, xtml::kSep);
        end_of_msg = need(tok, xtml::kEndOfMessage);
        eos = need(tok, xtml::kEos);
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
    void text(std::string_view s) {
        auto ids = tok_.encode(s, /*allow_special=*/false);
        out_.insert(out_.end(), ids.begin(), ids.end());
    }
    // An image's framing: a control segment, so text can never forge it (docs/model.md "Images in the prompt").
    void image(const ChatImage& im) {
        control(ControlIds::need(tok_, xtml::kMediaBegin));
        text(xtml::image_size_text(im.width, im.height));
        control(ControlIds::need(tok_, xtml::kMediaContent));
        control(ControlIds::need(tok_, xtml::kMediaPad));
        control(ControlIds::need(tok_, xtml::kMediaEnd));
    }
    // The content with its images where they sit.
    void content(const ChatMessage& m) {
        size_t at = 0;
        for (const ChatImage& im : m.images) {
            text(std::string_view(m.content).substr(at, im.offset - at));
            image(im);
            at = im.offset;
        }
        text(std::string_view(m.content).substr(at));
    }
    void open_tag(std::string_view tag) { control(ids_.open), text(tag), control(ids_.sep); }
    void close_tag(std::string_view tag) { control(ids_.close), text(tag), control(ids_.sep); }
    void message(std::string_view open, const std::function<void()>& body) {
        open_tag(open);
        body();
        close_tag("message");
        control(ids_.end_of_msg);
    }
    std::vector<int32_t> take() { return std::move(out_); }

private:
    const Tokenizer& tok_;
    ControlIds ids_;
    std::vector<int32_t> out_;
};

// ` key="value"` with the value escaped.
std::string attribute(std::string_view key, std::string_view value) {
    std::string out(1, ' ');  // (appends: GCC 12 warns falsely on "literal" + std::string&&)
    out.append(key).append("=\"").append(xtml::escape_attribute(value)).append("\"");
    return out;
}

std::string message_tag(const ChatMessage& m) {
    std::string t = std::string(xtml::kMessage) + attribute("role", m.role);
    if (m.role == "tool") return t + attribute(xtml::kToolAttr, m.tool_name) + attribute(xtml::kIndexAttr, std::to_string(m.tool_index));
    if (!m.name.empty()) t += attribute(xtml::kNameAttr, m.name);
    return t;
}

std::string_view json_type_name(const nlohmann::ordered_json& v) {
    if (v.is_string()) return xtml::kTypeString;
    if (v.is_number()) return xtml::kTypeNumber;
    if (v.is_boolean()) return xtml::kTypeBoolean;
    if (v.is_null()) return xtml::kTypeNull;
    if (v.is_object()) return xtml::kTypeObject;
    return xtml::kTypeArray;
}

// <|open|>tools<|sep|> one call element per call <|close|>tools<|sep|>; arguments in the order
// the client sent them (the order the model wrote them).
void render_tool_calls(Renderer& r, const std::vector<ChatToolCall>& calls, size_t message_index) {
    r.open_tag(xtml::kTools);
    for (size_t i = 0; i < calls.size(); ++i) {
        const ChatToolCall& c = calls[i];
        auto args = nlohmann::ordered_json::parse(c.arguments.empty() ? "{}" : c.arguments, nullptr, false);
        if (args.is_discarded() || !args.is_object())
            throw Error(ErrorKind::Usage, "chat: message " + std::to_string(message_index) + " tool call " +
                                              std::to_string(i) + ": 'arguments' is not a JSON object");
        r.open_tag(std::string(xtml::kCall) + attribute(xtml::kToolAttr, c.name) +
                   attribute(xtml::kIndexAttr, std::to_string(i + 1)));
        for (auto it = args.begin(); it != args.end(); ++it) {
            r.open_tag(std::string(xtml::kArgument) + attribute(xtml::kKeyAttr, it.key()) +
                       attribute(xtml::kTypeAttr, json_type_name(it.value())));
            r.text(it.value().is_string() ? it.value().get<std::string>()
                                          : it.value().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
            r.close_tag(xtml::kArgument);
        }
        r.close_tag(xtml::kCall);
    }
    r.close_tag(xtml::kTools);
}

}  // namespace

std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 const ChatOptions& options) {
    if (options.thinking) {
        const std::string& e = options.thinking_effort;
        if (e != "low" && e != "medium" && e != "high" && e != "max")
            throw Error(ErrorKind::Usage, "chat: unknown thinking_effort '" + e + "' (use low, medium, high or max)");
    }
    size_t last_user = messages.size();
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant" && role != "tool")
            throw Error(ErrorKind::Usage, "chat: message " + std::to_string(i) + " has unknown role '" + role +
                                              "' (use system, user, assistant or tool)");
        if (role == "user") last_user = i;
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
    Renderer r(tok);
    auto system_message = [&](std::string_view type, std::string_view body) {
        r.message(std::string(xtml::kMessage) + " role=\"system\" type=\"" + std::string(type) + "\"", [&] { r.text(body); });
    };
    if (!options.tools_json.empty())
        system_message(xtml::kToolDeclareType,
                       std::string(xtml::kToolsPreamble) + options.tools_json + std::string(xtml::kToolsPostamble));
    if (options.thinking) system_message(xtml::kThinkingEffortType, xtml::thinking_effort_text(options.thinking_effort));
    auto tool_choice = [&] {
        if (options.tool_choice == ToolChoice::Required) system_message(xtml::kToolChoiceType, xtml::kToolChoiceRequired);
        if (options.tool_choice == ToolChoice::None) system_message(xtml::kToolChoiceType, xtml::kToolChoiceNone);
    };
    if (options.continue_final && (messages.empty() || messages.back().role != "assistant" || !messages.back().tool_calls.empty()))
        throw Error(ErrorKind::Usage, "chat: continuing the final message needs an assistant message without tool calls last");
    const size_t closed = options.continue_final ? messages.size() - 1 : messages.size();
    for (size_t i = 0; i < closed; ++i) {
        const ChatMessage& m = messages[i];
        r.message(message_tag(m), [&] {
            if (m.role != "assistant") {
                r.content(m);
                return;
            }
            if (options.thinking) {
                r.open_tag(xtml::kThink);
                r.text(m.reasoning_content);
                r.close_tag(xtml::kThink);
            }
            r.open_tag(xtml::kResponse);
            r.text(m.content);
            r.close_tag(xtml::kResponse);
            if (!m.tool_calls.empty()) render_tool_calls(r, m.tool_calls, i);
        });
        if (i == last_user) tool_choice();
    }
    if (last_user == messages.size()) tool_choice();
    if (options.continue_final) {
        // The answer so far, left open: its reasoning (thinking on) is closed, its response is not.
        const ChatMessage& m = messages.back();
        r.open_tag(message_tag(m));
        if (options.thinking) {
            r.open_tag(xtml::kThink);
            r.text(m.reasoning_content);
            r.close_tag(xtml::kThink);
        }
        r.open_tag(xtml::kResponse);
        r.text(m.content);
        return r.take();
    }
    if (options.add_generation_prompt) {
        r.open_tag(std::string(xtml::kMessage) + " role=\"assistant\"");
        r.open_tag(options.thinking ? xtml::kThink : xtml::kResponse);
    }
    return r.take();
}

}  // namespace k3
