// StreamDecoder: token ids -> text pieces that never end inside a UTF-8 sequence.
#include "k3/tokenizer.h"
#include "tokenizer/utf8.h"
#include "k3/error.h"

namespace k3 {

std::string StreamDecoder::push(int32_t id) {
    std::string_view bytes = tok_.token_bytes(id);
    if (bytes.empty())
        throw Error(ErrorKind::Usage, "tokenizer: unknown token id " + std::to_string(id));
    pending_ += bytes;
    size_t ready = utf8::complete_prefix_length(pending_);
    std::string out = pending_.substr(0, ready);
    pending_.erase(0, ready);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    out.swap(pending_);
    return out;
}

}  // namespace k3
