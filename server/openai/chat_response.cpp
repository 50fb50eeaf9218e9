// POST /v1/chat/completions: a "chat.completion" object, or "chat.completion.chunk" deltas.
// Each of the request's n choices keeps its own text, calls and finish reason.
#include "openai/choices_responder.h"
#include "openai/logprobs_text.h"
#include "http/sse.h"

namespace k3::server {

namespace {

struct ChatCall {
    std::string id, name, arguments;
};

struct ChatChoice {
    std::string content, reasoning;
    ChatLogprobsText logprobs;
    std::vector<ChatCall> calls;
    std::vector<std::string> call_ids;
    bool malformed = false;
    FinishReason finish_reason = FinishReason::Stop;

    // The id of this turn's call number `index` (made when first asked for).
    const std::string& call_id(int index) {
        while (int(call_ids.size()) <= index) call_ids.push_back(random_id("call_"));
        return call_ids[size_t(index)];
    }
};

class ChatResponder : public ChoicesResponder<ChatChoice> {
public:
    ChatResponder(const GenerationRequest& r, ResponseIds ids)
        : ChoicesResponder(r, std::move(ids), "chat.completion", "chat.completion.chunk", "message"),
          thinking_(r.params.thinking) {}

    std::string stream_start() override {
        std::string out;
        for (size_t i = 0; i < choices_.size(); ++i)
            out += sse::data(dump(chunk(int(i), {{"role", "assistant"}, {"content", ""}}, {}, nullptr)));
        return out;
    }

private:
    json event_chunk(const JobEvent& e) override {
        json delta = json::object();
        // Both names: llama-server/vLLM clients read reasoning_content, OpenRouter-style ones reasoning.
        if (!e.reasoning.empty()) delta["reasoning_content"] = delta["reasoning"] = e.reasoning;
        if (!e.content.empty()) delta["content"] = e.content;
        if (!e.tool_calls.empty()) delta["tool_calls"] = tool_call_deltas(choice(e), e.tool_calls);
        bool done = e.kind == JobEvent::Kind::Done;
        return chunk(e.choice, std::move(delta), e.logprobs, done ? json(finish_reason_name(e.finish_reason)) : json());
    }

    void collect_output(ChatChoice& c, const JobEvent& e) override {
        c.content += e.content;
        c.reasoning += e.reasoning;
        for (const auto& t : e.tool_calls) {
            if (!t.name.empty()) c.calls.push_back({c.call_id(t.index), t.name, ""});
            if (!c.calls.empty()) c.calls.back().arguments += t.arguments;
        }
        c.malformed = c.malformed || e.tool_calls_malformed;
    }

    json take_output(ChatChoice& c) override {
        json message = {{"role", "assistant"}, {"content", std::move(c.content)}, {"refusal", nullptr}};
        if (thinking_) {
            message["reasoning_content"] = c.reasoning;
            message["reasoning"] = std::move(c.reasoning);
        }
        if (!c.calls.empty() && !c.malformed) {
            json calls = json::array();
            for (const auto& call : c.calls)
                calls.push_back({{"id", call.id},
                                 {"type", "function"},
                                 {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
            message["tool_calls"] = calls;
            if (message["content"].get_ref<const std::string&>().empty())
                message["content"] = nullptr;  // as OpenAI: a pure call has no content
        }
        return message;
    }

    json chunk(int index, json delta, const std::vector<TokenLogprob>& lps, json finish_reason) const {
        json j = chunk_envelope();
        json choice = {{"index", index}, {"logprobs", nullptr}, {"finish_reason", std::move(finish_reason)}};
        choice["delta"] = std::move(delta);
        if (!lps.empty()) choice["logprobs"] = chat_logprobs_json(lps);
        j["choices"] = json::array({choice});
        return j;
    }

    // OpenAI's layout: a call's first delta has index, id, type and the name with empty
    // arguments; then only index and the next piece of the arguments.
    static json tool_call_deltas(ChatChoice& c, const std::vector<ToolCallDelta>& deltas) {
        json out = json::array();
        for (const auto& t : deltas) {
            if (!t.name.empty())
                out.push_back({{"index", t.index},
                               {"id", c.call_id(t.index)},
                               {"type", "function"},
                               {"function", {{"name", t.name}, {"arguments", ""}}}});
            if (!t.arguments.empty()) out.push_back({{"index", t.index}, {"function", {{"arguments", t.arguments}}}});
        }
        return out;
    }

    bool thinking_;
};

}  // namespace

std::unique_ptr<Responder> make_chat_responder(const GenerationRequest& request, ResponseIds ids) {
    return std::make_unique<ChatResponder>(request, std::move(ids));
}

}  // namespace k3::server
