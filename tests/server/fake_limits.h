// The byte-level FakeTokenizer (fake_engine.h) and the model limits that go with it, for tests
// that call the request parsers directly (OpenAI and Anthropic), without a daemon.
#pragma once
#include "fake_engine.h"
#include "openai/request.h"

namespace k3::test {

inline const FakeTokenizer& fake_tokenizer() {
    static FakeTokenizer tok;
    return tok;
}

inline server::ModelLimits fake_limits() {
    server::ModelLimits l;
    l.model_name = "fake";
    l.n_ctx = 4096;
    l.max_prompt_tokens = 4095;
    l.n_vocab = fake_tokenizer().n_vocab();
    return l;
}

}  // namespace k3::test
