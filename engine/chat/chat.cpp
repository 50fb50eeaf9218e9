// The Kimi K3 chat layout (spec 6.5, "XTML"): control segments (<|open|>, <|close|>, <|sep|>,
// <|end_of_msg|>) are special ids; every text segment, including all user and assistant text,
// is encoded with specials disallowed, so text that spells a control token stays plain text.
//
//   [thinking] <|open|>message role="system" type="thinking-effort"<|sep|>EFFORT<|close|>message<|sep|><|end_of_msg|>
//   per message: <|open|>message role="ROLE"<|sep|> BODY <|close|>message<|sep|><|end_of_msg|>
//     system/user BODY: content
//     assistant BODY:   [thinking] <|open|>think<|sep|>reasoning<|close|>think<|sep|>
//                       <|open|>response<|sep|>content<|close|>response<|sep|>
//   generation prompt: <|open|>message role="assistant"<|sep|><|open|>think|response<|sep|>
#include "k3/chat.h"

#include <functional>

#include "tokenizer/utf8.h"
#include "k3/error.h"

namespace k3 {

namespace {

// The control tokens the layout needs, looked up once per call.
struct ControlIds {
    int32_t open, close, sep, end_of_msg, eos;

    explicit ControlIds(const Tokenizer& tok) {
        open = need(tok, "<|open|>");
        close = need(tok, "<|close|>");
        sep = need(tok, "<|sep|>");
        end_of_msg = need(tok, "<|end_of_msg|>");
        eos = need(tok, "[EOS]");
    }
    static int32_t need(const Tokenizer& tok, const char* content) {
        auto id = tok.special_id(content);
        if (!id) throw Error(ErrorKind::Config, std::string("chat: the tokenizer has no ") + content + " token");
        return *id;
    }
};

// The official encoder's thinking-effort message body (spec 6.5), including its mention of
// `medium`, which it nevertheless refuses as a value.
std::string effort_text(const std::string& effort) {
    return "`thinking_effort` guides on how much to think in your thinking channel (not including the "
           "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
           "Now the system is invoked with `thinking_effort=" +
           effort + "`.";
}

class Renderer {
public:
    explicit Renderer(const Tokenizer& tok) : tok_(tok), ids_(tok) {}

    void control(int32_t id) { out_.push_back(id); }
    void text(std::string_view s) {
        auto ids = tok_.encode(s, /*allow_special=*/false);
        out_.insert(out_.end(), ids.begin(), ids.end());
    }
    void open_tag(std::string_view tag) { control(ids_.open), text(tag), control(ids_.sep); }
    void close_tag(std::string_view tag) { control(ids_.close), text(tag), control(ids_.sep); }
    void message(std::string_view open, const std::function<void()>& body) {
        open_tag(open);
        body();
        close_tag("message");
        control(ids_.end_of_msg);
    }
    std::vector<int32_t> take() { return std::move(out_); }

private:
    const Tokenizer& tok_;
    ControlIds ids_;
    std::vector<int32_t> out_;
};

}  // namespace

std::vector<int32_t> render_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 const ChatOptions& options) {
    if (options.thinking) {
        const std::string& e = options.thinking_effort;
        if (e == "medium")
            throw Error(ErrorKind::Usage, "chat: thinking_effort 'medium' is not supported (the official encoder "
                                          "refuses it); use low, high or max");
        if (e != "low" && e != "high" && e != "max")
            throw Error(ErrorKind::Usage, "chat: unknown thinking_effort '" + e + "' (use low, high or max)");
    }
    for (size_t i = 0; i < messages.size(); ++i) {
        const std::string& role = messages[i].role;
        if (role != "system" && role != "user" && role != "assistant")
            throw Error(ErrorKind::Usage, "chat: message " + std::to_string(i) + " has unknown role '" + role +
                                              "' (use system, user or assistant)");
    }
    Renderer r(tok);
    if (options.thinking)
        r.message("message role=\"system\" type=\"thinking-effort\"", [&] { r.text(effort_text(options.thinking_effort)); });
    for (const ChatMessage& m : messages) {
        r.message("message role=\"" + m.role + "\"", [&] {
            if (m.role != "assistant") {
                r.text(m.content);
                return;
            }
            if (options.thinking) {
                r.open_tag("think");
                r.text(m.reasoning_content);
                r.close_tag("think");
            }
            r.open_tag("response");
            r.text(m.content);
            r.close_tag("response");
        });
    }
    if (options.add_generation_prompt) {
        r.open_tag("message role=\"assistant\"");
        r.open_tag(options.thinking ? "think" : "response");
    }
    return r.take();
}

// The parser follows the control tokens: <|open|>/<|close|> start a tag whose name is the text
// up to <|sep|>; "think" and "response" tags switch between reasoning and response text; after
// </response> or </message> text is not the answer's any more; <|end_of_msg|> or [EOS] ends the
// turn. Other tags (e.g. tool calls, which k3serve does not support) are dropped, their body
// stays in the current section.
struct ChatOutputParser::Impl {
    enum class Section { Reasoning, Response, Trailer };

    Impl(const Tokenizer& t, bool thinking)
        : tok(t), ids(t), section(thinking ? Section::Reasoning : Section::Response), reasoning(t), response(t) {}

    const Tokenizer& tok;
    ControlIds ids;
    Section section;
    StreamDecoder reasoning, response;
    bool in_tag = false, tag_is_open = false, ended = false;
    std::string tag;

    void flush_into(Delta& d) {
        d.reasoning += utf8::sanitize(reasoning.flush());
        d.content += utf8::sanitize(response.flush());
    }
    void apply_tag(Delta& d) {
        Section next = section;
        if (tag == "think") next = tag_is_open ? Section::Reasoning : Section::Response;
        else if (tag == "response") next = tag_is_open ? Section::Response : Section::Trailer;
        else if (tag == "message" && !tag_is_open) next = Section::Trailer;
        if (next != section) flush_into(d);
        section = next;
    }
};

ChatOutputParser::ChatOutputParser(const Tokenizer& tok, bool thinking)
    : impl_(std::make_shared<Impl>(tok, thinking)) {}

ChatOutputParser::Delta ChatOutputParser::push(int32_t id) {
    Impl& s = *impl_;
    Delta d;
    if (s.ended) return d;
    if (id == s.ids.end_of_msg || id == s.ids.eos) {
        s.flush_into(d);
        s.ended = true;
        d.end_of_turn = true;
        return d;
    }
    if (id == s.ids.open || id == s.ids.close) {
        s.in_tag = true;
        s.tag_is_open = id == s.ids.open;
        s.tag.clear();
        return d;
    }
    if (id == s.ids.sep) {
        if (s.in_tag) s.apply_tag(d);
        s.in_tag = false;
        return d;
    }
    if (s.tok.is_special(id)) return d;  // other control tokens carry no text
    if (s.in_tag) {
        s.tag += s.tok.token_bytes(id);
        // A tag name is short ("think", "message role=...", ...); a long one means the model
        // wrote a literal <|open|> into its text: give up on the tag.
        if (s.tag.size() > 256) s.in_tag = false;
        return d;
    }
    switch (s.section) {
        case Impl::Section::Reasoning: d.reasoning = utf8::sanitize(s.reasoning.push(id)); break;
        case Impl::Section::Response: d.content = utf8::sanitize(s.response.push(id)); break;
        case Impl::Section::Trailer: break;
    }
    return d;
}

ChatOutputParser::Delta ChatOutputParser::flush() {
    Delta d;
    impl_->flush_into(d);
    return d;
}

}  // namespace k3
