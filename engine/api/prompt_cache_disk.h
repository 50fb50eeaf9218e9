// The prompt cache's disk tier (--prompt-cache-dir): resumable sequence states kept as files, so
// they outlive their place in RAM and the daemon itself. The RAM cache (prompt_cache.h) writes a
// state here when it evicts it and, at the end of every prompt and generation (a state that
// carries its logits), at once; a lookup that finds a longer prefix here than in RAM loads it
// back into RAM.
//
// One file per state, self-contained: a header (format, version, the model fingerprint, the
// state's partition (prompt_cache.h: the API key's, never the key), the state's shape, a hash of
// its tokens), the tokens, the MLA latent rows of every position, the
// KDA snapshot, the logits of the last position (optional), and a checksum (io::run_checksum,
// the packed trunk's) over every byte before it. A file is used only when its checksum, its
// fingerprint, its partition, its shape and its tokens all match; anything else is refused:
// logged, counted, the file removed, and the prefix recomputed. A file of format 1 (written
// before the partitions, so its owner is unknown) is refused the same way when the directory is
// indexed, with a log line that says so. Files are written atomically (io/write_file.h)
// and read with io::File. The directory is bounded by a byte budget; the least recently used
// files go first.
#pragma once
#include <compare>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace k3 {

// One resumable state of tokens[0, n): what travels between the RAM cache and disk.
struct PromptState {
    uint64_t partition = 0;     // the prompt cache partition it was made in, and serves
    std::vector<int32_t> tokens;
    std::vector<float> rows;    // [n_mla][tokens.size()][row_floats]
    std::vector<float> kda;     // the KDA snapshot at tokens.size()
    std::vector<float> logits;  // of the last position; empty when not kept
};

// The shape every state of one model has (a file of another shape is refused).
struct PromptStateShape {
    int n_mla = 0;
    int64_t row_floats = 0;
    int64_t kda_floats = 0;
    int64_t n_vocab = 0;
};

struct PromptCacheDiskStats {
    uint64_t hits = 0;            // states loaded back from disk
    uint64_t writes = 0;          // files written
    uint64_t write_failures = 0;  // writes that failed (disk full, ...): logged, the state is only lost
    uint64_t refused = 0;         // files refused (checksum, fingerprint, shape or tokens) and removed
    uint64_t evictions = 0;       // files removed for the budget
    int64_t bytes = 0;            // on disk now
    int64_t budget = 0;
    int files = 0;
};

class PromptCacheDisk {
public:
    // Creates `dir` if needed and indexes the files there (their headers only; a file whose
    // header is unreadable is refused at once). Throws k3::Error(Io) when `dir` cannot be made.
    PromptCacheDisk(std::filesystem::path dir, int64_t budget_bytes, std::string fingerprint, PromptStateShape shape);

    // The length of the longest prefix of `tokens` longer than `longer_than` with a file of
    // `partition` here (a state at tokens.size() only if it has the logits), or 0.
    size_t longest(uint64_t partition, std::span<const int32_t> tokens, size_t longer_than) const;
    // Reads the state of `prefix` in `partition` into *out. False when there is none or it was refused.
    bool load(uint64_t partition, std::span<const int32_t> prefix, PromptState* out);
    // Whether a file holds `prefix` in `partition` (with its logits, when `with_logits`).
    bool has(uint64_t partition, std::span<const int32_t> prefix, bool with_logits) const;
    // Writes `state` (in state.partition) unless a file already holds it (with logits if it has
    // them); then removes the least recently used files of any partition beyond the budget. A
    // failure is logged and counted.
    void store(const PromptState& state);

    PromptCacheDiskStats stats() const { return stats_; }
    const std::filesystem::path& dir() const { return dir_; }

private:
    struct Entry {
        std::filesystem::path path;
        int64_t bytes = 0;
        bool has_logits = false;
        uint64_t last_used = 0;
    };
    struct Key {
        uint64_t partition = 0;
        size_t tokens = 0;
        uint64_t hash = 0;  // of the tokens (prefix_hashes)
        auto operator<=>(const Key&) const = default;
    };
    void refuse(const Key& key, const std::filesystem::path& path, const std::string& why);
    void forget(const Key& key, bool remove_file);
    void evict_to_budget();

    std::filesystem::path dir_;
    int64_t budget_;
    std::string fingerprint_;
    PromptStateShape shape_;
    std::map<Key, Entry> index_;
    std::map<size_t, int> lengths_;  // prefix lengths present in index_ (any partition), with their counts
    uint64_t clock_ = 0;
    PromptCacheDiskStats stats_;
};

// FNV-1a 64 of each prefix of tokens: out[n] = hash of tokens[0, n) (out.size() == tokens.size() + 1).
std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens);

}  // namespace k3
