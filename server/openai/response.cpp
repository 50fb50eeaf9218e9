#include "openai/response.h"

#include <ctime>

#include "http/sse.h"

namespace k3::server {

std::unique_ptr<Responder> make_openai_responder(const GenerationRequest& request, const std::string& model_fingerprint) {
    bool chat = request.endpoint == Endpoint::ChatCompletions;
    ResponseIds ids{random_id(chat ? "chatcmpl-" : "cmpl-"), (long long)std::time(nullptr), request.model,
                    "k3serve-" K3_VERSION "-" + model_fingerprint.substr(0, 12)};
    if (chat) return make_chat_responder(request, std::move(ids));
    return make_completion_responder(request, std::move(ids));
}

const char* finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::ToolCalls: return "tool_calls";
    }
    return "stop";
}

json envelope(const ResponseIds& ids, const char* object) {
    json j = {{"id", ids.id},
              {"object", object},
              {"created", ids.created},
              {"model", ids.model},
              {"system_fingerprint", ids.fingerprint}};
    return j;
}

std::string stream_end(const ResponseIds& ids, const char* chunk_object, bool include_usage, const Usage& usage) {
    std::string out;
    if (include_usage) {
        json u = envelope(ids, chunk_object);
        u["choices"] = json::array();
        u["usage"] = usage_json(usage);
        out += sse::data(dump(u));
    }
    return out + sse::done();
}

json usage_json(const Usage& u) {
    return json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
                {"completion_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}}};
}

json completion_top_logprobs(const TokenLogprob& lp) {
    json alts = json::object();
    for (const auto& [text, logprob] : lp.top) alts[text] = logprob;
    return alts;
}

json completion_logprobs_json(const std::vector<TokenLogprob>& lps, size_t text_offset) {
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
    for (const auto& lp : lps) {
        tokens.push_back(lp.text);
        token_logprobs.push_back(lp.logprob);
        top.push_back(completion_top_logprobs(lp));
        offsets.push_back(text_offset);
        text_offset += lp.text.size();
    }
    return json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json chat_logprob_entry(const TokenLogprob& lp) {
    auto bytes = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(int(c));
        return b;
    };
    json top = json::array();
    for (const auto& [text, logprob] : lp.top) top.push_back({{"token", text}, {"logprob", logprob}, {"bytes", bytes(text)}});
    return {{"token", lp.text}, {"logprob", lp.logprob}, {"bytes", bytes(lp.text)}, {"top_logprobs", top}};
}

json chat_logprobs_json(const std::vector<TokenLogprob>& lps) {
    json content = json::array();
    for (const auto& lp : lps) content.push_back(chat_logprob_entry(lp));
    return json{{"content", content}, {"refusal", nullptr}};
}

}  // namespace k3::server
