// The Kimi K3 chat layout (docs/model.md "Chat layout", xtml-tools.md): messages -> the exact token
// sequence the model was trained on, and the model's output tokens -> reasoning, response text and
// tool calls. User, assistant and tool text never produce special tokens, even when they spell
// them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "k3/tokenizer.h"

namespace k3 {

// One call in an assistant turn of the history.
struct ChatToolCall {
    ChatToolCall() = default;
    ChatToolCall(std::string name_, std::string arguments_, std::string id_ = {})
        : name(std::move(name_)), arguments(std::move(arguments_)), id(std::move(id_)) {}
    std::string name;
    // As the client sent it: a JSON object (rendered one argument element per member), empty or
    // blank (no arguments), or text that is not JSON (rendered whole in one json element). JSON
    // that is not an object is refused.
    std::string arguments;
    std::string id;  // tool_calls[].id: the tool results after the turn are put in call order by it
};

// An image in a user message: the renderer writes its framing (k3/xtml.h) at byte `offset` of the
// content, between the text before and after it (parts in order, no separator: docs/model.md
// "Images in the prompt").
struct ChatImage {
    size_t offset = 0;
    int width = 0, height = 0;  // stored size, as the framing writes it
};

struct ChatMessage {
    std::string role;               // "system", "developer" (rendered as system), "user", "assistant" or "tool"
    std::string content;            // the text parts, concatenated
    // Byte offsets in `content` where a text part after the first begins: each part is its own
    // text segment, so a part boundary is a token boundary (ascending).
    std::vector<size_t> part_starts;
    std::string reasoning_content;  // assistant turns only, used when thinking is on
    std::vector<ChatToolCall> tool_calls;  // assistant turns
    std::string name;               // optional ` name="..."` attribute (system, user, assistant)
    // role "tool": the call it answers, and the name the client gave the result (used when the
    // results after a turn cannot all be matched to its calls by id).
    std::string tool_call_id;
    std::string tool_name;
    // system (or developer) turns: the message's own tools, as a JSON array text; non-empty
    // replaces the message by their declaration where it stands (its content is not rendered).
    std::string tools_json;
    std::vector<ChatImage> images;  // user turns only (another role with images is refused); offsets ascending
};

enum class ToolChoice { Auto, None, Required };

// What the response must be, told to the model in a system message after the tool choice.
struct ChatResponseFormat {
    std::string type;         // "" (free text), "json_object" or "json_schema"
    std::string schema_json;  // json_schema: the schema, as JSON text
};

struct ChatOptions {
    bool thinking = false;
    std::string thinking_effort = "max";  // low | high | max (the encoder renders no other)
    bool add_generation_prompt = true;
    // The last message is an assistant answer to be continued (a stopped or truncated one): it is
    // rendered open, its response channel not closed, and no generation prompt follows, so the
    // model's next tokens extend its text. Refused unless that message is an assistant turn
    // without tool calls.
    bool continue_final = false;
    // The request's tools as one JSON array text; empty: no tools. Rendered with keys sorted,
    // compact, null-valued function fields dropped.
    std::string tools_json;
    // Rendered after all messages: None and Required say so; Auto (and a named function, which
    // only constrained decoding enforces) render nothing.
    ToolChoice tool_choice = ToolChoice::Auto;
    ChatResponseFormat response_format;
};

// The generation prompt's last element, <|open|>think<|sep|> or <|open|>response<|sep|>: the
// tokens the hosted API leaves out of usage.prompt_tokens (docs/api.md).
inline constexpr int kGenerationOpenerTokens = 3;

// Throws k3::Error(ErrorKind::Usage) for an unknown role or effort, tool-call arguments that
// are JSON but not an object, tools on a message other than system, or images outside user
// turns. Each image becomes its framing with one <|media_pad|>, in order
// (expand_image_pads in k3/image_prompt.h gives it its rows).
std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 const ChatOptions& options);

// What the output parser should do with a `tools` channel.
struct ToolParsing {
    bool enabled = false;                 // false: tool elements are dropped, as any unknown tag
    std::vector<std::string> declared;    // tool names a call may use
};

// One piece of a tool call as the model writes it. A call starts with its name, then its
// arguments arrive in pieces that concatenate to a compact JSON object.
struct ToolCallDelta {
    int index = 0;          // 0-based within the turn
    std::string name;       // set on the call's first delta only
    std::string arguments;  // the next piece of the arguments text
};

// Incremental parser of the assistant's output after the generation prompt. The streamed and
// the whole response are both built from its deltas.
class ChatOutputParser {
public:
    ChatOutputParser(const Tokenizer& tok, bool thinking, ToolParsing tools = {});
    struct Delta {
        std::string reasoning;  // new reasoning text (UTF-8 complete)
        std::string content;    // new response text (UTF-8 complete)
        std::vector<ToolCallDelta> tool_calls;
        bool end_of_turn = false;
        // Set once, when the tools channel turned out malformed (a bad argument body, an
        // undeclared tool, an unknown element, a call never closed): from then on the raw text
        // of the channel comes out as content. Says what was wrong.
        std::string malformed;
    };
    Delta push(int32_t id);
    // End of generation (also when it was cut short): what is still held, and a call left open
    // is reported as malformed.
    Delta flush();
    // Complete tool calls so far (whole response).
    int tool_calls() const;

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace k3
