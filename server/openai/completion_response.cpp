// POST /v1/completions: "text_completion" objects, whole or as a stream of the same shape.
// Each of the request's n choices keeps its own text, logprob offsets and finish reason.
#include "openai/choices_responder.h"
#include "openai/logprobs_text.h"
#include "http/sse.h"

namespace k3::server {

namespace {

struct CompletionChoice {
    CompletionLogprobsText logprobs;
    size_t text_offset = 0;  // offset of the next token's text (streamed logprobs)
    std::string text;
    FinishReason finish_reason = FinishReason::Stop;
};

class CompletionResponder : public ChoicesResponder<CompletionChoice> {
public:
    CompletionResponder(const GenerationRequest& r, ResponseIds ids)
        : ChoicesResponder(r, std::move(ids), "text_completion", "text_completion", "text"),
          echo_text_(r.echo ? r.echo_text : "") {
        for (auto& c : choices_) {
            c.text = echo_text_;
            c.text_offset = echo_text_.size();
            c.logprobs = CompletionLogprobsText(echo_text_.size());
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

private:
    json event_chunk(const JobEvent& e) override { return chunk(e, false); }

    void collect_output(CompletionChoice& c, const JobEvent& e) override { c.text += e.content; }

    json take_output(CompletionChoice& c) override { return std::move(c.text); }

    json chunk(const JobEvent& e, bool echo) {
        CompletionChoice& c = choice(e);
        json j = chunk_envelope();
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

    std::string echo_text_;
};

}  // namespace

std::unique_ptr<Responder> make_completion_responder(const GenerationRequest& request, ResponseIds ids) {
    return std::make_unique<CompletionResponder>(request, std::move(ids));
}

}  // namespace k3::server
