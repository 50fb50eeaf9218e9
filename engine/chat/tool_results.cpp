#include "chat/tool_results.h"

#include <algorithm>

namespace k3::chat_layout {

ToolResultPlacement place_tool_results(std::span<const ChatMessage> messages) {
    const size_t n = messages.size();
    ToolResultPlacement p;
    p.order.resize(n);
    p.tool.resize(n);
    p.index.assign(n, 0);
    for (size_t i = 0; i < n; ++i) p.order[i] = i;
    const ChatMessage* turn = nullptr;  // the latest assistant message
    int since_turn = 0;                 // tool messages since it
    for (size_t i = 0; i < n;) {
        if (messages[i].role == "assistant") turn = &messages[i], since_turn = 0;
        if (messages[i].role != "tool") {
            ++i;
            continue;
        }
        size_t end = i;
        while (end < n && messages[end].role == "tool") ++end;
        static const std::vector<ChatToolCall> kNoCalls;
        const std::vector<ChatToolCall>& calls = turn ? turn->tool_calls : kNoCalls;
        auto call_of = [&](const std::string& id) -> long {
            if (id.empty()) return -1;
            for (size_t c = 0; c < calls.size(); ++c)
                if (calls[c].id == id) return long(c);
            return -1;
        };
        bool all_matched = true;
        for (size_t k = i; k < end; ++k) all_matched = all_matched && call_of(messages[k].tool_call_id) >= 0;
        if (all_matched) {
            std::stable_sort(p.order.begin() + long(i), p.order.begin() + long(end), [&](size_t a, size_t b) {
                return call_of(messages[a].tool_call_id) < call_of(messages[b].tool_call_id);
            });
            for (size_t k = i; k < end; ++k) p.tool[k] = calls[size_t(call_of(messages[k].tool_call_id))].name;
        } else {
            for (size_t k = i; k < end; ++k) {
                const size_t position = k - i;
                p.tool[k] = !messages[k].tool_name.empty() ? messages[k].tool_name
                            : position < calls.size()      ? calls[position].name
                                                           : std::string();
            }
        }
        for (size_t k = i; k < end; ++k) p.index[p.order[k]] = ++since_turn;
        i = end;
    }
    return p;
}

}  // namespace k3::chat_layout
