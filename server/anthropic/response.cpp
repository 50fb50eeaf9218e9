// The worker's events -> Anthropic Messages answers: a whole "message" object, or the stream
// Claude Code and the SDKs read (message_start, ping, content_block_start / _delta / _stop per
// block, message_delta, message_stop; no [DONE]). Blocks come in the order the model wrote
// them: thinking (thinking_delta, then signature_delta before it closes), text (text_delta),
// tool_use. A tool_use block opens when the model names the call (id, name) and its input
// streams as input_json_delta pieces as the model writes the arguments (they concatenate to
// the call's compact JSON object), so a long argument is not minutes of silence. The whole
// message keeps only calls that were completed: a call cut short, or every call of a turn whose
// tools channel turned out malformed (its raw text then follows as text), is left out of it;
// in the stream such a block is closed with the input written so far, as Anthropic's own
// streams are when max_tokens cuts a call.
//
// message_start carries the prompt's real figures when the worker has begun the prompt (its
// length and the tokens resumed from the prompt cache are known before the prefill), and the
// final message_delta repeats them. Keep-alives (docs/agents.md, "Prefills longer than a
// client's patience") are events the SDKs hand to their caller and that add nothing: an empty
// delta of the open block, or, before the first block, a message_delta with no stop_reason and
// the usage as known so far (the SDKs overwrite the message's usage with it).
#include <cstring>
#include <ctime>
#include <optional>

#include "anthropic/messages.h"
#include "wire/base64.h"
#include "http/sse.h"
#include "k3/fnv1a.h"

namespace k3::server {

namespace {

const char* stop_reason_name(FinishReason reason, bool stop_string) {
    switch (reason) {
        case FinishReason::Length: return "max_tokens";
        case FinishReason::ToolCalls: return "tool_use";
        case FinishReason::Stop: return stop_string ? "stop_sequence" : "end_turn";
    }
    return "end_turn";
}

// Anthropic's usage: input_tokens excludes the tokens read from the prompt cache.
json usage_of(const Usage& u) {
    return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", u.cached_tokens},
            {"output_tokens", u.completion_tokens}};
}

class MessagesResponder : public Responder {
public:
    explicit MessagesResponder(const GenerationRequest& r)
        : id_(random_id("msg_")), model_(r.model), hide_reasoning_(r.hide_reasoning) {
        usage_.prompt_tokens = int(r.prompt.size());
    }

    void prompt_begun(int prompt_tokens, int cached_tokens) override {
        usage_.prompt_tokens = prompt_tokens;
        usage_.cached_tokens = cached_tokens;
    }

    std::string stream_start() override {
        streaming_ = true;
        json message = message_object();
        message["content"] = json::array();
        frame("message_start", {{"message", message}});
        frame("ping", json::object());
        return take();
    }

    std::string stream_event(const JobEvent& e) override {
        collect(e);
        return take();
    }

    std::string keep_alive() override {
        switch (current_) {
            case Block::None:
                frame("message_delta", {{"delta", {{"stop_reason", nullptr}, {"stop_sequence", nullptr}}},
                                        {"usage", usage_of(usage_)}});
                break;
            case Block::Thinking: delta({{"type", "thinking_delta"}, {"thinking", ""}}); break;
            case Block::Text: delta({{"type", "text_delta"}, {"text", ""}}); break;
            case Block::ToolUse: delta({{"type", "input_json_delta"}, {"partial_json", ""}}); break;
        }
        return take();
    }

    std::string stream_error(const ApiError& error) override {
        return sse::event("error", dump(anthropic_error_body(error)));
    }

    void collect(const JobEvent& e) override {
        if (!e.reasoning.empty()) {
            open(Block::Thinking);
            thinking_ += e.reasoning;
            if (!hide_reasoning_) delta({{"type", "thinking_delta"}, {"thinking", e.reasoning}});
        }
        if (e.tool_calls_malformed) {
            // The calls so far are void: their raw text follows as text.
            calls_malformed_ = true;
            if (current_ == Block::ToolUse) close();
        }
        if (!e.content.empty()) {
            open(Block::Text);
            blocks_.back()["text"] = blocks_.back()["text"].get<std::string>() + e.content;
            delta({{"type", "text_delta"}, {"text", e.content}});
        }
        for (const auto& t : e.tool_calls) {
            if (!t.name.empty()) open_call(t.name);
            if (current_ == Block::ToolUse && !t.arguments.empty()) {
                arguments_ += t.arguments;
                delta({{"type", "input_json_delta"}, {"partial_json", t.arguments}});
            }
        }
        if (!e.ends_job()) return;
        // A call still open at the end is complete only if the turn ended by calling tools.
        if (current_ == Block::ToolUse && e.finish_reason != FinishReason::ToolCalls) unfinished_call_ = blocks_.size() - 1;
        close();
        usage_ = e.usage;
        stop_reason_ = stop_reason_name(e.finish_reason, !e.stop_sequence.empty());
        stop_sequence_ = e.stop_sequence;
        done_ = true;
        frame("message_delta", {{"delta", {{"stop_reason", stop_reason_},
                                           {"stop_sequence", stop_sequence_.empty() ? json(nullptr) : json(stop_sequence_)}}},
                                {"usage", usage_of(usage_)}});
        frame("message_stop", json::object());
    }

    std::string whole_body() override {
        json m = message_object();
        json content = json::array();
        for (size_t i = 0; i < blocks_.size(); ++i) {
            const bool call = blocks_[i]["type"] == "tool_use";
            if (call && (calls_malformed_ || (unfinished_call_ && *unfinished_call_ == i))) continue;
            content.push_back(std::move(blocks_[i]));
        }
        m["content"] = std::move(content);
        return dump(m);
    }

private:
    enum class Block { None, Thinking, Text, ToolUse };

    json message_object() const {
        return {{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", model_},
                {"content", json::array()},
                {"stop_reason", done_ ? json(stop_reason_) : json(nullptr)},
                {"stop_sequence", stop_sequence_.empty() ? json(nullptr) : json(stop_sequence_)},
                {"usage", usage_of(usage_)}};
    }

    void frame(const char* type, json payload) {
        if (!streaming_) return;
        payload["type"] = type;
        frames_ += sse::event(type, dump(payload));
    }
    std::string take() { return std::exchange(frames_, std::string()); }

    void delta(json d) { frame("content_block_delta", {{"index", blocks_.size() - 1}, {"delta", std::move(d)}}); }

    void open(Block kind) {
        if (current_ == kind) return;
        close();
        current_ = kind;
        json block = kind == Block::Thinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                             : json{{"type", "text"}, {"text", ""}};
        blocks_.push_back(block);
        frame("content_block_start", {{"index", blocks_.size() - 1}, {"content_block", block}});
    }

    // A call opens its own block as soon as the model names it.
    void open_call(const std::string& name) {
        close();
        current_ = Block::ToolUse;
        json block = {{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", name}, {"input", json::object()}};
        blocks_.push_back(block);
        frame("content_block_start", {{"index", blocks_.size() - 1}, {"content_block", block}});
    }

    void close() {
        switch (current_) {
            case Block::None: return;
            case Block::Thinking: {
                std::string signature = thinking_signature(thinking_);
                delta({{"type", "signature_delta"}, {"signature", signature}});
                blocks_.back()["thinking"] = hide_reasoning_ ? "" : thinking_;
                blocks_.back()["signature"] = signature;
                thinking_.clear();
                break;
            }
            case Block::Text: break;
            case Block::ToolUse: {
                // (the output parser completes only calls whose arguments are JSON of their types)
                json input = json::parse(arguments_.empty() ? "{}" : arguments_, nullptr, false);
                if (input.is_discarded() || !input.is_object()) input = json::object();
                blocks_.back()["input"] = std::move(input);
                arguments_.clear();
                break;
            }
        }
        frame("content_block_stop", {{"index", blocks_.size() - 1}});
        current_ = Block::None;
    }

    std::string id_, model_;
    bool hide_reasoning_;
    bool streaming_ = false, done_ = false;
    std::string frames_;
    json blocks_ = json::array();
    Block current_ = Block::None;
    std::string thinking_;
    std::string arguments_;                  // the open call's, as written so far
    bool calls_malformed_ = false;           // the turn's calls are void (whole message)
    std::optional<size_t> unfinished_call_;  // the call the turn ended inside (whole message)
    Usage usage_;
    std::string stop_reason_, stop_sequence_;
};

// --- the signature: "k3s1." + base64(text) + "." + 16 hex digits of FNV-1a over the text -----

std::string fnv_hex(const std::string& s) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)fnv1a(s));
    return buf;
}

constexpr std::string_view kSignaturePrefix = "k3s1.";

}  // namespace

std::string thinking_signature(const std::string& thinking) {
    return std::string(kSignaturePrefix) + base64_encode(thinking) + "." + fnv_hex(thinking);
}

std::optional<std::string> thinking_from_signature(const std::string& signature) {
    if (signature.rfind(kSignaturePrefix, 0) != 0) return std::nullopt;
    size_t dot = signature.rfind('.');
    if (dot <= kSignaturePrefix.size() - 1) return std::nullopt;
    auto text = base64_decode(std::string_view(signature).substr(kSignaturePrefix.size(), dot - kSignaturePrefix.size()));
    if (!text || fnv_hex(*text) != signature.substr(dot + 1)) return std::nullopt;
    return text;
}

bool is_anthropic_path(const std::string& path) { return path == "/v1/messages" || path.rfind("/v1/messages/", 0) == 0; }

int anthropic_status(const ApiError& e) {
    if (e.code == "queue_full") return 529;  // Anthropic's overloaded
    return e.status;
}

json anthropic_error_body(const ApiError& e) {
    const char* type = "api_error";
    switch (anthropic_status(e)) {
        case 400: case 415: case 422: type = "invalid_request_error"; break;
        case 401: type = "authentication_error"; break;
        case 403: type = "permission_error"; break;
        case 404: type = "not_found_error"; break;
        case 413: type = "request_too_large"; break;
        case 429: type = "rate_limit_error"; break;
        case 503: case 529: type = "overloaded_error"; break;
        default: type = e.status < 500 ? "invalid_request_error" : "api_error"; break;
    }
    return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
}

std::unique_ptr<Responder> make_messages_responder(const GenerationRequest& request) {
    return std::make_unique<MessagesResponder>(request);
}

}  // namespace k3::server
