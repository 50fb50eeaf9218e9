// POST /v1/chat/completions: a "chat.completion" object, or "chat.completion.chunk" deltas.
#include "openai_response.h"
#include "sse.h"

namespace k3::server {

namespace {

class ChatResponder : public Responder {
public:
    ChatResponder(const GenerationRequest& r, ResponseIds ids)
        : ids_(std::move(ids)), include_usage_(r.include_usage), logprobs_(r.params.logprobs >= 0),
          thinking_(r.params.thinking) {}

    std::string stream_start() override {
        json delta = {{"role", "assistant"}, {"content", ""}};
        return sse::data(dump(chunk(delta, {}, nullptr)));
    }

    std::string stream_event(const JobEvent& e) override {
        json delta = json::object();
        if (!e.reasoning.empty()) delta["reasoning_content"] = e.reasoning;
        if (!e.content.empty()) delta["content"] = e.content;
        if (!e.tool_calls.empty()) delta["tool_calls"] = tool_call_deltas(e.tool_calls);
        bool done = e.kind == JobEvent::Kind::Done;
        std::string out = sse::data(dump(chunk(delta, e.logprobs, done ? json(finish_reason_name(e.finish_reason)) : json())));
        if (!done) return out;
        if (include_usage_) {
            json u = base();
            u["choices"] = json::array();
            u["usage"] = usage_json(e.usage);
            out += sse::data(dump(u));
        }
        return out + sse::done();
    }

    void collect(const JobEvent& e) override {
        content_ += e.content;
        reasoning_ += e.reasoning;
        all_logprobs_.insert(all_logprobs_.end(), e.logprobs.begin(), e.logprobs.end());
        for (const auto& t : e.tool_calls) {
            if (!t.name.empty()) calls_.push_back({call_id(t.index), t.name, ""});
            if (!calls_.empty()) calls_.back().arguments += t.arguments;
        }
        malformed_ = malformed_ || e.tool_calls_malformed;
        if (e.kind == JobEvent::Kind::Done) done_ = e;
    }

    json body() const override {
        json choice = {{"index", 0}, {"finish_reason", finish_reason_name(done_.finish_reason)}, {"logprobs", nullptr}};
        json message = {{"role", "assistant"}, {"content", content_}, {"refusal", nullptr}};
        if (thinking_) message["reasoning_content"] = reasoning_;
        if (!calls_.empty() && !malformed_) {
            json calls = json::array();
            for (const auto& c : calls_)
                calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
            message["tool_calls"] = calls;
            if (content_.empty()) message["content"] = nullptr;  // as OpenAI: a pure call has no content
        }
        choice["message"] = message;
        if (logprobs_) choice["logprobs"] = chat_logprobs_json(all_logprobs_);
        return {{"id", ids_.id},
                {"object", "chat.completion"},
                {"created", ids_.created},
                {"model", ids_.model},
                {"system_fingerprint", ids_.fingerprint},
                {"choices", json::array({choice})},
                {"usage", usage_json(done_.usage)}};
    }

private:
    json base() const {
        json j = {{"id", ids_.id},
                  {"object", "chat.completion.chunk"},
                  {"created", ids_.created},
                  {"model", ids_.model},
                  {"system_fingerprint", ids_.fingerprint}};
        if (include_usage_) j["usage"] = nullptr;
        return j;
    }

    json chunk(json delta, const std::vector<TokenLogprob>& lps, json finish_reason) const {
        json j = base();
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", std::move(finish_reason)}};
        choice["delta"] = std::move(delta);
        if (!lps.empty()) choice["logprobs"] = chat_logprobs_json(lps);
        j["choices"] = json::array({choice});
        return j;
    }

    // OpenAI's layout: a call's first delta has index, id, type and the name with empty
    // arguments; then only index and the next piece of the arguments.
    json tool_call_deltas(const std::vector<ToolCallDelta>& deltas) {
        json out = json::array();
        for (const auto& t : deltas) {
            if (!t.name.empty())
                out.push_back({{"index", t.index},
                               {"id", call_id(t.index)},
                               {"type", "function"},
                               {"function", {{"name", t.name}, {"arguments", ""}}}});
            if (!t.arguments.empty()) out.push_back({{"index", t.index}, {"function", {{"arguments", t.arguments}}}});
        }
        return out;
    }
    // The id of the turn's call number `index` (made when first asked for).
    const std::string& call_id(int index) {
        while (int(call_ids_.size()) <= index) call_ids_.push_back(random_id("call_"));
        return call_ids_[size_t(index)];
    }

    struct Call {
        std::string id, name, arguments;
    };

    ResponseIds ids_;
    bool include_usage_, logprobs_, thinking_;
    std::vector<std::string> call_ids_;
    std::vector<Call> calls_;
    bool malformed_ = false;
    std::string content_, reasoning_;
    std::vector<TokenLogprob> all_logprobs_;
    JobEvent done_;
};

}  // namespace

std::unique_ptr<Responder> make_chat_responder(const GenerationRequest& request, ResponseIds ids) {
    return std::make_unique<ChatResponder>(request, std::move(ids));
}

}  // namespace k3::server
