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
#include <vector>

#include "k3/tokenizer.h"

namespace k3 {

// One call in an assistant turn of the history.
struct ChatToolCall {
    std::string name;
    std::string arguments;  // a JSON object, as text
};

// An image in a user message: the renderer writes its framing (k3/xtml.h) at byte `offset` of the
// content, between the text before and after it (parts in order, no separator: docs/model.md
// "Images in the prompt").
struct ChatImage {
    size_t offset = 0;
    int width = 0, height = 0;  // stored size, as the framing writes it
};

struct ChatMessage {
    std::string role;               // "system", "user", "assistant" or "tool"
    std::string content;
    std::string reasoning_content;  // assistant turns only, used when thinking is on
    std::vector<ChatToolCall> tool_calls;  // assistant turns
    std::string name;               // optional ` name="..."` attribute (system, user, assistant)
    std::string tool_name;          // role "tool": the called tool's name ...
    int tool_index = 0;             // ... and the call's 1-based index in its assistant turn
    std::vector<ChatImage> images;  // user turns only (another role with images is refused); offsets ascending
};

enum class ToolChoice { Auto, None, Required };

struct ChatOptions {
    bool thinking = false;
    std::string thinking_effort = "max";  // low | medium | high | max
    bool add_generation_prompt = true;
    // The last message is an assistant answer to be continued (a stopped or truncated one): it is
    // rendered open, its response channel not closed, and no generation prompt follows, so the
    // model's next tokens extend its text. Refused unless that message is an assistant turn
    // without tool calls.
    bool continue_final = false;
    // The request's tools as one JSON array text (compact, keys sorted); empty: no tools.
    std::string tools_json;
    ToolChoice tool_choice = ToolChoice::Auto;  // rendered after the last user turn unless Auto
};

// Throws k3::Error(ErrorKind::Usage) for an unknown role or effort, a bad tool call, or images
// outside user turns. Each image becomes its framing with one <|media_pad|>, in order
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
