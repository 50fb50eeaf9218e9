// Synthetic checkpoint writer (see synthetic_checkpoint.h). Speed: tensor bytes are generated in
// 64 KiB blocks on all cores (synthetic_weights.h keeps that deterministic) into one of two large
// buffers while the other is being written, so generation and disk writes overlap.
#include "synthetic/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "synthetic/model_presets.h"
#include "synthetic/vocab.h"
#include "synthetic/weights.h"
#include "k3/error.h"

namespace k3 {

namespace {

namespace fs = std::filesystem;

// Bytes generated per write: large enough that write() calls are few, small enough that two
// buffers stay well under the test memory limit.
constexpr int64_t kChunkBytes = 64ll << 20;

std::string shard_name(int k, int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", k + 1, n);
    return buf;
}

// Consecutive tensors of one layer (trunk + experts), or the model-level tensors (layer -1).
struct Unit {
    std::vector<TensorSpec> tensors;
    int64_t bytes = 0;
};

std::vector<Unit> storage_units(const ModelConfig& cfg) {
    std::vector<Unit> units;
    int current = -2;
    std::vector<TensorSpec> all = model_tensors(cfg);
    for (auto& t : vision_tensors(cfg)) all.push_back(std::move(t));  // with the model-level tensors, last
    for (auto& t : all) {
        if (t.layer != current || units.empty()) {
            units.emplace_back();
            current = t.layer;
        }
        units.back().bytes += t.nbytes();
        units.back().tensors.push_back(std::move(t));
    }
    return units;
}

std::string padded_header(const std::vector<PlannedTensor>& tensors) {
    nlohmann::ordered_json h;
    h["__metadata__"] = {{"format", "pt"}};
    for (const auto& p : tensors) {
        h[p.spec.name] = {{"dtype", dtype_name(p.spec.dtype)},
                          {"shape", p.spec.shape},
                          {"data_offsets", {p.data_begin, p.data_begin + p.spec.nbytes()}}};
    }
    std::string text = h.dump();
    const int64_t unaligned = (8 + int64_t(text.size())) % kShardDataAlignment;
    if (unaligned != 0) text.append(size_t(kShardDataAlignment - unaligned), ' ');
    return text;
}

void write_all(int fd, const uint8_t* data, int64_t n, const fs::path& path) {
    while (n > 0) {
        const ssize_t w = ::write(fd, data, size_t(std::min<int64_t>(n, 1ll << 30)));
        if (w < 0) {
            if (errno == EINTR) continue;
            throw Error(ErrorKind::Io, path.string() + ": write failed: " + std::strerror(errno));
        }
        data += w;
        n -= w;
    }
}

void write_text(const fs::path& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(ErrorKind::Io, path.string() + ": cannot create: " + std::strerror(errno));
    write_all(fd, reinterpret_cast<const uint8_t*>(text.data()), int64_t(text.size()), path);
    if (::close(fd) != 0) throw Error(ErrorKind::Io, path.string() + ": close failed: " + std::strerror(errno));
}

// Generates tensors [first, last) of `shard` into `buf` (their bytes are contiguous in the file).
void fill_chunk(const ShardPlan& shard, const std::vector<TensorRecipe>& recipes, size_t first, size_t last,
                uint8_t* buf) {
    struct Item {
        size_t tensor;
        int64_t block;
    };
    std::vector<Item> items;
    for (size_t i = first; i < last; ++i) {
        const int64_t blocks = (shard.tensors[i].spec.nbytes() + kFillBlockBytes - 1) / kFillBlockBytes;
        for (int64_t b = 0; b < blocks; ++b) items.push_back({i, b});
    }
    const int64_t base = shard.tensors[first].data_begin;
#pragma omp parallel for schedule(dynamic, 4)
    for (size_t k = 0; k < items.size(); ++k) {
        const auto& t = shard.tensors[items[k].tensor];
        uint8_t* out = buf + (t.data_begin - base) + items[k].block * kFillBlockBytes;
        fill_tensor_block(recipes[items[k].tensor], t.spec.nbytes(), items[k].block, out);
    }
}

void write_shard(const ModelConfig& cfg, const ShardPlan& shard, const fs::path& path, uint64_t seed,
                 const AnswerEnding& ending) {
    std::vector<TensorRecipe> recipes;
    for (const auto& t : shard.tensors) recipes.push_back(recipe_for(cfg, t.spec, seed, ending));

    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(ErrorKind::Io, path.string() + ": cannot create: " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() {
            if (fd >= 0) ::close(fd);
        }
    } closer{fd};

    uint8_t length[8];
    const uint64_t n = shard.header.size();
    for (int i = 0; i < 8; ++i) length[i] = uint8_t(n >> (8 * i));  // little-endian u64
    write_all(fd, length, 8, path);
    write_all(fd, reinterpret_cast<const uint8_t*>(shard.header.data()), int64_t(n), path);

    // Double buffering: fill one buffer while the other is written.
    std::vector<uint8_t> buffers[2];
    std::future<void> pending;
    int which = 0;
    for (size_t first = 0; first < shard.tensors.size();) {
        size_t last = first;
        int64_t bytes = 0;
        while (last < shard.tensors.size() && (last == first || bytes + shard.tensors[last].spec.nbytes() <= kChunkBytes))
            bytes += shard.tensors[last++].spec.nbytes();
        auto& buf = buffers[which];
        if (int64_t(buf.size()) < bytes) buf.resize(size_t(bytes));
        fill_chunk(shard, recipes, first, last, buf.data());
        if (pending.valid()) pending.get();
        pending = std::async(std::launch::async, [fd, &buf, bytes, &path] { write_all(fd, buf.data(), bytes, path); });
        which ^= 1;
        first = last;
    }
    if (pending.valid()) pending.get();
    closer.fd = -1;
    if (::close(fd) != 0) throw Error(ErrorKind::Io, path.string() + ": close failed: " + std::strerror(errno));
}

// Files a previous make-model run leaves in a directory.
bool is_generated_file(const std::string& name) {
    static const std::regex shard(R"(model-\d{5}-of-\d{5}\.safetensors)");
    return std::regex_match(name, shard) || name == "model.safetensors.index.json" || name == "config.json" ||
           name == "config.json.tmp" || name == "tiktoken.model" || name == "tokenizer_config.json";
}

void prepare_directory(const fs::path& dir, bool overwrite) {
    std::error_code ec;
    if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
        throw Error(ErrorKind::Usage, dir.string() + ": exists and is not a directory");
    if (!fs::exists(dir, ec)) {
        fs::create_directories(dir, ec);
        if (ec) throw Error(ErrorKind::Io, dir.string() + ": cannot create directory: " + ec.message());
        return;
    }
    std::vector<fs::path> ours;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (is_generated_file(name)) {
            ours.push_back(e.path());
        } else if (!overwrite) {
            throw Error(ErrorKind::Usage, dir.string() + ": directory is not empty (holds " + name +
                                              "); choose a new directory or pass --force");
        } else if (e.path().extension() == ".safetensors") {
            throw Error(ErrorKind::Usage, dir.string() + ": holds " + name +
                                              ", which make-model did not write; refusing to mix it into a new model");
        }
    }
    if (!ours.empty() && !overwrite)
        throw Error(ErrorKind::Usage, dir.string() + ": already holds a model (" + ours.front().filename().string() +
                                          "); choose a new directory or pass --force to replace it");
    // config.json first: a half-replaced directory must not look complete.
    std::sort(ours.begin(), ours.end(), [](const fs::path& a, const fs::path& b) {
        return (a.filename() == "config.json") > (b.filename() == "config.json");
    });
    for (const auto& p : ours) {
        fs::remove(p, ec);
        if (ec) throw Error(ErrorKind::Io, p.string() + ": cannot remove: " + ec.message());
    }
}

}  // namespace

std::vector<ShardPlan> plan_shards(const ModelConfig& cfg, int n_shards) {
    std::vector<Unit> units = storage_units(cfg);
    const int n_units = int(units.size());
    if (n_shards < 1 || n_shards > n_units)
        throw Error(ErrorKind::Usage, "--shards " + std::to_string(n_shards) + ": must be between 1 and " +
                                          std::to_string(n_units) + " (" + std::to_string(cfg.num_hidden_layers) +
                                          " layers plus the model-level tensors; a layer never spans two shards)");
    int64_t total = 0;
    for (const auto& u : units) total += u.bytes;

    std::vector<ShardPlan> shards(static_cast<size_t>(n_shards));
    int next = 0;
    int64_t done = 0;
    for (int k = 0; k < n_shards; ++k) {
        ShardPlan& s = shards[size_t(k)];
        s.file_name = shard_name(k, n_shards);
        // Units for this shard: at least one, leave one for each later shard, and stop at the unit
        // boundary nearest to an equal split.
        const int64_t target = total / n_shards * (k + 1);
        int take_until = next + 1;
        if (k == n_shards - 1) {
            take_until = n_units;
        } else {
            int64_t cum = done + units[size_t(next)].bytes;
            while (take_until < n_units - (n_shards - 1 - k)) {
                const int64_t with_next = cum + units[size_t(take_until)].bytes;
                if (with_next > target && with_next - target >= target - cum) break;
                cum = with_next;
                ++take_until;
            }
        }
        int64_t offset = 0;
        for (int u = next; u < take_until; ++u) {
            done += units[size_t(u)].bytes;
            for (auto& t : units[size_t(u)].tensors) {
                const int64_t nbytes = t.nbytes();
                s.tensors.push_back(PlannedTensor{std::move(t), offset});
                offset += nbytes;
            }
        }
        s.data_bytes = offset;
        s.header = padded_header(s.tensors);
        next = take_until;
    }
    return shards;
}

SyntheticModelStats write_synthetic_model(const ModelConfig& cfg, const fs::path& dir, uint64_t seed, int n_shards,
                                          bool overwrite, const std::function<void(const std::string&)>& progress,
                                          const AnswerEnding& ending) {
    const auto start = std::chrono::steady_clock::now();
    auto seconds_since = [](std::chrono::steady_clock::time_point t) {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    const std::vector<ShardPlan> shards = plan_shards(cfg, n_shards);  // usage errors before touching disk
    const SyntheticVocab vocab = build_synthetic_vocab(cfg.vocab_size);
    prepare_directory(dir, overwrite);

    write_tokenizer_files(vocab, dir);

    SyntheticModelStats stats;
    stats.shards = n_shards;
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t k = 0; k < shards.size(); ++k) {
        const auto shard_start = std::chrono::steady_clock::now();
        write_shard(cfg, shards[k], dir / shards[k].file_name, seed, ending);
        for (const auto& t : shards[k].tensors) {
            weight_map[t.spec.name] = shards[k].file_name;
            stats.tensor_bytes += t.spec.nbytes();
            ++stats.tensors;
        }
        stats.file_bytes += shards[k].file_bytes();
        if (progress) {
            char line[256];
            std::snprintf(line, sizeof line, "%s: %zu tensors, %.1f MB in %.1f s", shards[k].file_name.c_str(),
                          shards[k].tensors.size(), double(shards[k].file_bytes()) / 1e6, seconds_since(shard_start));
            progress(line);
        }
    }

    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", stats.tensor_bytes}};
    index["weight_map"] = weight_map;  // sorted by name, as Hugging Face writes it
    write_text(dir / "model.safetensors.index.json", index.dump(2) + "\n");

    // Last, and atomically: config.json present means the model is complete.
    write_text(dir / "config.json.tmp", release_config_json(cfg));
    std::error_code ec;
    fs::rename(dir / "config.json.tmp", dir / "config.json", ec);
    if (ec) throw Error(ErrorKind::Io, (dir / "config.json").string() + ": cannot rename into place: " + ec.message());

    stats.seconds = seconds_since(start);
    return stats;
}

}  // namespace k3
