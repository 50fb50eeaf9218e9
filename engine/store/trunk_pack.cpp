#include "store/trunk_pack.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/file.h"
#include "k3/error.h"
#include "store/trunk_codec.h"

namespace k3::io {

namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Incremental form of run_checksum: the same result whatever the chunking.
class RunHasher {
public:
    void update(const uint8_t* p, size_t n) {
        total_ += n;
        if (pending_n_ > 0) {
            size_t take = std::min(n, sizeof pending_ - pending_n_);
            std::memcpy(pending_ + pending_n_, p, take);
            pending_n_ += take;
            p += take;
            n -= take;
            if (pending_n_ < sizeof pending_) return;
            block(pending_);
            pending_n_ = 0;
        }
        while (n >= 32) {
            block(p);
            p += 32;
            n -= 32;
        }
        std::memcpy(pending_, p, n);
        pending_n_ = n;
    }
    uint64_t finish() const {
        uint64_t h = rotl(lane_[0], 1) + rotl(lane_[1], 7) + rotl(lane_[2], 12) + rotl(lane_[3], 18);
        h ^= total_ * kP3;
        for (size_t i = 0; i < pending_n_; ++i) h = rotl(h ^ (pending_[i] * kP1), 11) * kP2;
        h ^= h >> 33;
        h *= kP2;
        h ^= h >> 29;
        return h;
    }

private:
    void block(const uint8_t* p) {
        for (int i = 0; i < 4; ++i) {
            uint64_t w;
            std::memcpy(&w, p + 8 * i, 8);
            lane_[i] = rotl(lane_[i] + w * kP2, 31) * kP1;
        }
    }
    uint64_t lane_[4] = {kP1 + kP2, kP2, 0, uint64_t(0) - kP1};
    uint8_t pending_[32];
    size_t pending_n_ = 0;
    uint64_t total_ = 0;
};

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
    return buf;
}

void check_read(const Status& s) {
    if (!s.ok()) throw Error(ErrorKind::Io, s.message);
}

}  // namespace

// Raw bytes [at, at + n) of a compressed layer, by decoding the blocks that hold them (the
// load-time probe; the engine's reads go through the streaming store).
static Status read_packed_bytes(const File& bin, const TrunkPack& pack, const PackedLayer& pl, int64_t at, int64_t n,
                                uint8_t* dst) {
    std::vector<uint8_t> enc, raw;
    for (int64_t k = at / pack.block_bytes; k * pack.block_bytes < at + n; ++k) {
        const int64_t raw_lo = k * pack.block_bytes, raw_n = std::min(pack.block_bytes, pl.nbytes - raw_lo);
        enc.resize(size_t(pl.blocks[size_t(k)]));
        raw.resize(size_t(raw_n));
        if (Status s = bin.pread_full(enc.data(), enc.size(), pl.block_offset(size_t(k))); !s.ok()) return s;
        if (!decode_block(enc.data(), enc.size(), raw.data(), raw.size()))
            return io_error(bin.path(), pl.block_offset(size_t(k)), int64_t(enc.size()),
                            "block " + std::to_string(k) + " of layer " + std::to_string(pl.layer) + " does not decode");
        const int64_t lo = std::max(at, raw_lo), hi = std::min(at + n, raw_lo + raw_n);
        std::memcpy(dst + (lo - at), raw.data() + (lo - raw_lo), size_t(hi - lo));
    }
    return Status::Ok();
}

int64_t PackedLayer::block_offset(size_t k) const {
    int64_t at = file_offset;
    for (size_t j = 0; j < k; ++j) at += align_up(blocks[j], kTrunkPackAlign);
    return at;
}

int64_t PackedLayer::stored_bytes() const {
    return blocks.empty() ? nbytes : block_offset(blocks.size()) - file_offset;
}

uint64_t run_checksum(const uint8_t* data, size_t n) {
    RunHasher h;
    h.update(data, n);
    return h.finish();
}

TrunkPack write_trunk_pack(const Checkpoint& ckpt, const std::filesystem::path& out_dir,
                           const std::function<void(const std::string&)>& progress, bool compress) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) throw Error(ErrorKind::Io, "cannot create " + out_dir.string() + ": " + ec.message());
    const auto& shards = ckpt.directory.shards();
    std::vector<File> files;
    for (const auto& s : shards) files.push_back(File::open(s.path, /*try_direct=*/false));

    std::filesystem::path bin_tmp = out_dir / (std::string(kTrunkPackFile) + ".tmp");
    int out = ::open(bin_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) throw Error(ErrorKind::Io, "cannot create " + bin_tmp.string() + ": " + std::strerror(errno));

    TrunkPack pack;
    pack.dir = out_dir;
    pack.compressed = compress;
    pack.block_bytes = compress ? kCodecBlockBytes : 0;
    constexpr size_t kChunk = size_t(64) << 20;  // a whole number of codec blocks
    static_assert(kChunk % size_t(kCodecBlockBytes) == 0);
    std::vector<uint8_t> chunk(kChunk), encoded;
    int64_t file_offset = 0;
    double entropy_sum = 0, entropy_words = 0;
    auto write_at = [&](const uint8_t* p, size_t n, int64_t at) {
        for (size_t w = 0; w < n;) {
            ssize_t r = ::pwrite(out, p + w, n - w, off_t(at + int64_t(w)));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                ::close(out);
                throw Error(ErrorKind::Io, "cannot write " + bin_tmp.string() + ": " + std::strerror(errno));
            }
            w += size_t(r);
        }
    };
    for (int il = 0; il < int(ckpt.layer_runs.size()); ++il) {
        const ByteRun& run = ckpt.layer_runs[il];
        PackedLayer pl;
        pl.layer = il;
        pl.file_offset = file_offset;
        pl.nbytes = run.nbytes;
        pl.shard = shards[run.shard].path.filename().string();
        pl.shard_offset = run.offset;
        RunHasher hasher;
        int64_t write_at_offset = file_offset;
        for (int64_t done = 0; done < run.nbytes;) {
            size_t n = size_t(std::min<int64_t>(int64_t(kChunk), run.nbytes - done));
            check_read(files[run.shard].pread_full(chunk.data(), n, run.offset + done));
            hasher.update(chunk.data(), n);
            if (!compress) {
                write_at(chunk.data(), n, file_offset + done);
            } else {
                for (size_t b = 0; b < n; b += size_t(kCodecBlockBytes)) {
                    const size_t raw = std::min(n - b, size_t(kCodecBlockBytes));
                    encoded.clear();
                    const size_t enc = encode_block(chunk.data() + b, raw, encoded);
                    write_at(encoded.data(), enc, write_at_offset);
                    pl.blocks.push_back(int64_t(enc));
                    write_at_offset += align_up(int64_t(enc), kTrunkPackAlign);
                    entropy_sum += high_byte_entropy_bits(chunk.data() + b, raw) * double(raw / 2);
                    entropy_words += double(raw / 2);
                }
            }
            done += int64_t(n);
        }
        pl.checksum = hasher.finish();
        file_offset = align_up(file_offset + pl.stored_bytes(), kTrunkPackAlign);
        if (progress)
            progress("layer " + std::to_string(il) + ": " + std::to_string(run.nbytes) + " bytes from " + pl.shard +
                     " at " + std::to_string(run.offset) + ", " + std::to_string(pl.stored_bytes()) + " stored");
        pack.layers.push_back(pl);
    }
    if (ftruncate(out, off_t(file_offset)) != 0 || fsync(out) != 0) {
        ::close(out);
        throw Error(ErrorKind::Io, "cannot finish " + bin_tmp.string() + ": " + std::strerror(errno));
    }
    ::close(out);

    nlohmann::json j;
    pack.high_byte_entropy_bits = entropy_words > 0 ? entropy_sum / entropy_words : 0;
    j["format"] = "k3serve-trunk-pack";
    j["version"] = compress ? 2 : 1;
    if (compress) {
        j["codec"] = "bf16-nibble";
        j["block_bytes"] = pack.block_bytes;
    }
    j["align"] = kTrunkPackAlign;
    j["n_layers"] = pack.layers.size();
    j["model"] = ckpt.dir.filename().string();
    for (const auto& pl : pack.layers) {
        nlohmann::json e = {{"layer", pl.layer},       {"file_offset", pl.file_offset},   {"nbytes", pl.nbytes},
                            {"shard", pl.shard},       {"shard_offset", pl.shard_offset}, {"checksum", hex64(pl.checksum)}};
        if (compress) e["blocks"] = pl.blocks;
        j["layers"].push_back(std::move(e));
    }
    std::filesystem::path json_tmp = out_dir / (std::string(kTrunkPackManifest) + ".tmp");
    {
        std::ofstream o(json_tmp);
        o << j.dump(1) << "\n";
        if (!o) throw Error(ErrorKind::Io, "cannot write " + json_tmp.string());
    }
    std::filesystem::rename(bin_tmp, out_dir / kTrunkPackFile);
    std::filesystem::rename(json_tmp, out_dir / kTrunkPackManifest);
    return pack;
}

TrunkPack open_trunk_pack(const std::filesystem::path& dir, const Checkpoint& ckpt) {
    const auto manifest_path = dir / kTrunkPackManifest;
    const auto bin_path = dir / kTrunkPackFile;
    std::ifstream in(manifest_path);
    if (!in) throw Error(ErrorKind::Checkpoint, "packed trunk: cannot read " + manifest_path.string());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
        throw Error(ErrorKind::Checkpoint, "packed trunk: " + manifest_path.string() + " is not valid JSON: " + e.what());
    }
    std::vector<std::string> problems;
    TrunkPack pack;
    pack.dir = dir;
    try {
        const int version = j.value("version", 0);
        if (j.value("format", "") != "k3serve-trunk-pack" || (version != 1 && version != 2))
            problems.push_back("format/version is not k3serve-trunk-pack 1 or 2");
        if (version == 2) {
            pack.compressed = true;
            pack.block_bytes = j.value("block_bytes", int64_t(0));
            if (j.value("codec", "") != "bf16-nibble") problems.push_back("codec is not bf16-nibble");
            if (pack.block_bytes <= 0 || pack.block_bytes % 2 != 0) problems.push_back("block_bytes is not a positive even number");
        }
        if (j.value("align", 0) != kTrunkPackAlign) problems.push_back("align is not 4096");
        const auto& layers = j.at("layers");
        if (layers.size() != ckpt.layer_runs.size())
            problems.push_back("has " + std::to_string(layers.size()) + " layers, the checkpoint has " +
                               std::to_string(ckpt.layer_runs.size()));
        for (const auto& e : layers) {
            PackedLayer pl;
            pl.layer = e.at("layer").get<int>();
            pl.file_offset = e.at("file_offset").get<int64_t>();
            pl.nbytes = e.at("nbytes").get<int64_t>();
            pl.shard = e.at("shard").get<std::string>();
            pl.shard_offset = e.at("shard_offset").get<int64_t>();
            pl.checksum = std::stoull(e.at("checksum").get<std::string>(), nullptr, 16);
            if (pack.compressed) pl.blocks = e.at("blocks").get<std::vector<int64_t>>();
            pack.layers.push_back(pl);
        }
    } catch (const std::exception& e) {
        throw Error(ErrorKind::Checkpoint, "packed trunk: " + manifest_path.string() + ": missing or malformed field: " + e.what());
    }
    if (!std::filesystem::exists(bin_path)) problems.push_back(bin_path.string() + " is missing");
    if (problems.empty()) {
        File bin = File::open(bin_path, false);
        const auto& shards = ckpt.directory.shards();
        std::vector<uint8_t> a, b;
        for (size_t il = 0; il < pack.layers.size(); ++il) {
            const PackedLayer& pl = pack.layers[il];
            const ByteRun& run = ckpt.layer_runs[il];
            std::string where = "layer " + std::to_string(il) + ": ";
            std::string shard_name = shards[run.shard].path.filename().string();
            if (pl.layer != int(il)) problems.push_back(where + "entry is for layer " + std::to_string(pl.layer));
            if (pl.nbytes != run.nbytes)
                problems.push_back(where + "run is " + std::to_string(pl.nbytes) + " bytes, the checkpoint's is " +
                                   std::to_string(run.nbytes));
            if (pl.shard != shard_name || pl.shard_offset != run.offset)
                problems.push_back(where + "packed from " + pl.shard + " at " + std::to_string(pl.shard_offset) +
                                   ", the checkpoint has it in " + shard_name + " at " + std::to_string(run.offset));
            if (pl.file_offset % kTrunkPackAlign != 0) problems.push_back(where + "file_offset is not 4096-aligned");
            if (pack.compressed) {
                const int64_t want = pack.block_bytes > 0 ? (pl.nbytes + pack.block_bytes - 1) / pack.block_bytes : -1;
                bool sizes_ok = int64_t(pl.blocks.size()) == want;
                for (size_t k = 0; sizes_ok && k < pl.blocks.size(); ++k) {
                    const int64_t raw = std::min(pack.block_bytes, pl.nbytes - int64_t(k) * pack.block_bytes);
                    sizes_ok = pl.blocks[k] > 0 && pl.blocks[k] <= int64_t(max_encoded_bytes(raw));
                }
                if (!sizes_ok) problems.push_back(where + "block table does not fit a run of " + std::to_string(pl.nbytes) + " bytes");
            }
            if (problems.empty() && pl.file_offset + pl.stored_bytes() > bin.size_at_open())
                problems.push_back(where + "run ends past the end of " + bin_path.string());
            if (!problems.empty()) continue;
            // The first and last bytes of the run, in both files.
            File shard = File::open(shards[run.shard].path, false);
            int64_t probe = std::min<int64_t>(run.nbytes, 64 << 10);
            for (int64_t at : {int64_t(0), run.nbytes - probe}) {
                a.resize(size_t(probe));
                b.resize(size_t(probe));
                Status s1 = pack.compressed ? read_packed_bytes(bin, pack, pl, at, probe, a.data())
                                            : bin.pread_full(a.data(), size_t(probe), pl.file_offset + at);
                Status s2 = shard.pread_full(b.data(), size_t(probe), run.offset + at);
                if (!s1.ok() || !s2.ok()) {
                    problems.push_back(where + (s1.ok() ? s2.message : s1.message));
                    break;
                }
                if (a != b) {
                    problems.push_back(where + "bytes differ from the checkpoint's (pack is stale)");
                    break;
                }
            }
        }
    }
    if (!problems.empty()) {
        std::string msg = "packed trunk " + dir.string() + " does not match the checkpoint " + ckpt.dir.string() + ":";
        for (const auto& p : problems) msg += "\n  " + p;
        msg += "\n(re-run `k3serve pack-trunk` for this checkpoint)";
        throw Error(ErrorKind::Checkpoint, msg);
    }
    return pack;
}

}  // namespace k3::io
