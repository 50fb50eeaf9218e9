// Kimi K3's tokenizer: tiktoken-style byte-level BPE (tiktoken.model: base64 token bytes and rank
// per line; the rank is the id) with the Kimi split pattern (docs/model.md "Pre-tokenizer") and the
// special tokens of tokenizer_config.json (docs/model.md "Tokenizer files"). Immutable after load:
// safe to use from any thread.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    // Loads tiktoken.model and tokenizer_config.json from `dir`; throws k3::Error naming the
    // file and line on anything malformed.
    static std::unique_ptr<Tokenizer> load(const std::filesystem::path& dir);

    // UTF-8 text -> ids. With allow_special, special-token strings map to their ids; without,
    // they are encoded as plain text (all user-supplied text). Invalid UTF-8 is encoded as its
    // bytes (documented in the README), never an error.
    virtual std::vector<int32_t> encode(std::string_view text, bool allow_special) const = 0;
    // ids -> bytes (specials decode to their literal text). Unknown ids throw k3::Error(Usage).
    virtual std::string decode(std::span<const int32_t> ids) const = 0;
    // The raw bytes of one token (empty for an unknown id).
    virtual std::string_view token_bytes(int32_t id) const = 0;
    virtual bool is_special(int32_t id) const = 0;
    virtual std::optional<int32_t> special_id(std::string_view content) const = 0;
    // Ranks + special slots (the model's vocab_size for real checkpoints).
    virtual int n_vocab() const = 0;
};

// Turns a stream of ids into text that never ends inside a UTF-8 sequence: incomplete bytes are
// held back until a later token completes them; flush() returns whatever is left.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
    std::string push(int32_t id);
    std::string flush();

private:
    const Tokenizer& tok_;
    std::string pending_;
};

}  // namespace k3
