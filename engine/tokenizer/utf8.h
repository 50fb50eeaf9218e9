// UTF-8 helpers shared by the tokenizer, the stream decoder and the chat parser.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace k3::utf8 {

// Length of the valid UTF-8 sequence starting at text[pos] (1..4), or 0 if the bytes there are
// not a valid sequence (bad lead byte, bad or missing continuation, overlong, surrogate, or
// beyond U+10FFFF). Follows RFC 3629 / Unicode table 3-7 exactly.
inline size_t valid_sequence_length(std::string_view text, size_t pos) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
    const size_t n = text.size();
    unsigned char c = byte(pos);
    if (c < 0x80) return 1;
    if (c < 0xC2 || c > 0xF4) return 0;
    auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
        return i < n && byte(i) >= lo && byte(i) <= hi;
    };
    if (c < 0xE0) return cont(pos + 1) ? 2 : 0;
    if (c < 0xF0) {
        unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return cont(pos + 1, lo, hi) && cont(pos + 2) ? 3 : 0;
    }
    unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(pos + 1, lo, hi) && cont(pos + 2) && cont(pos + 3) ? 4 : 0;
}

// Length of the longest prefix of `text` that does not end inside a UTF-8 sequence which later
// bytes could still complete. Bytes that can never become valid are not held back.
inline size_t complete_prefix_length(std::string_view text) {
    const size_t n = text.size();
    // An incomplete sequence is at most 3 bytes long: look for its lead byte in the tail.
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        unsigned char c = static_cast<unsigned char>(text[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 1;
        if (c > 0xF4 || need <= back) return n;  // ASCII, invalid lead, or a complete sequence
        // Would the bytes so far be a valid start? Check with a padded copy.
        char buf[4] = {0, 0, 0, 0};
        for (size_t i = 0; i < back; ++i) buf[i] = text[n - back + i];
        // Pad with a continuation byte that every lead accepts in position 2 (0x80..0x8F fits
        // F4's range, 0xA0..0xBF fits E0's): choose per lead.
        char pad = static_cast<char>(c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80);
        for (size_t i = back; i < need; ++i) buf[i] = i == 1 ? pad : static_cast<char>(0x80);
        if (valid_sequence_length(std::string_view(buf, need), 0) == need) return n - back;
        return n;
    }
    return n;
}

}  // namespace k3::utf8

namespace k3::utf8 {

// `text` with every byte that is not part of a valid sequence replaced by U+FFFD, so that it
// can go into JSON. Valid text is returned unchanged.
inline std::string sanitize(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        size_t n = valid_sequence_length(text, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
        } else {
            out.append(text, i, n);
            i += n;
        }
    }
    return out;
}

}  // namespace k3::utf8
