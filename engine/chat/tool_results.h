// Where and how the tool results of a conversation are rendered (docs/model.md "Chat layout"):
// each run of consecutive tool messages is put into the order of the preceding assistant turn's
// calls, matched by tool_call_id, and numbered by a running count since that turn.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "k3/chat.h"

namespace k3::chat_layout {

struct ToolResultPlacement {
    std::vector<size_t> order;  // message indices in render order (a permutation of 0..n-1)
    // For each message index: a tool result's `tool` and `index` attributes (others: unused).
    std::vector<std::string> tool;
    std::vector<int> index;
};

// A run whose every result names one of the preceding turn's call ids is sorted into call order
// (results for the same call keep their order) and each takes its call's name. A run with any
// other id keeps its order; each result takes its own name, else the name of the call at its
// position in the run. `index` counts the tool messages since the last assistant message.
ToolResultPlacement place_tool_results(std::span<const ChatMessage> messages);

}  // namespace k3::chat_layout
