// POST /v1/responses: a "response" object whose output is a list of items (reasoning, message,
// function_call), or its stream of typed events (response.created, response.output_item.added,
// response.output_text.delta, response.function_call_arguments.delta, ..., response.completed).
// One state machine builds the items from the worker's events for both: the stream is the
// whole response told as it grows.
#include <ctime>
#include <deque>
#include <utility>

#include "responses/responses.h"
#include "http/sse.h"

namespace k3::server {

namespace {

class ResponsesResponder : public Responder {
public:
    ResponsesResponder(const GenerationRequest& r, std::string model)
        : id_(random_id("resp_")), created_(std::time(nullptr)), model_(std::move(model)), echo_(r.responses_echo),
          namespaces_(r.tool_namespaces) {}

    std::string stream_start() override {
        streaming_ = true;
        frame("response.created", {{"response", response_object("in_progress")}});
        frame("response.in_progress", {{"response", response_object("in_progress")}});
        return take_frames();
    }

    std::string stream_event(const JobEvent& e) override {
        collect(e);
        return take_frames();
    }

    // Before the first item (queued, or the prompt being read): response.in_progress again, the
    // same response (the openai SDK's stream takes repeated lifecycle events of one id; Codex
    // counts every event against its stream_idle_timeout_ms). An item open: an empty delta of it.
    std::string keep_alive() override {
        if (!current_) {
            frame("response.in_progress", {{"response", response_object("in_progress")}});
        } else if (current_->type == ItemType::FunctionCall) {
            frame("response.function_call_arguments.delta",
                  {{"item_id", current_->id}, {"output_index", current_->output_index}, {"delta", ""}});
        } else {
            text_delta(current_->type, "");
        }
        return take_frames();
    }

    std::string stream_error(const ApiError& error) override {
        frame("error", {{"code", error.code.empty() ? json(nullptr) : json(error.code)},
                        {"message", error.what()},
                        {"param", error.param.empty() ? json(nullptr) : json(error.param)}});
        return take_frames();
    }

    void collect(const JobEvent& e) override {
        if (!e.reasoning.empty()) text_delta(ItemType::Reasoning, e.reasoning);
        if (!e.content.empty()) text_delta(ItemType::Message, e.content);
        for (const auto& t : e.tool_calls) {
            if (!t.name.empty()) open_call(t.name);
            if (!t.arguments.empty() && current_ && current_->type == ItemType::FunctionCall) {
                current_->text += t.arguments;
                frame("response.function_call_arguments.delta",
                      {{"item_id", current_->id}, {"output_index", current_->output_index}, {"delta", t.arguments}});
            }
        }
        malformed_ = malformed_ || e.tool_calls_malformed;
        if (!e.ends_job()) return;
        close_current();
        usage_ = e.usage;
        finish_ = e.finish_reason;
        done_ = true;
        const char* status = finish_ == FinishReason::Length ? "incomplete" : "completed";
        frame(finish_ == FinishReason::Length ? "response.incomplete" : "response.completed",
              {{"response", response_object(status)}});
    }

    std::string whole_body() override {
        return dump(response_object(finish_ == FinishReason::Length ? "incomplete" : "completed"));
    }

private:
    enum class ItemType { Reasoning, Message, FunctionCall };
    struct Item {
        ItemType type = ItemType::Message;
        std::string id;
        int output_index = 0;
        std::string text;     // reasoning or message text, or the call's arguments
        std::string name, call_id;
        std::string ns;       // a namespace tool's call: its namespace (name is then the function's)
        bool done = false;

        static Item make(ItemType type, std::string id) {
            Item it;
            it.type = type;
            it.id = std::move(id);
            return it;
        }
    };

    void frame(const char* type, json payload) {
        if (!streaming_) return;
        payload["type"] = type;
        payload["sequence_number"] = sequence_++;
        frames_ += sse::event(type, dump(payload));
    }
    std::string take_frames() { return std::exchange(frames_, std::string()); }

    void open_item(Item item) {
        close_current();
        item.output_index = int(items_.size());
        items_.push_back(std::move(item));
        current_ = &items_.back();
        frame("response.output_item.added", {{"output_index", current_->output_index}, {"item", item_json(*current_)}});
        // A text item's one part is announced before its deltas: the SDKs' stream accumulators
        // (openai's ResponseStream) add the deltas to it and refuse a delta with no part.
        if (current_->type != ItemType::FunctionCall)
            frame("response.content_part.added",
                  {{"item_id", current_->id},
                   {"output_index", current_->output_index},
                   {"content_index", 0},
                   {"part", text_part(current_->type == ItemType::Message ? "output_text" : "reasoning_text", "")}});
    }

    void open_call(const std::string& name) {
        Item item = Item::make(ItemType::FunctionCall, random_id("fc_"));
        item.name = name;
        // "NAMESPACE.NAME" was offered for a namespace's function: the client wants it split.
        for (const auto& ns : namespaces_) {
            std::string prefix = ns + kNamespaceSeparator;
            if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size()) {
                item.ns = ns;
                item.name = name.substr(prefix.size());
                break;
            }
        }
        item.call_id = random_id("call_");
        open_item(std::move(item));
    }

    void text_delta(ItemType type, const std::string& delta) {
        if (!current_ || current_->type != type)
            open_item(Item::make(type, random_id(type == ItemType::Reasoning ? "rs_" : "msg_")));
        current_->text += delta;
        json payload = {{"item_id", current_->id}, {"output_index", current_->output_index}, {"content_index", 0}, {"delta", delta}};
        if (type == ItemType::Message) {
            payload["logprobs"] = json::array();
            frame("response.output_text.delta", std::move(payload));
        } else {
            frame("response.reasoning_text.delta", std::move(payload));
        }
    }

    void close_current() {
        if (!current_) return;
        Item& it = *current_;
        it.done = true;
        json where = {{"item_id", it.id}, {"output_index", it.output_index}};
        switch (it.type) {
            case ItemType::Reasoning: {
                json p = where;
                p["content_index"] = 0;
                p["text"] = it.text;
                frame("response.reasoning_text.done", p);
                p.erase("text");
                p["part"] = text_part("reasoning_text", it.text);
                frame("response.content_part.done", std::move(p));
                break;
            }
            case ItemType::Message: {
                json p = where;
                p["content_index"] = 0;
                p["text"] = it.text;
                p["logprobs"] = json::array();
                frame("response.output_text.done", p);
                p.erase("text");
                p.erase("logprobs");
                p["part"] = text_part("output_text", it.text);
                frame("response.content_part.done", std::move(p));
                break;
            }
            case ItemType::FunctionCall: {
                json p = where;
                p["arguments"] = it.text;
                p["name"] = it.name;
                frame("response.function_call_arguments.done", std::move(p));
                break;
            }
        }
        frame("response.output_item.done", {{"output_index", it.output_index}, {"item", item_json(it)}});
        current_ = nullptr;
    }

    static json text_part(const char* type, const std::string& text) {
        json part = {{"type", type}, {"text", text}};
        if (std::string(type) == "output_text") {
            part["annotations"] = json::array();
            part["logprobs"] = json::array();
        }
        return part;
    }

    json item_json(const Item& it) const {
        const char* status = it.done ? "completed" : "in_progress";
        switch (it.type) {
            case ItemType::Reasoning: {
                json content = json::array();
                if (it.done) content.push_back(text_part("reasoning_text", it.text));
                return {{"type", "reasoning"}, {"id", it.id}, {"summary", json::array()}, {"content", content}};
            }
            case ItemType::Message: {
                json content = json::array();
                if (it.done) content.push_back(text_part("output_text", it.text));
                return {{"type", "message"}, {"id", it.id}, {"status", status}, {"role", "assistant"}, {"content", content}};
            }
            case ItemType::FunctionCall: {
                json call = {{"type", "function_call"}, {"id", it.id},     {"call_id", it.call_id},
                             {"name", it.name},         {"arguments", it.done ? it.text : ""}, {"status", status}};
                if (!it.ns.empty()) call["namespace"] = it.ns;
                return call;
            }
        }
        return json::object();
    }

    json response_object(const char* status) const {
        json output = json::array();
        std::string output_text;
        for (const auto& it : items_) {
            if (it.type == ItemType::FunctionCall && malformed_) continue;  // its raw text is in a message
            output.push_back(item_json(it));
            if (it.type == ItemType::Message) output_text += it.text;
        }
        json r = {{"id", id_},
                  {"object", "response"},
                  {"created_at", created_},
                  {"status", status},
                  {"error", nullptr},
                  {"incomplete_details", nullptr},
                  {"model", model_},
                  {"output", output},
                  {"previous_response_id", nullptr},
                  {"store", false},
                  {"truncation", "disabled"}};
        for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
        if (std::string(status) == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
        // usage is an object or absent (the schema's Response.usage): absent until the end.
        if (done_) {
            r["usage"] = {{"input_tokens", usage_.prompt_tokens},
                          // cache_write_tokens: the prompt tokens evaluated for this request,
                          // whose states the prompt cache keeps (docs/api.md, "/v1/responses").
                          {"input_tokens_details", {{"cached_tokens", usage_.cached_tokens},
                                                    {"cache_write_tokens", usage_.prompt_tokens - usage_.cached_tokens}}},
                          {"output_tokens", usage_.completion_tokens},
                          {"output_tokens_details", {{"reasoning_tokens", usage_.reasoning_tokens}}},
                          {"total_tokens", usage_.prompt_tokens + usage_.completion_tokens}};
        }
        return r;
    }

    std::string id_;
    long long created_;
    std::string model_;
    json echo_;
    std::vector<std::string> namespaces_;
    bool streaming_ = false;
    int sequence_ = 0;
    std::string frames_;
    std::deque<Item> items_;  // (a deque: current_ stays valid as items are added)
    Item* current_ = nullptr;
    bool malformed_ = false, done_ = false;
    FinishReason finish_ = FinishReason::Stop;
    Usage usage_;
};

}  // namespace

std::unique_ptr<Responder> make_responses_responder(const GenerationRequest& request) {
    return std::make_unique<ResponsesResponder>(request, request.model);
}

}  // namespace k3::server
