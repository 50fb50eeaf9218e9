#include "routes/token_routes.h"

#include <algorithm>

#include "anthropic/messages.h"
#include "k3/xtml.h"
#include "openai/request.h"
#include "wire/fields.h"
#include "routes/route_reply.h"

namespace k3::server {

// POST /v1/messages/count_tokens: {"input_tokens": N}.
void TokenRoutes::count_tokens(const HttpRequest& req, HttpResponse& res) {
    json body = parse_json_body(req.body, json_limits(state_)).value;
    IgnoredFields ignored;
    IgnoredFieldsScope scope(ignored);
    send_json(res, 200, {{"input_tokens", count_message_tokens(body, *state_.tokenizer, state_.limits)}});
}

namespace {

// /tokenize of a chat ({"messages": [...]}, as /v1/chat/completions takes them): the prompt the
// model would evaluate, each image's rows shown as that many <|media_pad|> ids (row ids are no
// tokens) and listed under "images" (docs/api.md "Images").
json tokenize_chat(const json& body, const Tokenizer& tok, const ModelLimits& limits, bool pieces) {
    json chat = body;
    chat.erase("with_pieces");
    GenerationRequest g = parse_chat_request(chat, tok, limits);
    const int32_t pad = tok.special_id(xtml::kMediaPad).value_or(-1);
    json tokens = json::array(), images = json::array();
    for (int32_t id : g.prompt) {
        const int32_t shown = is_image_row_id(id, limits.n_vocab) ? pad : id;
        if (pieces) tokens.push_back({{"id", shown}, {"piece", std::string(tok.token_bytes(shown))}});
        else tokens.push_back(shown);
    }
    for (const PromptImage& im : g.images) images.push_back({{"position", im.position}, {"rows", im.rows}});
    // count is usage.prompt_tokens' count: without the generation opener (the last 3 tokens).
    return {{"tokens", tokens}, {"count", g.reported_prompt_tokens()}, {"images", images}};
}

}  // namespace

void TokenRoutes::tokenize(const HttpRequest& req, HttpResponse& res) {
    json body = parse_json_body(req.body, json_limits(state_)).value;
    if (!body.is_object()) throw bad_request("", "the request body must be a JSON object", "invalid_type");
    if (body.contains("messages")) {
        IgnoredFields ignored;
        IgnoredFieldsScope scope(ignored);
        send_json(res, 200, tokenize_chat(body, *state_.tokenizer, state_.limits, body.value("with_pieces", false)));
        return;
    }
    const json* text = body.contains("content") ? &body["content"] : body.contains("prompt") ? &body["prompt"] : nullptr;
    if (!text || !text->is_string()) throw bad_request("content", "'content' must be a string", "invalid_type");
    // Bounded like a prompt: an answer with pieces is ~20x its text, so 4 MiB of text was
    // ~90 MB of JSON and 3.5 GB at peak. More than a context's worth is never useful.
    size_t max_bytes = size_t(std::max(state_.limits.n_ctx, 1)) * 16;
    if (text->get_ref<const std::string&>().size() > max_bytes)
        throw bad_request("content", "'content' is longer than " + std::to_string(max_bytes) +
                                         " bytes (16 per token of the context)");
    bool allow_special = body.value("add_special", false) || body.value("parse_special", false);
    auto ids = state_.tokenizer->encode(text->get<std::string>(), allow_special);
    if (ids.size() > size_t(state_.limits.n_ctx))
        throw bad_request("content", "'content' is " + std::to_string(ids.size()) + " tokens, more than the context (" +
                                         std::to_string(state_.limits.n_ctx) + ")",
                          "context_length_exceeded");
    json tokens = json::array();
    bool pieces = body.value("with_pieces", false);
    for (int32_t id : ids) {
        if (pieces)
            tokens.push_back({{"id", id}, {"piece", std::string(state_.tokenizer->token_bytes(id))}});
        else
            tokens.push_back(id);
    }
    send_json(res, 200, {{"tokens", tokens}, {"count", ids.size()}});
}

void TokenRoutes::detokenize(const HttpRequest& req, HttpResponse& res) {
    json body = parse_json_body(req.body, json_limits(state_)).value;
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
        throw bad_request("tokens", "'tokens' must be an array of token ids", "invalid_type");
    std::vector<int32_t> ids;
    for (const auto& t : body["tokens"]) {
        if (!t.is_number_integer() || t.get<long long>() < 0 || t.get<long long>() >= state_.info.n_vocab)
            throw bad_request("tokens", "token ids must be integers in [0, " + std::to_string(state_.info.n_vocab) + ")");
        ids.push_back(int32_t(t.get<long long>()));
    }
    send_json(res, 200, {{"content", state_.tokenizer->decode(ids)}});
}

}  // namespace k3::server
