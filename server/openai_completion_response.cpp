// POST /v1/completions: "text_completion" objects, whole or as a stream of the same shape.
// Each of the request's n choices keeps its own text, logprob offsets and finish reason.
#include "openai_response.h"
#include "sse.h"

namespace k3::server {

namespace {

class CompletionResponder : public Responder {
public:
    CompletionResponder(const GenerationRequest& r, ResponseIds ids)
        : ids_(std::move(ids)), include_usage_(r.include_usage), logprobs_(r.params.logprobs >= 0),
          echo_text_(r.echo ? r.echo_text : "") {
        choices_.resize(size_t(std::max(1, r.params.n)));
        for (auto& c : choices_) {
            c.text = echo_text_;
            c.text_offset = echo_text_.size();
        }
    }

    std::string stream_start() override {
        if (echo_text_.empty()) return {};
        std::string out;
        for (size_t i = 0; i < choices_.size(); ++i) {
            JobEvent echo;
            echo.choice = int(i);
            echo.content = echo_text_;
            out += sse::data(dump(chunk(echo, /*echo=*/true)));
        }
        return out;
    }

    std::string stream_event(const JobEvent& e) override {
        std::string out = sse::data(dump(chunk(e, false)));
        if (!e.ends_job()) return out;
        return out + stream_end(ids_, "text_completion", include_usage_, e.usage);
    }

    void collect(const JobEvent& e) override {
        Choice& c = choices_.at(size_t(e.choice));
        c.text += e.content;
        c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        if (e.kind == JobEvent::Kind::Done) c.finish_reason = e.finish_reason;
        if (e.ends_job()) usage_ = e.usage;
    }

    json body() const override {
        json choices = json::array();
        for (size_t i = 0; i < choices_.size(); ++i) {
            const Choice& c = choices_[i];
            json choice = {{"index", i}, {"finish_reason", finish_reason_name(c.finish_reason)}, {"logprobs", nullptr}};
            choice["text"] = c.text;
            if (logprobs_) choice["logprobs"] = completion_logprobs_json(c.logprobs, echo_text_.size());
            choices.push_back(choice);
        }
        json body = envelope(ids_, "text_completion");
        body["choices"] = choices;
        body["usage"] = usage_json(usage_);
        return body;
    }

private:
    struct Choice {
        std::string text;
        std::vector<TokenLogprob> logprobs;
        size_t text_offset = 0;  // offset of the next token's text (streamed logprobs)
        FinishReason finish_reason = FinishReason::Stop;
    };

    json base() const { return envelope(ids_, "text_completion", include_usage_); }

    json chunk(const JobEvent& e, bool echo) {
        Choice& c = choices_.at(size_t(e.choice));
        json j = base();
        json choice = {{"index", e.choice}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        choice["text"] = e.content;
        if (!e.logprobs.empty()) {
            choice["logprobs"] = completion_logprobs_json(e.logprobs, c.text_offset);
            for (const auto& lp : e.logprobs) c.text_offset += lp.text.size();
        }
        if (!echo && e.kind == JobEvent::Kind::Done) choice["finish_reason"] = finish_reason_name(e.finish_reason);
        j["choices"] = json::array({choice});
        return j;
    }

    ResponseIds ids_;
    bool include_usage_, logprobs_;
    std::string echo_text_;
    std::vector<Choice> choices_;
    Usage usage_;
};

}  // namespace

std::unique_ptr<Responder> make_completion_responder(const GenerationRequest& request, ResponseIds ids) {
    return std::make_unique<CompletionResponder>(request, std::move(ids));
}

}  // namespace k3::server
