// Expected chat prompts written out by hand, segment by segment, from the layout in
// docs/model.md "Chat layout": S("<|open|>") is a control token, T("text") one text segment
// (encoded on its own, specials not allowed), O(name, {{key, value}}) an open tag with each
// attribute as its four segments ` KEY`, `="`, VALUE, `"` (VALUE written here already escaped),
// C(name) a close tag.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "k3/chat.h"
#include "k3/tokenizer.h"

namespace k3::test {

inline ChatMessage chat_message(std::string role, std::string content, std::string reasoning = "") {
    ChatMessage m;
    m.role = std::move(role);
    m.content = std::move(content);
    m.reasoning_content = std::move(reasoning);
    return m;
}

struct ChatExpect {
    using Attrs = std::vector<std::pair<std::string, std::string>>;
    const Tokenizer& tok;
    std::vector<int32_t> ids = {};

    ChatExpect& S(const char* special) {
        ids.push_back(*tok.special_id(special));
        return *this;
    }
    ChatExpect& T(const std::string& text) {
        auto t = tok.encode(text, false);
        ids.insert(ids.end(), t.begin(), t.end());
        return *this;
    }
    ChatExpect& O(const std::string& name, const Attrs& attrs = {}) {
        S("<|open|>").T(name);
        for (const auto& [key, value] : attrs) T(" " + key).T("=\"").T(value).T("\"");
        return S("<|sep|>");
    }
    ChatExpect& C(const std::string& name) { return S("<|close|>").T(name).S("<|sep|>"); }
    // <|open|>message role="ROLE"<|sep|> (more attributes after role when given)
    ChatExpect& M(const std::string& role, const Attrs& more = {}) {
        Attrs attrs = {{"role", role}};
        attrs.insert(attrs.end(), more.begin(), more.end());
        return O("message", attrs);
    }
    ChatExpect& end_message() { return C("message").S("<|end_of_msg|>"); }
    // A whole internal system message: role="system" type="TYPE", BODY.
    ChatExpect& system(const std::string& type, const std::string& body) {
        return M("system", {{"type", type}}).T(body).end_message();
    }
};

}  // namespace k3::test
