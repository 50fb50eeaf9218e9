#include "worker/job_channel.h"

namespace k3::server {

size_t event_bytes(const JobEvent& event) {
    // Fixed costs: the event itself, and per logprob entry its vector slot and string headers.
    constexpr size_t kPerEvent = sizeof(JobEvent), kPerEntry = 48;
    size_t n = kPerEvent + event.content.size() + event.reasoning.size();
    for (const auto& lp : event.logprobs) {
        n += sizeof(TokenLogprob) + lp.text.size();
        for (const auto& [text, value] : lp.top) n += kPerEntry + text.size();
    }
    for (const auto& call : event.tool_calls) n += sizeof(ToolCallDelta) + call.name.size() + call.arguments.size();
    return n;
}

}  // namespace k3::server
