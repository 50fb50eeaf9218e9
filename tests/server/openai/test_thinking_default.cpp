// Thinking when a request says nothing of it, with the real Kimi tokenizer, token by token: the
// request parsers of every API that renders a chat (chat completions, Responses, Messages) give
// the prompt of ../shared/spec/xtml-tools.md, "Request fields to encoder inputs" (on, effort max)
// and "Order of a prompt" (the effort message first, the think opener last), and each API's off
// switch gives the prompt without either. The expected ids are written here segment by segment
// from the spec (tests/chat/chat_expect.h), not taken from the renderer or k3/xtml.h. Skips,
// naming the missing file, without ../shared/data/kimi-tokenizer/.
#include <doctest/doctest.h>

#include "anthropic/messages.h"
#include "common/real_tokenizer.h"
#include "common/skip.h"
#include "openai/request.h"
#include "responses/responses.h"
#include "tests/chat/chat_expect.h"
#include "wire/fields.h"

using namespace k3;
using namespace k3::server;
using namespace k3::test;

namespace {

using Ids = std::vector<int32_t>;

ModelLimits real_limits(const Tokenizer& tok) {
    ModelLimits l;
    l.model_name = "k3";
    l.n_ctx = 4096;
    l.max_prompt_tokens = 4095;
    l.n_vocab = tok.n_vocab();
    return l;
}

// The prompt a request renders, and the count usage reports for it.
template <typename Parse>
std::pair<Ids, int> rendered(Parse parse, const json& body) {
    IgnoredFields ignored;
    IgnoredFieldsScope scope(ignored);
    GenerationRequest r = parse(body);
    return {r.prompt, r.reported_prompt_tokens()};
}

}  // namespace

TEST_CASE("thinking default, real tokenizer: saying nothing renders effort max and the think opener on every API; each off switch the response opener") {
    const Tokenizer* tok = real_tokenizer();
    if (!tok) K3_SKIP(real_tokenizer_missing());
    const ModelLimits limits = real_limits(*tok);
    auto chat = [&](const json& b) { return parse_chat_request(b, *tok, limits); };
    auto responses = [&](const json& b) { return parse_responses_request(b, *tok, limits); };
    auto messages = [&](const json& b) { return parse_messages_request(b, *tok, limits); };

    ChatExpect on{*tok};
    on.system("thinking-effort",
              "`thinking_effort` guides on how much to think in your thinking channel (not including the response "
              "channel), supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked "
              "with `thinking_effort=max`.");
    on.M("user").T("Hi").end_message();
    on.M("assistant").O("think");
    ChatExpect off{*tok};
    off.M("user").T("Hi").end_message();
    off.M("assistant").O("response");
    // usage leaves out the 3-token generation opener
    const std::pair<Ids, int> thinks = {on.ids, int(on.ids.size()) - 3}, answers = {off.ids, int(off.ids.size()) - 3};

    const json hi = json::array({{{"role", "user"}, {"content", "Hi"}}});
    const json chat_body = {{"messages", hi}, {"max_tokens", 8}};
    CHECK(rendered(chat, chat_body) == thinks);
    for (const json& switch_off : {json{{"thinking", false}}, json{{"thinking", {{"type", "disabled"}}}},
                                   json{{"chat_template_kwargs", {{"thinking", false}}}},
                                   json{{"chat_template_kwargs", {{"enable_thinking", false}}}},
                                   json{{"reasoning_effort", "none"}}}) {
        CAPTURE(switch_off.dump());
        json b = chat_body;
        b.update(switch_off);
        CHECK(rendered(chat, b) == answers);
    }

    const json responses_body = {{"input", "Hi"}, {"max_output_tokens", 16}};
    CHECK(rendered(responses, responses_body) == thinks);
    json responses_off = responses_body;
    responses_off["reasoning"] = {{"effort", "none"}};
    CHECK(rendered(responses, responses_off) == answers);

    const json messages_body = {{"model", "k3"}, {"max_tokens", 8}, {"messages", hi}};
    CHECK(rendered(messages, messages_body) == thinks);
    json messages_off = messages_body;
    messages_off["thinking"] = {{"type", "disabled"}};
    CHECK(rendered(messages, messages_off) == answers);
    // The openers differ in their name only: <|open|>think<|sep|> against <|open|>response<|sep|>.
    CHECK(Ids(on.ids.end() - 3, on.ids.end()) != Ids(off.ids.end() - 3, off.ids.end()));
}
