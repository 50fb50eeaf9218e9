// What the completions and chat Responders share (openai/completion_response.cpp,
// openai/chat_response.cpp): the request's n choices, each collected on its own; a whole body
// of {choices, envelope, usage}; a stream of one chunk per event, whose last event is followed
// by the usage chunk (when asked for) and [DONE]. An endpoint supplies its per-choice state
// (`Choice`, with `logprobs` (openai/logprobs_text.h) and `finish_reason` members), its chunk
// for an event, and what a choice adds to the body ("text" or "message").
//
// The whole body is built as text (docs/operations.md "Bounded answers"): each token's logprobs
// entry is appended as JSON text when it arrives, and the body is assembled once from the choices'
// texts, each freed as it is copied. A tree of json values cost ~9-12x the answer's size (+85 MB
// for a 7.1 MB n=16 answer); this peaks near twice it (tests/server/openai/test_answer_memory.cpp).
// The text is the bytes dump() gave for the tree: keys in nlohmann's sorted order, each value dumped alone.
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

    // A chunk of each choice with nothing in it: a chat delta `{}`, a completion's text "" (the
    // SDKs hand every data event to their caller; an SSE comment never reaches it).
    std::string keep_alive() final {
        std::string out;
        for (size_t i = 0; i < choices_.size(); ++i) {
            JobEvent nothing;
            nothing.choice = int(i);
            out += sse::data(dump(event_chunk(nothing)));
        }
        return out;
    }

    void collect(const JobEvent& e) final {
        Choice& c = choice(e);
        collect_output(c, e);
        if (logprobs_)
            for (const auto& lp : e.logprobs) c.logprobs.add(lp);
        if (e.kind == JobEvent::Kind::Done) c.finish_reason = e.finish_reason;
        if (e.ends_job()) usage_ = e.usage;
    }

    // {"choices":[{"finish_reason":…,"index":i,"logprobs":…,OUTPUT_KEY:…},…],"created":…,…}
    std::string whole_body() final {
        // Each choice's output as text first (its raw text freed), so the body is reserved once.
        std::vector<std::string> outputs;
        outputs.reserve(choices_.size());
        for (auto& c : choices_) outputs.push_back(dump(take_output(c)));
        json rest = envelope(ids_, object_);
        rest["usage"] = usage_json(usage_);
        const std::string tail = dump(rest);  // {"created":…}: every key after "choices"
        size_t size = tail.size() + 16;
        for (size_t i = 0; i < choices_.size(); ++i)
            size += 96 + outputs[i].size() + (logprobs_ ? choices_[i].logprobs.size() : 4);
        std::string out;
        out.reserve(size);
        out += "{\"choices\":[";
        for (size_t i = 0; i < choices_.size(); ++i) {
            if (i) out += ',';
            out += "{\"finish_reason\":";
            out += dump(json(finish_reason_name(choices_[i].finish_reason)));
            out += ",\"index\":" + std::to_string(i) + ",\"logprobs\":";
            if (logprobs_)
                choices_[i].logprobs.move_into(out);
            else
                out += "null";
            out += ",\"";
            out += output_key_;
            out += "\":";
            out += outputs[i];
            std::string().swap(outputs[i]);
            out += '}';
        }
        out += "],";
        out.append(tail, 1);
        return out;
    }

protected:
    // `object` names the whole body ("chat.completion"), `chunk_object` each streamed chunk.
    // `output_key` names a choice's output in the body ("message", "text"; after "logprobs").
    ChoicesResponder(const GenerationRequest& r, ResponseIds ids, const char* object, const char* chunk_object,
                     const char* output_key)
        : ids_(std::move(ids)), object_(object), chunk_object_(chunk_object), output_key_(output_key),
          include_usage_(r.include_usage), logprobs_(r.params.logprobs >= 0),
          choices_(size_t(std::max(1, r.params.n))) {}

    // The chunk for one Delta or Done event.
    virtual json event_chunk(const JobEvent& e) = 0;
    // Whole response: the event's text (and calls) into its choice.
    virtual void collect_output(Choice& c, const JobEvent& e) = 0;
    // Whole response: a choice's output (its message, its text), taking its collected text.
    virtual json take_output(Choice& c) = 0;

    Choice& choice(const JobEvent& e) { return choices_.at(size_t(e.choice)); }
    // A chunk's envelope (no usage until the usage chunk).
    json chunk_envelope() const { return envelope(ids_, chunk_object_); }

    ResponseIds ids_;
    const char* object_;
    const char* chunk_object_;
    const char* output_key_;
    bool include_usage_, logprobs_;
    std::vector<Choice> choices_;
    Usage usage_;
};

}  // namespace k3::server
