// safetensors shards and the tensor directory (docs/model.md "Checkpoint files"). A shard is an
// 8-byte little-endian header length N, N bytes of JSON, then raw data; every entry's data_offsets
// are relative to the data start (absolute = 8 + N + begin). The directory maps each tensor name to
// its shard, absolute byte offset, dtype and shape, and is validated before anything is served:
// every failure throws k3::Error(ErrorKind::Checkpoint) naming the file and tensor, expected vs
// actual.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weights/model_tensors.h"

namespace k3 {

// Headers larger than this are refused before allocating (the real K3 shards' headers are
// well under 1 MiB each).
inline constexpr int64_t kMaxSafetensorsHeader = 100ll << 20;

struct TensorInfo {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    int shard = -1;          // index into TensorDirectory::shards()
    int64_t offset = 0;      // absolute byte offset in the shard file
    int64_t nbytes = 0;
};

struct ShardInfo {
    std::filesystem::path path;
    int64_t file_size = 0;
    int64_t data_start = 0;  // 8 + header length
};

// Parses one shard's header from its first bytes (`bytes` may be the whole file or just the
// header; `file_size` is the real size on disk). Used directly by the fuzz test.
std::vector<TensorInfo> parse_safetensors_header(std::string_view bytes, int64_t file_size, int shard_index,
                                                 const std::string& file_name, int64_t* data_start);

class TensorDirectory {
public:
    // Lists *.safetensors in `model_dir` (sorted by name), reads and validates every header,
    // and checks model.safetensors.index.json against them when it exists.
    static TensorDirectory open(const std::filesystem::path& model_dir);

    const TensorInfo* find(std::string_view name) const;
    const std::vector<ShardInfo>& shards() const { return shards_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }

private:
    std::vector<ShardInfo> shards_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace k3
