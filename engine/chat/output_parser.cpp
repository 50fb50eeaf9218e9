// The assistant's output, token by token (docs/model.md "Chat layout", xtml-tools.md). Control
// tokens drive it:
// <|open|>/<|close|> start a tag whose text runs to <|sep|>. "think" and "response" switch
// between reasoning and response text; after </response> or </message> text is not the
// answer's any more; <|end_of_msg|> or [EOS] ends the turn. When tool parsing is on, a "tools"
// channel holds calls:
//   <|open|>call tool="NAME" index="N"<|sep|>
//     <|open|>argument key="K" type="T"<|sep|>BODY<|close|>argument<|sep|> ...
//     (or one <|open|>json<|sep|>{...}<|close|>json<|sep|>)
//   <|close|>call<|sep|>
// and each call comes out as ToolCallDelta pieces as soon as the tokens are there: the name when
// the call opens, `{"K":` when an argument opens, a string body escaped as it arrives (never a
// partial tag: tags are control tokens, and the text of a tag is held until its <|sep|>), a
// JSON body once its argument closes (it must parse), `}` when the call closes. Anything that
// breaks the structure turns the channel into plain content (Delta::malformed says why).
// Without tool parsing, unknown tags are dropped and their bodies stay in the current section.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "k3/chat.h"
#include "k3/xtml.h"
#include "tokenizer/utf8.h"

namespace k3 {

namespace {

// A tag's text ("call tool=\"x\" index=\"1\"") split into its name and attributes.
struct Tag {
    std::string name;
    std::vector<std::pair<std::string, std::string>> attributes;
    bool well_formed = true;

    const std::string* attribute(std::string_view key) const {
        for (const auto& [k, v] : attributes)
            if (k == key) return &v;
        return nullptr;
    }
};

Tag parse_tag(std::string_view text) {
    Tag tag;
    size_t i = text.find(' ');
    tag.name = std::string(text.substr(0, i));
    while (i != std::string_view::npos && i < text.size()) {
        while (i < text.size() && text[i] == ' ') ++i;
        if (i >= text.size()) break;
        size_t eq = text.find("=\"", i);
        if (eq == std::string_view::npos) {
            tag.well_formed = false;
            break;
        }
        size_t end = text.find('"', eq + 2);
        if (end == std::string_view::npos) {
            tag.well_formed = false;
            break;
        }
        tag.attributes.emplace_back(std::string(text.substr(i, eq - i)),
                                    xtml::unescape_attribute(text.substr(eq + 2, end - eq - 2)));
        i = end + 1;
    }
    return tag;
}

bool is_blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; });
}

// A JSON string's contents (no quotes) for `text`.
std::string json_string_body(const std::string& text) {
    std::string quoted = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return quoted.substr(1, quoted.size() - 2);
}

bool json_matches_type(const nlohmann::json& v, std::string_view type) {
    if (type == xtml::kTypeNumber) return v.is_number();
    if (type == xtml::kTypeBoolean) return v.is_boolean();
    if (type == xtml::kTypeNull) return v.is_null();
    if (type == xtml::kTypeObject) return v.is_object();
    if (type == xtml::kTypeArray) return v.is_array();
    return false;
}

}  // namespace

struct ChatOutputParser::Impl {
    enum class Section { Reasoning, Response, Trailer, Tools, Raw };

    Impl(const Tokenizer& t, bool thinking, ToolParsing tp)
        : tok(t), section(thinking ? Section::Reasoning : Section::Response), tools(std::move(tp)),
          declared(tools.declared.begin(), tools.declared.end()), reasoning(t), response(t), argument_text(t) {
        open = *t.special_id(xtml::kOpen);
        close = *t.special_id(xtml::kClose);
        sep = *t.special_id(xtml::kSep);
        end_of_msg = *t.special_id(xtml::kEndOfMessage);
        eos = *t.special_id(xtml::kEos);
    }

    const Tokenizer& tok;
    int32_t open, close, sep, end_of_msg, eos;
    Section section;
    ToolParsing tools;
    std::set<std::string, std::less<>> declared;
    StreamDecoder reasoning, response;
    bool in_tag = false, tag_is_open = false, ended = false;
    std::string tag;

    // The tools channel.
    std::string raw;              // every byte of the channel so far (degrades to this)
    size_t raw_sent = 0;          // Raw section: bytes of `raw` already given out as content
    bool call_open = false, argument_open = false, json_open = false;
    bool call_has_arguments = false, call_has_json = false;
    int calls_done = 0;
    std::string argument_type;    // of the open argument
    std::string body;             // a JSON body being collected (non-string argument, json element)
    StreamDecoder argument_text;  // a string argument's text

    void flush_text(Delta& d) {
        d.reasoning += utf8::sanitize(reasoning.flush());
        d.content += utf8::sanitize(response.flush());
    }

    void piece(Delta& d, std::string text, std::string name = {}) {
        if (!name.empty() || d.tool_calls.empty() || d.tool_calls.back().index != calls_done)
            d.tool_calls.push_back({calls_done, std::move(name), {}});
        d.tool_calls.back().arguments += text;
    }

    // Gives up on the structure: the channel so far (this token included) becomes content.
    void malformed(Delta& d, const std::string& why) {
        section = Section::Raw;
        d.malformed = why;
        give_raw(d);
    }
    void give_raw(Delta& d) {
        size_t complete = raw_sent + utf8::complete_prefix_length(std::string_view(raw).substr(raw_sent));
        d.content += utf8::sanitize(std::string_view(raw).substr(raw_sent, complete - raw_sent));
        raw_sent = complete;
    }

    void apply_tag(Delta& d) {
        if (section == Section::Tools) return tools_tag(d);
        Tag t = parse_tag(tag);
        Section next = section;
        if (t.name == xtml::kThink) next = tag_is_open ? Section::Reasoning : Section::Response;
        else if (t.name == xtml::kResponse) next = tag_is_open ? Section::Response : Section::Trailer;
        else if (t.name == xtml::kMessage && !tag_is_open) next = Section::Trailer;
        else if (t.name == xtml::kTools && tag_is_open && tools.enabled &&
                 (section == Section::Response || section == Section::Trailer)) {
            flush_text(d);
            section = Section::Tools;
            raw = std::string(xtml::kOpen) + tag + std::string(xtml::kSep);
            return;
        }
        if (next != section) flush_text(d);
        section = next;
    }

    void tools_tag(Delta& d) {
        Tag t = parse_tag(tag);
        if (!t.well_formed) return malformed(d, "ill-formed tag '" + tag + "'");
        if (tag_is_open) {
            if (t.name == xtml::kCall) {
                if (call_open) return malformed(d, "a call opened inside another call");
                const std::string* name = t.attribute(xtml::kToolAttr);
                if (!name || name->empty()) return malformed(d, "a call without a tool name");
                if (!declared.count(*name)) return malformed(d, "a call to the undeclared tool '" + *name + "'");
                call_open = true;
                call_has_arguments = call_has_json = false;
                piece(d, "", *name);
                return;
            }
            if (t.name == xtml::kArgument) {
                if (!call_open || argument_open || json_open || call_has_json)
                    return malformed(d, "an argument outside a call");
                const std::string* key = t.attribute(xtml::kKeyAttr);
                const std::string* type = t.attribute(xtml::kTypeAttr);
                if (!key) return malformed(d, "an argument without a key");
                argument_type = type ? *type : std::string(xtml::kTypeString);
                bool known = argument_type == xtml::kTypeString || argument_type == xtml::kTypeNumber ||
                             argument_type == xtml::kTypeBoolean || argument_type == xtml::kTypeNull ||
                             argument_type == xtml::kTypeObject || argument_type == xtml::kTypeArray;
                if (!known) return malformed(d, "an argument of unknown type '" + argument_type + "'");
                std::string text = call_has_arguments ? "," : "{";
                text += nlohmann::json(*key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + ":";
                if (argument_type == xtml::kTypeString) text += "\"";
                piece(d, text);
                argument_open = call_has_arguments = true;
                body.clear();
                return;
            }
            if (t.name == xtml::kJson) {
                if (!call_open || call_has_arguments || call_has_json || json_open)
                    return malformed(d, "a json element outside a call or after arguments");
                json_open = true;
                body.clear();
                return;
            }
            return malformed(d, "an unknown element '" + t.name + "' in the tools channel");
        }
        // Closing tags.
        if (t.name == xtml::kArgument && argument_open) {
            argument_open = false;
            if (argument_type == xtml::kTypeString) {
                piece(d, json_string_body(utf8::sanitize(argument_text.flush())) + "\"");
                return;
            }
            nlohmann::json value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
            if (value.is_discarded() || !json_matches_type(value, argument_type))
                return malformed(d, "an argument body that is not a JSON " + argument_type);
            if (value.is_number()) {
                // A number as written (whitespace aside): a parsed integer beyond 64 bits would
                // come back as a double (330433165824714100000 as 3.304331658247141e+20).
                const size_t first = body.find_first_not_of(" \t\r\n"), last = body.find_last_not_of(" \t\r\n");
                piece(d, body.substr(first, last - first + 1));
                return;
            }
            piece(d, value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            return;
        }
        if (t.name == xtml::kJson && json_open) {
            json_open = false;
            nlohmann::json value = nlohmann::json::parse(body, nullptr, false);
            if (value.is_discarded() || !value.is_object())
                return malformed(d, "a json element whose body is not a JSON object");
            call_has_json = true;
            piece(d, value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
            return;
        }
        if (t.name == xtml::kCall && call_open && !argument_open && !json_open) {
            if (!call_has_json) piece(d, call_has_arguments ? "}" : "{}");
            call_open = false;
            ++calls_done;
            return;
        }
        if (t.name == xtml::kTools && !call_open) {
            section = Section::Trailer;
            return;
        }
        malformed(d, "an unexpected closing tag '" + t.name + "'");
    }

    void tools_text(Delta& d, int32_t id) {
        if (argument_open && argument_type == xtml::kTypeString) {
            std::string text = argument_text.push(id);
            if (!text.empty()) piece(d, json_string_body(utf8::sanitize(text)));
            return;
        }
        std::string_view bytes = tok.token_bytes(id);
        if (argument_open || json_open) {
            body += bytes;
            return;
        }
        if (!is_blank(bytes)) malformed(d, "text outside a call's elements");
    }
};

ChatOutputParser::ChatOutputParser(const Tokenizer& tok, bool thinking, ToolParsing tools)
    : impl_(std::make_shared<Impl>(tok, thinking, std::move(tools))) {}

ChatOutputParser::Delta ChatOutputParser::push(int32_t id) {
    Impl& s = *impl_;
    Delta d;
    if (s.ended) return d;
    using Section = Impl::Section;
    bool channel = s.section == Section::Tools || s.section == Section::Raw;
    bool ends_turn = id == s.end_of_msg || id == s.eos;
    if (channel && !ends_turn) s.raw += s.tok.token_bytes(id);
    if (s.section == Section::Raw && !ends_turn) {
        s.give_raw(d);
        return d;
    }
    if (ends_turn) {
        if (s.section == Section::Tools && (s.call_open || s.in_tag)) {
            s.malformed(d, "the turn ended inside a call");
        } else if (s.section == Section::Raw) {
            d.content += utf8::sanitize(std::string_view(s.raw).substr(s.raw_sent));
        }
        s.flush_text(d);
        s.ended = true;
        d.end_of_turn = true;
        return d;
    }
    if (id == s.open || id == s.close) {
        if (s.in_tag && s.section == Section::Tools) {
            s.malformed(d, "a tag opened inside another tag");
            return d;
        }
        s.in_tag = true;
        s.tag_is_open = id == s.open;
        s.tag.clear();
        return d;
    }
    if (id == s.sep) {
        if (s.in_tag) s.apply_tag(d);
        s.in_tag = false;
        return d;
    }
    if (s.tok.is_special(id)) {
        if (s.section == Section::Tools) s.malformed(d, "an unexpected control token in the tools channel");
        return d;  // other control tokens carry no text
    }
    if (s.in_tag) {
        s.tag += s.tok.token_bytes(id);
        // A tag name is short ("think", "call tool=...", ...); a long one means the model
        // wrote a literal <|open|> into its text: give up on the tag.
        if (s.tag.size() > 1024 || (s.tag.size() > 256 && s.section != Section::Tools)) {
            s.in_tag = false;
            if (s.section == Section::Tools) s.malformed(d, "a tag longer than 1024 bytes");
        }
        return d;
    }
    switch (s.section) {
        case Section::Reasoning: d.reasoning = utf8::sanitize(s.reasoning.push(id)); break;
        case Section::Response: d.content = utf8::sanitize(s.response.push(id)); break;
        case Section::Tools: s.tools_text(d, id); break;
        case Section::Trailer:
        case Section::Raw: break;
    }
    return d;
}

ChatOutputParser::Delta ChatOutputParser::flush() {
    Impl& s = *impl_;
    Delta d;
    if (!s.ended) {
        if (s.section == Impl::Section::Tools && (s.call_open || s.in_tag))
            s.malformed(d, "the output ended inside a call");
        if (s.section == Impl::Section::Raw) d.content += utf8::sanitize(std::string_view(s.raw).substr(s.raw_sent));
        s.raw_sent = s.raw.size();
    }
    s.flush_text(d);
    return d;
}

int ChatOutputParser::tool_calls() const { return impl_->calls_done; }

}  // namespace k3
