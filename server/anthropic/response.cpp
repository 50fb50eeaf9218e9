// The worker's events -> Anthropic Messages answers: a whole "message" object, or the stream
// Claude Code and the SDKs read (message_start, ping, content_block_start / _delta / _stop per
// block, message_delta, message_stop; no [DONE]). Blocks come in the order the model wrote
// them: thinking (thinking_delta, then signature_delta before it closes), text (text_delta),
// tool_use. A tool_use block is sent whole once its call is complete (content_block_start,
// one input_json_delta, content_block_stop), so a client never sees a call without its input,
// and a call the model left unfinished, or whose tools channel turned out malformed, is never
// announced (its raw text comes as text instead).
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
        : id_(random_id("msg_")), model_(r.model), hide_reasoning_(r.hide_reasoning) {}

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

    std::string keep_alive() override { return sse::event("ping", R"({"type":"ping"})"); }

    std::string stream_error(const ApiError& error) override {
        return sse::event("error", dump(anthropic_error_body(error)));
    }

    void collect(const JobEvent& e) override {
        if (!e.reasoning.empty()) {
            open(Block::Thinking);
            thinking_ += e.reasoning;
            if (!hide_reasoning_) delta({{"type", "thinking_delta"}, {"thinking", e.reasoning}});
        }
        if (e.tool_calls_malformed) calls_.clear();  // their raw text follows as text
        if (!e.content.empty()) {
            send_complete_calls();
            open(Block::Text);
            blocks_.back()["text"] = blocks_.back()["text"].get<std::string>() + e.content;
            delta({{"type", "text_delta"}, {"text", e.content}});
        }
        for (const auto& t : e.tool_calls) {
            if (!t.name.empty()) {
                send_complete_calls();  // the one before is complete now
                close();
                calls_.push_back({random_id("toolu_"), t.name, ""});
            }
            if (!calls_.empty()) calls_.back().arguments += t.arguments;
        }
        if (!e.ends_job()) return;
        // A call still open at the end is complete only if the turn ended by calling tools.
        if (e.finish_reason == FinishReason::ToolCalls) send_complete_calls();
        calls_.clear();
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
        m["content"] = blocks_;
        return dump(m);
    }

private:
    enum class Block { None, Thinking, Text, ToolUse };
    struct Call {
        std::string id, name, arguments;
    };

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

    void close() {
        if (current_ == Block::None) return;
        if (current_ == Block::Thinking) {
            std::string signature = thinking_signature(thinking_);
            delta({{"type", "signature_delta"}, {"signature", signature}});
            blocks_.back()["thinking"] = hide_reasoning_ ? "" : thinking_;
            blocks_.back()["signature"] = signature;
            thinking_.clear();
        }
        frame("content_block_stop", {{"index", blocks_.size() - 1}});
        current_ = Block::None;
    }

    // The calls collected so far, as whole tool_use blocks (the input must parse: the output
    // parser only completes calls whose arguments are JSON of their types).
    void send_complete_calls() {
        for (auto& c : calls_) {
            close();
            json input = json::parse(c.arguments.empty() ? "{}" : c.arguments, nullptr, false);
            if (input.is_discarded() || !input.is_object()) input = json::object();
            json block = {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}};
            blocks_.push_back(block);
            frame("content_block_start", {{"index", blocks_.size() - 1}, {"content_block", block}});
            delta({{"type", "input_json_delta"}, {"partial_json", dump(input)}});
            frame("content_block_stop", {{"index", blocks_.size() - 1}});
            blocks_.back()["input"] = std::move(input);
        }
        calls_.clear();
    }

    std::string id_, model_;
    bool hide_reasoning_;
    bool streaming_ = false, done_ = false;
    std::string frames_;
    json blocks_ = json::array();
    Block current_ = Block::None;
    std::string thinking_;
    std::vector<Call> calls_;
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
