// POST /v1/completions: "text_completion" objects, whole or as a stream of the same shape.
#include "openai_response.h"
#include "sse.h"

namespace k3::server {

namespace {

class CompletionResponder : public Responder {
public:
    CompletionResponder(const GenerationRequest& r, ResponseIds ids)
        : ids_(std::move(ids)), include_usage_(r.include_usage), logprobs_(r.params.logprobs >= 0),
          echo_text_(r.echo ? r.echo_text : ""), text_offset_(echo_text_.size()), text_(echo_text_) {}

    std::string stream_start() override {
        if (echo_text_.empty()) return {};
        JobEvent echo;
        echo.content = echo_text_;
        return sse::data(dump(chunk(echo, /*echo=*/true)));
    }

    std::string stream_event(const JobEvent& e) override {
        std::string out = sse::data(dump(chunk(e, false)));
        if (e.kind != JobEvent::Kind::Done) return out;
        if (include_usage_) {
            json u = base();
            u["choices"] = json::array();
            u["usage"] = usage_json(e.usage);
            out += sse::data(dump(u));
        }
        return out + sse::done();
    }

    void collect(const JobEvent& e) override {
        text_ += e.content;
        all_logprobs_.insert(all_logprobs_.end(), e.logprobs.begin(), e.logprobs.end());
        if (e.kind == JobEvent::Kind::Done) done_ = e;
    }

    json body() const override {
        json choice = {{"index", 0}, {"finish_reason", finish_reason_name(done_.finish_reason)}, {"logprobs", nullptr}};
        choice["text"] = text_;
        if (logprobs_) choice["logprobs"] = completion_logprobs_json(all_logprobs_, echo_text_.size());
        return {{"id", ids_.id},
                {"object", "text_completion"},
                {"created", ids_.created},
                {"model", ids_.model},
                {"system_fingerprint", ids_.fingerprint},
                {"choices", json::array({choice})},
                {"usage", usage_json(done_.usage)}};
    }

private:
    json base() const {
        json j = {{"id", ids_.id},
                  {"object", "text_completion"},
                  {"created", ids_.created},
                  {"model", ids_.model},
                  {"system_fingerprint", ids_.fingerprint}};
        if (include_usage_) j["usage"] = nullptr;
        return j;
    }

    json chunk(const JobEvent& e, bool echo) {
        json j = base();
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        choice["text"] = e.content;
        if (!e.logprobs.empty()) {
            choice["logprobs"] = completion_logprobs_json(e.logprobs, text_offset_);
            for (const auto& lp : e.logprobs) text_offset_ += lp.text.size();
        }
        if (!echo && e.kind == JobEvent::Kind::Done) choice["finish_reason"] = finish_reason_name(e.finish_reason);
        j["choices"] = json::array({choice});
        return j;
    }

    ResponseIds ids_;
    bool include_usage_, logprobs_;
    std::string echo_text_;
    size_t text_offset_;  // offset of the next token's text (logprobs)
    std::string text_;
    std::vector<TokenLogprob> all_logprobs_;
    JobEvent done_;
};

}  // namespace

std::unique_ptr<Responder> make_completion_responder(const GenerationRequest& request, ResponseIds ids) {
    return std::make_unique<CompletionResponder>(request, std::move(ids));
}

}  // namespace k3::server
