// The Kimi K3 chat layout (spec 6.5): messages -> the exact token sequence the model was
// trained on, and the model's output tokens -> reasoning and response text. User and assistant
// text never produce special tokens, even when they spell them.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "k3/tokenizer.h"

namespace k3 {

struct ChatMessage {
    std::string role;               // "system", "user" or "assistant"
    std::string content;
    std::string reasoning_content;  // assistant turns only, used when thinking is on
};

struct ChatOptions {
    bool thinking = false;
    std::string thinking_effort = "max";  // low | high | max ("medium" is refused, as upstream)
    bool add_generation_prompt = true;
};

// Throws k3::Error(ErrorKind::Usage) for an unknown role or effort.
std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 const ChatOptions& options);

// Incremental parser of the assistant's output after the generation prompt.
class ChatOutputParser {
public:
    ChatOutputParser(const Tokenizer& tok, bool thinking);
    struct Delta {
        std::string reasoning;  // new reasoning text (UTF-8 complete)
        std::string content;    // new response text (UTF-8 complete)
        bool end_of_turn = false;
    };
    Delta push(int32_t id);
    Delta flush();

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace k3
