// The split patterns, translated from the reference (Rust `regex`/`fancy-regex` syntax, as used
// by tiktoken and by Kimi's tokenization_kimi.py) into PCRE2. Three things differ between the
// two engines, and each is translated so that the set of matched strings stays the same:
//
// 1. `&&` class intersection (Kimi only). PCRE2 10.42 has none. The Kimi letter classes are
//      X = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]  and  Y = [\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]].
//    General categories partition all code points, so the complement of {Lu,Lt,Lm,Lo,M} is
//    exactly {Ll,N,P,S,Z,C} (C includes unassigned Cn). Hence X = [^\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}\p{sc:Han}]
//    and Y = [^\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}\p{sc:Han}]: single classes, so JIT repeats
//    them without per-character backtracking frames (a lookahead per character would need one).
// 2. `\p{Han}`: in Rust it is the Script property; in PCRE2 >= 10.40 a bare script name means
//    Script_Extensions, which would pull in shared CJK punctuation such as U+3001 and U+30FC.
//    So `\p{sc:Han}`.
// 3. `\s`: Rust uses the Unicode White_Space property; PCRE2's UCP `\s` lacks U+0085 (NEL). The
//    White_Space set is written out (it is stable since Unicode 6.3).
// Both engines try alternatives left to right (leftmost-first), so no other change is needed.
// Remaining difference: each library's Unicode version (PCRE2 10.42 has Unicode 14); letters
// assigned after that classify differently (README, "Tokenizer").
#include "tokenizer/split_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <string>

#include "util/check.h"
#include "k3/error.h"

namespace k3 {

namespace {

#define K3_WS "\\t\\n\\x0B\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define K3_CONTRACTION "(?i:'s|'t|'re|'ve|'m|'ll|'d)"

// Reference: [\p{Han}]+ | [^\r\n\p{L}\p{N}]?X*Y+C? | [^\r\n\p{L}\p{N}]?X+Y*C? | \p{N}{1,3}
//          | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
constexpr const char* kKimiPcre2 =
    "\\p{sc:Han}+"
    "|[^\\r\\n\\p{L}\\p{N}]?[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{sc:Han}]*"
    "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{sc:Han}]+" K3_CONTRACTION "?"
    "|[^\\r\\n\\p{L}\\p{N}]?[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{sc:Han}]+"
    "[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}\\p{sc:Han}]*" K3_CONTRACTION "?"
    "|\\p{N}{1,3}"
    "| ?[^" K3_WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" K3_WS "]*[\\r\\n]+"
    "|[" K3_WS "]+(?![^" K3_WS "])"
    "|[" K3_WS "]+";

// Reference: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//          | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
constexpr const char* kCl100kPcre2 =
    K3_CONTRACTION
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}"
    "| ?[^" K3_WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" K3_WS "]*[\\r\\n]+"
    "|[" K3_WS "]+(?![^" K3_WS "])"
    "|[" K3_WS "]+";

// Match data and a JIT stack per thread and pattern: Tokenizer is shared between threads.
struct ThreadMatchState {
    pcre2_match_data* match_data = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
    pcre2_match_context* match_context = nullptr;
    ~ThreadMatchState() {
        if (match_context) pcre2_match_context_free(match_context);
        if (jit_stack) pcre2_jit_stack_free(jit_stack);
        if (match_data) pcre2_match_data_free(match_data);
    }
};

ThreadMatchState& match_state_for(SplitPattern pattern) {
    thread_local ThreadMatchState states[2];
    ThreadMatchState& s = states[pattern == SplitPattern::Kimi ? 0 : 1];
    if (!s.match_data) {
        s.match_data = pcre2_match_data_create(1, nullptr);
        s.jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
        s.match_context = pcre2_match_context_create(nullptr);
        K3_CHECK(s.match_data && s.jit_stack && s.match_context, "pcre2 allocation failed");
        pcre2_jit_stack_assign(s.match_context, nullptr, s.jit_stack);
    }
    return s;
}

// Length of the UTF-8 sequence starting with lead byte `c` (input is already validated).
size_t utf8_length(unsigned char c) {
    if (c < 0x80) return 1;
    if (c < 0xE0) return 2;
    if (c < 0xF0) return 3;
    return 4;
}

}  // namespace

std::string_view split_pattern_pcre2(SplitPattern pattern) {
    return pattern == SplitPattern::Kimi ? kKimiPcre2 : kCl100kPcre2;
}

Pretokenizer::Pretokenizer(SplitPattern pattern) {
    std::string_view src = split_pattern_pcre2(pattern);
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset, nullptr);
    if (!code_) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        throw Error(ErrorKind::Runtime, "tokenizer: split pattern does not compile at offset " +
                                            std::to_string(err_offset) + ": " +
                                            reinterpret_cast<const char*>(msg));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
    (void)match_state_for(pattern);
    pattern_index_ = pattern;
}

Pretokenizer::~Pretokenizer() {
    if (code_) pcre2_code_free(code_);
}

void Pretokenizer::next_match(std::string_view text, size_t pos, size_t& begin, size_t& end) const {
    ThreadMatchState& s = match_state_for(pattern_index_);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    int rc = jit_ ? pcre2_jit_match(code_, subject, text.size(), pos, 0, s.match_data, s.match_context)
                  : pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, s.match_data,
                                s.match_context);
    if (rc > 0) {
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match_data);
        begin = ov[0];
        end = ov[1];
        if (begin == pos && end > pos) return;
        if (begin > pos) {  // unmatched text before the match (cannot happen with these patterns)
            end = begin;
            begin = pos;
            return;
        }
    } else {
        K3_CHECK(rc == PCRE2_ERROR_NOMATCH, "pcre2 match failed with code %d", rc);
    }
    // No (non-empty) match here: take one code point so that the caller always progresses.
    begin = pos;
    end = std::min(text.size(), pos + utf8_length(static_cast<unsigned char>(text[pos])));
}

}  // namespace k3
