// What one generated token becomes for the client: its text, through the chat output parser
// (reasoning, content, tool calls) or the plain UTF-8 stream decoder, and its log-probabilities
// when the request asks for them.
#pragma once
#include <cstdint>
#include <optional>
#include <span>

#include "k3/chat.h"
#include "k3/tokenizer.h"
#include "worker/job.h"

namespace k3::server {

// Natural-log probabilities of the model's distribution (temperature 1, before any sampling
// filter): the chosen token and the `n_top` most likely ones.
TokenLogprob token_logprob(std::span<const float> logits, int32_t id, int n_top, const Tokenizer& tok);

// Text produced by one token: through the chat parser (reasoning + content) or the plain
// UTF-8 stream decoder (completions).
class OutputDecoder {
public:
    OutputDecoder(const Tokenizer& tok, const GenerationParams& p);
    // The text (reasoning, content, tool calls) the token `id` completes; often none yet.
    ChatOutputParser::Delta push(int32_t id);
    // What is held back at the end (an unfinished UTF-8 sequence or tag).
    ChatOutputParser::Delta flush();
    int tool_calls() const { return chat_ ? chat_->tool_calls() : 0; }

private:
    const Tokenizer& tok_;
    bool skip_special_;
    std::optional<ChatOutputParser> chat_;
    std::optional<StreamDecoder> plain_;
};

}  // namespace k3::server
