// Tokenizer encode/decode and the UTF-8 stream decoder (k3/tokenizer.h) on arbitrary bytes:
// decode(encode(text)) == text for any bytes (byte-level BPE, specials not parsed), and the
// stream decoder's pieces add up to decode() of the same ids.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"

K3_FUZZ_INIT_TOKENIZER

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const k3::Tokenizer& tok = k3::fuzz::tokenizer();
    std::string_view text(reinterpret_cast<const char*>(data), size);
    auto ids = tok.encode(text, false);
    for (int32_t id : ids) K3_FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "id outside the vocabulary");
    K3_FUZZ_CHECK(tok.decode(ids) == text, "decode(encode(text)) != text");
    auto with_specials = tok.encode(text, true);
    K3_FUZZ_CHECK(tok.decode(with_specials) == text, "decode(encode(text, specials)) != text");
    k3::StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : with_specials) streamed += stream.push(id);
    streamed += stream.flush();
    K3_FUZZ_CHECK(streamed == text, "stream decoder pieces != decode()");
    return 0;
}
