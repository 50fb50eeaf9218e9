// safetensors shard headers and model.safetensors.index.json (weights/safetensors.h). Even
// first byte: the input is a shard's leading bytes (header length + JSON), parsed against a file
// size the input also picks. Odd: the input is the index of a directory holding one valid shard.
// Either way: a tensor directory or a k3::Error, and accepted tensors lie inside their file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.h"
#include "k3/error.h"
#include "weights/safetensors.h"

namespace {

std::filesystem::path model_dir() {
    static std::filesystem::path dir = [] {
        auto d = std::filesystem::temp_directory_path() / ("k3fuzz-st-" + std::to_string(getpid()));
        std::filesystem::create_directories(d);
        std::string header = R"({"a.weight":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
        uint64_t n = header.size();
        std::ofstream out(d / "model-00001-of-00001.safetensors", std::ios::binary);
        out.write(reinterpret_cast<const char*>(&n), 8);
        out << header << std::string(8, '\0');
        return d;
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        if (data[0] % 2 == 0) {
            int64_t file_size = int64_t(bytes.size()) + (data[0] >> 1) * 64;
            int64_t data_start = 0;
            auto tensors = k3::parse_safetensors_header(bytes, file_size, 0, "fuzz.safetensors", &data_start);
            for (const auto& t : tensors)
                K3_FUZZ_CHECK(t.offset >= data_start && t.nbytes >= 0 && t.offset + t.nbytes <= file_size,
                              "tensor outside its file");
        } else {
            std::ofstream(model_dir() / "model.safetensors.index.json", std::ios::binary | std::ios::trunc) << bytes;
            auto dir = k3::TensorDirectory::open(model_dir());
            K3_FUZZ_CHECK(dir.tensors().size() == 1, "index changed the tensors");
        }
    } catch (const k3::Error&) {
    }
    return 0;
}
