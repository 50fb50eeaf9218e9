#include "openai/logprobs_text.h"

#include "openai/response.h"

namespace k3::server {

namespace {

constexpr std::string_view kChatOpen = "{\"content\":[", kChatClose = "],\"refusal\":null}";
constexpr std::string_view kOffsets = "{\"text_offset\":[", kLogprobs = "],\"token_logprobs\":[", kTokens = "],\"tokens\":[",
                           kTop = "],\"top_logprobs\":[", kCompletionClose = "]}";

}  // namespace

void ChatLogprobsText::add(const TokenLogprob& lp) {
    if (any_) content_.append(',');
    any_ = true;
    content_.append(dump(chat_logprob_entry(lp)));
}

size_t ChatLogprobsText::size() const { return kChatOpen.size() + content_.size() + kChatClose.size(); }

void ChatLogprobsText::move_into(std::string& out) {
    out += kChatOpen;
    content_.move_into(out);
    out += kChatClose;
    any_ = false;
}

void CompletionLogprobsText::add(const TokenLogprob& lp) {
    if (any_) {
        offsets_.append(',');
        logprobs_.append(',');
        tokens_.append(',');
        top_.append(',');
    }
    any_ = true;
    offsets_.append(std::to_string(offset_));
    offset_ += lp.text.size();
    logprobs_.append(dump(json(lp.logprob)));
    tokens_.append(dump(json(lp.text)));
    top_.append(dump(completion_top_logprobs(lp)));
}

size_t CompletionLogprobsText::size() const {
    return kOffsets.size() + offsets_.size() + kLogprobs.size() + logprobs_.size() + kTokens.size() + tokens_.size() +
           kTop.size() + top_.size() + kCompletionClose.size();
}

void CompletionLogprobsText::move_into(std::string& out) {
    out += kOffsets;
    offsets_.move_into(out);
    out += kLogprobs;
    logprobs_.move_into(out);
    out += kTokens;
    tokens_.move_into(out);
    out += kTop;
    top_.move_into(out);
    out += kCompletionClose;
    any_ = false;
}

}  // namespace k3::server
