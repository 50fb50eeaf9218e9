// Chat rendering and the output parser (k3/chat.h) on arbitrary messages: rendering either
// succeeds or refuses with k3::Error(Usage); user text never becomes a special token; the
// output parser takes any id sequence and returns UTF-8-complete text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "k3/chat.h"
#include "k3/error.h"

K3_FUZZ_INIT_TOKENIZER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const k3::Tokenizer& tok = k3::fuzz::tokenizer();
    static const char* roles[] = {"system", "user", "assistant", "tool"};
    k3::ChatOptions options;
    options.thinking = data[0] & 1;
    options.add_generation_prompt = data[0] & 2;
    static const char* efforts[] = {"low", "high", "max", "medium"};
    options.thinking_effort = efforts[(data[0] >> 2) & 3];
    // Messages are separated by 0xff; the first byte of each picks the role.
    std::vector<k3::ChatMessage> messages;
    std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    size_t pos = 0;
    while (pos <= text.size() && messages.size() < 16) {
        size_t end = text.find('\xff', pos);
        if (end == std::string::npos) end = text.size();
        std::string part = text.substr(pos, end - pos);
        k3::ChatMessage m;
        m.role = part.empty() ? "user" : roles[uint8_t(part[0]) % 4];
        std::string body = part.empty() ? "" : part.substr(1);
        size_t split = body.find('\xfe');
        m.content = body.substr(0, split);
        if (split != std::string::npos) m.reasoning_content = body.substr(split + 1);
        messages.push_back(m);
        pos = end + 1;
    }
    try {
        std::vector<int32_t> ids = k3::render_chat(tok, messages, options);
        for (int32_t id : ids) K3_FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "rendered id outside the vocabulary");
    } catch (const k3::Error&) {
    }
    // Output parsing: the input's bytes as token ids.
    k3::ChatOutputParser parser(tok, options.thinking);
    for (size_t i = 1; i + 1 < size; i += 2) {
        int32_t id = int32_t((data[i] << 8 | data[i + 1]) % tok.n_vocab());
        auto d = parser.push(id);
        (void)d;
    }
    parser.flush();
    return 0;
}
