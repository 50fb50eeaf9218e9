#include "openai/request.h"

#include <cmath>
#include <random>
#include <set>

#include <spdlog/spdlog.h>

#include "k3/error.h"
#include "k3/grammar_shortest.h"
#include "wire/fields.h"
#include "openai/tools.h"
#include "wire/response_format.h"

namespace k3::server {

namespace {

// Any name is served by the loaded model and echoed back as sent, unless --strict-model-name.
std::string check_model(const json& body, const ModelLimits& limits) {
    auto model = get_string(body, "model");
    if (model && *model != limits.model_name && limits.strict_model_name)
        throw ApiError(404, "not_found_error", "model_not_found", "model",
                       "The model '" + *model + "' does not exist; this server serves '" + limits.model_name + "'");
    return model && !model->empty() ? *model : limits.model_name;
}

// The top-level fields each endpoint knows; the rest are ignored and counted (check_keys).
// OpenAI's fields that change nothing here (store, metadata, service_tier, ...) are known.
const std::set<std::string>& known_common_fields() {
    static const std::set<std::string> keys = {
        "model", "n", "best_of", "presence_penalty", "frequency_penalty", "logit_bias", "response_format",
        "json_schema", "user", "temperature", "top_p", "top_k", "min_p", "seed", "ignore_eos", "stop",
        "stop_token_ids", "stream", "stream_options", "max_tokens", "logprobs", "store", "metadata",
        "service_tier", "prompt_cache_key", "safety_identifier"};
    return keys;
}
void check_top_level(const json& body, std::initializer_list<const char*> endpoint_keys) {
    std::set<std::string> keys = known_common_fields();
    keys.insert(endpoint_keys.begin(), endpoint_keys.end());
    check_keys(body, keys, "");
}

// Fields common to both endpoints: sampling, stop, seed, stream, n, and what we refuse.
void parse_common(const json& body, const nlohmann::ordered_json* schemas, const ModelLimits& limits, GenerationRequest& r) {
    if (!body.is_object()) throw bad_request("", "the request body must be a JSON object", "invalid_type");
    r.model = check_model(body, limits);
    r.params.n = int(get_int(body, "n", 1, 16).value_or(1));
    if (auto b = get_int(body, "best_of", 1, 128); b && *b != 1)
        throw bad_request("best_of", "'best_of' > 1 is not supported", "unsupported_parameter");
    LogitAdjustments& adjust = r.params.adjustments;
    adjust.presence_penalty = float(get_number(body, "presence_penalty", -2, 2).value_or(0));
    adjust.frequency_penalty = float(get_number(body, "frequency_penalty", -2, 2).value_or(0));
    if (const json* lb = field(body, "logit_bias")) {
        if (!lb->is_object())
            throw bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias", "invalid_type");
        for (auto it = lb->begin(); it != lb->end(); ++it) {
            long long id = -1;
            try {
                size_t used = 0;
                id = std::stoll(it.key(), &used);
                if (used != it.key().size()) id = -1;
            } catch (const std::exception&) {
            }
            if (id < 0 || id >= limits.n_vocab)
                throw bad_request("logit_bias", "'logit_bias' key '" + it.key() + "' is not a token id in [0, " +
                                                    std::to_string(limits.n_vocab) + ")");
            if (!it->is_number() || !(it->get<double>() >= -100 && it->get<double>() <= 100))
                throw bad_request("logit_bias", "'logit_bias' values must be numbers in [-100, 100], got " + it->dump());
            adjust.bias.emplace_back(int32_t(id), float(it->get<double>()));
        }
    }
    r.params.grammar = parse_response_format(body, schemas, limits.grammar);
    if (auto u = field(body, "user"); u && !u->is_string())
        throw bad_request("user", "'user' must be a string", "invalid_type");

    SamplingParams& s = r.params.sampling;
    s.temperature = float(get_number(body, "temperature", 0, 2).value_or(1.0));
    s.top_p = float(get_number(body, "top_p", 0, 1).value_or(1.0));
    if (s.top_p <= 0) throw bad_request("top_p", "'top_p' must be in (0, 1]");
    s.top_k = int(get_int(body, "top_k", 0, 1 << 30).value_or(0));
    s.min_p = float(get_number(body, "min_p", 0, 1).value_or(0.0));
    if (const json* seed = field(body, "seed")) {
        if (!seed->is_number_integer()) throw bad_request("seed", "'seed' must be an integer", "invalid_type");
        s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
    } else {
        s.seed = std::random_device{}() * 0x9e3779b97f4a7c15ull + std::random_device{}();
    }
    // validate() starts its message with the field's name; the OpenAI name is the same.
    if (std::string why = validate(s); !why.empty()) throw bad_request(why.substr(0, why.find(' ')), why);
    r.params.ignore_eos = get_bool(body, "ignore_eos").value_or(false);

    // Stop strings, and stop tokens: integers in `stop` or vLLM's `stop_token_ids`.
    auto stop_token = [&](const json& x, const char* param) {
        long long id = x.get<long long>();
        if (id < 0 || id >= limits.n_vocab)
            throw bad_request(param, "stop token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                         std::to_string(limits.n_vocab) + ")");
        r.params.stop_token_ids.push_back(int32_t(id));
    };
    if (const json* stop = field(body, "stop")) {
        if (stop->is_string()) {
            r.params.stop.push_back(stop->get<std::string>());
        } else if (stop->is_array()) {
            if (stop->size() > 4) throw bad_request("stop", "'stop' takes at most 4 entries");
            for (const auto& x : *stop) {
                if (x.is_number_integer()) {
                    stop_token(x, "stop");
                    continue;
                }
                if (!x.is_string())
                    throw bad_request("stop", "'stop' entries must be strings or token ids", "invalid_type");
                r.params.stop.push_back(x.get<std::string>());
            }
        } else {
            throw bad_request("stop", "'stop' must be a string or an array of strings", "invalid_type");
        }
        for (const auto& x : r.params.stop)
            if (x.empty()) throw bad_request("stop", "'stop' strings must not be empty");
    }
    if (const json* ids = field(body, "stop_token_ids")) {
        if (!ids->is_array()) throw bad_request("stop_token_ids", "'stop_token_ids' must be an array of token ids", "invalid_type");
        for (const auto& x : *ids) {
            if (!x.is_number_integer()) throw bad_request("stop_token_ids", "'stop_token_ids' entries must be integers", "invalid_type");
            stop_token(x, "stop_token_ids");
        }
    }
    r.stream = get_bool(body, "stream").value_or(false);
    if (const json* so = field(body, "stream_options")) {
        if (!so->is_object()) throw bad_request("stream_options", "'stream_options' must be an object", "invalid_type");
        if (!r.stream) throw bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
        check_keys(*so, {"include_usage", "include_obfuscation", "continuous_usage_stats"}, "stream_options");
        r.include_usage = get_bool(*so, "include_usage").value_or(false);
    }
}

// prompt + max_tokens must fit the context; the prompt alone must fit the prompt limit.
void check_lengths(GenerationRequest& r, const ModelLimits& limits, std::optional<long long> max_tokens,
                   int default_max_tokens, const char* max_param, const char* prompt_param) {
    long long prompt_len = (long long)r.prompt.size();
    if (prompt_len == 0) throw bad_request(prompt_param, "the prompt is empty");
    if (prompt_len > limits.max_prompt_tokens)
        throw bad_request(prompt_param,
                          "This model's maximum prompt length is " + std::to_string(limits.max_prompt_tokens) +
                              " tokens. However, your prompt has " + std::to_string(prompt_len) + " tokens.",
                          "context_length_exceeded");
    // In long long: max_tokens may be anything up to kHugeCount, and must not wrap.
    long long max_new = max_tokens ? *max_tokens : std::min<long long>(default_max_tokens, limits.n_ctx - prompt_len);
    // More than the context leaves becomes what it leaves: a finish of "length" then means the
    // context really ran out, and the client is told in a header (http.cpp).
    if (prompt_len + max_new > limits.n_ctx) {
        r.clamp = {max_param, max_new, int(limits.n_ctx - prompt_len)};
        max_new = limits.n_ctx - prompt_len;
    }
    r.params.max_tokens = int(max_new);  // <= n_ctx here
}

std::vector<int32_t> token_array(const json& a, const ModelLimits& limits) {
    std::vector<int32_t> out;
    for (const auto& x : a) {
        if (!x.is_number_integer()) throw bad_request("prompt", "token ids must be integers", "invalid_type");
        long long id = x.get<long long>();
        if (id < 0 || id >= limits.n_vocab)
            throw bad_request("prompt", "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                            std::to_string(limits.n_vocab) + ")");
        out.push_back(int32_t(id));
    }
    return out;
}

// An image_url part (user messages only): {"image_url": {"url": "data:...", "detail": ...}} or
// {"image_url": "data:..."}. `detail` changes nothing: an image is always read at the release's
// resolution rule (docs/api.md "Images").
void image_part(const json& part, const std::string& at, const std::string& role, const ModelLimits& limits,
                size_t offset, ChatMessage& cm, std::vector<std::shared_ptr<const PreparedImage>>& images) {
    if (role != "user")
        throw bad_request(at, "images are only accepted in user messages (this is a " + role + " message)",
                          "unsupported_content");
    check_keys(part, {"type", "image_url"}, at);
    const json* iu = field(part, "image_url");
    std::string url;
    if (iu && iu->is_string()) {
        url = iu->get<std::string>();
    } else if (iu && iu->is_object()) {
        check_keys(*iu, {"url", "detail"}, at + ".image_url");
        url = string_field(*iu, "url", at + ".image_url.url");
    } else {
        throw bad_request(at + ".image_url", "'" + at + ".image_url' must be an object with a 'url'", "invalid_type");
    }
    check_image_allowed(limits.images, images.size(), at);
    images.push_back(image_from_url(url, at + ".image_url.url", limits.images));
    cm.images.push_back({offset, images.back()->geometry.width, images.back()->geometry.height});
}

// A message's text, with its images (cm.images, and `images` in request order) where they sit.
std::string message_content(const json& m, size_t index, const ModelLimits& limits, ChatMessage& cm,
                            std::vector<std::shared_ptr<const PreparedImage>>& images) {
    std::string where = "messages[" + std::to_string(index) + "].content";
    const json* c = field(m, "content");
    if (!c) return {};
    if (c->is_string()) return c->get<std::string>();
    if (!c->is_array()) throw bad_request(where, "'" + where + "' must be a string or an array of content parts", "invalid_type");
    std::string text;
    for (size_t j = 0; j < c->size(); ++j) {
        const json& part = (*c)[j];
        std::string at = where + "[" + std::to_string(j) + "]";
        if (!part.is_object()) throw bad_request(at, "'" + at + "' must be an object", "invalid_type");
        // An assistant's refusal part is what it said (the Agents SDK sends its history back so).
        std::string type = string_field(part, "type", at + ".type");
        if (type == "image_url") {
            image_part(part, at, cm.role, limits, text.size(), cm, images);
            continue;
        }
        const char* key = type == "refusal" ? "refusal" : "text";
        if ((type != "text" && type != "refusal") || !part.contains(key) || !part[key].is_string())
            throw bad_request(at, "only text and image_url content parts are supported", "unsupported_content");
        check_keys(part, {"type", key}, at);
        // Each part is its own text segment (docs/model.md "Chat layout").
        if (!text.empty() || !cm.images.empty()) cm.part_starts.push_back(text.size());
        text += part[key].get<std::string>();
    }
    return text;
}

// An effort as the APIs spell it -> K3's (docs/api.md "Thinking"): the encoder renders low,
// high and max only; OpenAI's medium thinks at high, minimal at low, xhigh at max.
std::string k3_effort(const std::string& effort, const std::string& param) {
    if (effort == "low" || effort == "high" || effort == "max") return effort;
    if (effort == "medium") return "high";
    if (effort == "minimal") return "low";
    if (effort == "xhigh") return "max";
    throw bad_request(param, "'" + param + "' must be minimal, low, medium, high, xhigh or max, got \"" + effort + "\"");
}

// Thinking on or off and its effort, from the request fields in the order docs/api.md
// ("Thinking") gives: on/off from chat_template_kwargs.thinking (or enable_thinking), else
// thinking (a boolean, or an object: its type, absent meaning enabled), else reasoning_effort
// (none: off, any other: on), else on, as the official encoder renders a chat that says nothing
// (xtml-tools.md, "Request fields to encoder inputs"); the effort from
// chat_template_kwargs.thinking_effort, else thinking.effort, else reasoning_effort, else max.
ChatOptions parse_thinking(const json& body) {
    ChatOptions o;
    std::optional<bool> on;
    std::optional<std::string> effort;
    std::string effort_param;
    if (const json* kw = field(body, "chat_template_kwargs")) {
        if (!kw->is_object()) throw bad_request("chat_template_kwargs", "must be an object", "invalid_type");
        check_keys(*kw, {"thinking", "enable_thinking", "thinking_effort"}, "chat_template_kwargs");
        for (const char* k : {"enable_thinking", "thinking"})
            if (auto b = get_bool(*kw, k)) on = *b;
        if (auto e = get_string(*kw, "thinking_effort")) effort = *e, effort_param = "chat_template_kwargs.thinking_effort";
    }
    if (const json* t = field(body, "thinking")) {
        if (t->is_boolean()) {
            if (!on) on = t->get<bool>();
        } else if (t->is_object()) {
            for (auto it = t->begin(); it != t->end(); ++it)
                if (it.key() != "type" && it.key() != "effort" && it.key() != "keep" && it.key() != "budget_tokens")
                    throw bad_request("thinking." + it.key(), "unknown field 'thinking." + it.key() +
                                                                  "' (thinking takes type, effort, keep and budget_tokens)");
            std::string type = string_field(*t, "type", "thinking.type");
            if (!type.empty() && type != "enabled" && type != "disabled")
                throw bad_request("thinking.type", "'thinking.type' must be \"enabled\" or \"disabled\"");
            if (!on) on = type != "disabled";
            // K3 keeps all past reasoning in the prompt: "all" is the only keep there is.
            if (std::string keep = string_field(*t, "keep", "thinking.keep"); !keep.empty() && keep != "all")
                throw bad_request("thinking.keep", "'thinking.keep' must be \"all\" (K3 keeps its past reasoning), got \"" + keep + "\"");
            if (!effort)
                if (auto e = get_string(*t, "effort")) effort = *e, effort_param = "thinking.effort";
        } else {
            throw bad_request("thinking", "'thinking' must be a boolean or {\"type\":\"enabled\"}", "invalid_type");
        }
    }
    if (auto e = get_string(body, "reasoning_effort")) {
        if (*e == "none") {
            if (!on) on = false;
        } else {
            k3_effort(*e, "reasoning_effort");  // validated even when another field wins
            if (!on) on = true;
            if (!effort) effort = *e, effort_param = "reasoning_effort";
        }
    }
    o.thinking = on.value_or(true);
    if (effort) o.thinking_effort = k3_effort(*effort, effort_param);
    return o;
}

// An assistant message's calls: `tool_calls` ([] or null: none) or the legacy `function_call`.
std::vector<ChatToolCall> assistant_calls(const json& m, const std::string& where,
                                          std::vector<std::pair<std::string, std::string>>& ids) {
    std::vector<ChatToolCall> calls;
    auto add = [&](const json& f, const std::string& at, std::string id) {
        if (!f.is_object()) throw bad_request(at, "'" + at + "' must be an object", "invalid_type");
        auto name = get_string(f, "name");
        if (!name) throw bad_request(at + ".name", "'" + at + ".name' is required", "missing_required_parameter");
        auto arguments = get_string(f, "arguments").value_or("");
        calls.push_back({*name, arguments, id});
        ids.emplace_back(std::move(id), *name);
    };
    if (const json* tc = field(m, "tool_calls")) {
        if (!tc->is_array()) throw bad_request(where + ".tool_calls", "'tool_calls' must be an array", "invalid_type");
        for (size_t j = 0; j < tc->size(); ++j) {
            const json& call = (*tc)[j];
            std::string at = where + ".tool_calls[" + std::to_string(j) + "]";
            if (!call.is_object()) throw bad_request(at, "'" + at + "' must be an object", "invalid_type");
            check_keys(call, {"id", "type", "function", "index"}, at);
            if (call.value("type", "function") != "function")
                throw bad_request(at + ".type", "only function tool calls are supported", "unsupported_parameter");
            const json* f = field(call, "function");
            if (!f) throw bad_request(at + ".function", "'" + at + ".function' is required", "missing_required_parameter");
            add(*f, at + ".function", get_string(call, "id").value_or(""));
        }
    }
    if (const json* fc = field(m, "function_call")) add(*fc, where + ".function_call", "");
    return calls;
}

// OpenAI message objects -> chat messages. Assistant messages may carry everything OpenAI's own
// responses carry (refusal, annotations, audio, parsed, function_call, tool_calls), so the
// SDKs' "push the reply and ask again" works; empty ones are ignored.
// `dynamic_tools` collects the tools system messages declare (check_dynamic_tools), in order.
std::vector<ChatMessage> parse_chat_messages(const json& messages, const ModelLimits& limits,
                                            std::vector<std::shared_ptr<const PreparedImage>>& images, json& dynamic_tools) {
    std::vector<ChatMessage> chat;
    CallRegistry calls;
    for (size_t i = 0; i < messages.size(); ++i) {
        const json& m = messages[i];
        std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw bad_request(where, "'" + where + "' must be an object", "invalid_type");
        auto role = get_string(m, "role");
        if (!role) throw bad_request(where + ".role", "'" + where + ".role' is required", "missing_required_parameter");
        ChatMessage cm;
        cm.role = *role == "developer" ? "system" : *role;
        if (cm.role == "assistant")
            check_keys(m, {"role", "content", "name", "reasoning_content", "reasoning", "refusal", "parsed", "annotations",
                           "audio", "function_call", "tool_calls"},
                       where);
        else if (cm.role == "tool")
            check_keys(m, {"role", "content", "tool_call_id", "name"}, where);
        else if (cm.role == "function")
            check_keys(m, {"role", "content", "name"}, where);
        else if (cm.role == "system")
            check_keys(m, {"role", "content", "name", "tools"}, where);
        else if (cm.role == "user")
            check_keys(m, {"role", "content", "name"}, where);
        else
            throw bad_request(where + ".role",
                              "unsupported role '" + *role + "' (system, developer, user, assistant, tool, function)");
        const json* own_tools = field(m, "tools");
        if (own_tools && cm.role != "system")
            throw bad_request(where + ".tools", "'tools' are only accepted on system and developer messages");
        if (!field(m, "content") && cm.role != "assistant" && !own_tools)
            throw bad_request(where + ".content", "'" + where + ".content' is required", "missing_required_parameter");
        cm.content = message_content(m, i, limits, cm, images);
        if (own_tools) {
            // Dynamic tools (docs/api.md "Tool calling"): declared where the message stands.
            json declared = check_dynamic_tools(*own_tools, where + ".tools");
            if (!declared.empty() && !cm.content.empty())
                throw bad_request(where + ".content", "a system message that declares 'tools' must have no content");
            for (const auto& t : declared) dynamic_tools.push_back(t);
            cm.tools_json = declared.dump(-1, ' ', false, json::error_handler_t::replace);
        }
        if (cm.role != "tool") cm.name = get_string(m, "name").value_or("");
        if (cm.role == "assistant") {
            // Reasoning under either name (clients read and send back one or the other).
            if (auto rc = get_string(m, "reasoning_content")) cm.reasoning_content = *rc;
            else if (auto r = get_string(m, "reasoning")) cm.reasoning_content = *r;
            // A refusal is what the assistant said when it had no content.
            if (auto refusal = get_string(m, "refusal"); refusal && cm.content.empty()) cm.content = *refusal;
            if (const json* a = field(m, "annotations"); a && !a->is_array())
                throw bad_request(where + ".annotations", "'annotations' must be an array", "invalid_type");
            std::vector<std::pair<std::string, std::string>> ids;
            cm.tool_calls = assistant_calls(m, where, ids);
            calls.add_turn(ids);
        } else if (cm.role == "tool") {
            auto id = get_string(m, "tool_call_id");
            auto name = get_string(m, "name");
            // The renderer puts a turn's results in call order by id and numbers them
            // (docs/model.md "Chat layout"); the name is used only when the ids do not all match.
            if (id) {
                calls.find(*id, where + ".tool_call_id");  // answers an earlier call, or a 400
                cm.tool_call_id = *id;
                if (name) cm.tool_name = *name;
            } else if (name && !name->empty()) {
                // A result no call asked for (the Responses API's call-less function_call_output).
                cm.tool_name = *name;
            } else {
                throw bad_request(where + ".tool_call_id", "'" + where + ".tool_call_id' is required",
                                  "missing_required_parameter");
            }
        } else if (cm.role == "function") {  // legacy: the result of the latest call to `name`
            auto name = get_string(m, "name");
            if (!name) throw bad_request(where + ".name", "'" + where + ".name' is required", "missing_required_parameter");
            cm.role = "tool";
            cm.name.clear();
            cm.tool_name = calls.find_by_name(*name, where + ".name").first;
        }
        chat.push_back(std::move(cm));
    }
    return chat;
}

}  // namespace

GenerationRequest parse_completion_request(const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                           const nlohmann::ordered_json* schemas) {
    GenerationRequest r;
    r.endpoint = Endpoint::Completions;
    parse_common(body, schemas, limits, r);
    check_top_level(body, {"prompt", "suffix", "echo", "skip_special_tokens", "tools", "functions"});
    for (const char* key : {"tools", "functions"})
        if (const json* tools = field(body, key); tools && !(tools->is_array() && tools->empty()))
            throw bad_request(key, std::string("'") + key + "' (function calling) needs /v1/chat/completions or /v1/responses",
                              "unsupported_parameter");
    if (auto suffix = get_string(body, "suffix"); suffix && !suffix->empty())
        throw bad_request("suffix", "'suffix' (insert mode) is not supported", "unsupported_parameter");
    const json* prompt = field(body, "prompt");
    if (!prompt) throw bad_request("prompt", "'prompt' is required", "missing_required_parameter");
    const json* p = prompt;
    // A list of one prompt is the same as the prompt; more than one is a batch we do not run.
    if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
        if (p->size() != 1)
            throw bad_request("prompt", "only one prompt per request is supported (got " + std::to_string(p->size()) + ")",
                              "unsupported_parameter");
        p = &p->front();
    }
    if (p->is_string()) {
        r.echo_text = p->get<std::string>();
        r.prompt = tok.encode(r.echo_text, /*allow_special=*/false);
    } else if (p->is_array()) {
        r.prompt = token_array(*p, limits);
        r.echo_text = tok.decode(r.prompt);
    } else {
        throw bad_request("prompt", "'prompt' must be a string, an array of token ids, or a list of one of those",
                          "invalid_type");
    }
    r.echo = get_bool(body, "echo").value_or(false);
    r.params.skip_special = get_bool(body, "skip_special_tokens").value_or(true);
    r.params.logprobs = int(get_int(body, "logprobs", 0, 5).value_or(-1));
    if (r.echo && r.params.logprobs >= 0)
        throw bad_request("echo", "'echo' together with 'logprobs' (prompt logprobs) is not supported",
                          "unsupported_parameter");
    auto max_tokens = get_token_count(body, "max_tokens", 0);
    check_lengths(r, limits, max_tokens, 16, "max_tokens", "prompt");
    return r;
}

// A turn's first request: no tool result since the last assistant message (an agent's follow-up
// requests carry the results of the calls its previous answer made; Claude Code may add a user
// text block beside them, so the last message's role alone does not tell).
namespace {
// --hosted-sampling (docs/operations.md): Moonshot's API fixes a chat's sampling, so that
// benchmark figures are comparable; the vendor verifier expects a 400 for anything else.
void apply_hosted_sampling(const json& body, bool thinking, GenerationRequest& r) {
    auto refuse = [](const char* key, const std::string& allowed) {
        throw bad_request(key, std::string("'") + key + "' must be " + allowed + " on this server (--hosted-sampling)",
                          "unsupported_parameter");
    };
    auto near = [](double a, double b) { return std::abs(a - b) < 1e-6; };  // the sampler keeps floats
    SamplingParams& s = r.params.sampling;
    if (!field(body, "temperature")) s.temperature = thinking ? 1.0f : 0.6f;
    else if (!near(s.temperature, 0.6) && !near(s.temperature, 1.0)) refuse("temperature", "0.6 or 1.0");
    if (!field(body, "top_p")) s.top_p = 0.95f;
    else if (!near(s.top_p, 0.95)) refuse("top_p", "0.95");
    if (r.params.adjustments.presence_penalty != 0) refuse("presence_penalty", "0");
    if (r.params.adjustments.frequency_penalty != 0) refuse("frequency_penalty", "0");
    if (r.params.n != 1) refuse("n", "1");
}

bool starts_a_turn(const std::vector<ChatMessage>& chat) {
    for (auto m = chat.rbegin(); m != chat.rend() && m->role != "assistant"; ++m)
        if (m->role == "tool") return false;
    return !chat.empty() && chat.back().role != "assistant";
}
}  // namespace

GenerationRequest parse_chat_request(const json& body, const Tokenizer& tok, const ModelLimits& limits,
                                     const nlohmann::ordered_json* schemas) {
    GenerationRequest r;
    r.endpoint = Endpoint::ChatCompletions;
    parse_common(body, schemas, limits, r);
    check_top_level(body, {"messages", "max_completion_tokens", "top_logprobs", "tools", "functions", "tool_choice",
                           "function_call", "parallel_tool_calls", "thinking", "reasoning_effort", "chat_template_kwargs",
                           "modalities", "verbosity", "prediction", "web_search_options", "audio",
                           "continue_final_message"});
    const json* messages = field(body, "messages");
    if (!messages) throw bad_request("messages", "'messages' is required", "missing_required_parameter");
    if (!messages->is_array()) throw bad_request("messages", "'messages' must be an array", "invalid_type");
    if (messages->empty()) throw bad_request("messages", "'messages' must not be empty");
    std::vector<std::shared_ptr<const PreparedImage>> images;
    json dynamic_tools = json::array();
    std::vector<ChatMessage> chat = parse_chat_messages(*messages, limits, images, dynamic_tools);
    ChatOptions options = parse_thinking(body);
    ToolRequest tools = parse_chat_tools(body, dynamic_tools);
    options.response_format = response_format_prompt(body);
    if (limits.hosted_sampling) apply_hosted_sampling(body, options.thinking, r);
    // --new-turn-tool-choice required: the turn's first request must call a tool, where the
    // grammar can hold every tool's schema; otherwise the request stays as the client sent it.
    std::shared_ptr<const Grammar> calls;
    if (limits.new_turn_tool_required && tools.any() && tools.choice == ToolChoice::Auto && !r.params.grammar &&
        starts_a_turn(chat)) {
        ToolRequest forced = tools;
        forced.choice = ToolChoice::Required;
        try {
            calls = tool_call_grammar(forced, options.thinking, limits.grammar);
            tools = std::move(forced);
        } catch (const ApiError& e) {
            spdlog::debug("new turn left to tool_choice auto: {}", e.what());
        }
    }
    const bool turn_forced = calls != nullptr;
    apply_tools(tools, options, r.params);
    // continue_final_message (vLLM's name): extend the last, assistant, message instead of
    // answering anew (the web UI's Continue of a stopped or truncated answer). The output then
    // starts inside the response: no reasoning comes first.
    options.continue_final = get_bool(body, "continue_final_message").value_or(false);
    if (options.continue_final && (chat.back().role != "assistant" || !chat.back().tool_calls.empty()))
        throw bad_request("continue_final_message",
                          "'continue_final_message' needs an assistant message without tool calls last in 'messages'");
    const bool reasoning_first = options.thinking && !options.continue_final;
    try {
        r.prompt = render_chat(tok, chat, options);
    } catch (const Error& e) {
        throw bad_request("messages", e.what());
    }
    // each image's pad becomes its rows: the lengths below count what the model evaluates
    ExpandedPrompt expanded = expand_prompt_images(std::move(r.prompt), std::move(images), tok, limits.n_vocab);
    r.prompt = std::move(expanded.ids);
    r.images = std::move(expanded.images);
    r.params.chat = true;
    r.params.thinking = reasoning_first;
    r.uncounted_prompt_tokens = options.continue_final || !options.add_generation_prompt ? 0 : kGenerationOpenerTokens;
    // The grammar holds the response; with thinking on, free reasoning comes before it.
    if (r.params.grammar)
        r.params.grammar = std::make_shared<const Grammar>(r.params.grammar->chat_response(reasoning_first, limits.grammar));
    // A required or named tool call is enforced the same way (its grammar covers thinking itself).
    // (A forced call is only made for a turn's start, never with continue_final_message.)
    if (!calls) calls = tool_call_grammar(tools, reasoning_first, limits.grammar);
    // The fewest output tokens that hold the call the client asked for (0: none asked).
    const int call_needs = calls && !turn_forced ? shortest_output(*calls) : 0;
    if (calls) {
        if (r.params.grammar)
            throw bad_request("tool_choice", "a required tool call and a 'response_format' cannot be combined",
                              "unsupported_parameter");
        r.params.grammar = std::move(calls);
    }
    if (get_bool(body, "logprobs").value_or(false))
        r.params.logprobs = int(get_int(body, "top_logprobs", 0, 20).value_or(0));
    else if (field(body, "top_logprobs"))
        throw bad_request("top_logprobs", "'top_logprobs' requires 'logprobs': true");
    auto max_tokens = get_token_count(body, "max_completion_tokens", 1);
    const char* max_param = "max_completion_tokens";
    if (!max_tokens) {
        max_tokens = get_token_count(body, "max_tokens", 1);
        max_param = "max_tokens";
    }
    check_lengths(r, limits, max_tokens, limits.n_ctx, max_param, "messages");
    // A required or named call that the output limit cannot hold is refused now, with what it
    // needs: generated, it would stop at the limit with no call (docs/api.md, "Tool calling").
    // A call forced by --new-turn-tool-choice is not the client's request, so it is not refused.
    if (r.params.max_tokens < call_needs)
        throw bad_request(max_param,
                          "the tool call that 'tool_choice' requires needs at least " + std::to_string(call_needs) +
                              " output tokens (the shortest call of the offered tools), but the output limit is " +
                              std::to_string(r.params.max_tokens) +
                              (r.clamp.param.empty() ? "" : " (what the context leaves)"));
    return r;
}


}  // namespace k3::server
