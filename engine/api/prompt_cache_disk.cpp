// The prompt cache's disk tier (prompt_cache_disk.h).
#include "api/prompt_cache_disk.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "io/file.h"
#include "io/write_file.h"
#include "k3/error.h"
#include "store/trunk_pack.h"  // io::run_checksum
#include "k3/fnv1a.h"

namespace k3 {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'K', '3', 'P', 'C', 'A', 'C', 'H', 'E'};
// 2: the header carries the state's partition (1 had none: such a file is refused, since whose
// it was cannot be told).
constexpr uint32_t kVersion = 2;
constexpr const char* kExtension = ".k3pc";

// The file's first bytes (host byte order: the files never leave the machine that wrote them).
struct FileHeader {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    char fingerprint[16];  // the model's (ModelInfo::fingerprint, 16 hex digits)
    uint64_t partition;    // PromptState::partition
    uint64_t n_tokens;
    uint64_t token_hash;   // prefix_hashes(tokens)[n_tokens]
    uint32_t n_mla;
    uint32_t has_logits;
    uint64_t row_floats;
    uint64_t kda_floats;
    uint64_t logits_floats;
};
static_assert(sizeof(FileHeader) == 88);

// Bytes of the whole file for a header (payload and the trailing checksum), or -1 when the
// header's sizes cannot be right.
int64_t file_bytes(const FileHeader& h) {
    constexpr uint64_t kLimit = uint64_t(1) << 40;
    if (h.n_tokens > kLimit || h.row_floats > kLimit || h.kda_floats > kLimit || h.logits_floats > kLimit ||
        h.n_mla > 4096)
        return -1;
    const uint64_t floats = uint64_t(h.n_mla) * h.n_tokens * h.row_floats + h.kda_floats + h.logits_floats;
    if (floats > kLimit) return -1;
    return int64_t(sizeof(FileHeader) + h.n_tokens * sizeof(int32_t) + floats * sizeof(float) + sizeof(uint64_t));
}

std::string hex16(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

template <class T>
std::span<const uint8_t> bytes_of(const std::vector<T>& v) {
    return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace

std::vector<uint64_t> prefix_hashes(std::span<const int32_t> tokens) {
    std::vector<uint64_t> out(tokens.size() + 1);
    Fnv1a h;
    out[0] = h.value();
    for (size_t i = 0; i < tokens.size(); ++i) out[i + 1] = h.add_u32_le(uint32_t(tokens[i])).value();
    return out;
}

PromptCacheDisk::PromptCacheDisk(fs::path dir, int64_t budget_bytes, std::string fingerprint, PromptStateShape shape)
    : dir_(std::move(dir)), budget_(budget_bytes), fingerprint_(std::move(fingerprint)), shape_(shape) {
    fingerprint_.resize(sizeof(FileHeader::fingerprint), '0');
    stats_.budget = budget_;
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec || !fs::is_directory(dir_))
        throw Error(ErrorKind::Io, "--prompt-cache-dir " + dir_.string() + ": cannot create the directory" +
                                       (ec ? ": " + ec.message() : std::string()));

    // Index what an earlier run left, oldest first (so recency starts from modification time).
    std::vector<std::pair<fs::file_time_type, fs::path>> found;
    for (const fs::directory_entry& de : fs::directory_iterator(dir_, ec)) {
        const fs::path& p = de.path();
        const std::string name = p.filename().string();
        if (name.find(std::string(kExtension) + ".tmp-") != std::string::npos) {
            fs::remove(p, ec);  // an interrupted write
            continue;
        }
        if (p.extension() != kExtension || !de.is_regular_file(ec)) continue;
        found.emplace_back(de.last_write_time(ec), p);
    }
    std::sort(found.begin(), found.end());
    for (const auto& [mtime, p] : found) {
        FileHeader h{};
        bool ok = false;
        int64_t size = 0;
        try {
            io::File f = io::File::open(p, /*try_direct=*/false);
            size = f.size_at_open();
            // (the magic and the version come first in every format)
            if (size >= int64_t(sizeof h.magic + sizeof h.version))
                f.read_exact(&h, std::min<int64_t>(size, int64_t(sizeof h)), 0, "prompt cache header");
            ok = size >= int64_t(sizeof h) && std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 &&
                 h.version == kVersion && h.header_bytes == sizeof h && file_bytes(h) == size;
        } catch (const std::exception&) {
            ok = false;
        }
        const Key key{h.partition, size_t(h.n_tokens), h.token_hash};
        if (!ok && std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version < kVersion) {
            refuse(key, p, "written by an older k3serve (prompt cache format " + std::to_string(h.version) +
                               ", this one reads " + std::to_string(kVersion) +
                               ", whose states carry their API key's partition); whose state it was cannot be told");
            continue;
        }
        if (!ok) {
            refuse(key, p, "not a prompt cache file of this version, or truncated");
            continue;
        }
        if (index_.count(key)) {  // the same state twice (renamed by hand): keep one
            fs::remove(p, ec);
            continue;
        }
        index_[key] = Entry{p, size, h.has_logits != 0, ++clock_};
        ++lengths_[key.tokens];
        stats_.bytes += size;
        ++stats_.files;
    }
    evict_to_budget();
}

size_t PromptCacheDisk::longest(uint64_t partition, std::span<const int32_t> tokens, size_t longer_than) const {
    if (index_.empty()) return 0;
    const std::vector<uint64_t> h = prefix_hashes(tokens);
    for (auto it = lengths_.rbegin(); it != lengths_.rend(); ++it) {
        const size_t n = it->first;
        if (n <= longer_than) break;
        if (n > tokens.size()) continue;
        auto e = index_.find(Key{partition, n, h[n]});
        if (e != index_.end() && (n < tokens.size() || e->second.has_logits)) return n;
    }
    return 0;
}

bool PromptCacheDisk::has(uint64_t partition, std::span<const int32_t> prefix, bool with_logits) const {
    auto e = index_.find(Key{partition, prefix.size(), prefix_hashes(prefix).back()});
    return e != index_.end() && (!with_logits || e->second.has_logits);
}

void PromptCacheDisk::forget(const Key& key, bool remove_file) {
    auto e = index_.find(key);
    if (e == index_.end()) return;
    std::error_code ec;
    if (remove_file) fs::remove(e->second.path, ec);
    stats_.bytes -= e->second.bytes;
    --stats_.files;
    if (--lengths_[key.tokens] == 0) lengths_.erase(key.tokens);
    index_.erase(e);
}

void PromptCacheDisk::refuse(const Key& key, const fs::path& path, const std::string& why) {
    spdlog::warn("prompt cache: refused {}: {}; the file is removed and its prefix will be recomputed",
                 path.string(), why);
    ++stats_.refused;
    if (index_.count(key) && index_[key].path == path) {
        forget(key, true);
    } else {
        std::error_code ec;
        fs::remove(path, ec);
    }
}

bool PromptCacheDisk::load(uint64_t partition, std::span<const int32_t> prefix, PromptState* out) {
    const Key key{partition, prefix.size(), prefix_hashes(prefix).back()};
    auto e = index_.find(key);
    if (e == index_.end()) return false;
    const fs::path path = e->second.path;

    std::vector<uint8_t> bytes;
    try {
        io::File f = io::File::open(path, /*try_direct=*/false);
        bytes.resize(size_t(f.size_at_open()));
        if (bytes.size() < sizeof(FileHeader) + sizeof(uint64_t)) {
            refuse(key, path, "truncated");
            return false;
        }
        f.read_exact(bytes.data(), int64_t(bytes.size()), 0, "prompt cache entry");
    } catch (const std::exception& ex) {
        refuse(key, path, ex.what());
        return false;
    }
    uint64_t stored = 0;
    std::memcpy(&stored, bytes.data() + bytes.size() - sizeof stored, sizeof stored);
    if (io::run_checksum(bytes.data(), bytes.size() - sizeof stored) != stored) {
        refuse(key, path, "checksum mismatch (the file is damaged)");
        return false;
    }
    FileHeader h{};
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion || file_bytes(h) != int64_t(bytes.size())) {
        refuse(key, path, "not a prompt cache file of this version");
        return false;
    }
    if (std::string(h.fingerprint, sizeof h.fingerprint) != fingerprint_) {
        refuse(key, path, "written for another model (fingerprint " + std::string(h.fingerprint, sizeof h.fingerprint) +
                              ", this model's is " + fingerprint_ + ")");
        return false;
    }
    if (int(h.n_mla) != shape_.n_mla || int64_t(h.row_floats) != shape_.row_floats ||
        int64_t(h.kda_floats) != shape_.kda_floats ||
        (h.logits_floats != 0 && int64_t(h.logits_floats) != shape_.n_vocab)) {
        refuse(key, path, "state of another shape");
        return false;
    }
    if (h.partition != partition) {
        refuse(key, path, "its partition is not the one it is filed under");
        return false;
    }
    const uint8_t* p = bytes.data() + sizeof h;
    if (h.n_tokens != prefix.size() || std::memcmp(p, prefix.data(), prefix.size() * sizeof(int32_t)) != 0) {
        refuse(key, path, "its tokens are not the prefix it is filed under");
        return false;
    }
    auto take = [&p](std::vector<float>& v, uint64_t n) {
        v.resize(size_t(n));
        std::memcpy(v.data(), p, size_t(n) * sizeof(float));
        p += n * sizeof(float);
    };
    out->partition = partition;
    out->tokens.assign(prefix.begin(), prefix.end());
    p += prefix.size() * sizeof(int32_t);
    take(out->rows, uint64_t(h.n_mla) * h.n_tokens * h.row_floats);
    take(out->kda, h.kda_floats);
    take(out->logits, h.logits_floats);
    e->second.last_used = ++clock_;
    ++stats_.hits;
    return true;
}

void PromptCacheDisk::store(const PromptState& s) {
    const size_t n = s.tokens.size();
    if (n == 0 || s.kda.size() != size_t(shape_.kda_floats) ||
        s.rows.size() != size_t(shape_.n_mla) * n * size_t(shape_.row_floats))
        return;
    const uint64_t hash = prefix_hashes(s.tokens).back();
    const Key key{s.partition, n, hash};
    if (auto e = index_.find(key); e != index_.end()) {
        e->second.last_used = ++clock_;
        if (e->second.has_logits || s.logits.empty()) return;
    }
    FileHeader h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.version = kVersion;
    h.header_bytes = sizeof h;
    std::memcpy(h.fingerprint, fingerprint_.data(), sizeof h.fingerprint);
    h.partition = s.partition;
    h.n_tokens = n;
    h.token_hash = hash;
    h.n_mla = uint32_t(shape_.n_mla);
    h.has_logits = s.logits.empty() ? 0 : 1;
    h.row_floats = uint64_t(shape_.row_floats);
    h.kda_floats = s.kda.size();
    h.logits_floats = s.logits.size();
    const int64_t total = file_bytes(h);
    if (total > budget_) return;  // would not fit even alone

    std::vector<uint8_t> head(sizeof h);
    std::memcpy(head.data(), &h, sizeof h);
    // the checksum covers every byte before it, in the order written
    const std::span<const uint8_t> parts[] = {head, bytes_of(s.tokens), bytes_of(s.rows), bytes_of(s.kda),
                                              bytes_of(s.logits)};
    std::vector<uint8_t> body;
    body.reserve(size_t(total));
    for (std::span<const uint8_t> part : parts) body.insert(body.end(), part.begin(), part.end());
    const uint64_t sum = io::run_checksum(body.data(), body.size());
    body.resize(body.size() + sizeof sum);
    std::memcpy(body.data() + body.size() - sizeof sum, &sum, sizeof sum);

    const fs::path path = dir_ / (hex16(s.partition) + "-" + hex16(hash) + "-" + std::to_string(n) + kExtension);
    try {
        const std::span<const uint8_t> whole[] = {body};
        io::write_file_atomically(path, whole);
    } catch (const std::exception& ex) {
        ++stats_.write_failures;
        spdlog::warn("prompt cache: could not write {}: {}", path.string(), ex.what());
        return;
    }
    forget(key, false);  // replaced (a state without logits by the same one with them)
    index_[key] = Entry{path, total, !s.logits.empty(), ++clock_};
    ++lengths_[n];
    stats_.bytes += total;
    ++stats_.files;
    ++stats_.writes;
    evict_to_budget();
}

void PromptCacheDisk::evict_to_budget() {
    while (stats_.bytes > budget_ && !index_.empty()) {
        auto victim = index_.begin();
        for (auto it = index_.begin(); it != index_.end(); ++it)
            if (it->second.last_used < victim->second.last_used) victim = it;
        forget(victim->first, true);
        ++stats_.evictions;
    }
}

}  // namespace k3
