// BodyText: JSON text of a whole answer that grows as tokens arrive, kept in blocks so
// that growing never copies what is already there (a std::string doubles: its old and new
// buffers together are 3x the text while it moves) and handing it over frees each block as it
// is copied out. Whole answers are built from these (openai/logprobs_text.h,
// openai/choices_responder.h) so that their peak stays near twice their size (docs/operations.md).
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace k3::server {

class BodyText {
public:
    void append(std::string_view s) {
        size_ += s.size();
        while (!s.empty()) {
            if (blocks_.empty() || blocks_.back().size() == blocks_.back().capacity()) {
                // Blocks double from kFirstBlock up to kBlock, so a short text holds little.
                size_t block = blocks_.empty() ? kFirstBlock : std::min(kBlock, 2 * blocks_.back().capacity());
                blocks_.emplace_back();
                blocks_.back().reserve(block);
            }
            std::string& last = blocks_.back();
            size_t n = std::min(s.size(), last.capacity() - last.size());
            last.append(s.data(), n);
            s.remove_prefix(n);
        }
    }
    void append(char c) { append(std::string_view(&c, 1)); }
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }

    // Appends the text to `out` and frees it, block by block.
    void move_into(std::string& out) {
        for (auto& b : blocks_) {
            out += b;
            std::string().swap(b);
        }
        blocks_.clear();
        size_ = 0;
    }

private:
    static constexpr size_t kFirstBlock = 256, kBlock = 64 * 1024;
    std::vector<std::string> blocks_;
    size_t size_ = 0;
};

}  // namespace k3::server
