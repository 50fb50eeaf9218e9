// What the completions and chat Responders share (openai/completion_response.cpp,
// openai/chat_response.cpp): the request's n choices, each collected on its own; a whole body
// of {envelope, choices, usage}; a stream of one chunk per event, whose last event is followed
// by the usage chunk (when asked for) and [DONE]. An endpoint supplies its per-choice state
// (`Choice`, with `logprobs` and `finish_reason` members), its chunk for an event, and what a
// choice adds to the body ("text" or "message", and its logprobs layout).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "openai/response.h"
#include "http/sse.h"

namespace k3::server {

template <class Choice>
class ChoicesResponder : public Responder {
public:
    std::string stream_event(const JobEvent& e) final {
        std::string out = sse::data(dump(event_chunk(e)));
        if (e.ends_job()) out += stream_end(ids_, chunk_object_, include_usage_, e.usage);
        return out;
    }

    void collect(const JobEvent& e) final {
        Choice& c = choice(e);
        collect_output(c, e);
        c.logprobs.insert(c.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
        if (e.kind == JobEvent::Kind::Done) c.finish_reason = e.finish_reason;
        if (e.ends_job()) usage_ = e.usage;
    }

    json body() const final {
        json choices = json::array();
        for (size_t i = 0; i < choices_.size(); ++i) {
            json out = {{"index", i}, {"finish_reason", finish_reason_name(choices_[i].finish_reason)}, {"logprobs", nullptr}};
            add_output(out, choices_[i]);
            choices.push_back(std::move(out));
        }
        json body = envelope(ids_, object_);
        body["choices"] = std::move(choices);
        body["usage"] = usage_json(usage_);
        return body;
    }

protected:
    // `object` names the whole body ("chat.completion"), `chunk_object` each streamed chunk.
    ChoicesResponder(const GenerationRequest& r, ResponseIds ids, const char* object, const char* chunk_object)
        : ids_(std::move(ids)), object_(object), chunk_object_(chunk_object), include_usage_(r.include_usage),
          logprobs_(r.params.logprobs >= 0), choices_(size_t(std::max(1, r.params.n))) {}

    // The chunk for one Delta or Done event.
    virtual json event_chunk(const JobEvent& e) = 0;
    // Whole response: the event's text (and calls) into its choice.
    virtual void collect_output(Choice& c, const JobEvent& e) = 0;
    // Whole response: a choice's output, and its logprobs when asked for, into `out`.
    virtual void add_output(json& out, const Choice& c) const = 0;

    Choice& choice(const JobEvent& e) { return choices_.at(size_t(e.choice)); }
    // A chunk's envelope (no usage until the usage chunk).
    json chunk_envelope() const { return envelope(ids_, chunk_object_); }

    ResponseIds ids_;
    const char* object_;
    const char* chunk_object_;
    bool include_usage_, logprobs_;
    std::vector<Choice> choices_;
    Usage usage_;
};

}  // namespace k3::server
