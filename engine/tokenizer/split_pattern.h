// The pre-tokenizer: splits valid UTF-8 text into the pieces BPE works on, with PCRE2 (JIT).
#pragma once
#include <cstddef>
#include <functional>
#include <string_view>

#include "tokenizer/bpe_tokenizer.h"

struct pcre2_real_code_8;

namespace k3 {

class Pretokenizer {
public:
    explicit Pretokenizer(SplitPattern pattern);
    ~Pretokenizer();
    Pretokenizer(const Pretokenizer&) = delete;
    Pretokenizer& operator=(const Pretokenizer&) = delete;

    // Calls on_piece(offset, length) for consecutive pieces covering all of `text`, which must
    // be valid UTF-8 (the caller validates; PCRE2's own check would be O(n) per match call).
    // Thread-safe: match data is per thread.
    template <typename F>
    void split(std::string_view text, F&& on_piece) const {
        size_t pos = 0;
        while (pos < text.size()) {
            size_t begin = 0, end = 0;
            next_match(text, pos, begin, end);
            on_piece(begin, end - begin);
            pos = end;
        }
    }

private:
    // The piece starting at `pos`: [begin, end) with begin == pos and end > pos. Text the
    // pattern does not match (none, for these patterns) becomes a piece of its own.
    void next_match(std::string_view text, size_t pos, size_t& begin, size_t& end) const;

    pcre2_real_code_8* code_ = nullptr;
    SplitPattern pattern_index_ = SplitPattern::Kimi;
    bool jit_ = false;
};

}  // namespace k3
