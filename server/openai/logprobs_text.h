// A whole answer's logprobs, one choice's, written as JSON text token by token as they arrive
// (openai/choices_responder.h), in the layouts of openai/response.h and with the bytes dump()
// writes for them: each token's entry is made as a json value, dumped, and dropped, since a tree
// of json values for every token of an n=16 answer costs ~10x its text (docs/operations.md).
// nlohmann's compact dump of a value is the same alone as inside its array, so the text is
// byte for byte what dump() of the whole tree gave.
#pragma once
#include <string>

#include "openai/body_text.h"
#include "worker/job_event.h"

namespace k3::server {

// The chat layout: {"content":[{bytes, logprob, token, top_logprobs}, ...],"refusal":null}.
class ChatLogprobsText {
public:
    void add(const TokenLogprob& lp);
    // The object's size in bytes, and the object appended to `out` (then freed).
    size_t size() const;
    void move_into(std::string& out);

private:
    BodyText content_;
    bool any_ = false;
};

// The completions layout: {"text_offset":[...],"token_logprobs":[...],"tokens":[...],
// "top_logprobs":[{...}, ...]}, the offsets counted from `text_offset` (the echoed prompt).
class CompletionLogprobsText {
public:
    explicit CompletionLogprobsText(size_t text_offset = 0) : offset_(text_offset) {}
    void add(const TokenLogprob& lp);
    size_t size() const;
    void move_into(std::string& out);

private:
    BodyText offsets_, logprobs_, tokens_, top_;
    size_t offset_;
    bool any_ = false;
};

}  // namespace k3::server
